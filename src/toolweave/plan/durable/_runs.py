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
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from toolweave._json import compact
from toolweave.approval import ReviewDecision, ReviewHandler, record_approvals, use_review_handler
from toolweave.exceptions import PlanMismatchError, PlanStoreError, PlanValidationError, RunLostError, UserError
from toolweave.plan._kernel import Extension, Prefill, Run
from toolweave.plan._observe import observers
from toolweave.plan._options import RunOptions
from toolweave.plan._parse import Parsed, Problems
from toolweave.plan._record import EventHandler, ItemRecord, PlanRun, step_result
from toolweave.plan._retry import retrying
from toolweave.plan._review import Decided, review_ahead, reviewing
from toolweave.plan._validate import Prepared, as_toolset, prepare
from toolweave.plan.durable._codec import (
    Folded,
    StepState,
    decision_data,
    dumps,
    fold,
    outcome_transition,
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
    StoreBusy,
    Transition,
    new_owner,
    patiently,
    release_owner,
)
from toolweave.tools import Tool, ToolCallContext, ToolResult, Toolset, ToolsetItem

__all__ = ('StoreLike', 'decide', 'decide_sync', 'open_store', 'opened', 'resolve_step', 'resolve_step_sync',
           'resume_plan', 'resume_plan_sync', 'retry_step', 'retry_step_sync', 'start_run')

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
        lease = _seconds(options.pop('lease', None), text)
        if options or synchronous not in ('normal', 'full'):
            raise PlanStoreError(f'Cannot open plan store {text!r}: the SQLite options are `?synchronous=normal` or '
                                 f'`?synchronous=full`, `?lease=SECONDS` and `?retain=30d`; got {query!r}.')
        if not rest:
            raise PlanStoreError(f'Cannot open plan store {text!r}: no file. Write `sqlite:///runs.db`.')
        return SqliteStore(rest, synchronous='full' if synchronous == 'full' else 'normal',
                           lease=LEASE_SECONDS if lease is None else lease, read_only=read_only)
    if '://' in text:
        raise PlanStoreError(f'Cannot open plan store {text!r}: unknown kind of store. Use `sqlite:///runs.db` (a '
                             'file) or `postgresql://user@host/db` (with `pip install "toolweave[postgres]"`).')
    return SqliteStore(text, read_only=read_only)


def _seconds(text: str | None, url: str) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise PlanStoreError(f'Cannot open plan store {url!r}: `?lease=` must be a positive number of seconds, got '
                             f'{text!r}.')
    return value


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
    """A store operation: straight from the event loop for an inline store (unless another process holds its
    lock: then in a worker thread, which may wait), else in a worker thread."""
    if store.inline:
        try:
            return work(*args, **kwargs)
        except StoreBusy:
            pass

    def patient() -> T:
        with patiently(store):
            return work(*args, **kwargs)
    return await anyio.to_thread.run_sync(patient)


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
    return await _resume(store, run_id, tools, options.review_handler, context, on_event, refused,
                         options.wait_for_decisions)


async def resume_plan(
    run_id: str,
    tools: Toolset | Iterable[ToolsetItem],
    *,
    store: StoreLike,
    review_handler: ReviewHandler | None = None,
    context: Mapping[str, Any] | None = None,
    on_event: EventHandler | None = None,
    wait_for_decisions: float | None = None,
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
        wait_for_decisions: seconds the run keeps waiting (holding the run) while steps are parked, going on as
            each decision arrives, before it returns suspended; `None`: it returns at once.

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
                                ToolCallContext.of(context), on_event, frozenset(), wait_for_decisions)
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
    wait_for_decisions: float | None = None,
) -> PlanRun:
    """`resume_plan` for scripts with no event loop running."""
    return anyio.run(partial(resume_plan, run_id, tools, store=store, review_handler=review_handler,
                             context=context, on_event=on_event, wait_for_decisions=wait_for_decisions))


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


async def resolve_step(run_id: str, step_id: str, output: Any, *, store: StoreLike, reason: str | None = None) -> None:
    """Record what a parked step did ("resolve as done"): it ran, but its run could not record it (unknown after a
    crash), or a person did its work by hand. The step counts as succeeded with `output` (text, or JSON data: what
    the steps that refer to it read), and the next `resume_plan` runs the steps that depend on it.

    Raises:
        UnknownRunError: the store has no run `run_id`.
        DecisionError: the step is not parked.
        UserError: `output` is not text or JSON data.
    """
    try:
        result = step_result(ToolResult.success(output) if isinstance(output, str) else
                             ToolResult.success(compact(output), output))
    except (TypeError, ValueError) as exc:
        raise UserError(f'The output of a resolved step must be text or JSON data: {exc}.') from None
    transition = outcome_transition(step_id, result, time.time(), {'resolved': True, 'reason': reason})
    async with opened(store) as plans:
        await _call(plans, plans.decide, check_run_id(run_id), transition)


