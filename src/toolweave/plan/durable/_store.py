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
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol, TypeAlias, get_args, runtime_checkable

__all__ = (
    'LEASE_SECONDS',
    'RUN_STATES',
    'Cancellation',
    'ListedRun',
    'PlanStore',
    'Pruned',
    'RunInfo',
    'RunPage',
    'RunQuery',
    'RunState',
    'RunStatus',
    'StoredRun',
    'Transition',
    'TransitionStatus',
    'new_owner',
    'owner_is_stale',
    'release_owner',
    'shown_state',
)

RunStatus: TypeAlias = Literal['running', 'suspended', 'finished', 'stopped', 'cancelled']
"""`running`: a process holds the run (or held it until it crashed: see `RunInfo.owner`); `suspended`: steps are
parked, waiting for decisions; `finished`: every step ended; `stopped`: the run was interrupted, timed out or
stopped by an error, and can be resumed; `cancelled`: a person cancelled it (`cancel_run`), and it never runs
again."""
RunState: TypeAlias = Literal['running', 'crashed', 'suspended', 'finished', 'stopped', 'cancelled']
"""A run's status as operators see it: the stored `RunStatus`, with a `running` run whose holder is gone (its
process died, or its lease lapsed: `owner_is_stale`) shown as `crashed`."""
RUN_STATES: tuple[RunState, ...] = get_args(RunState)
_SHOWN: dict[str, RunState] = {state: state for state in RUN_STATES}
TransitionStatus: TypeAlias = Literal['ready', 'reviewing', 'running', 'parked', 'decided', 'succeeded', 'failed',
                                      'skipped', 'cancelled']
"""A step's status as the journal records it: the plan's step statuses, plus `ready` (its dependencies have all
finished) and `decided` (a decision arrived for a parked step). A step whose last status is `reviewing` was being
reviewed when its run stopped: its tool was not called, and it is asked again."""

