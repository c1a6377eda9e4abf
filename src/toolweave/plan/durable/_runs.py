"""Running a plan durably: start it under a run id, resume it after a crash or once decisions arrive, and record
decisions for parked steps.

A run is started by `run_plan(..., store=...)`: its plan, hash and options are stored, then every transition of
its steps (see `Journal`). `resume_plan(run_id, ...)` claims the stored run, rebuilds the records of the steps
that ended, and runs the rest:

- a step recorded `succeeded`, `failed` or `skipped` never runs again;
- a step recorded as started but not ended (the process died while it ran) runs again only when its tool says it
  is idempotent or read-only (`ToolMetadata.idempotent` / `read_only`, MCP `idempotentHint` / `readOnlyHint`);
  otherwise it parks as unknown after a crash, for a person to decide;
- a parked step runs once a decision for it was recorded (`decide`), under that decision; without one it parks
  again;
- a step cancelled before it started (a timeout, an interrupted run) runs.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from toolweave.approval import ReviewDecision, ReviewHandler, record_approvals, use_review_handler
from toolweave.exceptions import PlanMismatchError, PlanStoreError, PlanValidationError, UserError
from toolweave.plan._kernel import Prefill, Run
from toolweave.plan._observe import observers
from toolweave.plan._options import RunOptions
from toolweave.plan._parse import Parsed, Problems
from toolweave.plan._record import EventHandler, PlanRun
from toolweave.plan._review import Decided, review_ahead, reviewing
from toolweave.plan._validate import Prepared, as_toolset, prepare
from toolweave.plan.durable._codec import (
    Folded,
    decision_data,
    dumps,
    fold,
    plan_from_data,
    plan_hash,
    plan_text,
    prefill,
    when,
)
from toolweave.plan.durable._edits import check_edit
from toolweave.plan.durable._journal import Journal
from toolweave.plan.durable._operations import Retention, take_retention
from toolweave.plan.durable._postgres import PostgresStore
from toolweave.plan.durable._sqlite import SqliteStore
from toolweave.plan.durable._store import (
    LEASE_SECONDS,
    PlanStore,
    RunInfo,
    RunStatus,
    Transition,
    new_owner,
    release_owner,
)
from toolweave.tools import Tool, ToolCallContext, Toolset, ToolsetItem

__all__ = ('StoreLike', 'decide', 'decide_sync', 'open_store', 'opened', 'resume_plan', 'resume_plan_sync',
           'start_run')

logger = logging.getLogger('toolweave.plan')

T = TypeVar('T')
StoreLike = PlanStore | str | os.PathLike[str]
"""A store, or where one is: `sqlite:///runs.db` (relative), `sqlite:////var/lib/runs.db` (absolute), a plain file
path (SQLite), or `postgresql://user:password@host/db`."""
_RUN_ID = re.compile(r'^[A-Za-z0-9_.:-]{1,200}$')
_POSTGRES = ('postgresql://', 'postgres://', 'postgresql+psycopg://')


def open_store(store: StoreLike, *, read_only: bool = False) -> PlanStore:
    """The store `store` names (a store is returned as it is).

    `?retain=30d` in the URL (either kind) prunes the store's finished and cancelled runs older than that, from a
    background thread of a process that opens it, at most once an hour across processes (see `prune_runs`).
    `read_only`: open it only to read (`toolweave runs list`, `show`): a SQLite file that does not exist, or a
    PostgreSQL database without the tables, is an error instead of a new empty store.

    Raises:
        PlanStoreError: the store cannot be opened (a missing folder, a server that does not answer, an unknown
            URL scheme).
    """
    if isinstance(store, PlanStore):
        return store
    text, retain = take_retention(os.fspath(store))
    opened_store = _open_url(text, read_only)
    if retain is not None and not read_only:
        Retention(retain, partial(_open_url, text, False)).start(opened_store)
    return opened_store


def _open_url(text: str, read_only: bool) -> SqliteStore | PostgresStore:
    if text.startswith(_POSTGRES):
        return PostgresStore(text, read_only=read_only)
    if text.startswith('sqlite:'):
        rest, _, query = text[len('sqlite:'):].partition('?')
        if rest.startswith('///'):
            rest = rest[3:]
        elif rest.startswith('//'):
            raise PlanStoreError(f'Cannot open plan store {text!r}: a SQLite URL has no host. Write '
                                 '`sqlite:///relative/path.db` or `sqlite:////absolute/path.db`.')
        options = dict(part.partition('=')[::2] for part in query.split('&') if part)
        synchronous = options.pop('synchronous', 'normal').lower()
        if options or synchronous not in ('normal', 'full'):
            raise PlanStoreError(f'Cannot open plan store {text!r}: the SQLite options are `?synchronous=normal` or '
                                 f'`?synchronous=full`, and `retain=30d`, got {query!r}.')
        if not rest:
            raise PlanStoreError(f'Cannot open plan store {text!r}: no file. Write `sqlite:///runs.db`.')
        return SqliteStore(rest, synchronous='full' if synchronous == 'full' else 'normal', read_only=read_only)
    if '://' in text:
        raise PlanStoreError(f'Cannot open plan store {text!r}: unknown kind of store. Use `sqlite:///runs.db` (a '
                             'file) or `postgresql://user@host/db` (with `pip install "toolweave[postgres]"`).')
    return SqliteStore(text, read_only=read_only)


@asynccontextmanager
async def opened(store: StoreLike, *, read_only: bool = False) -> AsyncIterator[PlanStore]:
    """The store `store` names, closed at the end of the block if it was opened here."""
    if isinstance(store, PlanStore):
        yield store
        return
    made = await anyio.to_thread.run_sync(partial(open_store, store, read_only=read_only))
    try:
        yield made
    finally:
        made.close()


async def _call(store: PlanStore, work: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """A store operation: straight from the event loop for an inline store, else in a worker thread."""
    if store.inline:
        return work(*args, **kwargs)
    return await anyio.to_thread.run_sync(partial(work, *args, **kwargs))


def check_run_id(run_id: object) -> str:
    if not isinstance(run_id, str) or _RUN_ID.fullmatch(run_id) is None:
        raise UserError(f'run_id must be 1 to 200 characters of letters, digits, "_", "-", "." and ":", got '
                        f'{run_id!r}.')
    return run_id


async def start_run(prepared: Prepared, tools: Toolset, options: RunOptions, *, run_id: str | None,
                    context: ToolCallContext, on_event: EventHandler | None,
                    refused: frozenset[str] = frozenset()) -> PlanRun:
    """Run a validated plan durably in `options.store` under `run_id` (a new id when `None`). If the store already
    has a run with that id and the same plan, that run goes on, as with `resume_plan`."""
    store = options.store
    assert store is not None
    run_id = check_run_id(run_id) if run_id is not None else uuid.uuid4().hex
    text = plan_text(prepared.plan)
    digest = plan_hash(text)
    owner = new_owner()
    now = time.time()
    info = RunInfo(run_id, digest, text, dumps(options.stored()), 'running', now, now, owner, now,
                   name=options.run_name)
    try:
        existing = await _call(store, store.create, info)
    except BaseException:
        release_owner(owner)
        raise
    if existing is None:
        return await _drive(store, info, prepared, tools, options, Folded(), context, on_event, refused)
    release_owner(owner)
    if existing.plan_hash != digest:
        raise PlanMismatchError(
            f'Plan run {run_id!r} in {store.url} was started with another plan (hash {existing.plan_hash[:12]}, this '
            f'plan {digest[:12]}). Give this plan a new run id, or `resume_plan({run_id!r}, ...)` to go on with the '
            'stored plan.')
    return await _resume(store, run_id, tools, options.review_handler, context, on_event, refused)


async def resume_plan(
    run_id: str,
    tools: Toolset | Iterable[ToolsetItem],
    *,
    store: StoreLike,
    review_handler: ReviewHandler | None = None,
    context: Mapping[str, Any] | None = None,
    on_event: EventHandler | None = None,
) -> PlanRun:
    """Go on with a stored plan run: after a crash, or once decisions for its parked steps were recorded.

    Steps that ended are not run again; their records are filled from the store (a value reads back as the JSON
    data it was stored as). A step that had started when its process died runs again only if its tool is
    idempotent or read-only; otherwise it parks, as unknown after a crash, until a decision says to run it again
    (approve) or not (reject). The run keeps its stored options (concurrency, timeouts, review mode).

    Args:
        run_id: the id the run was started under.
        tools: the tools the plan calls (the same names; the plan is validated against them again).
        store: the store the run is in (a `PlanStore` or its URL).
        review_handler: reviews the gated steps that still have to run and have no decision yet.
        context: out-of-band values passed to every tool call (a context is never stored).
        on_event: called as each step starts, parks and finishes.

    Returns:
        The `PlanRun` with every step: the ones that ended before, and the ones run now.

    Raises:
        UnknownRunError: the store has no run `run_id`.
        RunInUseError: another live process is running it.
        PlanValidationError: the stored plan does not validate against `tools`.
        PlanStoreError: the store cannot be opened, or failed during the run (what was recorded stays).
    """
    async with opened(store) as plans:
        with record_approvals() as log, use_review_handler(review_handler):
            run = await _resume(plans, check_run_id(run_id), as_toolset(tools), review_handler,
                                ToolCallContext.of(context), on_event, frozenset())
    run.approvals = log.records
    return run


def resume_plan_sync(
    run_id: str,
    tools: Toolset | Iterable[ToolsetItem],
    *,
    store: StoreLike,
    review_handler: ReviewHandler | None = None,
    context: Mapping[str, Any] | None = None,
    on_event: EventHandler | None = None,
) -> PlanRun:
    """`resume_plan` for scripts with no event loop running."""
    return anyio.run(partial(resume_plan, run_id, tools, store=store, review_handler=review_handler,
                             context=context, on_event=on_event))


async def decide(run_id: str, step_id: str, decision: ReviewDecision, *, store: StoreLike,
                 tools: Toolset | Iterable[ToolsetItem] | None = None) -> None:
    """Record `decision` for the parked step `step_id` of a stored run; the next `resume_plan` runs the step under
    it: approve (run it; for a step unknown after a crash, run it again), edit (run it with `decision.revised` as
    its arguments) or reject (it fails, and the steps that depend on it are skipped).

    With `tools` (the tools the plan calls), an edit's arguments are checked against the step's tool first: ones
    its input schema refuses are refused here, with the schema's message, and nothing is recorded.

    Raises:
        UnknownRunError: the store has no run `run_id`.
        DecisionError: the step is not parked (it has not started, it ended, or it already has a decision), the
            plan has no step `step_id` (the message lists the steps that wait), or the edited arguments do not fit
            the step's tool.
    """
    if not isinstance(decision, ReviewDecision):
        raise UserError(f'decision must be a ReviewDecision (ReviewDecision.approve(), .edit(arguments), '
                        f'.reject(reason)), got {type(decision).__name__}: {decision!r}.')
    try:
        detail = dumps(decision_data(decision))
    except (TypeError, ValueError) as exc:
        raise UserError(f'The revised arguments of the decision are not JSON data: {exc}.') from None
    async with opened(store) as plans:
        if tools is not None:
            info = await _call(plans, plans.header, check_run_id(run_id))
            check_edit(run_id, info.plan, step_id, decision, as_toolset(tools))
        await _call(plans, plans.decide, check_run_id(run_id),
                    Transition(step_id, 'decided', time.time(), decision.reason, detail=detail))


def decide_sync(run_id: str, step_id: str, decision: ReviewDecision, *, store: StoreLike,
                tools: Toolset | Iterable[ToolsetItem] | None = None) -> None:
    """`decide` for scripts with no event loop running."""
    anyio.run(partial(decide, run_id, step_id, decision, store=store, tools=tools))


async def _resume(store: PlanStore, run_id: str, tools: Toolset, review_handler: ReviewHandler | None,
                  context: ToolCallContext, on_event: EventHandler | None, refused: frozenset[str]) -> PlanRun:
    # The plan is checked against the tools before the run is claimed: a resume refused for them leaves the run
    # as it was (a suspended run suspended, a crashed one for a recoverer with the right tools).
    before = await _call(store, store.header, run_id)
    prepared, options = _fit(before, tools, review_handler, store, refused)
    owner = new_owner()
    try:
        info = await _call(store, store.claim, run_id, owner)
    except BaseException:
        release_owner(owner)
        raise
    try:
        stored = await _call(store, store.load, run_id)
        if (info.plan, info.options) != (before.plan, before.options):  # changed between the two reads
            prepared, options = _fit(info, tools, review_handler, store, refused)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await _let_go(store, run_id, owner, before.status)
        raise
    return await _drive(store, info, prepared, tools, options, fold(stored.transitions), context, on_event, refused)


def _fit(info: RunInfo, tools: Toolset, review_handler: ReviewHandler | None, store: PlanStore,
         refused: frozenset[str]) -> tuple[Prepared, RunOptions]:
    """The stored plan validated against `tools`, and the run's options (`PlanValidationError` if it does not
    fit)."""
    plan = plan_from_data(json.loads(info.plan))
    options = RunOptions.from_stored(json.loads(info.options), review_handler=review_handler, store=store)
    prepared, problems = prepare(Parsed(plan, Problems()), tools, max_steps=options.max_steps,
                                 max_items=options.max_items, extra_refused=refused)
    if prepared is None:
        raise PlanValidationError([f'the stored plan of run {info.run_id!r} does not fit these tools: {problem}'
                                   for problem in problems.messages()])
    return prepared, options


async def _drive(store: PlanStore, info: RunInfo, prepared: Prepared, tools: Toolset, options: RunOptions,
                 folded: Folded, context: ToolCallContext, on_event: EventHandler | None,
                 refused: frozenset[str]) -> PlanRun:
    """Run a claimed run to where it settles, recording as it goes; give the run up at the end."""
    run_id, owner = info.run_id, info.owner
    assert owner is not None
    journal = Journal(store, run_id, owner)
    beat = _Heartbeat(store, run_id, owner)
    status: RunStatus | None = None
    try:
        prepared, ended, decided = await _ahead(store, info, journal, prepared, tools, options, folded, context,
                                                refused)
        beat.start()
        async with _on_workers(store, options, run_id, prepared, folded) as prepared:
            run = Run(prepared, concurrency=options.concurrency, step_timeout=options.step_timeout,
                      missing_field=options.missing_field, context=context,
                      extensions=[journal, *reviewing(prepared, decided), *observers(on_event)], ended=ended,
                      park=decided.park)
            if decided.rejected is not None:
                run.cancel_all(f'Cancelled: the reviewer rejected the plan ({decided.rejected})')
            result = await run.run(timeout=options.timeout, max_output_chars=options.max_output_chars)
        await journal.flush()
        status = 'suspended' if result.parked else 'finished' if result.succeeded + result.failed + result.skipped + (
            result.cancelled if decided.rejected is not None else 0) == result.total else 'stopped'
    finally:
        beat.stop()
        with anyio.CancelScope(shield=True):
            await _let_go(store, run_id, owner, status, journal)
    result.run_id = run_id
    return result


async def _ahead(store: PlanStore, info: RunInfo, journal: Journal, prepared: Prepared, tools: Toolset,
                 options: RunOptions, folded: Folded, context: ToolCallContext,
                 refused: frozenset[str]) -> tuple[Prepared, dict[int, Prefill], Decided]:
    """What the stored run, and a whole-plan review (once per run), tell about its steps before they run: the plan
    (as the reviewer left it), the steps that ended, and the decisions and steps to park."""
    if info.review is not None or options.review_mode != 'whole_plan':
        ended, decided = _from_folded(prepared, folded, workers=options.workers is not None)
        decided.rejected = None if info.review is None else json.loads(info.review).get('rejected')
        return prepared, ended, decided
    reviewed, review = await review_ahead(prepared, tools, context, max_steps=options.max_steps, refused=refused)
    ended, decided = _from_folded(reviewed, folded, workers=options.workers is not None)
    if review is None:
        return reviewed, ended, decided
    now = time.time()
    steps = reviewed.plan.steps
    for index, decision in review.decisions.items():
        journal.note(Transition(steps[index].id, 'decided', now, decision.reason,
                                detail=dumps(decision_data(decision))))
    await journal.flush()
    stored = {'rejected': review.rejected, 'parked': {steps[i].id: reason for i, (reason, _) in review.park.items()}}
    await _call(store, store.update, info.run_id, journal.owner, review=dumps(stored),
                plan=plan_text(reviewed.plan) if reviewed is not prepared else None)
    decided.decisions = {**decided.decisions, **review.decisions}
    decided.park = {**{i: p for i, p in review.park.items() if i not in ended}, **decided.park}
    decided.rejected = review.rejected
    return reviewed, ended, decided


def _on_workers(store: PlanStore, options: RunOptions, run_id: str, prepared: Prepared,
                folded: Folded) -> AbstractAsyncContextManager[Prepared]:
    """`prepared` as it runs: its steps' tool calls sent to the workers of `options.workers` while the block runs,
    or as it is."""
    if options.workers is None:
        return nullcontext(prepared)
    from toolweave.plan.workers._dispatch import dispatched  # DBOS is imported by runs on workers only

    return dispatched(store, options.workers, run_id, prepared, folded)


def _from_folded(prepared: Prepared, folded: Folded, *, workers: bool = False) -> tuple[dict[int, Prefill], Decided]:
    """The kernel's and the reviewer's view of the stored transitions (see the module docstring for the rules):
    the steps that ended, and the decisions and steps to park. On `workers`, a step that had started is called
    again whatever its tool: the call attaches to the workflow that ran it (by its id), which gives its recorded
    outcome, or parks it if its worker died and its tool may not run twice."""
    ended: dict[int, Prefill] = {}
    decided = Decided()
    for index, step in enumerate(prepared.plan.steps):
        state = folded.steps.get(step.id)
        if state is None:
            continue
        if state.decision is not None:
            decided.decisions[index] = state.decision
        last = state.last
        if last is None or state.decided_last:
            continue
        if last.status in ('succeeded', 'failed', 'skipped'):
            ended[index] = prefill(last)._replace(arguments=state.arguments)
        elif last.status == 'parked':
            decided.park[index] = (last.error or 'waiting for a decision', json.loads(last.detail or '{}'))
        elif last.status == 'running' or (last.status == 'cancelled' and json.loads(last.detail or '{}').get(
                'started')):
            tool = prepared.tools[index]
            if not workers and tool is not None and not _runs_again(tool):
                decided.park[index] = (
                    f'Unknown after a crash: the step started at {when(last.at)} and its run stopped before it '
                    f'ended. Its tool {tool.name!r} is not marked idempotent or read-only, so it was not run again. '
                    'Approve to run it again, or reject to fail it.',
                    {'unknown_after_crash': True, 'started_at': last.at, 'tool': tool.name})
    return ended, decided


def _runs_again(tool: Tool) -> bool:
    """Whether a step of `tool` that may have run may simply run again."""
    metadata = tool.definition.metadata
    return metadata.idempotent is True or metadata.read_only is True


async def _let_go(store: PlanStore, run_id: str, owner: str, status: RunStatus | None,
                  journal: Journal | None = None) -> None:
    """Write what is left and give the run up; a store that fails here is logged, not raised (the run's own
    outcome, or its own error, is what the caller needs)."""
    try:
        if journal is not None and journal.failure is None:
            await journal.flush()
        await _call(store, store.update, run_id, owner, status=status or 'stopped', release=True)
    except PlanStoreError as exc:
        logger.warning('Could not record the end of plan run %r: %s', run_id, exc)
    finally:
        release_owner(owner)


class _Heartbeat:
    """Renews the run's lease from a daemon thread while it runs (a long step writes nothing for a while)."""

    def __init__(self, store: PlanStore, run_id: str, owner: str) -> None:
        self._store, self._run_id, self._owner = store, run_id, owner
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        renew = getattr(self._store, 'heartbeat', None)
        if renew is None:
            return
        self._thread = threading.Thread(target=self._beat, args=(renew,), name=f'toolweave-lease-{self._run_id}',
                                        daemon=True)
        self._thread.start()

    def _beat(self, renew: Callable[[str, str], None]) -> None:
        while not self._stop.wait(LEASE_SECONDS / 3):
            try:
                renew(self._run_id, self._owner)
            except Exception as exc:  # the journal reports a store that fails; this only must not die loudly
                logger.debug('Lease renewal of plan run %r failed: %r', self._run_id, exc)

    def stop(self) -> None:
        self._stop.set()
