"""Ambient state: what a run sets once and every nested tool call sees, without any signature carrying it.

Each piece lives in a context variable next to the type it holds, in the layer that owns it:

- the reviewers of gated calls: `toolweave.tools._review` (installed by `toolweave.approval.use_review_handler`);
- the metrics sink: `toolweave.tools._metrics` (`use_metrics`);
- the record of review decisions: `toolweave.approval._log` (`record_approvals`);
- the facades unfolded during one agent tool call: `toolweave.progressive._unfolding`;
- the current agent run: `toolweave.agent._process` (`current_process`).

anyio task groups copy the context into the tasks they start, so parallel plan steps and pipeline steps see the
state of the call that started them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

__all__ = ('using',)

_T = TypeVar('_T')


@contextmanager
def using(var: ContextVar[_T], value: _T) -> Iterator[_T]:
    """Set `var` to `value` for the duration of the block."""
    token = var.set(value)
    try:
        yield value
    finally:
        var.reset(token)
