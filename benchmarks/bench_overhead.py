"""Overhead: what does toolweave's executor cost per step, next to the cheapest runner one could write by hand?

The floor (`benchmarks/_floor.py`) is an eager DAG runner on bare asyncio: a counter per step, a task started
when a step's last dependency finishes, references replaced, `Tool.call` for each step, and nothing else (no
validation, failure policy, records or limits). toolweave runs the same plan dict with `run_plan`: validate it
(ids, tools, references, cycles), schedule it, resolve references, call each tool through `Tool.call` and keep a
record of every step. Both run in the same process, interleaved, each run in a fresh event loop (asyncio).

Tools: `noop` returns a constant and never suspends (everything measured is the runner's); `yield` suspends
once (`anyio.sleep(0)`: one turn of the event loop, like a call that is answered at once); `sleep` waits 1 ms.
Shapes: a chain, a fan-out (n - 1 independent steps and one step reading all of them) and a seeded random DAG
(width 100, up to 3 references per step); single plans of 1k to 100k steps (`noop`), 1k and 10k (`yield`), 1k
(`sleep`), and 1,000 plans of 100 steps (chain, and random DAG of width 10) started at once, each plan its own
dict (as a server's plans are: each read from its model's reply).

Reported per case: microseconds per step (median over the repeats, wall clock), the floor's, and their ratio;
memory per step (tracemalloc peak / steps, one run each: what the run itself allocates); for the 1,000 concurrent
`noop` plans, also the peak resident memory of a fresh process that makes the plans and runs them (one process per
runner: interpreter, imports and plan dicts included, as a server's process holds them); the phases of a 10k-step
random DAG; plans of 1, 5 and 20 steps run one after another (µs a plan: what a plan costs as a whole, reported
with no goal); and, when
LangGraph is installed (`pip install -e '.[bench]'`), LangGraph on the 1k-step single plans (a peer, in the
same run).

Goals: with `noop` tools, toolweave <= 1.15x the floor; with suspending tools, <= 1.2x; memory <= 1.3x the floor's,
both as the process's peak (the 1,000 concurrent plans) and, stricter, as what the run allocates per step (100k-step
plans and the 1,000 concurrent plans).

Run: `python -m benchmarks.bench_overhead` (about five minutes), `--quick` (seconds), `--no-gc` (the cyclic garbage
collector off while measuring), `--loop uvloop` (every runner on uvloop, where it installs), `--loop trio` (toolweave
on trio; the floor, written on bare asyncio, stays on asyncio's own loop, so the ratio is what a trio user pays
against the cheapest asyncio runner).
Writes `benchmarks/results/overhead.json` (or `--output PATH`).
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import multiprocessing
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from benchmarks._dags import chain, fan_out, random_dag
from benchmarks._floor import gather, run_floor
from benchmarks._peers import langgraph_available, langgraph_runner
from toolweave.plan import run_plan
from toolweave.plan._kernel import Run
from toolweave.plan._parse import parse_lenient
from toolweave.plan._validate import as_toolset, prepare
from toolweave.tools import Tool, ToolCallContext, ToolDefinition, ToolResult

__all__ = ('NoopTool', 'SleepTool', 'YieldTool', 'main')

RESULTS = Path(__file__).parent / 'results' / 'overhead.json'
BACKEND_OPTIONS: dict[str, Any] = {}
"""anyio's asyncio options for every measured run (`{'use_uvloop': True}` with `--loop uvloop`)."""
BACKENDS: dict[str, str] = {}
"""The anyio backend a runner runs on, by name, when not asyncio (`{'toolweave': 'trio'}` with `--loop trio`)."""
GOAL_NOOP = 1.15
GOAL_SUSPENDING = 1.2
GOAL_MEMORY = 1.3
SHAPES: dict[str, Callable[[int], dict[str, Any]]] = {
    'chain': lambda n: chain(n),
    'fan-out': lambda n: fan_out(n - 1),
    'random DAG': lambda n: random_dag(n, seed=7, width=100, max_deps=3, shuffle=True),
}
CONCURRENT_SHAPES: dict[str, Callable[[int], dict[str, Any]]] = {
    'chain': lambda n: chain(n),
    'random DAG': lambda n: random_dag(n, seed=7, width=10, max_deps=3, shuffle=True),
}


