"""What the framework adapters share: the install hint of an extra, the call context a framework run gives a
toolweave tool, and approval.

Approval works the same way in every framework: the framework asks its own human (pydantic-ai deferred tools,
OpenAI Agents `needs_approval`, LangGraph `interrupt`) once, before the call, and a yes stands for toolweave's
gate of the tools it named. A plan is put to the human whole, with toolweave's whole-plan review request
(`plan_review`: every step, arguments as written, the gated ones marked), once, before any step runs, so an
approval never re-runs half a plan; a yes answers that plan's whole-plan review. A gate the framework could not
see before the call (a gated step inside a pipeline) asks the adapter's `review_handler`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeAlias, TypeVar

from toolweave.approval import (
    PlanReviewDecision,
    PlanReviewRequest,
    ReviewDecision,
    ReviewHandler,
    ReviewRequest,
    ask_plan,
    use_review_handler,
)
from toolweave.exceptions import PlanValidationError, ToolConfigurationError, UserError
from toolweave.plan import PlanTool, review_request
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


def plan_review(arguments: Arguments, tools: Toolset) -> PlanReviewRequest | None:
    """The whole-plan review of a plan tool call (every step, arguments as written, the gated ones marked): what
    the framework's human is shown. `None` when no step needs approval, or when the plan cannot run (it then runs
    nothing and the model gets the list of problems instead)."""
    try:
        request = review_request({} if arguments is None else arguments, tools)
    except PlanValidationError:
        return None
    return request if request.gated else None


def review_payload(request: PlanReviewRequest) -> dict[str, Any]:
    """What a framework's approval carries for a plan: the gated steps and the plan as text."""
    return {'steps': [{'id': s.id, 'tool': s.tool, 'arguments': s.arguments} for s in request.gated],
            'description': request.describe()}


class _FrameworkApproval:
    """A `ReviewHandler` standing for what the framework's human already approved: a review of an approved tool is
    approved, and so is the whole-plan review of an approved plan; any other review goes to `fallback`, and without
    one it is a configuration error."""

    def __init__(self, approved: frozenset[str], plan_approved: bool, fallback: ReviewHandler | None,
                 adapter: str) -> None:
        self.approved = approved
        self.plan_approved = plan_approved
        self.fallback = fallback
        self.adapter = adapter

    async def review_plan(self, request: PlanReviewRequest) -> PlanReviewDecision:
        if self.plan_approved:
            return PlanReviewDecision.approve_all()
        if self.fallback is None:
            raise ToolConfigurationError(
                f'A plan asked for approval of steps {", ".join(s.id for s in request.gated)} that the framework did '
                f'not ask about. Pass `review_handler=` to `{self.adapter}`.')
        return await ask_plan(self.fallback, request)

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
                    approved: Iterable[str] = (), plan: PlanReviewRequest | None = None,
                    review_handler: ReviewHandler | None = None) -> ToolResult:
    """`tool.call` inside a framework: the tools in `approved` pass their gate; for `plan`, the plan the framework's
    human approved, the whole-plan review of the plan tool (built by `whole_plan_tool`) approves every gated step,
    and the gated steps' tools pass their gates (a framework's tool may call the toolweave tool it wraps). Other
    gates ask `review_handler`."""
    names = frozenset(approved) | {step.tool for step in plan.gated} if plan is not None else frozenset(approved)
    if not names and plan is None and review_handler is None:
        return await tool.call(arguments, context)  # keep any handler the caller installed around the run
    with use_review_handler(_FrameworkApproval(names, plan is not None, review_handler, adapter)):
        return await tool.call(arguments, context)


def whole_plan_tool(tools: Toolset, *, name: str, concurrency: int | None, step_timeout: float | None,
              timeout: float | None) -> PlanTool:
    """The plan tool an adapter runs a plan with: its gated steps reviewed whole, once, before anything runs."""
    return PlanTool(tools, name=name, concurrency=concurrency, step_timeout=step_timeout, timeout=timeout,
                    review_mode='whole_plan')
