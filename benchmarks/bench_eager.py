"""Eager plans: steps that start while the model is still writing the plan, against waiting for the whole plan.

A 10-step read-only plan (seeded: six independent fetches and four steps that combine two earlier results; every
tool waits 0.5-2 s) is the argument of one `execute_tool_plan` call that `ScriptedModel` streams at 40 tokens a
second (four characters a token, the documented estimate), through the real `Agent` loop. Two ways, interleaved:

- **whole plan**: `Agent(tool_planning=True)` run with `run_stream`: the plan streams, and runs once it has arrived;
- **eager**: `Agent(tool_planning=True, eager_plans=True)`: each step starts once it has arrived, if its tool is
  read-only and what it refers to has finished.

Measured: the time from the run's start to the plan's end (the last step's end), per plan. References, computed
from the same plan and stream: **generation** (the plan's text at the stream's rate), the **critical path** (the
longest chain of tool waits), `max(generation, critical path)`, and the **arrival bound**: the earliest any
executor could end the plan given when each step arrives in the stream (a step arrives once the next one starts;
it can start no earlier, nor before the steps it refers to end). A step that arrives last cannot end before its
arrival plus its own wait, so `max(generation, critical path)` is reachable only when the last steps to arrive
are short; the arrival bound is what eager execution can reach.

The eager runs are within 5 % of the arrival bound when every plan's eager ÷ arrival bound is at most 1.05 (the
summary says so, and the JSON holds `within_5_percent_of_arrival_bound`).

**Validation cost** (`--no-runs` runs only this part): a plan of 100, 400 and 800 steps in the same mix (seeded:
fetches, and steps that combine two earlier fetches), streamed four characters at a time as `ScriptedModel` streams
it into the stream of an `execute_tool_plan` call (`PlanTool.stream`; its read-only steps start as they arrive), and
the same plan sent whole. Measured in the same run, the best of 15 repetitions (the fewest that gave the same
ratios run after run on a shared machine; the best of 7 moved the 800-step ratio by ±0.06):

- **validation**: what the stream's validator spends while the plan arrives (checking each arrived step,
  `Validator.admit` / `hold`, timed where the stream calls them) plus the validation of the whole plan at close
  (`prepare(..., arrived=...)`, which takes the steps checked as they arrived as checked), against validating the
  plan whole once (`prepare`). Its ratio stays about the same as the plan grows: the validation is linear. Each
  side checks steps just read, as in use: the whole plan is read right before it is validated, and the stream's
  steps are read again (from JSON, untimed) right before they are admitted, rather than checked as the objects the
  stream made repetitions earlier, which the caches no longer hold (docs/benchmarks.md says what that changed).
- **in all**: everything the stream does with the text (`PlanStream.feed` over every piece: reading, validating
  and growing the run) plus what a call does at close (reading the whole text, then the validation above), against
  reading and validating the whole text once (`parse_lenient` + `prepare`).
- **before**: what re-validating the plan so far for every arrived step cost (the former way), for reference.

Run: `python -m benchmarks.bench_eager` (about a minute and a half), `--quick` (ten times faster stream and tools,
one plan, fewer repetitions: seconds). Writes `benchmarks/results/eager.json` (or `--output PATH`).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from time import perf_counter
from typing import Any
from unittest import mock

import anyio
import anyio.lowlevel

from toolweave import Agent, PlanTool, Toolset, tool
from toolweave.agent import PlanStepFinished
from toolweave.plan import _stream
from toolweave.plan._model import Plan, PlanStep
from toolweave.plan._parse import Parsed, Problems, parse_lenient
from toolweave.plan._validate import PLAN_TOOL_NAMES, Validator, prepare
from toolweave.testing import CHARS_PER_TOKEN, ScriptedModel

__all__ = ('main',)

RESULTS = Path(__file__).parent / 'results' / 'eager.json'
TOKENS_PER_SECOND = 40.0
VALIDATION_SIZES = (100, 400, 800)
ARRIVAL_SLACK = 1.05
"""Eager runs should end within 5 % of the arrival bound."""


@dataclass(frozen=True, slots=True)
class Case:
    seed: int
    waits: dict[str, float]
    """Each step's tool wait, seconds."""
    plan: dict[str, Any]


