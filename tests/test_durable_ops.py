"""Operating durable runs through the public API, on SQLite and on a real PostgreSQL server: listing (pages,
filters, crashed runs, an older store upgraded), cancelling, pruning and retention, recovering crashed runs, and
the defects around decisions and resumes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolweave import CallbackReviewHandler, ReviewDecision, ReviewRequest, tool
from toolweave.exceptions import (
    ApprovalPending,
    DecisionError,
    PlanStoreError,
    PlanValidationError,
    RunCancelledError,
    UnknownRunError,
    UserError,
)
from toolweave.plan import PlanTool, run_plan
from toolweave.plan.durable import (
    PostgresStore,
    SqliteStore,
    cancel_run,
    decide,
    list_runs,
    open_store,
    prune_runs,
    recover_runs,
    resume_plan,
)

pytestmark = pytest.mark.anyio


class Ledger:
    """Tools that write what they did."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def tools(self) -> list[Any]:
        calls = self.calls

        @tool
        def effect(step: str, inputs: list[Any] | None = None) -> str:
            """A side effect."""
            calls.append(step)
            return f'did {step}'

        @tool(requires_approval=True)
        def send(to: str) -> str:
            """Send something (gated)."""
            calls.append(f'send {to}')
            return f'sent to {to}'

        return [effect, send]


def later(request: ReviewRequest) -> ReviewDecision:
    raise ApprovalPending('a person decides later')


PARKS = {'steps': [{'id': 'who', 'tool': 'effect', 'arguments': {'step': 'who'}},
                   {'id': 'mail', 'tool': 'send', 'arguments': {'to': '$ref:who'}},
                   {'id': 'log', 'tool': 'effect', 'arguments': {'step': 'log', 'inputs': ['$ref:mail']}}]}
ONE = {'steps': [{'id': 'a', 'tool': 'effect', 'arguments': {'step': 'a'}}]}


