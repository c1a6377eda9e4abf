"""The eager executor: a step starts as soon as its last dependency finishes; fail-forward.

Steps are not one task each. A small pool of workers takes ready steps from a queue; the worker that
finishes a step releases its dependents into the queue and carries on with the next ready step itself. A
worker that takes a step while more are waiting schedules spare workers for them (a few at a time, never more
than the concurrency limit), so steps that wait on I/O overlap at once while steps that do not suspend run
back to back without any task switch. Dependency bookkeeping is a counter per step: O(steps + refs).

Failure policy: collect a per-step outcome. A failed step (raised, returned a failure, timed out, or its
references could not be resolved) never cancels its siblings; its dependents are skipped, transitively, each
naming its immediate failed dependency. Only `ToolConfigurationError` and control-flow signals stop the run:
the other steps are cancelled and the exception propagates. A whole-plan timeout or an outer cancellation
records every unfinished step as `cancelled`.
"""

from __future__ import annotations

import heapq
import json
import logging
from collections import deque
from time import perf_counter
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from toolweave.exceptions import ControlFlowSignal, ToolConfigurationError
from toolweave.plan._model import EventHandler, MissingField, PlanEvent
from toolweave.plan._record import JSON_START as _JSON_START
from toolweave.plan._record import PlanRun, StepRecord, jsonable, parse_output
from toolweave.plan._refs import ResolveError
from toolweave.plan._scan import Resolver
from toolweave.plan._validate import Prepared
from toolweave.tools._context import ToolCallContext

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from toolweave.tools import ToolResult

__all__ = ('execute',)

logger = logging.getLogger('toolweave.plan')
_YIELD_EVERY = 64
"""Steps a worker runs back to back before it lets other tasks in (cancellation and timeouts stay prompt)."""
_INFINITE = 1 << 62
_MAX_SPARES = 8
"""Workers started but not yet running, at most: enough to start a burst of ready steps within a few turns of
the event loop, few enough that steps which never suspend (they run back to back in one worker) do not pay for
idle tasks."""
_FAILED: Any = object()
NOTHING_RETURNED = 'Function executed successfully'
"""A step's output when its tool returned `None`, so the model sees that it ran."""


