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

Run: `python -m benchmarks.bench_eager` (about a minute), `--quick` (ten times faster stream and tools, seconds).
Writes `benchmarks/results/eager.json` (or `--output PATH`).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from toolweave import Agent, tool
from toolweave.agent import PlanStepFinished
from toolweave.testing import CHARS_PER_TOKEN, ScriptedModel

__all__ = ('main',)

RESULTS = Path(__file__).parent / 'results' / 'eager.json'
TOKENS_PER_SECOND = 40.0


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


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table and write the JSON report; returns the report."""
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_eager', description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='stream and tools ten times faster, one plan')
    parser.add_argument('--plans', type=int, default=None, help='seeded plans (default 3, quick 1)')
    parser.add_argument('--output', type=Path, default=RESULTS, help=f'JSON report path (default {RESULTS})')
    args = parser.parse_args(argv)
    scale = 0.1 if args.quick else 1.0
    tokens_per_second = TOKENS_PER_SECOND / scale
    chars_per_second = tokens_per_second * CHARS_PER_TOKEN
    plans = args.plans or (1 if args.quick else 3)
    print(f'Eager plans ({"quick" if args.quick else "full"}): {plans} ten-step read-only plans streamed at '
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
    print(f"median: eager {summary['eager']:.2f}× max(generation, critical path), whole plan "
          f"{summary['whole_plan']:.2f}×")
    report = {'benchmark': 'eager', 'mode': 'quick' if args.quick else 'full', 'python': platform.python_version(),
              'platform': platform.platform(), 'argv': sys.argv[1:], 'tokens_per_second': tokens_per_second,
              'rows': rows, 'median_x_max_of_both': summary, 'cases': [asdict(make_case(s, scale))
                                                                       for s in range(plans)]}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + '\n')
    print(f'wrote {args.output}')
    return report


if __name__ == '__main__':
    main()
