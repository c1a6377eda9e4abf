"""Durable plans through the public API, on SQLite and on a real PostgreSQL server: journal, resume, parking,
decisions, and every bad input (unknown run, another plan under the same id, a store that cannot be opened, a
decision for a step that is not parked, a database that goes away mid-run)."""

from __future__ import annotations

import json
import os
import random
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from benchmarks._crash import run_trial
from benchmarks._postgres import PostgresServer

from toolweave import CallbackReviewHandler, ReviewDecision, ReviewRequest, tool
from toolweave.exceptions import (
    ApprovalPending,
    DecisionError,
    PlanMismatchError,
    PlanStoreError,
    PlanValidationError,
    RunInUseError,
    UnknownRunError,
    UserError,
)
from toolweave.plan import run_plan
from toolweave.plan.durable import PlanStore, SqliteStore, decide, open_store, resume_plan

pytestmark = pytest.mark.anyio


class Ledger:
    """Tools that write what they did: how many times each step's body ran."""

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


def chain(n: int) -> dict[str, Any]:
    steps = [{'id': 's0', 'tool': 'effect', 'arguments': {'step': 's0'}}]
    steps += [{'id': f's{i}', 'tool': 'effect', 'arguments': {'step': f's{i}', 'inputs': [f'$ref:s{i - 1}']}}
              for i in range(1, n)]
    return {'steps': steps}


def statuses(store: PlanStore, run_id: str) -> list[tuple[str, str]]:
    return [(t.step_id, t.status) for t in store.load(run_id).transitions]


async def test_a_durable_run_records_every_transition_and_finishes(store_url: str) -> None:
    ledger = Ledger()
    run = await run_plan(chain(3), ledger.tools(), store=store_url, run_id='r1')
    assert run.ok and run.run_id == 'r1'
    store = open_store(store_url)
    try:
        assert statuses(store, 'r1') == [('s0', 'ready'), ('s0', 'running'), ('s0', 'succeeded'), ('s1', 'ready'),
                                         ('s1', 'running'), ('s1', 'succeeded'), ('s2', 'ready'), ('s2', 'running'),
                                         ('s2', 'succeeded')]
        (info,) = store.runs()
        assert (info.run_id, info.status, info.owner) == ('r1', 'finished', None)
    finally:
        store.close()


async def test_running_the_same_run_id_again_runs_nothing_that_finished(store_url: str) -> None:
    ledger = Ledger()
    first = await run_plan(chain(3), ledger.tools(), store=store_url, run_id='again')
    second = await run_plan(chain(3), ledger.tools(), store=store_url, run_id='again')
    assert ledger.calls == ['s0', 's1', 's2']
    assert second.ok and second.summary == first.summary
    assert second.step('s2').arguments == {'step': 's2', 'inputs': ['did s1']}


async def test_a_run_id_with_another_plan_is_refused(store_url: str) -> None:
    ledger = Ledger()
    await run_plan(chain(2), ledger.tools(), store=store_url, run_id='same')
    with pytest.raises(PlanMismatchError, match=r"Plan run 'same' in .* was started with another plan"):
        await run_plan(chain(3), ledger.tools(), store=store_url, run_id='same')
    assert ledger.calls == ['s0', 's1']


async def test_resuming_an_unknown_run_names_the_runs_there(store_url: str) -> None:
    await run_plan(chain(1), Ledger().tools(), store=store_url, run_id='known')
    with pytest.raises(UnknownRunError, match=r"No plan run 'nope' in .*\. Recent runs: known\."):
        await resume_plan('nope', Ledger().tools(), store=store_url)


async def test_a_step_whose_reviewer_cannot_answer_parks_and_the_rest_runs_on(store_url: str) -> None:
    ledger = Ledger()

    def later(request: ReviewRequest) -> ReviewDecision:
        raise ApprovalPending('Ada decides in the web app')

    plan = {'steps': [{'id': 'who', 'tool': 'effect', 'arguments': {'step': 'who'}},
                      {'id': 'mail', 'tool': 'send', 'arguments': {'to': '$ref:who'}},
                      {'id': 'log', 'tool': 'effect', 'arguments': {'step': 'log', 'inputs': ['$ref:mail']}},
                      {'id': 'other', 'tool': 'effect', 'arguments': {'step': 'other'}}]}
    run = await run_plan(plan, ledger.tools(), store=store_url, run_id='p', review_handler=CallbackReviewHandler(later))
    assert [(r.id, r.status) for r in run.steps] == [('who', 'succeeded'), ('mail', 'parked'), ('log', 'pending'),
                                                      ('other', 'succeeded')]
    assert (run.parked, run.waiting, run.suspended) == (1, 1, True)
    assert run.summary.startswith('Plan suspended: 1 step waits for a decision (run p); 1 more wait behind them.')
    assert 'mail: Waiting for approval: Ada decides in the web app' in run.summary
    # Without a decision, a resume parks it again and runs nothing twice.
    again = await resume_plan('p', ledger.tools(), store=store_url)
    assert again.step('mail').status == 'parked' and ledger.calls == ['who', 'other']
    await decide('p', 'mail', ReviewDecision.edit({'to': 'grace'}), store=store_url)
    done = await resume_plan('p', ledger.tools(), store=store_url)
    assert done.ok
    assert ledger.calls == ['who', 'other', 'send grace', 'log']
    assert [a.outcome for a in done.approvals] == ['edited']  # the stored decision, applied without asking
    store = open_store(store_url)
    try:
        assert store.runs()[0].status == 'finished'
    finally:
        store.close()


