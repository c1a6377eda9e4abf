"""The gate: who reviews a call, how their decisions combine, and the record each decision leaves.

Reviewers are ambient. `use_review_handler(h)` adds `h` for the calls made inside the block, however deeply
nested; plans, pipelines and agents given a `review_handler` install theirs the same way. Reviewers installed
inside each other all review a call, the innermost first, and the stricter decision wins: one rejection rejects,
an edit reaches the next reviewer as the arguments it reviews, and the call runs only if every reviewer lets it.
So a pipeline built with its own `AutoApproveHandler` cannot let through what the agent's reviewer rejects.

`Tool.call` asks the gate before a tool that requires approval runs (see `toolweave.tools._review`); a tool body
may ask on its own with `request_approval`. With no reviewer installed, both are a `ToolConfigurationError`: an
unattended run never approves silently.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from time import perf_counter
from typing import Any

from toolweave._ambient import using
from toolweave.approval._approved import ApprovedCalls
from toolweave.approval._handlers import ReviewHandler, ask_handler, check_review_handler
from toolweave.approval._log import ApprovalRecord, current_approval_log
from toolweave.approval._model import (
    DEFAULT_ON_TIMEOUT,
    DEFAULT_TIMEOUT,
    OnTimeout,
    PlanReviewRequest,
    ReviewDecision,
    ReviewRequest,
    ReviewTiming,
    describe_arguments,
)
from toolweave.exceptions import ApprovalPending, ControlFlowSignal, ToolConfigurationError
from toolweave.tools import Tool, ToolArguments, ToolCallContext, ToolResult
from toolweave.tools._metrics import truncate
from toolweave.tools._review import reviewer_var

__all__ = (
    'APPROVAL_OPTIONS_KEY',
    'current_review_handlers',
    'decide',
    'decide_all',
    'decide_call',
    'deciding',
    'preset_review',
    'record_decision',
    'request_approval',
    'review_options',
    'use_review_handler',
)

logger = logging.getLogger('toolweave.approval')

APPROVAL_OPTIONS_KEY = 'approval'
"""`ToolMetadata.extra` key holding a gated tool's own `timeout` and `on_timeout` (see `requires_approval`)."""


_ANY: Any = object()


def _same(arguments: Any, decided: Any) -> bool:
    """Whether a call's arguments are the ones a decision was made for (JSON text or data, compared as data)."""
    if arguments == decided:
        return True
    if isinstance(arguments, str):
        try:
            return bool(json.loads(arguments) == decided)
        except ValueError:
            return False
    return False


@dataclass(eq=False, slots=True)
class _Preset:
    """A decision made ahead for the review of one call (a whole-plan review, a stored decision, a reviewer asked
    before a plan step started)."""

    tool_name: str
    decision: ReviewDecision
    record: bool = True
    """Whether answering a review with it records the decision (not when it was recorded as it was made)."""
    arguments: Any = _ANY
    """The arguments it was decided for: it answers every review of the tool with exactly these (the call, and
    the same call tried again); `_ANY`: the next review of the tool, once."""
    used: bool = False

    def answers(self, name: str, arguments: Any) -> bool:
        if name != self.tool_name:
            return False
        if self.arguments is _ANY:
            return not self.used
        return _same(arguments, self.arguments)


@dataclass(frozen=True, slots=True)
class _Reviewers:
    """The reviewers installed around the current call, outermost first: the gate `Tool.call` asks."""

    handlers: tuple[ReviewHandler, ...]
    preset: _Preset | None = None

    async def review_call(self, tool: Tool, arguments: ToolArguments,
                          context: ToolCallContext) -> ToolArguments | ToolResult:
        decision = await self.decide_call(tool, arguments, context)
        if decision.kind == 'continue':
            return arguments
        if decision.kind == 'edit':
            return decision.revised
        reason = f' ({decision.reason})' if decision.reason else ''
        return ToolResult.failure(f'Rejected by reviewer: {describe_arguments(arguments)}{reason}')

    async def decide_call(self, tool: Tool, arguments: ToolArguments, context: ToolCallContext) -> ReviewDecision:
        name = tool.name
        preset = self.preset
        if preset is not None and preset.answers(name, arguments):  # the call it was made for; any other asks
            first = not preset.used
            preset.used = True
            if preset.record and first:
                _record_preset(_request(tool, arguments, context), preset.decision)
            return preset.decision
        if not self.handlers:
            raise ToolConfigurationError(
                f'Tool {name!r} requires approval but no ReviewHandler is configured. Pass `review_handler=` to the '
                'Agent, `run_plan` or pipeline, or wrap the call in `with use_review_handler(handler):`.')
        return await decide_all(self.handlers, _request(tool, arguments, context), describe_edits=True)