def resolve_step_sync(run_id: str, step_id: str, output: Any, *, store: StoreLike, reason: str | None = None) -> None:
    """`resolve_step` for scripts with no event loop running."""
    anyio.run(partial(resolve_step, run_id, step_id, output, store=store, reason=reason))


async def retry_step(run_id: str, step_id: str, *, store: StoreLike, reason: str | None = None) -> None:
    """Ask a failed step of a stored run to run again: the next `resume_plan` runs it (under the decision it ran
    under, if it is gated and had one), and the steps skipped because it failed run after it; nothing that
    succeeded runs again.

    Raises:
        UnknownRunError: the store has no run `run_id`.
        DecisionError: the step did not fail (it is running, parked, succeeded, or already asked to run again).
    """
    async with opened(store) as plans:
        await _call(plans, plans.decide, check_run_id(run_id),
                    Transition(step_id, 'retry', time.time(), reason, detail=dumps({'reason': reason})))


def retry_step_sync(run_id: str, step_id: str, *, store: StoreLike, reason: str | None = None) -> None:
    """`retry_step` for scripts with no event loop running."""
    anyio.run(partial(retry_step, run_id, step_id, store=store, reason=reason))


async def _resume(store: PlanStore, run_id: str, tools: Toolset, review_handler: ReviewHandler | None,
                  context: ToolCallContext, on_event: EventHandler | None, refused: frozenset[str],
                  wait_for_decisions: float | None = None) -> PlanRun:
    # The plan is checked against the tools before the run is claimed: a resume refused for them leaves the run
    # as it was (a suspended run suspended, a crashed one for a recoverer with the right tools).
    before = await _call(store, store.header, run_id)
    prepared, options = _fit(before, tools, review_handler, store, refused, wait_for_decisions)
    owner = new_owner()
    try:
        info = await _call(store, store.claim, run_id, owner)
    except BaseException:
        release_owner(owner)
        raise
    try:
        stored = await _call(store, store.load, run_id)
        if (info.plan, info.options) != (before.plan, before.options):  # changed between the two reads
            prepared, options = _fit(info, tools, review_handler, store, refused, wait_for_decisions)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await _let_go(store, run_id, owner, before.status)
        raise
    return await _drive(store, info, prepared, tools, options, fold(stored.transitions), context, on_event, refused)


def _fit(info: RunInfo, tools: Toolset, review_handler: ReviewHandler | None, store: PlanStore,
         refused: frozenset[str], wait_for_decisions: float | None) -> tuple[Prepared, RunOptions]:
    """The stored plan validated against `tools`, and the run's options (`PlanValidationError` if it does not
    fit)."""
    plan = plan_from_data(json.loads(info.plan))
    options = replace(RunOptions.from_stored(json.loads(info.options), review_handler=review_handler, store=store),
                      wait_for_decisions=wait_for_decisions)
    prepared, problems = prepare(Parsed(plan, Problems()), tools, max_steps=options.max_steps,
                                 max_items=options.max_items, extra_refused=refused)
    if prepared is None:
        raise PlanValidationError([f'the stored plan of run {info.run_id!r} does not fit these tools: {problem}'
                                   for problem in problems.messages()])
    return prepared, options


