"""The eager executor: a step starts as soon as the last step it refers to has finished; fail-forward.

Three parts, each in one place:

- **One step** (`_Run.run_step`): resolve the step's inputs, call its tool (within `step_timeout`), record the
  result. Whatever goes wrong in there (a bad reference, a raising or hanging tool, a value that cannot become
  JSON, a stray `CancelledError`) fails that step and no other.
- **Transitions** (`_Run.transition`): every change of a step's status (`running`, then `succeeded`, `failed`,
  `skipped` or `cancelled`) goes through this one method, which stamps the time and tells the observer.
- **Scheduling** (`_Run.release`, `_Run.worker`): a counter per step of the dependencies still unfinished; a step
  whose counter reaches zero joins the ready queue, longest chain of dependents first. Workers take steps from
  the queue. The task running the plan is the first worker; a worker that finds more steps ready than workers
  on their way wakes an idle worker or starts a new one (never more than `concurrency`), and a worker with
  nothing to do waits, idle, until a step is ready or the run is over. So steps that never suspend run back to
  back in one task, and a plan starts about as many tasks as the most steps it ever has running at once, not
  one per step.

Two hooks make a run durable and let it wait for people (both unused by a plain run):

- **A journal** (`StepJournal`): `transition` hands it every change of status, `release` every step that becomes
  ready, and a step's `started` row is flushed to the journal before its tool is called (write-ahead), so a step
  the journal does not show as started never ran. `execute(..., restore=...)` starts from the records of steps
  that ended in an earlier run: they are filled in and counted off their dependents, and only the rest run.
- **Parking**: a step whose reviewer raises `ApprovalPending`, or that is marked to park, moves to `parked`. It
  does not end: its dependents wait with it while everything else runs, and the run settles (returns) once
  nothing but parked steps and the steps behind them is left. `decisions` carries answers decided ahead (a
  whole-plan review, or decisions stored since the step parked); a step with one runs under that answer instead
  of asking its reviewers again.

A plan may also arrive while it runs (a model still writing it, `plan/_stream.py`): `open_run` gives a run with
no steps that cannot end before its plan is closed; `_Run.grow` adds the steps that have arrived, holding back
those that must wait for the whole plan, `_Run.close` takes the whole validated plan and releases them, and
`_Run.abandon` gives up. Steps are positions in the same per-step lists, counted off their dependencies the same
way: the rest of the plan counts as one more unfinished step until it is closed, and a held step as waiting for
one more dependency.

Failure policy: collect a per-step outcome. A failed step never cancels its siblings; its dependents are skipped,
transitively, each naming its first failed dependency. Only `ToolConfigurationError` and control-flow signals
stop the run: the other steps are cancelled and the exception propagates. A whole-plan timeout or an outer
cancellation records every unfinished step as `cancelled`.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

import anyio
import anyio.lowlevel

from toolweave import _tracing
from toolweave._json import compact
from toolweave.approval import ReviewDecision, describe_arguments, preset_review
from toolweave.exceptions import ApprovalPending, ControlFlowSignal, PlanStoreError, ToolConfigurationError
from toolweave.plan._expr import ExpressionError, evaluate, truthy
from toolweave.plan._model import EventHandler, MissingField, Plan, PlanEvent, PlanStep, StepStatus
from toolweave.plan._parse import excerpt
from toolweave.plan._record import ItemRecord, PlanRun, StepRecord, cut, jsonable, step_result
from toolweave.plan._refs import ResolveError
from toolweave.plan._scan import RefTable, Resolver, Rewrite
from toolweave.plan._tracing import PlanTrace
from toolweave.plan._validate import Prepared, StepKind
from toolweave.tools._context import ToolCallContext

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from toolweave.tools import Tool, ToolResult

__all__ = ('Ahead', 'Prefill', 'StepJournal', 'drive', 'execute', 'open_run')

logger = logging.getLogger('toolweave.plan')

_YIELD_EVERY = 64
"""Steps a worker runs back to back before it lets other tasks in: a plan of steps that never suspend would
otherwise hold the event loop (and its own timeout) until it ends."""
_AHEAD = 8
"""Workers on their way to the ready queue (woken, started, or letting other tasks in) at most. Each one that
arrives while steps are still waiting sends for the next, so a burst of steps that suspend gets workers a few at
a time per turn of the event loop, while steps that never suspend, which one worker runs back to back, do not
start workers that would find nothing left to do."""


_EVENT_KINDS: dict[str, Literal['step_started', 'step_parked']] = {'running': 'step_started', 'parked': 'step_parked'}
_ENDED = frozenset({'succeeded', 'failed', 'skipped', 'cancelled'})


class StepFailed(Exception):
    """Raised inside `run_step` to fail the step; the message is the step's error."""


