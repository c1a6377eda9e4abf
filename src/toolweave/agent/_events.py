"""What an agent run reports while it runs: reply deltas, tool calls, plan steps, progress, messages.

Subscribers are plain callables `cb(event)`. They are called synchronously, from whichever task or worker
thread produced the event, so they must be cheap; an exception from a subscriber is logged and ignored (an
observer never breaks a run).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from toolweave.exceptions import UserError
from toolweave.models._base import Message
from toolweave.tools._result import ToolResult

if TYPE_CHECKING:
    from toolweave.plan import ItemRecord, StepRecord

__all__ = (
    'AgentEvent',
    'EmptyAnswer',
    'EventHub',
    'EventListener',
    'MessageEvent',
    'PlanItemFinished',
    'PlanStepFinished',
    'PlanStepStarted',
    'ProgressEvent',
    'TextDelta',
    'ToolCallDelta',
    'ToolCallFinished',
    'ToolCallStarted',
)

logger = logging.getLogger('toolweave.agent')


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentEvent:
    """Base of every agent event."""

    process_id: str
    """The `AgentProcess` that produced it (a sub-agent's events carry the sub-agent's process id)."""
    time: float
    """Seconds since that process started."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta(AgentEvent):
    """A piece of the model's reply text as it streams (runs started with `Agent.run_stream`)."""

    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta(AgentEvent):
    """A piece of a tool call as the model writes it (runs started with `Agent.run_stream`).

    The first delta of each call comes as soon as its id and tool name are known, usually with `arguments == ''`;
    the following ones carry the next pieces of its arguments JSON. `ToolCallStarted` follows once the whole
    reply has arrived and the call runs.
    """

    index: int
    """The call's position among the reply's tool calls (0, 1, ...)."""
    call_id: str
    tool_name: str
    arguments: str
    """The next piece of the raw arguments JSON text."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EmptyAnswer(AgentEvent):
    """The model ended its turn with neither text nor tool calls."""

    truncated: bool
    """Whether the reply stopped at the token limit (`max_tokens`) before it said anything."""
    nudged: bool
    """`True`: the agent asks the model again; `False`: it gives up, and the run ends with `finish_reason`
    `'empty_answer'` and an empty `output`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStarted(AgentEvent):
    """The loop is about to call a tool the model asked for."""

    call_id: str
    tool_name: str
    arguments: str
    """The raw JSON text the model sent."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallFinished(AgentEvent):
    """A tool call of the loop finished (successfully or not: read `result.ok`)."""

    call_id: str
    tool_name: str
    result: ToolResult
    duration: float
    """Seconds the call took."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanStepStarted(AgentEvent):
    """A step of a plan (run through `execute_tool_plan`) started."""

    step: StepRecord
    eager: bool = False
    """The step started while the model was still writing the plan (`Agent(eager_plans=True)`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanStepFinished(AgentEvent):
    """A step of a plan finished, failed, was skipped or was cancelled (read `step.status`)."""

    step: StepRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanItemFinished(AgentEvent):
    """One element of a plan's `for_each` step finished (read `item.status`; `step.items[item.index]`)."""

    step: StepRecord
    item: ItemRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgressEvent(AgentEvent):
    """A transient status update from a tool (`AgentProcess.report_progress`)."""

    status: str


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageEvent(AgentEvent):
    """A message joined the conversation: the model's replies, tool results, or a message a tool sent to the
    user (`AgentProcess.send_message`, with `persistent=True`)."""

    message: Message
    persistent: bool = False
    """Whether it is a message for the user (a tool called `send_message`) rather than loop traffic."""


EventListener: TypeAlias = Callable[[AgentEvent], Any]


class EventHub:
    """A list of subscribers. `subscribe` returns a function that unsubscribes."""

    def __init__(self) -> None:
        self._listeners: list[EventListener] = []
        self._lock = threading.Lock()

    def subscribe(self, listener: EventListener) -> Callable[[], None]:
        """Call `listener(event)` for every event from now on; returns the function that stops it."""
        if not callable(listener):
            raise UserError(f'Event listener must be callable as listener(event), got {listener!r}.')
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def emit(self, event: AgentEvent) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(event)
            except Exception:
                logger.exception('Agent event listener %r raised on %s; ignored', listener, type(event).__name__)

    def __len__(self) -> int:
        return len(self._listeners)
