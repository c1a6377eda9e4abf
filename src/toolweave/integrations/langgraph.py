"""toolweave in LangChain and LangGraph: the plan tool over a graph's tools, toolweave tools as LangChain tools, and
LangChain tools as toolweave tools.

- `plan_tool(tools)`: a LangChain tool named `execute_tool_plan` whose steps call `tools`; put it in the same
  `ToolNode` (or prebuilt agent) as they are.
- `langchain_tool(tool)` / `langchain_tools(tools)`: toolweave tools (function tools, pipelines, gated tools, MCP
  tools) as LangChain tools.
- `toolweave_tool(tool)`: a LangChain tool as a toolweave tool.

A toolweave tool that requires approval calls LangGraph's `interrupt` before it runs: the graph stops (it needs a
checkpointer) with `{'tool', 'arguments', 'description'}` and goes on with `Command(resume={'approved': True})`,
`{'approved': False, 'reason': '...'}` or, to run with other arguments, `{'approved': True, 'arguments': {...}}`.
A plan whose steps call such tools interrupts once, before any step runs, listing those steps under `'steps'`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import Any

import anyio
import pydantic_core

from toolweave.approval import ReviewHandler
from toolweave.integrations._common import (
    Arguments,
    BoundContext,
    ContextSource,
    as_toolset,
    call_context,
    call_tool,
    missing_extra,
    plan_definition,
    plan_review,
    review_payload,
    whole_plan_tool,
)
from toolweave.plan import planning_instructions
from toolweave.tools import Tool, ToolCallContext, ToolDefinition, ToolResult, Toolset

try:
    from typing import NotRequired

    from langchain_core.messages import ToolMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool, ToolException
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.errors import GraphBubbleUp
    from langgraph.types import interrupt
    from typing_extensions import TypedDict
except ImportError as _error:  # pragma: no cover - exercised in a subprocess without the extra
    raise missing_extra('langgraph', 'langgraph', _error) from _error

__all__ = ('ReviewAnswer', 'langchain_tool', 'langchain_tools', 'plan_tool', 'planning_instructions', 'toolweave_tool')


class ReviewAnswer(TypedDict):
    """The resume value of an approval interrupt: `Command(resume={'approved': True})`. LangGraph validates it, and
    a value that does not fit can be sent again."""

    approved: bool
    reason: NotRequired[str]
    """Why the call was rejected; the model reads it."""
    arguments: NotRequired[dict[str, Any]]
    """Run the tool with these arguments instead (a single gated tool, not a plan)."""


_Body = Callable[..., Awaitable[str]]
"""What a LangChain tool made here runs: `body(config, **arguments)`."""


class _ToolweaveLangChainTool(BaseTool):
    """A LangChain tool made here: it runs `body`, and keeps the toolweave tool it was made from (if any) so a plan
    step calls that tool itself, with the context it maps.

    LangChain hands the run's config to the `_run` / `_arun` parameter annotated `RunnableConfig`; it is named so
    that no tool argument takes its place (a tool may well have an argument called `config`)."""

    body: _Body
    toolweave_tool: Any = None
    context_source: Any = None

    def _run(self, _toolweave_config: RunnableConfig, **arguments: Any) -> str:
        return anyio.run(partial(self.body, _toolweave_config, **arguments))

    async def _arun(self, _toolweave_config: RunnableConfig, **arguments: Any) -> str:
        return await self.body(_toolweave_config, **arguments)


def _ask(request: dict[str, Any]) -> ReviewAnswer:
    """Stop the graph for a human's answer (the first time), or the answer it resumed with (validated by LangGraph)."""
    return interrupt(request, response_schema=ReviewAnswer)


def _rejection(answer: ReviewAnswer, what: str) -> ToolException:
    reason = answer.get('reason')
    return ToolException(f'Rejected by reviewer: {what}' + (f' ({reason})' if reason else ''))


def _returned(result: ToolResult) -> str:
    """The tool message's content: the output a toolweave agent would show; a failure becomes an error message
    (`status='error'`) the model reads. The Python value stays out of the message: graph state is checkpointed, and a
    value need not serialize."""
    if result.error is not None:
        raise ToolException(result.error)
    return result.output


