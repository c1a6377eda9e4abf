"""The storage seam of durable plans: what a store keeps (`RunInfo`, `Transition`) and the `PlanStore` protocol.

A store keeps, per run, one header row and an append-only list of transitions. A step's state is its last
transition; the journal of a run is the transitions in the order they were appended. Every write is one
transaction: a crash leaves a prefix of what the run did, never half a write.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from toolweave.exceptions import PlanStoreError

__all__ = (
    'LEASE_SECONDS',
    'PlanStore',
    'RunInfo',
    'RunStatus',
    'StoreBusy',
    'StoredRun',
    'Transition',
    'TransitionStatus',
    'new_owner',
    'owner_is_stale',
    'patiently',
    'release_owner',
)

RunStatus: TypeAlias = Literal['running', 'suspended', 'finished', 'stopped', 'cancelled']
"""`running`: a process holds the run (or held it until it crashed: see `RunInfo.owner`); `suspended`: steps are
parked, waiting for decisions; `finished`: every step ended; `stopped`: the run was interrupted, timed out or
stopped by an error, and can be resumed; `cancelled`: a person cancelled it (it is not resumed)."""
TransitionStatus: TypeAlias = Literal['ready', 'reviewing', 'running', 'parked', 'decided', 'retry', 'succeeded',
                                      'failed', 'skipped', 'cancelled']
"""A step's status as the journal records it: the plan's step statuses, plus `ready` (its dependencies have all
finished), `decided` (a decision arrived for a parked step) and `retry` (a person asked a failed step to run
again). A step whose last status is `reviewing` was being reviewed when its run stopped: its tool was not called,
and it is asked again. A `succeeded` transition written by a person ("resolve as done") says what a step did that
the run could not record itself."""

LEASE_SECONDS = 60.0
"""How long a run's holder may go without a heartbeat before another process may take the run over, unless the
store says otherwise (`?lease=SECONDS` in its URL). A holder renews it every third of that while it runs the plan,
and records the lease it uses with the run, so every process judges a holder by the holder's own lease; a crashed
process on the same machine is recognised at once (its process id is gone)."""


@dataclass(frozen=True, slots=True)
class Transition:
    """One change of a step's status, as stored."""

    step_id: str
    status: TransitionStatus
    at: float
    """Wall-clock time (`time.time()`)."""
    error: str | None = None
    """Why a step failed, was skipped, cancelled or parked."""
    output: str | None = None
    """A successful step's output text."""
    value: str | None = None
    """A successful step's value as JSON text; `None` when it is read from `output` (see `flags`)."""
    flags: int = 0
    """`1`: the value is text that did not parse as JSON; `2`: the value is read from the output."""
    detail: str | None = None
    """JSON text: what a parked step waits on, the decision of a `decided` transition, whether a cancelled step
    had started."""
    item: int | None = None
    """Reserved for steps that run one call per element of a list: the element's index (`None`: the step)."""


