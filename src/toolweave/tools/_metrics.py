"""Per-tool metrics and the log line of every call, both written once per call by `Tool.call`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields
from typing import Any

from toolweave._ambient import using
from toolweave._json import compact
from toolweave.exceptions import UserError

__all__ = (
    'GLOBAL_METRICS',
    'ToolMetrics',
    'ToolStats',
    'current_metrics',
    'log_call',
    'record_call',
    'truncate',
    'use_metrics',
)

logger = logging.getLogger('toolweave.tools')
_INFO_LIMIT = 200


@dataclass(slots=True)
class ToolStats:
    """Counts and timings of one tool's calls."""

    calls: int = 0
    successes: int = 0
    failures: int = 0
    total_seconds: float = 0.0
    max_seconds: float = 0.0

    @property
    def mean_seconds(self) -> float:
        return self.total_seconds / self.calls if self.calls else 0.0


class ToolMetrics:
    """Per-tool call counts, success and failure counts and timings. Thread-safe.

    Every `Tool.call` records here: the process-wide `GLOBAL_METRICS` unless a run installs its own.
    """

    def __init__(self) -> None:
        self._stats: dict[str, ToolStats] = {}
        self._lock = threading.Lock()

    def record(self, name: str, *, ok: bool, seconds: float) -> None:
        with self._lock:
            stats = self._stats.get(name)
            if stats is None:
                stats = self._stats[name] = ToolStats()
            stats.calls += 1
            if ok:
                stats.successes += 1
            else:
                stats.failures += 1
            stats.total_seconds += seconds
            if seconds > stats.max_seconds:
                stats.max_seconds = seconds

    def stats(self, name: str) -> ToolStats:
        """A copy of the stats of tool `name` (all zeros if it was never called)."""
        with self._lock:
            found = self._stats.get(name)
            return ToolStats() if found is None else ToolStats(*(getattr(found, f.name) for f in fields(found)))

    def snapshot(self) -> dict[str, ToolStats]:
        with self._lock:
            names = list(self._stats)
        return {name: self.stats(name) for name in names}

    def reset(self) -> None:
        with self._lock:
            self._stats.clear()


GLOBAL_METRICS = ToolMetrics()
"""Where calls are recorded when no run installed its own `ToolMetrics` with `use_metrics`."""

_metrics_var: ContextVar[ToolMetrics] = ContextVar('toolweave_metrics', default=GLOBAL_METRICS)


def current_metrics() -> ToolMetrics:
    """The metrics the calls of the current task are recorded in."""
    return _metrics_var.get()


@contextmanager
def use_metrics(metrics: ToolMetrics | None = None) -> Iterator[ToolMetrics]:
    """Record every tool call made inside the block (in this task and the tasks it starts) in `metrics` (a new
    `ToolMetrics` by default) instead of the process-wide `GLOBAL_METRICS`.

    ```python
    from toolweave.testing import FakeTool
    with use_metrics() as metrics:
        FakeTool('ping').call_sync()
    print(metrics.stats('ping').calls)
    #> 1
    ```
    """
    if metrics is not None and not isinstance(metrics, ToolMetrics):
        raise UserError(f'use_metrics() needs a ToolMetrics, got {type(metrics).__name__} {metrics!r}.')
    with using(_metrics_var, metrics if metrics is not None else ToolMetrics()) as installed:
        yield installed


def truncate(text: str, limit: int = _INFO_LIMIT) -> str:
    return text if len(text) <= limit else f'{text[:limit]}... ({len(text) - limit} more chars)'


def _render(arguments: str | Mapping[str, Any] | None) -> str:
    if arguments is None or isinstance(arguments, str):
        return arguments or ''
    try:
        return compact(arguments)
    except (TypeError, ValueError):  # a circular structure
        return repr(arguments)


def log_call(name: str, arguments: str | Mapping[str, Any] | None, output: str, error: str | None, ms: float) -> None:
    """INFO one line per call (truncated), WARNING for failures, DEBUG the full payloads."""
    if error is not None:
        if logger.isEnabledFor(logging.WARNING):
            logger.warning('Tool %r failed in %.1f ms | input: %s | error: %s', name, ms,
                           truncate(_render(arguments)), error)
    elif logger.isEnabledFor(logging.INFO):
        logger.info('Tool %r succeeded in %.1f ms | input: %s | output: %s', name, ms,
                    truncate(_render(arguments)), truncate(output))
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug('Tool %r full input: %s\nfull output: %s', name, _render(arguments), output)


def record_call(name: str, arguments: str | Mapping[str, Any] | None, output: str, error: str | None,
                seconds: float) -> None:
    """Record one finished call of the tool called `name`: in the current metrics, and as its log line."""
    current_metrics().record(name, ok=error is None, seconds=seconds)
    log_call(name, arguments, output, error, seconds * 1000)
