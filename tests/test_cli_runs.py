"""`toolweave run --store/--review plan` and `toolweave runs list | show | approve | resume | cancel | prune |
recover`, through the typer app."""

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
    assert [(r['run_id'], r['status'], r['steps']) for r in json.loads(listed.output)['runs']] == [
        ('r1', 'finished', 3)]


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


def test_reading_commands_on_a_wrong_path_say_so_and_create_no_file(tmp_path: Path) -> None:
    typo = tmp_path / 'runz.db'
    for command in (['runs', 'list'], ['runs', 'show', 'r1']):
        result = invoke(*command, '--store', f'sqlite:///{typo}')
        assert result.exit_code == 2, result.output
        assert f"the file '{typo}' does not exist. Check the path" in ' '.join(result.output.split())
    assert not typo.exists()


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


def _run(store: str, run_id: str, *, park: bool = False, name: str | None = None) -> None:
    import anyio
    import cli_runs_tools

    from toolweave import AutoApproveHandler
    from toolweave.plan import run_plan

    anyio.run(lambda: run_plan(PLAN, cli_runs_tools.TOOLS, store=store, run_id=run_id, name=name,
                               review_handler=cli_runs_tools.Later() if park else AutoApproveHandler()))


def test_runs_list_filters_pages_and_prints_json(setup: tuple[Path, str]) -> None:
    _, store = setup
    for n in range(3):
        _run(store, f'n{n}', name='nightly')
    _run(store, 'p1', park=True)
    first = json.loads(invoke('runs', 'list', '--store', store, '--limit', '2', '--json').output)
    assert [r['run_id'] for r in first['runs']] == ['p1', 'n2'] and first['cursor']
    rest = json.loads(invoke('runs', 'list', '--store', store, '--limit', '2', '--after', first['cursor'],
                             '--json').output)
    assert [r['run_id'] for r in rest['runs']] == ['n1', 'n0'] and rest['cursor'] is None
    waiting = json.loads(invoke('runs', 'list', '--store', store, '--waiting', '--json').output)
    assert [(r['run_id'], r['status'], r['waiting']) for r in waiting['runs']] == [('p1', 'suspended', 1)]
    named = json.loads(invoke('runs', 'list', '--store', store, '--name', 'nightly', '--status', 'finished',
                              '--status', 'crashed', '--since', '1h', '--json').output)
    assert [r['run_id'] for r in named['runs']] == ['n2', 'n1', 'n0']
    assert json.loads(invoke('runs', 'list', '--store', store, '--until', '2000-01-01', '--json').output)['runs'] == []
    table = invoke('runs', 'list', '--store', store, '--limit', '1')
    text = ' '.join(table.output.replace('│', ' ').split())
    assert 'p1' in text and 'suspended' in text and f"--after {first['cursor'][:10]}" in text.replace('`', '')
    bad = invoke('runs', 'list', '--store', store, '--status', 'done')
    assert bad.exit_code == 2 and 'status must be one or more of running, crashed' in ' '.join(bad.output.split())
    worse = invoke('runs', 'list', '--store', store, '--since', 'last tuesday')
    assert worse.exit_code == 2 and "got 'last tuesday'" in ' '.join(worse.output.split())


def test_runs_cancel_and_show(setup: tuple[Path, str]) -> None:
    _, store = setup
    _run(store, 'p1', park=True)
    _run(store, 'done')
    result = invoke('runs', 'cancel', 'p1', '--reason', 'not needed', '--store', store)
    assert result.exit_code == 0
    assert 'Run p1 cancelled: 2 unfinished steps recorded cancelled (mail, log).' in ' '.join(result.output.split())
    shown = json.loads(invoke('runs', 'show', 'p1', '--store', store, '--json').output)
    assert shown['status'] == 'cancelled' and shown['cancel_reason'] == 'not needed'
    assert [(s['id'], s['status'], s['error']) for s in shown['steps']] == [
        ('who', 'succeeded', None), ('mail', 'cancelled', 'Cancelled: the run was cancelled (not needed)'),
        ('log', 'cancelled', 'Cancelled: the run was cancelled (not needed)')]
    again = invoke('runs', 'cancel', 'p1', '--store', store)
    assert again.exit_code == 0 and 'was already cancelled' in again.output
    finished = invoke('runs', 'cancel', 'done', '--store', store)
    assert finished.exit_code == 2 and 'has already finished: there is nothing to cancel' in finished.output
    unknown = invoke('runs', 'cancel', 'nope', '--store', store)
    assert unknown.exit_code == 2 and "No plan run 'nope'" in unknown.output
    resumed = invoke('runs', 'resume', 'p1', '--tools', 'cli_runs_tools:TOOLS', '--store', store)
    assert resumed.exit_code == 2 and "Plan run 'p1'" in resumed.output and 'was cancelled (not needed)' in (
        ' '.join(resumed.output.split()))


