"""What a reviewer is asked (`ReviewRequest`) and what it answers (`ReviewDecision`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from toolweave._checks import check_number
from toolweave._json import compact
from toolweave.exceptions import ToolConfigurationError, UserError
from toolweave.tools import ToolArguments, ToolCallContext

__all__ = (
    'DEFAULT_ON_TIMEOUT',
    'DEFAULT_TIMEOUT',
    'DecisionKind',
    'OnTimeout',
    'ReviewDecision',
    'ReviewRequest',
    'ReviewTiming',
    'describe_arguments',
)

ReviewTiming = Literal['before_execution', 'during_execution', 'after_execution']
OnTimeout = Literal['continue', 'exit_early']
DecisionKind = Literal['continue', 'edit', 'exit_early']
DEFAULT_TIMEOUT = 300.0
"""Seconds a reviewer has to answer, unless the tool or the caller says otherwise."""
DEFAULT_ON_TIMEOUT: OnTimeout = 'exit_early'
"""A review nobody answered rejects the call: an unattended gate must not let a dangerous action through."""
_KINDS = ('continue', 'edit', 'exit_early')
_ON_TIMEOUT = ('continue', 'exit_early')


def describe_arguments(arguments: ToolArguments) -> str:
    """Arguments as the one-line text a reviewer reads: text as is, mappings as compact JSON."""
    if arguments is None or isinstance(arguments, str):
        return arguments or ''
    try:
        return compact(arguments)
    except (TypeError, ValueError):  # a circular structure
        return repr(arguments)


def check_options(where: str, timeout: object, on_timeout: object) -> None:
    """Raise `ToolConfigurationError` unless `timeout` is > 0 seconds or None and `on_timeout` is a known action."""
    check_number(timeout, f'Review timeout of {where!r}', exclusive=True, optional=True, unit='seconds',
                 error=ToolConfigurationError)
    if on_timeout not in _ON_TIMEOUT:
        raise ToolConfigurationError(f'on_timeout of {where!r} must be one of {_ON_TIMEOUT}, got {on_timeout!r}.')


@dataclass(frozen=True, slots=True)
class ReviewRequest:
    """What a reviewer is asked to decide."""

    tool_name: str
    """The name of the tool as the model called it (a prefixed or renamed tool's outer name)."""
    description: str
    """`<action>: <input>`, for example `delete_file: {"path":"/tmp/x"}`."""
    arguments: ToolArguments
    """The resolved arguments the tool is about to run with."""
    timing: ReviewTiming = 'during_execution'
    timeout: float | None = DEFAULT_TIMEOUT
    """Seconds to wait for a decision; `None` waits for ever."""
    on_timeout: OnTimeout = DEFAULT_ON_TIMEOUT
    """What happens when the reviewer does not answer in time."""
    context: ToolCallContext = field(default=ToolCallContext.EMPTY)

    def __post_init__(self) -> None:
        check_options(self.tool_name or 'a review', self.timeout, self.on_timeout)


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
            raise UserError(f'ReviewDecision kind must be one of {_KINDS}, got {self.kind!r}.')
        if self.kind == 'edit' and self.revised is None:
            raise UserError('ReviewDecision.edit needs the revised input, got None. Use ReviewDecision.approve() '
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
