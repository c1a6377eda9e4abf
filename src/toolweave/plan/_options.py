"""`RunOptions`: the knobs of a plan run, checked once (and, for a durable run, stored with it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolweave._checks import check_number
from toolweave.approval import ReviewHandler, check_review_handler
from toolweave.exceptions import UserError
from toolweave.plan._model import MissingField, ReviewMode
from toolweave.plan._parse import DEFAULT_MAX_BYTES
from toolweave.plan._record import DEFAULT_MAX_OUTPUT_CHARS
from toolweave.plan._validate import DEFAULT_MAX_ITEMS

if TYPE_CHECKING:
    from toolweave.plan.durable._store import PlanStore

__all__ = ('DEFAULT_MAX_STEPS', 'DEFAULT_QUEUE', 'RunOptions', 'worker_queue')

DEFAULT_MAX_STEPS = 10_000
DEFAULT_QUEUE = 'toolweave'
"""The worker queue `workers=True` sends steps to, and a worker serves unless told otherwise."""
_STORED = ('concurrency', 'step_timeout', 'timeout', 'missing_field', 'max_steps', 'max_output_chars', 'review_mode',
           'max_items', 'workers')
"""The options a durable run keeps with it; a resume runs with them."""


@dataclass(frozen=True, slots=True)
class RunOptions:
    """The knobs of a run, checked once."""

    concurrency: int | None = None
    step_timeout: float | None = None
    timeout: float | None = None
    missing_field: MissingField = 'error'
    max_steps: int = DEFAULT_MAX_STEPS
    max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS
    review_handler: ReviewHandler | None = None
    review_mode: ReviewMode = 'per_step'
    store: PlanStore | None = None
    max_items: int = DEFAULT_MAX_ITEMS
    """The most elements a `for_each` step may run over."""
    workers: str | None = None
    """The worker queue each step's tool call is sent to (see `toolweave.plan.workers`), `None`: this process."""
    max_bytes: int = DEFAULT_MAX_BYTES
    """The largest plan text read, in bytes (checked before it is read; a plan given as a mapping has none)."""
    run_name: str | None = None
    """The label a durable run is stored under, to find it by (`list_runs(name=...)`); not one of its options."""

    def __post_init__(self) -> None:
        check_number(self.concurrency, 'concurrency (None: unlimited)', integer=True, minimum=1, optional=True)
        check_number(self.step_timeout, 'step_timeout', exclusive=True, optional=True, unit='seconds')
        check_number(self.timeout, 'timeout', exclusive=True, optional=True, unit='seconds')
        if self.missing_field not in ('null', 'error'):
            raise UserError(f"missing_field must be 'null' or 'error', got {self.missing_field!r}.")
        check_number(self.max_steps, 'max_steps', integer=True, minimum=1)
        check_number(self.max_output_chars, 'max_output_chars (None: never cut)', integer=True, minimum=1,
                     optional=True)
        check_review_handler(self.review_handler, 'The plan run')
        if self.review_mode not in ('per_step', 'whole_plan'):
            raise UserError(f"review_mode must be 'per_step' or 'whole_plan', got {self.review_mode!r}.")
        check_number(self.max_items, 'max_items', integer=True, minimum=1)
        if self.workers is not None:
            worker_queue(self.workers)
        check_number(self.max_bytes, 'max_bytes', integer=True, minimum=1)
        if self.run_name is not None and (not isinstance(self.run_name, str) or not 0 < len(self.run_name) <= 200):
            raise UserError(f'A run name must be a string of 1 to 200 characters, got {self.run_name!r}.')

    def stored(self) -> dict[str, Any]:
        """The options a durable run keeps (not the reviewer, the store or the call context)."""
        return {name: getattr(self, name) for name in _STORED}

    @classmethod
    def from_stored(cls, data: dict[str, Any], *, review_handler: ReviewHandler | None,
                    store: PlanStore) -> RunOptions:
        return cls(**{name: data[name] for name in _STORED if name in data}, review_handler=review_handler,
                   store=store)


def worker_queue(workers: bool | str) -> str | None:
    """The queue `workers=` names: `True` the default one, a string that one, `False` none."""
    if workers is True:
        return DEFAULT_QUEUE
    if workers is False:
        return None
    if not isinstance(workers, str) or not workers.strip():
        raise UserError(f'workers must be True, False or a queue name, got {workers!r}.')
    return workers
