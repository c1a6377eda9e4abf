"""Agent benchmark: the same tasks tool by tool, with parallel tool calls, and as one plan.

What runs: the four demo scenarios (`toolweave.testing._scenarios`): list metrics -> query CPU -> check the
80% threshold; weather in three cities -> compare; a 5-step chain over an order list; a 10-way fan-out then
aggregate. Each runs through the real `Agent` loop with a scripted `FunctionModel` that behaves like a real
model: it reads every tool result from the messages it is sent and then asks for the next call (copying the
values it needs into the arguments), so the history, and the input tokens, grow as a real conversation does.

Modes:
- `tool_by_tool`: one tool call per model reply (a ReAct loop);
- `parallel_calls`: every call whose inputs are known in one reply (parallel tool calls, no plan);
- `plan`: one `execute_tool_plan` reply, then the answer (`tool_planning=True`).

Measured:
- LLM calls: model requests the loop made.
- Input tokens: the estimate `ceil(chars / 4)` of each request's messages (compact JSON) plus the tool
  definitions sent with it, summed over the requests (`toolweave.testing.estimate_usage`); output tokens
  likewise for the replies. The plan mode pays for its longer system prompt (the "# Tool Planning" section) and
  the extra tool definition on every request; nothing is left out.
- Wall time of `agent.run` under simulated latencies: each model reply sleeps `400 ms / speed`, each tool call
  `100 ms / speed` (`anyio.sleep`). Median of `--repeats` runs.

Targets: 2 LLM calls for every scenario in plan mode; plan input tokens <= 40% of tool by tool on the 5-step
chain; plan >= 3x faster than tool by tool on the fan-out.

Run: `python -m benchmarks.bench_agent [--quick] [--speed S] [--repeats N] [--output PATH]`.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from toolweave.testing._models import CHARS_PER_TOKEN
from toolweave.testing._scenarios import (
    DEFAULT_LLM_LATENCY,
    DEFAULT_TOOL_LATENCY,
    MODES,
    SCENARIOS,
    ScenarioRun,
    run_scenario,
)

__all__ = ('main',)

RESULTS = Path(__file__).parent / 'results' / 'agent.json'


async def _measure(speed: float, repeats: int) -> dict[str, dict[str, list[ScenarioRun]]]:
    runs: dict[str, dict[str, list[ScenarioRun]]] = {s.name: {m: [] for m in MODES} for s in SCENARIOS}
    llm, tool = DEFAULT_LLM_LATENCY / speed, DEFAULT_TOOL_LATENCY / speed
    for _ in range(repeats):
        for scenario in SCENARIOS:
            for mode in MODES:  # interleaved, so machine noise hits every mode alike
                runs[scenario.name][mode].append(await run_scenario(scenario, mode, llm_latency=llm,
                                                                    tool_latency=tool))
    return runs


def _row(runs: list[ScenarioRun]) -> dict[str, Any]:
    first = runs[0]
    return {'llm_calls': first.llm_calls, 'input_tokens': first.input_tokens, 'output_tokens': first.output_tokens,
            'tool_calls': first.tool_calls, 'model_tool_calls': first.model_tool_calls,
            'wall_time_s': round(statistics.median(r.wall_time for r in runs), 4),
            'wall_times_s': [round(r.wall_time, 4) for r in runs], 'output': first.result.output}


def _report(runs: dict[str, dict[str, list[ScenarioRun]]], speed: float, repeats: int) -> dict[str, Any]:
    scenarios: dict[str, Any] = {}
    for name, by_mode in runs.items():
        rows = {mode: _row(mode_runs) for mode, mode_runs in by_mode.items()}
        base, plan = rows['tool_by_tool'], rows['plan']
        rows['plan_vs_tool_by_tool'] = {
            'llm_calls_ratio': round(plan['llm_calls'] / base['llm_calls'], 3),
            'input_tokens_ratio': round(plan['input_tokens'] / base['input_tokens'], 3),
            'speedup': round(base['wall_time_s'] / plan['wall_time_s'], 2),
            'speedup_vs_parallel_calls': round(rows['parallel_calls']['wall_time_s'] / plan['wall_time_s'], 2),
            'same_answer': len({r['output'] for r in (base, plan, rows['parallel_calls'])}) == 1,
        }
        scenarios[name] = rows
    targets = {
        'plan_llm_calls_2_everywhere': all(s['plan']['llm_calls'] == 2 for s in scenarios.values()),
        'chain_input_tokens_le_40pct': scenarios['chain']['plan_vs_tool_by_tool']['input_tokens_ratio'] <= 0.40,
        'fanout_speedup_ge_3x': scenarios['fanout']['plan_vs_tool_by_tool']['speedup'] >= 3.0,
    }
    return {
        'benchmark': 'agent',
        'latency_model': {'llm_call_s': DEFAULT_LLM_LATENCY / speed, 'tool_call_s': DEFAULT_TOOL_LATENCY / speed,
                          'speed': speed, 'at_speed_1': {'llm_call_s': DEFAULT_LLM_LATENCY,
                                                         'tool_call_s': DEFAULT_TOOL_LATENCY}},
        'token_estimator': f'ceil(chars / {CHARS_PER_TOKEN}) of the compact-JSON messages + tool definitions sent',
        'repeats': repeats,
        'machine': {'python': platform.python_version(), 'platform': platform.platform()},
        'scenarios': scenarios,
        'targets': targets,
    }


def _print_table(report: dict[str, Any]) -> None:
    header = (f'{"scenario":9} {"mode":15} {"LLM":>4} {"in tok":>7} {"out tok":>7} {"tools":>6} {"wall s":>7} '
              f'{"in tok vs tbt":>13} {"speedup":>8}')
    print(header)
    print('-' * len(header))
    for name, rows in report['scenarios'].items():
        base = rows['tool_by_tool']
        for mode in MODES:
            row = rows[mode]
            ratio = row['input_tokens'] / base['input_tokens']
            speedup = base['wall_time_s'] / row['wall_time_s']
            print(f'{name:9} {mode:15} {row["llm_calls"]:>4} {row["input_tokens"]:>7,} {row["output_tokens"]:>7,} '
                  f'{row["tool_calls"]:>6} {row["wall_time_s"]:>7.3f} {ratio:>13.0%} {speedup:>7.1f}x')
    print()
    for target, ok in report['targets'].items():
        print(f'target {target}: {"met" if ok else "MISSED"}')


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table and write the JSON report; returns the report."""
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_agent', description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='20x faster latencies, one repeat (about 2 s)')
    parser.add_argument('--speed', type=float, default=None, help='divide the simulated latencies by this (default 1)')
    parser.add_argument('--repeats', type=int, default=None, help='runs per scenario and mode (default 3, quick 1)')
    parser.add_argument('--output', type=Path, default=RESULTS, help=f'JSON report path (default {RESULTS})')
    args = parser.parse_args(argv)
    speed = args.speed or (20.0 if args.quick else 1.0)
    repeats = args.repeats or (1 if args.quick else 3)
    if speed <= 0 or repeats < 1:
        parser.error(f'--speed must be > 0 and --repeats >= 1, got {speed} and {repeats}')
    print(f'Agent benchmark: LLM call {DEFAULT_LLM_LATENCY / speed * 1000:.0f} ms, tool call '
          f'{DEFAULT_TOOL_LATENCY / speed * 1000:.0f} ms (speed {speed:g}), {repeats} repeat(s); tokens = '
          f'ceil(chars/{CHARS_PER_TOKEN}) of what each request sent', flush=True)
    started = time.perf_counter()
    report = _report(anyio.run(_measure, speed, repeats), speed, repeats)
    report['elapsed_s'] = round(time.perf_counter() - started, 2)
    _print_table(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + '\n', encoding='utf-8')
    print(f'wrote {args.output}')
    return report


if __name__ == '__main__':
    main(sys.argv[1:])