def sql(url: str, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on the store's database behind its back (to set a clock or simulate a crash)."""
    if url.startswith('sqlite'):
        db = sqlite3.connect(url.removeprefix('sqlite:///'))
        try:
            with db:
                rows = db.execute(statement, params).fetchall()
        finally:
            db.close()
        return rows
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        cursor = pg.execute(statement.replace('?', '%s'), params)
        return cursor.fetchall() if cursor.description else []


def age(url: str, run_id: str, seconds: float) -> None:
    """Make a run look last updated `seconds` ago."""
    sql(url, 'UPDATE toolweave_runs SET updated_at = ?, created_at = ? WHERE run_id = ?',
        (time.time() - seconds, time.time() - seconds, run_id))


DEAD = f'{os.uname().nodename}:999999999:gone'


def crash(url: str, run_id: str) -> None:
    """Mark a run as held by a process of this machine that no longer exists (the tests below also kill real
    processes)."""
    sql(url, "UPDATE toolweave_runs SET owner = ?, status = 'running' WHERE run_id = ?", (DEAD, run_id))


# --- listing -------------------------------------------------------------------------------------------------------

async def test_runs_are_listed_newest_first_a_page_at_a_time_with_a_cursor(store_url: str) -> None:
    ledger = Ledger()
    for n in range(7):
        await run_plan(ONE, ledger.tools(), store=store_url, run_id=f'r{n}', name='nightly' if n % 2 else None)
        age(store_url, f'r{n}', 100 - n)  # r6 is the newest
    first = await list_runs(store_url, limit=3)
    assert [r.run_id for r in first.runs] == ['r6', 'r5', 'r4']
    assert [(r.status, r.steps, r.waiting, r.owner) for r in first.runs] == [('finished', 1, 0, None)] * 3
    assert [r.name for r in first.runs] == [None, 'nightly', None]
    second = await list_runs(store_url, limit=3, after=first.cursor)
    third = await list_runs(store_url, limit=3, after=second.cursor)
    assert [r.run_id for r in second.runs] == ['r3', 'r2', 'r1']
    assert [r.run_id for r in third.runs] == ['r0'] and third.cursor is None
    exact = await list_runs(store_url, limit=7)
    assert len(exact.runs) == 7 and exact.cursor is None  # a full last page says it is the last
    named = await list_runs(store_url, name='nightly')
    assert [r.run_id for r in named.runs] == ['r5', 'r3', 'r1']
    assert named.runs[0].to_dict()['name'] == 'nightly'


async def test_paging_is_stable_while_runs_are_written(store_url: str) -> None:
    ledger = Ledger()
    for n in range(6):
        await run_plan(ONE, ledger.tools(), store=store_url, run_id=f'r{n}')
        age(store_url, f'r{n}', 100 - n)
    first = await list_runs(store_url, limit=2)
    assert [r.run_id for r in first.runs] == ['r5', 'r4']
    # Meanwhile: new runs arrive, a run on the first page and one not seen yet are updated.
    await run_plan(ONE, ledger.tools(), store=store_url, run_id='new')
    await cancel_run('r4', store=store_url)  # finished: nothing changes
    sql(store_url, 'UPDATE toolweave_runs SET updated_at = ? WHERE run_id = ?', (time.time(), 'r1'))
    rest: list[str] = []
    cursor = first.cursor
    while cursor is not None:
        page = await list_runs(store_url, limit=2, after=cursor)
        rest += [r.run_id for r in page.runs]
        cursor = page.cursor
    # No run twice, none that did not change skipped; the updated one moved to the front (a new first page).
    assert rest == ['r3', 'r2', 'r0']
    assert [r.run_id for r in (await list_runs(store_url, limit=2)).runs] == ['r1', 'new']


async def test_filters_status_time_range_and_waiting(store_url: str) -> None:
    ledger = Ledger()
    await run_plan(ONE, ledger.tools(), store=store_url, run_id='done')
    await run_plan(PARKS, ledger.tools(), store=store_url, run_id='parked',
                   review_handler=CallbackReviewHandler(later))
    await run_plan(PARKS, ledger.tools(), store=store_url, run_id='decided',
                   review_handler=CallbackReviewHandler(later))
    await decide('decided', 'mail', ReviewDecision.approve(), store=store_url)
    await run_plan(ONE, ledger.tools(), store=store_url, run_id='crashed')
    crash(store_url, 'crashed')
    for n, run_id in enumerate(['done', 'parked', 'decided', 'crashed']):
        age(store_url, run_id, 3600 * (4 - n))  # done is the oldest, 4 h ago
    listed = {r.run_id: r for r in (await list_runs(store_url)).runs}
    assert {k: (r.status, r.waiting) for k, r in listed.items()} == {
        'done': ('finished', 0), 'parked': ('suspended', 1), 'decided': ('suspended', 0), 'crashed': ('crashed', 0)}
    assert listed['crashed'].owner == DEAD

    async def ids(**filters: Any) -> list[str]:
        return [r.run_id for r in (await list_runs(store_url, **filters)).runs]

    assert await ids(status='suspended') == ['decided', 'parked']
    assert await ids(status=['crashed', 'finished']) == ['crashed', 'done']
    assert await ids(status='running') == []  # its holder is gone: crashed, not running
    assert await ids(waiting=True) == ['parked']
    assert await ids(since=time.time() - 2.5 * 3600) == ['crashed', 'decided']
    assert await ids(until=time.time() - 2.5 * 3600) == ['parked', 'done']
    assert await ids(since=time.time() - 3.5 * 3600, until=time.time() - 1.5 * 3600, status='suspended') == [
        'decided', 'parked']


async def test_running_and_crashed_are_told_apart_across_pages(store_url: str) -> None:
    ledger = Ledger()
    for n in range(5):
        await run_plan(ONE, ledger.tools(), store=store_url, run_id=f'c{n}')
        crash(store_url, f'c{n}')
        age(store_url, f'c{n}', 10 - n)
    started = anyio.Event()
    release = anyio.Event()

    @tool
    async def slow() -> str:
        """Wait."""
        started.set()
        await release.wait()
        return 'ok'

    async with anyio.create_task_group() as group:
        group.start_soon(lambda: run_plan({'steps': [{'id': 's', 'tool': 'slow', 'arguments': {}}]}, [slow],
                                          store=store_url, run_id='live'))
        await started.wait()
        age(store_url, 'live', 20)  # the oldest: the crashed ones are read (and dropped) before it is found
        running = await list_runs(store_url, status='running', limit=1)
        assert [(r.run_id, r.status) for r in running.runs] == [('live', 'running')] and running.cursor is None
        crashed = await list_runs(store_url, status='crashed', limit=2)
        assert [r.run_id for r in crashed.runs] == ['c4', 'c3']
        more = await list_runs(store_url, status='crashed', limit=2, after=crashed.cursor)
        last = await list_runs(store_url, status='crashed', limit=2, after=more.cursor)
        assert [r.run_id for r in more.runs + last.runs] == ['c2', 'c1', 'c0'] and last.cursor is None
        release.set()


async def test_bad_listing_arguments_say_what_is_wrong(tmp_path: Path) -> None:
    url = f'sqlite:///{tmp_path}/runs.db'
    await run_plan(ONE, Ledger().tools(), store=url, run_id='x')
    with pytest.raises(UserError, match=r"status must be one or more of running, crashed, suspended, finished, "
                                        r"stopped, cancelled, got 'done'"):
        await list_runs(url, status='done')  # type: ignore[arg-type]
    with pytest.raises(UserError, match='limit must be an integer from 1 to 1000, got 0'):
        await list_runs(url, limit=0)
    with pytest.raises(UserError, match=r"after must be the cursor of a page of runs .*got 'nope'"):
        await list_runs(url, after='nope')
    with pytest.raises(UserError, match=r"since must be a datetime, seconds since the epoch .*got 'yesterday'"):
        await list_runs(url, since='yesterday')
    with pytest.raises(UserError, match='run name must be a string of 1 to 200 characters'):
        await run_plan(ONE, Ledger().tools(), store=url, name='')
    with pytest.raises(UserError, match="run_plan got name='n' without a store"):
        await run_plan(ONE, Ledger().tools(), name='n')


async def test_listing_a_store_that_does_not_exist_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / 'typo.db'
    with pytest.raises(PlanStoreError, match=r"the file '.*typo\.db' does not exist\. Check the path"):
        await list_runs(f'sqlite:///{missing}')
    assert not missing.exists()
    empty = tmp_path / 'empty.db'
    empty.write_bytes(b'')
    with pytest.raises(PlanStoreError, match='Is it a plan store'):
        await list_runs(empty)


async def test_listing_a_postgres_database_without_runs_creates_no_tables(postgres_url: str) -> None:
    with pytest.raises(PlanStoreError, match='the database has no plan runs'):
        await list_runs(postgres_url)
    assert sql(postgres_url, "SELECT to_regclass('toolweave_runs') IS NULL") == [(True,)]


async def test_a_plan_tool_and_an_agent_label_their_runs(store_url: str) -> None:
    from toolweave import Agent
    from toolweave.testing import ScriptedModel

    ledger = Ledger()
    planner = PlanTool(ledger.tools(), store=store_url, run_name='billing')
    await planner.call({'steps': [{'id': 'a', 'tool': 'effect', 'arguments': {'step': 'a'}}]})
    plan_call = {'tool': 'execute_tool_plan', 'arguments': {'steps': [
        {'id': 'b', 'tool': 'effect', 'arguments': {'step': 'b'}}]}}
    agent = Agent(ScriptedModel([plan_call, 'done']), tools=ledger.tools(), tool_planning=True,
                  plan_store=store_url, name='helpdesk')
    await agent.run('go')
    assert sorted((r.name, r.steps) for r in (await list_runs(store_url)).runs) == [('billing', 1), ('helpdesk', 1)]
    assert [r.steps for r in (await list_runs(store_url, name='helpdesk')).runs] == [1]


OLD_SCHEMA = (
    'CREATE TABLE toolweave_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)',
    'CREATE TABLE toolweave_runs (run_id TEXT PRIMARY KEY, plan_hash TEXT NOT NULL, plan TEXT NOT NULL, '
    'options TEXT NOT NULL, status TEXT NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL, owner TEXT, '
    'heartbeat_at REAL, review TEXT)',
    'CREATE TABLE toolweave_transitions (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, '
    'step_id TEXT NOT NULL, item INTEGER, status TEXT NOT NULL, at REAL NOT NULL, error TEXT, output TEXT, '
    'output_blob TEXT, value TEXT, value_blob TEXT, flags INTEGER NOT NULL DEFAULT 0, detail TEXT)',
    'CREATE INDEX toolweave_transitions_by_run ON toolweave_transitions (run_id)',
    'CREATE TABLE toolweave_blobs (digest TEXT PRIMARY KEY, data TEXT NOT NULL)',
    "INSERT INTO toolweave_meta VALUES ('schema', '1')",
)


def old_store(url: str) -> None:
    """A store as the first version of toolweave left it, with one parked run."""
    for statement in OLD_SCHEMA:
        if url.startswith('postgres'):
            statement = statement.replace('REAL', 'DOUBLE PRECISION').replace(
                'INTEGER PRIMARY KEY', 'BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY')
        sql(url, statement)
    plan = json.dumps({'steps': [{'id': 'a', 'tool': 'send', 'arguments': {'to': 'ada'}, 'description': None}],
                       'output_steps': None, 'goal': None, 'dialect': 'id'})
    sql(url, 'INSERT INTO toolweave_runs (run_id, plan_hash, plan, options, status, created_at, updated_at) '
             "VALUES ('old', 'h', ?, '{}', 'suspended', 1.0, 2.0)", (plan,))
    sql(url, "INSERT INTO toolweave_transitions (run_id, step_id, status, at, error, flags) "
             "VALUES ('old', 'a', 'parked', 1.5, 'waits', 0)")


async def test_a_store_written_by_an_earlier_version_gets_the_new_columns_and_indexes(store_url: str) -> None:
    old_store(store_url)
    page = await list_runs(store_url)  # opened to read: upgraded first, once
    assert [(r.run_id, r.name, r.status, r.waiting) for r in page.runs] == [('old', None, 'suspended', 1)]
    if store_url.startswith('sqlite'):
        indexes = {row[0] for row in sql(store_url, "SELECT name FROM sqlite_master WHERE type = 'index'")}
    else:
        indexes = {row[0] for row in sql(store_url, 'SELECT indexname FROM pg_indexes')}
    assert {'toolweave_runs_by_update', 'toolweave_runs_by_status', 'toolweave_runs_by_name',
            'toolweave_transitions_parked'} <= indexes
    await decide('old', 'a', ReviewDecision.reject('no'), store=store_url)
    assert (await list_runs(store_url, waiting=True)).runs == ()


def test_pages_and_filters_are_answered_from_indexes(tmp_path: Path) -> None:
    url = f'sqlite:///{tmp_path}/runs.db'
    open_store(url).close()
    db = sqlite3.connect(tmp_path / 'runs.db')
    plans = {
        'page': 'SELECT run_id FROM toolweave_runs WHERE (updated_at, run_id) < (?, ?) '
                'ORDER BY updated_at DESC, run_id DESC LIMIT 51',
        'status': "SELECT run_id FROM toolweave_runs WHERE status IN ('finished') "
                  'ORDER BY updated_at DESC, run_id DESC LIMIT 51',
        'name': "SELECT run_id FROM toolweave_runs WHERE name = 'x' ORDER BY updated_at DESC, run_id DESC LIMIT 51",
    }
    for what, query in plans.items():
        text = ' '.join(row[3] for row in db.execute(f'EXPLAIN QUERY PLAN {query}',
                                                      (1.0, 'a') if '?' in query else ()))
        assert 'USING' in text and 'INDEX' in text and 'TEMP B-TREE' not in text, (what, text)
    db.close()


# --- cancelling ----------------------------------------------------------------------------------------------------

async def test_a_suspended_run_is_cancelled_at_once_and_never_runs_again(store_url: str) -> None:
    ledger = Ledger()
    await run_plan(PARKS, ledger.tools(), store=store_url, run_id='c', review_handler=CallbackReviewHandler(later))
    done = await cancel_run('c', store=store_url, reason='the customer left')
    assert (done.outcome, done.steps, done.reason) == ('cancelled', ('mail', 'log'), 'the customer left')
    store = open_store(store_url)
    try:
        stored = store.load('c')
        assert stored.info.status == 'cancelled' and stored.info.owner is None
        assert [(t.step_id, t.status, t.error) for t in stored.transitions if t.status == 'cancelled'] == [
            ('mail', 'cancelled', 'Cancelled: the run was cancelled (the customer left)'),
            ('log', 'cancelled', 'Cancelled: the run was cancelled (the customer left)')]
    finally:
        store.close()
    with pytest.raises(RunCancelledError, match=r"Plan run 'c' in .* was cancelled \(the customer left\): a "
                                                'cancelled run never runs again. Start the plan under a new run id'):
        await resume_plan('c', ledger.tools(), store=store_url)
    with pytest.raises(RunCancelledError):  # the same plan under the same id goes on with that run: refused too
        await run_plan(PARKS, ledger.tools(), store=store_url, run_id='c')
    with pytest.raises(DecisionError, match=r"Step 'mail' of plan run 'c' is cancelled"):
        await decide('c', 'mail', ReviewDecision.approve(), store=store_url)
    assert ledger.calls == ['who']
    assert (await cancel_run('c', store=store_url)).outcome == 'already cancelled'
    assert [r.status for r in (await list_runs(store_url, status='cancelled')).runs] == ['cancelled']


async def test_a_finished_or_unknown_run_is_not_cancelled(store_url: str) -> None:
    await run_plan(ONE, Ledger().tools(), store=store_url, run_id='f')
    assert (await cancel_run('f', store=store_url)).outcome == 'already finished'
    assert [r.status for r in (await list_runs(store_url)).runs] == ['finished']
    with pytest.raises(UnknownRunError, match="No plan run 'nope'"):
        await cancel_run('nope', store=store_url)
    with pytest.raises(UserError, match='run_id must be'):
        await cancel_run('bad id', store=store_url)


async def test_a_crashed_run_is_cancelled_its_started_steps_marked(store_url: str) -> None:
    await run_plan(PARKS, Ledger().tools(), store=store_url, run_id='x', review_handler=CallbackReviewHandler(later))
    # As a process killed while `mail` ran would leave it:
    sql(store_url, "DELETE FROM toolweave_transitions WHERE run_id = 'x' AND step_id = 'mail'")
    sql(store_url, "INSERT INTO toolweave_transitions (run_id, step_id, status, at, flags) "
                   "VALUES ('x', 'mail', 'running', 1.0, 0)")
    crash(store_url, 'x')
    done = await cancel_run('x', store=store_url)
    assert done.outcome == 'cancelled' and done.steps == ('mail', 'log')
    store = open_store(store_url)
    try:
        last = {t.step_id: t for t in store.load('x').transitions}
        assert json.loads(last['mail'].detail or '{}') == {'started': True, 'run_cancelled': True}
        assert last['mail'].error == 'Cancelled: the run was cancelled'
    finally:
        store.close()


async def test_a_run_a_live_process_holds_gets_a_cancel_request(store_url: str) -> None:
    started = anyio.Event()
    release = anyio.Event()

    @tool
    async def slow() -> str:
        """Wait."""
        started.set()
        await release.wait()
        return 'ok'

    plan = {'steps': [{'id': 's', 'tool': 'slow', 'arguments': {}}]}
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: run_plan(plan, [slow], store=store_url, run_id='live'))
        await started.wait()
        done = await cancel_run('live', store=store_url, reason='stop it')
        assert (done.outcome, done.steps) == ('requested', ())
        (listed,) = (await list_runs(store_url)).runs
        assert listed.status == 'running' and listed.cancel_reason == 'stop it'
        assert listed.cancel_requested_at is not None and listed.cancel_requested_at <= time.time()
        release.set()
    # Its holder let it go (the journal carries the request out at its next write); a resume is refused, and a
    # second cancel completes it.
    with pytest.raises(RunCancelledError, match=r"Plan run 'live' .* is being cancelled \(stop it\)"):
        await resume_plan('live', [slow], store=store_url)