class NoopTool(Tool):
    """The tool `work`: returns a constant result and never suspends."""

    _definition = ToolDefinition('work', 'Does nothing.')
    _result = ToolResult.success('ok')

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: Any, context: ToolCallContext) -> ToolResult:
        return self._result


class YieldTool(NoopTool):
    """`work` that suspends once (one turn of the event loop), like a call answered at once."""

    async def execute(self, arguments: Any, context: ToolCallContext) -> ToolResult:
        await anyio.lowlevel.checkpoint()
        return self._result


class SleepTool(NoopTool):
    """`work` that waits 1 ms."""

    async def execute(self, arguments: Any, context: ToolCallContext) -> ToolResult:
        await anyio.sleep(0.001)
        return self._result


TOOLS: dict[str, Callable[[], Tool]] = {'noop': NoopTool, 'yield': YieldTool, 'sleep': SleepTool}


@dataclass
class Case:
    """One workload, run by every runner."""

    tool: str
    shape: str
    steps: int
    """Steps per plan."""
    plans: int = 1
    """Plans started at once."""
    us_per_step: dict[str, float] = field(default_factory=dict[str, float])
    """Median microseconds per step (all plans' steps), per runner."""
    runs: dict[str, list[float]] = field(default_factory=dict[str, list[float]])
    """Every measured run's seconds, per runner."""
    bytes_per_step: dict[str, float] = field(default_factory=dict[str, float])
    peak_mib: dict[str, float] = field(default_factory=dict[str, float])
    """Peak resident memory (MiB) of a fresh process that made the plans and ran them, per runner."""
    young_collections: dict[str, int] = field(default_factory=dict[str, int])
    """Young-generation runs of the garbage collector during each runner's last measured run: how many objects a
    runner keeps alive long enough for a collection to see them."""

    @property
    def label(self) -> str:
        return f'{self.plans} x {self.shape}' if self.plans > 1 else self.shape

    @property
    def total_steps(self) -> int:
        return self.steps * self.plans

    def ratio(self, runner: str = 'toolweave') -> float:
        return self.us_per_step[runner] / self.us_per_step['floor']

    @property
    def goal(self) -> float:
        return GOAL_NOOP if self.tool == 'noop' else GOAL_SUSPENDING


def _runners(case: Case) -> dict[str, Callable[[], Awaitable[Any]]]:
    plan = (CONCURRENT_SHAPES if case.plans > 1 else SHAPES)[case.shape](case.steps)
    # Concurrent plans are each their own dict, as a server's plans are (each read from its model's reply), so that
    # every runner holds and walks what a plan is while it runs; made before anything is measured.
    plans = [plan] if case.plans == 1 else [copy.deepcopy(plan) for _ in range(case.plans)]
    tool = TOOLS[case.tool]()
    toolset = as_toolset([tool])
    tools = {tool.name: tool}

    async def toolweave() -> None:
        runs = [run_plan(each, toolset, max_steps=case.steps) for each in plans]
        if case.plans == 1:
            assert (await runs[0]).succeeded == case.steps
        elif BACKENDS.get('toolweave', 'asyncio') == 'asyncio':
            await gather(runs)
        else:
            await _gather_anyio(runs)

    async def floor() -> None:
        await gather([run_floor(each, tools) for each in plans])

    return {'toolweave': toolweave, 'floor': floor}


async def _gather_anyio(coroutines: list[Coroutine[Any, Any, Any]]) -> None:
    """`gather` on any anyio backend: one task each in a task group (how a trio program starts many plans)."""
    async def wait(coroutine: Coroutine[Any, Any, Any]) -> None:
        await coroutine

    async with anyio.create_task_group() as group:
        for coroutine in coroutines:
            group.start_soon(wait, coroutine)


def _run(run: Callable[[], Awaitable[Any]], backend: str) -> Any:
    """`anyio.run` on `backend`, with the asyncio options of `--loop` there."""
    return anyio.run(run, backend=backend, backend_options=BACKEND_OPTIONS if backend == 'asyncio' else {})


def _timed(run: Callable[[], Awaitable[Any]], backend: str = 'asyncio') -> float:
    async def timed() -> float:
        started = time.perf_counter()
        await run()
        return time.perf_counter() - started

    gc.collect()
    return float(_run(timed, backend))