async def _drive(store: PlanStore, info: RunInfo, prepared: Prepared, tools: Toolset, options: RunOptions,
                 folded: Folded, context: ToolCallContext, on_event: EventHandler | None,
                 refused: frozenset[str]) -> PlanRun:
    """Run a claimed run to where it settles, recording as it goes (and, with `wait_for_decisions`, wait holding
    it while steps are parked, going on as each decision arrives); give the run up at the end."""
    run_id, owner = info.run_id, info.owner
    assert owner is not None
    journal = Journal(store, run_id, owner, deadline=options.decision_deadline, on_deadline=options.on_deadline)
    beat = _Heartbeat(journal)
    status: RunStatus | None = None
    try:
        prepared, known = await _ahead(store, info, journal, prepared, tools, options, folded, context, refused)
        waiting_until = None if options.wait_for_decisions is None else time.time() + options.wait_for_decisions
        async with _on_workers(store, options, run_id, prepared, folded) as dispatch:
            while True:
                decided = known.decided
                run = Run(prepared, concurrency=options.concurrency, step_timeout=options.step_timeout,
                          missing_field=options.missing_field, context=context,
                          extensions=[journal, *reviewing(prepared, decided, known.item_decisions, known.item_parks),
                                      *retrying(prepared.tools, options.retries), *observers(on_event), *dispatch],
                          ended=known.ended, items=known.items, park=decided.park)
                if decided.rejected is not None:
                    run.cancel_all(f'Cancelled: the reviewer rejected the plan ({decided.rejected})')
                beat.watch(run)
                result = await run.run(timeout=options.timeout, max_output_chars=options.max_output_chars)
                await journal.flush()
                if not result.parked or waiting_until is None or run.cancelled is not None:
                    break
                news = await _news(store, journal, [r.id for r in result.steps if r.status == 'parked'],
                                   waiting_until)
                if news is None:
                    break
                known = _from_folded(prepared, news, workers=options.workers is not None)
                await _journal_expired(journal, known)
        if run.cancelled is not None and journal.cancel is not None:
            status = 'cancelled'
        else:
            status = 'suspended' if result.parked else 'finished' if (
                result.succeeded + result.failed + result.skipped
                + (result.cancelled if decided.rejected is not None else 0) == result.total) else 'stopped'
    finally:
        beat.stop()
        with anyio.CancelScope(shield=True):
            await _let_go(store, run_id, owner, status, journal)
    result.run_id = run_id
    return result


async def _news(store: PlanStore, journal: Journal, parked: Collection[str], until: float) -> Folded | None:
    """Wait, holding the run, until one of its `parked` steps can go on (a decision, a step resolved as done), or a
    parked review's deadline passes: the run's transitions then, folded. `None` once `until` passed first, or a
    person asked the run to stop."""
    pause = 0.05
    while True:
        await journal.confirm()  # still ours (fenced), and no cancel request
        folded = fold((await _call(store, store.load, journal.run_id)).transitions)
        now = time.time()
        deadline = None
        for step_id in parked:
            state = folded.state(step_id)
            if state.decided_last or state.last is None or state.last.status != 'parked':
                return folded
            due = json.loads(state.last.detail or '{}').get('deadline_at')
            if isinstance(due, (int, float)):
                if due <= now:
                    return folded
                deadline = due if deadline is None else min(deadline, due)
        if now >= until or journal.cancel is not None:
            return None
        wake = until if deadline is None else min(until, deadline)
        await anyio.sleep(max(0.0, min(pause, wake - now)))
        pause = min(pause * 1.5, 1.0)


async def _journal_expired(journal: Journal, known: Known) -> None:
    """Journal the decisions deadlines made (the audit trail says no person decided them)."""
    for transition in known.expired:
        journal.note(transition)
    if known.expired:
        await journal.flush()


async def _ahead(store: PlanStore, info: RunInfo, journal: Journal, prepared: Prepared, tools: Toolset,
                 options: RunOptions, folded: Folded, context: ToolCallContext,
                 refused: frozenset[str]) -> tuple[Prepared, Known]:
    """What the stored run, and a whole-plan review (once per run), tell about its steps before they run: the plan
    (as the reviewer left it), what ended, and the decisions and steps to park."""
    workers = options.workers is not None
    if info.review is not None or options.review_mode != 'whole_plan':
        known = _from_folded(prepared, folded, workers=workers)
        known.decided.rejected = None if info.review is None else json.loads(info.review).get('rejected')
        await _journal_expired(journal, known)
        return prepared, known
    reviewed, review = await review_ahead(prepared, tools, context, max_steps=options.max_steps, refused=refused)
    known = _from_folded(reviewed, folded, workers=workers)
    if review is None:
        return reviewed, known
    now = time.time()
    steps = reviewed.plan.steps
    for index, decision in review.decisions.items():
        journal.note(Transition(steps[index].id, 'decided', now, decision.reason,
                                detail=dumps(decision_data(decision))))
    await journal.flush()
    stored = {'rejected': review.rejected, 'parked': {steps[i].id: reason for i, (reason, _) in review.park.items()}}
    await _call(store, store.update, info.run_id, journal.owner, review=dumps(stored),
                plan=plan_text(reviewed.plan) if reviewed is not prepared else None)
    decided = known.decided
    decided.decisions = {**decided.decisions, **review.decisions}
    decided.park = {**{i: p for i, p in review.park.items() if i not in known.ended}, **decided.park}
    decided.rejected = review.rejected
    return reviewed, known