def make_case(seed: int, scale: float) -> Case:
    rng = random.Random(seed)
    steps: list[dict[str, Any]] = []
    waits: dict[str, float] = {}
    for i in range(6):
        step_id = f'fetch_{i}'
        steps.append({'id': step_id, 'tool': 'fetch', 'arguments': {'key': f'region-{i}', 'wait': 0.0}})
        waits[step_id] = rng.uniform(0.5, 2.0) * scale
    for i in range(4):
        step_id = f'combine_{i}'
        a, b = rng.sample(range(6), 2)
        steps.append({'id': step_id, 'tool': 'combine',
                      'arguments': {'first': f'$ref:fetch_{a}', 'second': f'$ref:fetch_{b}', 'wait': 0.0}})
        waits[step_id] = rng.uniform(0.5, 2.0) * scale
    for step in steps:
        step['arguments']['wait'] = round(waits[step['id']], 4)
        waits[step['id']] = step['arguments']['wait']
    plan = {'steps': steps, 'output_steps': [f'combine_{i}' for i in range(4)]}
    return Case(seed, waits, plan)


@tool(read_only=True)
async def fetch(key: str, wait: float) -> dict[str, Any]:
    """Fetch the figures of a region (read-only)."""
    await anyio.sleep(wait)
    return {'key': key, 'total': len(key)}


@tool(read_only=True)
async def combine(first: dict[str, Any], second: dict[str, Any], wait: float) -> int:
    """Add two regions' totals (read-only)."""
    await anyio.sleep(wait)
    return int(first['total']) + int(second['total'])


def _references(step: dict[str, Any]) -> list[str]:
    return [value[len('$ref:'):] for value in step['arguments'].values()
            if isinstance(value, str) and value.startswith('$ref:')]


def bounds(case: Case, chars_per_second: float) -> dict[str, float]:
    """Generation time, critical path, their max, and the arrival bound (see the module docstring)."""
    text = json.dumps(case.plan, separators=(',', ':'))  # what ScriptedModel streams: compact JSON
    generation = len(text) / chars_per_second
    steps = case.plan['steps']
    ends: dict[str, float] = {}
    path: dict[str, float] = {}
    for index, step in enumerate(steps):
        if index + 1 < len(steps):  # it arrives once the next step's object opens
            following = text.index(json.dumps({'id': steps[index + 1]['id']}, separators=(',', ':'))[:-1])
        else:  # the last one once something follows the list
            following = text.index('"output_steps"')
        arrival = following / chars_per_second
        refs = _references(step)
        ends[step['id']] = max([arrival, *(ends[ref] for ref in refs)]) + case.waits[step['id']]
        path[step['id']] = max([0.0, *(path[ref] for ref in refs)]) + case.waits[step['id']]
    critical = max(path.values())
    return {'generation': generation, 'critical_path': critical, 'max_of_both': max(generation, critical),
            'sum_of_both': generation + critical, 'arrival_bound': max(ends.values())}


async def run_once(case: Case, *, eager: bool, tokens_per_second: float) -> float:
    """Seconds from the run's start to its plan's last step's end."""
    model = ScriptedModel([{'tool': 'execute_tool_plan', 'arguments': case.plan}, 'Done.'],
                          tokens_per_second=tokens_per_second)
    agent = Agent(model, tools=[fetch, combine], tool_planning=True, eager_plans=eager)
    last_end = 0.0
    started = time.perf_counter()
    async with agent.run_stream('Combine the regions.') as stream:
        async for event in stream:
            if isinstance(event, PlanStepFinished):
                last_end = time.perf_counter() - started
    (plan,) = stream.result.plan_runs
    if not plan.ok or (eager and len(plan.eager) != len(case.plan['steps'])):
        raise RuntimeError(f'plan {case.seed}: ok={plan.ok}, eager steps {plan.eager}')
    return last_end


# --- validation cost ------------------------------------------------------------------------------------------------

def large_plan(steps: int) -> dict[str, Any]:
    """A plan of `steps` steps in the ten-step plans' mix: fetches, and steps that combine two earlier fetches
    (seeded)."""
    rng = random.Random(steps)
    fetched: list[str] = []
    out: list[dict[str, Any]] = []
    for i in range(steps):
        if len(fetched) < 2 or rng.random() < 0.6:
            fetched.append(f'fetch_{i}')
            out.append({'id': f'fetch_{i}', 'tool': 'fetch', 'arguments': {'key': f'region-{i}', 'wait': 0.0}})
        else:
            a, b = rng.sample(fetched, 2)
            out.append({'id': f'combine_{i}', 'tool': 'combine',
                        'arguments': {'first': f'$ref:{a}', 'second': f'$ref:{b}', 'wait': 0.0}})
    return {'steps': out, 'output_steps': [step['id'] for step in out[-4:]]}


