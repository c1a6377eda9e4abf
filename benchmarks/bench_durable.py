"""Durable plans benchmark: crash recovery, what the journal costs under each durability setting, and operating a
store of 100,000 runs.

Resume after SIGKILL. Each trial starts a 100-step plan (`benchmarks/_crash.py`: layers of four, a third of the
steps read-only, the rest with a side effect) in a child process against the store, kills it with SIGKILL at a
random moment within the time the plan takes unkilled, then resumes it in this process, deciding each step
parked as unknown after the crash from the side-effect ledger the tools write (approve if its effect is not
there, reject if it is), until the run is over. Counted per store: steps the store showed finished after the
kill that ran again (must be 0), side-effect steps that ran twice (must be 0), read-only steps run again (allowed),
steps parked as unknown, and how many of those had in fact finished (their effect was written, the kill came
before the journal recorded the end: the window is the tool's return plus one commit). PostgreSQL runs with the
settings a user runs (fsync on).

Journal cost. A plan of 10,000 steps calling a no-op async tool (independent steps, then a chain) runs with no
journal and with each store: SQLite as shipped (a file in a temporary folder, WAL, `synchronous=NORMAL`), SQLite
with `?synchronous=full`, PostgreSQL as a user runs it (a server started for the run in a temporary folder, over a
Unix socket, `fsync=on`, `synchronous_commit=on`: the defaults) and, for comparison only, PostgreSQL with fsync
off (the round trips without the disk; a crash of the machine may lose or corrupt such a database). Runs are
interleaved in rounds; reported: the median wall time per step of each, the journal's extra per step, and the
time spent inside the store's writes.

Peer. The same chain as DBOS Transact writes it, a workflow calling `@DBOS.step` functions one after the other
(`benchmarks/_dbos_chain.py`, in a process of its own), on SQLite and on the same PostgreSQL server (fsync on),
beside a toolweave chain of as many steps on the same kind of store, measured in the same run.

Operations. A store filled with 100,000 runs (400,000 transitions; 90 % finished, 5 % suspended with a step
waiting for a decision, 3 % stopped, 2 % cancelled; ten names; updated over 60 days) on SQLite and on PostgreSQL
(fsync on): the time of a page of `list_runs` (first page, pages deep into the list, each filter), then of
`prune_runs(older_than='30d')` and of its longest transaction.

Run: `python -m benchmarks.bench_durable [--quick] [--trials N] [--steps N] [--rounds N] [--runs N] [--output PATH]`
(about 8 minutes; `--quick` about 40 s). PostgreSQL is skipped, with the reason, when it cannot be started (see
`benchmarks/_postgres.py`). Writes `benchmarks/results/durable.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from benchmarks._crash import plan_seconds, run_trial
from benchmarks._postgres import temporary_postgres, unavailable
from benchmarks._store_ops import operations
from toolweave import tool
from toolweave.plan import run_plan
from toolweave.plan.durable import PlanStore, Transition, open_store

__all__ = ('main',)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / 'results' / 'durable.json'
GOAL_US = 100.0
"""The aim for a journaled step's extra cost on SQLite, in microseconds."""


@tool
async def noop(i: int) -> int:
    """Does nothing."""
    return i


def _plan(steps: int, shape: str) -> dict[str, Any]:
    """`wide`: independent steps; `chain`: each step reads the one before (nothing can share a commit)."""
    if shape == 'wide':
        return {'steps': [{'id': f's{i}', 'tool': 'noop', 'arguments': {'i': i}} for i in range(steps)]}
    return {'steps': [{'id': 's0', 'tool': 'noop', 'arguments': {'i': 0}}] + [
        {'id': f's{i}', 'tool': 'noop', 'arguments': {'i': f'$ref:s{i - 1}'}} for i in range(1, steps)]}


class _Timed:
    """Adds up the time spent in a store's `append` (the writes themselves)."""

    def __init__(self, store: PlanStore) -> None:
        self.store = store
        self.seconds = 0.0
        self.calls = 0
        original = store.append

        def append(run_id: str, owner: str, transitions: list[Transition], *, seq: int) -> str | None:
            started = time.perf_counter()
            try:
                return original(run_id, owner, transitions, seq=seq)
            finally:
                self.seconds += time.perf_counter() - started
                self.calls += 1
        store.append = append  # type: ignore[method-assign]