def _on_workers(store: PlanStore, options: RunOptions, run_id: str, prepared: Prepared,
                folded: Folded) -> AbstractAsyncContextManager[list[Extension]]:
    """The extensions a run needs while the block runs: the one sending its steps' tool calls to the workers of
    `options.workers`, or none."""
    if options.workers is None:
        return nullcontext([])
    from toolweave.plan.workers._dispatch import dispatched  # DBOS is imported by runs on workers only

    return _listed(dispatched(store, options.workers, run_id, prepared, folded))


@asynccontextmanager
async def _listed(dispatch: AbstractAsyncContextManager[Extension]) -> AsyncIterator[list[Extension]]:
    async with dispatch as extension:
        yield [extension]


@dataclass(slots=True)
class Known:
    """What a stored run's transitions tell about its steps before they run again."""

    ended: dict[int, Prefill] = field(default_factory=dict[int, Prefill])
    """Steps that ended (succeeded, failed, or skipped by their own false condition)."""
    items: dict[int, list[ItemRecord]] = field(default_factory=dict[int, list[ItemRecord]])
    """Elements that ended, of `for_each` steps that did not."""
    decided: Decided = field(default_factory=Decided)
    """Decisions per step, and the steps to park."""
    item_decisions: dict[tuple[int, int], ReviewDecision] = field(default_factory=dict[tuple[int, int],
                                                                                           ReviewDecision])
    """Decisions for the elements of a `for_each` step that a person was asked about."""
    item_parks: dict[tuple[int, int], tuple[str, Mapping[str, Any]]] = field(
        default_factory=dict[tuple[int, int], tuple[str, Mapping[str, Any]]])
    """Elements to park when they are reached (unknown after a crash, nobody asked yet), with why."""
    expired: list[Transition] = field(default_factory=list[Transition])
    """The decisions deadlines made (rejections), to journal: the audit trail says a deadline decided."""


def _from_folded(prepared: Prepared, folded: Folded, *, workers: bool = False, now: float | None = None) -> Known:
    """The kernel's and the reviewer's view of the stored transitions (see the module docstring for the rules):
    the steps and elements that ended, and the decisions and steps to park. A step skipped because of another
    step is not kept: the kernel skips it again, or runs it if that step runs again (a person retried it). On
    `workers`, a step that had started is called again whatever its tool: the call attaches to the workflow that
    ran it (by its id), which gives its recorded outcome, or parks it if its worker died and its tool may not run
    twice."""
    known = Known()
    decided = known.decided
    now = time.time() if now is None else now
    for index, step in enumerate(prepared.plan.steps):
        state = folded.steps.get(step.id)
        if state is None:
            continue
        _apply_deadline(known, index, step.id, state, now)
        tool = prepared.tools[index]
        repeatable = workers or tool is None or _runs_again(tool)
        asked = set(state.parked_items) | {i for i, item in state.items.items() if item.last.status == 'parked'}
        unknown = {i for i, item in state.items.items() if not repeatable and _started_not_ended(item.last)}
        if state.decision is not None:
            if state.decided_last and state.items:  # a decision about the elements the person was asked about
                known.item_decisions.update({(index, i): state.decision for i in asked})
            else:
                decided.decisions[index] = state.decision
        if tool is not None:
            for i in sorted(unknown - asked if state.decided_last else ()):
                item = state.items[i]
                known.item_parks[(index, i)] = (_unknown_reason(tool, item.last, item.last.at, f'element {i}'), {
                    'unknown_after_crash': True, 'started_at': item.last.at, 'tool': tool.name, 'items': [i]})
        done = [item.record(i) for i, item in state.items.items() if item.last.status in ('succeeded', 'failed')]
        last = state.last
        if last is None or state.decided_last:
            if done:
                known.items[index] = done
            continue
        if last.status == 'succeeded' or last.status == 'failed':
            known.ended[index] = prefill(last)._replace(arguments=state.arguments)
            continue
        if last.status == 'skipped':
            fill = prefill(last)
            if fill.condition == step.id:  # its own condition was false: an outcome of its own
                known.ended[index] = fill
            continue
        if done:
            known.items[index] = done
        if last.status == 'parked':
            decided.park[index] = (last.error or 'waiting for a decision',
                                   {**json.loads(last.detail or '{}'), 'again': True})
        elif _started_not_ended(last) and not repeatable:
            assert tool is not None
            waiting = sorted(unknown) if state.items else []
            what = (f'element{"s" if len(waiting) > 1 else ""} {", ".join(map(str, waiting))} of the step' if waiting
                    else 'the step')
            decided.park[index] = (_unknown_reason(tool, last, state.started_at or last.at, what), {
                'unknown_after_crash': True, 'started_at': state.started_at or last.at, 'tool': tool.name,
                'items': waiting, 'again': True})
    return known


