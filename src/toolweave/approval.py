"""Human approval gates: a tool marked `requires_approval` asks a `ReviewHandler` before it runs.

The handler of the current run is ambient (see `use_review_handler`); plans, pipelines and agents install
theirs, so a gated tool deep inside a pipeline inside a plan asks the same reviewer with its resolved input.

The protocol:

- `Tool.call` of a tool whose `definition.metadata.requires_approval` is set calls `review_call` before the
  body runs. No handler installed -> `ToolConfigurationError` (AP-9); an object that is not a handler ->
  `ToolConfigurationError` (AP-10). Both propagate out of every layer.
- The handler receives a `ReviewRequest` (`<tool>: <arguments>`, timing, timeout, on-timeout action) and
  returns a `ReviewDecision`: continue (run with the arguments as they are), edit (run with the reviewer's
  revised arguments) or exit early (the call becomes the failure `Rejected by reviewer: <input>`).
- A handler that does not answer within `timeout` seconds gets the request's `on_timeout` action. A handler
  that raises `ExitEarly` (or another control-flow signal) stops the whole run; a handler that raises
  anything else rejects the call (fail closed) and the failure names the error. A handler that returns
  something other than a `ReviewDecision` is a `ToolConfigurationError`.
- Handlers: `AutoApproveHandler`, `ConsoleReviewHandler` (a person at the terminal; concurrent prompts are
  serialised by one process-wide lock), `CallbackReviewHandler` (a function), `RuleBasedReviewHandler` (tool
  name globs and argument predicates). `requires_approval(tool)` gates any tool; `@tool(requires_approval=True)`
  sets the same flag.
- A tool body may also ask on its own with `request_approval(description)`; with no handler installed that
  approves (AP-1, AP-2), because the tool did not declare that it needs a reviewer.
- Every decision is logged (logger `toolweave.approval`, INFO) and appended to the `ApprovalLog`s installed
  with `record_approvals()`, which plans and agents attach to their run records.
"""

from __future__ import annotations

import inspect
import json
import logging
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from time import perf_counter
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import anyio

from toolweave import _runtime
from toolweave._approval_log import ApprovalLog, ApprovalRecord, current_approval_log, record_approvals
from toolweave.exceptions import ControlFlowSignal, ToolConfigurationError
from toolweave.tools._context import ToolCallContext
from toolweave.tools._metrics import truncate
from toolweave.tools._result import ToolResult

if TYPE_CHECKING:
    from toolweave.tools._tool import Tool, ToolArguments

__all__ = (
    'DEFAULT_ON_TIMEOUT',
    'DEFAULT_TIMEOUT',
    'ApprovalLog',
    'ApprovalRecord',
    'ApprovalRequiredTool',
    'ApprovalRule',
    'AutoApproveHandler',
    'CallbackReviewHandler',
    'ConsoleReviewHandler',
    'OnTimeout',
    'ReviewDecision',
    'ReviewHandler',
    'ReviewRequest',
    'ReviewTiming',
    'RuleBasedReviewHandler',
    'approval_options',
    'console_lock',
    'current_approval_log',
    'record_approvals',
    'request_approval',
    'requires_approval',
    'review_call',
    'use_review_handler',
)

logger = logging.getLogger('toolweave.approval')

ReviewTiming = Literal['before_execution', 'during_execution', 'after_execution']
OnTimeout = Literal['continue', 'exit_early']
DecisionKind = Literal['continue', 'edit', 'exit_early']
DEFAULT_TIMEOUT = 300.0
"""Seconds a reviewer has to answer, unless the tool or the caller says otherwise."""
DEFAULT_ON_TIMEOUT: OnTimeout = 'exit_early'
"""A review nobody answered rejects the call: an unattended gate must not let a dangerous action through."""
APPROVAL_OPTIONS_KEY = 'approval'
"""`ToolMetadata.extra` key holding a gated tool's own `timeout` and `on_timeout` (see `requires_approval`)."""
_KINDS = ('continue', 'edit', 'exit_early')
_ON_TIMEOUT = ('continue', 'exit_early')


