"""Tools that prove plan steps ran at the same time: each call waits until all of them are running, so a plan that
ran its steps one after another would fail (after `patience` seconds) instead of passing by luck of timing."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from time import perf_counter

import anyio


@dataclass
class Meeting:
    """`parties` calls that must all be running at once; each records the interval it ran in."""

    parties: int
    patience: float = 10.0
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    cancelled: list[str] = field(default_factory=list)
    _arrived: int = 0
    _everyone: anyio.Event | None = None
    _barrier: threading.Barrier | None = None

    async def meet(self, key: str) -> None:
        start = perf_counter()
        if self._everyone is None:
            self._everyone = anyio.Event()
        self._arrived += 1
        if self._arrived == self.parties:
            self._everyone.set()
        try:
            with anyio.fail_after(self.patience):
                await self._everyone.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(key)
            raise
        self.intervals[key] = (start, perf_counter())

    def meet_in_thread(self, key: str) -> None:
        """`meet` for a sync tool, which its framework runs in a worker thread."""
        start = perf_counter()
        if self._barrier is None:
            self._barrier = threading.Barrier(self.parties, timeout=self.patience)
        self._barrier.wait()
        self.intervals[key] = (start, perf_counter())

    def overlapped(self, *keys: str) -> bool:
        """Whether the calls under `keys` were all running at one moment."""
        spans = [self.intervals[key] for key in keys]
        return max(start for start, _ in spans) < min(end for _, end in spans)


@dataclass
class Hang:
    """`parties` calls that never finish on their own and record that they were cancelled."""

    parties: int
    started: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    _everyone: anyio.Event | None = None

    def _all_started(self) -> anyio.Event:
        if self._everyone is None:
            self._everyone = anyio.Event()
        return self._everyone

    async def hang(self, key: str) -> None:
        self.started.append(key)
        if len(self.started) == self.parties:
            self._all_started().set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(key)
            raise

    async def wait_until_all_started(self) -> None:
        with anyio.fail_after(10):
            await self._all_started().wait()