def _langchain_tool(definition: ToolDefinition, body: _Body, tool: Tool | None = None,
                    context: ContextSource[RunnableConfig] = None) -> BaseTool:
    return _ToolweaveLangChainTool(
        name=definition.name,
        description=definition.description,
        args_schema=copy.deepcopy(dict(definition.parameters)),
        body=body,
        handle_tool_error=True,
        toolweave_tool=tool,
        context_source=context,
    )


def langchain_tool(tool: Tool, *, context: ContextSource[RunnableConfig] = None,
                   review_handler: ReviewHandler | None = None) -> BaseTool:
    """A toolweave tool as a LangChain tool, for a `ToolNode`, a prebuilt agent or `model.bind_tools`.

    The tool keeps its name, description and JSON schema. The tool message's content is the output a toolweave agent
    would show; a failure is an error message (`status='error'`), not an exception.

    Args:
        tool: any toolweave tool.
        context: the hidden `ToolCallContext` of each call: fixed entries, or a function of the `RunnableConfig`
            (`lambda config: {'tenant': config['configurable']['tenant']}`). It never reaches the model.
        review_handler: asked by gates LangGraph cannot see before the call (a gated tool inside a pipeline, a
            tool that calls another).
    """
    definition = tool.definition
    name = definition.name

    async def run(config: RunnableConfig, /, **arguments: Any) -> str:
        approved = False
        if definition.metadata.requires_approval:
            shown = json.dumps(arguments, default=str)
            answer = _ask({'tool': name, 'arguments': arguments, 'description': f'{name}: {shown}'})
            if not answer['approved']:
                raise _rejection(answer, f'{name}: {shown}')
            arguments = answer.get('arguments', arguments)  # the call they approved: as it was, or as they edited it
            approved = True
        result = await call_tool(tool, arguments, call_context(context, config), adapter='langchain_tool',
                                 approved=approved, review_handler=review_handler)
        return _returned(result)

    return _langchain_tool(definition, run, tool, context)


def langchain_tools(tools: Any, *, context: ContextSource[RunnableConfig] = None,
                    review_handler: ReviewHandler | None = None) -> list[BaseTool]:
    """`langchain_tool` for each tool of `tools` (a `Toolset`, or anything `Toolset(...)` accepts)."""
    return [langchain_tool(tool, context=context, review_handler=review_handler) for tool in as_toolset(tools)]


class _LangChainTool(Tool):
    """A LangChain tool as a toolweave tool, invoked with a tool call so an error it handles itself (a tool message
    with `status='error'`) stays an error."""

    def __init__(self, tool: BaseTool, config: RunnableConfig | None) -> None:
        self.tool = tool
        self.config = config
        parameters = convert_to_openai_tool(tool)['function'].get('parameters') or {'type': 'object', 'properties': {}}
        self._definition = ToolDefinition(tool.name, tool.description or '', parameters)
        self._injected = sorted(_fields(tool.get_input_schema()) - _fields(tool.tool_call_schema))
        """Arguments a `ToolNode` injects (`ToolRuntime`, `InjectedState`...), which no model and no plan gives."""

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: Arguments, context: ToolCallContext) -> ToolResult:
        if isinstance(arguments, str):
            args = json.loads(arguments) if arguments.strip() else {}
        else:
            args = dict(arguments or {})
        if self._injected:
            injected = ', '.join(self._injected)
            return ToolResult.failure(
                f'Tool {self.tool.name!r} needs arguments that a LangGraph ToolNode injects ({injected}), which a plan '
                f'step cannot give. Call {self.tool.name!r} directly instead of in a plan.'
            )
        call = {'type': 'tool_call', 'name': self.tool.name, 'args': args, 'id': f'toolweave:{self.tool.name}'}
        try:
            message = await self.tool.ainvoke(call, config=self.config)
        except GraphBubbleUp:
            return ToolResult.failure(
                f'Tool {self.tool.name!r} stopped the graph to wait for input (a LangGraph interrupt), which a plan '
                f'step cannot do. Call {self.tool.name!r} directly instead of in a plan.'
            )
        if not isinstance(message, ToolMessage):  # a tool that returns a Command or other graph update
            return ToolResult.success(_text(message), message)
        text = _text(message.content)
        if message.status == 'error':
            return ToolResult.failure(text)
        return ToolResult.success(text, message.artifact if message.artifact is not None else message.content)