@dataclass(frozen=True, slots=True)
class ReviewRequest:
    """What a reviewer is asked to decide."""

    tool_name: str
    description: str
    """`<action>: <input>`, for example `delete_file: {"path":"/tmp/x"}`."""
    arguments: str | Mapping[str, Any] | None
    """The resolved arguments the tool is about to run with."""
    timing: ReviewTiming = 'during_execution'
    timeout: float | None = DEFAULT_TIMEOUT
    """Seconds to wait for a decision; `None` waits for ever."""
    on_timeout: OnTimeout = DEFAULT_ON_TIMEOUT
    """What happens when the reviewer does not answer in time."""
    context: ToolCallContext = field(default=ToolCallContext.EMPTY)

    def __post_init__(self) -> None:
        if self.timeout is not None and not self.timeout > 0:
            raise ToolConfigurationError(
                f'Review timeout of {self.tool_name or "a review"!r} must be > 0 seconds or None, got {self.timeout!r}.'
            )
        if self.on_timeout not in _ON_TIMEOUT:
            raise ToolConfigurationError(
                f'on_timeout of {self.tool_name or "a review"!r} must be one of {_ON_TIMEOUT}, got {self.on_timeout!r}.'
            )


@dataclass(frozen=True, slots=True)
class ReviewDecision:
    """A reviewer's answer: continue, edit (run with revised input) or exit early (reject).

    ```python
    from toolweave import ReviewDecision

    print(ReviewDecision.approve().kind, ReviewDecision.edit('safer input').revised, ReviewDecision.reject('no').kind)
    #> continue safer input exit_early
    ```
    """

    kind: DecisionKind
    revised: str | Mapping[str, Any] | None = None
    """The arguments to run with instead (only for `edit`)."""
    reason: str | None = None
    """Why the reviewer rejected the call; shown in the failure the model sees."""
    timed_out: bool = False
    """Whether this decision is the on-timeout action rather than a reviewer's answer."""

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f'ReviewDecision kind must be one of {_KINDS}, got {self.kind!r}.')
        if self.kind == 'edit' and self.revised is None:
            raise ValueError('ReviewDecision.edit needs the revised input, got None. Use ReviewDecision.approve() '
                             'to run with the original input.')

    @classmethod
    def approve(cls) -> ReviewDecision:
        """Run the tool with its arguments unchanged."""
        return cls('continue')

    @classmethod
    def edit(cls, revised: str | Mapping[str, Any]) -> ReviewDecision:
        """Run the tool with `revised` instead of its arguments (a mapping, a JSON text, or a tool's text input)."""
        return cls('edit', revised)

    @classmethod
    def reject(cls, reason: str | None = None) -> ReviewDecision:
        """Do not run the tool; the call fails with `Rejected by reviewer: <input>`."""
        return cls('exit_early', reason=reason)

    @classmethod
    def on_timeout(cls, request: ReviewRequest) -> ReviewDecision:
        """The decision a request's on-timeout action stands for."""
        if request.on_timeout == 'continue':
            return cls('continue', timed_out=True)
        waited = 'in time' if request.timeout is None else f'within {request.timeout:g} s'
        return cls('exit_early', reason=f'no decision {waited}', timed_out=True)


@runtime_checkable
class ReviewHandler(Protocol):
    """Decides whether a gated tool call may run.

    Any object with an `async review(request) -> ReviewDecision` method is a handler. Built-in ones:
    `AutoApproveHandler`, `ConsoleReviewHandler`, `CallbackReviewHandler`, `RuleBasedReviewHandler`.
    """

    async def review(self, request: ReviewRequest) -> ReviewDecision: ...


class AutoApproveHandler:
    """Approves everything (tests, trusted batch runs)."""

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        return ReviewDecision.approve()

    def __repr__(self) -> str:
        return 'AutoApproveHandler()'


_handler_types: weakref.WeakSet[type] = weakref.WeakSet()


def is_review_handler(handler: object) -> bool:
    """`isinstance(handler, ReviewHandler)`, remembered per class: a protocol check walks the protocol's members
    on every call, and the gate runs this on every gated call."""
    cls = type(handler)
    if cls in _handler_types:
        return True
    if isinstance(handler, ReviewHandler):
        _handler_types.add(cls)
        return True
    return False


