"""Durable plans benchmark: crash recovery and what the journal costs.

Resume after SIGKILL. Each trial starts a 100-step plan (`benchmarks/_crash.py`: layers of four, a third of the
steps read-only, the rest with a side effect) in a child process against the store, kills it with SIGKILL at a
random moment within the time the plan takes unkilled, then resumes it in this process, deciding each step
parked as unknown after the crash from the side-effect ledger the tools write (approve if its effect is not
there, reject if it is), until the run is over. Counted per store: steps the store showed finished after the
kill that ran again (must be 0), side-effect steps that ran twice (must be 0), read-only steps run again (allowed),
steps parked as unknown, and how many of those had in fact finished (their effect was written, the kill came
before the journal recorded the end: the window is the tool's return plus one commit).

Journal cost. A plan of 10,000 independent steps calling a no-op async tool runs with no journal, with a SQLite
journal (a file in a temporary folder, WAL, `synchronous=NORMAL`) and with a PostgreSQL journal (a server started
for the run in a temporary folder, over a Unix socket, fsync off: the cost of the round trips, not of a disk).
Runs are interleaved in rounds; reported: the median wall time per step of each, the journal's extra per step,
and the time spent inside the store's writes (what dominates).

Run: `python -m benchmarks.bench_durable [--quick] [--trials N] [--steps N] [--rounds N] [--output PATH]`
(about 4 minutes; `--quick` about 20 s). PostgreSQL is skipped, with the reason, when it cannot be started (see
`benchmarks/_postgres.py`). Writes `benchmarks/results/durable.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
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


def _trials(url: str, count: int, steps: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as folder:
        window = plan_seconds(url, Path(folder), steps)
        results = [run_trial(url, Path(folder), f'trial{i}', steps, rng, kill_within=window) for i in range(count)]
    return {
        'trials': count, 'steps': steps, 'kill_window_s': round(window, 3),
        'rerun_finished': sum(t.rerun_finished for t in results),
        'rerun_effects': sum(t.rerun_effects for t in results),
        'rerun_reads': sum(t.rerun_reads for t in results),
        'unknown_after_crash': sum(t.unknown for t in results),
        'unknown_that_had_finished': sum(t.lost_finishes for t in results),
        'finished_before_kill_median': statistics.median(t.finished_before_kill for t in results),
        'completed': sum(t.completed for t in results),
        'detail': [asdict(t) for t in results],
    }


@contextmanager
def _stores(folder: str, with_postgres: bool) -> Iterator[tuple[dict[str, Callable[[], PlanStore]], dict[str, str],
                                                               str | None]]:
    """Store factories for the cost runs, URLs for the trials, and why PostgreSQL is missing (if it is)."""
    counter = iter(range(1_000_000))
    factories: dict[str, Callable[[], PlanStore]] = {
        'sqlite': lambda: open_store(f'sqlite:///{folder}/cost-{next(counter)}.db')}
    urls = {'sqlite': f'sqlite:///{folder}/trials.db'}
    reason = unavailable() if with_postgres else 'skipped (--no-postgres)'
    with ExitStack() as stack:
        if reason is None:
            server = stack.enter_context(temporary_postgres())
            import psycopg

            def database() -> str:
                name = f'bench_{next(counter)}'
                with psycopg.connect(server.url, autocommit=True) as admin:
                    admin.execute(f'CREATE DATABASE {name}')
                return server.url.replace('/postgres?', f'/{name}?', 1)

            factories['postgres'] = lambda: open_store(database())
            urls['postgres'] = database()
        yield factories, urls, reason


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the tables and write the JSON report; returns the report."""
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_durable', description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='3 trials per store, 2,000 steps, 2 rounds')
    parser.add_argument('--trials', type=int, default=None, help='kill trials per store (default 100)')
    parser.add_argument('--steps', type=int, default=None, help='steps of the cost plan (default 10,000)')
    parser.add_argument('--rounds', type=int, default=None, help='rounds of the cost runs (default 5)')
    parser.add_argument('--no-postgres', action='store_true', help='SQLite only')
    parser.add_argument('--output', type=Path, default=RESULTS, help=f'JSON report path (default {RESULTS})')
    args = parser.parse_args(argv)
    trials = args.trials or (3 if args.quick else 100)
    steps = args.steps or (2_000 if args.quick else 10_000)
    rounds = args.rounds or (2 if args.quick else 5)
    os.environ.setdefault('PYTHONPATH', str(ROOT))
    started = time.perf_counter()
    report: dict[str, Any] = {'mode': 'quick' if args.quick else 'full', 'python': platform.python_version(),
                              'platform': platform.platform(), 'cpus': os.cpu_count()}
    with tempfile.TemporaryDirectory() as folder, _stores(folder, not args.no_postgres) as (factories, urls, reason):
        report['postgres'] = reason or 'a temporary server on a Unix socket, fsync off'
        report['cost'] = {shape: _cost(factories, steps, rounds, shape) for shape in ('wide', 'chain')}
        report['resume'] = {name: _trials(url, trials, 100, seed=index) for index, (name, url) in
                            enumerate(urls.items())}
    report['elapsed_s'] = round(time.perf_counter() - started, 2)
    _print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + '\n', encoding='utf-8')
    print(f'wrote {args.output}')
    return report


def _print(report: dict[str, Any]) -> None:
    print(f'\nJournal cost per step, no-op tools; PostgreSQL: {report["postgres"]}')
    print(f'{"plan":<20} {"store":<10} {"us/step":>9} {"journal us/step":>16} {"x no journal":>13} '
          f'{"in writes us/step":>18} {"commits/step":>13}')
    for shape, cost in report['cost'].items():
        plan = f'{cost["steps"]:,} {shape}'
        print(f'{plan:<20} {"none":<10} {cost["none_us_per_step"]:>9}')
        for name in ('sqlite', 'postgres'):
            if name in cost:
                row = cost[name]
                print(f'{plan:<20} {name:<10} {row["us_per_step"]:>9} {row["journal_us_per_step"]:>16} '
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


if __name__ == '__main__':
    main(sys.argv[1:])