@dataclass(frozen=True, slots=True)
class RunInfo:
    """The header of a stored run."""

    run_id: str
    plan_hash: str
    """SHA-256 of the plan as it was first submitted: a run id given again with another plan is refused."""
    plan: str
    """The plan that runs, as JSON text (the submitted one, with a whole-plan reviewer's edits applied)."""
    options: str
    """The run's options as JSON text (concurrency, timeouts, review mode...)."""
    status: RunStatus
    created_at: float
    updated_at: float
    owner: str | None = None
    """`host:pid:token` of the process running it, `None` when none is."""
    heartbeat_at: float | None = None
    review: str | None = None
    """JSON text: the whole-plan review's outcome, once it was made (a resume does not ask again)."""
    epoch: int = 0
    """How many times the run was taken (created or claimed): the journal's writes of one holding carry it."""
    lease: float = LEASE_SECONDS
    """The lease its holder runs under: seconds without a heartbeat after which the holder is gone."""
    cancel: str | None = None
    """Why a person asked the run to stop, while its holder has not stopped it yet (`None`: nobody did)."""
    name: str | None = None
    """A label for the run (what it is for), to find it by."""


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A run as a store holds it: its header and every transition, in the order they were appended."""

    info: RunInfo
    transitions: tuple[Transition, ...]


@runtime_checkable
class PlanStore(Protocol):
    """Where durable plan runs are kept: `SqliteStore` (a file, the default) or `PostgresStore` (shared by
    processes on several machines). Methods block; `inline` says whether they are cheap enough to call from the
    event loop (a local SQLite file) or go to a worker thread (a database across the network).

    Errors: a store that cannot do what it is asked raises `PlanStoreError` (its own database errors are never
    let through), `UnknownRunError` for a run id it does not have, `RunInUseError` when a live process holds the
    run.
    """

    url: str
    """Where it is, for messages (without a password)."""
    inline: bool
    lease: float
    """The lease this store's holders run under (`LEASE_SECONDS` unless the URL says `?lease=SECONDS`)."""

    def create(self, info: RunInfo) -> RunInfo | None:
        """Insert a new run held by `info.owner`; if a run with that id exists, insert nothing and return it."""
        ...

    def claim(self, run_id: str, owner: str) -> RunInfo:
        """Take the run for `owner`: allowed when nobody holds it, or its holder is gone (see `owner_is_stale`)."""
        ...

    def append(self, run_id: str, owner: str, transitions: list[Transition], *, seq: int) -> str | None:
        """Append `transitions` in one transaction, if `owner` still holds the run (and renew its heartbeat);
        `seq` is the journal's number for the first of them (this holding's writes are numbered from 0, so a write
        retried after a lost answer adds nothing twice). Returns why a person asked the run to stop, if one did.

        Raises:
            RunLostError: another process holds the run now (nothing was written).
        """
        ...

    def heartbeat(self, run_id: str, owner: str) -> str | None:
        """Renew `owner`'s hold on the run; returns why a person asked the run to stop, if one did.

        Raises:
            RunLostError: another process holds the run now.
        """
        ...

    def update(self, run_id: str, owner: str, *, status: RunStatus | None = None, plan: str | None = None,
               review: str | None = None, release: bool = False) -> None:
        """Change the header of a run `owner` holds; `release` gives the run up."""
        ...

    def decide(self, run_id: str, transition: Transition) -> None:
        """Append a person's transition for a step, atomically checking that the step waits for it: `decided` or
        `succeeded` (what a person says it did) for a step whose last transition is `parked`, `retry` for one that
        `failed` (`DecisionError` otherwise)."""
        ...

    def load(self, run_id: str) -> StoredRun:
        """The run's header and transitions (large values read back in full)."""
        ...

    def runs(self, limit: int = 100) -> list[RunInfo]:
        """The most recently updated runs first."""
        ...

    def close(self) -> None: ...


class StoreBusy(PlanStoreError):
    """An operation made from the event loop found the database locked by another writer: make it again from a
    worker thread, inside `patiently(store)`, which may wait (the event loop must not)."""


def patiently(store: PlanStore) -> AbstractContextManager[None]:
    """The store's operations inside the block (in this thread) may wait for other writers as long as the store
    allows: for worker threads, never for the event loop."""
    patient = getattr(store, 'patiently', None)
    return nullcontext() if patient is None else patient()


_HOST = socket.gethostname()
_live_owners: set[str] = set()
"""Owner tokens of runs this process holds now: a token of this process not in here belongs to a run it lost
(its event loop was torn down, or a test simulated a crash)."""


def new_owner() -> str:
    """A fresh owner token for a run this process is about to hold: `host:pid:random`."""
    owner = f'{_HOST}:{os.getpid()}:{secrets.token_hex(6)}'
    _live_owners.add(owner)
    return owner


def release_owner(owner: str) -> None:
    _live_owners.discard(owner)


def owner_is_stale(owner: str | None, heartbeat_at: float | None, *, now: float | None = None,
                   lease: float = LEASE_SECONDS) -> bool:
    """Whether a run's holder is gone: none; a process of this machine that no longer exists (or this process,
    having let the run go); or a heartbeat older than `lease` seconds."""
    if owner is None:
        return True
    host, _, rest = owner.partition(':')
    pid_text, _, _ = rest.partition(':')
    if host == _HOST and pid_text.isdigit():
        pid = int(pid_text)
        if pid == os.getpid():
            return owner not in _live_owners
        if not _process_exists(pid):
            return True
    return heartbeat_at is None or (now if now is not None else time.time()) - heartbeat_at > lease


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    """A killed child its parent has not reaped yet is a zombie: gone for our purposes."""
    try:
        with open(f'/proc/{pid}/stat', encoding='ascii') as stat:
            return stat.read().rpartition(')')[2].split()[0] != 'Z'
    except OSError:
        return True
