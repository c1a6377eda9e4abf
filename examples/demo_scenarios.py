"""The demo's scenarios as a plain program, plus one scenario of your own.

The scenario tools and scripted models live in `toolweave.testing._scenarios` (so `toolweave demo` works from
an installed package); this file shows how to use them and how to add a scenario:

```
python -m examples.demo_scenarios            # every scenario, tool by tool / parallel calls / plan
python -m examples.demo_scenarios --speed 10  # latencies 10x shorter
```

Each model reply takes 400 ms / speed and each tool call 100 ms / speed (simulated); tokens are estimated as
`ceil(chars / 4)` of what each request sent (`toolweave.testing.estimate_usage`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import anyio

from toolweave import Tool
from toolweave.testing import FakeTool
from toolweave.testing.scenarios import (
    DEFAULT_LLM_LATENCY,
    DEFAULT_TOOL_LATENCY,
    MODES,
    SCENARIOS,
    Scenario,
    ScenarioRun,
    Step,
    run_scenario,
)

__all__ = ('INVENTORY', 'main', 'run_all')


def _inventory_tools(latency: float) -> list[Tool]:
    stock = {'SKU-CHAIR-OAK': 12, 'SKU-DESK-120': 0, 'SKU-LAMP-LED': 85}
    return [
        FakeTool('list_skus', lambda a: {'skus': sorted(stock)}, delay=latency,
                 description='List the SKUs of the catalogue.'),
        FakeTool('stock_level', lambda a: {'sku': a['sku'], 'on_hand': stock[a['sku']]}, delay=latency,
                 description='Units on hand for one SKU.',
                 parameters={'type': 'object', 'properties': {'sku': {'type': 'string'}}, 'required': ['sku']}),
        FakeTool('reorder_list', lambda a: {'reorder': [s['sku'] for s in a['levels'] if s['on_hand'] < 10]},
                 delay=latency, description='SKUs whose stock is below 10 units.',
                 parameters={'type': 'object', 'properties': {'levels': {'type': 'array'}}, 'required': ['levels']}),
    ]


INVENTORY = Scenario(
    name='inventory',
    title='Your own scenario: stock levels of three SKUs -> reorder list',
    prompt='Which products need reordering?',
    steps=(
        Step('chair', 'stock_level', {'sku': 'SKU-CHAIR-OAK'}),
        Step('desk', 'stock_level', {'sku': 'SKU-DESK-120'}),
        Step('lamp', 'stock_level', {'sku': 'SKU-LAMP-LED'}),
        Step('reorder', 'reorder_list', {'levels': ['$ref:chair', '$ref:desk', '$ref:lamp']}),
    ),
    output_steps=('reorder',),
    answer=lambda results: 'Reorder: ' + (', '.join(results['reorder']['reorder']) or 'nothing') + '.',
    tools=_inventory_tools,
)
"""A scenario is data: steps with `$ref` arguments, the steps whose results the answer needs, the answer, and
a factory for the tools. The scripted models of every mode are derived from it."""


async def run_all(scenarios: Sequence[Scenario], *, speed: float = 1.0) -> list[ScenarioRun]:
    """Run every scenario in every mode; returns the measurements in order."""
    runs = []
    for scenario in scenarios:
        for mode in MODES:
            runs.append(await run_scenario(scenario, mode, llm_latency=DEFAULT_LLM_LATENCY / speed,
                                           tool_latency=DEFAULT_TOOL_LATENCY / speed))
    return runs


def _print(runs: Sequence[ScenarioRun]) -> None:
    print(f'{"scenario":10} {"mode":15} {"LLM calls":>9} {"input tokens":>12} {"tool calls":>10} {"wall s":>7}')
    for run in runs:
        print(f'{run.scenario:10} {run.mode:15} {run.llm_calls:>9} {run.input_tokens:>12,} {run.tool_calls:>10} '
              f'{run.wall_time:>7.2f}')
    answers: dict[str, Any] = {}
    for run in runs:
        answers.setdefault(run.scenario, run.result.output)
    for name, answer in answers.items():
        print(f'{name}: {answer}')


def main(argv: Sequence[str] | None = None) -> list[ScenarioRun]:
    parser = argparse.ArgumentParser(prog='python -m examples.demo_scenarios')
    parser.add_argument('--speed', type=float, default=4.0, help='run the simulated latencies this much faster')
    args = parser.parse_args(argv)
    runs = anyio.run(lambda: run_all([*SCENARIOS, INVENTORY], speed=args.speed))
    _print(runs)
    return runs


if __name__ == '__main__':
    main()
