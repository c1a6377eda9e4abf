"""The record of every review decision: an `ApprovalLog` a run installs and reads back.

Plans and agents install one around their run with `record_approvals()`; every decision made inside the block
(however deeply nested: a gated step of a pipeline inside a plan inside an agent) is appended to it and to every
enclosing log, so an agent's log also holds the decisions of the plans it ran.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic_core import to_jsonable_python

from toolweave.approval._model import ReviewDecision, ReviewRequest

__all__ = ('ApprovalLog', 'ApprovalRecord', 'current_approval_log', 'record_approvals')


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    """One review: what was asked, what was decided, by whom, when and how long it took."""

    request: ReviewRequest
    decision: ReviewDecision
    handler: str
    """The class name of the handler that decided (for a timeout, the handler that did not answer)."""
    decided_at: datetime
    """When the decision was made (UTC)."""
    seconds: float
    """How long the review took."""

    @property
    def tool_name(self) -> str:
        return self.request.tool_name

    @property
    def outcome(self) -> str:
        """`approved`, `edited`, `rejected`, or one of those prefixed with `timed out, ` for a timeout."""
        word = {'continue': 'approved', 'edit': 'edited', 'exit_early': 'rejected'}[self.decision.kind]
        return f'timed out, {word}' if self.decision.timed_out else word

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-able data (for run records and `--json` output)."""
        return {
            'tool': self.request.tool_name,
            'description': self.request.description,
            'arguments': to_jsonable_python(self.request.arguments, fallback=repr),
            'outcome': self.outcome,
            'decision': self.decision.kind,
            'revised': to_jsonable_python(self.decision.revised, fallback=repr),
            'reason': self.decision.reason,
            'timed_out': self.decision.timed_out,
            'handler': self.handler,
            'decided_at': self.decided_at.isoformat(),
            'seconds': round(self.seconds, 6),
        }


class ApprovalLog:
    """The decisions made during a run, in the order they were made. Thread-safe.

    ```python
    from toolweave.approval import record_approvals

    with record_approvals() as log:
        ...  # run tools, plans, pipelines
    print(len(log))
    #> 0
    ```
    """

    def __init__(self, parent: ApprovalLog | None = None) -> None:
        self._records: list[ApprovalRecord] = []
        self._lock = threading.Lock()
        self._parent = parent

    def add(self, record: ApprovalRecord) -> None:
        """Append `record` here and to every enclosing log."""
        with self._lock:
            self._records.append(record)
        if self._parent is not None:
            self._parent.add(record)

    @property
    def records(self) -> tuple[ApprovalRecord, ...]:
        with self._lock:
            return tuple(self._records)

    def for_tool(self, name: str) -> tuple[ApprovalRecord, ...]:
        """The records of the tool called `name`."""
        return tuple(r for r in self.records if r.tool_name == name)

    def to_list(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.records]

    def __iter__(self) -> Iterator[ApprovalRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def __repr__(self) -> str:
        return f'ApprovalLog({len(self)} records)'


_log_var: ContextVar[ApprovalLog | None] = ContextVar('toolweave_approval_log', default=None)


def current_approval_log() -> ApprovalLog | None:
    """The innermost log installed by `record_approvals`, or `None`."""
    return _log_var.get()


@contextmanager
def record_approvals() -> Iterator[ApprovalLog]:
    """Collect every review decision made inside the block (and pass each to the enclosing logs too)."""
    log = ApprovalLog(_log_var.get())
    token = _log_var.set(log)
    try:
        yield log
    finally:
        _log_var.reset(token)