def test_runs_prune_deletes_old_runs_and_says_how_many(setup: tuple[Path, str], tmp_path: Path) -> None:
    import sqlite3

    _, store = setup
    for n in range(3):
        _run(store, f'old{n}')
    _run(store, 'new')
    _run(store, 'waits', park=True)
    db = sqlite3.connect(tmp_path / 'runs.db')
    with db:
        db.execute("UPDATE toolweave_runs SET updated_at = updated_at - 40 * 86400 WHERE run_id LIKE 'old%' "
                   "OR run_id = 'waits'")
    db.close()
    dry = json.loads(invoke('runs', 'prune', '--older-than', '30d', '--dry-run', '--json', '--store', store).output)
    assert (dry['runs'], dry['transitions'], dry['dry_run']) == (3, 30, True)
    result = invoke('runs', 'prune', '--older-than', '30d', '--store', store)
    assert result.exit_code == 0 and 'Deleted 3 runs (30 transitions, 0 large outputs) in 1 batches.' in result.output
    listed = json.loads(invoke('runs', 'list', '--json', '--store', store).output)
    assert sorted(r['run_id'] for r in listed['runs']) == ['new', 'waits']
    suspended = invoke('runs', 'prune', '--older-than', '30d', '--status', 'suspended', '--store', store)
    assert 'Deleted 1 runs' in suspended.output
    bad = invoke('runs', 'prune', '--older-than', 'a month', '--store', store)
    assert bad.exit_code == 2 and 'older_than must be a number with a unit' in ' '.join(bad.output.split())
    live = invoke('runs', 'prune', '--older-than', '1d', '--status', 'running', '--store', store)
    assert live.exit_code == 2 and 'a running run a live process holds is never pruned' in ' '.join(
        live.output.split())


def test_approve_with_tools_checks_an_edit_against_the_tool(setup: tuple[Path, str]) -> None:
    _, store = setup
    _run(store, 'p1', park=True)
    typo = invoke('runs', 'approve', 'p1', 'mail', '--edit', '{"too": "grace@example.com"}', '--tools',
                  'cli_runs_tools:TOOLS', '--store', store)
    text = ' '.join(typo.output.split())
    assert typo.exit_code == 2
    assert "The edited arguments for step 'mail' of plan run 'p1' do not fit tool 'send'; nothing was recorded" in text
    assert ('arguments.to: Field required. - arguments.too: Unexpected argument, got "grace@example.com". Tool '
            "'send' takes: to.") in text
    shown = json.loads(invoke('runs', 'show', 'p1', '--store', store, '--json').output)
    assert [s['status'] for s in shown['steps']] == ['succeeded', 'parked', 'pending']  # nothing recorded
    ok = invoke('runs', 'approve', 'p1', 'mail', '--edit', '{"to": "grace@example.com"}', '--tools',
                'cli_runs_tools:TOOLS', '--store', store)
    assert ok.exit_code == 0 and 'approved with new arguments' in ok.output


def test_runs_recover_resumes_a_crashed_run(setup: tuple[Path, str], tmp_path: Path) -> None:
    import os
    import sqlite3

    import cli_runs_tools

    _, store = setup
    _run(store, 'c1')
    db = sqlite3.connect(tmp_path / 'runs.db')
    with db:  # as a process killed after its first step would leave it
        db.execute("DELETE FROM toolweave_transitions WHERE run_id = 'c1' AND step_id <> 'who'")
        db.execute("UPDATE toolweave_runs SET status = 'running', owner = ? WHERE run_id = 'c1'",
                   (f'{os.uname().nodename}:999999999:gone',))
    db.close()
    listed = json.loads(invoke('runs', 'list', '--json', '--store', store).output)
    assert [(r['run_id'], r['status']) for r in listed['runs']] == [('c1', 'crashed')]
    shown = invoke('runs', 'show', 'c1', '--store', store)
    assert 'Run c1: crashed' in shown.output and 'Its process is gone' in ' '.join(shown.output.split())
    sent = list(cli_runs_tools.SENT)
    result = invoke('runs', 'recover', '--tools', 'cli_runs_tools:TOOLS', '--store', store, '--json')
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [{'run_id': 'c1', 'outcome': 'resumed', 'status': 'suspended', 'error': None}]
    assert cli_runs_tools.SENT == sent  # the gated step parked for a person: nobody to ask
    again = invoke('runs', 'recover', '--tools', 'cli_runs_tools:TOOLS', '--store', store)
    assert again.exit_code == 0 and 'No crashed runs.' in again.output


