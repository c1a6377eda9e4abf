"""Ambient state of a run, carried in context variables so it reaches every nested tool call (pipeline steps,
plan steps, sub-agents) without threading it through every signature. anyio task groups copy the context into
child tasks, so parallel plan steps see the state of the run that started them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from toolweave.approval import ReviewHandler
    from toolweave.tools._metrics import ToolMetrics

__all__ = ('current_metrics', 'current_process', 'current_review_handler', 'using')

_T = TypeVar('_T')

review_handler_var: ContextVar[ReviewHandler | None] = ContextVar('toolweave_review_handler', default=None)
metrics_var: ContextVar[ToolMetrics | None] = ContextVar('toolweave_metrics', default=None)
process_var: ContextVar[Any] = ContextVar('toolweave_process', default=None)
_global_metrics: ToolMetrics | None = None


@contextmanager
def using(var: ContextVar[_T], value: _T) -> Iterator[_T]:
    """Set `var` for the duration of the block."""
    token = var.set(value)
    try:
        yield value
    finally:
        var.reset(token)


def current_review_handler() -> ReviewHandler | None:
    return review_handler_var.get()


def current_metrics() -> ToolMetrics:
    found = metrics_var.get()
    if found is not None:
        return found
    # A function-level import costs ~2 us per call (the import lock); every `Tool.call` comes here.
    global _global_metrics
    if _global_metrics is None:
        from toolweave.tools._metrics import GLOBAL_METRICS

        _global_metrics = GLOBAL_METRICS
    return _global_metrics


def current_process() -> Any:
    """The `AgentProcess` of the run this code executes in, or `None` outside an agent run."""
    return process_var.get()
