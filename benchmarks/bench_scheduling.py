"""Scheduling quality: how close does a plan's makespan get to its critical path?

For seeded random DAGs of 20-500 steps (varied width and depth) every step sleeps a heavy-tailed latency (median
10 ms by default). The critical path (the longest latency-weighted dependency chain) is a lower bound on any
schedule, so `makespan / critical path` measures the scheduler: 1.00 is perfect. The critical path is computed
from the durations the tools actually slept (a sleep wakes a little late, and no executor can help that), and
the makespan is the wall time of the whole call (for toolweave: parse, validate, run, record). Executors, on the
same DAGs, in the same process, interleaved:

- `toolweave`: `run_plan` (eager: a step starts as soon as its last dependency finishes);
- `floor`: the eager DAG runner written by hand on bare asyncio (`benchmarks/_floor.py`), no validation;
- `waves`: the wave-by-wave executor below (run wave k to completion, then wave k + 1);
- `langgraph` when installed (`pip install -e '.[bench]'`): each step a graph node, joins waiting for all
  their dependencies; its makespan includes compiling the graph, as toolweave's includes validation.

Run: `python -m benchmarks.bench_scheduling` (about three minutes), `--quick` (a few small DAGs, seconds).
Writes `benchmarks/results/scheduling.json` (or `--output PATH`).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio

from benchmarks._dags import FakeTool, critical_path, dependencies, random_dag, sample_latencies, waves
from benchmarks._floor import run_floor
from benchmarks._peers import langgraph_available, langgraph_runner
from toolweave.plan import run_plan
from toolweave.tools import Tool

__all__ = ('DagResult', 'attribute', 'main', 'run_waves')

RESULTS = Path(__file__).parent / 'results' / 'scheduling.json'
SIZES = (20, 50, 100, 200, 500)
QUICK_SIZES = (20, 50)
GOAL_MEDIAN_500 = 1.01
"""Goal for toolweave: median makespan / critical path on the 500-step DAGs."""
PARTS = ('timer', 'step', 'dispatch', 'outside', 'chain_excess')
PER_STEP = ('timer', 'step', 'dispatch', 'outside')


# --- the reference: the seed's wave-by-wave executor ---------------------------------------------------------

def _resolve(value: Any, outputs: Mapping[str, str]) -> Any:
    if isinstance(value, str) and value.startswith('$ref:'):
        return outputs[value[5:]]
    if isinstance(value, dict):
        return {key: _resolve(item, outputs) for key, item in value.items()}
    if isinstance(value, list):
        return [_resolve(item, outputs) for item in value]
    return value


async def run_waves(plan: Mapping[str, Any], tools: Mapping[str, Tool]) -> dict[str, tuple[float, float]]:
    """Run `plan` wave by wave: every step of wave k runs concurrently, wave k + 1 starts when all of wave k
    has finished, and outputs are published between waves. Returns each step's (start, end) in seconds
    since the run started."""
    steps = {str(step['id']): step for step in plan['steps']}
    outputs: dict[str, str] = {}
    times: dict[str, tuple[float, float]] = {}
    start = time.perf_counter()

    async def run_step(step_id: str, finished: dict[str, str]) -> None:
        step = steps[step_id]
        began = time.perf_counter() - start
        result = await tools[step['tool']].call(_resolve(step['arguments'], outputs))
        finished[step_id] = result.text
        times[step_id] = (began, time.perf_counter() - start)

    for wave in waves(plan):
        finished: dict[str, str] = {}
        async with anyio.create_task_group() as group:
            for step_id in wave:
                group.start_soon(run_step, step_id, finished)
        outputs.update(finished)
    return times


# --- measurement -----------------------------------------------------------------------------------------------

@dataclass
class DagResult:
    """One DAG, run by both executors."""

    size: int
    seed: int
    depth: int
    width: int
    edges: int
    critical_path: float
    """Seconds, from the sampled latencies."""
    makespan: dict[str, float] = field(default_factory=dict[str, float])
    """Wall-clock seconds per executor."""
    slept_critical_path: dict[str, float] = field(default_factory=dict[str, float])
    """Per executor, the critical path recomputed from the durations its run's tools actually slept."""
    overhead: dict[str, dict[str, float]] = field(default_factory=dict[str, dict[str, float]])
    """Per executor, `attribute(...)`: where the time above the critical path went (seconds)."""
    sleep_late_us: dict[str, float] = field(default_factory=dict[str, float])
    """Per executor, the median over all steps of how late each step's sleep woke up (µs)."""

    def ratio(self, executor: str) -> float:
        """Makespan / the critical path of the durations actually slept."""
        return self.makespan[executor] / self.slept_critical_path[executor]

    def sampled_ratio(self, executor: str) -> float:
        """Makespan / the critical path of the sampled latencies (counts the sleeps' lateness against it)."""
        return self.makespan[executor] / self.critical_path


