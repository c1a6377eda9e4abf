"""Scale-out benchmark: a durable plan's steps on 1, 2, 4 and 8 worker processes (DBOS) against the in-process
executor, and where it stops scaling.

The plan: 1,000 steps in 100 chains of 10 (step `i` reads step `i - 100`), each a tool call that waits 20 ms (a
tool waiting on a service: `benchmarks/_worker_tools.py`). Every run is durable, journaled in the same PostgreSQL
database (a temporary server on a Unix socket, with the settings a user runs: `fsync=on`, `synchronous_commit=on`;
`--no-fsync` for fsync off; SQLite when PostgreSQL is missing):

- **in-process**: `run_plan(plan, tools, store=URL, concurrency=N)`, the tools called in this process, with
  N = 8 (one worker's slots) and N = 64 (eight workers' slots);
- **workers**: `run_plan(..., store=URL, workers=True)`, each step a DBOS workflow run by `toolweave worker`
  processes (8 steps at once each), 1, 2, 4 then 8 of them.

Each round runs them in turn (workers are started between runs, not timed; each configuration first runs a
10-step warm-up plan). Reported: the median wall time, steps per second, the ratio to one worker and to the
in-process run with as many slots, the ideal (slots / 20 ms), and the CPU time per step of each kind of process
(this coordinator, the workers, the database server: user + system, from `/proc`), their sum, and the throughput
the machine's cores allow at that cost (cores / CPU per step): when the measured rate reaches it, the run is
CPU-bound and more workers cannot help.

Run: `python -m benchmarks.bench_workers [--quick] [--steps N] [--rounds N] [--no-fsync] [--output PATH]` (about
four minutes; `--quick` about 15 s). Writes `benchmarks/results/workers.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from benchmarks._postgres import temporary_postgres, unavailable
from benchmarks._worker_tools import TOOLS, plan
from benchmarks._workers import WorkerProcess
from toolweave.plan import run_plan

__all__ = ('main',)

RESULTS = Path(__file__).parent / 'results' / 'workers.json'
TOOL_SECONDS = 0.02
SLOTS = 8
"""Steps one worker runs at once."""


@contextmanager
def _database(folder: str, durable: bool) -> Iterator[tuple[str, str, int | None]]:
    """A fresh database URL, what it is, and its server's process id (`None` for SQLite)."""
    reason = unavailable()
    if reason is not None:
        yield f'sqlite:///{folder}/bench.db', f'SQLite file (no PostgreSQL: {reason})', None
        return
    with temporary_postgres(durable=durable) as server:
        import psycopg

        with psycopg.connect(server.url, autocommit=True) as admin:
            admin.execute('CREATE DATABASE bench_workers')
        postmaster = int((server.data / 'postmaster.pid').read_text().split()[0])
        yield (server.url.replace('/postgres?', '/bench_workers?', 1),
               f'PostgreSQL 15, a temporary server on a Unix socket, {server.settings}', postmaster)


def _stat(pid: int) -> list[str]:
    try:
        with open(f'/proc/{pid}/stat', encoding='ascii') as stat:
            return stat.read().rpartition(')')[2].split()
    except OSError:
        return []


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far, from `/proc` (0 where there is none)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK') if fields else 0.0


def _server_cpu_seconds(postmaster: int | None) -> float:
    """CPU time of a PostgreSQL server: the postmaster, its live backends and the ones it has reaped."""
    if postmaster is None:
        return 0.0
    fields = _stat(postmaster)
    total = (int(fields[13]) + int(fields[14])) / os.sysconf('SC_CLK_TCK') if fields else 0.0
    for name in os.listdir('/proc'):
        if name.isdigit():
            child = _stat(int(name))
            if child and int(child[1]) == postmaster:
                total += _cpu_seconds(int(name))
    return total + _cpu_seconds(postmaster)


class _Measured:
    """Wall times, and CPU seconds of this process and of the workers, per configuration."""

    def __init__(self, postmaster: int | None) -> None:
        self.postmaster = postmaster
        self.walls: dict[str, list[float]] = {}
        self.database_cpu: dict[str, list[float]] = {}
        self.coordinator_cpu: dict[str, list[float]] = {}
        self.workers_cpu: dict[str, list[float]] = {}

    def run(self, name: str, url: str, steps: int, processes: Sequence[WorkerProcess] = (), **options: Any) -> None:
        _run(url, 10, **options)  # warm-up: connections, the queue picked up by the workers
        cpu, worker_cpu = time.process_time(), sum(_cpu_seconds(w.pid) for w in processes)
        database_cpu = _server_cpu_seconds(self.postmaster)
        self.walls.setdefault(name, []).append(_run(url, steps, **options))
        self.database_cpu.setdefault(name, []).append(_server_cpu_seconds(self.postmaster) - database_cpu)
        self.coordinator_cpu.setdefault(name, []).append(time.process_time() - cpu)
        self.workers_cpu.setdefault(name, []).append(sum(_cpu_seconds(w.pid) for w in processes) - worker_cpu)


def _run(url: str, steps: int, **options: Any) -> float:
    started = time.perf_counter()
    run = anyio.run(partial(run_plan, plan(steps), TOOLS, store=url, run_id=uuid.uuid4().hex, **options))
    elapsed = time.perf_counter() - started
    if not run.ok:
        raise RuntimeError(f'the benchmark plan did not succeed: {[(r.id, r.error) for r in run.steps if r.error][:3]}')
    return elapsed


