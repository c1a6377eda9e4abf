"""A stored run's holder that is paused past its lease loses the run to another process and, once it wakes, stops
without calling another tool: every write it tries is refused by the store (fencing). Tried with a real pause
(SIGSTOP) of a real process, on SQLite and on PostgreSQL, with the holder on this machine and on another one (a
process in a UTS namespace of its own, with another host name). Also: a PostgreSQL server restarted while a run
writes, and another process holding a SQLite file's write lock, neither of which may lose or repeat a step."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from benchmarks._postgres import PostgresServer

from toolweave import ReviewDecision, tool
from toolweave.plan import run_plan
from toolweave.plan.durable import decide, open_store, resolve_step, resume_plan
from toolweave.testing import LoopWatch

ROOT = Path(__file__).parent.parent
LEASE = 1.0

CHILD = textwrap.dedent('''
    import os
    import sys
    import time
    from pathlib import Path

    import anyio

    from toolweave import tool
    from toolweave.plan import run_plan

    store, ledger = sys.argv[1], Path(sys.argv[2])

    @tool
    def effect(n: int, after: int = -1) -> int:
        """A side effect: written first, then the step takes a while."""
        with ledger.open('a') as out:
            out.write(f'{n} {os.getpid()}\\n')
        time.sleep(0.05)
        return n

    plan = {'steps': [{'id': 's0', 'tool': 'effect', 'arguments': {'n': 0}}] + [
        {'id': f's{i}', 'tool': 'effect', 'arguments': {'n': i, 'after': f'$ref:s{i - 1}'}} for i in range(1, 60)]}
    try:
        run = anyio.run(lambda: run_plan(plan, [effect], store=store, run_id='held'))
        print('FINISHED', run.succeeded, flush=True)
    except Exception as exc:
        print('STOPPED', type(exc).__name__, str(exc)[:300], flush=True)
''')


def _effect_tool(ledger: Path) -> Any:
    @tool
    def effect(n: int, after: int = -1) -> int:
        """A side effect: written first, then the step takes a while."""
        with ledger.open('a') as out:
            out.write(f'{n} {os.getpid()}\n')
        time.sleep(0.05)
        return n

    return effect


def _lines(ledger: Path) -> list[tuple[int, int]]:
    if not ledger.exists():
        return []
    return [(int(n), int(pid)) for n, pid in (line.split() for line in ledger.read_text().splitlines() if line)]


def _store_url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == 'sqlite':
        return f'sqlite:///{tmp_path}/runs.db?lease={LEASE:g}'
    return f'{request.getfixturevalue("postgres_url")}&lease={LEASE:g}'


def _other_machine() -> list[str] | None:
    """A command prefix that runs a process under another host name (a UTS namespace), or None where it cannot."""
    unshare = shutil.which('unshare')
    if unshare is None or os.geteuid() != 0:
        return None
    probe = subprocess.run([unshare, '--uts', 'sh', '-c', 'hostname machine-b && hostname'], capture_output=True,
                           text=True, check=False)
    return [unshare, '--uts', 'sh', '-c', 'hostname machine-b && exec "$@"', 'sh'] if (
        probe.returncode == 0 and probe.stdout.strip() == 'machine-b') else None


@pytest.mark.parametrize('where', ['same machine', 'other machine'])
@pytest.mark.parametrize('kind', ['sqlite', 'postgres'])
def test_a_holder_paused_past_its_lease_stops_when_it_wakes_and_no_step_runs_twice(
        kind: str, where: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    prefix: list[str] = []
    if where == 'other machine':
        found = _other_machine()
        if found is None:
            pytest.skip('needs `unshare --uts` as root (util-linux) to run the holder under another host name')
        prefix = found
    url = _store_url(kind, tmp_path, request)
    ledger = tmp_path / 'ledger'
    script = tmp_path / 'child.py'
    script.write_text(CHILD)
    child = subprocess.Popen([*prefix, sys.executable, str(script), url, str(ledger)], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(_lines(ledger)) < 5:
            assert child.poll() is None, child.communicate()[1][-3000:]
            assert time.monotonic() < deadline, 'the holder never got going'
            time.sleep(0.01)
        child.send_signal(signal.SIGSTOP)  # a GC pause, a suspended VM, a debugger: longer than the lease
        paused_at = len(_lines(ledger))
        time.sleep(LEASE * 2.5)

        # Another process takes the run over and finishes it, as a person would after a crash.
        effect = _effect_tool(ledger)

        async def finish() -> Any:
            for _ in range(5):
                run = await resume_plan('held', [effect], store=url)
                parked = [r for r in run.steps if r.status == 'parked']
                if not parked:
                    return run
                seen = Counter(n for n, _ in _lines(ledger))
                for record in parked:  # unknown after the takeover: the ledger says whether its effect happened
                    n = int(record.id[1:])
                    if seen[n]:
                        await resolve_step('held', record.id, n, store=url, reason='its effect is in the ledger')
                    else:
                        await decide('held', record.id, ReviewDecision.approve(), store=url)
            raise AssertionError('still parked after five resumes')

        run = anyio.run(finish)
        assert run.steps[-1].status == 'succeeded'
        before_wake = len(_lines(ledger))
    finally:
        child.send_signal(signal.SIGCONT)
    out, err = child.communicate(timeout=60)
    assert out.startswith('STOPPED RunLostError'), (out, err[-3000:])
    assert 'was taken over by' in out or 'let go by its holder' in out, out
    lines = _lines(ledger)
    woke = [line for line in lines[before_wake:] if line[1] == child.pid]
    assert woke == [], f'the woken holder called tools after losing the run: {woke}'
    counts = Counter(n for n, _ in lines)
    assert all(c == 1 for c in counts.values()), counts.most_common(3)
    assert sorted(counts) == list(range(60)) and paused_at >= 5


def test_a_postgres_server_restarted_mid_run_loses_nothing_and_parks_nothing(
        postgres_server: PostgresServer, postgres_url: str) -> None:
    ledger: list[int] = []

    @tool
    def step(n: int, after: int = -1) -> int:
        """Restarts the database at step 5."""
        ledger.append(n)
        if n == 5:
            postgres_server.stop('fast')
            threading.Timer(1.0, postgres_server.start).start()
        return n

    plan = {'steps': [{'id': 's0', 'tool': 'step', 'arguments': {'n': 0}}] + [
        {'id': f's{i}', 'tool': 'step', 'arguments': {'n': i, 'after': f'$ref:s{i - 1}'}} for i in range(1, 10)]}
    run = anyio.run(lambda: run_plan(plan, [step], store=f'{postgres_url}&retry=20', run_id='restarted'))
    assert run.ok and ledger == list(range(10))  # the writes waited for the server; nothing ran twice
    store = open_store(postgres_url)
    try:
        stored = store.load('restarted')
        assert stored.info.status == 'finished' and stored.info.owner is None  # let go: nobody waits for a lease
        last = {t.step_id: t.status for t in stored.transitions if t.status != 'ready'}
        assert set(last.values()) == {'succeeded'}
        assert Counter((t.step_id, t.status) for t in stored.transitions).most_common(1)[0][1] == 1  # none twice
    finally:
        store.close()
    again = anyio.run(lambda: resume_plan('restarted', [step], store=postgres_url))
    assert again.ok and ledger == list(range(10))


@pytest.mark.usefixtures('no_gc')
def test_another_process_holding_the_sqlite_write_lock_does_not_block_the_event_loop(tmp_path: Path) -> None:
    # The holder keeps the lock for `hold` seconds: a loop that waited for it would be held about that long; a free
    # one ticks every 10 ms. The collector is paused (a full collection of the suite's heap holds the loop too).
    hold = 2.0
    path = tmp_path / 'runs.db'
    open_store(path).close()
    holder = subprocess.Popen([sys.executable, '-c', textwrap.dedent(f"""
        import sqlite3, sys, time
        db = sqlite3.connect({str(path)!r}, isolation_level=None)
        db.execute('BEGIN IMMEDIATE')
        print('locked', flush=True)
        time.sleep({hold})
        db.execute('COMMIT')
    """)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == 'locked'

    @tool
    def quick(n: int) -> int:
        """Returns at once."""
        return n

    async def main() -> tuple[Any, float]:
        async with LoopWatch() as watch:
            run = await run_plan({'steps': [{'id': f's{i}', 'tool': 'quick', 'arguments': {'n': i}}
                                            for i in range(5)]}, [quick], store=path, run_id='busy')
        return run, watch.longest_gap

    try:
        run, longest = anyio.run(main)
    finally:
        holder.wait(timeout=30)
    assert run.ok
    assert longest < hold / 4, f"the event loop waited {longest:.2f} s for another process's lock"
