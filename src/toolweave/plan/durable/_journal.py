"""`Journal`: a run's step transitions on their way to its store, written ahead of every tool call.

A kernel extension: the kernel tells it each transition (`transition`, `ready`), a cheap append to a buffer, and
awaits `sync` (`flush`: the buffer in one transaction) before it calls a step's tool, before a reviewer is asked
and before a worker pauses, so a step's `running` row is in the store before its tool can do anything, a step
being reviewed is on record as such before anyone is asked, and a finished step's row is in the store before any
step started after it, or before the run waits. Steps that start together share one commit: while one flush
waits on the store in a worker thread, the steps that start meanwhile note their rows and queue behind it, and the
next write takes them all (a network database: the round trip dominates). A local SQLite file is written straight
from the event loop instead, one commit per step start: a step that waited for a thread would be suspended, and
suspending every step costs more than the commit.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any

import anyio
import anyio.to_thread

from toolweave.approval._gate import APPROVAL_OPTIONS_KEY
from toolweave.exceptions import PlanStoreError, RunLostError
from toolweave.plan._kernel import CancelRun, Extension, Run
from toolweave.plan._model import StepStatus
from toolweave.plan._record import ItemRecord, StepRecord
from toolweave.plan.durable._codec import transition_of
from toolweave.plan.durable._store import PlanStore, StoreBusy, Transition, patiently

__all__ = ('Journal', 'held_clock')


class Journal(Extension):
    """The journal of one durable run (see the module docstring): its writes are fenced by the run's `owner`
    token (see `toolweave.plan.durable._sql`), so a process that lost the run writes nothing more and stops at once
    (`RunLostError`), and a person's request to cancel the run, read back with every write, cancels it."""

    def __init__(self, store: PlanStore, run_id: str, owner: str, *, deadline: float | None = None,
                 on_deadline: str = 'reject') -> None:
        self.store = store
        self.run_id = run_id
        self.owner = owner
        self.deadline = deadline
        """Seconds a step parked for a review waits for its decision (`None`: for ever), unless its tool's review
        sets its own `timeout` (`requires_approval(timeout=...)`)."""
        self._run: Run | None = None
        self.on_deadline = on_deadline
        self.buffer: list[Transition] = []
        self.noted = 0
        """Transitions noted so far."""
        self.written = 0
        """Transitions written so far (a prefix of those noted): the next write's sequence number."""
        self.failure: Exception | None = None
        """Why the journal cannot write any more (the store failed, the run was lost): every later write raises it."""
        self.cancel: str | None = None
        """Why a person asked the run to stop, once a write or a heartbeat read it back."""
        self.confirmed = held_clock()
        """When (`held_clock`) the store last confirmed that this process holds the run."""
        self._lock = anyio.Lock()
        self._in_flight = False
        """Whether a write is on its way in a worker thread (an inline write would then jump the queue)."""

    def attach(self, run: Run) -> None:
        self._run = run

    def _deadline(self, record: StepRecord) -> float | None:
        """How long `record`'s parked review waits: its tool's review timeout if it sets one, else the run's."""
        tool = self._run.tools[record.index] if self._run is not None else None
        if tool is not None:
            timeout = (tool.definition.metadata.extra.get(APPROVAL_OPTIONS_KEY) or {}).get('timeout')
            if isinstance(timeout, (int, float)):
                return float(timeout)
        return self.deadline

    def transition(self, record: StepRecord, status: StepStatus, detail: Mapping[str, Any] | None,
                   item: ItemRecord | None) -> None:
        now = time.time()
        if status == 'running' and item is None and record.given is not None:
            detail = {**(detail or {}), 'arguments': record.given}  # a reviewer's edit: what the tool runs with
        elif (status == 'parked' and not (detail or {}).get('again')
              and not (detail or {}).get('unknown_after_crash')):  # a review waits; a person must judge a crash
            deadline = self._deadline(record)
            if deadline is not None:
                detail = {**(detail or {}), 'deadline_at': now + deadline, 'on_deadline': self.on_deadline}
        self.buffer.append(transition_of(record, status, now, detail, item))
        self.noted += 1

    def ready(self, record: StepRecord) -> None:
        self.buffer.append(Transition(record.id, 'ready', time.time()))
        self.noted += 1

    def note(self, transition: Transition) -> None:
        self.buffer.append(transition)
        self.noted += 1

    async def sync(self) -> None:
        """Write what was noted, and make sure the run is still this process's: if no write confirmed that for
        half a lease (the process may have been paused), ask the store before a tool is called. Raises
        `RunLostError` when it is not, `CancelRun` when a person asked the run to stop."""
        await self.flush()
        if held_clock() - self.confirmed > self.store.lease / 2:
            await self.confirm()
        if self.cancel is not None:
            raise CancelRun(f'a person asked the run to stop ({self.cancel})')

    async def confirm(self) -> None:
        """Ask the store whether this process still holds the run (renewing its lease)."""
        if self.failure is not None:
            raise self.failure
        async with self._lock:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.beat)

    async def flush(self) -> None:
        if self.failure is not None:
            raise self.failure
        if self.written == self.noted:
            return
        if self.store.inline and not self._in_flight:  # a local file: written here, without a trip to a thread
            batch, self.buffer = self.buffer, []
            try:
                self._write(batch, patient=False)
                return
            except StoreBusy:  # another process holds the file's lock: wait for it in a thread, not here
                self.buffer[:0] = batch
        target = self.noted
        while self.written < target:
            async with self._lock:  # one write at a time; whoever waited writes what was noted meanwhile too
                if self.written < target:
                    batch, self.buffer = self.buffer, []  # taken here, in the event loop's thread
                    self._in_flight = True
                    try:
                        with anyio.CancelScope(shield=True):  # a batch taken is written, even by a cancelled task
                            await anyio.to_thread.run_sync(self._write, batch, True)
                    finally:
                        self._in_flight = False

    def _write(self, batch: list[Transition], patient: bool) -> None:
        try:
            with patiently(self.store) if patient else nullcontext():
                cancel = self.store.append(self.run_id, self.owner, batch, seq=self.written)
        except StoreBusy:
            raise
        except RunLostError as exc:
            self.failure = exc
            raise
        except PlanStoreError as exc:
            self.failure = PlanStoreError(f'{exc}. The run stopped: a step cannot start unless its start is '
                                          'recorded. Everything recorded before is intact; resume the run once the '
                                          'store is back.')
            raise self.failure from exc
        self.written += len(batch)
        self.confirmed = held_clock()
        if cancel is not None:
            self.cancel = cancel

    def beat(self) -> None:
        """Renew the run's lease (fenced, in a worker thread or the heartbeat's); reads back a cancel request."""
        try:
            with patiently(self.store):
                cancel = self.store.heartbeat(self.run_id, self.owner)
        except RunLostError as exc:
            self.failure = exc
            raise
        self.confirmed = held_clock()
        if cancel is not None:
            self.cancel = cancel


def held_clock() -> float:
    """Seconds on a clock that also runs while the machine sleeps (a suspended laptop or VM loses its lease too)."""
    return time.clock_gettime(_CLOCK)


_CLOCK = getattr(time, 'CLOCK_BOOTTIME', time.CLOCK_MONOTONIC)
