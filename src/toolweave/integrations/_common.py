"""What the framework adapters share: the install hint of an extra, the call context a framework run gives a
toolweave tool, and approval.

Approval works the same way in every framework: the framework asks its own human (pydantic-ai deferred tools,
OpenAI Agents `needs_approval`, LangGraph `interrupt`) once, before the call, and their yes is an `ApprovedCalls`
reviewer bound to exactly what they saw: that tool call with those arguments, once. A plan is put to the human
whole, with toolweave's whole-plan review request (`plan_review`: every step, arguments as written, the gated ones
marked), once, before any step runs, so an approval never re-runs half a plan; their yes answers that plan's
whole-plan review, and each gated step then runs under the decision made ahead, as in any whole-plan review. A gate
the human did not see (a gated tool inside a pipeline, a tool that calls another, a sub-agent) asks the adapter's
`review_handler`, or else the reviewers installed around the run; with none, it cannot run and the error says to
pass `review_handler=` to the adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias, TypeVar

from toolweave.approval import ApprovedCalls, PlanReviewRequest, ReviewHandler, use_review_handler
from toolweave.exceptions import UserError
from toolweave.plan import PlanTool
from toolweave.tools import DelegatingTool, Tool, ToolCallContext, ToolDefinition, ToolResult, Toolset

__all__ = (
    'Arguments',
    'BoundContext',
    'ContextSource',
    'as_toolset',
    'call_context',
    'call_tool',
    'missing_extra',
    'plan_definition',
    'plan_review',
    'whole_plan_tool',
    'review_payload',
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


async def plan_review(planner: PlanTool, arguments: Arguments) -> PlanReviewRequest | None:
    """The whole-plan review of a plan tool call (every step, arguments as written, the gated ones marked), read as
    the call will read it: what the framework's human is shown. `None` when no step needs approval, or when the
    plan cannot run (it then runs nothing and the model gets the list of problems instead)."""
    request = await planner.review_request(arguments)
    return request if request is not None and request.gated else None


def review_payload(request: PlanReviewRequest) -> dict[str, Any]:
    """What a framework's approval carries for a plan: the gated steps and the plan as text."""
    return {'steps': [{'id': s.id, 'tool': s.tool, 'arguments': s.arguments} for s in request.gated],
            'description': request.describe()}


async def call_tool(tool: Tool, arguments: Arguments, context: ToolCallContext, *, adapter: str,
                    approved: bool = False, plan: PlanReviewRequest | None = None,
                    review_handler: ReviewHandler | None = None) -> ToolResult:
    """`tool.call` inside a framework, with what the framework's human approved: this very call (`approved`: the
    tool with these arguments, once), or, for a plan tool (built by `whole_plan_tool`), the whole-plan review they
    saw (`plan`). Every other gate asks `review_handler`, or the reviewers installed around the run; with none, it
    is a `ToolConfigurationError` naming `adapter` (see `ApprovedCalls`)."""
    approval = ApprovedCalls(tool=tool.name if approved else None, arguments=arguments if approved else None,
                             plan=plan, fallback=review_handler, where=adapter)
    with use_review_handler(approval):
        return await tool.call(arguments, context)


def whole_plan_tool(tools: Toolset, *, name: str, concurrency: int | None, step_timeout: float | None,
              timeout: float | None) -> PlanTool:
    """The plan tool an adapter runs a plan with: its gated steps reviewed whole, once, before anything runs."""
    return PlanTool(tools, name=name, concurrency=concurrency, step_timeout=step_timeout, timeout=timeout,
                    review_mode='whole_plan')