def _measure(case: Case, repeats: int, peer: bool) -> Case:
    runners = _runners(case)
    if peer:
        tool = TOOLS[case.tool]()
        runners['langgraph'] = langgraph_runner(SHAPES[case.shape](case.steps), tool)
    for name in runners:
        case.runs[name] = []
    for repeat in range(repeats):
        order = list(runners) if repeat % 2 == 0 else list(reversed(runners))  # alternate who runs first
        for name in order:
            before = gc.get_stats()[0]['collections']
            case.runs[name].append(_timed(runners[name], BACKENDS.get(name, 'asyncio')))
            case.young_collections[name] = gc.get_stats()[0]['collections'] - before
    for name, runs in case.runs.items():
        case.us_per_step[name] = statistics.median(runs) / case.total_steps * 1e6
    return case


def _memory(case: Case) -> None:
    """Peak memory a run allocates (tracemalloc), per step; the plan dict and the tools exist beforehand."""
    for name, run in _runners(case).items():
        gc.collect()
        tracemalloc.start()
        try:
            _run(run, BACKENDS.get(name, 'asyncio'))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        case.bytes_per_step[name] = peak / case.total_steps


def _process_peak(case: Case) -> None:
    """Peak resident memory of a fresh process per runner that makes the case's plans and runs them once: what a
    server running those plans holds at most, interpreter, imports and plan dicts included (as the floor's).

    Read from Linux's `VmHWM` (the high-water mark of the process's own memory since it started its program):
    `getrusage`'s peak would carry over the peak of this process, which started the child."""
    if not Path('/proc/self/status').exists():
        return
    spawn = multiprocessing.get_context('spawn')
    for name in ('toolweave', 'floor'):
        queue = spawn.SimpleQueue()
        child = spawn.Process(target=_peak_of, args=(case.tool, case.shape, case.steps, case.plans, name,
                                                     dict(BACKENDS), dict(BACKEND_OPTIONS), queue))
        child.start()
        child.join()
        if child.exitcode != 0:
            raise RuntimeError(f'measuring the peak memory of {name} on {case.label} failed (exit {child.exitcode})')
        case.peak_mib[name] = queue.get()


def _peak_of(tool: str, shape: str, steps: int, plans: int, name: str, backends: dict[str, str],
             options: dict[str, Any], queue: Any) -> None:
    """In a fresh process: run one runner on the case once, then send the process's peak resident MiB."""
    BACKENDS.update(backends)
    BACKEND_OPTIONS.update(options)
    _run(_runners(Case(tool, shape, steps, plans))[name], BACKENDS.get(name, 'asyncio'))
    for line in Path('/proc/self/status').read_text().splitlines():
        if line.startswith('VmHWM:'):
            queue.put(int(line.split()[1]) / 1024)  # kB
            return
    raise RuntimeError('/proc/self/status has no VmHWM')


async def _phases(plan: dict[str, Any], n: int) -> dict[str, float]:
    tools = as_toolset([NoopTool()])
    marks = [time.perf_counter()]
    parsed = parse_lenient(plan)
    marks.append(time.perf_counter())
    prepared, problems = prepare(parsed, tools, max_steps=n)
    assert prepared is not None, problems.messages()
    marks.append(time.perf_counter())
    run = await Run(prepared).run()
    marks.append(time.perf_counter())
    _ = run.summary
    marks.append(time.perf_counter())
    names = ('parse (dict -> Plan)', 'validate + graph', 'execute (schedule, resolve, call, record)', 'summary')
    return {name: (marks[i + 1] - marks[i]) / n * 1e6 for i, name in enumerate(names)}


SMALL_PLANS = (1, 5, 20)
"""Steps of the small plans run one after another (`_small_plans`): what a plan costs besides its steps."""