def _cost(stores: dict[str, Callable[[], PlanStore]], steps: int, rounds: int, shape: str) -> dict[str, Any]:
    plan = _plan(steps, shape)
    walls: dict[str, list[float]] = {'none': [], **{name: [] for name in stores}}
    inside: dict[str, list[float]] = {name: [] for name in stores}
    commits: dict[str, list[int]] = {name: [] for name in stores}
    for round_index in range(rounds):
        for name in ['none', *stores]:
            store = stores[name]() if name != 'none' else None
            timed = _Timed(store) if store is not None else None
            started = time.perf_counter()
            run = anyio.run(partial(run_plan, plan, [noop], store=store, max_steps=steps,
                                    run_id=f'cost-{round_index}' if store is not None else None))
            walls[name].append(time.perf_counter() - started)
            assert run.ok
            if store is not None and timed is not None:
                inside[name].append(timed.seconds)
                commits[name].append(timed.calls)
                store.close()
    base = statistics.median(walls['none'])
    out: dict[str, Any] = {'shape': shape, 'steps': steps, 'rounds': rounds,
                           'none_us_per_step': round(base / steps * 1e6, 2)}
    for name in stores:
        wall = statistics.median(walls[name])
        out[name] = {'us_per_step': round(wall / steps * 1e6, 2),
                     'journal_us_per_step': round((wall - base) / steps * 1e6, 2),
                     'ratio_to_none': round(wall / base, 2),
                     'store_writes_us_per_step': round(statistics.median(inside[name]) / steps * 1e6, 2),
                     'commits_per_step': round(statistics.median(commits[name]) / steps, 4)}
    return out


def _trials(url: str, count: int, steps: int, seed: int, pause_for: float | None = None) -> dict[str, Any]:
    rng = random.Random(seed)
    kind = 'trial' if pause_for is None else 'paused'
    with tempfile.TemporaryDirectory() as folder:
        window = plan_seconds(url, Path(folder), steps, f'{kind}-calibration')
        results = [run_trial(url, Path(folder), f'{kind}{i}', steps, rng, kill_within=window, pause_for=pause_for)
                   for i in range(count)]
    return {
        'trials': count, 'steps': steps, 'kill_window_s': round(window, 3),
        'taken_over': sum('holder_exit' in t.extra for t in results),
        'holder_stopped_by_fence': sum(bool(t.extra.get('holder_lost_run')) for t in results),
        'paused_holding_the_lock': sum(bool(t.extra.get('paused_holding_the_lock')) for t in results),
        'rerun_finished': sum(t.rerun_finished for t in results),
        'rerun_effects': sum(t.rerun_effects for t in results),
        'rerun_reads': sum(t.rerun_reads for t in results),
        'unknown_after_crash': sum(t.unknown for t in results),
        'unknown_that_had_finished': sum(t.lost_finishes for t in results),
        'finished_before_kill_median': statistics.median(t.finished_before_kill for t in results),
        'completed': sum(t.completed for t in results),
        'detail': [asdict(t) for t in results],
    }


STORES = ('sqlite', 'sqlite-full', 'postgres', 'postgres-nofsync')
"""The journal-cost stores, as the tables name them."""
SETTINGS = {
    'sqlite': 'SQLite, WAL, synchronous=NORMAL (as shipped): a killed process loses nothing committed; a power cut '
              'or OS crash may lose the last commits (the file stays consistent)',
    'sqlite-full': 'SQLite, WAL, synchronous=FULL (`?synchronous=full`): every commit waits for the disk',
    'postgres': 'PostgreSQL, fsync=on, synchronous_commit=on (the defaults): every commit waits for the disk',
    'postgres-nofsync': 'PostgreSQL, fsync=off: for comparison only; a crash of the machine may lose or corrupt data',
}


@contextmanager
def _stores(folder: str, with_postgres: bool) -> Iterator[tuple[dict[str, Callable[[], PlanStore]], dict[str, str],
                                                               Callable[[str], str], str | None]]:
    """Store factories for the cost runs, URLs for the trials, a maker of fresh empty stores per kind (`sqlite`,
    `postgres`), and why PostgreSQL is missing (if it is)."""
    counter = iter(range(1_000_000))
    factories: dict[str, Callable[[], PlanStore]] = {
        'sqlite': lambda: open_store(f'sqlite:///{folder}/cost-{next(counter)}.db'),
        'sqlite-full': lambda: open_store(f'sqlite:///{folder}/cost-{next(counter)}.db?synchronous=full')}
    urls = {'sqlite': f'sqlite:///{folder}/trials.db'}
    reason = unavailable() if with_postgres else 'skipped (--no-postgres)'
    with ExitStack() as stack:
        servers = {}
        if reason is None:
            servers['postgres'] = stack.enter_context(temporary_postgres(durable=True))
            servers['postgres-nofsync'] = stack.enter_context(temporary_postgres())
            import psycopg

            def database(kind: str) -> str:
                name = f'bench_{next(counter)}'
                with psycopg.connect(servers[kind].url, autocommit=True) as admin:
                    admin.execute(f'CREATE DATABASE {name}')
                return servers[kind].url.replace('/postgres?', f'/{name}?', 1)

            for kind in servers:
                factories[kind] = partial(lambda kind: open_store(database(kind)), kind)
            urls['postgres'] = database('postgres')

        def empty(kind: str) -> str:
            return f'sqlite:///{folder}/ops-{next(counter)}.db' if kind == 'sqlite' else database('postgres')

        yield {name: factories[name] for name in STORES if name in factories}, urls, empty, reason