def _round(url: str, steps: int, counts: Sequence[int], measured: _Measured) -> None:
    for slots in (SLOTS, SLOTS * max(counts)):
        measured.run(f'in-process {slots}', url, steps, concurrency=slots)
    with ExitStack() as stack:
        workers: list[WorkerProcess] = []
        for count in counts:
            while len(workers) < count:
                worker = WorkerProcess(url, concurrency=SLOTS, tool_seconds=TOOL_SECONDS)
                stack.callback(worker.stop)
                worker.wait_ready()
                workers.append(worker)
            measured.run(f'workers {count}', url, steps, workers, workers=True)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table and write the JSON report; returns the report."""
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_workers', description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='200 steps, one round, 1 and 2 workers')
    parser.add_argument('--no-fsync', action='store_true', help='PostgreSQL with fsync off (default: on)')
    parser.add_argument('--steps', type=int, default=None, help='steps of the plan (default 1,000)')
    parser.add_argument('--rounds', type=int, default=None, help='rounds (default 3)')
    parser.add_argument('--output', type=Path, default=RESULTS, help=f'JSON report path (default {RESULTS})')
    args = parser.parse_args(argv)
    steps = args.steps or (200 if args.quick else 1_000)
    rounds = args.rounds or (1 if args.quick else 3)
    counts = (1, 2) if args.quick else (1, 2, 4, 8)
    os.environ['TOOLWEAVE_TOOL_SECONDS'] = str(TOOL_SECONDS)  # the in-process runs' tools wait as the workers' do
    os.environ.pop('TOOLWEAVE_LEDGER', None)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder, _database(folder, not args.no_fsync) as (url, database, postmaster):
        measured = _Measured(postmaster)
        for _ in range(rounds):
            _round(url, steps, counts, measured)
    report: dict[str, Any] = {
        'mode': 'quick' if args.quick else 'full', 'python': platform.python_version(),
        'platform': platform.platform(), 'cpus': os.cpu_count(), 'database': database, 'steps': steps,
        'rounds': rounds, 'tool_seconds': TOOL_SECONDS, 'slots_per_worker': SLOTS, 'rows': []}
    walls = measured.walls
    one = statistics.median(walls['workers 1'])
    for name, values in walls.items():
        wall = statistics.median(values)
        slots = int(name.split()[1]) * (SLOTS if name.startswith('workers') else 1)
        same = walls.get(f'in-process {slots}')
        report['rows'].append({
            'run': name, 'slots': slots, 'wall_s': round(wall, 3), 'steps_per_s': round(steps / wall, 1),
            'x_one_worker': round(one / wall, 2),
            'x_in_process_same_slots': None if same is None else round(statistics.median(same) / wall, 2),
            'ideal_steps_per_s': round(slots / TOOL_SECONDS, 1),
            'coordinator_cpu_ms_per_step': round(statistics.median(measured.coordinator_cpu[name]) / steps * 1e3, 2),
            'workers_cpu_ms_per_step': round(statistics.median(measured.workers_cpu[name]) / steps * 1e3, 2),
            'database_cpu_ms_per_step': round(statistics.median(measured.database_cpu[name]) / steps * 1e3, 2),
            'walls_s': [round(v, 3) for v in values]})
        row = report['rows'][-1]
        total = row['coordinator_cpu_ms_per_step'] + row['workers_cpu_ms_per_step'] + row['database_cpu_ms_per_step']
        row['cpu_ms_per_step'] = round(total, 2)
        row['cpu_bound_steps_per_s'] = round((os.cpu_count() or 1) * 1e3 / total, 1) if total else None
        row['cpu_busy'] = round(total * steps / 1e3 / wall / (os.cpu_count() or 1), 2)
    report['elapsed_s'] = round(time.perf_counter() - started, 2)
    _print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + '\n', encoding='utf-8')
    print(f'wrote {args.output}')
    return report


def _print(report: dict[str, Any]) -> None:
    print(f'\n{report["steps"]:,} steps of {report["tool_seconds"] * 1000:g} ms, durable in {report["database"]}; '
          f'median of {report["rounds"]} rounds; {report["cpus"]} cores')
    print(f'{"run":<16} {"slots":>5} {"wall s":>8} {"steps/s":>8} {"x 1 worker":>11} {"x in-process":>13} '
          f'{"ideal":>7} {"CPU ms/step: here":>18} {"workers":>8} {"database":>9} {"total":>6} '
          f'{"cores allow":>12} {"cores busy":>11}')
    for row in report['rows']:
        same = row['x_in_process_same_slots']
        print(f'{row["run"]:<16} {row["slots"]:>5} {row["wall_s"]:>8} {row["steps_per_s"]:>8} '
              f'{row["x_one_worker"]:>11} {"" if same is None else same:>13} {row["ideal_steps_per_s"]:>7} '
              f'{row["coordinator_cpu_ms_per_step"]:>18} {row["workers_cpu_ms_per_step"]:>8} '
              f'{row["database_cpu_ms_per_step"]:>9} {row["cpu_ms_per_step"]:>6} '
              f'{row["cpu_bound_steps_per_s"] or "":>12} {row["cpu_busy"]:>11}')


if __name__ == '__main__':
    main(sys.argv[1:])
