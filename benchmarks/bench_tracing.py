"""Tracing: what OpenTelemetry spans cost on a 10k-step plan, off and on.

One plan, the overhead benchmark's 10k-step random DAG (width 100, up to 3 references per step), run with
`run_plan` in five ways, interleaved, each run in a fresh event loop (asyncio):

- **floor**: the hand-written eager runner of `benchmarks/_floor.py` (the reference of the overhead benchmark);
- **off**: toolweave with tracing off, the default;
- **API only**: `instrument()` with no OpenTelemetry SDK installed as the global provider, so every span is the
  API's no-op span (toolweave's own work of tracing, and nothing recorded);
- **not sampled**: the OpenTelemetry SDK with a sampler that records no trace (`ALWAYS_OFF`), the cost of the
  traces a sampler leaves out;
- **no-op exporter**: the OpenTelemetry SDK (`TracerProvider`, `SimpleSpanProcessor`) with an exporter that drops
  every span: spans are created, filled, ended and handed over, as in production, minus the network;
- **in-memory exporter**: the same with the SDK's `InMemorySpanExporter`, which keeps every span (the tests' setup).

With tracing on, each step is two spans (`plan_step`, and the `execute_tool` span of its call), plus one for the
plan. Tools: `noop` never suspends (so everything measured is the runner's), `yield` suspends once.

Reported: microseconds per step (median over the repeats), each mode's ratio to `off` and to the floor.

Run: `python -m benchmarks.bench_tracing` (about a minute), `--quick` (1k steps, seconds).
Writes `benchmarks/results/tracing.json` (or `--output PATH`).
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio

from benchmarks._dags import random_dag
from benchmarks._floor import run_floor
from benchmarks.bench_overhead import NoopTool, YieldTool
from toolweave import InstrumentationSettings, instrument
from toolweave.plan import run_plan
from toolweave.plan._validate import as_toolset
from toolweave.tools import Tool

try:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, Sampler
except ImportError as exc:  # pragma: no cover - the SDK comes with the `otel` extra
    raise ImportError('The tracing benchmark needs the OpenTelemetry SDK: `pip install -e ".[otel]"`.') from exc

__all__ = ('main',)

RESULTS = Path(__file__).parent / 'results' / 'tracing.json'
MODES = ('floor', 'off', 'API only', 'not sampled', 'no-op exporter', 'in-memory exporter')


class DroppingExporter(SpanExporter):
    """An exporter that accepts every span and keeps none."""

    def __init__(self) -> None:
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.exported += len(spans)
        return SpanExportResult.SUCCESS


@dataclass
class Case:
    tool: str
    steps: int
    runs: dict[str, list[float]] = field(default_factory=dict[str, list[float]])
    """Every measured run's seconds, per mode."""
    us_per_step: dict[str, float] = field(default_factory=dict[str, float])
    spans_per_run: dict[str, int] = field(default_factory=dict[str, int])

    def ratio(self, mode: str, reference: str) -> float:
        return self.us_per_step[mode] / self.us_per_step[reference]


def _sdk(exporter: SpanExporter, sampler: Sampler | None = None) -> InstrumentationSettings:
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return InstrumentationSettings(tracer_provider=provider)


def _runners(case: Case) -> dict[str, tuple[Callable[[], Awaitable[Any]], InstrumentationSettings | bool,
                                            Callable[[], int]]]:
    """Per mode: the run, the tracing it runs with, and how many spans the last run recorded."""
    plan = random_dag(case.steps, seed=7, width=100, max_deps=3, shuffle=True)
    tool: Tool = {'noop': NoopTool, 'yield': YieldTool}[case.tool]()
    toolset = as_toolset([tool])
    dropping = DroppingExporter()
    memory = InMemorySpanExporter()

    async def toolweave() -> None:
        assert (await run_plan(plan, toolset, max_steps=case.steps)).succeeded == case.steps

    async def floor() -> None:
        await run_floor(plan, {tool.name: tool})

    def dropped() -> int:
        count, dropping.exported = dropping.exported, 0
        return count

    def kept() -> int:
        count = len(memory.get_finished_spans())
        memory.clear()
        return count

    return {'floor': (floor, False, lambda: 0), 'off': (toolweave, False, lambda: 0),
            'API only': (toolweave, True, lambda: 0), 'not sampled': (toolweave, _sdk(dropping, ALWAYS_OFF), dropped),
            'no-op exporter': (toolweave, _sdk(dropping), dropped),
            'in-memory exporter': (toolweave, _sdk(memory), kept)}


def _timed(run: Callable[[], Awaitable[Any]], tracing: InstrumentationSettings | bool) -> float:
    async def timed() -> float:
        started = time.perf_counter()
        await run()
        return time.perf_counter() - started

    gc.collect()
    instrument(tracing)
    try:
        return anyio.run(timed)
    finally:
        instrument(False)


def _measure(case: Case, repeats: int) -> Case:
    runners = _runners(case)
    case.runs = {mode: [] for mode in runners}
    for repeat in range(repeats):
        order = list(runners) if repeat % 2 == 0 else list(reversed(runners))  # alternate who runs first
        for mode in order:
            run, tracing, spans = runners[mode]
            case.runs[mode].append(_timed(run, tracing))
            case.spans_per_run[mode] = spans()
    case.us_per_step = {mode: statistics.median(runs) / case.steps * 1e6 for mode, runs in case.runs.items()}
    return case


def _print_table(cases: Sequence[Case]) -> None:
    print(f'\n{"tool":<6} {"steps":>6} {"mode":<19} | {"us/step":>8} {"x off":>6} {"x floor":>7} {"spans/run":>9}')
    for case in cases:
        for mode in MODES:
            print(f'{case.tool:<6} {case.steps:>6} {mode:<19} | {case.us_per_step[mode]:>8.2f} '
                  f'{case.ratio(mode, "off"):>6.2f} {case.ratio(mode, "floor"):>7.2f} {case.spans_per_run[mode]:>9}')


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table and write the JSON report; returns the report."""
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_tracing', description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='1k-step plans, one run each (seconds)')
    parser.add_argument('--repeats', type=int, default=None, help='runs per mode and case (default 7, quick 1)')
    parser.add_argument('--output', type=Path, default=RESULTS, help=f'JSON report path (default {RESULTS})')
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 7)
    steps = 1_000 if args.quick else 10_000
    print(f'Tracing benchmark ({"quick" if args.quick else "full"}): {steps}-step random DAG, median of {repeats} '
          f'interleaved runs, Python {platform.python_version()}, asyncio', flush=True)
    _measure(Case('noop', 200), 1)  # warm-up: imports and first calls are not measured
    cases = []
    for tool in ('noop', 'yield'):
        case = _measure(Case(tool, steps), repeats)
        cases.append(case)
        print(f'  {tool}: off {case.us_per_step["off"]:.2f} us/step, in-memory exporter '
              f'{case.ratio("in-memory exporter", "off"):.2f}x off', flush=True)
    _print_table(cases)
    report = {
        'benchmark': 'tracing', 'mode': 'quick' if args.quick else 'full', 'python': platform.python_version(),
        'platform': platform.platform(), 'argv': sys.argv[1:], 'repeats': repeats, 'modes': list(MODES),
        'cases': [asdict(case) | {'x_off': {m: case.ratio(m, 'off') for m in MODES},
                                  'x_floor': {m: case.ratio(m, 'floor') for m in MODES}} for case in cases],
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + '\n')
    print(f'wrote {args.output}')
    return report


if __name__ == '__main__':
    main()
