"""toolweave in the OpenAI Agents SDK: the plan tool over an agent's own tools, toolweave tools as function tools,
and function tools as toolweave tools.

- `plan_tool(agent.tools)`: a `FunctionTool` named `execute_tool_plan` whose steps call those tools.
- `function_tool(tool)` / `function_tools(tools)`: toolweave tools (function tools, pipelines, gated tools, MCP
  tools) as `FunctionTool`s.
- `toolweave_tool(function_tool)`: an Agents `FunctionTool` as a toolweave tool.

A toolweave tool that requires approval gets `needs_approval=True`: the run stops with an interruption that a
human approves or rejects (`state.approve(item)` / `state.reject(item)`) before the tool runs. The plan tool's
`needs_approval` is true for a plan whose steps call such tools, so the human answers once, before any step runs.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import pydantic_core

from toolweave.approval import ReviewHandler
from toolweave.exceptions import ControlFlowSignal
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
    whole_plan_tool,
)
from toolweave.plan import PlanTool, planning_instructions
from toolweave.tools import Tool, ToolCallContext, ToolDefinition, ToolMetadata, ToolResult, Toolset

try:
    from agents import FunctionTool, RunContextWrapper
    from agents.exceptions import ToolInputGuardrailTripwireTriggered, ToolOutputGuardrailTripwireTriggered
    from agents.tool import Tool as AgentsTool
    from agents.tool import set_function_tool_failure_error_function
    from agents.tool_context import ToolContext
    from agents.tool_guardrails import (
        ToolGuardrailFunctionOutput,
        ToolInputGuardrail,
        ToolInputGuardrailData,
        ToolOutputGuardrail,
        ToolOutputGuardrailData,
    )
except ImportError as _error:  # pragma: no cover - exercised in a subprocess without the extra
    raise missing_extra('openai_agents', 'openai-agents', _error) from _error

__all__ = ('function_tool', 'function_tools', 'plan_tool', 'planning_instructions', 'toolweave_tool')


@dataclass
class _ToolweaveFunctionTool(FunctionTool):
    """A `FunctionTool` made from a toolweave tool, which it keeps so a plan step calls the tool itself (with the
    context it maps), and a failure stays a failure instead of text."""

    toolweave_tool: Tool | None = field(default=None, kw_only=True)
    context_source: ContextSource[RunContextWrapper[Any]] = field(default=None, kw_only=True)


def function_tool(tool: Tool, *, context: ContextSource[RunContextWrapper[Any]] = None,
                  review_handler: ReviewHandler | None = None) -> FunctionTool:
    """A toolweave tool as an Agents `FunctionTool`: `Agent(..., tools=[function_tool(search)])`.

    The tool keeps its name, description and JSON schema (strict when the tool's schema is). A failure result
    reaches the model as `Error: <message>`, as in a toolweave agent; the run goes on.

    Args:
        tool: any toolweave tool.
        context: the hidden `ToolCallContext` of each call: fixed entries, or a function of the run context
            wrapper (`lambda ctx: {'tenant': ctx.context.tenant}`). It never reaches the model.
        review_handler: asked by gates the SDK cannot see before the call (a gated tool inside a pipeline, a
            tool that calls another).
    """
    definition = tool.definition
    gated = definition.metadata.requires_approval

    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        # The SDK invokes a tool with `needs_approval` only once a human approved the call.
        result = await call_tool(tool, arguments, call_context(context, ctx), adapter='function_tool',
                                 approved=gated, review_handler=review_handler)
        return result.text

    return _ToolweaveFunctionTool(
        name=definition.name,
        description=definition.description,
        params_json_schema=copy.deepcopy(dict(definition.parameters)),
        on_invoke_tool=invoke,
        strict_json_schema=definition.metadata.strict,
        needs_approval=gated,
        toolweave_tool=tool,
        context_source=context,
    )


def function_tools(tools: Any, *, context: ContextSource[RunContextWrapper[Any]] = None,
                   review_handler: ReviewHandler | None = None) -> list[AgentsTool]:
    """`function_tool` for each tool of `tools` (a `Toolset`, or anything `Toolset(...)` accepts)."""
    return [function_tool(tool, context=context, review_handler=review_handler) for tool in as_toolset(tools)]


class _AgentsTool(Tool):
    """An Agents `FunctionTool` as a toolweave tool, invoked with a tool context made from `run_context`.

    The SDK hands most tool errors to a formatter that turns them into text for the model; this calls a copy without
    one, so an error stays an error (a failure result) instead of passing for an output.
    """

    def __init__(self, tool: FunctionTool, run_context: RunContextWrapper[Any] | None) -> None:
        self.tool = tool
        self.run_context = run_context
        self._raising = set_function_tool_failure_error_function(replace(tool), None)
        self._definition = ToolDefinition(
            tool.name, tool.description, copy.deepcopy(tool.params_json_schema),
            # A callable `needs_approval` depends on arguments a plan only knows once earlier steps ran: ask.
            ToolMetadata(requires_approval=tool.needs_approval is not False, strict=tool.strict_json_schema),
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: Arguments, context: ToolCallContext) -> ToolResult:
        text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments or {}))
        tool_context = self._tool_context(text)
        agent: Any = tool_context.agent
        for guard in self.tool.tool_input_guardrails or ():
            refused = _verdict(guard, await guard.run(ToolInputGuardrailData(context=tool_context, agent=agent)))
            if refused is not None:
                return refused
        limit = self.tool.timeout_seconds
        with anyio.fail_after(limit) if limit is not None else nullcontext():
            value = await self._raising.on_invoke_tool(tool_context, text)
        for output_guard in self.tool.tool_output_guardrails or ():
            data = ToolOutputGuardrailData(context=tool_context, agent=agent, output=value)
            refused = _verdict(output_guard, await output_guard.run(data))
            if refused is not None:
                return refused
        output = value if isinstance(value, str) else pydantic_core.to_json(value, fallback=str).decode()
        return ToolResult.success(output, value)

    def _tool_context(self, arguments: str) -> ToolContext[Any]:
        name = self.tool.name
        outer = self.run_context
        if outer is None:
            return ToolContext(context=None, tool_name=name, tool_call_id=f'toolweave:{name}', tool_arguments=arguments)
        if not isinstance(outer, ToolContext):
            return ToolContext(context=outer.context, usage=outer.usage, tool_name=name,
                               tool_call_id=f'toolweave:{name}', tool_arguments=arguments)
        return ToolContext(context=outer.context, usage=outer.usage, tool_name=name,
                           tool_call_id=f'{outer.tool_call_id}:{name}', tool_arguments=arguments, agent=outer.agent,
                           run_config=outer.run_config)


class _GuardrailTripped(ControlFlowSignal):
    """Carries an Agents guardrail tripwire through toolweave's layers (a plan, its other steps) to the SDK, which
    stops the run with it, as it does for a call the model made directly."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _verdict(guard: ToolInputGuardrail[Any] | ToolOutputGuardrail[Any],
             output: ToolGuardrailFunctionOutput) -> ToolResult | None:
    """`None` when the guardrail allows the call; the failure the model reads when it rejects it."""
    behavior = output.behavior
    if behavior['type'] == 'reject_content':
        return ToolResult.failure(behavior['message'])
    if behavior['type'] == 'raise_exception':
        if isinstance(guard, ToolInputGuardrail):
            raise _GuardrailTripped(ToolInputGuardrailTripwireTriggered(guard, output))
        raise _GuardrailTripped(ToolOutputGuardrailTripwireTriggered(guard, output))
    return None