Spans = dict[str, tuple[float, float]]
"""Each step's (start, end) in seconds since the executor started it."""


async def _run_toolweave(plan: dict[str, Any], tool: Tool) -> tuple[float, Spans]:
    start = time.perf_counter()
    run = await run_plan(plan, [tool])
    makespan = time.perf_counter() - start
    if not run.ok:
        raise RuntimeError(f'toolweave run of a benchmark DAG did not succeed:\n{run.summary[:2000]}')
    return makespan, {s.id: (s.started_at or 0.0, s.ended_at or 0.0) for s in run.steps}


async def _run_reference(plan: dict[str, Any], tool: Tool) -> tuple[float, Spans]:
    start = time.perf_counter()
    spans = await run_waves(plan, {tool.name: tool})
    return time.perf_counter() - start, spans


async def _run_floor(plan: dict[str, Any], tool: Tool) -> tuple[float, Spans]:
    start = time.perf_counter()
    await run_floor(plan, {tool.name: tool})
    return time.perf_counter() - start, {}


async def _run_langgraph(plan: dict[str, Any], tool: Tool) -> tuple[float, Spans]:
    start = time.perf_counter()
    run = langgraph_runner(plan, tool)
    await run()
    return time.perf_counter() - start, {}


def attribute(plan: Mapping[str, Any], latencies: Mapping[str, float], spans: Spans, makespan: float,
              critical: float, slept: Mapping[str, float] | None = None) -> dict[str, float]:
    """Where the time above the critical path went, in seconds; the parts add up to `makespan - critical`.

    Walks back from the step that ended last through, at each step, the dependency that ended last (the
    chain that actually held the run up) and splits the makespan into: `chain_excess` (that chain's sampled
    latencies minus the critical path: nonzero when lateness made another chain the binding one), `timer`
    (how much later than asked each sleep woke up, from `slept`), `step` (the rest of each measured step
    duration: resolving arguments, `Tool.call`'s bookkeeping, recording the result), `dispatch` (from a
    step's last dependency ending to the step starting: the scheduler), and `outside` (before the first step
    and after the last one: parsing, validation, setup, teardown).
    """
    deps = dependencies(plan)
    slept = slept or {}
    last = max(spans, key=lambda s: spans[s][1])
    parts = {'chain_excess': -critical, 'timer': 0.0, 'step': 0.0, 'dispatch': 0.0,
             'outside': makespan - spans[last][1], 'hops': 0.0}
    step: str | None = last
    while step is not None:
        began, ended = spans[step]
        asleep = slept.get(step, latencies[step])
        parts['chain_excess'] += latencies[step]
        parts['timer'] += asleep - latencies[step]
        parts['step'] += (ended - began) - asleep
        before = max(deps[step], key=lambda d: spans[d][1], default=None)
        ready = spans[before][1] if before is not None else 0.0
        parts['dispatch' if before is not None else 'outside'] += began - ready
        parts['hops'] += 1
        step = before
    return parts


Runner = Callable[[dict[str, Any], Tool], Awaitable[tuple[float, 'Spans']]]


