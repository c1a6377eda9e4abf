"""toolweave in pydantic-ai: the plan tool over an agent's own tools, toolweave tools as a pydantic-ai toolset, and
pydantic-ai tools as toolweave tools.

- `ToolPlanning()`: a capability that adds `execute_tool_plan` over every tool of the agent it is given to.
- `PlanToolset(toolset)`: the same as a wrapper toolset, over one toolset.
- `ToolweaveToolset(tools)`: toolweave tools (function tools, pipelines, gated tools, MCP tools) as a toolset.
- `await toolweave_tools(toolset, ctx)`: a pydantic-ai toolset's tools as toolweave tools, bound to a run context.

A toolweave tool that requires approval is a deferred tool (`kind='unapproved'`): the run stops with
`DeferredToolRequests` and goes on with the `DeferredToolResults` a human gave. A plan whose steps call such tools
asks once, for the plan, before any step runs; the request's metadata lists the gated steps.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence
from contextlib import nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

import anyio
import pydantic_core
from pydantic_core import core_schema

from toolweave.approval import ReviewHandler
from toolweave.exceptions import ControlFlowSignal, ToolConfigurationError, UserError
from toolweave.integrations._common import (
    Arguments,
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
from toolweave.tools import Tool, ToolCallContext, ToolDefinition, ToolMetadata, ToolResult

try:
    from pydantic import ValidationError
    from pydantic_ai import RunContext
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry, ToolFailed
    from pydantic_ai.messages import InstructionPart, ToolReturn
    from pydantic_ai.tools import AgentDepsT
    from pydantic_ai.tools import ToolDefinition as PydanticToolDefinition
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset
except ImportError as _error:  # pragma: no cover - exercised in a subprocess without the extra
    raise missing_extra('pydantic_ai', 'pydantic-ai', _error) from _error

__all__ = ('PlanToolset', 'ToolPlanning', 'ToolweaveToolset', 'toolweave_tools')

_ARGUMENTS = pydantic_core.SchemaValidator(core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()))
"""A JSON object; the toolweave tool validates its own arguments and tells the model every problem at once."""


_delegated: ContextVar[str | None] = ContextVar('toolweave_pydantic_ai_delegated', default=None)
"""The tool a plan step is calling through the pydantic-ai toolset it came from: when that toolset turns out to be
a `ToolweaveToolset`, the step's own `Tool.call` (review, span, metrics) stands for the tool's, which then only
runs its body, as a wrapper's delegate does: each step is reviewed, traced and recorded once."""


async def _execute(tool: Tool, arguments: Arguments, context: ToolCallContext) -> ToolResult:
    """`tool.execute`, an exception becoming a failure result as `Tool.call` makes it."""
    try:
        return await tool.execute(arguments, context)
    except (ToolConfigurationError, ControlFlowSignal):
        raise
    except Exception as exc:
        return ToolResult.from_exception(exc)


def _returned(result: ToolResult) -> str:
    """What pydantic-ai gives the model: the output a toolweave agent would show, or a failure it can act on."""
    if result.error is not None:
        raise ToolFailed(result.error)
    return result.output


# --- toolweave tools as a pydantic-ai toolset -------------------------------------------------------------------


class ToolweaveToolset(AbstractToolset[AgentDepsT]):
    """toolweave tools as a pydantic-ai toolset: `Agent(model, toolsets=[ToolweaveToolset([search, fetch])])`.

    Each tool keeps its name, description and JSON schema; a failure result reaches the model as a failed tool
    return (`ToolFailed`), never as an exception of the run. A tool that requires approval becomes a deferred tool
    that pydantic-ai asks a human about; once approved, toolweave's gate of that call (that tool, those arguments)
    passes, and only of that call.

    Args:
        tools: a `Toolset` (kept live: an `McpToolset` entered later is seen), or anything `Toolset(...)` accepts.
        context: the hidden `ToolCallContext` of each call: fixed entries, or a function of the `RunContext`
            (for example `lambda ctx: {'tenant': ctx.deps.tenant}`). It never reaches the model.
        review_handler: asked by gates pydantic-ai cannot see before a call (a gated tool inside a pipeline, a tool
            that calls another, a sub-agent); without one, the reviewers installed around the run, else the call
            cannot run.
        max_retries: how many times pydantic-ai lets the model retry a call with invalid arguments.
        id: the toolset's id, for durable execution.
    """

    def __init__(self, tools: Any, *, context: ContextSource[RunContext[AgentDepsT]] = None,
                 review_handler: ReviewHandler | None = None, max_retries: int = 1, id: str | None = None) -> None:
        self.tools = as_toolset(tools)
        self.context = context
        self.review_handler = review_handler
        self.max_retries = max_retries
        self._id = id

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        return {tool.name: ToolsetTool(toolset=self, tool_def=_pydantic_definition(tool.definition),
                                       max_retries=self.max_retries, args_validator=_ARGUMENTS)
                for tool in self.tools}

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT],
                        tool: ToolsetTool[AgentDepsT]) -> Any:
        found = self.tools.get(name)
        gated = found.definition.metadata.requires_approval
        if gated and not ctx.tool_call_approved:
            raise ApprovalRequired({'tool': name, 'arguments': tool_args})
        context = call_context(self.context, ctx)
        if _delegated.get() == name:  # a plan step calling this tool: its call (review, span, record) is running
            _delegated.set(None)
            return _returned(await _execute(found, tool_args, context))
        result = await call_tool(found, tool_args, context, adapter='ToolweaveToolset', approved=gated,
                                 review_handler=self.review_handler)
        return _returned(result)

    def __repr__(self) -> str:
        return f'ToolweaveToolset({self.tools.names!r})'


