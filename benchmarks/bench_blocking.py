"""Blocking: the longest stretch the event loop is held while the largest plans the limits accept are read and
validated, and while a `select` expression spends its whole budget.

Each row runs its work beside `LoopWatch` (a ticker task waking every 10 ms; the longest gap between two wake-ups
is the longest stretch the loop was held, plus up to 10 ms), on asyncio, in a fresh event loop, and reports:

- **gap**: the longest gap while toolweave does the work (`run_plan` or the plan tool: reading and validating
  large plans off the event loop; an expression that needs more than a few milliseconds evaluated in a worker
  thread), the median over the repeats, and the longest of all;
- the **floor** row: plain Python work in a worker thread, the best that moving work off the loop can do here;
- **inline gap**: the same work done on the event loop, as it was before (`parse_lenient` + `prepare`, or the
  expression's evaluation, called directly): the reference, measured in the same run;
- **gc pause**: the longest garbage collection during the row. CPython collects its oldest generation after many
  allocations, holding the interpreter whichever thread allocated; that pause reaches the loop too, and bounds
  what moving work to a thread can do;
- **peak MB**: the most memory the work allocated at once (`tracemalloc`, in a separate run: it slows everything
  down); not measured with `--quick` or `--no-memory`.

Plans over a limit are refused before they are read: those rows show how long a refusal holds the loop, against
reading them whole as before.

Run: `python -m benchmarks.bench_blocking` (a few minutes), `--quick` (smaller plans, no memory, seconds). Writes
`benchmarks/results/blocking.json` (or `--output PATH`). Rows for the executor and the store go in `ROWS`.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio

from toolweave import PlanTool, PlanValidationError, run_plan
from toolweave.plan._expr import MAX_EXPRESSION_WORK, _Evaluation, compile_expression
from toolweave.plan._parse import parse_lenient
from toolweave.plan._validate import as_toolset, prepare
from toolweave.testing import FakeTool, LoopWatch

__all__ = ('ROWS', 'Row', 'main')

RESULTS = Path(__file__).parent / 'results' / 'blocking.json'


@dataclass
class Row:
    name: str
    work: Callable[[], Awaitable[Any]]
    """What toolweave does."""
    inline: Callable[[], Awaitable[Any]] | None
    """The same work on the event loop (the reference), if there is one."""


@dataclass
class Result:
    name: str
    seconds: float
    gap_ms: float
    """The median over the repeats of the longest gap of each run."""
    gap_max_ms: float
    """The longest gap of all the repeats."""
    inline_seconds: float | None
    inline_gap_ms: float | None
    gc_pause_ms: float
    peak_mb: float | None = None


def steps(count: int, payload: Any = 'x') -> list[dict[str, Any]]:
    """`count` steps, each referring to the one before; the last calls a tool that does not exist, so the plan is
    read and validated whole and then refused: nothing runs, only validation is measured."""
    made = [{'id': f's{i}', 'tool': 'echo', 'arguments': {'text': f'$ref:s{i - 1}' if i else 'go', 'data': payload}}
            for i in range(count)]
    made[-1]['tool'] = 'missing'
    return made


TOOLS = as_toolset([FakeTool('echo')])


def refused(plan: Any, **limits: Any) -> Callable[[], Awaitable[Any]]:
    async def work() -> None:
        try:
            await run_plan(plan, TOOLS, **limits)
        except PlanValidationError:
            return
        raise AssertionError('the plan was expected to be refused')

    return work


def read_inline(plan: Any, max_steps: int = 10_000) -> Callable[[], Awaitable[Any]]:
    """Reading and validating on the event loop, with no limit on bytes (the path before the limits)."""
    async def work() -> None:
        parsed = parse_lenient(plan, max_bytes=None)
        prepare(parsed, TOOLS, max_steps=max_steps)

    return work


def plan_tool(plan: str) -> Callable[[], Awaitable[Any]]:
    async def work() -> None:
        result = await PlanTool(TOOLS).call(plan)
        assert result.error is not None

    return work


def expression(text: str, value: Any) -> tuple[Callable[[], Awaitable[Any]], Callable[[], Awaitable[Any]]]:
    plan = {'steps': [{'id': 'v', 'tool': 'value', 'arguments': {}}, {'id': 'x', 'from': '$ref:v', 'select': text}]}
    tools = [FakeTool('value', value)]
    compiled = compile_expression(text)

    async def work() -> None:
        run = await run_plan(plan, tools)
        assert run.step('x').status == 'failed', run.step('x').error  # it spent its whole budget

    async def inline() -> None:
        try:
            _Evaluation(compiled, MAX_EXPRESSION_WORK).run(value)
        except ValueError:
            pass

    return work, inline


def _refused_row(name: str, plan: Any, max_steps: int = 10_000) -> Row:
    return Row(name, refused(plan), read_inline(plan, max_steps))


def _text_row(name: str, payload: Any) -> Row:
    text = json.dumps({'steps': [{'id': 'a', 'tool': 'missing', 'arguments': {'x': payload}}]})
    return _refused_row(f'{name} ({len(text) / 1e6:.1f} MB text)', text)


def _steps_row(count: int, as_text: bool) -> Row:
    mapping = {'steps': steps(count)}
    if not as_text:
        return _refused_row(f'run_plan: {count:,} steps (mapping)', mapping)
    text = json.dumps(mapping)
    return _refused_row(f'run_plan: {count:,} steps ({len(text) / 1e6:.1f} MB text)', text)


def _plan_tool_row(payload: int) -> Row:
    text = json.dumps({'steps': steps(1_000, 'y' * payload)})
    return Row(f'plan tool: 1,000 steps ({len(text) / 1e6:.1f} MB text)', plan_tool(text), read_inline(text, 1_000))


def _budget_row() -> Row:
    ten = '[' + ', '.join(['@'] * 10) + ']'
    work, inline = expression(ten + f' | [].{ten}' * 6 + ' | length(@)', 1)
    return Row('select: an expression spending its whole work budget', work, inline)


def _spin(count: int) -> int:
    total = 0
    for i in range(count):
        total += i
    return total


def _floor_row(count: int) -> Row:
    """The reference: plain Python work in a worker thread, the best that moving work off the event loop can do on
    this machine (the interpreter passes between threads every 5 ms; a busy machine adds its own delays)."""
    async def work() -> None:
        await anyio.to_thread.run_sync(_spin, count)

    async def inline() -> None:
        _spin(count)

    return Row(f'floor: a Python loop of {count:,} steps in a worker thread', work, inline)


def rows(quick: bool) -> Iterator[Row]:
    """The rows, each made when it is measured (so the heap holds one row's plans at a time: a garbage collection
    during a row walks that row's objects, not every row's)."""
    scale = 10 if quick else 1
    yield _floor_row(20_000_000 // scale)
    yield _steps_row(10_000 // scale, as_text=False)
    yield _steps_row(10_000 // scale, as_text=True)
    yield _plan_tool_row(1_900 // scale)
    yield _text_row('run_plan: numbers', [7] * (1_900_000 // scale // 3))
    yield _text_row(f'run_plan: {98_990 // scale:,} arrays', [[]] * (98_990 // scale))
    size = 100_000_000 // scale
    yield _refused_row(f'refused: {size / 1e6:.0f} MB text (max_bytes)', '{"steps": [' + ' ' * size + ']}')
    over = 10_001 if quick else 100_000  # max_steps is 10,000
    yield _refused_row(f'refused: {over:,} steps (max_steps)',
                       {'steps': [{'id': f's{i}', 'tool': 'echo', 'arguments': {}} for i in range(over)]}, 10 ** 9)
    yield _text_row('refused: 190,000 nested arrays (objects and arrays)', [[[[1]]]] * 190_000)
    yield _budget_row()


ROWS: Callable[[bool], Iterator[Row]] = rows
"""The rows of a run (`quick` or not)."""


class _GcPauses:
    def __init__(self) -> None:
        self.longest = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == 'start':
            self._started = time.perf_counter()
        else:
            self.longest = max(self.longest, time.perf_counter() - self._started)


def _watched(work: Callable[[], Awaitable[Any]]) -> tuple[float, float, float]:
    """Seconds, longest loop gap and longest garbage collection of `work`, in a fresh event loop."""
    async def run() -> tuple[float, float]:
        started = time.perf_counter()
        async with LoopWatch(0.01) as watch:
            await work()
        return time.perf_counter() - started, watch.longest_gap

    gc.collect()
    pauses = _GcPauses()
    gc.callbacks.append(pauses)
    try:
        seconds, gap = anyio.run(run)
    finally:
        gc.callbacks.remove(pauses)
    return seconds, gap, pauses.longest


def _peak(work: Callable[[], Awaitable[Any]]) -> float:
    """The most bytes `work` had allocated at once, in a fresh event loop."""
    gc.collect()
    tracemalloc.start()
    try:
        anyio.run(work)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _measure(row: Row, memory: bool, repeats: int) -> Result:
    runs = [_watched(row.work) for _ in range(repeats)]
    seconds = statistics.median(run[0] for run in runs)
    gaps = [run[1] for run in runs]
    pause = max(run[2] for run in runs)
    inline_seconds = inline_gap = None
    if row.inline is not None:
        inline_seconds, inline_gap, inline_pause = _watched(row.inline)
        pause = max(pause, inline_pause)
    return Result(row.name, seconds, statistics.median(gaps) * 1e3, max(gaps) * 1e3, inline_seconds,
                  None if inline_gap is None else inline_gap * 1e3, pause * 1e3,
                  _peak(row.work) / 1e6 if memory else None)


def _print_table(results: Sequence[Result]) -> None:
    width = max(len(result.name) for result in results)
    print(f'\n{"work":<{width}} | {"seconds":>8} {"gap ms":>7} {"max":>5} | {"inline s":>8} {"inline gap ms":>13} | '
          f'{"gc pause ms":>11} {"peak MB":>8}')
    for r in results:
        inline = (f'{r.inline_seconds:>8.2f} {r.inline_gap_ms:>13.0f}' if r.inline_seconds is not None
                  and r.inline_gap_ms is not None else f'{"-":>8} {"-":>13}')
        peak = f'{r.peak_mb:>8.1f}' if r.peak_mb is not None else f'{"-":>8}'
        print(f'{r.name:<{width}} | {r.seconds:>8.2f} {r.gap_ms:>7.0f} {r.gap_max_ms:>5.0f} | {inline} | '
              f'{r.gc_pause_ms:>11.0f} {peak}')


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table and write the JSON report; returns the report."""
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_blocking', description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='smaller plans, no memory (seconds)')
    parser.add_argument('--no-memory', action='store_true', help='skip the tracemalloc run of each row')
    parser.add_argument('--repeats', type=int, default=None, help='runs of each row (default 3, quick 1)')
    parser.add_argument('--output', type=Path, default=RESULTS, help=f'JSON report path (default {RESULTS})')
    args = parser.parse_args(argv)
    print(f'Blocking benchmark ({"quick" if args.quick else "full"}): longest event-loop gap beside a 10 ms ticker, '
          f'Python {platform.python_version()}, asyncio', flush=True)
    _watched(next(rows(True)).work)  # warm-up: imports and first calls are not measured
    results = []
    memory = not (args.quick or args.no_memory)
    repeats = args.repeats or (1 if args.quick else 3)
    for row in ROWS(args.quick):
        results.append(_measure(row, memory, repeats))
        print(f'  {row.name}: gap {results[-1].gap_ms:.0f} ms', flush=True)
    _print_table(results)
    report = {'benchmark': 'blocking', 'mode': 'quick' if args.quick else 'full', 'python': platform.python_version(),
              'platform': platform.platform(), 'argv': sys.argv[1:], 'interval_ms': 10, 'repeats': repeats,
              'rows': [asdict(result) for result in results]}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + '\n')
    print(f'wrote {args.output}')
    return report


if __name__ == '__main__':
    main()