def _peer(empty: Callable[[str], str], kind: str, steps: int, rounds: int) -> dict[str, Any]:
    """A chain of `steps` durable steps: DBOS Transact's (a process of its own), then toolweave's, on fresh stores
    of `kind`."""
    try:
        import dbos  # noqa: F401
    except ImportError:
        return {'skipped': 'DBOS is not installed: pip install "toolweave[dbos]"'}
    done = subprocess.run([sys.executable, '-m', 'benchmarks._dbos_chain', empty(kind), str(steps), str(rounds)],
                          capture_output=True, text=True, timeout=1800, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f'the DBOS chain failed: {done.stderr[-2000:]}')
    peer = json.loads(done.stdout.strip().splitlines()[-1])
    store = open_store(empty(kind))  # opened once, as DBOS is launched once
    plan = _plan(steps, 'chain')
    walls = []
    try:
        for index in range(rounds + 1):
            started = time.perf_counter()
            run = anyio.run(partial(run_plan, plan, [noop], store=store, max_steps=steps, run_id=f'peer-{index}'))
            assert run.ok
            if index:  # the first round warms up, as the DBOS one does
                walls.append(time.perf_counter() - started)
    finally:
        store.close()
    ours = statistics.median(walls) / steps * 1e6
    return {'steps': steps, 'rounds': rounds, 'dbos_us_per_step': peer['us_per_step'],
            'toolweave_us_per_step': round(ours, 2), 'dbos_over_toolweave': round(peer['us_per_step'] / ours, 2)}