class StepParked(Exception):
    """Raised inside `run_step` to park the step; the message says what it waits for."""

    def __init__(self, reason: str, detail: Mapping[str, Any]) -> None:
        super().__init__(reason)
        self.detail = detail


class StepJournal(Protocol):
    """Where a durable run writes its steps' transitions (see `toolweave.plan.durable`)."""

    def record(self, record: StepRecord, status: StepStatus, detail: Mapping[str, Any] | None) -> None:
        """Note that `record` moved to `status` (its fields already updated); written at the next `flush`."""

    def ready(self, record: StepRecord) -> None:
        """Note that `record`'s dependencies have all finished."""

    async def flush(self) -> None:
        """Make everything noted so far durable. Raises `PlanStoreError` when the store fails."""


class Prefill(NamedTuple):
    """A step that ended in an earlier run of the plan, as its journal recorded it."""

    status: StepStatus
    output: str | None
    value: Any
    is_text: bool
    from_output: bool
    error: str | None
    condition: str | None = None
    """A step skipped by a false `when`: the step whose condition was false."""


@dataclass(slots=True)
class Ahead:
    """What is known about some steps before the run starts: steps that ended in an earlier run, steps to park
    when they are ready (with why), and decisions made ahead for gated steps."""

    ended: Mapping[int, Prefill] = field(default_factory=dict[int, Prefill])
    park: Mapping[int, tuple[str, Mapping[str, Any]]] = field(default_factory=dict[int, tuple[str, Mapping[str, Any]]])
    decisions: Mapping[int, ReviewDecision] = field(default_factory=dict[int, ReviewDecision])
    rejected: str | None = None
    """Why the reviewer rejected the whole plan: then nothing runs."""


