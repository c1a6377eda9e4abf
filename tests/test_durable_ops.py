"""Operating durable runs through the public API, on SQLite and on a real PostgreSQL server: listing (pages,
filters, crashed runs, an older store upgraded), cancelling, pruning and retention, recovering crashed runs, and
the defects around decisions and resumes."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolweave import CallbackReviewHandler, ReviewDecision, ReviewRequest, tool
from toolweave.exceptions import (
    ApprovalPending,
    PlanStoreError,
    UserError,
)
from toolweave.plan import PlanTool, run_plan
from toolweave.plan.durable import (
    cancel_run,
    decide,
    list_runs,
    open_store,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=['sqlite', 'postgres'])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == 'sqlite':
        yield f'sqlite:///{tmp_path}/runs.db'
    else:
        yield request.getfixturevalue('postgres_url')


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