class _Run:
    __slots__ = (
        'args', 'context', 'dependents', 'deps', 'fatal', 'fifo', 'heap', 'limit', 'missing', 'on_event', 'priority',
        'ready', 'records', 'remaining', 'resolver', 'rewrite', 'spares', 'step_timeout', 't0', 'tools',
        'upstream_failed', 'workers',
    )

    def __init__(self, prepared: Prepared, *, concurrency: int | None, step_timeout: float | None,
                 missing: MissingField, context: ToolCallContext, on_event: EventHandler | None) -> None:
        plan = prepared.plan
        deps = prepared.deps
        ids = [step.id for step in plan.steps]
        waves = prepared.waves
        self.records = [
            StepRecord(step.id, step.tool, index, waves[index],
                       tuple([ids[d] for d in deps[index]]) if deps[index] else (), description=step.description)
            for index, step in enumerate(plan.steps)
        ]
        self.args = [step.arguments for step in plan.steps]
        self.tools = prepared.tools
        self.rewrite = prepared.rewrite
        self.resolver = Resolver(prepared.table, self.records, missing, plan.dialect)
        self.deps = deps
        self.dependents = prepared.dependents
        self.remaining = [len(d) for d in deps]
        self.upstream_failed: set[int] = set()
        self.limit = _INFINITE if concurrency is None else concurrency
        self.step_timeout = step_timeout
        self.missing = missing
        self.context = context
        self.on_event = on_event
        self.workers = 0
        self.spares = 0
        self.fatal: BaseException | None = None
        self.t0 = 0.0
        roots = [i for i, d in enumerate(deps) if not d]
        self.priority: list[int] = []
        self.heap: list[tuple[int, int]] = []
        self.fifo: deque[int] = deque()
        self.ready: deque[int] | list[tuple[int, int]]
        if concurrency is not None:
            # With a limit, start the step with the longest chain behind it first (list scheduling).
            self.priority = _chain_lengths(deps, prepared.dependents)
            self.heap = [(-self.priority[i], i) for i in roots]
            heapq.heapify(self.heap)
            self.ready = self.heap
        else:
            self.fifo.extend(roots)
            self.ready = self.fifo

    # --- the pool ---------------------------------------------------------------------------------------------

    def _push(self, index: int) -> None:
        if self.ready is self.fifo:
            self.fifo.append(index)
        else:
            heapq.heappush(self.heap, (-self.priority[index], index))

    def _pop(self) -> int:
        if self.ready is self.fifo:
            return self.fifo.popleft()
        return heapq.heappop(self.heap)[1]

    def spawn(self, tg: TaskGroup) -> None:
        """Make sure enough spare workers are on their way for the steps waiting in the queue."""
        wanted = min(len(self.ready), _MAX_SPARES)
        while self.spares < wanted and self.workers < self.limit:
            self.workers += 1
            self.spares += 1
            tg.start_soon(self._worker, tg)

    async def _worker(self, tg: TaskGroup) -> None:
        # One loop per worker; the step's synchronous parts are plain calls, so a step that does not suspend
        # costs one coroutine (the tool call) and no task switch.
        self.spares -= 1
        ready = self.ready
        fifo = self.fifo if ready is self.fifo else None
        tools = self.tools
        context = self.context
        streak = 0
        take = fifo.popleft if fifo is not None else self._pop  # a new worker takes the step waiting longest
        try:
            while ready:
                index = take()
                if ready and self.spares < _MAX_SPARES and self.workers < self.limit:
                    self.spawn(tg)
                arguments = self._start(index)
                if arguments is not _FAILED:
                    try:
                        if self.step_timeout is None:
                            result: ToolResult | None = await tools[index].call(arguments, context)
                        else:
                            result = None
                            with anyio.move_on_after(self.step_timeout):
                                result = await tools[index].call(arguments, context)
                    except (ToolConfigurationError, ControlFlowSignal) as exc:
                        self._fail(index, f'{type(exc).__name__}: {exc}')
                        if self.fatal is None:
                            self.fatal = exc
                        raise _Stop from None
                    if result is not None and result.error is None:
                        self._succeed(index, self.records[index], result)
                    else:
                        self._end(index, result)
                if fifo is not None:
                    # Then it carries on with the step it released last: the one whose last dependency just
                    # finished, on the chain that is holding the plan up. Older ones have spares on the way.
                    take = fifo.pop
                streak += 1
                if streak == _YIELD_EVERY:
                    streak = 0
                    await anyio.lowlevel.checkpoint()
        finally:
            self.workers -= 1

    # --- one step ---------------------------------------------------------------------------------------------

    def _emit(self, kind: Any, record: StepRecord) -> None:
        assert self.on_event is not None
        try:
            self.on_event(PlanEvent(kind, record, self.t0))
        except Exception:
            logger.exception('on_event handler raised for step %r; ignored', record.id)

    def _start(self, index: int) -> Any:
        """Mark the step running and resolve its arguments; `_FAILED` if that failed the step."""
        record = self.records[index]
        record.status = 'running'
        record.started_at = perf_counter() - self.t0
        if self.on_event is not None:
            self._emit('step_started', record)
        given = self.args[index]
        rewrite = self.rewrite[index]
        if rewrite:
            try:
                if type(rewrite) is tuple:
                    arguments = self.resolver.resolve_keys(given, rewrite, record.id)
                else:
                    arguments = self.resolver.resolve(given, record.id)
            except ResolveError as exc:
                self._fail(index, str(exc))
                return _FAILED
            except RecursionError:
                self._fail(index, 'Arguments are nested too deeply to resolve. Use fewer levels of nested objects '
                                  'and arrays.')
                return _FAILED
            record.given = given
            record.resolver = self.resolver
            return arguments
        if type(given) is str:  # JSON text that did not parse: the step fails, its siblings run
            self._fail(index, _deserialize_error(record.tool, given))
            return _FAILED
        record.given = given
        return given

    def _end(self, index: int, result: ToolResult | None) -> None:
        if result is None:
            self._fail(index, f'Tool execution failed: step {self.records[index].id!r} timed out after '
                              f'{self.step_timeout:g} s (step_timeout)')
        elif result.error is not None:
            self._fail(index, f'Tool execution failed: {result.error}' if result.raised else result.error)
        else:
            self._succeed(index, self.records[index], result)

    def _succeed(self, index: int, record: StepRecord, result: ToolResult) -> None:
        record.ended_at = perf_counter() - self.t0
        record.status = 'succeeded'
        output = record.output = result.output
        value = result.value
        if not output and value is None and result.has_value:  # the tool returned nothing
            output = record.output = NOTHING_RETURNED
        if result.has_value and type(value) is not str:
            record.value = value
            record.ref_value = jsonable(value)
        elif output and output[0] not in _JSON_START and not output[0].isspace():
            record.value = record.ref_value = output  # plain text (the common case), no parse attempt
            record.is_text = record.from_output = True
        else:
            parsed, is_text = parse_output(output)
            record.value = record.ref_value = parsed
            record.is_text = is_text
            record.from_output = True
        if self.on_event is not None:
            self._emit('step_finished', record)
        dependents = self.dependents[index]
        if dependents:
            remaining = self.remaining
            fifo = self.fifo if self.ready is self.fifo else None
            for child in dependents:
                left = remaining[child] - 1
                remaining[child] = left
                if not left:
                    if child in self.upstream_failed:
                        self._skip(child)
                    elif fifo is not None:
                        fifo.append(child)
                    else:
                        self._push(child)

    def _fail(self, index: int, message: str) -> None:
        record = self.records[index]
        record.ended_at = perf_counter() - self.t0
        record.status = 'failed'
        record.error = message
        if self.on_event is not None:
            self._emit('step_finished', record)
        self._release_failed(index)

    def _release_failed(self, index: int) -> None:
        stack = [index]
        while stack:
            for child in self.dependents[stack.pop()]:
                self.upstream_failed.add(child)
                left = self.remaining[child] - 1
                self.remaining[child] = left
                if not left:
                    self._mark_skipped(child)
                    stack.append(child)

    def _skip(self, index: int) -> None:
        self._mark_skipped(index)
        self._release_failed(index)

    def _mark_skipped(self, index: int) -> None:
        record = self.records[index]
        records = self.records
        culprit = next(records[d].id for d in self.deps[index] if records[d].status != 'succeeded')
        record.status = 'skipped'
        record.error = f"Skipped because dependency '{culprit}' failed"
        record.ended_at = perf_counter() - self.t0
        if self.on_event is not None:
            self._emit('step_finished', record)

    def cancel_unfinished(self, reason: str) -> None:
        now = perf_counter() - self.t0
        for record in self.records:
            if record.status in ('pending', 'running'):
                if record.status == 'running':
                    record.ended_at = now
                record.status = 'cancelled'
                record.error = reason


