"""The live feed: which runs changed, told to every open page as it happens (server-sent events).

The store says what changed: PostgreSQL by notifications on `CHANNEL` (the UI's trigger sends one per write and
run, whichever process wrote: the run's own, a DBOS worker's coordinator, a `toolweave runs approve`), SQLite by a
look every `interval` seconds at the last transition id and the last header update (two index lookups). A page
that hears of a change to what it shows reads it again.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.from_thread
import anyio.to_thread
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from toolweave.exceptions import PlanStoreError
from toolweave.ui._reads import Reads

__all__ = ('ChangeFeed',)

_QUEUE = 256
"""Changes a slow page may fall behind by before it is told to read everything again."""


class ChangeFeed:
    """Fans the store's changes out to subscribers (one per open page)."""

    def __init__(self, reads: Reads, *, interval: float = 0.1) -> None:
        self.reads = reads
        self.interval = interval
        self._subscribers: set[MemoryObjectSendStream[frozenset[str]]] = set()
        self._stop = threading.Event()

    async def run(self, group: TaskGroup) -> None:
        """Start watching the store in `group` (until `close`)."""
        if self.reads.postgres:
            group.start_soon(self._listen)
        group.start_soon(self._poll)

    def close(self) -> None:
        self._stop.set()
        for stream in list(self._subscribers):
            stream.close()

    def publish(self, run_ids: frozenset[str]) -> None:
        """Tell every subscriber that `run_ids` changed (`frozenset()`: anything may have changed)."""
        for stream in list(self._subscribers):
            try:
                stream.send_nowait(run_ids)
            except anyio.WouldBlock:
                stream.close()  # too far behind: its page reconnects and reads everything again
                self._subscribers.discard(stream)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._subscribers.discard(stream)

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[MemoryObjectReceiveStream[frozenset[str]]]:
        send, receive = anyio.create_memory_object_stream[frozenset[str]](_QUEUE)
        self._subscribers.add(send)
        try:
            yield receive
        finally:
            self._subscribers.discard(send)
            send.close()
            receive.close()

    async def _poll(self) -> None:
        """SQLite: look for changes every `interval`. PostgreSQL: a slower look, in case a notification was lost
        (the listening connection dropped)."""
        interval = self.interval if not self.reads.postgres else max(self.interval, 2.0)
        mark = await anyio.to_thread.run_sync(self.reads.mark)
        while not self._stop.is_set():
            await anyio.sleep(interval)
            try:
                changed, mark = await anyio.to_thread.run_sync(self.reads.changed_since, mark)
            except PlanStoreError:
                continue  # the store is away for a moment; the next look tries again
            if changed:
                self.publish(frozenset(changed))

    async def _listen(self) -> None:
        def deliver(run_id: str) -> None:
            anyio.from_thread.run_sync(self.publish, frozenset((run_id,)))

        while not self._stop.is_set():
            try:
                await anyio.to_thread.run_sync(self.reads.listen, deliver, self._stop, abandon_on_cancel=True)
            except Exception:  # the connection dropped: listen again after a pause (the poll covers the gap)
                await anyio.sleep(1.0)