def _small_plans(count: int, repeats: int) -> dict[str, dict[str, float]]:
    """Microseconds a plan, per runner, for `count` plans of each size in `SMALL_PLANS` (random DAGs of `noop` steps)
    run one after another: the cost of a plan as a whole (reading and validating it, starting and ending its run,
    its record), which the per-step figures of large plans spread thin. Reported, with no goal: the floor has
    almost nothing of it to do."""
    tool = NoopTool()
    toolset = as_toolset([tool])
    tools = {tool.name: tool}
    out: dict[str, dict[str, float]] = {}
    for steps in SMALL_PLANS:
        plan = SHAPES['random DAG'](steps)
        plans = [copy.deepcopy(plan) for _ in range(count)]  # each its own dict, as a server's are

        async def toolweave(plans: list[dict[str, Any]] = plans) -> None:
            for plan in plans:
                await run_plan(plan, toolset, max_steps=max(SMALL_PLANS))

        async def floor(plans: list[dict[str, Any]] = plans) -> None:
            for plan in plans:
                await run_floor(plan, tools)

        runs: dict[str, list[float]] = {'toolweave': [], 'floor': []}
        for repeat in range(repeats):
            for name, run in (('toolweave', toolweave), ('floor', floor))[:: 1 if repeat % 2 == 0 else -1]:
                runs[name].append(_timed(run))
        out[str(steps)] = {name: statistics.median(times) / count * 1e6 for name, times in runs.items()}
    return out


def _cases(quick: bool) -> list[Case]:
    if quick:
        return [Case('noop', shape, 1_000) for shape in SHAPES] + [Case('yield', 'random DAG', 1_000),
                                                                  Case('yield', 'random DAG', 100, plans=20)]
    cases = [Case('noop', shape, n) for shape in SHAPES for n in (1_000, 10_000, 100_000)]
    cases += [Case('yield', shape, n) for shape in SHAPES for n in (1_000, 10_000)]
    cases += [Case('sleep', shape, 1_000) for shape in SHAPES]
    cases += [Case(tool, shape, 100, plans=1_000) for tool in ('noop', 'yield', 'sleep') for shape in CONCURRENT_SHAPES]
    return cases