async def test_a_cancel_request_left_by_a_holder_is_completed_by_cancelling_again(store_url: str) -> None:
    await run_plan(PARKS, Ledger().tools(), store=store_url, run_id='r', review_handler=CallbackReviewHandler(later))
    sql(store_url, "UPDATE toolweave_runs SET cancel_requested_at = 5.0, cancel_reason = 'asked' WHERE run_id = 'r'")
    done = await cancel_run('r', store=store_url)
    assert done.outcome == 'cancelled' and done.steps == ('mail', 'log')
    (listed,) = (await list_runs(store_url)).runs
    assert (listed.status, listed.cancel_requested_at, listed.cancel_reason) == ('cancelled', 5.0, None)


# --- pruning and retention -----------------------------------------------------------------------------------------

async def test_prune_deletes_old_runs_their_journal_and_unused_blobs_only(store_url: str) -> None:
    page = 'x' * 5000

    @tool
    def fetch(url: str) -> str:
        """A big page."""
        return page + url

    def plan(url: str) -> dict[str, Any]:
        return {'steps': [{'id': 'f', 'tool': 'fetch', 'arguments': {'url': url}}]}

    await run_plan(plan('shared'), [fetch], store=store_url, run_id='old-shared')
    await run_plan(plan('own'), [fetch], store=store_url, run_id='old-own')
    await run_plan(plan('shared'), [fetch], store=store_url, run_id='new-shared')
    await run_plan(PARKS, Ledger().tools(), store=store_url, run_id='old-parked',
                   review_handler=CallbackReviewHandler(later))
    for run_id in ('old-shared', 'old-own', 'old-parked'):
        age(store_url, run_id, 40 * 86400)
    dry = await prune_runs(store_url, older_than='30d', dry_run=True)
    assert (dry.runs, dry.transitions, dry.blobs, dry.dry_run) == (2, 6, 1, True)
    assert len((await list_runs(store_url)).runs) == 4
    pruned = await prune_runs(store_url, older_than=30 * 86400)
    assert (pruned.runs, pruned.transitions, pruned.blobs, pruned.batches) == (2, 6, 1, 1)
    assert sorted(r.run_id for r in (await list_runs(store_url)).runs) == ['new-shared', 'old-parked']
    assert sql(store_url, "SELECT count(*) FROM toolweave_transitions WHERE run_id IN ('old-shared', 'old-own')"
               ) == [(0,)]
    assert sql(store_url, 'SELECT count(*) FROM toolweave_blobs') == [(1,)]  # the shared page stays
    again = await resume_plan('new-shared', [fetch], store=store_url)
    assert again.step('f').output == page + 'shared'
    assert (await prune_runs(store_url, older_than='30d', status=['suspended', 'cancelled'])).runs == 1
    assert (await prune_runs(store_url, older_than='30d')).runs == 0