def check_review_handler(handler: object, where: str) -> None:
    """Raise `ToolConfigurationError` unless `handler` is `None` or a `ReviewHandler` (AP-10)."""
    if handler is not None and not is_review_handler(handler):
        raise ToolConfigurationError(
            f'{where} is misconfigured: reviewHandler must be an instance of ReviewHandler (an object with '
            f'`async def review(self, request) -> ReviewDecision`), got {type(handler).__name__}: {handler!r}.'
        )


@contextmanager
def use_review_handler(handler: ReviewHandler | None) -> Iterator[None]:
    """Install `handler` for every gated tool call made inside the block, however deeply nested."""
    if handler is not None and not is_review_handler(handler):
        raise ToolConfigurationError(
            f'review handler must be an instance of ReviewHandler (an object with `async review(request)`), '
            f'got {type(handler).__name__}.'
        )
    with _runtime.using(_runtime.review_handler_var, handler):
        yield


def describe_arguments(arguments: ToolArguments) -> str:
    """Arguments as the one-line text a reviewer reads: text as is, mappings as compact JSON."""
    if arguments is None or isinstance(arguments, str):
        return arguments or ''
    try:
        return json.dumps(arguments, separators=(',', ':'), default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(arguments)


_option_overrides: ContextVar[Mapping[str, Mapping[str, Any]]] = ContextVar(
    'toolweave_approval_options', default=MappingProxyType({}))


@contextmanager
def approval_options(tool_name: str, options: Mapping[str, Any]) -> Iterator[None]:
    """Within the block, the gate of the tool called `tool_name` uses these `timeout` / `on_timeout` options (an
    enclosing block's options for the same tool win). `requires_approval(tool, timeout=...)` on a tool that is
    already gated uses this instead of adding a second gate."""
    current = _option_overrides.get()
    merged = {**options, **current.get(tool_name, {})}
    with _runtime.using(_option_overrides, {**current, tool_name: merged}):
        yield


def _tool_options(tool: Tool) -> tuple[float | None, OnTimeout]:
    name = tool.definition.name
    options = dict(tool.definition.metadata.extra.get(APPROVAL_OPTIONS_KEY) or {})
    options.update(_option_overrides.get().get(name, {}))
    return options.get('timeout', DEFAULT_TIMEOUT), options.get('on_timeout', DEFAULT_ON_TIMEOUT)


async def review_call(tool: Tool, arguments: ToolArguments, context: ToolCallContext) -> ToolArguments | ToolResult:
    """Ask the current reviewer about a call: the arguments to run with, or the failure that replaces the call."""
    handler = _runtime.current_review_handler()
    name = tool.definition.name
    if handler is None:
        raise ToolConfigurationError(
            f'Tool {name!r} requires approval but no ReviewHandler is configured. Pass `review_handler=` to the '
            'Agent, `run_plan` or pipeline, or wrap the call in `with use_review_handler(handler):`.'
        )
    check_review_handler(handler, f'Tool {name!r}')
    shown = describe_arguments(arguments)
    timeout, on_timeout = _tool_options(tool)
    request = ReviewRequest(name, f'{name}: {shown}', arguments, timeout=timeout, on_timeout=on_timeout,
                            context=context)
    decision = await decide(handler, request)
    if decision.kind == 'continue':
        return arguments
    if decision.kind == 'edit':
        return decision.revised
    reason = f' ({decision.reason})' if decision.reason else ''
    return ToolResult.failure(f'Rejected by reviewer: {shown}{reason}')


async def request_approval(
    description: str,
    *,
    tool_name: str = '',
    arguments: str | Mapping[str, Any] | None = None,
    timing: ReviewTiming = 'during_execution',
    timeout: float | None = DEFAULT_TIMEOUT,  # noqa: ASYNC109 - the reviewer's time, carried in the request
    on_timeout: OnTimeout = DEFAULT_ON_TIMEOUT,
    context: ToolCallContext | None = None,
) -> ReviewDecision:
    """Ask the current reviewer from inside a tool body, for example before one dangerous branch.

    With no handler installed the answer is "continue" (the tool did not declare `requires_approval`, so an
    unattended run may go on). The tool decides what an edit or a rejection means for it.

    ```python
    import anyio
    from toolweave.approval import request_approval

    decision = anyio.run(request_approval, 'send email: hello')
    print(decision.kind)
    #> continue
    ```
    """
    handler = _runtime.current_review_handler()
    if handler is None:
        return ReviewDecision.approve()
    check_review_handler(handler, f'Tool {tool_name!r}' if tool_name else 'The review handler')
    request = ReviewRequest(tool_name, description, arguments, timing, timeout, on_timeout,
                            context or ToolCallContext.EMPTY)
    return await decide(handler, request)


async def decide(handler: ReviewHandler, request: ReviewRequest) -> ReviewDecision:
    """Ask `handler`, apply the timeout, validate the answer, then log and record the decision."""
    start = perf_counter()
    try:
        decision = await ask_handler(handler, request)
    except (ControlFlowSignal, ToolConfigurationError) as exc:
        logger.info('Review of %r by %s stopped the run: %s', request.tool_name, type(handler).__name__, exc)
        raise
    except Exception as exc:  # a broken reviewer must not let the call through: fail closed
        logger.warning('Review handler %s failed for %r: %r', type(handler).__name__, request.tool_name, exc)
        decision = ReviewDecision.reject(f'review handler failed: {type(exc).__name__}: {exc}')
    _record(handler, request, decision, perf_counter() - start)
    return decision


def handles_own_timeout(handler: object) -> bool:
    """Whether `handler` applies `request.timeout` itself: the console handler starts the clock only once its
    prompt is on screen (time spent waiting for the console lock does not count), and the rule-based handler
    applies it to the handler it falls back to."""
    return isinstance(handler, ConsoleReviewHandler | RuleBasedReviewHandler)


async def ask_handler(handler: ReviewHandler, request: ReviewRequest) -> ReviewDecision:
    """`handler.review(request)` under the request's timeout; the on-timeout decision when it runs out."""
    if request.timeout is None or type(handler) is AutoApproveHandler or handles_own_timeout(handler):
        return await _answer(handler, request)
    with anyio.move_on_after(request.timeout):
        return await _answer(handler, request)
    return ReviewDecision.on_timeout(request)


async def _answer(handler: ReviewHandler, request: ReviewRequest) -> ReviewDecision:
    answer: object = handler.review(request)
    if inspect.isawaitable(answer):  # the protocol is async; a plain `def review` is accepted too
        answer = await answer
    if not isinstance(answer, ReviewDecision):
        raise ToolConfigurationError(
            f'Review handler {type(handler).__name__} returned {answer!r} for {request.tool_name!r}. `review` must '
            'return a ReviewDecision: ReviewDecision.approve(), .edit(revised) or .reject(reason).'
        )
    return answer


def _record(handler: ReviewHandler, request: ReviewRequest, decision: ReviewDecision, seconds: float) -> None:
    record = ApprovalRecord(request, decision, type(handler).__name__, datetime.now(UTC), seconds)
    log = current_approval_log()
    if log is not None:
        log.add(record)
    if logger.isEnabledFor(logging.INFO):
        detail = ''
        if decision.kind == 'edit':
            detail = f' | revised: {truncate(describe_arguments(decision.revised))}'
        elif decision.reason:
            detail = f' | reason: {decision.reason}'
        logger.info('Review of %r by %s: %s in %.2f s | request: %s%s', request.tool_name, type(handler).__name__,
                    record.outcome, seconds, truncate(request.description), detail)


# The handlers and the wrapper live in their own modules, which build on the names above; importing them last
# makes `toolweave.approval` the one place to find everything about approval.
from toolweave._console_review import ConsoleReviewHandler, console_lock  # noqa: E402
from toolweave._gated import ApprovalRequiredTool, requires_approval  # noqa: E402
from toolweave._review_handlers import ApprovalRule, CallbackReviewHandler, RuleBasedReviewHandler  # noqa: E402
