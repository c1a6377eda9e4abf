"""Operating stored runs: list them, cancel one, prune old ones, and recover the crashed ones.

Each is an async function with a `_sync` twin for scripts, over a store or its URL; the queries themselves are
the store's (`_operations.py`). The CLI's `toolweave runs list | cancel | prune | recover` call these.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Literal, TypeVar

import anyio
import anyio.to_thread

from toolweave.approval import ReviewDecision, ReviewHandler, ReviewRequest
from toolweave.exceptions import (
    ApprovalPending,
    PlanStoreError,
    PlanValidationError,
    RunCancelledError,
    RunInUseError,
    UnknownRunError,
    UserError,
)
from toolweave.plan._record import EventHandler, PlanRun
from toolweave.plan.durable._operations import (
    MAX_PAGE,
    PRUNABLE,
    RunOperations,
    decode_cursor,
    parse_duration,
    states,
    timestamp,
)
from toolweave.plan.durable._runs import StoreLike, check_run_id, opened, resume_plan
from toolweave.plan.durable._store import (
    RUN_STATES,
    Cancellation,
    PlanStore,
    Pruned,
    RunInfo,
    RunPage,
    RunQuery,
    RunState,
    shown_state,
)
from toolweave.tools import Toolset, ToolsetItem

__all__ = (
    'Recovery',
    'cancel_run',
    'cancel_run_sync',
    'list_runs',
    'list_runs_sync',
    'prune_runs',
    'prune_runs_sync',
    'recover_runs',
    'recover_runs_sync',
    'watch_runs',
)

logger = logging.getLogger('toolweave.plan')

T = TypeVar('T')


async def _call(store: PlanStore, work: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    if store.inline:
        return work(*args, **kwargs)
    return await anyio.to_thread.run_sync(partial(work, *args, **kwargs))


# --- listing -------------------------------------------------------------------------------------------------------

async def list_runs(
    store: StoreLike,
    *,
    status: RunState | Iterable[RunState] | None = None,
    name: str | None = None,
    since: datetime | float | str | None = None,
    until: datetime | float | str | None = None,
    waiting: bool = False,
    limit: int = 50,
    after: str | None = None,
) -> RunPage:
    """A page of the store's runs, most recently updated first, and the cursor of the next page.

    Pages are keyed on `(updated_at, run_id)`, not on an offset: going through pages never shows a run twice and
    never skips one that did not change meanwhile, however many runs are written concurrently. A run updated while
    you page moves to the front (page again from the start to see it). Each filter uses an index, so a page costs
    the same at 100,000 runs as at 100.

    ```python
    import tempfile
    from toolweave.plan import run_plan_sync
    from toolweave.plan.durable import list_runs_sync
    from toolweave.testing import FakeTool

    store = f'sqlite:///{tempfile.mkdtemp()}/runs.db'
    echo = FakeTool('echo', lambda args: args['text'])
    for n in range(3):
        run_plan_sync({'steps': [{'id': 'a', 'tool': 'echo', 'arguments': {'text': 'hi'}}]}, [echo], store=store,
                      run_id=f'r{n}', name='nightly')
    page = list_runs_sync(store, name='nightly', limit=2)
    print([(r.run_id, r.status, r.steps) for r in page.runs])
    #> [('r2', 'finished', 1), ('r1', 'finished', 1)]
    print([r.run_id for r in list_runs_sync(store, after=page.cursor).runs])
    #> ['r0']
    ```

    Args:
        store: the store (a `PlanStore`, or its URL: opened to read, so a wrong SQLite path is an error rather
            than a new empty file).
        status: only runs in this state, or in one of these: `running`, `crashed` (a `running` run whose holder
            is gone: its process died, or its lease lapsed), `suspended`, `finished`, `stopped`, `cancelled`.
        name: only runs with this label (`run_plan(..., name=...)`; an agent's runs carry the agent's name).
        since: only runs updated at or after this time: a `datetime`, seconds since the epoch, an ISO date or
            date and time (`'2026-11-20'`, `'2026-11-20T14:00'`: local time unless it says), or a time ago (`'90m'`,
            `'12h'`, `'7d'`).
        until: only runs updated before this time (the same forms).
        waiting: only runs with a step waiting for a decision (parked, no decision recorded yet).
        limit: runs per page, 1 to 1,000.
        after: the `cursor` of the previous page.

    Returns:
        A `RunPage`: `runs` (each a `ListedRun`: id, name, state, steps, steps waiting, times, holder, cancel
        request) and `cursor`, `None` on the last page.

    Raises:
        UserError: a filter that is not one of the above, or an `after` that is not a cursor.
        PlanStoreError: the store cannot be opened or read.
    """
    query = RunQuery(states(status, RUN_STATES, 'status'), _name(name), timestamp(since, 'since'),
                     timestamp(until, 'until'), bool(waiting), _limit(limit),
                     None if after is None else decode_cursor(after))
    async with opened(store, read_only=True) as plans:
        return await _call(plans, plans.list_page, query)


def list_runs_sync(
    store: StoreLike,
    *,
    status: RunState | Iterable[RunState] | None = None,
    name: str | None = None,
    since: datetime | float | str | None = None,
    until: datetime | float | str | None = None,
    waiting: bool = False,
    limit: int = 50,
    after: str | None = None,
) -> RunPage:
    """`list_runs` for scripts with no event loop running."""
    return anyio.run(partial(list_runs, store, status=status, name=name, since=since, until=until, waiting=waiting,
                             limit=limit, after=after))


def _name(name: str | None) -> str | None:
    if name is not None and not isinstance(name, str):
        raise UserError(f'name must be a string, got {name!r}.')
    return name


def _limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise UserError(f'limit must be an integer from 1 to {MAX_PAGE}, got {limit!r}.')
    return limit


# --- cancelling ----------------------------------------------------------------------------------------------------

async def cancel_run(run_id: str, *, store: StoreLike, reason: str | None = None) -> Cancellation:
    """Cancel a stored run: it never runs again (`resume_plan` refuses it with `RunCancelledError`).

    A run no live process holds (suspended, stopped, crashed) is cancelled at once: its steps that had not ended
    are recorded `cancelled` with `reason`, and its status becomes `cancelled`. A run a live process holds gets a
    cancel request in its header (`RunInfo.cancel_requested_at`); that process stops the run at its next journal
    write. Cancelling a cancelled or finished run changes nothing (see `Cancellation.outcome`).

    Raises:
        UnknownRunError: the store has no run `run_id`.
        PlanStoreError: the store cannot be opened or written.
    """
    if reason is not None and not isinstance(reason, str):
        raise UserError(f'reason must be a string, got {reason!r}.')
    async with opened(store) as plans:
        return await _call(plans, plans.cancel, check_run_id(run_id), reason or None)


def cancel_run_sync(run_id: str, *, store: StoreLike, reason: str | None = None) -> Cancellation:
    """`cancel_run` for scripts with no event loop running."""
    return anyio.run(partial(cancel_run, run_id, store=store, reason=reason))


# --- pruning -------------------------------------------------------------------------------------------------------

async def prune_runs(store: StoreLike, *, older_than: timedelta | float | str,
                     status: RunState | Iterable[RunState] = ('finished',), dry_run: bool = False) -> Pruned:
    """Delete the runs in `status` last updated more than `older_than` ago, with their transitions and the large
    outputs no other run uses.

    It works in batches, each one short transaction (at most 500 runs and about 20,000 transitions): a big prune
    never holds the database for long, and a run is deleted whole or not at all. A run a live process holds is
    never pruned, whatever its status. A store opened with `?retain=30d` does this by itself for its finished and
    cancelled runs, at most once an hour.

    Args:
        store: the store, or its URL.
        older_than: a `timedelta`, seconds, or a duration: `'30d'`, `'12h'`, `'90m'`, `'2w'`.
        status: which runs: any of `finished` (the default), `cancelled`, `stopped`, `suspended`, `crashed` (a
            `running` run whose holder is gone).
        dry_run: count what would be deleted, delete nothing.

    Returns:
        `Pruned`: the runs, transitions and blobs deleted (or that would be), and the batches it took.
    """
    seconds = older_than.total_seconds() if isinstance(older_than, timedelta) else (
        parse_duration(older_than, 'older_than') if isinstance(older_than, str) else older_than)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
        raise UserError(f"older_than must be a timedelta, a number of seconds >= 0 or a duration like '30d', got "
                        f'{older_than!r}.')
    wanted = states(status, PRUNABLE, 'status (a running run a live process holds is never pruned)')
    assert wanted is not None
    async with opened(store) as plans:
        return await _call(plans, plans.prune, time.time() - seconds, wanted, dry_run=bool(dry_run))


def prune_runs_sync(store: StoreLike, *, older_than: timedelta | float | str,
                    status: RunState | Iterable[RunState] = ('finished',), dry_run: bool = False) -> Pruned:
    """`prune_runs` for scripts with no event loop running."""
    return anyio.run(partial(prune_runs, store, older_than=older_than, status=status, dry_run=dry_run))


# --- recovery ------------------------------------------------------------------------------------------------------

RecoveryOutcome = Literal['resumed', 'cancelled', 'in use', 'refused', 'failed']


@dataclass(frozen=True, slots=True)
class Recovery:
    """What `recover_runs` did with one run whose holder was gone."""

    run_id: str
    outcome: RecoveryOutcome
    """`resumed`: this process claimed it and ran it on until it settled; `cancelled`: it had a cancel request, now
    carried out; `in use`: another process (a recoverer, or its holder back) claimed it first; `refused`: its plan
    does not fit these tools (the run is left as it was); `failed`: the resume stopped with an error."""
    status: RunState | None = None
    """Its state afterwards, when known."""
    error: str | None = None
    run: PlanRun | None = None
    """The resumed run's record (`resumed`, and `failed` when the run itself ended badly)."""