async def test_prune_works_in_bounded_batches(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolweave.plan.durable import _operations

    monkeypatch.setattr(_operations, 'PRUNE_ROWS', 10)  # a run of ONE writes 3 transitions
    monkeypatch.setattr(_operations, 'PRUNE_RUNS', 4)
    for n in range(9):
        await run_plan(ONE, Ledger().tools(), store=store_url, run_id=f'r{n}')
        age(store_url, f'r{n}', 3600)
    pruned = await prune_runs(store_url, older_than=60)
    assert (pruned.runs, pruned.transitions, pruned.batches) == (9, 27, 5)  # 4 + 4 + 1 runs read; 3 runs a batch
    assert (await list_runs(store_url)).runs == ()


async def test_a_run_a_live_process_holds_is_never_pruned(store_url: str) -> None:
    started = anyio.Event()
    release = anyio.Event()

    @tool
    async def slow() -> str:
        """Wait."""
        started.set()
        await release.wait()
        return 'ok'

    async with anyio.create_task_group() as group:
        group.start_soon(lambda: run_plan({'steps': [{'id': 's', 'tool': 'slow', 'arguments': {}}]}, [slow],
                                          store=store_url, run_id='live'))
        await started.wait()
        sql(store_url, "UPDATE toolweave_runs SET status = 'suspended', updated_at = 1.0 WHERE run_id = 'live'")
        pruned = await prune_runs(store_url, older_than=0, status=['suspended', 'crashed'])
        assert pruned.runs == 0
        release.set()
    assert [r.run_id for r in (await list_runs(store_url)).runs] == ['live']
    with pytest.raises(UserError, match=r'status \(a running run a live process holds is never pruned\) must be one '
                                        'or more of finished, stopped, cancelled, suspended, crashed'):
        await prune_runs(store_url, older_than=0, status='running')
    with pytest.raises(UserError, match='older_than must be a timedelta, a number of seconds >= 0 or a duration'):
        await prune_runs(store_url, older_than=-1)


async def test_a_store_with_retain_prunes_itself_at_most_once_an_hour(store_url: str) -> None:
    for run_id in ('old', 'fresh'):
        await run_plan(ONE, Ledger().tools(), store=store_url, run_id=run_id)
    await run_plan(PARKS, Ledger().tools(), store=store_url, run_id='waits',
                   review_handler=CallbackReviewHandler(later))
    age(store_url, 'old', 7200)
    age(store_url, 'waits', 7200)
    joiner = '&' if '?' in store_url else '?'
    store = open_store(f'{store_url}{joiner}retain=1h')
    try:
        assert isinstance(store, SqliteStore | PostgresStore)
        retention = store.retention
        assert retention is not None and retention.thread is not None
        retention.thread.join(30)
        assert retention.pruned is not None and retention.pruned.runs == 1
    finally:
        store.close()
    assert sorted(r.run_id for r in (await list_runs(store_url)).runs) == ['fresh', 'waits']
    age(store_url, 'fresh', 7200)
    second = open_store(f'{store_url}{joiner}retain=1h')  # within the hour: another process did it already
    try:
        assert isinstance(second, SqliteStore | PostgresStore) and second.retention is not None
        assert second.retention.thread is None
    finally:
        second.close()
    assert len((await list_runs(store_url)).runs) == 2
    with pytest.raises(UserError, match=r'The `retain` option of plan store .* must be a number with a unit'):
        open_store(f'{store_url}{joiner}retain=forever')


# --- recovery ------------------------------------------------------------------------------------------------------

CHILD = '''
import sys, time
from pathlib import Path

import anyio
from toolweave import tool
from toolweave.plan import run_plan

store, marker, ledger = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])


@tool(idempotent=True)
def work(n: int, after: int = -1) -> int:
    """Step n; the third one hangs until the process is killed."""
    with ledger.open('a') as out:
        out.write(f'child {n}\\n')
    if n == 2:
        marker.write_text('in step 2')
        time.sleep(600)
    return n


plan = {'steps': [{'id': f's{n}', 'tool': 'work', 'arguments': {'n': n, 'after': f'$ref:s{n - 1}' if n else -1}}
                  for n in range(4)]}
anyio.run(lambda: run_plan(plan, [work], store=store, run_id='crashy', name='nightly'))
'''


def killed_run(store_url: str, tmp_path: Path) -> Path:
    """Start `CHILD` in a process, kill it (SIGKILL) while its third step runs; the ledger its steps wrote."""
    script, marker, ledger = tmp_path / 'child.py', tmp_path / 'marker', tmp_path / 'ledger'
    script.write_text(CHILD)
    child = subprocess.Popen([sys.executable, str(script), store_url, str(marker), str(ledger)])
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert child.poll() is None, 'the child process ended early'
            assert time.monotonic() < deadline, 'the child process never reached step 2'
            time.sleep(0.02)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    return ledger


def worker_tools(ledger: Path) -> list[Any]:
    @tool(idempotent=True)
    def work(n: int, after: int = -1) -> int:
        """Step n."""
        with ledger.open('a') as out:
            out.write(f'recovered {n}\n')
        return n

    return [work]


async def test_a_killed_run_is_found_crashed_and_recovered(store_url: str, tmp_path: Path) -> None:
    ledger = killed_run(store_url, tmp_path)
    (listed,) = (await list_runs(store_url)).runs
    assert (listed.run_id, listed.status, listed.name) == ('crashy', 'crashed', 'nightly')
    await run_plan(PARKS, Ledger().tools(), store=store_url, run_id='waits',
                   review_handler=CallbackReviewHandler(later))
    done = await recover_runs(worker_tools(ledger), store=store_url)
    assert [(r.run_id, r.outcome, r.status) for r in done] == [('crashy', 'resumed', 'finished')]
    assert done[0].run is not None and done[0].run.ok
    # s0 and s1 finished before the kill and never ran again; s2 had started (idempotent: it runs again).
    assert ledger.read_text().split('\n')[:-1] == ['child 0', 'child 1', 'child 2', 'recovered 2', 'recovered 3']
    assert {r.run_id: r.status for r in (await list_runs(store_url)).runs} == {'crashy': 'finished',
                                                                               'waits': 'suspended'}
    assert await recover_runs(worker_tools(ledger), store=store_url) == []  # suspended runs wait for a person


async def test_a_recoverer_without_the_right_tools_leaves_the_run_crashed(store_url: str, tmp_path: Path) -> None:
    ledger = killed_run(store_url, tmp_path)

    @tool
    def other() -> str:
        """Not what the plan calls."""
        return ''

    (refused,) = await recover_runs([other], store=store_url)
    assert (refused.outcome, refused.status) == ('refused', 'crashed')
    assert "Unknown tool 'work'" in (refused.error or '')
    (listed,) = (await list_runs(store_url)).runs
    assert listed.status == 'crashed'  # still there for a recoverer with the right tools
    (done,) = await recover_runs(worker_tools(ledger), store=store_url)
    assert done.outcome == 'resumed'


async def test_a_crashed_run_with_a_cancel_request_is_cancelled_not_resumed(store_url: str, tmp_path: Path) -> None:
    ledger = killed_run(store_url, tmp_path)
    sql(store_url, "UPDATE toolweave_runs SET cancel_requested_at = 1.0, cancel_reason = 'enough' "
                   "WHERE run_id = 'crashy'")
    (done,) = await recover_runs(worker_tools(ledger), store=store_url)
    assert (done.outcome, done.status) == ('cancelled', 'cancelled')
    assert 'recovered' not in ledger.read_text()


def test_two_recoverers_race_and_one_resumes(store_url: str, tmp_path: Path) -> None:
    ledger = killed_run(store_url, tmp_path)
    tools = tmp_path / 'slow_tools.py'
    tools.write_text(textwrap.dedent(f'''
        import time
        from pathlib import Path
        from toolweave import tool

        @tool(idempotent=True)
        def work(n: int, after: int = -1) -> int:
            """Step n, slowly: the other recoverer tries meanwhile."""
            with Path({str(ledger)!r}).open('a') as out:
                out.write(f'recovered {{n}}\\n')
            time.sleep(0.5)
            return n

        TOOLS = [work]
    '''))
    command = [sys.executable, '-c', 'from toolweave.cli import main; main()', 'runs', 'recover', '--tools',
               f'{tools}:TOOLS', '--store', store_url, '--json']
    both = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [json.loads(process.communicate(timeout=120)[0]) for process in both]
    outcomes = sorted(r['outcome'] for output in outputs for r in output)
    assert outcomes in (['resumed'], ['in use', 'resumed']), outputs
    assert ledger.read_text().count('recovered 2') == 1 and ledger.read_text().count('recovered 3') == 1


# --- defects -------------------------------------------------------------------------------------------------------

async def test_an_edit_that_does_not_fit_the_tool_is_refused_and_nothing_is_recorded(store_url: str) -> None:
    ledger = Ledger()
    await run_plan(PARKS, ledger.tools(), store=store_url, run_id='e', review_handler=CallbackReviewHandler(later))
    with pytest.raises(DecisionError, match=r"(?s)The edited arguments for step 'mail' of plan run 'e' do not fit "
                                            r"tool 'send'; nothing was recorded:\n  - arguments.to: Field required.\n"
                                            r"  - arguments.too: Unexpected argument, got \"grace\". Tool 'send' "
                                            r"takes: to\.\nFix them and decide again"):
        await decide('e', 'mail', ReviewDecision.edit({'too': 'grace'}), store=store_url, tools=ledger.tools())
    with pytest.raises(DecisionError, match=r'arguments.to: Input should be a valid string, got 5'):
        await decide('e', 'mail', ReviewDecision.edit('{"to": 5}'), store=store_url, tools=ledger.tools())
    with pytest.raises(UserError, match=r"have no tool 'send' \(they have effect\)"):
        await decide('e', 'mail', ReviewDecision.edit({'to': 'grace'}), store=store_url, tools=ledger.tools()[:1])
    (listed,) = (await list_runs(store_url)).runs
    assert listed.waiting == 1  # nothing was recorded
    await decide('e', 'mail', ReviewDecision.edit({'to': 'grace'}), store=store_url, tools=ledger.tools())
    assert (await resume_plan('e', ledger.tools(), store=store_url)).ok
    assert ledger.calls == ['who', 'send grace', 'log']


async def test_a_decision_for_a_step_not_in_the_plan_lists_the_waiting_steps(store_url: str) -> None:
    await run_plan(PARKS, Ledger().tools(), store=store_url, run_id='m', review_handler=CallbackReviewHandler(later))
    with pytest.raises(DecisionError, match=r"Plan run 'm' has no step 'mial': it is not in the plan\. Its steps "
                                            r'waiting for a decision: mail\.$'):
        await decide('m', 'mial', ReviewDecision.approve(), store=store_url)
    with pytest.raises(DecisionError, match=r"Step 'log' of plan run 'm' has not started: only a parked step takes a "
                                            r'decision\. Its steps waiting for a decision: mail\.$'):
        await decide('m', 'log', ReviewDecision.approve(), store=store_url)


async def test_a_resume_refused_for_missing_tools_leaves_a_suspended_run_suspended(store_url: str) -> None:
    ledger = Ledger()
    await run_plan(PARKS, ledger.tools(), store=store_url, run_id='s', review_handler=CallbackReviewHandler(later))
    with pytest.raises(PlanValidationError, match="Unknown tool 'send'"):
        await resume_plan('s', ledger.tools()[:1], store=store_url)
    (listed,) = (await list_runs(store_url)).runs
    assert (listed.status, listed.owner, listed.waiting) == ('suspended', None, 1)


async def test_a_step_stopped_by_the_runs_own_timeout_is_not_called_a_crash(store_url: str) -> None:
    @tool
    async def slow() -> str:
        """Longer than the run may take."""
        await anyio.sleep(10)
        return 'late'

    run = await run_plan({'steps': [{'id': 's', 'tool': 'slow', 'arguments': {}}]}, [slow], store=store_url,
                         run_id='t', timeout=0.2)
    assert run.step('s').status == 'cancelled'
    again = await resume_plan('t', [slow], store=store_url)
    assert again.step('s').status == 'parked'
    assert 'after a crash' not in (again.step('s').error or '')
    assert 'timed out' in (again.step('s').error or '')


async def test_the_crash_question_names_when_the_step_started(store_url: str) -> None:
    @tool
    async def slow() -> str:
        """Longer than the run may take."""
        await anyio.sleep(10)
        return 'late'

    before = time.time()
    await run_plan({'steps': [{'id': 's', 'tool': 'slow', 'arguments': {}}]}, [slow], store=store_url,
                   run_id='t', timeout=1.0)
    again = await resume_plan('t', [slow], store=store_url)
    started = again.step('s').error or ''
    rows = sql(store_url, "SELECT at FROM toolweave_transitions WHERE run_id = 't' AND status = 'running'")
    assert rows and rows[0][0] - before < 0.5
    from datetime import UTC, datetime
    assert datetime.fromtimestamp(rows[0][0], UTC).strftime('%H:%M:%S') in started
    cancelled = sql(store_url, "SELECT at FROM toolweave_transitions WHERE run_id = 't' AND status = 'cancelled'")
    assert datetime.fromtimestamp(cancelled[0][0], UTC).strftime('%H:%M:%S') not in started


def test_a_worker_with_recover_goes_on_with_a_run_whose_coordinator_was_killed(
        postgres_url: str, tmp_path: Path) -> None:
    pytest.importorskip('dbos')
    from collections import Counter

    from benchmarks._worker_tools import ledger_lines, plan
    from benchmarks._workers import worker_processes

    from toolweave.plan.durable import list_runs_sync

    ledger = tmp_path / 'ledger'
    plan_file = tmp_path / 'plan.json'
    plan_file.write_text(json.dumps(plan(200)))
    root = Path(__file__).parent.parent
    with worker_processes(postgres_url, 1, ledger=ledger, tool_seconds=0.01, recover=0.5):
        coordinator = subprocess.Popen(
            [sys.executable, '-c', 'from toolweave.cli import main; main()', 'run', str(plan_file), '--tools',
             'benchmarks._worker_tools:TOOLS', '--store', postgres_url, '--run-id', 'cut', '--workers', '--json'],
            cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while sum(kind == 'E' for kind, _, _ in ledger_lines(ledger)) < 40 and coordinator.poll() is None:
            time.sleep(0.002)
        coordinator.send_signal(signal.SIGKILL)
        coordinator.wait()
        deadline = time.monotonic() + 90
        status = None
        while time.monotonic() < deadline:
            (run,) = list_runs_sync(postgres_url).runs
            status = run.status
            if status == 'finished':
                break
            time.sleep(0.2)
    assert status == 'finished'
    runs = Counter(step for kind, step, _ in ledger_lines(ledger) if kind == 'E')
    assert set(runs) == {f's{i}' for i in range(200)} and set(runs.values()) == {1}  # every step ran exactly once