def toolweave_tool(tool: FunctionTool, *, run_context: RunContextWrapper[Any] | None = None) -> Tool:
    """An Agents `FunctionTool` as a toolweave tool, for a toolweave agent, plan or pipeline.

    Calls go through the tool's own invoker (its argument validation and context injection) and its guardrails, with
    a tool context built from `run_context` (`None`: an empty one). Errors and guardrail rejections become failure
    results; a guardrail tripwire stops the run. A tool made by `function_tool`
    gives back the toolweave tool it was made from. A tool with `needs_approval` requires approval.
    """
    if isinstance(tool, _ToolweaveFunctionTool) and tool.toolweave_tool is not None:
        return tool.toolweave_tool
    if not isinstance(tool, FunctionTool):
        raise TypeError(f'toolweave_tool needs an Agents FunctionTool, got {type(tool).__name__}: {tool!r}. Hosted '
                        'tools (web search, file search, code interpreter) run on the provider side and cannot be '
                        'called from toolweave.')
    return _AgentsTool(tool, run_context)


async def _step_tools(tools: Sequence[AgentsTool], run_context: RunContextWrapper[Any]) -> Toolset:
    """The tools a plan step may call: the enabled function tools (hosted tools run on the provider side)."""
    chosen: list[Tool] = []
    for tool in tools:
        if not isinstance(tool, FunctionTool):
            continue
        if not await _enabled(tool, run_context):
            continue
        if isinstance(tool, _ToolweaveFunctionTool) and tool.toolweave_tool is not None:
            chosen.append(BoundContext(tool.toolweave_tool, call_context(tool.context_source, run_context)))
        else:
            chosen.append(_AgentsTool(tool, run_context))
    return Toolset(chosen)


