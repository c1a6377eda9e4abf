"""What the framework adapters share: the install hint of an extra, the call context a framework run gives a
toolweave tool, and approval.

Approval works the same way in every framework: the framework asks its own human (pydantic-ai deferred tools,
OpenAI Agents `needs_approval`, LangGraph `interrupt`) once, before the call, and a yes stands for toolweave's
gate of the tools it named. A plan asks once for all of its gated steps, before any step runs, so an approval
never re-runs half a plan. A gate the framework could not see before the call (a gated step inside a pipeline)
asks the adapter's `review_handler`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from toolweave.approval import ReviewDecision, ReviewHandler, ReviewRequest, use_review_handler
from toolweave.exceptions import PlanValidationError, ToolConfigurationError, UserError
from toolweave.plan import PlanTool, parse_plan, validate_plan
from toolweave.tools import DelegatingTool, Tool, ToolCallContext, ToolDefinition, ToolResult, Toolset

__all__ = (
    'Arguments',
    'BoundContext',
    'ContextSource',
    'GatedStep',
    'as_toolset',
    'call_context',
    'call_tool',
    'describe_steps',
    'gated_steps',
    'missing_extra',
    'plan_definition',
)

FrameworkContextT = TypeVar('FrameworkContextT')

Arguments: TypeAlias = str | Mapping[str, Any] | None
"""Tool arguments as a framework hands them over: a JSON text or a mapping."""

ContextSource: TypeAlias = Mapping[str, Any] | Callable[[FrameworkContextT], Mapping[str, Any] | None] | None
"""Where a toolweave tool's hidden `ToolCallContext` comes from inside a framework run: fixed entries, or a function
of the framework's own run context (pydantic-ai `RunContext`, Agents `RunContextWrapper`, LangChain
`RunnableConfig`). It never reaches a schema or a model."""


def missing_extra(module: str, extra: str, error: ImportError) -> ImportError:
    """The error for importing an adapter whose framework is not installed, with the command that fixes it."""
    package = (error.name or '?').split('.')[0]
    return ImportError(
        f'`toolweave.integrations.{module}` needs the `{extra}` extra, which is not installed (missing module '
        f'{package!r}). Install it with: pip install "toolweave[{extra}]"'
    )


def plan_definition(name: str, concurrency: int | None, step_timeout: float | None,
                    timeout: float | None) -> ToolDefinition:
    """The plan tool's definition, after checking the options when the adapter is built: a bad value is the
    developer's to fix, not text for a model at call time."""
    return PlanTool([], name=name, concurrency=concurrency, step_timeout=step_timeout, timeout=timeout).definition


def as_toolset(tools: Any) -> Toolset:
    """`tools` as a Toolset. A Toolset is kept as it is (not copied), so an `McpToolset` entered later, or tools
    added later, are seen at call time."""
    return tools if isinstance(tools, Toolset) else Toolset(tools)


def call_context(source: ContextSource[FrameworkContextT], framework_context: FrameworkContextT) -> ToolCallContext:
    """The `ToolCallContext` of one call: `source`'s entries, or what it returns for the framework's context."""
    if source is None:
        return ToolCallContext.EMPTY
    entries = source(framework_context) if callable(source) else source
    if entries is None:
        return ToolCallContext.EMPTY
    if not isinstance(entries, Mapping):
        raise UserError(
            f'`context=` must be a mapping or a function returning one (or None), got {type(entries).__name__}: '
            f'{entries!r}. For example `context=lambda ctx: {{"tenant": ctx.deps.tenant}}`.'
        )
    return ToolCallContext.of(entries)


class BoundContext(DelegatingTool):
    """A toolweave tool run with the context its adapter gave it from the framework's run context, whatever
    context the caller passes: a plan step calls a converted tool with that tool's own `context=`."""

    def __init__(self, tool: Tool, context: ToolCallContext) -> None:
        super().__init__(tool)
        self.context = context

    async def execute(self, arguments: Arguments, context: ToolCallContext) -> ToolResult:
        return await self.delegate.execute(arguments, self.context)


@dataclass(frozen=True, slots=True)
class GatedStep:
    """A plan step whose tool requires approval, as a reviewer sees it before the plan runs."""

    id: str
    tool: str
    arguments: Any
    """The step's arguments as the model wrote them (references such as `"$ref:a.x"` not resolved yet)."""

    def as_dict(self) -> dict[str, Any]:
        return {'id': self.id, 'tool': self.tool, 'arguments': self.arguments}


def _plan_data(arguments: Arguments) -> str | Mapping[str, Any]:
    """The plan tool's arguments in the form the plan parser reads."""
    return {} if arguments is None else arguments


def gated_steps(arguments: Arguments, tools: Toolset) -> tuple[GatedStep, ...]:
    """The steps of a plan that will ask for approval; none when the plan cannot run (it then runs nothing and the
    model gets the list of problems instead)."""
    try:
        plan = parse_plan(_plan_data(arguments))
    except PlanValidationError:
        return ()
    if validate_plan(plan, tools):
        return ()
    return tuple(GatedStep(step.id, step.tool, step.arguments) for step in plan.steps
                 if tools.get(step.tool).definition.metadata.requires_approval)


def describe_steps(steps: Iterable[GatedStep]) -> str:
    """One line per gated step, for the text a reviewer reads."""
    return '\n'.join(f'{s.id}: {s.tool} {json.dumps(s.arguments, default=str)}' for s in steps)


class _FrameworkApproval:
    """A `ReviewHandler` standing for what the framework's human already approved: a review of an approved tool is
    approved; any other review goes to `fallback`, and without one it is a configuration error."""

    def __init__(self, approved: frozenset[str], fallback: ReviewHandler | None, adapter: str) -> None:
        self.approved = approved
        self.fallback = fallback
        self.adapter = adapter

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        if request.tool_name in self.approved:
            return ReviewDecision.approve()
        if self.fallback is None:
            raise ToolConfigurationError(
                f'Tool {request.tool_name!r} asked for approval while it ran, where the framework could not ask '
                f'before the call (a gated tool inside a pipeline, for example). Pass `review_handler=` to '
                f'`{self.adapter}`, or gate the outer tool with `requires_approval` so the framework asks first.'
            )
        return await self.fallback.review(request)


async def call_tool(tool: Tool, arguments: Arguments, context: ToolCallContext, *, adapter: str,
                    approved: Iterable[str] = (), review_handler: ReviewHandler | None = None) -> ToolResult:
    """`tool.call` inside a framework: the tools in `approved` pass their gate (the framework's human said yes);
    other gates ask `review_handler`."""
    names = frozenset(approved)
    if not names and review_handler is None:
        return await tool.call(arguments, context)  # keep any handler the caller installed around the run
    with use_review_handler(_FrameworkApproval(names, review_handler, adapter)):
        return await tool.call(arguments, context)