class _Run:
    """One run of a validated plan: the records, the dependency counters, the ready queue and the workers."""

    def __init__(self, prepared: Prepared, *, concurrency: int | None, step_timeout: float | None,
                 missing: MissingField, context: ToolCallContext, on_event: EventHandler | None,
                 journal: StepJournal | None = None, ahead: Ahead | None = None) -> None:
        plan = prepared.plan
        self.steps: Sequence[PlanStep] = plan.steps
        self.deps = prepared.deps
        self.waves = prepared.waves
        self.dependents = prepared.dependents
        self.rewrite = prepared.rewrite
        self.tools: list[Tool | None] = prepared.tools
        self.records = [StepRecord(step, index, self) for index, step in enumerate(plan.steps)]
        self.resolver = Resolver(prepared.table, self.records, missing, plan.dialect, prepared.external)
        self.kinds = prepared.kinds
        self.max_items = prepared.max_items
        self.concurrency = concurrency
        self.condition_origin: dict[int, str] = {}
        """Steps skipped because of a false `when`: the id of the step whose condition it was."""
        self.step_timeout = step_timeout
        self.context = context
        self.on_event = on_event
        self.t0 = 0.0
        # Scheduling state.
        self.waiting = [len(d) for d in self.deps]
        """Per step, how many of its dependencies have not finished yet."""
        self.unfinished = len(self.records)
        self.blocked: set[int] = set()
        """Steps with a dependency that did not succeed: skipped once all their dependencies have ended."""
        self.priority = _chain_lengths(self.deps, self.dependents)
        self.ready = [(-self.priority[i], i) for i, count in enumerate(self.waiting) if not count]
        """Steps ready to start, as a heap of (minus the length of their chain of dependents, position)."""
        heapq.heapify(self.ready)
        self.limit = concurrency or len(self.records) or 1
        self.workers = 1  # the task that runs the plan
        self.coming = 0
        """Workers woken or started that have not yet looked at the queue."""
        self.idle: list[anyio.Event] = []
        self.fatal: BaseException | None = None
        self.task_group: TaskGroup | None = None
        self.trace = None if _tracing.ACTIVE is None else PlanTrace(_tracing.ACTIVE, prepared)
        """The run's spans, while tracing is on."""
        self.journal = journal
        self.ahead = ahead
        self.stuck: set[int] = set()
        """Parked steps and the steps that depend on them: unfinished, but nothing more happens to them in this run."""
        self.settled_at = 0
        """The run is over when `unfinished` comes down to this (the number of stuck steps)."""
        # A plan that arrives while it runs (`open_run`).
        self.prepared = prepared
        """The plan as far as it has arrived (all of it, except in a run made by `open_run` before `close`)."""
        self.arriving = False
        """Whether more of the plan is to come: the rest of it counts as one unfinished step until `close`."""
        self.held: Collection[int] = ()
        """Steps that wait for the whole plan besides their dependencies (while `arriving`)."""
        self.abandoned: str | None = None
        """Why an arriving plan was given up (`abandon`): its unfinished steps are cancelled with this reason."""
        self.timeout: float | None = None
        self.deadline: anyio.CancelScope | None = None
        """The whole-plan timeout's scope; an arriving plan's clock starts when it is closed."""

    # --- the record's view of the run (`StepGraph`) ------------------------------------------------------------

    def arguments(self, index: int) -> Any:
        """Step `index`'s arguments with every reference replaced (each reading gets fresh copies)."""
        kind = self.kinds.get(index) if self.kinds else None
        if kind is not None and kind.source is not None:
            return self.resolve_field(index, kind.source, kind.source_rewrite)
        if kind is not None and kind.for_each is not None:
            items = self.records[index].items
            return None if items is None else [item.arguments for item in items]
        given = self.steps[index].arguments
        rewrite = self.rewrite[index]
        return self.resolver.resolve(given, rewrite, self.steps[index].id) if rewrite else given

    # --- transitions --------------------------------------------------------------------------------------------

    def transition(self, record: StepRecord, status: StepStatus, error: str | None = None,
                   detail: Mapping[str, Any] | None = None) -> None:
        """Move `record` to `status` (stamping the time), tell the journal and the observer: the one place a step's
        status changes. `detail` is what the journal keeps beside the status (why a step parked, whose condition
        skipped it)."""
        now = perf_counter() - self.t0
        if status == 'running':
            record.started_at = now
        elif status == 'parked':
            pass
        elif status != 'cancelled' or record.status == 'running':
            record.ended_at = now
        was_running = record.status == 'running'
        record.status = status
        record.error = error
        if self.trace is not None:
            self.trace.transition(record, status, error)
        if self.journal is not None:
            if status == 'cancelled' and was_running:
                detail = {'started': True}
            self.journal.record(record, status, detail)
        if self.on_event is not None:
            try:
                self.on_event(PlanEvent(_EVENT_KINDS.get(status, 'step_finished'), record, self.t0))
            except Exception:
                logger.exception('on_event handler raised for step %r; ignored', record.id)

    # --- one step -----------------------------------------------------------------------------------------------

    async def run_step(self, index: int) -> None:
        """Run one ready step to its end: resolve its inputs, call its tool, record the outcome."""
        ahead = self.ahead
        if ahead is not None and index in ahead.park:
            reason, detail = ahead.park[index]
            self.park(index, reason, detail)
            return
        if self.kinds:
            kind = self.kinds.get(index)
            if kind is not None and await self.run_kind(index, kind):
                return
        record = self.records[index]
        self.transition(record, 'running')
        if self.journal is not None and not await self.flushed():
            return
        decision = ahead.decisions.get(index) if ahead is not None else None
        try:
            arguments = self.inputs(index)
            if decision is not None:
                arguments = self.decided(index, decision, arguments)
            record.called = True
            result = await self.call_decided(index, arguments, decision)
            if result.error is not None:
                raise StepFailed(f'Tool execution failed: {result.error}' if result.raised else result.error)
            try:
                (record.output, record.value, record.ref_value, record.is_text,
                 record.from_output) = step_result(result)
            except ValueError as exc:
                raise StepFailed(str(exc)) from None
        except StepFailed as exc:
            self.transition(record, 'failed', str(exc))
            self.release(index, ok=False)
        except StepParked as exc:
            record.called = False
            self.park(index, str(exc), exc.detail)
        else:
            self.transition(record, 'succeeded')
            self.release(index, ok=True)

    def decided(self, index: int, decision: ReviewDecision, arguments: Any) -> Any:
        """The arguments step `index` runs with under a decision made ahead; a rejection fails the step."""
        if decision.kind == 'exit_early':
            reason = f' ({decision.reason})' if decision.reason else ''
            raise StepFailed(f'Rejected by reviewer: {describe_arguments(arguments)}{reason}')
        return decision.revised if decision.kind == 'edit' else arguments

    async def flushed(self) -> bool:
        """Write the journal ahead of a tool call; when the store fails, stop the run (nothing unrecorded runs)."""
        assert self.journal is not None
        try:
            await self.journal.flush()
        except PlanStoreError as exc:
            self.stop(exc)
            return False
        return True

    def park(self, index: int, reason: str, detail: Mapping[str, Any]) -> None:
        """Step `index` waits for a decision: it and every step that depends on it stay unfinished, and the run
        settles once nothing else is left."""
        self.transition(self.records[index], 'parked', reason, detail)
        stuck = self.stuck
        todo = [index]
        while todo:
            step = todo.pop()
            if step not in stuck:
                stuck.add(step)
                todo.extend(self.dependents[step])
        self.settled_at = len(stuck)
        if self.unfinished == self.settled_at:
            self.wake_all()

    # --- steps that select, loop or have a condition ------------------------------------------------------------

    async def run_kind(self, index: int, kind: StepKind) -> bool:
        """A step with `when`, `from`/`select` or `for_each`: the condition first (false: skipped, not failed),
        then an expression instead of a tool call, or one tool call per element. Returns whether the step is
        done; `False` leaves a tool step whose condition holds to `run_step`."""
        record = self.records[index]
        try:
            if kind.when is not None and not await self.condition_holds(index, kind):
                return True
            if kind.source is None and kind.for_each is None:
                return False
            self.transition(record, 'running')
            if kind.for_each is not None and self.journal is not None and not await self.flushed():
                return True
            if kind.source is not None:
                record.called = True
                found = self.resolve_field(index, kind.source, kind.source_rewrite)
                self.record_value(record, found if kind.select is None else await self.evaluate(index, kind, found))
            else:
                await self.run_items(index, kind)
        except StepFailed as exc:
            self.transition(record, 'failed', str(exc))
            self.release(index, ok=False)
        except StepParked as exc:
            record.called = False
            self.park(index, str(exc), exc.detail)
        else:
            self.transition(record, 'succeeded')
            self.release(index, ok=True)
        return True

    async def condition_holds(self, index: int, kind: StepKind) -> bool:
        """Evaluate the step's `when`; when false, skip the step (and, through `release`, its dependents)."""
        assert kind.when is not None
        step = self.steps[index]
        found = self.resolve_field(index, kind.when_source, kind.when_rewrite)
        try:
            result = await evaluate(kind.when, found)
        except ExpressionError as exc:
            raise StepFailed(f'Condition of step {step.id!r} could not be evaluated: {exc}') from None
        if truthy(result):
            return True
        record = self.records[index]
        record.condition_skipped = True
        self.condition_origin[index] = step.id
        select = step.when.select if step.when is not None else '@'
        self.transition(record, 'skipped', f'Skipped because its condition is false: {select!r} gave '
                                           f'{excerpt(result)}', {'condition': step.id})
        self.release(index, ok=False)
        return False

    def resolve_field(self, index: int, value: Any, rewrite: Rewrite) -> Any:
        """A `from`, `for_each` or `when.from` value with its references replaced."""
        if not rewrite:
            return jsonable(value)
        try:
            return self.resolver.resolve(value, rewrite, self.steps[index].id)
        except ResolveError as exc:
            raise StepFailed(str(exc)) from None

    async def evaluate(self, index: int, kind: StepKind, value: Any) -> Any:
        assert kind.select is not None
        try:
            return await evaluate(kind.select, value)
        except ExpressionError as exc:
            raise StepFailed(f'select of step {self.steps[index].id!r} failed: {exc}') from None

    @staticmethod
    def record_value(record: StepRecord, value: Any) -> None:
        """Record JSON data computed by the plan itself (a selection, a `for_each` list) as the step's value."""
        try:
            data = jsonable(value)
            record.output = compact(data)
        except (ValueError, TypeError) as exc:
            raise StepFailed(f'The value cannot be recorded as JSON: {exc}') from None
        record.value = record.ref_value = data
        record.is_text = False
        record.from_output = True  # the output is the value's JSON: the summary shows the value as it is

    async def run_items(self, index: int, kind: StepKind) -> None:
        """Call the step's tool once per element of its list, concurrently (at most `concurrency` at once); the
        step's value is the list of results in list order. Every element runs; if any fails, the step fails
        naming them, and each element's outcome stays in `record.items`."""
        step = self.steps[index]
        record = self.records[index]
        elements = self.resolve_field(index, kind.for_each, kind.for_each_rewrite)
        if not isinstance(elements, list):
            raise StepFailed(f'for_each of step {step.id!r} must be a list, got {_kind_of(elements)} '
                             f'{excerpt(elements)}. Refer to a list, or select one first (for example "from": '
                             '"$ref:STEP", "select": "items").')
        if len(elements) > self.max_items:
            raise StepFailed(f'for_each of step {step.id!r} has {len(elements)} elements, more than the limit of '
                             f'{self.max_items}. Narrow the list with a select step first (for example "[:20]"), '
                             'or raise `max_items`.')
        items = record.items = [ItemRecord(i) for i in range(len(elements))]
        record.called = True
        limiter = anyio.CapacityLimiter(self.concurrency) if self.concurrency else None
        parked: list[StepParked] = []
        async with anyio.create_task_group() as group:
            for item, element in zip(items, elements, strict=True):
                group.start_soon(self.run_item, index, item, element, limiter, parked, group.cancel_scope)
        if parked:  # one element waits for a decision: the whole step does (the others were stopped)
            raise parked[0]
        failed = [item for item in items if item.status != 'succeeded']
        if failed:
            listed = '; '.join(f'item {item.index}: {cut(item.error or item.status, 300)}' for item in failed[:5])
            more = f'; and {len(failed) - 5} more' if len(failed) > 5 else ''
            raise StepFailed(f'{len(failed)} of {len(items)} for_each items failed: {listed}{more}')
        self.record_value(record, [item.value for item in items])

    async def run_item(self, index: int, item: ItemRecord, element: Any, limiter: anyio.CapacityLimiter | None,
                       parked: list[StepParked], scope: anyio.CancelScope) -> None:
        record = self.records[index]
        try:
            if limiter is not None:
                async with limiter:
                    await self.call_item(index, item, element)
            else:
                await self.call_item(index, item, element)
        except StepFailed as exc:
            item.status, item.error = 'failed', str(exc)
        except StepParked as exc:
            item.status, item.error = 'parked', str(exc)
            parked.append(exc)
            scope.cancel()
        finally:
            if item.status in ('pending', 'running'):
                item.status, item.error = 'cancelled', 'Cancelled with its step'
            item.ended_at = perf_counter() - self.t0
            if self.on_event is not None:
                try:
                    self.on_event(PlanEvent('item_finished', record, self.t0, item))
                except Exception:
                    logger.exception('on_event handler raised for step %r item %d; ignored', record.id, item.index)

    async def call_item(self, index: int, item: ItemRecord, element: Any) -> None:
        item.started_at = perf_counter() - self.t0
        item.status = 'running'
        step = self.steps[index]
        resolver = self.resolver
        resolver.item, resolver.index = element, item.index  # resolution below never awaits: no other item interleaves
        try:
            item.arguments = resolver.resolve(step.arguments, self.rewrite[index], step.id) if self.rewrite[
                index] else step.arguments
        except ResolveError as exc:
            raise StepFailed(str(exc)) from None
        finally:
            resolver.item = None
        decision = self.ahead.decisions.get(index) if self.ahead is not None else None
        if decision is not None:
            item.arguments = self.decided(index, decision, item.arguments)
        result = await self.call_decided(index, item.arguments, decision)
        if result.error is not None:
            raise StepFailed(f'Tool execution failed: {result.error}' if result.raised else result.error)
        try:
            outcome = step_result(result)
        except ValueError as exc:
            raise StepFailed(str(exc)) from None
        item.output, item.value, item.status = outcome.output, outcome.ref_value, 'succeeded'

    def inputs(self, index: int) -> Any:
        given = self.steps[index].arguments
        if type(given) is str:  # JSON text that did not parse: this step fails, independent steps still run
            raise StepFailed(_deserialize_error(self.steps[index].tool, given))
        rewrite = self.rewrite[index]
        if not rewrite:
            return given
        try:
            return self.resolver.resolve(given, rewrite, self.steps[index].id)
        except ResolveError as exc:
            raise StepFailed(str(exc)) from None

    async def call_decided(self, index: int, arguments: Any, decision: ReviewDecision | None) -> ToolResult:
        """`call`, under a decision made ahead for the step (a whole-plan review, a stored decision): that
        decision answers the call's own review without asking anyone."""
        if decision is None:
            return await self.call(index, arguments)
        tool = self.tools[index]
        assert tool is not None
        with preset_review(tool.name, decision):
            return await self.call(index, arguments)

    async def call(self, index: int, arguments: Any) -> ToolResult:
        """Call step `index`'s tool within `step_timeout`; a stray `CancelledError` fails the step."""
        tool = self.tools[index]
        assert tool is not None  # only select steps have none, and they call nothing
        try:
            if self.step_timeout is None:
                return await tool.call(arguments, self.context)
            with anyio.move_on_after(self.step_timeout) as scope:
                return await tool.call(arguments, self.context)
            assert scope.cancelled_caught
            raise StepFailed(f'Tool execution failed: step {self.steps[index].id!r} timed out after '
                             f'{self.step_timeout:g} s (step_timeout)')
        except ApprovalPending as exc:
            raise StepParked(f'Waiting for approval: {exc.reason}', _pending_detail(exc)) from None
        except (ToolConfigurationError, ControlFlowSignal) as exc:
            self.stop(exc)
            raise StepFailed(f'{type(exc).__name__}: {exc}') from None
        except asyncio.CancelledError as exc:
            if not _is_stray(exc):
                raise
            raise StepFailed('Tool execution failed: the tool raised CancelledError without being cancelled') from None

    # --- scheduling ---------------------------------------------------------------------------------------------

    def release(self, index: int, *, ok: bool) -> None:
        """Step `index` has ended: count it off its dependents, queue those now ready and skip (transitively)
        those with a dependency that did not succeed."""
        ended = [(index, ok)]
        waiting = self.waiting
        while ended:
            index, ok = ended.pop()
            self.unfinished -= 1
            for child in self.dependents[index]:
                if not ok:
                    self.blocked.add(child)
                waiting[child] -= 1
                if waiting[child]:
                    continue
                if child in self.blocked:
                    self.skip(child)
                    ended.append((child, False))
                else:
                    heapq.heappush(self.ready, (-self.priority[child], child))
                    if self.journal is not None:
                        self.journal.ready(self.records[child])
        if self.unfinished == self.settled_at:
            self.wake_all()

    def skip(self, index: int) -> None:
        records = self.records
        culprit = next(d for d in self.deps[index] if records[d].status != 'succeeded')
        origin = self.condition_origin.get(culprit) if self.condition_origin else None
        if origin is None:
            self.transition(records[index], 'skipped', f"Skipped because dependency '{records[culprit].id}' failed")
            return
        self.condition_origin[index] = origin
        records[index].condition_skipped = True
        self.transition(records[index], 'skipped', f"Skipped because the condition of step '{origin}' is false",
                        {'condition': origin})

    def stop(self, exc: BaseException) -> None:
        """A step raised a configuration error or a control-flow signal: cancel the run, then re-raise `exc`."""
        if self.fatal is None:
            self.fatal = exc
        assert self.task_group is not None
        self.task_group.cancel_scope.cancel()

    def restore(self, ended: Mapping[int, Prefill]) -> None:
        """Start from the steps that ended in an earlier run: fill their records, count them off their dependents,
        queue the steps now ready and skip those behind a step that did not succeed."""
        records = self.records
        for index, fill in ended.items():
            record = records[index]
            record.status, record.output, record.ref_value, record.is_text, record.from_output, record.error = (
                fill.status, fill.output, fill.value, fill.is_text, fill.from_output, fill.error)
            record.value = fill.value
            record.called = fill.status == 'succeeded'
            if fill.condition is not None:
                record.condition_skipped = True
                self.condition_origin[index] = fill.condition
        self.unfinished = len(records) - len(ended)
        skipped: list[tuple[int, int]] = []
        ready: list[tuple[int, int]] = []
        for index, deps in enumerate(self.deps):
            if index in ended:
                continue
            self.waiting[index] = sum(1 for d in deps if d not in ended)
            if any(d in ended and records[d].status != 'succeeded' for d in deps):
                self.blocked.add(index)
            if not self.waiting[index]:
                (skipped if index in self.blocked else ready).append((-self.priority[index], index))
        heapq.heapify(ready)
        self.ready = ready
        for _, index in skipped:
            self.skip(index)
            self.release(index, ok=False)

    async def worker(self) -> None:
        streak = 0
        while self.unfinished > self.settled_at and self.fatal is None:
            if not self.ready:
                await self.wait_idle()
                continue
            index = heapq.heappop(self.ready)[1]
            if self.ready:
                self.staff()
            if self.trace is None:
                await self.run_step(index)
            else:
                await self.trace.step(self.records[index], self.run_step)
            streak += 1
            if streak == _YIELD_EVERY:
                streak = 0
                self.coming += 1  # back for more steps in a moment: no need to send for another worker
                await anyio.lowlevel.checkpoint()
                self.coming -= 1

    async def new_worker(self) -> None:
        self.coming -= 1
        await self.worker()

    async def wait_idle(self) -> None:
        if self.journal is not None:  # what finished is written before the worker pauses
            if not await self.flushed():
                return
            if self.ready or self.unfinished == self.settled_at or self.fatal is not None:
                return  # the run moved on while the journal was written
        event = anyio.Event()
        self.idle.append(event)
        await event.wait()
        self.coming -= 1

    def staff(self) -> None:
        """Send for workers to take the steps waiting in the queue: wake idle ones, or start new ones."""
        wanted = min(len(self.ready), _AHEAD) - self.coming
        while wanted > 0 and self.idle:
            self.coming += 1
            self.idle.pop().set()
            wanted -= 1
        assert self.task_group is not None
        while wanted > 0 and self.workers < self.limit:
            self.workers += 1
            self.coming += 1
            self.task_group.start_soon(self.new_worker)
            wanted -= 1

    def wake_all(self) -> None:
        while self.idle:
            self.coming += 1
            self.idle.pop().set()

    # --- a plan that arrives while it runs (`open_run`) ----------------------------------------------------------

    def grow(self, prepared: Prepared, held: Collection[int]) -> None:
        """More of the plan has arrived: adopt `prepared`, the plan so far (validated; the known steps at the same
        positions), and queue the steps now ready, except those `held` for the whole plan."""
        self.adopt(prepared)
        self.held = held
        self.recount()

    def close(self, prepared: Prepared) -> None:
        """The whole plan has arrived and validated: adopt it, release the held steps, start the whole-plan
        timeout, and let the run end once its steps have."""
        self.adopt(prepared)
        self.arriving = False
        self.held = ()
        self.recount()
        if self.trace is not None:
            self.trace.describe(prepared)
        if self.deadline is not None and self.timeout is not None:
            self.deadline.deadline = anyio.current_time() + self.timeout

    def abandon(self, reason: str) -> None:
        """Give up on a plan that is still arriving: cancel what runs, and record every unfinished step as
        cancelled with `reason`."""
        if self.abandoned is None:
            self.abandoned = reason
        if self.task_group is not None:
            self.task_group.cancel_scope.cancel()

    def adopt(self, prepared: Prepared) -> None:
        """Take the plan's graph from `prepared`: the steps known so far at the same positions (a step that has
        not started takes its new form: a held step arrives as a placeholder), then the new ones."""
        plan = prepared.plan
        self.prepared = prepared
        self.steps = plan.steps
        self.deps, self.waves, self.dependents = prepared.deps, prepared.waves, prepared.dependents
        self.rewrite, self.tools, self.kinds, self.max_items = (prepared.rewrite, prepared.tools, prepared.kinds,
                                                               prepared.max_items)
        self.resolver.table, self.resolver.external = prepared.table, prepared.external
        records = self.records
        known = len(records)
        for record, step in zip(records, plan.steps, strict=False):
            record.step = step
        records.extend(StepRecord(step, index, self) for index, step in enumerate(plan.steps[known:], known))
        self.waiting.extend([0] * (len(records) - known))
        self.priority = _chain_lengths(self.deps, self.dependents)
        self.limit = self.concurrency or len(records) or 1

    def recount(self) -> None:
        """Count every step that has not started off its dependencies again, from the records: queue the ones
        now ready (longest chain first), skip those behind a step that did not succeed; a held step waits for one
        more. Then send for workers, or end the run if nothing is left."""
        records, waiting, held = self.records, self.waiting, self.held
        unfinished = 0
        ready: list[tuple[int, int]] = []
        behind: list[int] = []
        blocked: set[int] = set()
        for index, deps in enumerate(self.deps):
            status = records[index].status
            if status in _ENDED:
                continue
            unfinished += 1
            if status != 'pending':  # running or parked: it ends (or stays stuck) on its own
                continue
            count = 1 if index in held else 0
            for dep in deps:
                if records[dep].status not in _ENDED:
                    count += 1
                elif records[dep].status != 'succeeded':
                    blocked.add(index)
            waiting[index] = count
            if not count:
                if index in blocked:
                    behind.append(index)
                else:
                    ready.append((-self.priority[index], index))
        self.unfinished = unfinished + self.arriving
        self.blocked = blocked
        heapq.heapify(ready)
        self.ready = ready
        self.restuck()
        for index in behind:
            self.skip(index)
            self.release(index, ok=False)
        if self.unfinished == self.settled_at:
            self.wake_all()
        elif self.ready and self.task_group is not None:
            self.staff()

    def restuck(self) -> None:
        """The parked steps and everything that depends on them, with the graph as it is now."""
        stuck: set[int] = set()
        todo = [index for index, record in enumerate(self.records) if record.status == 'parked']
        while todo:
            step = todo.pop()
            if step not in stuck:
                stuck.add(step)
                todo.extend(self.dependents[step])
        self.stuck = stuck
        self.settled_at = len(stuck)

    def cancel_unfinished(self, reason: str) -> None:
        for record in self.records:
            if record.status in ('pending', 'running'):
                self.transition(record, 'cancelled', reason)