class _Recorder(Validator):
    """The stream's validator, noting each call the stream makes (to make them again, timed alone) and timing it
    where the stream makes it."""

    __slots__ = ()
    calls: list[tuple[str, Any]] = []
    spent = 0.0

    def admit(self, step: PlanStep) -> bool:
        _Recorder.calls.append(('admit', step))
        started = perf_counter()
        try:
            return super().admit(step)
        finally:
            _Recorder.spent += perf_counter() - started

    def hold(self, step_id: str) -> None:
        _Recorder.calls.append(('hold', step_id))
        started = perf_counter()
        try:
            super().hold(step_id)
        finally:
            _Recorder.spent += perf_counter() - started


def whole_validation(planner: PlanTool, parsed: Parsed, arrived: Validator | None = None) -> float:
    """Seconds validating the whole plan as a call of `planner` does (`arrived`: after the plan streamed in)."""
    options = planner.options
    started = perf_counter()
    prepared, problems = prepare(parsed, planner.tools, max_steps=options.max_steps, max_items=options.max_items,
                                 extra_refused=frozenset({planner.name}), earlier={}, arrived=arrived)
    spent = perf_counter() - started
    if prepared is None:
        raise RuntimeError(f'the plan did not validate: {problems.messages()}')
    return spent


async def stream_once(planner: PlanTool, pieces: Sequence[str], parsed: Parsed) -> dict[str, Any]:
    """One streamed plan: seconds spent feeding every piece (its read-only steps run between pieces, as they would),
    in the validator meanwhile, and validating the whole plan at close; and the validator's calls."""
    fed = 0.0
    _Recorder.calls, _Recorder.spent = [], 0.0
    async with anyio.create_task_group() as task_group:
        with mock.patch.object(_stream, 'Validator', _Recorder):
            stream = planner.stream(task_group)
            for piece in pieces:
                started = perf_counter()
                stream.feed(piece)
                fed += perf_counter() - started
                await anyio.lowlevel.checkpoint()
        if stream.stopped is not None:
            raise RuntimeError(f'the stream stopped early starts: {stream.stopped}')
        at_close = whole_validation(planner, parsed, stream.arrived())
        stream.abandon('The benchmark is over')
    return {'feed': fed, 'arriving': _Recorder.spent, 'at_close': at_close, 'calls': _Recorder.calls}


def validate_streamed(planner: PlanTool, calls: Sequence[tuple[str, Any]], parsed: Parsed) -> tuple[float, float]:
    """Seconds checking the steps as they arrived (the stream's calls, made again) and then the whole plan."""
    options = planner.options
    validator = Validator(planner.tools, dialect='id', max_items=options.max_items,
                          refused=PLAN_TOOL_NAMES | {planner.name}, earlier={})
    calls = [(kind, _read_again(argument) if kind == 'admit' else argument) for kind, argument in calls]
    started = perf_counter()
    for kind, argument in calls:
        if kind == 'admit':
            validator.admit(argument)
        else:
            validator.hold(argument)
    arriving = perf_counter() - started
    return arriving, whole_validation(planner, parsed, validator)


def _read_again(step: PlanStep) -> PlanStep:
    """`step` as if just read: its arguments made anew from their JSON (as the stream reads each step right before
    it admits it), so that the arrived steps are as fresh as the whole plan `prepare` checks right after reading."""
    return PlanStep(step.id, step.tool, json.loads(json.dumps(step.arguments)), step.description, step.forms)


def best(seconds: Iterable[float]) -> float:
    """The best of several repetitions, in milliseconds."""
    return min(seconds) * 1e3