def test_runs_resolve_and_retry(setup: tuple[Path, str]) -> None:
    import anyio
    import cli_runs_tools

    from toolweave.plan import run_plan

    plan, store = setup
    sent_before = len(cli_runs_tools.SENT)  # the module is imported once per process
    anyio.run(lambda: run_plan(PLAN, cli_runs_tools.TOOLS, store=store, run_id='q1',
                               review_handler=cli_runs_tools.Later()))
    # A person sent the mail by hand: resolve the parked step as done with what it gave.
    wrong = invoke('runs', 'resolve', 'q1', 'who', '--output', '"x"', '--store', store)
    assert wrong.exit_code == 2 and "Step 'who' of plan run 'q1' is succeeded" in wrong.output
    done = invoke('runs', 'resolve', 'q1', 'mail', '--output', 'sent by hand', '--reason', 'phoned', '--store', store)
    assert done.exit_code == 0 and 'mail resolved as done' in done.output
    resumed = invoke('runs', 'resume', 'q1', '--tools', 'cli_runs_tools:TOOLS', '--store', store, '--json')
    assert resumed.exit_code == 0, resumed.output
    steps = {s['id']: s for s in json.loads(resumed.output)['steps']}
    assert steps['mail']['status'] == 'succeeded' and steps['mail']['output'] == 'sent by hand'
    assert steps['log']['status'] == 'succeeded' and len(cli_runs_tools.SENT) == sent_before  # nothing sent
    # A step that did not fail cannot be retried; an unknown run is bad input.
    assert invoke('runs', 'retry', 'q1', 'who', '--store', store).exit_code == 2
    assert invoke('runs', 'retry', 'nope', 'who', '--store', store).exit_code == 2


def test_runs_retry_runs_a_failed_step_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / 'flaky_cli_tools.py').write_text(textwrap.dedent('''
        from toolweave import tool

        CALLS = []

        @tool
        def flaky(x: int) -> int:
            """Fails the first time."""
            CALLS.append(x)
            if len(CALLS) == 1:
                raise ConnectionError('the service is down')
            return x * 2

        TOOLS = [flaky]
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    plan = tmp_path / 'plan.json'
    plan.write_text(json.dumps({'steps': [{'id': 'a', 'tool': 'flaky', 'arguments': {'x': 2}},
                                          {'id': 'b', 'tool': 'flaky', 'arguments': {'x': '$ref:a'}}]}))
    store = f'sqlite:///{tmp_path}/runs.db'
    ran = invoke('run', str(plan), '--tools', 'flaky_cli_tools:TOOLS', '--store', store, '--run-id', 'f1')
    assert ran.exit_code == 1
    retried = invoke('runs', 'retry', 'f1', 'a', '--reason', 'the service is back', '--store', store)
    assert retried.exit_code == 0 and 'a will run again' in retried.output
    twice = invoke('runs', 'retry', 'f1', 'a', '--store', store)
    assert twice.exit_code == 2 and 'already' in twice.output
    resumed = invoke('runs', 'resume', 'f1', '--tools', 'flaky_cli_tools:TOOLS', '--store', store, '--json')
    assert resumed.exit_code == 0, resumed.output
    assert [(s['id'], s['status'], s['output']) for s in json.loads(resumed.output)['steps']] == [
        ('a', 'succeeded', '4'), ('b', 'succeeded', '8')]


def test_run_options_for_durable_runs(setup: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan, store = setup
    # Without a store, options that only a stored run has are bad input that says what to add.
    for option, value in [('--name', 'x'), ('--decision-deadline', '5'), ('--wait-for-decisions', '1')]:
        refused = invoke('run', str(plan), '--tools', 'cli_runs_tools:TOOLS', option, value, '--review', 'park')
        assert refused.exit_code == 2 and '--store' in refused.output, refused.output
    # A named run whose parked review has a short deadline: the resume after it rejects the step.
    parked = invoke('run', str(plan), '--tools', 'cli_runs_tools:TOOLS', '--store', store, '--run-id', 'd1',
                    '--review', 'park', '--name', 'nightly', '--decision-deadline', '0.05', '--retries', '3')
    assert parked.exit_code == 3, parked.output
    listed = json.loads(invoke('runs', 'list', '--store', store, '--name', 'nightly', '--json').output)['runs']
    assert [r['run_id'] for r in listed] == ['d1']
    import time
    time.sleep(0.1)
    resumed = invoke('runs', 'resume', 'd1', '--tools', 'cli_runs_tools:TOOLS', '--store', store, '--json',
                     '--wait-for-decisions', '0')
    steps = {s['id']: s for s in json.loads(resumed.output)['steps']}
    assert steps['mail']['status'] == 'failed' and 'no decision before its deadline' in steps['mail']['error']
    assert steps['log']['status'] == 'skipped' and resumed.exit_code == 1
    bad = invoke('run', str(plan), '--tools', 'cli_runs_tools:TOOLS', '--store', store, '--retries', '0')
    assert bad.exit_code == 2