class _Stop(Exception):
    """A step raised a configuration error or control-flow signal: stop the pool (kept in `_Run.fatal`)."""


def _deserialize_error(tool: str, text: str) -> str:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        detail = f'{exc.msg} at line {exc.lineno} column {exc.colno}'
    else:  # pragma: no cover - only unparseable text is kept as a string
        detail = 'not a JSON object'
    return (f"Failed to deserialize arguments for tool '{tool}': {detail}. Send the arguments as a JSON object, "
            'e.g. {"name": "value"}.')


def _chain_lengths(deps: list[tuple[int, ...]], dependents: list[tuple[int, ...]]) -> list[int]:
    """Per step, the number of steps on the longest chain from it to the end of the plan."""
    n = len(deps)
    pending = [len(d) for d in dependents]
    length = [1] * n
    queue = [i for i in range(n) if not pending[i]]
    for node in queue:
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
    missing_field: MissingField = 'null',
    context: ToolCallContext = ToolCallContext.EMPTY,
    on_event: EventHandler | None = None,
    max_output_chars: int | None = None,
) -> PlanRun:
    """Run a validated plan and return its record."""
    run = _Run(prepared, concurrency=concurrency, step_timeout=step_timeout, missing=missing_field,
               context=context, on_event=on_event)
    run.t0 = started = perf_counter()
    timed_out = False
    try:
        with anyio.move_on_after(timeout) as scope:
            try:
                async with anyio.create_task_group() as tg:
                    if run.ready:
                        run.spawn(tg)
            except BaseExceptionGroup as group:
                _, rest = group.split(_Stop)
                if rest is not None:  # not a step's signal: a bug or an interrupt; unwrap a lone exception
                    raise (rest.exceptions[0] if len(rest.exceptions) == 1 else rest) from None
        timed_out = scope.cancelled_caught
    finally:
        if run.fatal is not None:
            run.cancel_unfinished(f'Cancelled: the run stopped because a step raised {type(run.fatal).__name__}')
        else:
            run.cancel_unfinished('Cancelled: the plan run was cancelled')
    if timed_out:
        for record in run.records:
            if record.error == 'Cancelled: the plan run was cancelled':
                record.error = f'Cancelled: the plan timed out after {timeout:g} s (timeout)'
    if run.fatal is not None:
        raise run.fatal
    levels: list[list[str]] = [[] for _ in range(max(prepared.waves, default=-1) + 1)]
    for record, wave in zip(run.records, prepared.waves, strict=True):
        levels[wave].append(record.id)
    waves = tuple(tuple(level) for level in levels if level)
    return PlanRun(prepared.plan, tuple(run.records), waves, started, perf_counter() - started,
                   max_output_chars=max_output_chars)