def _pending_detail(exc: ApprovalPending) -> dict[str, Any]:
    """What a journal keeps about a parked review: the request the reviewer could not answer yet."""
    request = getattr(exc, 'request', None)
    if request is None:
        return {}
    return {'tool': request.tool_name, 'description': request.description,
            'arguments': request.arguments if isinstance(request.arguments, (str, Mapping)) else None}


def _kind_of(value: Any) -> str:
    return {dict: 'an object', str: 'a string', bool: 'a boolean', type(None): 'null'}.get(type(value), 'a number')


def _is_stray(exc: BaseException) -> bool:
    """Whether a `CancelledError` was raised by the tool itself rather than delivered to cancel this task."""
    if anyio.get_cancelled_exc_class() is not asyncio.CancelledError:
        return True  # trio cancels with its own exception class
    task = asyncio.current_task()
    return task is not None and not task.cancelling()


def _deserialize_error(tool: str, text: str) -> str:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        detail = f'{exc.msg} at line {exc.lineno} column {exc.colno}'
    else:  # pragma: no cover - only unparseable text is kept as a string
        detail = 'not a JSON object'
    return (f"Failed to deserialize arguments for tool '{tool}': {detail}. Send the arguments as a JSON object, "
            'e.g. {"name": "value"}.')


def _chain_lengths(deps: Sequence[tuple[int, ...]], dependents: Sequence[tuple[int, ...]]) -> list[int]:
    """Per step, the number of steps on the longest chain from it to the end of the plan."""
    n = len(deps)
    pending = [len(d) for d in dependents]
    length = [1] * n
    queue = [i for i in range(n) if not pending[i]]
    for node in queue:  # the list grows while we walk it
        here = length[node] + 1
        for parent in deps[node]:
            if length[parent] < here:
                length[parent] = here
            pending[parent] -= 1
            if not pending[parent]:
                queue.append(parent)
    return length