async def _enabled(tool: FunctionTool, run_context: RunContextWrapper[Any]) -> bool:
    enabled = tool.is_enabled
    if isinstance(enabled, bool):
        return enabled
    if not isinstance(run_context, ToolContext) or run_context.agent is None:
        return True  # the SDK only decides with an agent at hand; outside a run every tool is listed
    answer = enabled(run_context, run_context.agent)
    return bool(await answer) if inspect.isawaitable(answer) else bool(answer)


def plan_tool(
    tools: Iterable[AgentsTool],
    *,
    name: str = 'execute_tool_plan',
    review_handler: ReviewHandler | None = None,
    concurrency: int | None = None,
    step_timeout: float | None = None,
    timeout: float | None = None,
) -> FunctionTool:
    """`execute_tool_plan` over an agent's tools: `agent.clone(tools=[*agent.tools, plan_tool(agent.tools)])`.

    The model sends one plan of many calls; independent steps run in parallel, each as soon as the steps it refers
    to are done, and only the outputs the model asked for come back. Steps call the function tools the way the SDK
    does (their invokers, with the run's context). Add `planning_instructions()` to the agent's instructions to
    teach the model the plan language.

    A plan whose steps call tools that need approval needs approval itself: the human answers once, for the whole
    plan, before any step runs; their yes approves those steps of that plan, and nothing else.

    Args:
        tools: the tools plans may call (function tools, with their guardrails; hosted tools are left out). Read at
            call time, so a list you extend later is seen.
        name: the plan tool's name.
        review_handler: asked by gates the SDK cannot see before the plan runs (a gated tool inside a pipeline, a
            tool that calls another, a sub-agent); without one, the reviewers installed around the run, else the
            call cannot run.
        concurrency: most steps running at once (`None`: no limit).
        step_timeout: seconds one step may take.
        timeout: seconds a whole plan may take.
    """
    pool = tools if isinstance(tools, list) else list(tools)
    definition = plan_definition(name, concurrency, step_timeout, timeout)

    async def planner(run_context: RunContextWrapper[Any]) -> PlanTool:
        return whole_plan_tool(await _step_tools(pool, run_context), name=name, concurrency=concurrency,
                               step_timeout=step_timeout, timeout=timeout)

    async def needs_approval(run_context: RunContextWrapper[Any], arguments: dict[str, Any], call_id: str) -> bool:
        return await plan_review(await planner(run_context), arguments) is not None

    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        plans = await planner(ctx)
        approved = await plan_review(plans, arguments)  # the SDK asked; the human said yes to this plan
        try:
            result = await call_tool(plans, arguments, ToolCallContext.EMPTY, adapter='plan_tool',
                                     plan=approved, review_handler=review_handler)
        except _GuardrailTripped as tripped:
            raise tripped.error from None
        return result.text

    return FunctionTool(
        name=definition.name,
        description=definition.description,
        params_json_schema=copy.deepcopy(dict(definition.parameters)),
        on_invoke_tool=invoke,
        strict_json_schema=True,
        needs_approval=needs_approval,
    )