async def test_a_plan_with_for_each_select_and_when_parks_and_resumes_with_its_forms_intact(store_url: str) -> None:
    ledger = Ledger()

    def later(request: ReviewRequest) -> ReviewDecision:
        raise ApprovalPending('Ada decides later')

    steps: list[dict[str, Any]] = [
             {'id': 'who', 'tool': 'effect', 'for_each': ['ada', 'bob'], 'arguments': {'step': '$item'}},
             {'id': 'names', 'from': '$ref:who', 'select': '[*]'},
             {'id': 'mail', 'tool': 'send', 'for_each': '$ref:names', 'arguments': {'to': '$item'},
              'when': {'from': '$ref:names', 'select': 'length(@) > `1`'}},
             {'id': 'never', 'tool': 'effect', 'arguments': {'step': 'never'},
              'when': {'from': '$ref:names', 'select': 'length(@) > `5`'}}]
    plan = {'steps': steps, 'output_steps': ['names', 'mail', 'never']}
    run = await run_plan(plan, ledger.tools(), store=store_url, run_id='forms',
                         review_handler=CallbackReviewHandler(later))
    assert run.step('mail').status == 'parked' and run.step('never').status == 'skipped'
    await decide('forms', 'mail', ReviewDecision.approve(), store=store_url)
    done = await resume_plan('forms', ledger.tools(), store=store_url)
    assert done.ok and done.step('names').value == ['did ada', 'did bob']
    assert done.step('mail').value == ['sent to did ada', 'sent to did bob']
    assert ledger.calls == ['ada', 'bob', 'send did ada', 'send did bob']
    # The stored plan keeps its forms: the same plan is the same run, another condition makes another plan.
    again = await run_plan(plan, ledger.tools(), store=store_url, run_id='forms')
    assert again.summary == done.summary and len(ledger.calls) == 4
    other = {'steps': [*steps[:3], {**steps[3], 'when': {'from': '$ref:names', 'select': 'length(@) > `6`'}}]}
    with pytest.raises(PlanMismatchError):
        await run_plan(other, ledger.tools(), store=store_url, run_id='forms')


async def test_a_decision_for_a_step_that_is_not_parked_is_refused(store_url: str) -> None:
    ledger = Ledger()
    await run_plan(chain(2), ledger.tools(), store=store_url, run_id='d')
    with pytest.raises(DecisionError, match=r"Step 's1' of plan run 'd' is succeeded: only a parked step"):
        await decide('d', 's1', ReviewDecision.approve(), store=store_url)
    with pytest.raises(DecisionError, match=r"Plan run 'd' has no step 'zz': it is not in the plan"):
        await decide('d', 'zz', ReviewDecision.approve(), store=store_url)
    with pytest.raises(UnknownRunError):
        await decide('nope', 's1', ReviewDecision.approve(), store=store_url)
    store = open_store(store_url)
    try:
        assert [s for _, s in statuses(store, 'd')].count('decided') == 0
    finally:
        store.close()


async def test_a_started_step_is_run_again_after_a_crash_only_if_its_tool_says_it_may(store_url: str) -> None:
    calls: list[str] = []

    @tool
    def charge(amount: int) -> str:
        """Charge a card."""
        calls.append(f'charge {amount}')
        return 'charged'

    @tool
    def price() -> int:
        """Read a price."""
        calls.append('price')
        return 5

    reads = price.with_definition(price.definition.with_metadata(read_only=True))
    plan = {'steps': [{'id': 'p', 'tool': 'price', 'arguments': {}},
                      {'id': 'c', 'tool': 'charge', 'arguments': {'amount': 3}}]}
    store = open_store(store_url)
    try:
        await run_plan(plan, [charge, reads], store=store, run_id='crash')
        # What the store holds when a process dies with both steps started and neither finished:
        _forget_ends(store, store_url, 'crash')
        calls.clear()
        run = await resume_plan('crash', [charge, reads], store=store)
        assert calls == ['price']
        assert run.step('c').status == 'parked'
        assert 'Unknown after a crash' in (run.step('c').error or '')
        assert "Its tool 'charge' is not marked idempotent or read-only" in (run.step('c').error or '')
        await decide('crash', 'c', ReviewDecision.approve(), store=store)
        run = await resume_plan('crash', [charge, reads], store=store)
        assert run.ok and calls == ['price', 'charge 3']
    finally:
        store.close()