def _print_table(cases: Sequence[Case], peer: bool) -> None:
    print(f'\n{"tool":<6} {"shape":<18} {"steps":>7} | {"toolweave us":>12} {"floor us":>9} {"x floor":>7} {"goal":>5}'
          + (f' | {"langgraph us":>12} {"x floor":>7}' if peer else '') + f' | {"KB/step tw":>10} {"floor":>6}'
          + f' | {"peak MiB tw":>11} {"floor":>6} {"x":>5}')
    for case in cases:
        row = (f'{case.tool:<6} {case.label:<18} {case.steps:>7} | {case.us_per_step["toolweave"]:>12.2f} '
               f'{case.us_per_step["floor"]:>9.2f} {case.ratio():>7.2f} {case.goal:>5.2f}')
        if peer:
            row += (f' | {case.us_per_step["langgraph"]:>12.1f} {case.ratio("langgraph"):>7.1f}'
                    if 'langgraph' in case.us_per_step else f' | {"":>12} {"":>7}')
        if case.bytes_per_step:
            row += (f' | {case.bytes_per_step["toolweave"] / 1024:>10.2f} '
                    f'{case.bytes_per_step["floor"] / 1024:>6.2f}')
        if case.peak_mib:
            row += (f' | {case.peak_mib["toolweave"]:>11.1f} {case.peak_mib["floor"]:>6.1f} '
                    f'{case.peak_mib["toolweave"] / case.peak_mib["floor"]:>5.2f}')
        print(row)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table and write the JSON report; returns the report."""
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_overhead', description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='1k-step plans and 20 concurrent plans (seconds)')
    parser.add_argument('--repeats', type=int, default=None, help='runs per runner and case (default 7, quick 1)')
    parser.add_argument('--no-memory', action='store_true',
                        help='skip the memory runs (tracemalloc, and the fresh processes of the peak)')
    parser.add_argument('--no-peers', action='store_true', help='skip LangGraph even when it is installed')
    parser.add_argument('--loop', choices=('asyncio', 'uvloop', 'trio'), default='asyncio',
                        help="the event loop of every runner: asyncio's own (default) or uvloop (where it installs); "
                             'trio: toolweave on trio, the floor (bare asyncio) on asyncio')
    parser.add_argument('--no-gc', action='store_true',
                        help="turn Python's cyclic garbage collector off while measuring (what walking the objects "
                             'each runner keeps alive costs)')
    parser.add_argument('--output', type=Path, default=RESULTS, help=f'JSON report path (default {RESULTS})')
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 7)
    BACKEND_OPTIONS.clear()  # a second call in one process starts from the defaults
    BACKENDS.clear()
    if args.no_gc:
        gc.disable()
    if args.loop == 'uvloop':
        try:
            import uvloop  # noqa: F401
        except ImportError:
            print('uvloop is not installed (pip install uvloop): nothing to measure.')
            return {'skipped': 'uvloop not installed'}
        BACKEND_OPTIONS['use_uvloop'] = True
    if args.loop == 'trio':
        try:
            import trio  # noqa: F401
        except ImportError:
            print('trio is not installed (pip install trio): nothing to measure.')
            return {'skipped': 'trio not installed'}
        BACKENDS['toolweave'] = 'trio'
    peers = langgraph_available() and not args.no_peers
    print(f'Overhead benchmark ({"quick" if args.quick else "full"}): median of {repeats} interleaved runs, '
          f'Python {platform.python_version()}, {args.loop}{", cyclic GC off" if args.no_gc else ""}; '
          f'peers: {"LangGraph" if peers else "none"}', flush=True)
    _measure(Case('noop', 'random DAG', 200), 1, peer=False)  # warm-up: imports and first calls are not measured
    cases = []
    for case in _cases(args.quick):
        peer = peers and case.plans == 1 and case.steps == 1_000 and case.tool != 'sleep'
        _measure(case, max(1, repeats // 2) if case.steps >= 100_000 else repeats, peer)
        if not args.no_memory and case.tool == 'noop' and (case.plans > 1 or case.steps == max(
                c.steps for c in _cases(args.quick))):
            _memory(case)
            if case.plans > 1:
                _process_peak(case)
        cases.append(case)
        print(f'  {case.tool:<6} {case.label:<18} {case.steps:>7}: {case.us_per_step["toolweave"]:7.2f} us/step, '
              f'{case.ratio():.2f}x floor', flush=True)
    _print_table(cases, peers)
    size = 1_000 if args.quick else 10_000
    phases = anyio.run(_phases, SHAPES['random DAG'](size), size)
    print(f'\nphases of the {size}-step random DAG (us/step): '
          + ', '.join(f'{name} {us:.2f}' for name, us in phases.items()))
    small = _small_plans(100 if args.quick else 1_000, repeats)
    print('small plans, one after another (us a plan, toolweave vs floor, no goal): ' + '; '.join(
        f'{steps} steps {us["toolweave"]:.0f} vs {us["floor"]:.0f} ({us["toolweave"] / us["floor"]:.2f}x)'
        for steps, us in small.items()))
    print('young garbage collections in one run of the concurrent cases (toolweave, floor): ' + '; '.join(
        f'{c.tool} {c.label} {c.young_collections["toolweave"]}, {c.young_collections["floor"]}'
        for c in cases if c.plans > 1))
    verdicts = {
        'noop': max(c.ratio() for c in cases if c.tool == 'noop'),
        'suspending': max((c.ratio() for c in cases if c.tool != 'noop'), default=float('nan')),
        'memory (process peak)': max((c.peak_mib['toolweave'] / c.peak_mib['floor'] for c in cases if c.peak_mib),
                                     default=float('nan')),
        'memory (allocated per step)': max((c.bytes_per_step['toolweave'] / c.bytes_per_step['floor']
                                            for c in cases if c.bytes_per_step), default=float('nan')),
    }
    goals = {'noop': GOAL_NOOP, 'suspending': GOAL_SUSPENDING, 'memory (process peak)': GOAL_MEMORY,
             'memory (allocated per step)': GOAL_MEMORY}
    for name, worst in verdicts.items():
        verdict = 'not measured' if worst != worst else 'met' if worst <= goals[name] else 'MISSED'  # NaN: no case
        print(f'goal {name}: <= {goals[name]}x the floor, worst {worst:.2f}x: {verdict}')
    report = {
        'benchmark': 'overhead', 'mode': 'quick' if args.quick else 'full', 'python': platform.python_version(),
        'platform': platform.platform(), 'argv': sys.argv[1:], 'repeats': repeats, 'peers': peers, 'loop': args.loop,
        'gc': not args.no_gc,
        'goals': goals, 'worst_ratios': verdicts, 'cases': [asdict(case) | {'ratio': case.ratio()} for case in cases],
        'phases_us_per_step': phases, 'small_plans_us_per_plan': small,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + '\n')
    print(f'wrote {args.output}')
    return report


if __name__ == '__main__':
    main()