LEASE_SECONDS = 60.0
"""How long a run's owner may go without a heartbeat before another process may take the run over. A process
renews it every third of that while it runs the plan; a crashed process on the same machine is recognised at
once (its process id is gone)."""


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
    name: str | None = None
    """A label to find the run by (`run_plan(..., name=...)`; an agent's runs carry the agent's name)."""
    cancel_requested_at: float | None = None
    """When a cancel was asked for while a live process held the run (`cancel_run`); `None`: never. The holder
    stops the run at its next journal write."""
    cancel_reason: str | None = None
    """Why it was cancelled, as the person said."""

    @property
    def state(self) -> RunState:
        """Its status as people see it: `crashed` for a `running` run whose holder is gone."""
        return shown_state(self.status, self.owner, self.heartbeat_at)


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A run as a store holds it: its header and every transition, in the order they were appended."""

    info: RunInfo
    transitions: tuple[Transition, ...]


# --- what the operations return ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ListedRun:
    """One run in a page of `list_runs`: its header, without the plan, and how many of its steps wait."""

    run_id: str
    name: str | None
    """The label it was started with (`run_plan(..., name=...)`, an agent's name), if any."""
    status: RunState
    steps: int
    """Steps in its plan."""
    waiting: int
    """Steps parked without a decision: a person's `decide` (`toolweave runs approve`) lets them go on."""
    created_at: float
    updated_at: float
    """The last time anything about it was recorded (the key pages are ordered by, newest first)."""
    owner: str | None
    """`host:pid:token` of the process running it; for a `crashed` run, the one that was."""
    heartbeat_at: float | None
    cancel_requested_at: float | None
    """When a cancel was asked for while it ran (the holder stops it at its next journal write)."""
    cancel_reason: str | None

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON data."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class RunPage:
    """A page of runs, newest first, and where the next one starts."""

    runs: tuple[ListedRun, ...]
    cursor: str | None
    """Pass it as `after=` to get the next page; `None` when this is the last one."""


@dataclass(frozen=True, slots=True)
class RunQuery:
    """What `list_runs` asks a store for, checked (see `list_runs` for each field)."""

    states: frozenset[RunState] | None = None
    name: str | None = None
    since: float | None = None
    until: float | None = None
    waiting: bool = False
    limit: int = 50
    after: tuple[float, str] | None = None


@dataclass(frozen=True, slots=True)
class Cancellation:
    """What `cancel_run` did."""

    run_id: str
    outcome: Literal['cancelled', 'requested', 'already cancelled', 'already finished']
    """`cancelled`: no live process held the run; it is `cancelled` now, its unfinished steps recorded `cancelled`.
    `requested`: a live process holds it; the request is in its header, and that process stops the run at its next
    journal write. `already cancelled` / `already finished`: nothing changed."""
    steps: tuple[str, ...] = ()
    """The steps recorded `cancelled` (outcome `cancelled`)."""
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Pruned:
    """What `prune_runs` deleted (or, with `dry_run`, would delete)."""

    runs: int = 0
    transitions: int = 0
    blobs: int = 0
    """Large outputs no remaining transition uses."""
    batches: int = 0
    """Transactions it took (each deletes at most `PRUNE_RUNS` runs and about `PRUNE_ROWS` transitions)."""
    dry_run: bool = False

    def __add__(self, other: Pruned) -> Pruned:
        return Pruned(self.runs + other.runs, self.transitions + other.transitions, self.blobs + other.blobs,
                      self.batches + other.batches, self.dry_run or other.dry_run)


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

    def create(self, info: RunInfo) -> RunInfo | None:
        """Insert a new run held by `info.owner`; if a run with that id exists, insert nothing and return it."""
        ...

    def claim(self, run_id: str, owner: str) -> RunInfo:
        """Take the run for `owner`: allowed when nobody holds it, or its holder is gone (see `owner_is_stale`)."""
        ...

    def append(self, run_id: str, owner: str, transitions: list[Transition]) -> None:
        """Append `transitions` in one transaction (and renew the owner's heartbeat)."""
        ...

    def update(self, run_id: str, owner: str, *, status: RunStatus | None = None, plan: str | None = None,
               review: str | None = None, release: bool = False) -> None:
        """Change the header of a run `owner` holds; `release` gives the run up."""
        ...

    def decide(self, run_id: str, transition: Transition) -> None:
        """Append a `decided` transition, atomically checking that the step's last transition is `parked`
        (`DecisionError` otherwise)."""
        ...

    def load(self, run_id: str) -> StoredRun:
        """The run's header and transitions (large values read back in full)."""
        ...

    def runs(self, limit: int = 100) -> list[RunInfo]:
        """The most recently updated runs first."""
        ...

    def close(self) -> None: ...

    # --- what operators do (`toolweave.plan.durable._operations`) -------------------------------------------------

    def header(self, run_id: str) -> RunInfo:
        """The run's header, without its transitions."""
        ...

    def list_page(self, query: RunQuery) -> RunPage:
        """A page of runs, newest first (see `list_runs`)."""
        ...

    def unheld(self) -> list[RunInfo]:
        """The `running` runs whose holder is gone, and the runs with a cancel to carry out that nobody holds."""
        ...

    def hand_back(self, run_id: str) -> bool:
        """Mark a run a stopped recoverer let go of as crashed again, for the next recoverer."""
        ...

    def cancel(self, run_id: str, reason: str | None) -> Cancellation:
        """Cancel a run nobody holds (its unfinished steps recorded `cancelled`), or ask its live holder to."""
        ...

    def prune(self, before: float, wanted: frozenset[RunState], *, dry_run: bool = False) -> Pruned:
        """Delete the runs in `wanted` states last updated before `before` (never one a live process holds),
        with their transitions and the blobs nothing else uses, in bounded transactions."""
        ...

    def claim_retention(self, every: float) -> bool:
        """Whether this process should apply the store's retention now (one process per `every` seconds)."""
        ...


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


def shown_state(status: str, owner: str | None, heartbeat_at: float | None) -> RunState:
    """A stored status as people see it: a `running` run whose holder is gone is `crashed`."""
    if status == 'running' and owner_is_stale(owner, heartbeat_at):
        return 'crashed'
    return _SHOWN[status]


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