def validation_cost(steps: int, repeats: int, *, before: bool) -> dict[str, Any]:
    """The validation case for a plan of `steps` steps (see the module docstring)."""
    plan = large_plan(steps)
    text = json.dumps(plan, separators=(',', ':'))  # what ScriptedModel streams
    pieces = [text[start:start + CHARS_PER_TOKEN] for start in range(0, len(text), CHARS_PER_TOKEN)]
    planner = PlanTool(Toolset([fetch, combine]))
    max_steps = planner.options.max_steps
    parsed = parse_lenient(text, max_steps=max_steps)
    streamed = anyio.run(stream_once, planner, pieces, parsed)
    if sum(kind == 'admit' for kind, _ in streamed['calls']) != steps:
        raise RuntimeError('every step of the plan should have been admitted as it arrived')
    runs: dict[str, list[float]] = {'read': [], 'whole': [], 'arriving': [], 'at_close': [], 'streamed': []}
    in_situ: list[dict[str, Any]] = []
    for _ in range(repeats):
        started = perf_counter()
        parsed = parse_lenient(text, max_steps=max_steps)
        runs['read'].append(perf_counter() - started)
        runs['whole'].append(whole_validation(planner, parsed))
        arriving, at_close = validate_streamed(planner, streamed['calls'], parsed)
        runs['arriving'].append(arriving)
        runs['at_close'].append(at_close)
        runs['streamed'].append(arriving + at_close)
        in_situ.append(anyio.run(stream_once, planner, pieces, parsed))
    row: dict[str, Any] = {'steps': steps, 'bytes': len(text), 'pieces': len(pieces),
                           **{f'{name}_ms': best(values) for name, values in runs.items()}}
    row['ratio'] = row['streamed_ms'] / row['whole_ms']
    row['in_situ_arriving_ms'] = best(run['arriving'] for run in in_situ)
    row['in_situ_streamed_ms'] = best(run['arriving'] + run['at_close'] for run in in_situ)
    row['in_situ_ratio'] = row['in_situ_streamed_ms'] / row['whole_ms']
    row['whole_total_ms'] = best(read + whole for read, whole in zip(runs['read'], runs['whole'], strict=True))
    row['stream_total_ms'] = best(run['feed'] + run['at_close'] + read
                                  for run, read in zip(in_situ, runs['read'], strict=True))
    row['total_ratio'] = row['stream_total_ms'] / row['whole_total_ms']
    row['before_ms'] = before_way(parsed.plan, planner) * 1e3 if before else None
    return row


def before_way(plan: Plan, planner: PlanTool) -> float:
    """Seconds the former way took: the plan so far validated whole at each step that arrived."""
    options = planner.options
    started = perf_counter()
    for count in range(1, len(plan.steps) + 1):
        prepare(Parsed(Plan(plan.steps[:count]), Problems()), planner.tools, max_steps=options.max_steps,
                max_items=options.max_items, extra_refused=frozenset({planner.name}), earlier={})
    return perf_counter() - started