def _request(tool: Tool, arguments: ToolArguments, context: ToolCallContext) -> ReviewRequest:
    name = tool.name
    timeout, on_timeout = review_options(tool)
    return ReviewRequest(name, f'{name}: {describe_arguments(arguments)}', arguments, timeout=timeout,
                         on_timeout=on_timeout, context=context)


async def decide_call(tool: Tool, arguments: ToolArguments, context: ToolCallContext) -> ReviewDecision:
    """Ask the reviewers installed around the caller about a call of `tool` now, exactly as `Tool.call`'s gate
    would (a decision made ahead for it answers instead), and return the decision, logged and recorded; the call
    itself is the caller's to make, under `preset_review(tool.name, decision, record=False)` so that the gate does
    not ask again. Plans use it to ask before a step counts as started.

    Raises:
        ToolConfigurationError: no reviewer is installed.
        ApprovalPending: a reviewer cannot answer now (the request is attached).
    """
    reviewers = reviewer_var.get()
    return await (reviewers if isinstance(reviewers, _Reviewers) else _Reviewers(())).decide_call(
        tool, arguments, context)


def current_review_handlers() -> tuple[ReviewHandler, ...]:
    """The reviewers installed around the calling code, outermost first."""
    reviewers = reviewer_var.get()
    return reviewers.handlers if isinstance(reviewers, _Reviewers) else ()


@contextmanager
def use_review_handler(handler: ReviewHandler | None) -> Iterator[None]:
    """Add `handler` to the reviewers of every gated call made inside the block, however deeply nested (`None`, or
    a handler already installed around the block, changes nothing: one reviewer reviews a call once). Reviewers
    already installed around the block still review those calls, after it: the stricter decision wins.

    ```python
    from toolweave import AutoApproveHandler, ReviewDecision, TextTool, use_review_handler
    from toolweave.testing import RecordingReviewHandler

    delete = TextTool.from_function('delete', 'Deletes a file', lambda path: f'deleted {path}', requires_approval=True)
    with use_review_handler(RecordingReviewHandler(ReviewDecision.reject('read-only'))):
        with use_review_handler(AutoApproveHandler()):
            print(delete.call_sync('/tmp/x').error)
    #> Rejected by reviewer: /tmp/x (read-only)
    ```
    """
    current = current_review_handlers()
    if handler is None or any(installed is handler for installed in current):
        yield
        return
    check_review_handler(handler, 'use_review_handler()')
    with using(reviewer_var, _Reviewers((*current, handler))):
        yield


@contextmanager
def preset_review(tool_name: str, decision: ReviewDecision, *, record: bool = True,
                  arguments: Any = _ANY) -> Iterator[None]:
    """Answer the next review of `tool_name` inside the block with `decision`, without asking anyone (it is
    logged and recorded like any decision, unless `record=False`: it was recorded when it was made); every other
    review goes to the reviewers installed around the block. Plans use it to run a step decided ahead: by a
    whole-plan review, by a decision stored while it was parked, or by a reviewer asked before the step started
    (`decide_call`). With `arguments`, it answers every review of `tool_name` with exactly those arguments inside
    the block (the call it was made for, and the same call tried again), and no other."""
    with using(reviewer_var, _Reviewers(current_review_handlers(), _Preset(tool_name, decision, record, arguments))):
        yield


