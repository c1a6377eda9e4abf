"""The plan kernel: a validated plan's steps, each started as soon as the steps it refers to have finished.

The kernel knows plans, dependencies, scheduling, cancellation and the step record; it knows nothing of stores,
workers, reviewers, streams or spans. Those attach as `Extension`s (the interface below), each in its own module
that imports this one:

- **One step** (`Run.run_step`): resolve the step's inputs, admit the call (`Extension.admit`: a reviewer may
  edit, reject or park it), mark it `running`, make that durable (`Extension.sync`), call its tool through the
  extensions' `call` hooks within `step_timeout`, record the outcome. Whatever goes wrong in there (a bad
  reference, a raising or hanging tool, a value that cannot become JSON, a stray `CancelledError`) fails that
  step and no other. A step with `when`, `from`/`select` or `for_each` runs through `run_kind` (a condition, an
  expression instead of a call, one call per element of a list).
- **Transitions** (`Run.transition`): every change of a step's (or a `for_each` element's) status goes through
  this one method, which stamps the time and tells the extensions.
- **Scheduling** (`Run.release`, `Run.worker`): a counter per step of the dependencies still unfinished; a step
  whose counter reaches zero joins the ready heap, longest chain of dependents first. Workers take steps from the
  heap. The task running the plan is the first worker; a worker that finds more steps ready than workers on their
  way wakes an idle worker or starts a new one (never more than `concurrency`), and a worker with nothing to do
  waits, idle, until a step is ready or the run is over. Steps that never suspend run back to back in one task;
  a plan starts about as many tasks as the most steps it ever has running at once, not one per step. On asyncio
  a worker is a bare task of the event loop (anyio's task group costs several times that per task); on trio, a
  task of the run's task group. Either way the run cancels and awaits its workers before it returns.

What a run may know before it starts: steps that ended in an earlier run (`ended`, with the elements of unfinished
`for_each` steps that ended, `items`), and steps to park as soon as they are ready (`park`). A parked step does not
end: it and the steps that depend on it are *stuck*, and the run settles (returns) once nothing else is left.

A plan may also arrive while it runs (a model still writing it): `Run.open` gives a run with no steps that cannot
end before its plan is closed; `grow` adds the steps that have arrived, holding back those that must wait for the
whole plan, `close` takes the whole validated plan and releases them, and `cancel` gives up. Steps are positions
in the same per-step lists, counted off their dependencies the same way: the rest of the plan counts as one more
unfinished step until it is closed, and a held step as waiting for one more dependency.

Failure policy: collect a per-step outcome. A failed step never cancels its siblings; its dependents are skipped,
transitively, each naming its first failed dependency. Only `ToolConfigurationError`, control-flow signals and an
extension that cannot go on (a journal that cannot write) stop the run: the other steps are cancelled and the
exception propagates. A whole-plan timeout or an outer cancellation records every unfinished step as `cancelled`.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import math
from array import array
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from time import perf_counter
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

import anyio
import anyio.lowlevel

from toolweave._json import compact
from toolweave.exceptions import ApprovalPending
from toolweave.plan._expr import ExpressionError, evaluate, truthy
from toolweave.plan._model import MissingField, Plan, PlanSteps, StepStatus
from toolweave.plan._parse import excerpt
from toolweave.plan._record import (
    CALLED,
    CONDITION_SKIPPED,
    FROM_OUTPUT,
    JSON_START,
    TEXT,
    ItemRecord,
    PlanRun,
    StepRecord,
    StepRecords,
    cut,
    jsonable,
    step_result,
)
from toolweave.plan._refs import ResolveError
from toolweave.plan._scan import RefTable, Resolver, Rewrite
from toolweave.plan._validate import Prepared, StepKind
from toolweave.tools._context import ToolCallContext

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from toolweave.tools import Tool, ToolResult

__all__ = ('DEFAULT_MEMORY_LIMIT', 'Call', 'CancelRun', 'Extension', 'Prefill', 'Run', 'StepFailed', 'StepParked')

_YIELD_EVERY = 64
"""Steps (or `for_each` elements started) a worker runs back to back before it lets other tasks in: a plan of
steps that never suspend would otherwise hold the event loop (and its own timeout) until it ends."""
_AHEAD = 8
"""Workers on their way to the ready heap (woken, started, or letting other tasks in) at most. Each one that
arrives while steps are still waiting sends for the next once the step it took suspends (on trio, at once), so a
burst of steps that suspend gets workers a few at a time per turn of the event loop, while steps that never
suspend, which one worker runs back to back, start no workers that would find nothing left to do."""
DEFAULT_MEMORY_LIMIT = 256 * 1024 * 1024
"""Bytes (of JSON) of earlier results that the running steps of one plan may hold copies of at once: a step that
would go past it waits until others are done (one step alone is bounded by the resolver's `DEFAULT_INPUT_LIMIT`)."""
_SHIFT = 32
_POSITION = (1 << _SHIFT) - 1
"""A ready step's place in the heap is one int, `-chain << _SHIFT | position` (its position is `key & _POSITION`):
longest chain of dependents first, then plan order, as a tuple of the two would sort, without a tuple to make and
compare per step. Plans stay far below 2**32 steps (`max_steps`)."""
_ENDED = frozenset({'succeeded', 'failed', 'skipped', 'cancelled'})
_LIVE = frozenset({'running', 'reviewing'})
"""Statuses of a step (or element) that has been taken up and not ended: cancelled, it counts as started."""

Call = Callable[[Any], Awaitable['ToolResult']]
"""The rest of a call's way to its tool, as an extension's `call` hook receives it: give it the arguments."""


class StepFailed(Exception):
    """Raised inside a step (by the kernel or an extension's hook) to fail it; the message is the step's error."""


class CancelRun(Exception):
    """Raised by an extension's hook to cancel the whole run now (a person asked for it): the step that raised it
    is recorded cancelled before its tool is called, every other unfinished step too, and the run returns its
    record. The message is the reason."""


class StepCancelled(Exception):
    """Raised inside a step the run is cancelling (see `CancelRun`): already recorded, nothing more to do."""


class StepParked(Exception):
    """Raised inside a step (by the kernel or an extension's hook) to park it; the message says what it waits
    for, `detail` is what a journal keeps about it."""

    def __init__(self, reason: str, detail: Mapping[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.detail: Mapping[str, Any] = detail or {}


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
    arguments: Any = None
    """The arguments it ran with when they differ from the plan's (a reviewer's edit), else `None`."""
    items: Sequence[ItemRecord] | None = None
    """A `for_each` step's elements."""


class Extension:
    """What attaches to a run: a journal, a reviewer, a tracer, an observer, a retry policy. Each hook is optional
    (this base does nothing), and the kernel calls only the hooks a subclass overrides, so an extension costs only
    what it does. Hooks run in the run's tasks: keep the synchronous ones cheap.

    An exception other than `StepFailed` and `StepParked` from `sync`, `admit` or `call` stops the whole run (its
    other steps are cancelled) and propagates out of it: that is how a journal that can no longer write, or a
    run that lost its lease, stops everything at once.
    """

    __slots__ = ()

    def attach(self, run: Run) -> None:
        """The run this extension is part of (called once, as the run is made, before anything else)."""

    def transition(self, record: StepRecord, status: StepStatus, detail: Mapping[str, Any] | None,
                   item: ItemRecord | None) -> None:
        """`record` (or its element `item`) moved to `status`: its fields are already updated. `detail` is what the
        kernel or an extension says beside the status (why a step parked, that a cancelled step had started, whose
        condition skipped it)."""

    def ready(self, record: StepRecord) -> None:
        """Every step `record` depends on has finished."""

    async def sync(self) -> None:
        """Make everything noted so far durable: awaited before a tool is called (so a call the journal does not
        show as started never happened), before a reviewer is asked, and before a worker waits idle."""

    async def admit(self, record: StepRecord, item: ItemRecord | None, arguments: Any) -> Any:
        """Decide whether the call of `record`'s tool (for element `item`) may start, and with which arguments:
        return them (edited or not), or raise `StepFailed` (rejected) or `StepParked` (waits for a decision). Runs
        before the step is `running`; `Run.transition(record, 'reviewing')` says a reviewer is being asked."""
        return arguments

    async def call(self, record: StepRecord, item: ItemRecord | None, arguments: Any, proceed: Call) -> ToolResult:
        """Around one call of the step's tool (once per element of a `for_each` step): call `proceed(arguments)`
        for the rest of the way (later extensions, then the tool), or answer without it."""
        return await proceed(arguments)

    def finish(self, run: Run, stopped: BaseException | None, reason: str) -> None:
        """The run is over (every unfinished step recorded as cancelled with `reason`); `stopped` is the exception
        that stopped it, if one did."""


_NAN_TIME = (float('nan'),)


def _unset(n: int) -> array[float]:
    """`n` times not stamped (NaN)."""
    return array('d', _NAN_TIME) * n


def _overrides(extension: Extension, name: str) -> bool:
    return getattr(type(extension), name) is not getattr(Extension, name)


class Run:
    """One run of a validated plan: the records, the dependency counters, the ready heap and the workers."""

    # Slots, not an instance dict: a server runs thousands of plans at once, each with one of these.
    __slots__ = ('admits', 'arriving', 'blocked', 'cancelled', 'checked', 'coming', 'concurrency', 'condition_origin',
                 'context', 'dependents', 'deps', 'ended', 'extensions', 'fatal', 'freed', 'heavy', 'held', 'holding',
                 'hooked', 'idle', 'items_ahead', 'kinds', 'limit', 'loop', 'memory_limit', 'on_ready',
                 'on_transition', 'park_ahead', 'plain', 'prepared', 'priority', 'ready', 'records', 'resolver',
                 'rewrite', 'scope', 'settled_at', 'staffing', 'started', 'step_timeout', 'steps', 'stuck', 'syncs',
                 't0', 'task_group', 'tasks', 'timeout', 'tools', 'unfinished', 'waiting', 'workers')

    def __init__(self, prepared: Prepared, *, concurrency: int | None = None, step_timeout: float | None = None,
                 missing_field: MissingField = 'error', context: ToolCallContext = ToolCallContext.EMPTY,
                 extensions: Sequence[Extension] = (), ended: Mapping[int, Prefill] | None = None,
                 items: Mapping[int, Sequence[ItemRecord]] | None = None,
                 park: Mapping[int, tuple[str, Mapping[str, Any]]] | None = None,
                 memory_limit: int = DEFAULT_MEMORY_LIMIT) -> None:
        plan = prepared.plan
        self.prepared = prepared
        """The plan as far as it has arrived (all of it, except in a run made by `open` before `close`)."""
        self.steps: PlanSteps = plan.steps
        """The plan's steps as far as they have arrived (columns: the hot path reads `arguments` and `ids`)."""
        self.deps = prepared.deps
        self.dependents = prepared.dependents
        self.rewrite = prepared.rewrite
        self.tools: list[Tool | None] = prepared.tools
        self.kinds = prepared.kinds
        self.checked = prepared.checked
        """Arguments the steps' tools validated ahead (`Prepared.checked`), taken by the step's call."""
        self.records = StepRecords(self, len(plan.steps))
        """Every step's record, kept as columns (a record object is made only when one is read)."""
        self.started = _unset(len(plan.steps))
        """Per step, seconds from `t0` to its start (NaN: not started): floats in one array, not an object each."""
        self.ended = _unset(len(plan.steps))
        """Per step, seconds from `t0` to its end (NaN: not ended)."""
        self.resolver = Resolver(prepared.table, self.records, missing_field, plan.dialect, prepared.external)
        self.concurrency = concurrency
        self.step_timeout = step_timeout
        self.context = context
        self.t0 = perf_counter()
        self.condition_origin: dict[int, str] = {}
        """Steps skipped because of a false `when`: the id of the step whose condition it was."""
        self.park_ahead = park or {}
        """Steps to park as soon as they are ready, with why."""
        self.items_ahead: Mapping[int, Sequence[ItemRecord]] = items or {}
        """Elements of unfinished `for_each` steps that ended in an earlier run (kept, not run again)."""
        self.memory_limit = memory_limit
        self.holding = 0
        """Bytes of earlier results that running steps hold copies of (see `hold`)."""
        self.heavy = False
        """Whether some step's value is an object or an array (before that, nothing is counted)."""
        self.freed: anyio.Event | None = None
        # The extensions, by hook (only the hooks each one overrides).
        self.extensions = tuple(extensions)
        self.on_transition = [e.transition for e in extensions if _overrides(e, 'transition')]
        self.on_ready = [e.ready for e in extensions if _overrides(e, 'ready')]
        self.syncs = [e.sync for e in extensions if _overrides(e, 'sync')]
        self.admits = [e.admit for e in extensions if _overrides(e, 'admit')]
        self.hooked = [e for e in extensions if _overrides(e, 'call')]
        self.plain = not (self.admits or self.syncs or self.hooked or step_timeout is not None)
        """Whether calls go straight to their tools (no extension takes part in them, no step timeout)."""
        for extension in extensions:
            extension.attach(self)
        # Scheduling state.
        self.waiting = [len(d) for d in self.deps]
        """Per step, how many of its dependencies have not finished yet."""
        self.unfinished = len(self.records)
        self.blocked: set[int] = set()
        """Steps with a dependency that did not succeed: skipped once all their dependencies have ended."""
        self.priority = prepared.chains
        self.ready: list[int] = []
        """Steps ready to start, as a heap of ints (see `_SHIFT`): longest chain of dependents first, then plan
        order."""
        self.limit = concurrency or len(self.records) or 1
        self.workers = 1  # the task that runs the plan
        self.coming = 0
        """Workers woken or started that have not yet looked at the heap."""
        self.staffing = False
        """Whether a `staff_later` callback is on its way (asyncio)."""
        self.idle: list[Any] = []
        """Workers waiting for work: a future each on asyncio (the lightest thing to wait on), an event on trio."""
        self.loop: asyncio.AbstractEventLoop | None = None
        self.fatal: BaseException | None = None
        self.scope: anyio.CancelScope | None = None
        """The run's cancel scope, once it runs (on trio, its task group's)."""
        self.task_group: TaskGroup | None = None
        """On trio, the task group the workers run in."""
        self.tasks: set[asyncio.Task[None]] | None = None
        """On asyncio, the workers started as bare tasks (`None` on trio: they are in `task_group`)."""
        self.stuck: set[int] = set()
        """Parked steps and the steps that depend on them: unfinished, but nothing more happens to them in this run."""
        self.settled_at = 0
        """The run is over when `unfinished` comes down to this (the number of stuck steps)."""
        # A plan that arrives while it runs (`open`).
        self.arriving = False
        """Whether more of the plan is to come: the rest of it counts as one unfinished step until `close`."""
        self.held: Collection[int] = ()
        """Steps that wait for the whole plan besides their dependencies (while `arriving`)."""
        self.cancelled: str | None = None
        """Why the run was cancelled (`cancel`: an arriving plan given up, a person's request): its unfinished steps
        are recorded cancelled with this reason."""
        self.timeout: float | None = None
        """Seconds the whole plan may take (the deadline of `scope`); an arriving plan's clock starts when it is
        closed."""
        if ended:
            self.restore(ended)
        else:
            self.ready = [-self.priority[i] << _SHIFT | i for i, count in enumerate(self.waiting) if not count]
            heapq.heapify(self.ready)
        if self.on_ready:
            for key in self.ready:
                self.tell_ready(key & _POSITION)

    @classmethod
    def open(cls, *, concurrency: int | None, step_timeout: float | None, missing_field: MissingField,
             context: ToolCallContext, extensions: Sequence[Extension], max_items: int) -> Run:
        """A run of a plan that is still arriving, with no steps yet: `grow` adds the steps that arrive, `close`
        takes the whole plan, `cancel` gives up; `run` runs it meanwhile, and it does not end before one of the
        last two. Its clock (`started_at`, step times) starts now; its timeout when it is closed."""
        nothing = Prepared(Plan(()), [], [], RefTable(), [], [], {}, [], max_items)
        run = cls(nothing, concurrency=concurrency, step_timeout=step_timeout, missing_field=missing_field,
                  context=context, extensions=extensions)
        run.arriving = True
        run.unfinished = 1  # the rest of the plan
        return run

    # --- the record's view of the run (`StepGraph`) ------------------------------------------------------------

    @property
    def waves(self) -> Sequence[int]:
        return self.prepared.waves

    def arguments(self, index: int) -> Any:
        """Step `index`'s arguments with every reference replaced (each reading gets fresh copies)."""
        kind = self.kinds.get(index) if self.kinds else None
        if kind is not None and kind.source is not None:
            return self.resolve_field(index, kind.source, kind.source_rewrite)
        if kind is not None and kind.for_each is not None:
            items = self.records.items.get(index)
            return None if items is None else [item.arguments for item in items]
        given = self.steps.arguments[index]
        rewrite = self.rewrite[index]
        return self.resolver.resolve(given, rewrite, self.steps.ids[index]) if rewrite else given

    # --- transitions --------------------------------------------------------------------------------------------

    def transition(self, index: int, status: StepStatus, error: str | None = None,
                   detail: Mapping[str, Any] | None = None, item: ItemRecord | None = None) -> None:
        """Move step `index` (or its element `item`) to `status`, stamping the time, and tell the extensions: the
        one place a status changes. `detail` is what a journal keeps beside the status (why a step parked, whose
        condition skipped it)."""
        now = perf_counter() - self.t0
        records = self.records
        was = records.status[index] if item is None else item.status
        # Whether to stamp the start now (`None`: only if it has not started: a step that failed before it was taken
        # up, its references not resolving), and the end.
        start: bool | None = False
        end = False
        if status == 'running':
            if item is None:
                records.attempts[index] += 1
            else:
                item.attempts += 1
            start = was != 'running'  # a start (after a review, the tool's own start)
        elif status == 'succeeded' or status == 'failed':
            start, end = None, True
        elif status == 'reviewing':
            start = True
        elif status == 'skipped':
            end = True
        elif status == 'cancelled' and was in _LIVE:
            end = True
            detail = {'started': was == 'running', **(detail or {})}
        if item is None:
            if start or (start is None and self.started[index] != self.started[index]):  # NaN: not started
                self.started[index] = now
            if end:
                self.ended[index] = now
            records.status[index] = status
            records.error[index] = error
        else:
            if start or (start is None and item.started_at is None):
                item.started_at = now
            if end:
                item.ended_at = now
            item.status = status
            item.error = error
        if self.on_transition:
            record = StepRecord(index, records)
            for hook in self.on_transition:
                hook(record, status, detail, item)

    def tell_ready(self, index: int) -> None:
        record = StepRecord(index, self.records)
        for hook in self.on_ready:
            hook(record)

    async def sync(self) -> None:
        """Make what the extensions noted durable (see `Extension.sync`)."""
        for hook in self.syncs:
            await hook()

    def edited(self, record: StepRecord, item: ItemRecord | None, arguments: Any) -> None:
        """A reviewer changed the arguments the call runs with: the record shows those (it is the audit trail)."""
        if item is not None:
            item.arguments = arguments
        else:
            record.given = arguments

    # --- one step -----------------------------------------------------------------------------------------------

    async def run_step(self, index: int) -> None:
        """Run one ready step to its end: resolve its inputs, call its tool, record the outcome."""
        if self.park_ahead and index in self.park_ahead:
            reason, detail = self.park_ahead[index]
            self.park(index, reason, detail)
            return
        if self.kinds:
            kind = self.kinds.get(index)
            if kind is not None and await self.run_kind(index, kind):
                return
        flags = self.records.flags
        held = 0
        try:
            if self.heavy:  # some step's value is an object or an array: what this one copies counts
                held = await self.hold(index)
            arguments = self.inputs(index)
            flags[index] |= CALLED
            if self.plain:  # no extension takes part in calls, no step timeout: the tool's own call, awaited here
                tool = self.tools[index]
                assert tool is not None  # only select steps have none, and they call nothing
                self.transition(index, 'running')
                try:
                    result = await tool.call(arguments, self.context)
                except BaseException as exc:
                    self.raised(index, None, exc)
            else:
                result = await self.call(index, None, arguments)
            self.keep(index, result)
        except StepFailed as exc:
            self.transition(index, 'failed', str(exc))
            self.release(index, ok=False)
        except StepParked as exc:
            flags[index] &= ~CALLED
            self.park(index, str(exc), exc.detail)
        except StepCancelled:
            pass  # the run is being cancelled: the step is recorded, the rest will be
        else:
            self.transition(index, 'succeeded')
            self.release(index, ok=True)
        finally:
            if held:
                self.let_go(held)

    def keep(self, index: int, result: ToolResult) -> None:
        """Record what step `index`'s tool returned as its outcome; a failed call (or a value that cannot become
        JSON) raises `StepFailed`."""
        if result.error is not None:
            raise StepFailed(f'Tool execution failed: {result.error}' if result.raised else result.error)
        records = self.records
        output = result.output
        if not result.has_value and output and output[0] not in JSON_START and not output[0].isspace():
            records.output[index] = records.value[index] = records.ref_value[index] = output  # plain text: quick
            records.flags[index] |= TEXT | FROM_OUTPUT
            return
        try:
            outcome = step_result(result)
        except ValueError as exc:
            raise StepFailed(str(exc)) from None
        records.output[index], records.value[index], records.ref_value[index] = outcome.output, outcome.value, (
            outcome.ref_value)
        records.flags[index] |= (TEXT if outcome.is_text else 0) | (FROM_OUTPUT if outcome.from_output else 0)
        records.size[index] = outcome.size
        if outcome.size:
            self.heavy = True

    async def hold(self, index: int) -> int:
        """Count what step `index`'s references will copy (its dependencies' values, each whole) against the
        run's memory for copied inputs, waiting while steps already holding copies leave too little: so a plan
        cannot make the process hold more than `memory_limit` bytes of copies at once (beyond one step's, which
        the resolver bounds). Returns what it holds, for `let_go`."""
        sizes = self.records.size
        need = 0
        for dep in self.deps[index]:
            need += sizes[dep]
        if not need:
            return 0
        while self.holding and self.holding + need > self.memory_limit:
            if self.freed is None:
                self.freed = anyio.Event()
            await self.freed.wait()
        self.holding += need
        return need

    def let_go(self, held: int) -> None:
        self.holding -= held
        if self.freed is not None:
            self.freed.set()
            self.freed = None

    def inputs(self, index: int) -> Any:
        steps = self.steps
        given = steps.arguments[index]
        if type(given) is str:  # JSON text that did not parse: this step fails, independent steps still run
            raise StepFailed(_deserialize_error(steps.tools[index], given))
        rewrite = self.rewrite[index]
        if not rewrite:
            return self.checked.pop(index, given) if self.checked else given
        try:
            return self.resolver.resolve(given, rewrite, steps.ids[index])
        except ResolveError as exc:
            raise StepFailed(str(exc)) from None

    async def call(self, index: int, item: ItemRecord | None, arguments: Any) -> ToolResult:
        """One call of step `index`'s tool (for element `item`): admitted by the extensions, marked `running` and
        made durable, then made through the extensions' `call` hooks within `step_timeout`. What it raises goes
        through `raised`."""
        tool = self.tools[index]
        assert tool is not None  # only select steps have none, and they call nothing
        try:
            if self.plain:  # no extension takes part in calls, no step timeout: the shortest way
                self.transition(index, 'running', item=item)
                return await tool.call(arguments, self.context)
            record = StepRecord(index, self.records)
            for admit in self.admits:
                arguments = await admit(record, item, arguments)
            self.transition(index, 'running', item=item)
            if self.syncs:
                await self.sync()
            if self.step_timeout is None:
                if self.hooked:
                    return await self.through_hooks(record, item, arguments, tool)
                return await tool.call(arguments, self.context)
            with anyio.move_on_after(self.step_timeout) as scope:
                if self.hooked:
                    return await self.through_hooks(record, item, arguments, tool)
                return await tool.call(arguments, self.context)
            assert scope.cancelled_caught
            raise StepFailed(f'Tool execution failed: step {record.id!r} timed out after {self.step_timeout:g} s '
                             '(step_timeout)')
        except BaseException as exc:
            self.raised(index, item, exc)

    def raised(self, index: int, item: ItemRecord | None, exc: BaseException) -> NoReturn:
        """What a call of the step's tool (for element `item`) raised, as the step's outcome: `StepFailed` and
        `StepParked` as they are, `ApprovalPending` parks the step, a stray `CancelledError` fails it, `CancelRun`
        cancels the run; a configuration error, a control-flow signal or an extension that cannot go on stops the
        run (and fails the step meanwhile). A real cancellation, or an interrupt, goes on its way."""
        if isinstance(exc, (StepFailed, StepParked)):
            raise exc
        if isinstance(exc, CancelRun):
            self.cancel(f'Cancelled: {exc}')
            self.transition(index, 'cancelled', f'Cancelled: {exc}', {'started': False}, item=item)
            raise StepCancelled from None
        if isinstance(exc, ApprovalPending):
            raise StepParked(f'Waiting for approval: {exc.reason}', _pending_detail(exc)) from None
        if isinstance(exc, asyncio.CancelledError) and _is_stray(exc):
            raise StepFailed('Tool execution failed: the tool raised CancelledError without being cancelled') from None
        if not isinstance(exc, Exception):
            raise exc
        self.stop(exc)  # ToolConfigurationError, a control-flow signal, an extension that cannot go on
        raise StepFailed(f'{type(exc).__name__}: {exc}') from None

    def through_hooks(self, record: StepRecord, item: ItemRecord | None, arguments: Any,
                      tool: Tool) -> Awaitable[ToolResult]:
        context = self.context
        proceed: Call = lambda arguments: tool.call(arguments, context)  # noqa: E731
        for extension in reversed(self.hooked):
            proceed = _bound(extension, record, item, proceed)
        return proceed(arguments)

    def park(self, index: int, reason: str, detail: Mapping[str, Any]) -> None:
        """Step `index` waits for a decision: it and every step that depends on it stay unfinished, and the run
        settles once nothing else is left."""
        self.transition(index, 'parked', reason, detail)
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

    def stop(self, exc: BaseException) -> None:
        """A step raised a configuration error or a control-flow signal, or an extension cannot go on: cancel the
        run, then re-raise `exc` from it."""
        if self.fatal is None:
            self.fatal = exc
        if self.scope is not None:
            self.scope.cancel()

    # --- steps that select, loop or have a condition ------------------------------------------------------------

    async def run_kind(self, index: int, kind: StepKind) -> bool:
        """A step with `when`, `from`/`select` or `for_each`: the condition first (false: skipped, not failed),
        then an expression instead of a tool call, or one tool call per element. Returns whether the step is
        done; `False` leaves a tool step whose condition holds to `run_step`."""
        flags = self.records.flags
        try:
            if kind.when is not None and not await self.condition_holds(index, kind):
                return True
            if kind.source is None and kind.for_each is None:
                return False
            if kind.source is not None:
                flags[index] |= CALLED
                self.transition(index, 'running')
                found = self.resolve_field(index, kind.source, kind.source_rewrite)
                self.record_value(index, found if kind.select is None else await self.evaluate(index, kind, found))
            else:
                await self.run_items(index, kind)
        except StepFailed as exc:
            self.transition(index, 'failed', str(exc))
            self.release(index, ok=False)
        except StepParked as exc:
            flags[index] &= ~CALLED
            self.park(index, str(exc), exc.detail)
        except StepCancelled:
            pass  # the run is being cancelled: what is unfinished is recorded as it ends
        else:
            self.transition(index, 'succeeded')
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
        self.records.flags[index] |= CONDITION_SKIPPED
        self.condition_origin[index] = step.id
        select = step.when.select if step.when is not None else '@'
        self.transition(index, 'skipped', f'Skipped because its condition is false: {select!r} gave '
                                           f'{excerpt(result)}', {'condition': step.id})
        self.release(index, ok=False)
        return False

    def resolve_field(self, index: int, value: Any, rewrite: Rewrite) -> Any:
        """A `from`, `for_each` or `when.from` value with its references replaced."""
        if not rewrite:
            return jsonable(value)
        try:
            return self.resolver.resolve(value, rewrite, self.steps.ids[index])
        except ResolveError as exc:
            raise StepFailed(str(exc)) from None

    async def evaluate(self, index: int, kind: StepKind, value: Any) -> Any:
        assert kind.select is not None
        try:
            return await evaluate(kind.select, value)
        except ExpressionError as exc:
            raise StepFailed(f'select of step {self.steps.ids[index]!r} failed: {exc}') from None

    def record_value(self, index: int, value: Any) -> None:
        """Record JSON data computed by the plan itself (a selection, a `for_each` list) as step `index`'s value."""
        try:
            data = jsonable(value)
            output = compact(data)
        except (ValueError, TypeError) as exc:
            raise StepFailed(f'The value cannot be recorded as JSON: {exc}') from None
        records = self.records
        records.output[index], records.value[index], records.ref_value[index] = output, data, data
        records.flags[index] = records.flags[index] & ~TEXT | FROM_OUTPUT  # the output is the value's JSON, shown
        if isinstance(data, (dict, list)):
            records.size[index] = len(output)
            self.heavy = True

    async def run_items(self, index: int, kind: StepKind) -> None:
        """Call the step's tool once per element of its list, concurrently (at most `concurrency` at once); the
        step's value is the list of results in list order. Every element runs (an element that ended in an
        earlier run keeps its outcome); if any fails, the step fails naming them, and each element's outcome
        stays in `record.items`."""
        step = self.steps[index]
        elements = self.resolve_field(index, kind.for_each, kind.for_each_rewrite)
        if not isinstance(elements, list):
            raise StepFailed(f'for_each of step {step.id!r} must be a list, got {_describe(elements)}. Refer to a '
                             'list, or select one first (for example "from": "$ref:STEP", "select": "items").')
        limit = self.prepared.max_items
        if len(elements) > limit:
            raise StepFailed(f'for_each of step {step.id!r} has {len(elements)} elements, more than the limit of '
                             f'{limit}. Narrow the list with a select step first (for example "[:20]"), or raise '
                             '`max_items`.')
        items = self.records.items[index] = [ItemRecord(i) for i in range(len(elements))]
        for earlier in self.items_ahead.get(index, ()):
            if earlier.index < len(items):
                items[earlier.index] = earlier
        self.records.flags[index] |= CALLED
        self.transition(index, 'running')
        todo = [(item, elements[item.index]) for item in items if item.status not in _ENDED]
        parked: list[StepParked] = []
        if todo:
            await self.run_elements(index, todo, parked)
        if self.cancelled is not None:
            raise StepCancelled
        if parked:  # elements wait for a decision: the whole step does (the others were stopped)
            waiting = sorted(item.index for item in items if item.status == 'parked')
            raise StepParked(str(parked[0]), {**parked[0].detail, 'items': waiting})
        failed = [item for item in items if item.status != 'succeeded']
        if failed:
            listed = '; '.join(f'item {item.index}: {cut(item.error or item.status, 300)}' for item in failed[:5])
            more = f'; and {len(failed) - 5} more' if len(failed) > 5 else ''
            raise StepFailed(f'{len(failed)} of {len(items)} for_each items failed: {listed}{more}')
        self.record_value(index, [item.value for item in items])

    async def run_elements(self, index: int, todo: list[tuple[ItemRecord, Any]], parked: list[StepParked]) -> None:
        """Run the elements in `todo`: at most `concurrency` at once, started a batch at a time with a turn of the
        event loop between batches, so that a long list cannot hold the loop (or the plan's timeout) while its
        tasks are made. Once an element parks, no other element starts (they are recorded cancelled, never
        having started); those already running finish, so that none is left half-done and unknown."""
        limiter = anyio.CapacityLimiter(self.concurrency) if self.concurrency else None
        async with anyio.create_task_group() as group:
            for position, (item, element) in enumerate(todo, 1):
                group.start_soon(self.run_item, index, item, element, limiter, parked)
                if position % _YIELD_EVERY == 0:
                    await anyio.lowlevel.checkpoint()

    async def run_item(self, index: int, item: ItemRecord, element: Any, limiter: anyio.CapacityLimiter | None,
                       parked: list[StepParked]) -> None:
        try:
            if limiter is not None:
                async with limiter:
                    if not parked:
                        await self.call_item(index, item, element)
            elif not parked:
                await self.call_item(index, item, element)
        except StepFailed as exc:
            self.transition(index, 'failed', str(exc), item=item)
        except StepParked as exc:
            self.transition(index, 'parked', str(exc), exc.detail, item=item)
            parked.append(exc)
        except StepCancelled:
            pass
        finally:
            if item.status not in _ENDED and item.status != 'parked':
                reason = 'Not started: another element waits for a decision' if parked else 'Cancelled with its step'
                self.transition(index, 'cancelled', reason, item=item)

    async def call_item(self, index: int, item: ItemRecord, element: Any) -> None:
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
        result = await self.call(index, item, item.arguments)
        if result.error is not None:
            raise StepFailed(f'Tool execution failed: {result.error}' if result.raised else result.error)
        try:
            outcome = step_result(result)
        except ValueError as exc:
            raise StepFailed(str(exc)) from None
        item.output, item.value = outcome.output, outcome.ref_value
        self.transition(index, 'succeeded', item=item)

    # --- scheduling ---------------------------------------------------------------------------------------------

    def release(self, index: int, *, ok: bool) -> None:
        """Step `index` has ended: count it off its dependents, queue those now ready and skip (transitively)
        those with a dependency that did not succeed."""
        self.unfinished -= 1
        waiting, blocked = self.waiting, self.blocked
        skipped: list[int] | None = None
        for child in self.dependents[index]:
            if not ok:
                blocked.add(child)
            waiting[child] -= 1
            if waiting[child]:
                continue
            if blocked and child in blocked:
                self.skip(child)
                if skipped is None:
                    skipped = []
                skipped.append(child)
            else:
                heapq.heappush(self.ready, -self.priority[child] << _SHIFT | child)
                if self.on_ready:
                    self.tell_ready(child)
        while skipped:  # a skipped step ends too: its dependents are skipped in turn, without recursion
            child = skipped.pop()
            self.unfinished -= 1
            for grandchild in self.dependents[child]:
                blocked.add(grandchild)
                waiting[grandchild] -= 1
                if not waiting[grandchild]:
                    self.skip(grandchild)
                    skipped.append(grandchild)
        if self.unfinished == self.settled_at:
            self.wake_all()

    def skip(self, index: int) -> None:
        status = self.records.status
        culprit = next(d for d in self.deps[index] if status[d] != 'succeeded')
        origin = self.condition_origin.get(culprit) if self.condition_origin else None
        if origin is None:
            self.transition(index, 'skipped', f"Skipped because dependency '{self.steps.ids[culprit]}' failed")
            return
        self.condition_origin[index] = origin
        self.records.flags[index] |= CONDITION_SKIPPED
        self.transition(index, 'skipped', f"Skipped because the condition of step '{origin}' is false",
                        {'condition': origin})

    def restore(self, ended: Mapping[int, Prefill]) -> None:
        """Start from the steps that ended in an earlier run: fill their records, count them off their dependents,
        queue the steps now ready and skip those behind a step that did not succeed."""
        records = self.records
        for index, fill in ended.items():
            records.status[index], records.output[index], records.error[index] = fill.status, fill.output, fill.error
            records.value[index] = records.ref_value[index] = fill.value
            records.flags[index] = ((TEXT if fill.is_text else 0) | (FROM_OUTPUT if fill.from_output else 0)
                                    | (CALLED if fill.status == 'succeeded' else 0)
                                    | (CONDITION_SKIPPED if fill.condition is not None else 0))
            if isinstance(fill.value, (dict, list)):
                records.size[index] = len(compact(fill.value))
                self.heavy = True
            if fill.arguments is not None:
                records.given[index] = fill.arguments
            if fill.items is not None:
                records.items[index] = list(fill.items)
            if fill.condition is not None:
                self.condition_origin[index] = fill.condition
        self.unfinished = len(records) - len(ended)
        skipped: list[int] = []
        ready: list[int] = []
        for index, deps in enumerate(self.deps):
            if index in ended:
                continue
            self.waiting[index] = sum(1 for d in deps if d not in ended)
            if any(d in ended and records.status[d] != 'succeeded' for d in deps):
                self.blocked.add(index)
            if not self.waiting[index]:
                if index in self.blocked:
                    skipped.append(index)
                else:
                    ready.append(-self.priority[index] << _SHIFT | index)
        heapq.heapify(ready)
        self.ready = ready
        for index in skipped:
            self.skip(index)
            self.release(index, ok=False)

    async def worker(self, first: bool = False) -> None:
        """Take ready steps and run them until the run is over; `first`: the task running the plan (any other was
        sent for by `staff`, and has now arrived)."""
        if not first:
            self.coming -= 1
        streak = 0
        ready = self.ready
        while self.unfinished > self.settled_at and self.fatal is None and self.cancelled is None:
            if not ready:
                await self.wait_idle(first)
                ready = self.ready  # `recount` may have replaced the heap
                continue
            index = heapq.heappop(ready) & _POSITION
            if ready and not self.staffing and self.coming < _AHEAD and self.coming < len(ready):
                if self.loop is not None:
                    # Others are sent for once this step suspends (when the loop runs the callback), not before: a
                    # worker runs steps that never suspend back to back, and a worker started for them is wasted.
                    self.staffing = True
                    self.loop.call_soon(self.staff_later)
                else:
                    self.staff()  # (trio has no callback to defer it with)
            await self.run_step(index)
            ready = self.ready
            streak += 1
            if streak == _YIELD_EVERY:
                streak = 0
                self.coming += 1  # back for more steps in a moment: no need to send for another worker
                await anyio.lowlevel.checkpoint()
                self.coming -= 1

    async def new_worker(self) -> None:
        """A worker in the task group (trio)."""
        try:
            await self.worker()
        except BaseException as exc:
            if not isinstance(exc, anyio.get_cancelled_exc_class()):
                self.stop(exc)
            raise

    def worker_ended(self, task: asyncio.Task[None]) -> None:
        """A worker started as a bare task (asyncio) has ended: its failure would otherwise go unseen, so it stops
        the run. (A done callback rather than a coroutine around the worker: one frame less for every step the
        worker resumes.)"""
        assert self.tasks is not None
        self.tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None and self.fatal is None:  # (`reap` may have seen it first)
            self.stop(exc)

    async def wait_idle(self, first: bool) -> None:
        if self.syncs:  # what finished is made durable before the worker pauses
            try:
                await self.sync()
            except CancelRun as exc:
                self.cancel(f'Cancelled: {exc}')
                return
            except Exception as exc:  # the journal cannot write (the store failed, the run was lost): stop
                self.stop(exc)
                return
            if self.ready or self.unfinished == self.settled_at or self.fatal is not None:
                return  # the run moved on while the journal was written
        # The first worker waits at the front of the line, so it is woken last (`wake_all`, `staff` take from the
        # back): when the run is over the others have ended by the time it reaps them, one turn of the loop sooner.
        waiter: Any = self.loop.create_future() if self.loop is not None else anyio.Event()
        if first:
            self.idle.insert(0, waiter)
        else:
            self.idle.append(waiter)
        await (waiter if self.loop is not None else waiter.wait())
        self.coming -= 1

    def staff_later(self) -> None:
        """The worker that left steps in the heap has suspended (or let other tasks in): send for workers to take
        those still waiting, unless the run is over."""
        self.staffing = False
        if (self.ready and self.unfinished > self.settled_at and self.fatal is None and self.cancelled is None
                and self.scope is not None and not self.scope.cancel_called):
            self.staff()

    def staff(self) -> None:
        """Send for workers to take the steps waiting in the heap: wake idle ones, or start new ones."""
        wanted = min(len(self.ready), _AHEAD) - self.coming
        while wanted > 0 and self.idle:
            self.coming += 1
            self.wake(self.idle.pop())
            wanted -= 1
        while wanted > 0 and self.workers < self.limit and self.scope is not None:
            self.workers += 1
            self.coming += 1
            if self.tasks is None:
                assert self.task_group is not None
                self.task_group.start_soon(self.new_worker)
            else:
                assert self.loop is not None
                task = self.loop.create_task(self.worker())
                self.tasks.add(task)
                task.add_done_callback(self.worker_ended)
            wanted -= 1

    def wake_all(self) -> None:
        while self.idle:
            self.coming += 1
            self.wake(self.idle.pop())

    @staticmethod
    def wake(waiter: Any) -> None:
        if isinstance(waiter, asyncio.Future):
            if not waiter.done():
                waiter.set_result(None)
        else:
            waiter.set()

    # --- a plan that arrives while it runs (`open`) --------------------------------------------------------------

    def grow(self, prepared: Prepared, steps: PlanSteps, held: Collection[int]) -> None:
        """More of the plan has arrived: `steps` are its steps so far, those the run has (unchanged, at the same
        positions) then new ones, each referring only to steps before it, and `prepared` holds their graph (its
        per-step lists cover `steps`; its `plan` is the whole plan only once `close`d, so building it is not paid for
        at each growth: until then the run reads `steps`). The new steps are counted off their dependencies, those
        `held` for the whole plan waiting for one more: the cost is the new steps' and their references', whatever
        the length of the plan so far."""
        known = len(self.records)
        self.take_graph(prepared)
        self.steps = steps
        records = self.records
        records.grow(len(steps) - known)
        self.started.extend(_unset(len(steps) - known))
        self.ended.extend(_unset(len(steps) - known))
        self.waiting.extend([0] * (len(records) - known))
        self.limit = self.concurrency or len(records) or 1
        self.held = held
        self.count_new(known)

    def close(self, prepared: Prepared) -> None:
        """The whole plan has arrived and validated: adopt it, release the held steps, start the whole-plan
        timeout, and let the run end once its steps have."""
        self.adopt(prepared)
        self.arriving = False
        self.held = ()
        self.recount()
        if self.scope is not None and self.timeout is not None:
            self.scope.deadline = anyio.current_time() + self.timeout

    def cancel(self, reason: str) -> None:
        """Stop the run now (a plan still arriving given up, a person's request): cancel what runs, start nothing
        more, and record every unfinished step as cancelled with `reason`; the run returns its record."""
        if self.cancelled is None:
            self.cancelled = reason
        if self.scope is not None:
            self.scope.cancel()

    def adopt(self, prepared: Prepared) -> None:
        """Take the plan's graph from `prepared`: the steps known so far at the same positions (a step that has
        not started takes its new form: a held step arrives as a placeholder), then the new ones."""
        plan = prepared.plan
        self.take_graph(prepared)
        self.steps = plan.steps
        records = self.records
        known = len(records)
        records.grow(len(plan.steps) - known)
        self.started.extend(_unset(len(plan.steps) - known))
        self.ended.extend(_unset(len(plan.steps) - known))
        self.waiting.extend([0] * (len(records) - known))
        self.limit = self.concurrency or len(records) or 1

    def take_graph(self, prepared: Prepared) -> None:
        self.prepared = prepared
        self.deps, self.dependents = prepared.deps, prepared.dependents
        self.rewrite, self.tools, self.kinds = prepared.rewrite, prepared.tools, prepared.kinds
        self.checked = prepared.checked
        self.resolver.table, self.resolver.external = prepared.table, prepared.external
        self.priority = prepared.chains

    def count_new(self, start: int) -> None:
        """Count the steps from `start` on (new: nothing refers to them yet) off their dependencies as `recount`
        would: queue the ones ready, skip those behind a step that did not succeed, hold those behind a parked one;
        a held step waits for one more. Then send for workers, or end the run if nothing is left."""
        waiting, held, stuck, blocked = self.waiting, self.held, self.stuck, self.blocked
        statuses = self.records.status
        behind: list[int] = []
        for index in range(start, len(statuses)):
            count = 1 if index in held else 0
            for dep in self.deps[index]:
                status = statuses[dep]
                if status not in _ENDED:
                    count += 1
                    if dep in stuck:
                        stuck.add(index)
                elif status != 'succeeded':
                    blocked.add(index)
            waiting[index] = count
            self.unfinished += 1
            if count:
                continue
            if index in blocked:
                behind.append(index)
            else:
                heapq.heappush(self.ready, -self.priority[index] << _SHIFT | index)
                if self.on_ready:
                    self.tell_ready(index)
        self.settled_at = len(stuck)
        for index in behind:
            self.skip(index)
            self.release(index, ok=False)
        if self.unfinished == self.settled_at:
            self.wake_all()
        elif self.ready and self.scope is not None:
            self.staff()

    def recount(self) -> None:
        """Count every step that has not started off its dependencies again, from the records: queue the ones
        now ready (longest chain first), skip those behind a step that did not succeed; a held step waits for one
        more. Then send for workers, or end the run if nothing is left."""
        statuses, waiting, held = self.records.status, self.waiting, self.held
        unfinished = 0
        ready: list[int] = []
        behind: list[int] = []
        blocked: set[int] = set()
        for index, deps in enumerate(self.deps):
            status = statuses[index]
            if status in _ENDED:
                continue
            unfinished += 1
            if status != 'pending':  # running or parked: it ends (or stays stuck) on its own
                continue
            count = 1 if index in held else 0
            for dep in deps:
                if statuses[dep] not in _ENDED:
                    count += 1
                elif statuses[dep] != 'succeeded':
                    blocked.add(index)
            waiting[index] = count
            if not count:
                if index in blocked:
                    behind.append(index)
                else:
                    ready.append(-self.priority[index] << _SHIFT | index)
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
        elif self.ready and self.scope is not None:
            self.staff()

    def restuck(self) -> None:
        """The parked steps and everything that depends on them, with the graph as it is now."""
        stuck: set[int] = set()
        todo = [index for index, status in enumerate(self.records.status) if status == 'parked']
        while todo:
            step = todo.pop()
            if step not in stuck:
                stuck.add(step)
                todo.extend(self.dependents[step])
        self.stuck = stuck
        self.settled_at = len(stuck)

    # --- the whole run ------------------------------------------------------------------------------------------

    def cancel_all(self, reason: str) -> None:
        """Before the run starts: run nothing (a reviewer rejected the plan), every step recorded as cancelled with
        `reason`."""
        self.cancel_unfinished(reason)
        self.unfinished = self.settled_at = 0

    def cancel_unfinished(self, reason: str) -> None:
        """Record every step that has not ended (and is not parked) as cancelled with `reason`."""
        for index, status in enumerate(self.records.status):
            if status == 'pending' or status in _LIVE:
                self.transition(index, 'cancelled', reason)

    async def run(self, *, timeout: float | None = None, max_output_chars: int | None = None) -> PlanRun:  # noqa: ASYNC109
        """Run until every step has ended (or is stuck behind a parked one) and return the record. `timeout`
        bounds the whole plan (for a plan still arriving, from when it is closed)."""
        self.timeout = timeout
        # One cancel scope is the run's: `stop` and `cancel` cancel it, and the whole-plan timeout is its deadline (a
        # plan still arriving gets its deadline when it is closed).
        deadline = math.inf if self.arriving or timeout is None else anyio.current_time() + timeout
        try:
            if _on_asyncio():
                # The workers are bare tasks of the loop, reaped by `work`: a cancel scope is all the run needs
                # around them (a task group with no tasks of its own would take a turn of the loop to exit).
                self.tasks = set()
                self.loop = asyncio.get_running_loop()
                with anyio.CancelScope(deadline=deadline) as self.scope:
                    await self.work()
            else:
                async with anyio.create_task_group() as self.task_group:
                    self.scope = self.task_group.cancel_scope
                    self.scope.deadline = deadline
                    await self.work()
        except BaseExceptionGroup as group:  # a `BaseException` that is not ours (an interrupt): unwrap a lone one
            raise group.exceptions[0] if len(group.exceptions) == 1 else group from None
        finally:
            reason = self.cancel_reason()
            if self.fatal is not None or self.unfinished > self.settled_at or self.timed_out():
                self.cancel_unfinished(reason)
            for extension in self.extensions:
                extension.finish(self, self.fatal, reason)
        if self.fatal is not None:
            raise self.fatal
        return self.result(max_output_chars)

    async def work(self) -> None:
        """The run's own task: the first worker, then (on asyncio) waiting for the others to end."""
        try:
            if self.cancelled is None and self.unfinished > self.settled_at:
                await self.worker(first=True)
        finally:
            if self.tasks:
                await self.reap()

    async def reap(self) -> None:
        """Wait until each worker started as a bare task has ended: nothing of the run outlives it. When the run
        is over they are on their way out (woken, or making what finished durable first); when it is cut short
        (cancelled, timed out, stopped) they are cancelled first. Until none is left: a worker that was still
        running a step when this began may send for another (`staff_later`), which is cancelled in turn."""
        assert self.tasks is not None
        cut_short = self.fatal is not None or self.unfinished > self.settled_at or self.cancelled is not None
        if not cut_short:
            self.wake_all()
        with anyio.CancelScope(shield=True):
            while self.tasks:
                tasks = list(self.tasks)
                for task in tasks:
                    if cut_short:
                        task.cancel()
                for task in tasks:
                    try:
                        await task
                    except asyncio.CancelledError:
                        pass
                    except Exception as exc:  # `worker_ended` stops the run with it, maybe not yet
                        self.stop(exc)
                    self.tasks.discard(task)  # (its done callback may not have run yet)

    def timed_out(self) -> bool:
        """Whether the run's scope was cancelled by its deadline (`stop` and `cancel` note why before they cancel
        it; on trio the scope also reads as cancelled when a cancellation from outside passes through it)."""
        scope = self.scope
        return (scope is not None and scope.cancel_called and self.fatal is None and self.cancelled is None
                and scope.deadline <= anyio.current_time())

    def cancel_reason(self) -> str:
        if self.fatal is not None:
            return f'Cancelled: the run stopped because a step raised {type(self.fatal).__name__}'
        if self.cancelled is not None:
            return self.cancelled
        if self.timed_out():
            return f'Cancelled: the plan timed out after {self.timeout:g} s (timeout)'
        return 'Cancelled: the plan run was cancelled'

    def result(self, max_output_chars: int | None) -> PlanRun:
        """The run's record as it stands."""
        return PlanRun(self.prepared.plan, self.records, self.t0, perf_counter() - self.t0,
                       max_output_chars=max_output_chars)


def _bound(extension: Extension, record: StepRecord, item: ItemRecord | None, proceed: Call) -> Call:
    return lambda arguments: extension.call(record, item, arguments, proceed)


def _pending_detail(exc: ApprovalPending) -> dict[str, Any]:
    """What a journal keeps about a parked review: the request the reviewer could not answer yet."""
    request = getattr(exc, 'request', None)
    if request is None:
        return {}
    return {'tool': request.tool_name, 'description': request.description,
            'arguments': request.arguments if isinstance(request.arguments, (str, Mapping)) else None}


def _describe(value: Any) -> str:
    """`null`, `an object {...}`, `a string "..."`: what a value is, for a message."""
    if value is None:
        return 'null'
    kind = {dict: 'an object', str: 'a string', bool: 'a boolean'}.get(type(value), 'a number')
    return f'{kind} {excerpt(value)}'


def _on_asyncio() -> bool:
    """Whether the run is on asyncio (else trio, which runs no asyncio event loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


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