def _fields(schema: Any) -> set[str]:
    """The argument names of a LangChain tool schema: a JSON schema dict or a pydantic model class."""
    if isinstance(schema, dict):
        return set(schema.get('properties') or {})
    return set(getattr(schema, 'model_fields', {}))


def _text(content: Any) -> str:
    return content if isinstance(content, str) else pydantic_core.to_json(content, fallback=str).decode()


def toolweave_tool(tool: BaseTool, *, config: RunnableConfig | None = None) -> Tool:
    """A LangChain tool as a toolweave tool, for a toolweave agent, plan or pipeline.

    Calls go through the tool's `ainvoke` with `config` (callbacks, tags, configurable values); an exception and an
    error the tool handled itself become failure results. A tool made by `langchain_tool` gives back the toolweave
    tool it was made from.
    """
    if isinstance(tool, _ToolweaveLangChainTool) and isinstance(tool.toolweave_tool, Tool):
        return tool.toolweave_tool
    if not isinstance(tool, BaseTool):
        raise TypeError(f'toolweave_tool needs a LangChain BaseTool, got {type(tool).__name__}: {tool!r}. Make one '
                        'with `langchain_core.tools.tool` or `StructuredTool.from_function`.')
    return _LangChainTool(tool, config)


def _step_tool(tool: BaseTool, config: RunnableConfig) -> Tool:
    """A plan step's tool: a converted toolweave tool itself, with the context it maps from `config` (so a failure
    stays a failure), or any other LangChain tool as `toolweave_tool` gives it."""
    if isinstance(tool, _ToolweaveLangChainTool) and isinstance(tool.toolweave_tool, Tool):
        return BoundContext(tool.toolweave_tool, call_context(tool.context_source, config))
    return toolweave_tool(tool, config=config)


def plan_tool(
    tools: Iterable[BaseTool],
    *,
    name: str = 'execute_tool_plan',
    review_handler: ReviewHandler | None = None,
    concurrency: int | None = None,
    step_timeout: float | None = None,
    timeout: float | None = None,
) -> BaseTool:
    """`execute_tool_plan` over LangChain tools: `ToolNode([*tools, plan_tool(tools)])`.

    The model sends one plan of many calls; independent steps run in parallel, each as soon as the steps it refers
    to are done, and only the outputs the model asked for come back. Steps call the tools with the graph's config.
    Add `planning_instructions()` to the system prompt to teach the model the plan language.

    A plan whose steps call gated toolweave tools interrupts once, before any step runs, with
    `{'tool', 'arguments', 'steps', 'description'}`; `{'approved': True}` approves those steps.

    Args:
        tools: the tools plans may call (read at call time, so a list you extend later is seen).
        name: the plan tool's name.
        review_handler: asked by gates LangGraph cannot see before the plan runs (a gated tool inside a pipeline, a
            tool that calls another, a sub-agent); without one, the reviewers installed around the run, else the
            call cannot run.
        concurrency: most steps running at once (`None`: no limit).
        step_timeout: seconds one step may take.
        timeout: seconds a whole plan may take.
    """
    pool = tools if isinstance(tools, list) else list(tools)
    definition = plan_definition(name, concurrency, step_timeout, timeout)

    async def run(config: RunnableConfig, /, **arguments: Any) -> str:
        steps = Toolset([_step_tool(tool, config) for tool in pool])
        planner = whole_plan_tool(steps, name=name, concurrency=concurrency, step_timeout=step_timeout, timeout=timeout)
        review = await plan_review(planner, arguments)
        if review is not None:
            answer = _ask({'tool': name, 'arguments': arguments, **review_payload(review)})
            if not answer['approved']:
                raise _rejection(answer, 'the plan did not run')
        result = await call_tool(planner, arguments, ToolCallContext.EMPTY, adapter='plan_tool',
                                 plan=review, review_handler=review_handler)
        return _returned(result)

    return _langchain_tool(definition, run)
