"""`toolweave demo`: the round-trip tax, measured, with no API key.

Each scenario runs twice with a scripted model that behaves like a real one (it reads every tool result from
the conversation it is sent): tool by tool (one tool call per model reply) and as one plan (`execute_tool_plan`,
then the answer). Latencies are simulated; tokens are estimated from the messages actually sent.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated

import anyio
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from toolweave.cli._app import app
from toolweave.cli._render import render_timeline
from toolweave.plan import PlanTool, planning_instructions
from toolweave.testing import CHARS_PER_TOKEN, estimate_tokens, serialize_tools
from toolweave.testing.scenarios import (
    DEFAULT_LLM_LATENCY,
    DEFAULT_TOOL_LATENCY,
    SCENARIOS,
    Scenario,
    ScenarioRun,
    run_scenario,
)
from toolweave.tools import Toolset

__all__ = ('demo_command', 'run_demo')

DEFAULT_SPEED = 4.0


@app.command('demo')
def demo_command(
    scenario: Annotated[
        list[str] | None,
        typer.Option('--scenario', '-s', help=f'Run only these scenarios: {", ".join(s.name for s in SCENARIOS)}.',
                     show_default=False),
    ] = None,
    speed: Annotated[
        float,
        typer.Option('--speed', min=0.1, max=1000.0,
                     help=f'Run the simulated latencies this many times faster (1 = real time: LLM call '
                          f'{DEFAULT_LLM_LATENCY * 1000:.0f} ms, tool call {DEFAULT_TOOL_LATENCY * 1000:.0f} ms).'),
    ] = DEFAULT_SPEED,
    timeline: Annotated[bool, typer.Option('--timeline/--no-timeline', help='Show each plan as a timeline.')] = True,
    width: Annotated[int | None, typer.Option('--width', min=40, help='Output width (default: the terminal).')] = None,
) -> None:
    """Show what tool plans save, with a scripted model: no API key needed.

    Each scenario runs tool by tool and as one plan, and a table compares LLM calls, input tokens, tool calls and
    wall time. Takes a few seconds.
    """
    chosen = _choose(scenario or [])
    console = Console(width=width, highlight=False)
    anyio.run(partial(run_demo, chosen, speed=speed, console=console, timeline=timeline))


def _choose(names: list[str]) -> list[Scenario]:
    if not names:
        return list(SCENARIOS)
    known = {s.name: s for s in SCENARIOS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise typer.BadParameter(f'unknown scenario {unknown[0]!r}; choose from {", ".join(known)}',
                                 param_hint='--scenario')
    return [known[n] for n in names]


async def run_demo(scenarios: list[Scenario], *, speed: float, console: Console, timeline: bool) -> list[
        tuple[ScenarioRun, ScenarioRun]]:
    """Run and print every scenario in both modes; returns the measurements (tool by tool, plan) per scenario."""
    llm, tool = DEFAULT_LLM_LATENCY / speed, DEFAULT_TOOL_LATENCY / speed
    console.print(Text('toolweave demo: the same tasks, tool by tool vs. one plan', style='bold'))
    console.print(Text(
        f'Scripted model (no API key). Simulated latency: {DEFAULT_LLM_LATENCY * 1000:.0f} ms per LLM call, '
        f'{DEFAULT_TOOL_LATENCY * 1000:.0f} ms per tool call, run {speed:g}x faster (--speed). Input tokens are '
        f'estimated as characters/{CHARS_PER_TOKEN} of the messages and tool definitions each request sent.',
        style='dim'))
    pairs: list[tuple[ScenarioRun, ScenarioRun]] = []
    for scenario in scenarios:
        by_tool = await run_scenario(scenario, 'tool_by_tool', llm_latency=llm, tool_latency=tool)
        planned = await run_scenario(scenario, 'plan', llm_latency=llm, tool_latency=tool)
        pairs.append((by_tool, planned))
        console.print()
        console.print(_scenario_table(scenario, by_tool, planned))
        if by_tool.result.output != planned.result.output:
            console.print(Text('The two modes answered differently!', style='bold red'))
        console.print(Text.assemble(('Answer: ', 'bold'), planned.result.output))
        if timeline and planned.result.plan_runs:

            console.print(render_timeline(planned.result.plan_runs[0], console.width))
    if len(pairs) > 1:
        console.print()
        console.print(_totals_table(pairs))
    console.print(Text(
        f'Planning costs about {_planning_overhead():,} input tokens per request (the "# Tool Planning" prompt '
        'section and the execute_tool_plan definition); a plan wins on tokens when it saves requests or keeps '
        'large intermediate results out of the conversation.', style='dim'))
    return pairs


def _planning_overhead() -> int:

    return estimate_tokens('\n\n' + planning_instructions()) + estimate_tokens(
        serialize_tools([PlanTool(Toolset()).definition]))


def _ratio(before: float, after: float, *, fewer: str) -> str:
    if after <= 0:
        return '-'
    factor = before / after
    if factor >= 1:
        return f'{factor:.1f}x {fewer}'
    return f'{1 / factor:.1f}x more'


def _scenario_table(scenario: Scenario, by_tool: ScenarioRun, planned: ScenarioRun) -> Table:
    table = Table(title=f'{scenario.title}', title_justify='left', title_style='bold cyan')
    table.add_column('')
    table.add_column('tool by tool', justify='right')
    table.add_column('one plan', justify='right')
    table.add_column('plan vs tool by tool', justify='right')
    table.add_row('LLM calls', str(by_tool.llm_calls), str(planned.llm_calls),
                  _ratio(by_tool.llm_calls, planned.llm_calls, fewer='fewer'))
    table.add_row('input tokens (est.)', f'{by_tool.input_tokens:,}', f'{planned.input_tokens:,}',
                  f'{planned.input_tokens / max(by_tool.input_tokens, 1):.0%}')
    table.add_row('tool calls (by the model)', f'{by_tool.tool_calls} ({by_tool.model_tool_calls})',
                  f'{planned.tool_calls} ({planned.model_tool_calls})', '')
    table.add_row('wall time', f'{by_tool.wall_time:.2f} s', f'{planned.wall_time:.2f} s',
                  _ratio(by_tool.wall_time, planned.wall_time, fewer='faster'))
    return table


def _totals_table(pairs: list[tuple[ScenarioRun, ScenarioRun]]) -> Table:
    table = Table(title='All scenarios', title_justify='left', title_style='bold cyan')
    for column in ('scenario', 'LLM calls', 'input tokens (plan share)', 'wall time (speed-up)'):
        table.add_column(column, justify='left' if column == 'scenario' else 'right', no_wrap=True)
    for by_tool, planned in pairs:
        share = planned.input_tokens / max(by_tool.input_tokens, 1)
        speedup = by_tool.wall_time / planned.wall_time if planned.wall_time > 0 else 0.0
        table.add_row(
            by_tool.scenario,
            f'{by_tool.llm_calls} → {planned.llm_calls}',
            f'{by_tool.input_tokens:,} → {planned.input_tokens:,} ({share:.0%})',
            f'{by_tool.wall_time:.2f} → {planned.wall_time:.2f} s ({speedup:.1f}×)',
        )
    return table
