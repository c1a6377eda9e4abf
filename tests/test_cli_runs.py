"""`toolweave run --store/--review plan` and `toolweave runs list | show | approve | resume`, through the typer app."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolweave.cli._app import app

PLAN = {'steps': [
    {'id': 'who', 'tool': 'find', 'arguments': {'name': 'Ada'}},
    {'id': 'mail', 'tool': 'send', 'arguments': {'to': '$ref:who.email'}},
    {'id': 'log', 'tool': 'find', 'arguments': {'name': '$ref:mail'}},
]}
TOOLS = '''
from toolweave import tool
from toolweave.exceptions import ApprovalPending

SENT = []

@tool
def find(name: str) -> dict:
    """Find someone."""
    return {'email': name.lower() + '@example.com'}

@tool(requires_approval=True)
def send(to: str) -> str:
    """Send mail."""
    SENT.append(to)
    return 'sent to ' + to

class Later:
    async def review(self, request):
        raise ApprovalPending('the owner decides later')

TOOLS = [find, send]
'''


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    (tmp_path / 'cli_runs_tools.py').write_text(textwrap.dedent(TOOLS))
    monkeypatch.syspath_prepend(str(tmp_path))
    plan = tmp_path / 'plan.json'
    plan.write_text(json.dumps(PLAN))
    return plan, f'sqlite:///{tmp_path}/runs.db'


def invoke(*args: str, stdin: str | None = None) -> Any:
    result = CliRunner().invoke(app, list(args), input=stdin, catch_exceptions=False)
    assert 'Traceback' not in result.output
    return result


def test_a_parked_step_is_shown_approved_and_resumed(setup: tuple[Path, str]) -> None:
    plan, store = setup
    # `--review reject` as the reviewer would reject; a reviewer that parks is what a web UI would install.
    result = invoke('run', str(plan), '--tools', 'cli_runs_tools:TOOLS', '--store', store, '--run-id', 'r1',
                    '--review', 'plan', stdin='r not now\n')
    assert result.exit_code == 1
    assert 'Cancelled: the reviewer rejected the plan (not now)' in ' '.join(result.output.split())
    listed = invoke('runs', 'list', '--store', store, '--json')
    assert [(r['run_id'], r['status'], r['steps']) for r in json.loads(listed.output)] == [('r1', 'finished', 3)]


def test_runs_show_approve_resume(setup: tuple[Path, str], tmp_path: Path) -> None:
    import anyio
    import cli_runs_tools  # type: ignore[import-not-found]

    from toolweave.plan import run_plan

    plan, store = setup
    run = anyio.run(lambda: run_plan(PLAN, cli_runs_tools.TOOLS, store=store, run_id='p1',
                                     review_handler=cli_runs_tools.Later()))
    assert run.parked == 1
    shown = invoke('runs', 'show', 'p1', '--store', store)
    assert shown.exit_code == 0
    text = ' '.join(shown.output.replace('│', ' ').split())
    assert 'Run p1: suspended' in text and 'Waiting for approval: the owner decides later' in text
    assert 'Parked: mail.' in text
    data = json.loads(invoke('runs', 'show', 'p1', '--store', store, '--json').output)
    assert [(s['id'], s['status']) for s in data['steps']] == [('who', 'succeeded'), ('mail', 'parked'),
                                                              ('log', 'pending')]
    wrong = invoke('runs', 'approve', 'p1', 'who', '--store', store)
    assert wrong.exit_code == 2 and "Step 'who' of plan run 'p1' is succeeded" in wrong.output
    unknown = invoke('runs', 'approve', 'nope', 'who', '--store', store)
    assert unknown.exit_code == 2 and "No plan run 'nope'" in unknown.output
    bad = invoke('runs', 'approve', 'p1', 'mail', '--edit', '[1]', '--store', store)
    assert bad.exit_code == 2 and 'must be a JSON object' in bad.output
    ok = invoke('runs', 'approve', 'p1', 'mail', '--edit', '{"to": "grace@example.com"}', '--store', store)
    assert ok.exit_code == 0 and 'mail approved with new arguments' in ok.output
    resumed = invoke('runs', 'resume', 'p1', '--tools', 'cli_runs_tools:TOOLS', '--store', store)
    assert resumed.exit_code == 0, resumed.output
    assert 'Run p1: 3/3 succeeded' in resumed.output
    assert cli_runs_tools.SENT == ['grace@example.com']
    again = invoke('runs', 'resume', 'p1', '--tools', 'cli_runs_tools:TOOLS', '--store', store)
    assert again.exit_code == 0 and cli_runs_tools.SENT == ['grace@example.com']


def test_a_store_that_cannot_be_opened_is_bad_input(tmp_path: Path) -> None:
    result = invoke('runs', 'list', '--store', f'sqlite:///{tmp_path}/no/such/dir.db')
    assert result.exit_code == 2 and 'Cannot open plan store' in result.output


def test_review_park_parks_the_gated_steps_for_runs_approve(setup: tuple[Path, str]) -> None:
    plan, store = setup
    result = invoke('run', str(plan), '--tools', 'cli_runs_tools:TOOLS', '--store', store, '--run-id', 'k1',
                    '--review', 'park')
    text = ' '.join(result.output.replace('│', ' ').split())
    assert 'parked by `toolweave run --review park`' in text and '1 parked' in text
    data = json.loads(invoke('runs', 'show', 'k1', '--store', store, '--json').output)
    assert [(s['id'], s['status']) for s in data['steps']] == [('who', 'succeeded'), ('mail', 'parked'),
                                                              ('log', 'pending')]
    assert invoke('runs', 'approve', 'k1', 'mail', '--store', store).exit_code == 0
    resumed = invoke('runs', 'resume', 'k1', '--tools', 'cli_runs_tools:TOOLS', '--store', store)
    assert resumed.exit_code == 0 and 'Run k1: 3/3 succeeded' in resumed.output


def test_review_park_without_a_store_is_bad_input(setup: tuple[Path, str]) -> None:
    plan, _ = setup
    result = CliRunner().invoke(app, ['run', str(plan), '--tools', 'cli_runs_tools:TOOLS', '--review', 'park'])
    assert result.exit_code == 2 and 'parked steps wait in a plan store' in ' '.join(result.output.split())
