"""Human approval gates: a tool marked `requires_approval` asks a `ReviewHandler` before it runs.

The handler of the current run is ambient (see `use_review_handler`); plans, pipelines and agents install
theirs, so a gated tool deep inside a pipeline inside a plan asks the same reviewer with its resolved input.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import anyio

from toolweave import _runtime
from toolweave.exceptions import ToolConfigurationError
from toolweave.tools._context import ToolCallContext
from toolweave.tools._result import ToolResult

if TYPE_CHECKING:
    from toolweave.tools._tool import Tool, ToolArguments

__all__ = (
    'AutoApproveHandler',
    'OnTimeout',
    'ReviewDecision',
    'ReviewHandler',
    'ReviewRequest',
    'ReviewTiming',
    'review_call',
    'use_review_handler',
)

ReviewTiming = Literal['before_execution', 'during_execution', 'after_execution']
OnTimeout = Literal['continue', 'exit_early']
DEFAULT_TIMEOUT = 300.0


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
    on_timeout: OnTimeout = 'exit_early'
    """What happens when the reviewer does not answer in time."""
    context: ToolCallContext = field(default=ToolCallContext.EMPTY)


@dataclass(frozen=True, slots=True)
class ReviewDecision:
    """A reviewer's answer: continue, edit (run with revised input) or exit early (reject)."""

    kind: Literal['continue', 'edit', 'exit_early']
    revised: str | Mapping[str, Any] | None = None
    reason: str | None = None

    @classmethod
    def approve(cls) -> ReviewDecision:
        return cls('continue')

    @classmethod
    def edit(cls, revised: str | Mapping[str, Any]) -> ReviewDecision:
        return cls('edit', revised)

    @classmethod
    def reject(cls, reason: str | None = None) -> ReviewDecision:
        return cls('exit_early', reason=reason)


@runtime_checkable
class ReviewHandler(Protocol):
    """Decides whether a gated tool call may run."""

    async def review(self, request: ReviewRequest) -> ReviewDecision: ...


class AutoApproveHandler:
    """Approves everything (tests, trusted batch runs)."""

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        return ReviewDecision.approve()


@contextmanager
def use_review_handler(handler: ReviewHandler | None) -> Iterator[None]:
    """Install `handler` for every gated tool call made inside the block, however deeply nested."""
    if handler is not None and not isinstance(handler, ReviewHandler):
        raise ToolConfigurationError(
            f'review handler must be an instance of ReviewHandler (an object with `async review(request)`), '
            f'got {type(handler).__name__}.'
        )
    with _runtime.using(_runtime.review_handler_var, handler):
        yield


def _describe(arguments: ToolArguments) -> str:
    if arguments is None or isinstance(arguments, str):
        return arguments or ''
    return json.dumps(arguments, separators=(',', ':'), default=str)


async def review_call(tool: Tool, arguments: ToolArguments, context: ToolCallContext) -> ToolArguments | ToolResult:
    """Ask the current reviewer about a call: the arguments to run with, or the failure that replaces the call."""
    handler = _runtime.current_review_handler()
    name = tool.definition.name
    if handler is None:
        raise ToolConfigurationError(
            f'Tool {name!r} requires approval but no ReviewHandler is configured. Pass `review_handler=` to the '
            'Agent, `run_plan` or pipeline, or wrap the call in `with use_review_handler(handler):`.'
        )
    if not isinstance(handler, ReviewHandler):
        raise ToolConfigurationError(
            f'Tool {name!r} is misconfigured: reviewHandler must be an instance of ReviewHandler, '
            f'got {type(handler).__name__}.'
        )
    shown = _describe(arguments)
    request = ReviewRequest(name, f'{name}: {shown}', arguments, context=context)
    decision = await _decide(handler, request)
    if decision.kind == 'continue':
        return arguments
    if decision.kind == 'edit':
        return decision.revised
    reason = f' ({decision.reason})' if decision.reason else ''
    return ToolResult.failure(f'Rejected by reviewer: {shown}{reason}')


async def _decide(handler: ReviewHandler, request: ReviewRequest) -> ReviewDecision:
    if request.timeout is None:
        return await handler.review(request)
    with anyio.move_on_after(request.timeout):
        return await handler.review(request)
    if request.on_timeout == 'continue':
        return ReviewDecision.approve()
    return ReviewDecision.reject(f'no decision within {request.timeout:g} s')