async def _measure_dag(size: int, seed: int, *, median: float, max_depth: int,
                       runners: Mapping[str, Runner]) -> DagResult:
    # Depth between 4 and `max_depth` keeps every DAG's critical path under about a second.
    depth_target = 4 + seed % (max_depth - 3)
    width = max(1, round(size / depth_target))
    plan = random_dag(size, seed=seed, width=width, max_deps=3, shuffle=True)
    latencies = sample_latencies(plan, seed=seed, median=median, low=median / 8, high=median * 7.5)
    tool = FakeTool(latencies)
    result = DagResult(
        size=size, seed=seed, depth=len(waves(plan)), width=width,
        edges=sum(len(d) for d in dependencies(plan).values()), critical_path=critical_path(plan, latencies),
    )
    order = list(runners) if seed % 2 == 0 else list(reversed(list(runners)))  # alternate who runs first
    for name in order:
        tool.slept.clear()
        makespan, spans = await runners[name](plan, tool)
        result.makespan[name] = makespan
        result.slept_critical_path[name] = critical_path(plan, tool.slept)
        if spans:
            result.overhead[name] = attribute(plan, latencies, spans, makespan, result.critical_path, tool.slept)
        result.sleep_late_us[name] = statistics.median(
            (slept - latencies[step]) * 1e6 for step, slept in tool.slept.items())
    return result


async def _sleep_overshoot(delay: float, samples: int = 30) -> dict[str, float]:
    """How late `anyio.sleep(delay)` wakes up on this machine (the timer's share of every step)."""
    late: list[float] = []
    for _ in range(samples):
        start = time.perf_counter()
        await anyio.sleep(delay)
        late.append(time.perf_counter() - start - delay)
    late.sort()
    return {'delay_ms': delay * 1000, 'median_ms': statistics.median(late) * 1000,
            'p95_ms': _quantile(late, 0.95) * 1000, 'max_ms': late[-1] * 1000}


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float('nan')
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


RUNNERS: dict[str, Runner] = {'toolweave': _run_toolweave, 'floor': _run_floor, 'waves': _run_reference,
                              'langgraph': _run_langgraph}


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {'median': statistics.median(values), 'p95': _quantile(values, 0.95), 'max': max(values)}


def _summarise(results: Sequence[DagResult], sizes: Sequence[int]) -> dict[str, Any]:
    classes: dict[str, Any] = {}
    for label, group in [(str(size), [r for r in results if r.size == size]) for size in sizes] + [('all', results)]:
        if not group:
            continue
        row: dict[str, Any] = {'dags': len(group),
                               'critical_path_ms': statistics.median(r.critical_path for r in group) * 1000}
        for name in group[0].makespan:
            row[name] = {'ratio': _stats([r.ratio(name) for r in group]),
                         'sampled_ratio': _stats([r.sampled_ratio(name) for r in group]),
                         'sleep_late_us': statistics.median(r.sleep_late_us[name] for r in group)}
        row['toolweave']['overhead_pct_of_cp'] = {
            part: statistics.median(r.overhead['toolweave'][part] / r.critical_path * 100 for r in group)
            for part in PARTS}
        row['toolweave']['per_step_us'] = {
            part: statistics.median(r.overhead['toolweave'][part] / (r.size if part == 'outside'
                                                                     else r.overhead['toolweave']['hops']) * 1e6
                                    for r in group)
            for part in PER_STEP}
        classes[label] = row
    return classes


def _print_table(classes: Mapping[str, Any], names: Sequence[str]) -> None:
    print('\nmakespan / critical path of the durations slept (1.00 = perfect): median, p95')
    header = f'{"steps":>6} {"dags":>4} {"cp ms":>7} | ' + ' | '.join(f'{name:>16}' for name in names)
    print(header)
    print('-' * len(header))
    for label, row in classes.items():
        cells = [f'{row[name]["ratio"]["median"]:>7.3f}, {row[name]["ratio"]["p95"]:>7.3f}' for name in names]
        print(f'{label:>6} {row["dags"]:>4} {row["critical_path_ms"]:>7.0f} | ' + ' | '.join(cells))


