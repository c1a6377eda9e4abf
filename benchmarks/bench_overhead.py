"""Overhead and scale: what does running a plan cost per step, beyond the tool calls themselves?

Every step calls a no-op tool (a `Tool` whose body returns a constant result without suspending), so all the
time measured is toolweave's: parse the plan JSON text, validate it (ids, tools, references, cycles), build
the dependency graph, schedule, resolve `$ref` arguments, call the tool through `Tool.call` (approval check,
metrics, logging) and render the summary. Shapes: a chain, a fan-out (n - 1 independent steps and one step
reading all of them) and a seeded random DAG (B2's `random_dag`, width 100, up to 3 references per step), at
1k, 10k and 100k steps.

Reported per case: microseconds per step end to end (best of the repeats, wall clock; CPU time of the
process next to it, since the machine is shared; and the part of the wall time spent in Python's cyclic garbage
collector, which scans the growing heap of plan objects), the floor (the same tool calls made directly in a plain
loop, in the same run) and the ratio to it, memory per step (tracemalloc peak / steps, in a separate run),
and the growth of the total time from 10k to 100k steps (10x the steps; 10x the time is linear). A
breakdown by phase for the 10k random DAG shows where the time goes.

Targets: <= 20 us per step at 10k steps; growth <= 11x from 10k to 100k.

Where the time goes (profiled with cProfile and, for exact instruction counts, callgrind): a plan of n steps
keeps about 4n objects alive that the cyclic garbage collector tracks (each step's `PlanStep` and `StepRecord`
and the JSON object and array of its arguments; everything else is untracked or freed at once). CPython's full
collections scan the whole heap, and they start whenever the objects kept since the last one exceed a quarter of
those that survived it, so while a plan is being built and run they come back again and again: the `gc us`
column. That share grows with the plan (about 1.5 us per step at 1k, 6-8 at 10k, 14-15 at 100k on this
machine) and is most of the growth above 10x; the rest of the work is linear. An application that runs huge
plans can tune the collector (`gc.freeze()` after start-up, `gc.set_threshold`); toolweave leaves the
interpreter's settings alone.

Run: `python -m benchmarks.bench_overhead` (a minute or two), `--quick` (1k and 5k steps, seconds).
Writes `benchmarks/results/overhead.json` (or `--output PATH`).
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from benchmarks._dags import chain, fan_out, random_dag
from toolweave.plan import run_plan
from toolweave.plan._executor import execute
from toolweave.plan._parse import parse_lenient
from toolweave.plan._validate import as_toolset, prepare
from toolweave.tools import Tool, ToolCallContext, ToolDefinition, ToolResult
from toolweave.tools._toolset import Toolset

__all__ = ('NoopTool', 'main')

RESULTS = Path(__file__).parent / 'results' / 'overhead.json'
SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (1_000, 5_000)
TARGET_US = 20.0
TARGET_GROWTH = 11.0
SHAPES: dict[str, Callable[[int], dict[str, Any]]] = {
    'chain': lambda n: chain(n),
    'fan-out': lambda n: fan_out(n - 1),
    'random DAG': lambda n: random_dag(n, seed=7, width=100, max_deps=3, shuffle=True),
}


class NoopTool(Tool):
    """The tool `work`: returns a constant result and never suspends (the cost measured is the runtime's)."""

    _definition = ToolDefinition('work', 'Does nothing.')
    _result = ToolResult.success('ok')

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: Any, context: ToolCallContext) -> ToolResult:
        return self._result