def _forget_ends(store: PlanStore, url: str, run_id: str) -> None:
    """Delete a run's `succeeded` rows and mark it held by a process that no longer exists, as a SIGKILL between
    the steps' starts and their ends would leave it (the crash tests do the real thing in a child process)."""
    dead = f'{os.uname().nodename}:999999999:gone'
    if url.startswith('sqlite'):
        lite = sqlite3.connect(url.removeprefix('sqlite:///'))
        with lite:
            lite.execute("DELETE FROM toolweave_transitions WHERE run_id = ? AND status = 'succeeded'", (run_id,))
            lite.execute("UPDATE toolweave_runs SET owner = ?, status = 'running' WHERE run_id = ?", (dead, run_id))
        lite.close()
    else:
        import psycopg

        with psycopg.connect(url, autocommit=True) as db:
            db.execute("DELETE FROM toolweave_transitions WHERE run_id = %s AND status = 'succeeded'", (run_id,))
            db.execute("UPDATE toolweave_runs SET owner = %s, status = 'running' WHERE run_id = %s", (dead, run_id))


async def test_a_run_held_by_a_live_process_is_not_taken(store_url: str) -> None:
    started = anyio.Event()
    release = anyio.Event()

    @tool
    async def slow() -> str:
        """Wait."""
        started.set()
        await release.wait()
        return 'ok'

    plan = {'steps': [{'id': 'a', 'tool': 'slow', 'arguments': {}}]}
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: run_plan(plan, [slow], store=store_url, run_id='busy'))
        await started.wait()
        with pytest.raises(RunInUseError, match=r"Plan run 'busy' in .* is being run by .*:\d+:"):
            await resume_plan('busy', [slow], store=store_url)
        release.set()


async def test_a_store_that_cannot_be_opened_says_why(tmp_path: Path) -> None:
    with pytest.raises(PlanStoreError, match=r'Cannot open plan store sqlite:///.*/missing/runs.db: unable to open '
                                             r'database file\. Check that the folder .* exists'):
        await run_plan(chain(1), Ledger().tools(), store=f'sqlite:///{tmp_path}/missing/runs.db')
    not_db = tmp_path / 'text.db'
    not_db.write_text('this is not a database' * 100)
    with pytest.raises(PlanStoreError, match='Is it a SQLite database that this user may write'):
        open_store(not_db)
    with pytest.raises(PlanStoreError, match='unknown kind of store'):
        open_store('mysql://localhost/x')
    with pytest.raises(PlanStoreError, match='the SQLite options are'):
        open_store(f'sqlite:///{tmp_path}/x.db?mode=ro')
    with pytest.raises(PlanStoreError, match=r'Cannot open plan store postgresql://tw:\*\*\*@127\.0\.0\.1:1/db\?'
                                             'connect_timeout=2: .*Check that the server is running'):
        open_store('postgresql://tw:secret@127.0.0.1:1/db?connect_timeout=2')


async def test_bad_run_ids_and_a_run_id_without_a_store_are_developer_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match='run_plan got run_id=.x. without a store'):
        await run_plan(chain(1), Ledger().tools(), run_id='x')
    with pytest.raises(UserError, match='run_id must be 1 to 200 characters'):
        await run_plan(chain(1), Ledger().tools(), store=tmp_path / 'r.db', run_id='bad id')


async def test_resuming_with_tools_that_do_not_fit_the_stored_plan_is_a_validation_error(store_url: str) -> None:
    await run_plan(chain(2), Ledger().tools(), store=store_url, run_id='fit')
    @tool
    def other() -> str:
        """Not what the plan calls."""
        return ''

    with pytest.raises(PlanValidationError, match="the stored plan of run 'fit' does not fit these tools: .*Unknown "
                                                  "tool 'effect'"):
        await resume_plan('fit', [other], store=store_url)
    # The failed resume gave the run back: a resume with the right tools is not refused as in use.
    assert (await resume_plan('fit', Ledger().tools(), store=store_url)).ok