def _print_attribution(classes: Mapping[str, Any]) -> None:
    print('\ntoolweave: time above the sampled critical path, median % of it (see `attribute`), and [µs per step on '
          'the chain; outside: µs per plan step]')
    header = f'{"steps":>6} | ' + ' '.join(f'{part:>12}' for part in PARTS) + ' | ' + ' '.join(
        f'{"[" + part:>9}' for part in PER_STEP) + ']'
    print(header)
    print('-' * len(header))
    for label, row in classes.items():
        parts, per_step = row['toolweave']['overhead_pct_of_cp'], row['toolweave']['per_step_us']
        print(f'{label:>6} | ' + ' '.join(f'{parts[part]:>11.2f}%' for part in PARTS) + ' | '
              + ' '.join(f'{per_step[part]:>9.0f}' for part in PER_STEP))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table and write the JSON report; returns the report."""
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_scheduling', description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='a few small DAGs (seconds, for smoke tests)')
    parser.add_argument('--dags', type=int, default=None, help='DAGs per size class (default 12, quick 2)')
    parser.add_argument('--output', type=Path, default=RESULTS, help=f'JSON report path (default {RESULTS})')
    parser.add_argument('--backend', choices=('asyncio', 'trio'), default='asyncio')
    parser.add_argument('--median-ms', type=float, default=None,
                        help='median step latency (default 10, quick 4); the tail is clipped at 7.5x the median')
    parser.add_argument('--no-peers', action='store_true', help='skip LangGraph even when it is installed')
    args = parser.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else SIZES
    per_size = args.dags or (2 if args.quick else 12)
    median, max_depth = (0.004, 8) if args.quick else (0.010, 30)
    if args.median_ms is not None:
        if args.median_ms <= 0:
            parser.error(f'--median-ms must be > 0, got {args.median_ms}')
        median = args.median_ms / 1000
    runners = dict(RUNNERS)
    if args.backend != 'asyncio':
        del runners['floor']  # written on bare asyncio
    if args.no_peers or not langgraph_available() or args.backend != 'asyncio':
        del runners['langgraph']

    async def measure() -> tuple[list[DagResult], dict[str, float]]:
        overshoot = await _sleep_overshoot(median)
        await _measure_dag(20, 99, median=median, max_depth=max_depth, runners=runners)  # warm-up, not measured
        results = []
        for size in sizes:
            for seed in range(per_size):
                result = await _measure_dag(size, seed, median=median, max_depth=max_depth, runners=runners)
                results.append(result)
                print(f'  {size:>4} steps, seed {seed:>2}: depth {result.depth:>3}, '
                      f'cp {result.critical_path * 1000:6.0f} ms, '
                      + ', '.join(f'{name} {result.ratio(name):.3f}' for name in runners), flush=True)
        return results, overshoot

    started = time.perf_counter()
    print(f'Scheduling benchmark ({"quick" if args.quick else "full"}): sizes {list(sizes)}, {per_size} DAGs each, '
          f'median step {median * 1000:g} ms, backend {args.backend}, executors {", ".join(runners)}', flush=True)
    results, overshoot = anyio.run(measure, backend=args.backend)
    classes = _summarise(results, sizes)
    _print_table(classes, list(runners))
    _print_attribution(classes)
    largest = classes[str(sizes[-1])]['toolweave']['ratio']['median']
    verdict = largest <= GOAL_MEDIAN_500 if sizes[-1] == 500 else None
    print(f'\nsleep({overshoot["delay_ms"]:g} ms) alone wakes late by median {overshoot["median_ms"]:.2f} ms, '
          f'p95 {overshoot["p95_ms"]:.2f} ms (not counted against any executor: the critical path uses the '
          'durations slept)')
    print(f'goal for toolweave: median <= {GOAL_MEDIAN_500} on {sizes[-1]}-step DAGs: '
          f'{"n/a (quick)" if verdict is None else "met" if verdict else "MISSED"} (median {largest:.3f})')
    report = {
        'benchmark': 'scheduling',
        'mode': 'quick' if args.quick else 'full',
        'backend': args.backend,
        'executors': list(runners),
        'python': sys.version.split()[0],
        'platform': platform.platform(),
        'latency': {'distribution': 'lognormal (sigma 0.9), clipped to [median / 8, 7.5 x median]', 'median_s': median},
        'sleep_overshoot': overshoot,
        'goal': {'median_500': GOAL_MEDIAN_500, 'met': verdict},
        'classes': classes,
        'dags': [asdict(r) for r in results],
        'seconds': time.perf_counter() - started,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + '\n')
    print(f'wrote {args.output} ({report["seconds"]:.1f} s)')
    return report


if __name__ == '__main__':
    main()