class _GcClock:
    """Seconds spent in the cyclic garbage collector while installed (its callbacks bracket each collection)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == 'start':
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started

    def __enter__(self) -> _GcClock:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


async def _toolweave(text: str, tools: Toolset, n: int) -> tuple[float, float, float]:
    with _GcClock() as collector:
        wall, cpu = time.perf_counter(), time.process_time()
        run = await run_plan(text, tools, max_steps=n + 1)
        summary = run.summary
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert run.succeeded == n and summary.startswith('{'), run
    return wall, cpu, collector.seconds


async def _floor(plan: dict[str, Any], tool: Tool) -> float:
    calls = [step['arguments'] for step in plan['steps']]
    context = ToolCallContext.EMPTY
    wall = time.perf_counter()
    for arguments in calls:
        await tool.call(arguments, context)
    return time.perf_counter() - wall


async def _phases(text: str, tools: Toolset, n: int) -> dict[str, float]:
    marks = [time.perf_counter()]
    parsed = parse_lenient(text)
    marks.append(time.perf_counter())
    prepared, problems = prepare(parsed, tools, max_steps=n + 1)
    assert prepared is not None, problems.messages()
    marks.append(time.perf_counter())
    run = await execute(prepared)
    marks.append(time.perf_counter())
    _ = run.summary
    marks.append(time.perf_counter())
    names = ('parse (JSON text -> Plan)', 'validate + compile + graph', 'execute (schedule, resolve, call)',
             'summary')
    return {name: (marks[i + 1] - marks[i]) / n * 1e6 for i, name in enumerate(names)}


def _memory(text: str, tools: Toolset, n: int) -> float:
    tracemalloc.start()
    try:
        anyio.run(_toolweave, text, tools, n)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / n


def _measure(shape: str, n: int, repeats: int, memory: bool) -> dict[str, Any]:
    plan = SHAPES[shape](n)
    text = json.dumps(plan)
    tool = NoopTool()
    tools = as_toolset([tool])
    best_wall = best_cpu = best_floor = float('inf')
    gc_seconds = 0.0
    for _ in range(repeats):
        gc.collect()
        wall, cpu, collecting = anyio.run(_toolweave, text, tools, n)
        if wall < best_wall:
            best_wall, gc_seconds = wall, collecting
        best_cpu = min(best_cpu, cpu)
        best_floor = min(best_floor, anyio.run(_floor, plan, tool))
    result = {
        'shape': shape, 'steps': n, 'repeats': repeats, 'seconds': best_wall,
        'us_per_step': best_wall / n * 1e6, 'cpu_us_per_step': best_cpu / n * 1e6,
        'gc_us_per_step': gc_seconds / n * 1e6,
        'floor_us_per_step': best_floor / n * 1e6, 'ratio_to_floor': best_wall / best_floor,
    }
    if memory:
        gc.collect()
        result['bytes_per_step'] = _memory(text, tools, n)
    return result


def _seconds_without_gc(result: dict[str, Any]) -> float:
    return float(result['seconds'] - result['gc_us_per_step'] * result['steps'] / 1e6)


def _print_table(results: list[dict[str, Any]]) -> None:
    print(f'\n{"shape":<11} {"steps":>7} {"us/step":>8} {"cpu us":>7} {"gc us":>6} {"floor":>6} {"x floor":>7} '
          f'{"KB/step":>8}')
    for r in results:
        memory = f'{r["bytes_per_step"] / 1024:8.2f}' if 'bytes_per_step' in r else f'{"-":>8}'
        print(f'{r["shape"]:<11} {r["steps"]:>7} {r["us_per_step"]:8.2f} {r["cpu_us_per_step"]:7.2f} '
              f'{r["gc_us_per_step"]:6.2f} {r["floor_us_per_step"]:6.2f} {r["ratio_to_floor"]:7.2f} {memory}')


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table and write the JSON report; returns the report."""
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_overhead', description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='1k and 5k steps only (seconds, for smoke tests)')
    parser.add_argument('--repeats', type=int, default=None, help='runs per case, best kept (default 3, quick 1)')
    parser.add_argument('--no-memory', action='store_true', help='skip the tracemalloc runs')
    parser.add_argument('--output', type=Path, default=RESULTS, help=f'JSON report path (default {RESULTS})')
    args = parser.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else SIZES
    repeats = args.repeats or (1 if args.quick else 3)
    print(f'Overhead benchmark ({"quick" if args.quick else "full"}): sizes {list(sizes)}, best of {repeats}, '
          f'Python {platform.python_version()}', flush=True)
    _measure('random DAG', 200, 1, False)  # warm-up: imports and first-call costs are not measured
    results = []
    for shape in SHAPES:
        for n in sizes:
            result = _measure(shape, n, 1 if n >= 100_000 else repeats, memory=not args.no_memory)
            results.append(result)
            print(f'  {shape:<11} {n:>7}: {result["us_per_step"]:7.2f} us/step', flush=True)
    _print_table(results)
    mid, big = (10_000, 100_000) if not args.quick else (1_000, 5_000)
    growth = {}
    growth_without_gc = {}
    for shape in SHAPES:
        by_size = {r['steps']: r for r in results if r['shape'] == shape}
        growth[shape] = by_size[big]['seconds'] / by_size[mid]['seconds']
        growth_without_gc[shape] = _seconds_without_gc(by_size[big]) / _seconds_without_gc(by_size[mid])
    dag = random_dag(mid, seed=7, width=100, max_deps=3, shuffle=True)
    phases = anyio.run(_phases, json.dumps(dag), as_toolset([NoopTool()]), mid)
    print(f'\ngrowth of total time from {mid} to {big} steps ({big // mid}x the steps): '
          + ', '.join(f'{shape} {g:.2f}x' for shape, g in growth.items()))
    print('growth without the time in the garbage collector: '
          + ', '.join(f'{shape} {g:.2f}x' for shape, g in growth_without_gc.items()))
    print(f'phases of the {mid}-step random DAG (us/step): '
          + ', '.join(f'{name} {us:.2f}' for name, us in phases.items()))
    at_target = [r for r in results if r['steps'] == 10_000]
    verdict = None
    if at_target:
        worst = max(r['us_per_step'] for r in at_target)
        worst_growth = max(growth.values())
        verdict = worst <= TARGET_US and worst_growth <= TARGET_GROWTH
        print(f'targets: <= {TARGET_US:g} us/step at 10k steps (worst {worst:.2f}), growth <= {TARGET_GROWTH:g}x '
              f'(worst {worst_growth:.2f}x): {"met" if verdict else "MISSED"}')
        without = max(r['us_per_step'] - r['gc_us_per_step'] for r in at_target)
        print(f'without the time in the garbage collector: worst {without:.2f} us/step at 10k steps')
    report = {
        'benchmark': 'overhead', 'mode': 'quick' if args.quick else 'full',
        'python': platform.python_version(), 'platform': platform.platform(), 'argv': sys.argv[1:],
        'targets': {'us_per_step_at_10k': TARGET_US, 'growth_10k_to_100k': TARGET_GROWTH}, 'met': verdict,
        'results': results, 'growth': growth, 'growth_without_gc': growth_without_gc, 'growth_between': [mid, big],
        'phases_us_per_step': phases,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + '\n')
    print(f'wrote {args.output}')
    return report


if __name__ == '__main__':
    main()