async def execute(
    prepared: Prepared,
    *,
    concurrency: int | None = None,
    step_timeout: float | None = None,
    timeout: float | None = None,  # noqa: ASYNC109
    missing_field: MissingField = 'error',
    context: ToolCallContext = ToolCallContext.EMPTY,
    on_event: EventHandler | None = None,
    max_output_chars: int | None = None,
    journal: StepJournal | None = None,
    ahead: Ahead | None = None,
) -> PlanRun:
    """Run a validated plan and return its record (see the module docstring for `journal` and `ahead`)."""
    run = _Run(prepared, concurrency=concurrency, step_timeout=step_timeout, missing=missing_field,
               context=context, on_event=on_event, journal=journal, ahead=ahead)
    run.t0 = perf_counter()
    if ahead is not None and ahead.ended:
        run.restore(ahead.ended)
    if journal is not None:
        for _, index in run.ready:
            journal.ready(run.records[index])
    if ahead is not None and ahead.rejected is not None:
        run.cancel_unfinished(f'Cancelled: the reviewer rejected the plan ({ahead.rejected})')
        run.unfinished = 0
    return await drive(run, timeout=timeout, max_output_chars=max_output_chars)


def open_run(*, concurrency: int | None, step_timeout: float | None, missing_field: MissingField,
             context: ToolCallContext, on_event: EventHandler | None, max_items: int) -> _Run:
    """A run of a plan that is still arriving, with no steps yet: `grow` adds the steps that arrive, `close` takes
    the whole plan, `abandon` gives up; `drive` runs it meanwhile, and it does not end before one of the last two.
    Its clock (`started_at`, step times) starts now; its timeout when it is closed."""
    nothing = Prepared(Plan(()), [], [], RefTable(), [], [], [], {}, [], max_items)
    run = _Run(nothing, concurrency=concurrency, step_timeout=step_timeout, missing=missing_field, context=context,
               on_event=on_event)
    run.arriving = True
    run.unfinished = 1  # the rest of the plan
    run.t0 = perf_counter()
    return run