def _pydantic_definition(definition: ToolDefinition) -> PydanticToolDefinition:
    return PydanticToolDefinition(
        name=definition.name,
        description=definition.description or None,
        parameters_json_schema=copy.deepcopy(dict(definition.parameters)),
        strict=True if definition.metadata.strict else None,
        kind='unapproved' if definition.metadata.requires_approval else 'function',
    )


# --- pydantic-ai tools as toolweave tools -----------------------------------------------------------------------


class _PydanticAITool(Tool):
    """One tool of a pydantic-ai toolset, called the way pydantic-ai calls it (arguments validated by its
    validator, then `toolset.call_tool`) with the run context of the current run."""

    def __init__(self, toolset: AbstractToolset[Any], tool: ToolsetTool[Any], ctx: RunContext[Any]) -> None:
        self.toolset = toolset
        self.tool = tool
        self.ctx = ctx
        source = tool.tool_def
        self._definition = ToolDefinition(
            source.name, source.description or '', source.parameters_json_schema,
            ToolMetadata(requires_approval=source.kind == 'unapproved', strict=bool(source.strict)),
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: Arguments, context: ToolCallContext) -> ToolResult:
        name = self._definition.name
        token = _delegated.set(name)  # a toolweave tool behind it runs its body only: this call is its call
        try:
            value = await self._call(arguments)
        except ValidationError as exc:
            problems = '; '.join(f'{".".join(map(str, e["loc"])) or "arguments"}: {e["msg"]}' for e in exc.errors())
            return ToolResult.failure(f'Invalid arguments for tool {name!r}: {problems}. Fix them and call again.')
        except (ModelRetry, ToolFailed) as exc:
            return ToolResult.failure(exc.message)
        except (ApprovalRequired, CallDeferred):
            return ToolResult.failure(
                f'Tool {name!r} asked to be approved or completed outside the run when it was called, which a plan '
                f'step cannot wait for. Call {name!r} directly instead of in a plan.'
            )
        finally:
            _delegated.reset(token)
        if isinstance(value, ToolReturn):
            value = value.return_value
        text = value if isinstance(value, str) else pydantic_core.to_json(value, fallback=str).decode()
        return ToolResult.success(text, value)

    async def _call(self, arguments: Arguments) -> Any:
        tool = self.tool
        # A deferred tool only gets here once toolweave's gate passed: the plan it is in was approved.
        ctx = replace(self.ctx, tool_name=tool.tool_def.name, retry=0, max_retries=tool.max_retries,
                      tool_call_approved=tool.tool_def.kind == 'unapproved')
        validator = tool.args_validator
        args = (validator.validate_json(arguments or '{}', context=ctx.validation_context) if isinstance(arguments, str)
                else validator.validate_python(dict(arguments or {}), context=ctx.validation_context))
        if tool.args_validator_func is not None:
            checked = tool.args_validator_func(ctx, **args)
            if inspect.isawaitable(checked):
                await checked
        timeout = tool.tool_def.timeout
        with anyio.fail_after(timeout) if timeout is not None else nullcontext():
            return await self.toolset.call_tool(tool.tool_def.name, args, ctx, tool)


