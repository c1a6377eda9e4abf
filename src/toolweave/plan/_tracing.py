"""A plan run's spans: `execute_plan`, and under it one `plan_step {id}` span per step.

The executor creates a `PlanTrace` only while tracing is on, and tells it three things: a worker runs a step
(`step`: the step's span starts, and is current while the step runs, so that the step's `execute_tool` span nests
under it), a step's status changed (`transition`: the span records the status and the error), and the run is over
(`close`). A step's span ends when its step settles; a step cancelled while it runs settles when the run records
it as cancelled, just before `close`; a step that never runs (skipped, cancelled before it started) gets a span
of no length when it settles. The plan's span ends last, with the number of steps per status.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from time import time_ns
from typing import TYPE_CHECKING, Any, Final

from toolweave._tracing import SpanScope, Tracing

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from toolweave.plan._model import StepStatus
    from toolweave.plan._record import StepRecord
    from toolweave.plan._validate import Prepared

__all__ = ('PlanTrace',)

PLAN: Final = 'toolweave.plan'
STEP: Final = 'toolweave.plan.step'
SETTLED: Final = frozenset({'succeeded', 'failed', 'skipped', 'cancelled'})
"""The statuses a step ends in."""


class PlanTrace:
    """The spans of one plan run (see the module docstring)."""

    __slots__ = ('_context', '_open', '_span', '_tracing')

    def __init__(self, tracing: Tracing, prepared: Prepared) -> None:
        from opentelemetry import trace

        self._tracing = tracing
        self._span = tracing.start('execute_plan', _plan_attributes(prepared))
        self._context = trace.set_span_in_context(self._span)
        self._open: dict[int, Span] = {}
        """The spans of the steps that started and have not settled, by position."""

    def describe(self, prepared: Prepared) -> None:
        """The whole plan has arrived (a plan whose steps started while it was written): say what it is."""
        self._span.set_attributes(_plan_attributes(prepared))

    async def step(self, record: StepRecord, run_step: Callable[[int], Awaitable[None]]) -> None:
        """Run the step of `record` (`run_step(index)`) inside its span."""
        span = self._open[record.index] = self._start(record)
        try:
            with SpanScope(self._tracing, span, end=False):
                await run_step(record.index)
        finally:
            if record.status in SETTLED:
                del self._open[record.index]
                span.end()

    def transition(self, record: StepRecord, status: StepStatus, error: str | None) -> None:
        """Record a step's new status on its span; a step that settles without having started gets a span of no
        length."""
        span = self._open.get(record.index)
        if span is not None:
            self._record(span, status, error)
        elif status in SETTLED:
            now = time_ns()
            span = self._start(record, now)
            self._record(span, status, error)
            span.end(now)

    def close(self, records: Sequence[StepRecord], *, stopped: BaseException | None, reason: str) -> None:
        """End the step spans still open and the plan's span, with the number of steps per status. `stopped` is
        the exception that stopped the run, if one did; `reason` says why steps were cancelled, if any were."""
        for span in self._open.values():
            span.end()
        self._open.clear()
        counts: dict[str, int] = {}
        for record in records:
            counts[record.status] = counts.get(record.status, 0) + 1
        self._span.set_attributes({f'{PLAN}.{status}': count for status, count in counts.items()})
        if stopped is not None:
            self._tracing.failed(self._span, type(stopped).__qualname__, f'{type(stopped).__name__}: {stopped}')
        elif counts.get('cancelled'):
            self._tracing.failed(self._span, 'cancelled', reason)
        self._span.end()

    def _start(self, record: StepRecord, at: int | None = None) -> Span:
        attributes: dict[str, Any] = {f'{STEP}.id': record.id, f'{STEP}.tool': record.tool,
                                      f'{STEP}.index': record.index, f'{STEP}.wave': record.wave}
        return self._tracing.start(f'plan_step {record.id}', attributes, parent=self._context, at=at)

    def _record(self, span: Span, status: StepStatus, error: str | None) -> None:
        if status == 'running':  # the span's own start says so
            return
        span.set_attribute(f'{STEP}.status', status)
        if error is not None:
            span.set_attribute(f'{STEP}.error', self._tracing.cut(error))
            if status in ('failed', 'cancelled'):
                self._tracing.failed(span, status, error)


def _plan_attributes(prepared: Prepared) -> dict[str, Any]:
    plan = prepared.plan
    return {f'{PLAN}.steps': len(plan.steps), f'{PLAN}.waves': max(prepared.waves, default=-1) + 1,
            f'{PLAN}.dialect': plan.dialect}
