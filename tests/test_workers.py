"""Plan steps on worker processes (DBOS), against a real PostgreSQL server and SQLite files: a worker killed with
SIGKILL mid-run, exactly-once of finished steps, parking of side effects a dead worker had started, and the bad
inputs (a worker without a step's tool, the database going away, a store that cannot be opened)."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from functools import partial
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from benchmarks._postgres import PostgresServer
from benchmarks._worker_tools import PLAN_WIDTH, TOOLS, ledger_lines, plan
from benchmarks._workers import WorkerProcess, worker_processes

from toolweave import CallbackReviewHandler, ReviewDecision, ReviewRequest, tool
from toolweave.exceptions import PlanStoreError, PlanValidationError, UserError
from toolweave.plan import PlanRun, run_plan
from toolweave.plan.durable import decide, open_store, resolve_step_sync, resume_plan
from toolweave.plan.workers import Worker

pytest.importorskip('dbos')


class Killer(threading.Thread):
    """Watches the ledger and kills `victim` with SIGKILL once it has both kinds of step started and not ended
    (and at least `after` effects are done overall): so the kill lands while it runs a side effect and a read."""

    def __init__(self, ledger: Path, victim: WorkerProcess, after: int) -> None:
        super().__init__(daemon=True)
        self.ledger, self.victim, self.after = ledger, victim, after
        self.killed_at: list[tuple[str, str, int]] | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.001):
            lines = ledger_lines(self.ledger)
            running = Counter((step, pid) for kind, step, pid in lines if kind == 'S')
            running.subtract((step, pid) for kind, step, pid in lines if kind == 'E')
            open_steps = {int(step[1:]) % 3 == 0 for (step, pid), n in running.items() if n and pid == self.victim.pid}
            if sum(kind == 'E' for kind, _, _ in lines) >= self.after and open_steps == {True, False}:
                self.victim.kill()
                self.killed_at = lines
                return


def test_a_worker_killed_mid_run_runs_no_finished_step_again_and_parks_the_effects_it_had_started(
        postgres_url: str, tmp_path: Path) -> None:
    ledger = tmp_path / 'ledger'
    steps = 1000
    # The victim's tools take 0.3 s, the others' 0.01 s: when the kill lands, the steps it was seen running still run.
    with worker_processes(postgres_url, 2, ledger=ledger, tool_seconds=0.01), worker_processes(
            postgres_url, 1, ledger=ledger, tool_seconds=0.3) as (victim,):
        killer = Killer(ledger, victim, after=200)
        killer.start()
        try:
            run = anyio.run(lambda: run_plan(plan(steps), TOOLS, store=postgres_url, run_id='big', workers=True))
        finally:
            killer.stop.set()
        assert killer.killed_at is not None, 'the victim was never seen running both kinds of step'
        lines = ledger_lines(ledger)  # every line of the victim's was written before the kill
        started_on_victim = {step for kind, step, pid in lines if kind == 'S' and pid == victim.pid}
        ended_on_victim = {step for kind, step, pid in lines if kind == 'E' and pid == victim.pid}
        cut_short = started_on_victim - ended_on_victim  # the tool was running when the kill landed
        effects = Counter(step for kind, step, _ in lines if kind == 'E')
        status = {record.id: record.status for record in run.steps}
        read_only = {f's{i}' for i in range(0, steps, 3)}

        # Every step that ended on a worker ran exactly once; only read-only steps may have run twice.
        assert all(n == 1 for step, n in effects.items() if step not in read_only), effects.most_common(3)
        assert {step for step, n in effects.items() if n > 1} <= read_only & started_on_victim
        # The side effects the dead worker had started are parked, not repeated; its reads were run again elsewhere.
        parked = {step for step, state in status.items() if state == 'parked'}
        # (a step can also park with no `S` line: the kill landed after DBOS recorded its start, before the tool's
        # first line; it is still one the victim had started, which its message says)
        assert cut_short - read_only <= parked and not parked & read_only
        assert cut_short & read_only and cut_short - read_only  # the kill landed while both kinds ran
        for step in cut_short & read_only:
            assert status[step] == 'succeeded' and run.step(step).value['pid'] != victim.pid
        for step in parked:
            error = run.step(step).error or ''
            assert 'Unknown after a crash' in error and f':{victim.pid}:' in error
            assert {pid for kind, name, pid in lines if name == step} <= {victim.pid}  # not run anywhere else
        # The rest of the plan completed on the other workers: only the chains behind a parked step wait.
        behind = {f's{i}' for i in range(steps) for p in parked
                  if i > int(p[1:]) and (i - int(p[1:])) % PLAN_WIDTH == 0}
        assert {step for step, state in status.items() if state != 'succeeded'} == parked | behind
        assert all(status[step] == 'pending' for step in behind) and run.suspended

        # A person looks at the ledger: a parked effect that happened is rejected, one that did not is approved.
        async def decide_and_resume() -> PlanRun:
            for step in parked:
                done = effects[step] > 0
                await decide('big', step, ReviewDecision.reject('it happened') if done else ReviewDecision.approve(),
                             store=postgres_url)
            return await resume_plan('big', TOOLS, store=postgres_url)

        again = anyio.run(decide_and_resume)
    final = Counter(step for kind, step, _ in ledger_lines(ledger) if kind == 'E')
    assert all(n == 1 for step, n in final.items() if step not in read_only)
    assert {step for step in parked if effects[step] == 0} <= {step for step, n in final.items() if n == 1}
    rejected = {step for step in parked if effects[step]}
    assert {r.id for r in again.steps if r.status == 'failed'} == rejected
    assert all(r.status in ('succeeded', 'failed', 'skipped') for r in again.steps) and not again.suspended
    assert len(final) == steps - sum(1 for r in again.steps if r.status == 'skipped')


def test_a_worker_without_a_step_tool_is_named_before_anything_runs(postgres_url: str, tmp_path: Path) -> None:
    ledger = tmp_path / 'ledger'
    with worker_processes(postgres_url, 1, tools='benchmarks._worker_tools:WITHOUT_LOOKUP', ledger=ledger) as workers:
        with pytest.raises(PlanValidationError) as caught:
            anyio.run(lambda: run_plan(plan(10), TOOLS, store=postgres_url, run_id='short', workers=True))
        (problem,) = caught.value.problems
        assert f':{workers[0].pid}:' in problem
        assert problem.startswith("step 's0' calls tool 'lookup', which worker ") and 'it runs effect' in problem
        assert 'toolweave worker --tools' in problem
        assert workers[0].stop() == 0  # SIGTERM: the worker drains and exits cleanly
    assert ledger_lines(ledger) == []  # nothing ran


def test_a_worker_that_joins_without_a_step_tool_fails_that_step_and_says_why(tmp_path: Path) -> None:
    store = f'sqlite:///{tmp_path}/runs.db'

    async def main() -> PlanRun:
        async with anyio.create_task_group() as group:  # no worker yet: the steps wait in the queue
            result: list[PlanRun] = []
            finished = anyio.Event()

            async def coordinate() -> None:
                result.append(await run_plan(plan(4), TOOLS, store=store, run_id='late', workers=True))
                finished.set()

            group.start_soon(coordinate)
            await anyio.sleep(0.5)
            worker = Worker(store, TOOLS[:1], concurrency=2)  # `effect` only
            await anyio.to_thread.run_sync(worker.start)  # it blocks: DBOS refuses to start from an event loop
            try:
                await finished.wait()
            finally:
                await anyio.to_thread.run_sync(worker.stop)
        return result[0]

    run = anyio.run(main)
    assert [r.status for r in run.steps] == ['failed', 'succeeded', 'succeeded', 'failed']
    error = run.step('s0').error or ''
    assert "has no tool 'lookup'; it runs effect" in error and error.startswith('Worker ')


def test_a_database_that_goes_away_stops_the_run_and_a_resume_finishes_it_once(
        postgres_server: PostgresServer, postgres_url: str, tmp_path: Path) -> None:
    ledger = tmp_path / 'ledger'
    with worker_processes(postgres_url, 2, ledger=ledger, tool_seconds=0.01):
        stopped = threading.Event()

        def stop_database() -> None:
            while sum(kind == 'E' for kind, _, _ in ledger_lines(ledger)) < 60:
                time.sleep(0.002)
            postgres_server.stop('immediate')
            stopped.set()

        threading.Thread(target=stop_database, daemon=True).start()
        try:
            with pytest.raises(PlanStoreError) as caught:
                # retry=1: the run gives up on the store after a second rather than waiting out the outage
                anyio.run(lambda: run_plan(plan(300), TOOLS, store=f'{postgres_url}&retry=1', run_id='away',
                                           workers=True))
        finally:
            assert stopped.wait(10)
            postgres_server.start()  # the workers wait for it (DBOS retries), then go on
        assert 'The run stopped' in str(caught.value) and 'resume the run once' in str(caught.value).lower()
        run = anyio.run(lambda: resume_plan('away', TOOLS, store=postgres_url))
        # A step whose workflow the outage cut off while it wrote its outcome may have had its effect: it parks,
        # unknown after a crash, for a person. Here the person reads the ledger and resolves each as done.
        parked = [r for r in run.steps if r.status == 'parked']
        assert all('Unknown after a crash' in (r.error or '') for r in parked), [r.error for r in parked]
        done = {step for kind, step, _ in ledger_lines(ledger) if kind == 'E'}
        for record in parked:
            if record.id in done:
                resolve_step_sync('away', record.id, {'step': record.id}, store=postgres_url, reason='in the ledger')
            else:
                anyio.run(partial(decide, 'away', record.id, ReviewDecision.approve(), store=postgres_url))
        if parked:
            run = anyio.run(lambda: resume_plan('away', TOOLS, store=postgres_url))
    effects = Counter(step for kind, step, _ in ledger_lines(ledger) if kind == 'E')
    assert all(r.status == 'succeeded' for r in run.steps), [(r.id, r.error) for r in run.steps if r.error][:3]
    assert set(effects) == {f's{i}' for i in range(300)}
    assert all(n == 1 for step, n in effects.items() if int(step[1:]) % 3)  # no side effect ran twice


def test_a_worker_on_a_store_that_cannot_be_opened_says_why(tmp_path: Path) -> None:
    for store, reason in [(f'sqlite:///{tmp_path}/missing/runs.db', 'Check that the folder'),
                          ('mysql://host/db', 'unknown kind of store'),
                          ('postgresql://nobody@127.0.0.1:1/db', 'Check that the server is running')]:
        with pytest.raises(PlanStoreError, match=reason):
            Worker(store, TOOLS).start()
        done = subprocess.run([sys.executable, '-c', 'from toolweave.cli import main; main()', 'worker', '--store',
                               store, '--tools', 'benchmarks._worker_tools:TOOLS'],
                              capture_output=True, text=True, timeout=60, cwd=Path(__file__).parent.parent)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith('toolweave worker: ') and reason in done.stderr


def test_bad_worker_settings_are_developer_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match='without a store'):
        anyio.run(lambda: run_plan(plan(1), TOOLS, workers=True))
    with pytest.raises(UserError, match='workers must be'):
        anyio.run(lambda: run_plan(plan(1), TOOLS, store=tmp_path / 'r.db', workers=''))
    with pytest.raises(UserError, match='concurrency must be an integer >= 1, got 0'):
        Worker(tmp_path / 'r.db', TOOLS, concurrency=0)
    with pytest.raises(UserError, match='queue must be a name'):
        Worker(tmp_path / 'r.db', TOOLS, queue='_dbos_internal')
    with Worker(tmp_path / 'r.db', TOOLS), pytest.raises(UserError, match='already runs in this process'):
        Worker(tmp_path / 'r.db', TOOLS).start()


def test_importing_toolweave_does_not_import_dbos() -> None:
    code = ('import sys, toolweave, toolweave.plan, toolweave.plan.durable, toolweave.plan.workers; '
            "print(sorted(m for m in ('dbos', 'sqlalchemy') if m in sys.modules))")
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == '[]'


def test_a_coordinator_killed_mid_run_resumes_from_the_cli_without_running_a_step_twice(
        postgres_url: str, tmp_path: Path) -> None:
    ledger = tmp_path / 'ledger'
    plan_file = tmp_path / 'plan.json'
    plan_file.write_text(json.dumps(plan(300)))
    cli = [sys.executable, '-c', 'from toolweave.cli import main; main()']
    tools = ['--tools', 'benchmarks._worker_tools:TOOLS', '--store', postgres_url]
    root = Path(__file__).parent.parent
    with worker_processes(postgres_url, 2, ledger=ledger, tool_seconds=0.01) as workers:
        coordinator = subprocess.Popen([*cli, 'run', str(plan_file), *tools, '--run-id', 'cut', '--workers', '--json'],
                                       cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        while sum(kind == 'E' for kind, _, _ in ledger_lines(ledger)) < 60 and coordinator.poll() is None:
            time.sleep(0.002)
        coordinator.send_signal(signal.SIGKILL)
        coordinator.wait()
        journal = open_store(postgres_url)
        try:
            last = {t.step_id: t.status for t in journal.load('cut').transitions if t.status != 'ready'}
        finally:
            journal.close()
        assert 'running' in last.values() and len(last) < 300  # it died with steps sent and not heard back
        resumed = subprocess.run([*cli, 'runs', 'resume', 'cut', *tools, '--json'], cwd=root, capture_output=True,
                                 text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    assert report['succeeded'] == 300 and report['parked'] == 0
    runs = Counter(step for kind, step, _ in ledger_lines(ledger) if kind == 'E')
    assert set(runs) == {f's{i}' for i in range(300)} and set(runs.values()) == {1}  # every step ran exactly once
    assert {pid for _, _, pid in ledger_lines(ledger)} <= {worker.pid for worker in workers}  # the resume sent them too


@pytest.mark.parametrize('backend', ['asyncio', 'trio'])
def test_review_happens_before_a_step_is_sent_and_workers_run_the_tool_body(tmp_path: Path, backend: str) -> None:
    store = f'sqlite:///{tmp_path}/runs.db'
    seen: list[str] = []

    @tool(requires_approval=True)
    async def send(to: str) -> str:
        """Send a message (gated)."""
        seen.append(threading.current_thread().name)
        return f'sent to {to}'

    plan_data = {'steps': [{'id': 'ada', 'tool': 'send', 'arguments': {'to': 'ada'}},
                           {'id': 'bob', 'tool': 'send', 'arguments': {'to': 'bob'}}]}

    def review(request: ReviewRequest) -> ReviewDecision:
        return ReviewDecision.approve() if 'ada' in str(request.arguments) else ReviewDecision.reject('not Bob')

    with Worker(store, [send], concurrency=2):
        run = anyio.run(lambda: run_plan(plan_data, [send], store=store, run_id='rev', workers=True,
                                         review_handler=CallbackReviewHandler(review)), backend=backend)
    assert run.step('ada').output == 'sent to ada'
    assert run.step('bob').error == 'Rejected by reviewer: {"to":"bob"} (not Bob)'
    assert seen and seen[0] != threading.current_thread().name  # on the worker's event loop, not the coordinator's
    with sqlite3.connect(tmp_path / 'runs.db') as db:
        sent = [row[0] for row in db.execute('SELECT workflow_uuid FROM workflow_status')]
    assert sent == ['rev/ada']  # the rejected step was never sent


def test_for_each_and_select_steps_run_on_workers_and_a_resume_gives_the_same_outputs(tmp_path: Path) -> None:
    store = f'sqlite:///{tmp_path}/runs.db'
    calls: list[int] = []

    @tool
    async def square(n: int) -> int:
        """Square a number."""
        calls.append(n)
        return n * n

    plan_data = {'steps': [{'id': 'sq', 'tool': 'square', 'for_each': [1, 2, 3], 'arguments': {'n': '$item'}},
                           {'id': 'big', 'from': '$ref:sq', 'select': '[?@ > `1`]'}],
                 'output_steps': ['sq', 'big']}
    with Worker(store, [square], concurrency=3):
        run = anyio.run(lambda: run_plan(plan_data, [square], store=store, run_id='fe', workers=True))
        assert run.step('sq').value == [1, 4, 9]
        assert run.step('big').value == [4, 9]
        again = anyio.run(lambda: resume_plan('fe', [square], store=store))
    assert again.step('big').value == [4, 9]
    assert sorted(calls) == [1, 2, 3]  # each element ran once, on a worker
    with sqlite3.connect(tmp_path / 'runs.db') as db:
        sent = sorted(row[0] for row in db.execute('SELECT workflow_uuid FROM workflow_status'))
    assert len(sent) == 3 and all(name.startswith('fe/sq') for name in sent)