async def toolweave_tools(toolset: AbstractToolset[Any], ctx: RunContext[Any]) -> list[Tool]:
    """The function tools of a pydantic-ai toolset as toolweave tools, called with `ctx` (the run context they
    get, with each call's tool name set). Output and external tools are left out: no call of theirs returns a result.

    Arguments go through the tool's own validator; `ModelRetry`, `ToolFailed` and invalid arguments become failure
    results. A tool that requires approval keeps the flag (toolweave's gate asks before it runs).
    """
    tools = await toolset.get_tools(ctx)
    return [_PydanticAITool(toolset, tool, ctx) for tool in tools.values()
            if tool.tool_def.kind in ('function', 'unapproved')]


# --- the plan tool over a toolset -------------------------------------------------------------------------------


@dataclass
class PlanToolset(WrapperToolset[AgentDepsT]):
    """A toolset that adds `execute_tool_plan` over the tools of the toolset it wraps, which stay available too.

    The model sends one plan of many calls; independent steps run in parallel, each as soon as the steps it refers
    to are done, and only the outputs the model asked for come back. Steps call the wrapped tools the way the agent
    would (their validators, run context, errors). A plan with steps that require approval is deferred once, before
    anything runs; the request's metadata lists those steps (`{'steps': [{'id', 'tool', 'arguments'}]}`).
    """

    name: str = 'execute_tool_plan'
    """The plan tool's name."""
    review_handler: ReviewHandler | None = None
    """Asked by gates pydantic-ai cannot see before the plan runs (a gated tool inside a pipeline, a tool that calls
    another, a sub-agent): the human's approval covers only the plan's own gated steps."""
    concurrency: int | None = None
    """Most steps running at once (`None`: no limit)."""
    step_timeout: float | None = None
    """Seconds one step may take."""
    timeout: float | None = None
    """Seconds a whole plan may take."""
    max_retries: int = 1
    """How many times pydantic-ai lets the model resend plan arguments that are not a JSON object."""

    def __post_init__(self) -> None:
        self._definition = plan_definition(self.name, self.concurrency, self.step_timeout, self.timeout)

    async def get_instructions(self, ctx: RunContext[AgentDepsT]) -> Sequence[str | InstructionPart]:
        inner = await super().get_instructions(ctx)
        parts: list[str | InstructionPart] = [InstructionPart(planning_instructions(self.name))]
        if isinstance(inner, str | InstructionPart):
            parts.append(inner)
        elif inner is not None:
            parts.extend(inner)
        return parts

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        tools = dict(await super().get_tools(ctx))
        if self.name in tools:
            raise UserError(f'Tool name conflict: the wrapped toolset {self.wrapped.label} already has a tool named '
                            f'{self.name!r}. Give the plan tool another name: `PlanToolset(toolset, name=...)`.')
        definition = self._definition
        tools[self.name] = ToolsetTool(
            toolset=self,
            tool_def=PydanticToolDefinition(name=self.name, description=definition.description,
                                            parameters_json_schema=copy.deepcopy(dict(definition.parameters)),
                                            strict=True),
            max_retries=self.max_retries,
            args_validator=_ARGUMENTS,
        )
        return tools

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT],
                        tool: ToolsetTool[AgentDepsT]) -> Any:
        if name != self.name:
            return await super().call_tool(name, tool_args, ctx, tool)
        steps = as_toolset(await toolweave_tools(self.wrapped, ctx))
        planner = whole_plan_tool(steps, name=self.name, concurrency=self.concurrency, step_timeout=self.step_timeout,
                                  timeout=self.timeout)
        review = await plan_review(planner, tool_args)
        if review is not None and not ctx.tool_call_approved:
            raise ApprovalRequired(review_payload(review))
        result = await call_tool(planner, tool_args, ToolCallContext.EMPTY, adapter='PlanToolset',
                                 plan=review, review_handler=self.review_handler)
        return _returned(result)


@dataclass
class ToolPlanning(AbstractCapability[AgentDepsT]):
    """Adds `execute_tool_plan` over every tool of the agent: `Agent(model, capabilities=[ToolPlanning()])`.

    Each run wraps the agent's assembled toolset (its `tools=`, `toolsets=` and capabilities' tools) in a
    `PlanToolset` with these settings, which also adds the planning instructions.
    """

    name: str = 'execute_tool_plan'
    review_handler: ReviewHandler | None = None
    concurrency: int | None = None
    step_timeout: float | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        plan_definition(self.name, self.concurrency, self.step_timeout, self.timeout)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a review handler: not buildable from a spec

    def get_wrapper_toolset(self, toolset: AbstractToolset[AgentDepsT]) -> AbstractToolset[AgentDepsT] | None:
        return PlanToolset(toolset, name=self.name, review_handler=self.review_handler,
                           concurrency=self.concurrency, step_timeout=self.step_timeout, timeout=self.timeout)
