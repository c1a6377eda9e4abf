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
from typing import Any

import anyio
import anyio.to_thread

from toolweave.exceptions import PlanStoreError
from toolweave.plan._kernel import Extension
from toolweave.plan._model import StepStatus
from toolweave.plan._record import ItemRecord, StepRecord
from toolweave.plan.durable._codec import transition_of
from toolweave.plan.durable._store import PlanStore, Transition

__all__ = ('Journal',)


class Journal(Extension):
    """The journal of one durable run (see the module docstring)."""

    def __init__(self, store: PlanStore, run_id: str, owner: str) -> None:
        self.store = store
        self.run_id = run_id
        self.owner = owner
        self.buffer: list[Transition] = []
        self.noted = 0
        """Transitions noted so far."""
        self.written = 0
        """Transitions written so far (a prefix of those noted)."""
        self.failure: PlanStoreError | None = None
        self._lock: anyio.Lock | None = None

    def transition(self, record: StepRecord, status: StepStatus, detail: Mapping[str, Any] | None,
                   item: ItemRecord | None) -> None:
        if status == 'running' and item is None and record.given is not None:
            detail = {**(detail or {}), 'arguments': record.given}  # a reviewer's edit: what the tool runs with
        self.buffer.append(transition_of(record, status, time.time(), detail, item))
        self.noted += 1

    def ready(self, record: StepRecord) -> None:
        self.buffer.append(Transition(record.id, 'ready', time.time()))
        self.noted += 1

    def note(self, transition: Transition) -> None:
        self.buffer.append(transition)
        self.noted += 1

    async def sync(self) -> None:
        await self.flush()

    async def flush(self) -> None:
        if self.failure is not None:
            raise self.failure
        if self.written == self.noted:
            return
        if self.store.inline:  # a local file: written here, without the trip to a worker thread
            batch, self.buffer = self.buffer, []
            self._write(batch)
            return
        if self._lock is None:
            self._lock = anyio.Lock()
        target = self.noted
        while self.written < target:
            async with self._lock:  # one write at a time; whoever waited writes what was noted meanwhile too
                if self.written < target:
                    batch, self.buffer = self.buffer, []  # taken here, in the event loop's thread
                    with anyio.CancelScope(shield=True):  # a batch taken is written, even by a cancelled task
                        await anyio.to_thread.run_sync(self._write, batch)

    def _write(self, batch: list[Transition]) -> None:
        try:
            self.store.append(self.run_id, self.owner, batch)
        except PlanStoreError as exc:
            self.failure = PlanStoreError(f'{exc}. The run stopped: a step cannot start unless its start is '
                                          'recorded. Everything recorded before is intact; resume the run once the '
                                          'store is back.')
            raise self.failure from exc
        self.written += len(batch)
