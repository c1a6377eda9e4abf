from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ('GLOBAL_METRICS', 'ToolMetrics', 'ToolStats', 'log_call', 'truncate')

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
            return ToolStats() if found is None else ToolStats(**{f: getattr(found, f) for f in found.__slots__})

    def snapshot(self) -> dict[str, ToolStats]:
        with self._lock:
            names = list(self._stats)
        return {name: self.stats(name) for name in names}

    def reset(self) -> None:
        with self._lock:
            self._stats.clear()


GLOBAL_METRICS = ToolMetrics()


def truncate(text: str, limit: int = _INFO_LIMIT) -> str:
    return text if len(text) <= limit else f'{text[:limit]}... ({len(text) - limit} more chars)'


def _render(arguments: str | Mapping[str, Any] | None) -> str:
    if arguments is None or isinstance(arguments, str):
        return arguments or ''
    try:
        return json.dumps(arguments, separators=(',', ':'), default=str)
    except (TypeError, ValueError):
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