def review_options(tool: Tool) -> tuple[float | None, OnTimeout]:
    """The review `timeout` and `on_timeout` of a call of `tool`: set by `requires_approval` on any of its layers,
    an outer layer's setting winning over an inner one's."""
    options: dict[str, Any] = {}
    for layer in tool.layers():
        for key, value in (layer.definition.metadata.extra.get(APPROVAL_OPTIONS_KEY) or {}).items():
            options.setdefault(key, value)
    return options.get('timeout', DEFAULT_TIMEOUT), options.get('on_timeout', DEFAULT_ON_TIMEOUT)


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
    """Ask the installed reviewers from inside a tool body, for example before one dangerous branch. The tool
    decides what an edit or a rejection means for it.

    Raises:
        ToolConfigurationError: no reviewer is installed (a body that asks for a review must not go on
            unreviewed; install `AutoApproveHandler()` for runs that approve everything).

    ```python
    import anyio
    from toolweave import AutoApproveHandler, use_review_handler
    from toolweave.approval import request_approval

    with use_review_handler(AutoApproveHandler()):
        decision = anyio.run(request_approval, 'send email: hello')
    print(decision.kind)
    #> continue
    ```
    """
    handlers = current_review_handlers()
    if not handlers:
        raise ToolConfigurationError(
            f'{f"Tool {tool_name!r}" if tool_name else "A tool"} asked for approval ({description[:100]!r}) but no '
            'ReviewHandler is configured. Pass `review_handler=` to the Agent, `run_plan` or pipeline, or wrap the '
            'call in `with use_review_handler(handler):` (`AutoApproveHandler()` approves everything).'
        )
    request = ReviewRequest(tool_name, description, arguments, timing, timeout, on_timeout,
                            context if context is not None else ToolCallContext.EMPTY)
    return await decide_all(handlers, request, describe_edits=False)


def deciding(handlers: tuple[ReviewHandler, ...],
             request: ReviewRequest | PlanReviewRequest) -> tuple[ReviewHandler, ...]:
    """The reviewers that decide `request`: all but an `ApprovedCalls` that abstains from it (the person it stands
    for did not see it).

    Raises:
        ToolConfigurationError: only abstaining reviewers are installed: nothing may decide the call.
    """
    kept = tuple(h for h in handlers if not (isinstance(h, ApprovedCalls) and h.abstains(request)))
    if kept or not handlers:
        return kept
    approved = next(h for h in reversed(handlers) if isinstance(h, ApprovedCalls))
    raise approved.unreviewed(request)


async def decide_all(handlers: tuple[ReviewHandler, ...], request: ReviewRequest, *,
                      describe_edits: bool) -> ReviewDecision:
    """Ask every reviewer that decides (see `deciding`), innermost first; stop at the first rejection. An edit
    becomes the arguments the next reviewer sees (with `describe_edits`, its description too) and the arguments
    the call runs with."""
    revised: Any = None
    for handler in reversed(deciding(handlers, request)):
        decision = await decide(handler, request)
        if decision.kind == 'exit_early':
            return decision
        if decision.kind == 'edit':
            revised = decision.revised
            description = f'{request.tool_name}: {describe_arguments(revised)}' if describe_edits else (
                request.description)
            request = replace(request, arguments=revised, description=description)
    return ReviewDecision.approve() if revised is None else ReviewDecision.edit(revised)


async def decide(handler: ReviewHandler, request: ReviewRequest) -> ReviewDecision:
    """Ask one reviewer, under the request's timeout; then log and record its decision."""
    start = perf_counter()
    try:
        decision = await ask_handler(handler, request)
    except ApprovalPending as exc:
        if exc.request is None:
            exc.request = request  # what a parked step keeps about its review
        logger.info('Review of %r by %s is pending: %s', request.tool_name, type(handler).__name__, exc.reason)
        raise
    except (ControlFlowSignal, ToolConfigurationError) as exc:
        logger.info('Review of %r by %s stopped the run: %s', request.tool_name, type(handler).__name__, exc)
        raise
    except Exception as exc:  # a broken reviewer must not let the call through: fail closed
        logger.warning('Review handler %s failed for %r: %r', type(handler).__name__, request.tool_name, exc)
        decision = ReviewDecision.reject(f'review handler failed: {type(exc).__name__}: {exc}')
    _record(handler, request, decision, perf_counter() - start)
    return decision


def _record_preset(request: ReviewRequest, decision: ReviewDecision) -> None:
    record_decision('decided ahead', request, decision, 0.0)


def _record(handler: ReviewHandler, request: ReviewRequest, decision: ReviewDecision, seconds: float) -> None:
    record_decision(type(handler).__name__, request, decision, seconds)


def record_decision(handler: str, request: ReviewRequest, decision: ReviewDecision, seconds: float) -> None:
    record = ApprovalRecord(request, decision, handler, datetime.now(UTC), seconds)
    log = current_approval_log()
    if log is not None:
        log.add(record)
    if logger.isEnabledFor(logging.INFO):
        detail = ''
        if decision.kind == 'edit':
            detail = f' | revised: {truncate(describe_arguments(decision.revised))}'
        elif decision.reason:
            detail = f' | reason: {decision.reason}'
        logger.info('Review of %r by %s: %s in %.2f s | request: %s%s', request.tool_name, handler, record.outcome,
                    seconds, truncate(request.description), detail)
