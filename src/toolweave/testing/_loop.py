"""`LoopWatch`: how long the event loop went without running other tasks while some work ran beside it."""

from __future__ import annotations

from time import perf_counter
from types import TracebackType

import anyio
from anyio.abc import TaskGroup

from toolweave._checks import check_number

__all__ = ('LoopWatch',)


class LoopWatch:
    """A ticker task that wakes every `interval` seconds beside the work inside the block; `longest_gap` is the
    longest time between two of its wake-ups (or between entering the block and the first, or the last and
    leaving it): the longest stretch the event loop was blocked, plus up to one interval.

    ```python
    import time

    async with LoopWatch() as watch:
        time.sleep(0.05)  # blocks the event loop
    print(watch.longest_gap >= 0.05)
    #> True
    ```

    Args:
        interval: seconds between wake-ups; the smallest gap it can tell from a free loop.
    """

    def __init__(self, interval: float = 0.01) -> None:
        check_number(interval, 'LoopWatch interval', exclusive=True, unit='seconds')
        self.interval = interval
        self.longest_gap = 0.0
        """The longest time in seconds between two wake-ups of the ticker (see the class)."""
        self.ticks = 0
        """How many times the ticker woke up."""
        self._last = 0.0
        self._group: TaskGroup | None = None

    async def __aenter__(self) -> LoopWatch:
        self._last = perf_counter()
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._tick)
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        self._lap()
        assert self._group is not None
        self._group.cancel_scope.cancel()
        # Only the ticker is left in the group: it ends cleanly, and what the block raised propagates unchanged.
        await self._group.__aexit__(None, None, None)

    async def _tick(self) -> None:
        while True:
            await anyio.sleep(self.interval)
            self.ticks += 1
            self._lap()

    def _lap(self) -> None:
        now = perf_counter()
        self.longest_gap = max(self.longest_gap, now - self._last)
        self._last = now