def _apply_deadline(known: Known, index: int, step_id: str, state: StepState, now: float) -> None:
    """A review parked past its deadline (and not decided since): reject it (a `decided` transition, journaled),
    or escalate it (it is no longer parked: the reviewers of this process are asked). Else note the deadline."""
    last = state.last
    if last is None or last.status != 'parked' or state.decided_last or not last.detail:
        return
    detail = json.loads(last.detail)
    deadline_at = detail.get('deadline_at')
    if not isinstance(deadline_at, (int, float)):
        return
    if now < deadline_at:
        return
    if detail.get('on_deadline') == 'escalate':
        state.last = None  # not parked any more: its review is asked of the reviewers at hand
        state.items = {i: item for i, item in state.items.items() if item.last.status != 'parked'}
        state.parked_items = ()
        return
    decision = ReviewDecision.reject(f'no decision before its deadline, {when(deadline_at)}')
    known.expired.append(Transition(step_id, 'decided', now, decision.reason, detail=dumps(decision_data(decision))))
    state.decision, state.decided_last = decision, True


def _unknown_reason(tool: Tool, last: Transition, started_at: float, what: str) -> str:
    # A step whose last word is `running` lost its process; a `cancelled` one was stopped by its own run (a
    # timeout, an interruption), which says why.
    head, why = ('Unknown after a crash', 'its run stopped before it ended') if last.status == 'running' else (
        'Unknown after it was stopped', f'its run stopped it before it ended ({last.error or "cancelled"})')
    return (f'{head}: {what} started at {when(started_at)} and {why}. Its tool {tool.name!r} is not '
            'marked idempotent or read-only, so it was not run again. Approve to run it again, resolve it as done '
            'with what it did, or reject to fail it.')


def _started_not_ended(last: Transition) -> bool:
    """Whether a step (or element) had started and its run stopped before it ended."""
    return last.status == 'running' or (last.status == 'cancelled' and bool(
        json.loads(last.detail or '{}').get('started')))


def _runs_again(tool: Tool) -> bool:
    """Whether a step of `tool` that may have run may simply run again."""
    metadata = tool.definition.metadata
    return metadata.idempotent is True or metadata.read_only is True


async def _let_go(store: PlanStore, run_id: str, owner: str, status: RunStatus | None,
                  journal: Journal | None = None) -> None:
    """Write what is left and give the run up; a store that fails here is logged, not raised (the run's own
    outcome, or its own error, is what the caller needs). A run this process lost is not touched."""
    try:
        if journal is not None and isinstance(journal.failure, RunLostError):
            return
        if journal is not None and journal.failure is None:
            await journal.flush()
        await _call(store, store.update, run_id, owner, status=status or 'stopped', release=True)
    except RunLostError:
        pass
    except PlanStoreError as exc:
        logger.warning('Could not record the end of plan run %r: %s', run_id, exc)
    finally:
        release_owner(owner)


class _Heartbeat:
    """Renews the run's lease from a daemon thread while the process holds it (a long step writes nothing for a
    while; a run waiting for decisions writes nothing at all), every third of the lease. A renewal that finds the
    run lost stops the kernel's run at once (its running steps are cancelled, nothing more starts); one that reads
    a person's request to stop cancels it."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._run: Run | None = None
        self._token = anyio.lowlevel.current_token()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f'toolweave-lease-{journal.run_id}', daemon=True)
        self._thread.start()

    def watch(self, run: Run) -> None:
        """The kernel's run to stop or cancel from now on."""
        self._run = run

    def _beat(self) -> None:
        journal = self._journal
        while not self._stop.wait(journal.store.lease / 3):
            try:
                journal.beat()
            except RunLostError as exc:
                if self._run is not None:
                    self._tell(self._run.stop, exc)
                return
            except Exception as exc:  # a store that fails: the journal's next write reports it
                logger.debug('Lease renewal of plan run %r failed: %r', journal.run_id, exc)
                continue
            if journal.cancel is not None and self._run is not None:
                self._tell(self._run.cancel, f'Cancelled: a person asked the run to stop ({journal.cancel})')

    def _tell(self, what: Callable[[Any], None], argument: Any) -> None:
        if self._stop.is_set():
            return
        try:
            anyio.from_thread.run_sync(what, argument, token=self._token)
        except RuntimeError:  # the event loop is gone: the run is over
            pass

    def stop(self) -> None:
        self._stop.set()
