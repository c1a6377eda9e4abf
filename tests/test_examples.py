"""Every example plan validates and runs against `examples.tools`, with the results the README describes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import examples.tools
import pytest
from examples.tools import TOOLS
from typer.testing import CliRunner

from toolweave.cli._app import app
from toolweave.plan import parse_plan, run_plan_sync, validate_plan

PLANS = Path(__file__).resolve().parent.parent / 'examples' / 'plans'
RUNNABLE = sorted(p.name for p in PLANS.glob('*.json') if p.name not in ('invalid.json', 'failing.json'))


@pytest.fixture(autouse=True)
def instant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(examples.tools, 'LATENCY_SCALE', 0.0)


def load(name: str) -> Any:
    return json.loads((PLANS / name).read_text())


def test_the_expected_plans_exist() -> None:
    names = {p.name for p in PLANS.glob('*.json')}
    assert {'metrics.json', 'weather.json', 'fanout.json', 'chain.json', 'index_dialect.json',
            'invalid.json', 'failing.json'} <= names


@pytest.mark.parametrize('name', RUNNABLE)
def test_example_plan_validates_and_runs(name: str) -> None:
    assert validate_plan(parse_plan(load(name)), TOOLS) == []
    run = run_plan_sync(load(name), TOOLS)
    assert run.ok, run.summary
    assert run.succeeded == run.total == len(load(name)['steps'])


@pytest.mark.parametrize('name', RUNNABLE)
def test_example_plan_through_the_cli(name: str) -> None:
    runner = CliRunner()
    checked = runner.invoke(app, ['validate', str(PLANS / name), '--tools', 'examples.tools:TOOLS'])
    assert checked.exit_code == 0, checked.output
    assert f'Plan is valid: {len(load(name)["steps"])} steps' in checked.output
    ran = runner.invoke(app, ['run', str(PLANS / name), '--tools', 'examples.tools:TOOLS'])
    assert ran.exit_code == 0, ran.output
    assert f'{len(load(name)["steps"])} succeeded' in ran.output


def test_metrics_plan() -> None:
    run = run_plan_sync(load('metrics.json'), TOOLS)
    assert run.waves == (('metrics',), ('cpu', 'memory'), ('cpu_alert', 'memory_alert'))
    assert run.step('cpu').arguments == {'name': 'cpu_usage'}
    assert run.step('memory').arguments == {'name': 'memory_usage'}
    assert run.step('cpu_alert').arguments['value'] == 72.5  # `$ref:cpu.current` keeps the number's type
    summary = json.loads(run.summary)
    assert list(summary) == ['cpu_alert', 'memory_alert']
    assert summary['cpu_alert']['exceeded'] is False
    assert summary['memory_alert']['exceeded'] is True


def test_weather_plan() -> None:
    # a diamond's tail waits for every branch; only output_steps are shown; JSON embedded.
    run = run_plan_sync(load('weather.json'), TOOLS)
    assert run.waves == (('tokyo', 'paris', 'lima'), ('warmest',))
    summary = json.loads(run.summary)
    assert summary == {'warmest': {
        'ranking': [{'city': 'Tokyo', 'temp_c': 25}, {'city': 'Lima', 'temp_c': 21}, {'city': 'Paris', 'temp_c': 18}],
        'highest': 'Tokyo', 'lowest': 'Paris', 'spread': 7,
    }}


def test_metrics_plan_is_scheduled_eagerly(monkeypatch: pytest.MonkeyPatch) -> None:
    # memory_alert starts as soon as memory is done, while cpu (same wave, slower) is still running.
    monkeypatch.setattr(examples.tools, 'LATENCY_SCALE', 2.0)
    run = run_plan_sync(load('metrics.json'), TOOLS)
    memory, cpu, memory_alert = run.step('memory'), run.step('cpu'), run.step('memory_alert')
    assert memory.duration is not None and cpu.duration is not None
    assert memory.duration < cpu.duration
    assert memory_alert.started_at is not None and cpu.ended_at is not None
    assert memory_alert.started_at < cpu.ended_at
    assert run.step('memory_alert').wave == run.step('cpu_alert').wave == 2


def test_weather_lookups_run_in_parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    # independent steps share wave 0 and run concurrently.
    monkeypatch.setattr(examples.tools, 'LATENCY_SCALE', 1.0)
    run = run_plan_sync(load('weather.json'), TOOLS)
    lookups = run.steps[:3]
    assert sum(s.duration or 0 for s in lookups) > 1.5 * max(s.duration or 0 for s in lookups)
    assert run.duration < sum(s.duration or 0 for s in run.steps)  # loose: parallel, not one after another


def test_fanout_plan() -> None:
    run = run_plan_sync(load('fanout.json'), TOOLS)
    assert len(run.waves) == 2 and len(run.waves[0]) == 10
    prices = [run.step(i).value['price'] for i in run.waves[0]]
    summary = json.loads(run.summary)
    assert summary['mean_price'] == pytest.approx(sum(prices) / 10, abs=1e-3)
    assert summary['max_price'] == max(prices)


def test_chain_plan() -> None:
    # a chain is one wave per step; field refs keep their JSON type; embedded refs.
    run = run_plan_sync(load('chain.json'), TOOLS)
    assert [len(w) for w in run.waves] == [1, 1, 1, 1, 1]
    assert run.step('total').value == 159.4
    assert run.step('in_euros').arguments == {'amount': 159.4, 'from_currency': 'GBP', 'to_currency': 'EUR'}
    assert json.loads(run.summary) == {'notify': {
        'sent': True, 'recipient': 'ada@example.com',
        'message': 'Hello Ada Lovelace, your orders total 186.5 EUR.',
    }}


def test_index_dialect_plan_file_is_index_based() -> None:
    # The digest of an index-based plan, with its header.
    plan = parse_plan(load('index_dialect.json'))
    assert plan.dialect == 'index' and plan.goal == 'Check if CPU usage exceeds 80%'
    assert [s.id for s in plan.steps] == ['step_0', 'step_1', 'step_2']
    run = run_plan_sync(plan, TOOLS)
    assert run.step('step_1').arguments == {'name': 'cpu_usage'}
    assert run.step('step_2').value['exceeded'] is False  # 72.5 is not above "80"
    digest = run.digest().splitlines()
    assert digest[0] == 'Plan executed: 3/3 succeeded.'
    assert digest[1].startswith('Step 1 (list_metrics): ')
    assert digest[3].startswith('Step 3 (check_threshold): ')


def test_failing_plan_fails_forward() -> None:
    run = run_plan_sync(load('failing.json'), TOOLS)
    assert (run.step('status').status, run.step('weather').status, run.step('alert').status) == (
        'failed', 'succeeded', 'skipped')
    assert run.step('status').error == 'Tool execution failed: upstream service unavailable (HTTP 503)'
    assert run.summary.startswith('Plan completed with errors.\nResults: ')
    assert "Errors: status: Tool execution failed: upstream service unavailable (HTTP 503); " \
           "alert: Skipped because dependency 'status' failed" in run.summary


def test_invalid_plan_has_every_problem() -> None:
    # A duplicate id, a blank tool, a recursive plan, an unknown tool, a cycle and an unknown reference (a
    # validation error too), all reported at once.
    problems = validate_plan(load('invalid.json'), TOOLS)
    assert len(problems) >= 6
    joined = '\n'.join(problems)
    for needle in ("'tokyo'", "'fetch_url'", "'berlin'", 'execute_tool_plan', 'no_tool', 'Cycle detected'):
        assert needle in joined, needle