def print_validation(rows: Sequence[dict[str, Any]], repeats: int) -> None:
    print()
    print(f'Validation of plans of {", ".join(str(row["steps"]) for row in rows)} steps streamed in pieces of '
          f'{CHARS_PER_TOKEN} characters, against the same plan validated whole (best of {repeats}):')
    print()
    print('| steps | whole (prepare) | streamed: as they arrived + at close | ratio | µs a step (whole / streamed) '
          '| in the stream | before: the plan so far at each step |')
    print('| ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
    for row in rows:
        before = '' if row['before_ms'] is None else (f"{row['before_ms']:,.1f} ms "
                                                      f"({row['before_ms'] / row['whole_ms']:,.0f}×)")
        print(f"| {row['steps']} | {row['whole_ms']:.2f} ms | {row['arriving_ms']:.2f} + {row['at_close_ms']:.2f} = "
              f"{row['streamed_ms']:.2f} ms | {row['ratio']:.2f} | {row['whole_ms'] * 1e3 / row['steps']:.1f} / "
              f"{row['streamed_ms'] * 1e3 / row['steps']:.1f} | {row['in_situ_streamed_ms']:.2f} ms "
              f"({row['in_situ_ratio']:.2f}) | {before} |")
    print()
    print('Reading and validating: everything the stream does with the text (feeding every piece, then reading and '
          'validating the whole plan at close), against reading and validating it whole:')
    print()
    print('| steps | bytes | read + validate whole | stream in all | ratio |')
    print('| ---: | ---: | ---: | ---: | ---: |')
    for row in rows:
        print(f"| {row['steps']} | {row['bytes']:,} | {row['whole_total_ms']:.2f} ms | {row['stream_total_ms']:.2f} ms "
              f"| {row['total_ratio']:.2f} |")
    first, last = rows[0], rows[-1]
    print(f"growth from {first['steps']} to {last['steps']} steps: validation ratio ×"
          f"{last['ratio'] / first['ratio']:.2f}, in all ×{last['total_ratio'] / first['total_ratio']:.2f} "
          "(1.00: it grows as the whole plan's does, linearly)")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the tables and write the JSON report; returns the report."""
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_eager', description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true',
                        help='stream and tools ten times faster, one plan, fewer repetitions')
    parser.add_argument('--plans', type=int, default=None, help='seeded ten-step plans (default 3, quick 1)')
    parser.add_argument('--repeats', type=int, default=None,
                        help='repetitions of the validation case, the best kept (default 15, quick 3)')
    parser.add_argument('--no-runs', action='store_true', help='only the validation case')
    parser.add_argument('--output', type=Path, default=RESULTS, help=f'JSON report path (default {RESULTS})')
    args = parser.parse_args(argv)
    report: dict[str, Any] = {'benchmark': 'eager', 'mode': 'quick' if args.quick else 'full',
                              'python': platform.python_version(), 'platform': platform.platform(),
                              'argv': list(sys.argv[1:] if argv is None else argv)}
    if not args.no_runs:
        report.update(eager_runs(args.quick, args.plans or (1 if args.quick else 3)))
    repeats = args.repeats or (3 if args.quick else 15)
    print(f'\nValidation cost ({report["mode"]}): Python {platform.python_version()}, asyncio, best of {repeats}',
          flush=True)
    rows = []
    for steps in VALIDATION_SIZES:
        rows.append(validation_cost(steps, repeats, before=not args.quick or steps == VALIDATION_SIZES[0]))
        print(f'  {steps} steps: validation ×{rows[-1]["ratio"]:.2f}', flush=True)
    print_validation(rows, repeats)
    report['validation'] = {'sizes': list(VALIDATION_SIZES), 'repeats': repeats, 'rows': rows,
                            'growth': rows[-1]['ratio'] / rows[0]['ratio'],
                            'total_growth': rows[-1]['total_ratio'] / rows[0]['total_ratio']}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + '\n')
    print(f'wrote {args.output}')
    return report


def eager_runs(quick: bool, plans: int) -> dict[str, Any]:
    """The ten-step plans run whole and eagerly (see the module docstring): the table, and the report's part."""
    scale = 0.1 if quick else 1.0
    tokens_per_second = TOKENS_PER_SECOND / scale
    chars_per_second = tokens_per_second * CHARS_PER_TOKEN
    print(f'Eager plans ({"quick" if quick else "full"}): {plans} ten-step read-only plans streamed at '
          f'{tokens_per_second:g} tokens/s, tools waiting {0.5 * scale:g}-{2 * scale:g} s, '
          f'Python {platform.python_version()}, asyncio', flush=True)
    rows = []
    for seed in range(plans):
        case = make_case(seed, scale)
        whole = anyio.run(partial(run_once, case, eager=False, tokens_per_second=tokens_per_second))
        eager = anyio.run(partial(run_once, case, eager=True, tokens_per_second=tokens_per_second))
        row = {'seed': seed, **bounds(case, chars_per_second), 'whole_plan': whole, 'eager': eager}
        rows.append(row)
        print(f'  plan {seed}: whole plan {whole:.2f} s, eager {eager:.2f} s', flush=True)
    print()
    print('| plan | generation | critical path | max of both | arrival bound | whole plan | eager | eager ÷ max | '
          'eager ÷ arrival bound | whole ÷ eager |')
    print('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
    for row in rows:
        print(f"| {row['seed']} | {row['generation']:.2f} s | {row['critical_path']:.2f} s | "
              f"{row['max_of_both']:.2f} s | {row['arrival_bound']:.2f} s | {row['whole_plan']:.2f} s | "
              f"{row['eager']:.2f} s | {row['eager'] / row['max_of_both']:.2f} | "
              f"{row['eager'] / row['arrival_bound']:.2f} | {row['whole_plan'] / row['eager']:.2f} |")
    summary = {key: statistics.median(row[key] / row[ref] for row in rows)
               for key, ref in (('eager', 'max_of_both'), ('whole_plan', 'max_of_both'))}
    worst = max(row['eager'] / row['arrival_bound'] for row in rows)
    print(f"median: eager {summary['eager']:.2f}× max(generation, critical path), whole plan "
          f"{summary['whole_plan']:.2f}×; eager at most {worst:.3f}× the arrival bound "
          f"({'within' if worst <= ARRIVAL_SLACK else 'NOT within'} 5 %)")
    return {'tokens_per_second': tokens_per_second, 'rows': rows, 'median_x_max_of_both': summary,
            'max_eager_x_arrival_bound': worst, 'within_5_percent_of_arrival_bound': worst <= ARRIVAL_SLACK,
            'cases': [asdict(make_case(s, scale)) for s in range(plans)]}


if __name__ == '__main__':
    main()
