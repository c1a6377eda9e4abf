"""Watching a run: the caller's `on_event` handler and, while tracing is on, the run's spans, as kernel extensions.

`observers(on_event)` gives the extensions every run attaches for them (none when there is no handler and tracing
is off, so a plain run pays nothing).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal

from toolweave import _tracing
from toolweave.plan._kernel import Extension
from toolweave.plan._model import StepStatus
from toolweave.plan._record import EventHandler, ItemRecord, PlanEvent, StepRecord
from toolweave.plan._tracing import PlanTrace

__all__ = ('Events', 'observers')

logger = logging.getLogger('toolweave.plan')

_STEP_EVENTS: dict[str, Literal['step_started', 'step_parked', 'step_finished']] = {
    'running': 'step_started', 'parked': 'step_parked', 'succeeded': 'step_finished', 'failed': 'step_finished',
    'skipped': 'step_finished', 'cancelled': 'step_finished'}
_ITEM_ENDS = frozenset({'succeeded', 'failed', 'cancelled', 'parked'})


class Events(Extension):
    """Calls `on_event` as each step starts, parks and finishes, and as each `for_each` element ends (see
    `PlanEvent`). A handler that raises is logged and ignored: an observer cannot break a run."""

    def __init__(self, on_event: EventHandler, *, eager: bool = False) -> None:
        self.on_event = on_event
        self.t0 = 0.0
        self.eager = eager
        """Whether the steps that start now start while the plan is still being written (set by the stream)."""

    def transition(self, record: StepRecord, status: StepStatus, detail: Mapping[str, Any] | None,
                   item: ItemRecord | None) -> None:
        t0 = record.run_started_at
        if item is not None:
            if status in _ITEM_ENDS:
                self.tell(PlanEvent('item_finished', record, t0, item), record)
            return
        kind = _STEP_EVENTS.get(status)
        if kind is not None:
            self.tell(PlanEvent(kind, record, t0, eager=self.eager and kind == 'step_started'), record)

    def tell(self, event: PlanEvent, record: StepRecord) -> None:
        try:
            self.on_event(event)
        except Exception:
            logger.exception('on_event handler raised for step %r; ignored', record.id)


def observers(on_event: EventHandler | None) -> list[Extension]:
    """The extensions that report a run: its events (with a handler) and its spans (while tracing is on)."""
    found: list[Extension] = []
    if _tracing.ACTIVE is not None:
        found.append(PlanTrace(_tracing.ACTIVE))
    if on_event is not None:
        found.append(Events(on_event))
    return found