async def drive(run: _Run, *, timeout: float | None, max_output_chars: int | None) -> PlanRun:  # noqa: ASYNC109
    """Run `run` until every step has ended (or is stuck behind a parked one) and return its record."""
    run.timeout = timeout
    with anyio.move_on_after(None if run.arriving else timeout) as deadline:
        run.deadline = deadline
        try:
            async with anyio.create_task_group() as task_group:
                run.task_group = task_group
                if run.abandoned is None:
                    await run.worker()
        except BaseExceptionGroup as group:  # a `BaseException` that is not ours (an interrupt): unwrap a lone one
            raise group.exceptions[0] if len(group.exceptions) == 1 else group from None
        finally:
            if run.fatal is not None:
                reason = f'Cancelled: the run stopped because a step raised {type(run.fatal).__name__}'
            elif run.abandoned is not None:
                reason = run.abandoned
            elif deadline.cancel_called:
                reason = f'Cancelled: the plan timed out after {timeout:g} s (timeout)'
            else:
                reason = 'Cancelled: the plan run was cancelled'
            if run.fatal is not None or run.unfinished > run.settled_at or deadline.cancel_called:
                run.cancel_unfinished(reason)
            if run.trace is not None:
                run.trace.close(run.records, stopped=run.fatal, reason=reason)
    if run.fatal is not None:
        raise run.fatal
    prepared = run.prepared
    levels: list[list[str]] = [[] for _ in range(max(prepared.waves, default=-1) + 1)]
    for step, wave in zip(prepared.plan.steps, prepared.waves, strict=True):
        levels[wave].append(step.id)
    return PlanRun(prepared.plan, tuple(run.records), tuple(map(tuple, levels)), run.t0,
                   perf_counter() - run.t0, max_output_chars=max_output_chars)
