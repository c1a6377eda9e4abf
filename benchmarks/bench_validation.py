"""Validation of literal arguments: what checking a plan's arguments before it runs costs, when the tools check
their arguments at every call anyway.

A plan is checked before anything runs, literal arguments included (a wrong type, a missing argument, a value
outside an enum stops the plan before its first step). A `@tool` function validates its arguments with pydantic at
every call, too. toolweave checks a step whose arguments hold no reference with the tool's own validation
(`Tool.check_arguments`) and the call uses what that produced, so each step is validated once, in one place; a
step with references is checked against the tool's JSON schema (its references stand for values of their types)
and validated by the tool when called, with the references' values.

Tools: `noop` (no input schema: nothing to check; the reference, given each other tool's arguments in turn), `flat`
(`name: str, count: int`), `nested` (a pydantic model, a `Literal`, a list, a default). Plans: 1,000 and 10,000
independent steps with literal arguments, and a 1,000-step chain in which every step also passes the previous
step's output (references: the schema path).

Reported per case: validation alone, µs per step (parse excluded); `run_plan` and the floor (`_floor.py`, which
calls each tool through `Tool.call`, so its tools validate their arguments there) in µs per step and their ratio;
and the **check's net cost**: how much more toolweave adds to the floor with this tool than with `noop` given the
same plan, the same arguments (µs per step), i.e. what the plan's argument check costs beyond the validation the
calls do anyway. (Reading larger arguments costs every runner more, checked or not: that is the overhead
benchmark's, so each tool's reference is `noop` on that tool's arguments.)

Goal (issue 18): the net cost <= 1 µs per step for literal arguments.

Run: `python -m benchmarks.bench_validation` (about a minute), `--quick` (seconds), `--no-gc` (the cyclic garbage
collector off while measuring).
Writes `benchmarks/results/validation.json` (or `--output PATH`).
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from benchmarks._floor import run_floor
from benchmarks.bench_overhead import NoopTool, _timed
from toolweave import tool
from toolweave.plan import run_plan
from toolweave.plan._parse import parse_lenient
from toolweave.plan._validate import as_toolset, prepare
from toolweave.tools import Tool

__all__ = ('main',)

RESULTS = Path(__file__).parent / 'results' / 'validation.json'
GOAL_NET_US = 1.0


class Address(BaseModel):
    city: str
    zip: str | None = None


@tool(name='flat')
async def flat_tool(name: str, count: int, note: str = '') -> str:
    """Two scalars."""
    return 'ok'


@tool(name='nested')
async def nested_tool(name: str, mode: Literal['fast', 'slow'], tags: list[str], where: Address, limit: int = 5,
                      note: str = '') -> str:
    """A model, an enum, a list and a default."""
    return 'ok'


TOOLS: dict[str, Tool] = {'noop': NoopTool(), 'flat': flat_tool, 'nested': nested_tool}
ARGUMENTS: dict[str, dict[str, Any]] = {
    'flat': {'name': 'tea', 'count': 2},
    'nested': {'name': 'tea', 'mode': 'fast', 'tags': ['a', 'b'], 'where': {'city': 'Oslo'}},
}


def _plan(tool_name: str, steps: int, shape: str, arguments_of: str | None = None) -> dict[str, Any]:
    """A plan calling `tool_name` with the arguments `ARGUMENTS` gives `arguments_of` (default: the tool's)."""
    name = TOOLS[tool_name].name
    plan = []
    for i in range(steps):
        arguments = dict(ARGUMENTS[arguments_of or tool_name])
        if shape == 'chain' and i:
            arguments['note'] = f'$ref:s{i - 1}'
        plan.append({'id': f's{i}', 'tool': name, 'arguments': arguments})
    return {'steps': plan}


def _validate_us(plan: dict[str, Any], steps: int, repeats: int) -> float:
    toolset = as_toolset(list(TOOLS.values()))
    times = []
    for _ in range(repeats):
        parsed = parse_lenient(plan)
        gc.collect()
        started = time.perf_counter()
        prepared, problems = prepare(parsed, toolset, max_steps=steps)
        times.append(time.perf_counter() - started)
        assert prepared is not None, problems.messages()
    return statistics.median(times) / steps * 1e6


def _run_us(plan: dict[str, Any], steps: int, repeats: int) -> tuple[float, float]:
    toolset = as_toolset(list(TOOLS.values()))
    by_name = {t.name: t for t in TOOLS.values()}

    async def toolweave() -> None:
        run = await run_plan(plan, toolset, max_steps=steps)
        assert run.succeeded == steps, run.summary

    async def floor() -> None:
        await run_floor(plan, by_name)

    runs: dict[str, list[float]] = {'toolweave': [], 'floor': []}
    for repeat in range(repeats):
        order = [('toolweave', toolweave), ('floor', floor)]
        for name, runner in order if repeat % 2 == 0 else reversed(order):  # alternate who runs first
            runs[name].append(_timed(runner))
    return (statistics.median(runs['toolweave']) / steps * 1e6, statistics.median(runs['floor']) / steps * 1e6)


def _label(case: dict[str, Any]) -> str:
    """`flat`, or `noop (flat)`: the `noop` tool given `flat`'s arguments."""
    return case['tool'] if case['tool'] == case['arguments'] else f'{case["tool"]} ({case["arguments"]})'


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table and write the JSON report; returns the report."""
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_validation',
                                     description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='1k-step plans, fewer repeats (seconds)')
    parser.add_argument('--repeats', type=int, default=None, help='runs per runner and case (default 9, quick 3)')
    parser.add_argument('--no-gc', action='store_true',
                        help="turn Python's cyclic garbage collector off while measuring (what it costs to walk "
                             'the values held between validation and the calls)')
    parser.add_argument('--output', type=Path, default=RESULTS, help=f'JSON report path (default {RESULTS})')
    args = parser.parse_args(argv)
    if args.no_gc:
        gc.disable()
    repeats = args.repeats or (3 if args.quick else 9)
    sizes = (1_000,) if args.quick else (1_000, 10_000)
    print(f'Validation benchmark ({"quick" if args.quick else "full"}): median of {repeats} interleaved runs, '
          f'Python {platform.python_version()}, asyncio{", cyclic GC off" if args.no_gc else ""}', flush=True)
    _run_us(_plan('nested', 100, 'literal'), 100, 1)  # warm-up: imports and first calls are not measured
    cases: list[dict[str, Any]] = []
    for shape, steps in [*(('literal', n) for n in sizes), ('chain', 1_000)]:
        for arguments_of in ARGUMENTS:
            base: dict[str, Any] | None = None
            for tool_name in ('noop', arguments_of):
                plan = _plan(tool_name, steps, shape, arguments_of)
                validate = _validate_us(plan, steps, repeats)
                toolweave, floor = _run_us(plan, steps, repeats)
                case = {'tool': tool_name, 'arguments': arguments_of, 'shape': shape, 'steps': steps,
                        'validate_us': validate, 'toolweave_us': toolweave, 'floor_us': floor,
                        'ratio': toolweave / floor}
                if base is None:
                    base = case
                else:
                    case['net_check_us'] = (toolweave - floor) - (base['toolweave_us'] - base['floor_us'])
                cases.append(case)
                print(f'  {_label(case):<13} {shape:<8} {steps:>6}: validate {validate:6.2f} us/step, run '
                      f'{toolweave:6.2f} us/step, {case["ratio"]:.2f}x floor', flush=True)
    print(f'\n{"tool":<13} {"plan":<8} {"steps":>6} | {"validate us":>11} | {"toolweave us":>12} {"floor us":>9} '
          f'{"x floor":>7} | {"net check us":>12}')
    for case in cases:
        net = f'{case["net_check_us"]:>12.2f}' if 'net_check_us' in case else f'{"(reference)":>12}'
        print(f'{_label(case):<13} {case["shape"]:<8} {case["steps"]:>6} | {case["validate_us"]:>11.2f} | '
              f'{case["toolweave_us"]:>12.2f} {case["floor_us"]:>9.2f} {case["ratio"]:>7.2f} | {net}')
    literal = [c['net_check_us'] for c in cases if 'net_check_us' in c and c['shape'] == 'literal']
    worst = max(literal)
    print(f'goal: the net cost of checking literal arguments <= {GOAL_NET_US:g} us/step, worst {worst:.2f}: '
          f'{"met" if worst <= GOAL_NET_US else "MISSED"}')
    report = {
        'benchmark': 'validation', 'mode': 'quick' if args.quick else 'full', 'python': platform.python_version(),
        'platform': platform.platform(), 'argv': sys.argv[1:], 'repeats': repeats, 'loop': 'asyncio',
        'gc': not args.no_gc,
        'goal_net_check_us': GOAL_NET_US, 'worst_net_check_us': worst, 'cases': cases,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + '\n')
    print(f'wrote {args.output}')
    return report


if __name__ == '__main__':
    main()
