"""Durable plans: every step's transitions journaled by run id and step id, so a run survives its process.

- `run_plan(plan, tools, store=..., run_id=...)` runs a plan durably: the plan, its hash and options are stored,
  then each step's transitions (ready, started, parked, decided, succeeded with its output, failed, skipped,
  cancelled). A step's start is written before its tool is called.
- `resume_plan(run_id, tools, store=...)` goes on after a crash or once decisions arrive: no step that ended runs
  again; a step that had started runs again only if its tool is idempotent or read-only, else it parks as unknown
  after a crash.
- `decide(run_id, step_id, decision, store=...)` records a decision for a parked step.
- Operating the runs: `list_runs` (pages, filters), `cancel_run`, `prune_runs` (and `?retain=30d` on a store URL),
  `recover_runs` / `watch_runs` (resume the runs whose process died).
- Stores: `SqliteStore` (a file, WAL mode; the default for a path or `sqlite:///...`) and `PostgresStore`
  (`postgresql://...`, the `postgres` extra), both `PlanStore`s; `open_store(url)` opens either.
"""

from __future__ import annotations

from toolweave._public import present as _present
from toolweave.plan.durable._manage import (
    Recovery,
    cancel_run,
    cancel_run_sync,
    list_runs,
    list_runs_sync,
    prune_runs,
    prune_runs_sync,
    recover_runs,
    recover_runs_sync,
    watch_runs,
)
from toolweave.plan.durable._postgres import PostgresStore
from toolweave.plan.durable._runs import (
    StoreLike,
    decide,
    decide_sync,
    open_store,
    resume_plan,
    resume_plan_sync,
)
from toolweave.plan.durable._sqlite import SqliteStore
from toolweave.plan.durable._store import (
    LEASE_SECONDS,
    Cancellation,
    ListedRun,
    PlanStore,
    Pruned,
    RunInfo,
    RunPage,
    RunState,
    RunStatus,
    StoredRun,
    Transition,
)

__all__ = (
    'cancel_run',
    'cancel_run_sync',
    'Cancellation',
    'decide',
    'decide_sync',
    'LEASE_SECONDS',
    'list_runs',
    'list_runs_sync',
    'ListedRun',
    'open_store',
    'PlanStore',
    'PostgresStore',
    'prune_runs',
    'prune_runs_sync',
    'Pruned',
    'recover_runs',
    'recover_runs_sync',
    'Recovery',
    'resume_plan',
    'resume_plan_sync',
    'RunInfo',
    'RunPage',
    'RunState',
    'RunStatus',
    'SqliteStore',
    'StoredRun',
    'StoreLike',
    'Transition',
    'watch_runs',
)

_present('toolweave.plan.durable', __all__, globals())