class _ParkForAPerson:
    """The reviewer of a recovered run when none is given: nobody is there to ask, so a gated step waits."""

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        raise ApprovalPending('waiting for a person: the run was recovered after a crash, with no reviewer')


async def recover_runs(
    tools: Toolset | Iterable[ToolsetItem],
    *,
    store: StoreLike,
    queue: str | None = None,
    review_handler: ReviewHandler | None = None,
    context: Mapping[str, Any] | None = None,
    on_event: EventHandler | None = None,
    concurrency: int = 8,
) -> list[Recovery]:
    """Find the runs whose holder is gone and go on with each: what a supervisor runs every so often
    (`toolweave runs recover --watch SECONDS`), or a worker (`toolweave worker --recover SECONDS`).

    A run counts as crashed when it is `running` and its holder is gone: its process no longer exists (same
    machine), or its lease lapsed (`LEASE_SECONDS` without a heartbeat). Each is resumed as `resume_plan` would,
    claiming it first: when several recoverers, or the holder itself, reach for one run, the store's claim lets one
    win and the others get `in use`. A run with a cancel request nobody carried out is cancelled instead. Suspended
    runs are left alone: they wait for decisions, not for a process. Up to `concurrency` runs go on at once, and
    this returns once each has settled (finished, suspended, stopped).

    Args:
        tools: the tools the plans call.
        store: the store (a `PlanStore` or its URL).
        queue: only the runs whose steps go to this worker queue (`run_plan(..., workers=queue)`).
        review_handler: reviews the gated steps still to run; without one they park for a person.
        context: out-of-band values passed to every tool call (a run's own context is never stored).
        on_event: called as each step of a resumed run starts, parks and finishes.
        concurrency: runs resumed at once at most.

    Returns:
        A `Recovery` per run acted on, in the order they were found (oldest update first).
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise UserError(f'concurrency must be an integer >= 1, got {concurrency!r}.')
    toolset = tools if isinstance(tools, Toolset) else Toolset(tools)
    reviewer = review_handler if review_handler is not None else _ParkForAPerson()
    async with opened(store) as plans:
        found = _ours(await _call(plans, plans.unheld), queue)
        outcomes: dict[str, Recovery] = {}
        limiter = anyio.CapacityLimiter(concurrency)

        async def recover(info: RunInfo) -> None:
            async with limiter:
                outcomes[info.run_id] = await _recover(plans, info, toolset, reviewer, context, on_event)

        async with anyio.create_task_group() as group:
            for info in found:
                group.start_soon(recover, info)
    return [outcomes[info.run_id] for info in found if info.run_id in outcomes]


def recover_runs_sync(
    tools: Toolset | Iterable[ToolsetItem],
    *,
    store: StoreLike,
    queue: str | None = None,
    review_handler: ReviewHandler | None = None,
    context: Mapping[str, Any] | None = None,
    on_event: EventHandler | None = None,
    concurrency: int = 8,
) -> list[Recovery]:
    """`recover_runs` for scripts with no event loop running."""
    return anyio.run(partial(recover_runs, tools, store=store, queue=queue, review_handler=review_handler,
                             context=context, on_event=on_event, concurrency=concurrency))


async def watch_runs(
    tools: Toolset | Iterable[ToolsetItem],
    *,
    store: StoreLike,
    every: float,
    queue: str | None = None,
    review_handler: ReviewHandler | None = None,
    context: Mapping[str, Any] | None = None,
    report: Callable[[Recovery], Awaitable[None] | None] | None = None,
    concurrency: int = 8,
) -> None:
    """`recover_runs` for ever: every `every` seconds, look for crashed runs and start recovering the new ones
    (each goes on in the background while the next looks are made). Runs until cancelled. `report` is called with
    each `Recovery` as it ends."""
    if isinstance(every, bool) or not isinstance(every, int | float) or not every > 0:
        raise UserError(f'every must be a number of seconds > 0, got {every!r}.')
    toolset = tools if isinstance(tools, Toolset) else Toolset(tools)
    reviewer = review_handler if review_handler is not None else _ParkForAPerson()
    async with opened(store) as plans:
        busy: set[str] = set()
        limiter = anyio.CapacityLimiter(concurrency)

        async def recover(info: RunInfo) -> None:
            try:
                async with limiter:
                    done = await _recover(plans, info, toolset, reviewer, context, None)
                if report is not None:
                    shown = report(done)
                    if shown is not None:
                        await shown
            finally:
                busy.discard(info.run_id)

        async with anyio.create_task_group() as group:
            while True:
                if isinstance(plans, RunOperations) and plans.retention is not None:
                    plans.retention.start(plans)  # a long-lived process applies `?retain=` too, hourly
                try:
                    found = _ours(await _call(plans, plans.unheld), queue)
                except PlanStoreError as exc:  # the database is away: look again at the next tick
                    logger.warning('Could not look for crashed plan runs: %s', exc)
                    found = []
                for info in found:
                    if info.run_id not in busy:
                        busy.add(info.run_id)
                        group.start_soon(recover, info)
                await anyio.sleep(every)


def _ours(found: list[RunInfo], queue: str | None) -> list[RunInfo]:
    """The runs of `found` this recoverer acts on: those of `queue`, when one is given."""
    if queue is None:
        return found
    return [info for info in found if json.loads(info.options).get('workers') == queue]


async def _recover(plans: PlanStore, info: RunInfo, tools: Toolset, reviewer: ReviewHandler,
                   context: Mapping[str, Any] | None, on_event: EventHandler | None) -> Recovery:
    run_id = info.run_id
    if info.cancel_requested_at is not None:
        try:
            cancelled = await _call(plans, plans.cancel, run_id, info.cancel_reason)
        except (UnknownRunError, PlanStoreError) as exc:
            return Recovery(run_id, 'failed', error=str(exc))
        return Recovery(run_id, 'cancelled' if cancelled.outcome != 'requested' else 'in use',
                        'cancelled' if cancelled.outcome != 'requested' else None)
    try:
        now = await _call(plans, plans.header, run_id)
    except (UnknownRunError, PlanStoreError) as exc:
        return Recovery(run_id, 'failed', error=str(exc))
    if now.state != 'crashed':  # someone else went on with it since it was found
        return Recovery(run_id, 'in use', now.state, f'no longer crashed: {now.state}, held by {now.owner}')
    try:
        run = await resume_plan(run_id, tools, store=plans, review_handler=reviewer, context=context,
                                on_event=on_event)
    except anyio.get_cancelled_exc_class():
        # The recoverer itself is being stopped (Ctrl-C, SIGTERM, a cancelled task): the run was let go of as
        # `stopped`; hand it back as crashed, so the next recoverer goes on with it.
        with anyio.CancelScope(shield=True):
            try:
                await _call(plans, plans.hand_back, run_id)
            except PlanStoreError as exc:
                logger.warning('Could not hand plan run %r back for recovery: %s', run_id, exc)
        raise
    except RunInUseError as exc:
        return Recovery(run_id, 'in use', error=str(exc))
    except RunCancelledError as exc:
        return Recovery(run_id, 'cancelled', 'cancelled', str(exc))
    except PlanValidationError as exc:
        return Recovery(run_id, 'refused', shown_state(info.status, info.owner, info.heartbeat_at), str(exc))
    except UnknownRunError as exc:  # pruned meanwhile
        return Recovery(run_id, 'failed', error=str(exc))
    except Exception as exc:  # one run's failure must not stop the recovery of the others
        logger.warning('Recovering plan run %r failed: %s: %s', run_id, type(exc).__name__, exc)
        return Recovery(run_id, 'failed', error=f'{type(exc).__name__}: {exc}')
    try:
        after = await _call(plans, plans.header, run_id)
    except (UnknownRunError, PlanStoreError):
        status = None
    else:
        status = shown_state(after.status, after.owner, after.heartbeat_at)
    logger.info('Recovered plan run %r: %s', run_id, status)
    return Recovery(run_id, 'resumed', status, run=run)