async def test_big_outputs_are_stored_once(tmp_path: Path) -> None:
    page = 'x' * 100_000

    @tool
    def fetch(url: str) -> str:
        """Fetch a page."""
        return page

    plan = {'steps': [{'id': f'f{i}', 'tool': 'fetch', 'arguments': {'url': 'same'}} for i in range(5)]}
    await run_plan(plan, [fetch], store=tmp_path / 'runs.db', run_id='big')
    db = sqlite3.connect(tmp_path / 'runs.db')
    assert db.execute('SELECT count(*), sum(length(data)) FROM toolweave_blobs').fetchone() == (1, 100_000)
    db.close()
    run = await resume_plan('big', [fetch], store=tmp_path / 'runs.db')
    assert run.step('f3').output == page


async def test_values_read_back_as_the_json_they_were_stored_as(store_url: str) -> None:
    @tool
    def data() -> dict[str, Any]:
        """Structured."""
        return {'n': 1, 'list': [1, 'two', None]}

    @tool
    def text() -> str:
        """Text."""
        return '[1, 2'

    @tool
    def use(a: Any, b: Any) -> str:
        """Reads both."""
        return json.dumps([a, b])

    plan = {'steps': [{'id': 'd', 'tool': 'data', 'arguments': {}}, {'id': 't', 'tool': 'text', 'arguments': {}},
                      {'id': 'u', 'tool': 'use', 'arguments': {'a': '$ref:d.list', 'b': '$ref:t'}}]}
    first = await run_plan(plan, [data, text, use], store=store_url, run_id='v')
    again = await resume_plan('v', [data, text, use], store=store_url)
    assert again.summary == first.summary
    assert again.step('d').value == {'n': 1, 'list': [1, 'two', None]}
    assert again.step('u').arguments == {'a': [1, 'two', None], 'b': '[1, 2'}


@pytest.mark.parametrize('trials', [3])
def test_killed_runs_resume_without_running_a_finished_step_again(store_url: str, tmp_path: Path, trials: int) -> None:
    # A few real SIGKILLs at random points (the benchmark runs 100 per store).
    rng = random.Random(7)
    for index in range(trials):
        trial = run_trial(store_url, tmp_path, f'trial{index}', 40, rng, kill_within=0.15)
        assert trial.rerun_finished == 0, trial
        assert trial.rerun_effects == 0, trial


def test_paused_holders_whose_runs_were_taken_over_stop_without_running_a_step_twice(
        store_url: str, tmp_path: Path) -> None:
    # SIGSTOP at random points (inside a write, between writes, while a tool runs) under a 1 s lease; this process
    # takes the run over, then wakes the holder, which must stop at its next write (the benchmark runs 30 a store).
    rng = random.Random(11)
    for index in range(4):
        trial = run_trial(store_url, tmp_path, f'paused{index}', 40, rng, kill_within=0.1, pause_for=1.0)
        assert trial.rerun_finished == 0 and trial.rerun_effects == 0, trial
        if trial.extra.get('holder_exit'):  # it did not end well: only because it lost its run (run_trial checks)
            assert trial.extra['holder_lost_run'], trial
        # (A holder paused after its last write, or before it began, or inside SQLite's lock, ends well.)


def test_a_database_that_goes_away_mid_run_stops_the_run_and_the_journal_stays_consistent(
        postgres_server: PostgresServer, postgres_url: str) -> None:
    ledger: list[str] = []

    @tool
    def step(n: int, after: int = -1) -> int:
        """Stops the database at step 5."""
        ledger.append(f's{n}')
        if n == 5:
            postgres_server.stop('immediate')
        return n

    plan = {'steps': [{'id': 's0', 'tool': 'step', 'arguments': {'n': 0}}] + [
        {'id': f's{i}', 'tool': 'step', 'arguments': {'n': i, 'after': f'$ref:s{i - 1}'}} for i in range(1, 10)]}
    step_tool = step
    with pytest.raises(PlanStoreError, match=r'failed to record steps of run .gone.: .*\(tried \d+ times over \d s\)'
                                             r'\. The run stopped: a step cannot start unless its start is recorded'):
        anyio.run(lambda: run_plan(plan, [step_tool], store=f'{postgres_url}&retry=1', run_id='gone'))
    assert ledger == [f's{i}' for i in range(6)]  # nothing started after the store failed
    postgres_server.start()
    store = open_store(postgres_url)
    try:
        last: dict[str, str] = {}
        for t in store.load('gone').transitions:
            last[t.step_id] = t.status
        assert last['s4'] == 'succeeded' and last['s5'] == 'running' and 's6' not in last
    finally:
        store.close()
    ledger.clear()
    step_ok = step
    run = anyio.run(lambda: resume_plan('gone', [step_ok], store=postgres_url))
    assert run.step('s5').status == 'parked' and ledger == []  # it had started: unknown after the crash


def test_sqlite_stores_use_write_ahead_logging(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / 'wal.db')
    assert store.wal
    store.close()
