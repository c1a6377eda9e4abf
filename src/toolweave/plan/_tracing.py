"""A plan run's spans: `execute_plan`, and under it one `plan_step {id}` span per step.

A run attaches a `PlanTrace` (a kernel extension) only while tracing is on. A step's span starts when the step is
taken up (`reviewing` or `running`), records each later status and the error, and is current around each call of
the step's tool (`call`), so that the tool's `execute_tool` span nests under it. It ends when its step settles; a
step cancelled while it runs settles when the run records it as cancelled, just before `finish`; a step that never
runs (skipped, cancelled before it started) gets a span of no length when it settles. The plan's span starts with
the run and ends last, with what the plan is and the number of steps per status.
"""

from __future__ import annotations

from collections.abc import Mapping
from time import time_ns
from typing import TYPE_CHECKING, Any, Final

from toolweave._tracing import SpanScope, Tracing
from toolweave.plan._kernel import Call, Extension, Run

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from toolweave.plan._model import StepStatus
    from toolweave.plan._record import ItemRecord, StepRecord
    from toolweave.plan._validate import Prepared
    from toolweave.tools import ToolResult

__all__ = ('PlanTrace',)

PLAN: Final = 'toolweave.plan'
STEP: Final = 'toolweave.plan.step'
SETTLED: Final = frozenset({'succeeded', 'failed', 'skipped', 'cancelled'})
"""The statuses a step ends in."""


class PlanTrace(Extension):
    """The spans of one plan run (see the module docstring)."""

    def __init__(self, tracing: Tracing) -> None:
        from opentelemetry import trace

        self._tracing = tracing
        self._span = tracing.start('execute_plan', {})
        self._context = trace.set_span_in_context(self._span)
        self._open: dict[int, Span] = {}
        """The spans of the steps that started and have not settled, by position."""

    def transition(self, record: StepRecord, status: StepStatus, detail: Mapping[str, Any] | None,
                   item: ItemRecord | None) -> None:
        """Start the step's span when it is taken up; record each status on it; end it when the step settles (a
        step that settles without having started gets a span of no length)."""
        if item is not None:
            return
        span = self._open.get(record.index)
        if span is None and (status == 'running' or status == 'reviewing'):
            span = self._open[record.index] = self._start(record)
        if span is not None:
            self._record(span, status, record.error)
            if status in SETTLED:
                del self._open[record.index]
                span.end()
        elif status in SETTLED:
            now = time_ns()
            span = self._start(record, now)
            self._record(span, status, record.error)
            span.end(now)

    async def call(self, record: StepRecord, item: ItemRecord | None, arguments: Any, proceed: Call) -> ToolResult:
        """Each call of the step's tool runs inside the step's span."""
        span = self._open.get(record.index)
        if span is None:
            return await proceed(arguments)
        with SpanScope(self._tracing, span, end=False):
            return await proceed(arguments)

    def finish(self, run: Run, stopped: BaseException | None, reason: str) -> None:
        """End the step spans still open and the plan's span, with the number of steps per status."""
        for span in self._open.values():
            span.end()
        self._open.clear()
        self._span.set_attributes(_plan_attributes(run.prepared))
        counts: dict[str, int] = {}
        for record in run.records:
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