def _fsync_cost(folder: str, count: int = 300) -> dict[str, Any]:
    """What waiting for this disk costs: an 8 kB write then `fdatasync`, as a commit that waits does."""
    path = Path(folder) / 'fsync-probe'
    times = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        block = os.urandom(8192)
        for _ in range(count):
            started = time.perf_counter()
            os.pwrite(fd, block, 0)
            os.fdatasync(fd)
            times.append(time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink()
    return {'fdatasync_8kB_us_median': round(statistics.median(times) * 1e6, 1),
            'fdatasync_8kB_us_p90': round(sorted(times)[int(count * 0.9)] * 1e6, 1)}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the tables and write the JSON report; returns the report."""
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_durable', description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='3 trials per store, 2,000 steps, 2 rounds')
    parser.add_argument('--trials', type=int, default=None, help='kill trials per store (default 100)')
    parser.add_argument('--steps', type=int, default=None, help='steps of the cost plan (default 10,000)')
    parser.add_argument('--rounds', type=int, default=None, help='rounds of the cost runs (default 5)')
    parser.add_argument('--runs', type=int, default=None, help='runs in the operations store (default 100,000)')
    parser.add_argument('--paused-trials', type=int, default=None,
                        help='paused-holder trials per store (SIGSTOP past a 1 s lease; default 30)')
    parser.add_argument('--no-postgres', action='store_true', help='SQLite only')
    parser.add_argument('--output', type=Path, default=RESULTS, help=f'JSON report path (default {RESULTS})')
    args = parser.parse_args(argv)
    trials = args.trials or (3 if args.quick else 100)
    paused = args.paused_trials if args.paused_trials is not None else (3 if args.quick else 30)
    steps = args.steps or (2_000 if args.quick else 10_000)
    rounds = args.rounds or (2 if args.quick else 5)
    runs = args.runs or (5_000 if args.quick else 100_000)
    peer_steps = 200 if args.quick else 1_000
    os.environ.setdefault('PYTHONPATH', str(ROOT))
    started = time.perf_counter()
    report: dict[str, Any] = {'mode': 'quick' if args.quick else 'full', 'python': platform.python_version(),
                              'platform': platform.platform(), 'cpus': os.cpu_count()}
    with tempfile.TemporaryDirectory() as folder, _stores(folder, not args.no_postgres) as (factories, urls, empty,
                                                                                          reason):
        report['postgres'] = reason or 'temporary servers on a Unix socket in a temporary folder'
        report['settings'] = {name: SETTINGS[name] for name in factories}
        report['disk'] = _fsync_cost(folder)
        report['cost'] = {shape: _cost(factories, steps, rounds, shape) for shape in ('wide', 'chain')}
        report['resume'] = {name: _trials(url, trials, 100, seed=index) for index, (name, url) in
                            enumerate(urls.items())}
        report['paused'] = {name: _trials(url, paused, 100, seed=100 + index, pause_for=1.0) for index, (name, url)
                            in enumerate(urls.items()) if paused}
        kinds = ('sqlite', 'postgres') if reason is None else ('sqlite',)
        report['peer'] = {kind: _peer(empty, kind, peer_steps, rounds) for kind in kinds}
        report['operations'] = {kind: operations(empty(kind), runs) for kind in kinds}
    report['elapsed_s'] = round(time.perf_counter() - started, 2)
    _print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + '\n', encoding='utf-8')
    print(f'wrote {args.output}')
    return report


def _print(report: dict[str, Any]) -> None:
    disk = report['disk']
    print(f'\nJournal cost per step, no-op tools (this disk: an 8 kB write + fdatasync takes '
          f'{disk["fdatasync_8kB_us_median"]} us, median)')
    for name, setting in report['settings'].items():
        print(f'  {name}: {setting}')
    print(f'{"plan":<20} {"store":<17} {"us/step":>9} {"journal us/step":>16} {"x no journal":>13} '
          f'{"in writes us/step":>18} {"commits/step":>13}')
    for shape, cost in report['cost'].items():
        plan = f'{cost["steps"]:,} {shape}'
        print(f'{plan:<20} {"none":<17} {cost["none_us_per_step"]:>9}')
        for name in STORES:
            if name in cost:
                row = cost[name]
                print(f'{plan:<20} {name:<17} {row["us_per_step"]:>9} {row["journal_us_per_step"]:>16} '
                      f'{row["ratio_to_none"]:>13} {row["store_writes_us_per_step"]:>18} {row["commits_per_step"]:>13}')
        if 'sqlite' in cost:
            verdict = 'meets' if cost['sqlite']['journal_us_per_step'] <= GOAL_US else 'misses'
            print(f'{"":<20} SQLite journal {verdict} the aim of <= {GOAL_US:g} us per journaled step.')
    print('\nResume after SIGKILL at a random point (100-step plan)')
    print(f'{"store":<10} {"trials":>6} {"finished re-run":>16} {"effects twice":>14} {"reads again":>12} '
          f'{"unknown":>8} {"of which done":>14} {"completed":>10}')
    for name, row in report['resume'].items():
        print(f'{name:<10} {row["trials"]:>6} {row["rerun_finished"]:>16} {row["rerun_effects"]:>14} '
              f'{row["rerun_reads"]:>12} {row["unknown_after_crash"]:>8} {row["unknown_that_had_finished"]:>14} '
              f'{row["completed"]:>10}')
    print('\nA paused holder (SIGSTOP at a random point, a 1 s lease; the run taken over, then the holder woken)')
    print(f'{"store":<10} {"trials":>6} {"taken over":>11} {"holder fenced":>14} {"paused in a lock":>17} '
          f'{"finished re-run":>16} {"effects twice":>14} {"completed":>10}')
    for name, row in report.get('paused', {}).items():
        print(f'{name:<10} {row["trials"]:>6} {row["taken_over"]:>11} {row["holder_stopped_by_fence"]:>14} '
              f'{row["paused_holding_the_lock"]:>17} {row["rerun_finished"]:>16} {row["rerun_effects"]:>14} '
              f'{row["completed"]:>10}')
    print('\nA chain of durable steps, toolweave and DBOS Transact (a workflow of @DBOS.step calls), same store')
    print(f'{"store":<10} {"steps":>6} {"toolweave us/step":>18} {"DBOS us/step":>13} {"DBOS / toolweave":>17}')
    for kind, peer in report['peer'].items():
        if 'skipped' in peer:
            print(f'{kind:<10} skipped: {peer["skipped"]}')
            continue
        print(f'{kind:<10} {peer["steps"]:>6} {peer["toolweave_us_per_step"]:>18} {peer["dbos_us_per_step"]:>13} '
              f'{peer["dbos_over_toolweave"]:>17}')
    for kind, ops in report['operations'].items():
        print(f'\nOperating {ops["runs"]:,} runs ({ops["transitions"]:,} transitions) on {kind}: list_runs, ms '
              f'(median of 7)')
        for what, ms in ops['list_ms'].items():
            print(f'  {what:<24} {ms:>8}')
        prune = ops['prune']
        print(f'  prune_runs(older_than=30d): {prune["runs"]:,} runs, {prune["transitions"]:,} transitions in '
              f'{prune["total_s"]} s, {prune["batches"]} transactions (longest {prune["longest_transaction_ms"]} ms, '
              f'median {prune["median_transaction_ms"]} ms)')


if __name__ == '__main__':
    main(sys.argv[1:])
