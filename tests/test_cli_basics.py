"""What a new user meets first: `-h` and `--version`, help that fits the terminal, one store rule for every command,
exit codes, messages in the command line's terms, and `make` on the wrong Python."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import toolweave
from toolweave.cli._app import app

ROOT = Path(__file__).resolve().parent.parent
TOOLWEAVE = str(Path(sys.executable).with_name('toolweave'))
TOOLS = '''
from toolweave import tool

@tool
def find(name: str) -> dict:
    """Find someone."""
    return {'email': name.lower() + '@example.com'}

@tool(requires_approval=True)
def send(to: str) -> str:
    """Send mail."""
    return 'sent to ' + to

@tool
def people() -> list:
    """Everyone."""
    return [{'name': 'Ada'}, {'name': 'Bob'}]

TOOLS = [find, send, people]
'''
PLAN = {'steps': [{'id': 'who', 'tool': 'find', 'arguments': {'name': 'Ada'}},
                  {'id': 'mail', 'tool': 'send', 'arguments': {'to': '$ref:who.email'}}]}


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / 'basic_tools.py').write_text(textwrap.dedent(TOOLS))
    (tmp_path / 'plan.json').write_text(json.dumps(PLAN))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv('TOOLWEAVE_STORE', raising=False)
    return tmp_path


def invoke(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> Any:
    result = CliRunner().invoke(app, list(args), env=env, input=stdin, catch_exceptions=False)
    assert 'Traceback' not in result.output
    return result


def flat(text: str) -> str:
    return ' '.join(text.replace('│', ' ').split())


def command(*args: str, env: dict[str, str] | None = None, stdin: str = '') -> subprocess.CompletedProcess[str]:
    return subprocess.run([TOOLWEAVE, *args], capture_output=True, text=True, timeout=120, input=stdin,
                          env={**os.environ, **(env or {})})


# --- 1. --version and -h --------------------------------------------------------------------------------------

def test_version_and_short_help() -> None:
    version = command('--version')
    assert version.returncode == 0 and version.stdout == f'toolweave {toolweave.__version__}\n'
    assert command('-V').stdout == version.stdout
    short, long = command('-h'), command('--help')
    assert short.returncode == 0 and short.stdout == long.stdout
    assert 'Commands:' in short.stdout and '--version' in short.stdout
    assert command('runs', 'approve', '-h').stdout == command('runs', 'approve', '--help').stdout


# --- 7. help wraps at 80 columns instead of cutting ---------------------------------------------------------------

@pytest.mark.parametrize('args', [(), ('run',), ('runs',), ('chat',), ('validate',), ('runs', 'resume')])
def test_help_wraps_to_80_columns_and_cuts_nothing(args: tuple[str, ...]) -> None:
    out = command(*args, '-h', env={'COLUMNS': '80'}).stdout
    assert out and all(len(line) <= 80 for line in out.splitlines()), out
    assert '…' not in out and '...' not in re.sub(r'\[ARGS\]\.\.\.|postgresql://\.\.\.|run_plan\(\.\.\.,', '', out)
    if args == ('run',):
        text = flat(out)
        assert 'path/to/file.py:attribute' in text and '<ask|plan|approve|reject|park>' in text
    if not args:
        assert 'Stored plan runs: list, show, decide, retry, resume, cancel, prune, recover.' in flat(out)


# --- 5. one store rule --------------------------------------------------------------------------------------------

def test_run_honours_toolweave_store_as_runs_does(folder: Path) -> None:
    store = f'sqlite:///{folder}/env.db'
    ran = invoke('run', 'plan.json', '--tools', 'basic_tools:TOOLS', '--review', 'approve', '--run-id', 'e1',
                 env={'TOOLWEAVE_STORE': store})
    assert ran.exit_code == 0, ran.output
    assert f'Run e1 stored (store {store}).' in flat(ran.output)
    listed = invoke('runs', 'list', '--json', env={'TOOLWEAVE_STORE': store})
    assert [r['run_id'] for r in json.loads(listed.output)['runs']] == ['e1']
    # --store wins over the environment.
    other = f'sqlite:///{folder}/other.db'
    invoke('run', 'plan.json', '--tools', 'basic_tools:TOOLS', '--review', 'approve', '--store', other,
           '--run-id', 'o1', env={'TOOLWEAVE_STORE': store})
    assert [r['run_id'] for r in json.loads(invoke('runs', 'list', '--json', '--store', other).output)['runs']] == [
        'o1']
    assert len(json.loads(invoke('runs', 'list', '--json', env={'TOOLWEAVE_STORE': store}).output)['runs']) == 1


def test_without_a_store_run_keeps_nothing_and_store_options_say_what_is_missing(folder: Path) -> None:
    ran = invoke('run', 'plan.json', '--tools', 'basic_tools:TOOLS', '--review', 'approve')
    assert ran.exit_code == 0 and 'stored' not in ran.output
    for extra in (['--run-id', 'x'], ['--workers'], ['--review', 'park']):
        bad = invoke('run', 'plan.json', '--tools', 'basic_tools:TOOLS', *extra)
        text = flat(bad.output)
        assert bad.exit_code == 2, text
        assert 'add --store URL (e.g. --store sqlite:///runs.db) or set TOOLWEAVE_STORE' in text
        assert 'store=' not in text and '`' not in text.split('Error:')[1]


# --- 7. exit codes, messages in the command line's terms ---------------------------------------------------------

def test_a_run_that_waits_for_approval_exits_3(folder: Path) -> None:
    store = f'sqlite:///{folder}/runs.db'
    parked = invoke('run', 'plan.json', '--tools', 'basic_tools:TOOLS', '--store', store, '--run-id', 'p1',
                    '--review', 'park')
    assert parked.exit_code == 3, parked.output
    text = flat(parked.output)
    assert (f'Run p1 waits for decisions (store {store}): `toolweave runs show p1 --store {store}`, `toolweave runs '
            f'approve p1 STEP --store {store}`, then `toolweave runs resume p1 --store {store} --tools '
            'basic_tools:TOOLS`.') in text
    still = invoke('runs', 'resume', 'p1', '--tools', 'basic_tools:TOOLS', '--store', store)
    assert still.exit_code == 3 and 'Parked: mail. Decide with `toolweave runs approve p1 STEP`' in flat(still.output)
    rejected = invoke('runs', 'approve', 'p1', 'mail', '--reject', 'not now', '--store', store)
    assert rejected.exit_code == 0
    assert rejected.output == ('mail rejected: `toolweave runs resume p1 --tools MODULE:ATTRIBUTE` records it as '
                               'failed and skips the steps that depend on it.\n')
    ended = invoke('runs', 'resume', 'p1', '--tools', 'basic_tools:TOOLS', '--store', store)
    assert ended.exit_code == 1 and '1/2 succeeded, 1 failed' in ended.output


def test_a_run_id_reused_for_another_plan_points_to_runs_resume(folder: Path) -> None:
    store = f'sqlite:///{folder}/runs.db'
    assert invoke('run', 'plan.json', '--tools', 'basic_tools:TOOLS', '--store', store, '--run-id', 'mail-1',
                  '--review', 'approve').exit_code == 0
    (folder / 'other.json').write_text(json.dumps({'steps': [{'id': 'x', 'tool': 'find', 'arguments': {'name': 'B'}}]}))
    again = invoke('run', 'other.json', '--tools', 'basic_tools:TOOLS', '--store', store, '--run-id', 'mail-1')
    text = flat(again.output)
    assert again.exit_code == 2
    assert text == (f"Run 'mail-1' in {store} was started with another plan. Give this plan a new --run-id, or go on "
                    f'with the stored one: toolweave runs resume mail-1 --store {store} --tools basic_tools:TOOLS')
    assert 'resume_plan' not in text


def test_ref_item_in_a_for_each_step_names_item(folder: Path) -> None:
    (folder / 'each.json').write_text(json.dumps({'steps': [
        {'id': 'all', 'tool': 'people', 'arguments': {}},
        {'id': 'each', 'tool': 'find', 'for_each': '$ref:all', 'arguments': {'name': '$ref:item.name'}}]}))
    result = invoke('validate', 'each.json', '--tools', 'basic_tools:TOOLS')
    assert result.exit_code == 1
    assert ("steps[1] (id 'each'): arguments.name: reference '$ref:item.name' names step 'item', which is not in the "
            'plan. The element a "for_each" step is called with is written without "$ref:": \'$item.name\'. Refer to '
            'one of the step ids: all, each.') in flat(result.output)


def test_chat_without_an_api_key_says_which_variable_before_any_prompt(folder: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ('OPENAI_API_KEY', 'ANTHROPIC_API_KEY',
                                                            'ANTHROPIC_AUTH_TOKEN')}
    for model, variable in (('openai:gpt-4o-mini', 'OPENAI_API_KEY'),
                            ('anthropic:claude-sonnet-4-5', 'ANTHROPIC_API_KEY')):
        done = subprocess.run([TOOLWEAVE, 'chat', '--model', model], capture_output=True, text=True, timeout=60,
                              input='hello\n', env={**env, 'HOME': str(folder)})
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stdout == ''  # no banner, no prompt, no reply
        assert done.stderr == (f'toolweave chat: no API key for {model}: set the {variable} environment variable '
                               f'(export {variable}=...)' + (', or use a local model such as --model ollama:qwen2.5.'
                                                             if variable == 'OPENAI_API_KEY' else '.') + '\n')
    local = subprocess.run([TOOLWEAVE, 'chat', '--model', 'ollama:qwen2.5', '-h'], capture_output=True, text=True,
                           timeout=60, env=env)
    assert local.returncode == 0


def test_chat_model_takes_a_file_path_as_tools_does(folder: Path) -> None:
    (folder / 'sub').mkdir()
    (folder / 'sub' / 'my_model.py').write_text(textwrap.dedent("""
        from toolweave.testing import ScriptedModel

        MODEL = ScriptedModel(['Hello from a file.'])
    """))
    result = invoke('chat', '--model', 'sub/my_model.py:MODEL', stdin='hi\n')
    assert result.exit_code == 0, result.output
    assert 'assistant> Hello from a file.' in result.output
    missing = invoke('chat', '--model', 'sub/nope.py:MODEL', stdin='')
    assert missing.exit_code == 2 and "file 'sub/nope.py' not found" in flat(missing.output)


# --- 8. make on the wrong Python ----------------------------------------------------------------------------------

def _python310() -> str | None:
    for candidate in (shutil.which('python3.10'), *sorted(Path('/root/.pyenv/versions').glob('3.10*/bin/python3.10'))):
        if candidate is not None and subprocess.run([str(candidate), '-c', ''], capture_output=True).returncode == 0:
            return str(candidate)
    return None


@pytest.mark.skipif(shutil.which('make') is None, reason='make is not installed')
def test_make_checks_the_python_version_first(tmp_path: Path) -> None:
    shutil.copy(ROOT / 'Makefile', tmp_path / 'Makefile')
    shutil.copy(ROOT / 'pyproject.toml', tmp_path / 'pyproject.toml')
    missing = subprocess.run(['make', 'demo', 'PYTHON=no-such-python3'], cwd=tmp_path, capture_output=True,
                             text=True, timeout=60)
    assert missing.returncode != 0 and not (tmp_path / '.venv').exists()
    assert ('toolweave needs Python >= 3.11, and no-such-python3 is not found. Install Python 3.11 or newer, then '
            'run make with it, e.g. make demo PYTHON=python3.11') in missing.stderr
    old = _python310()
    if old is None:
        pytest.skip('no Python 3.10 here to try make with')
    refused = subprocess.run(['make', 'demo', f'PYTHON={old}'], cwd=tmp_path, capture_output=True, text=True,
                             timeout=60)
    assert refused.returncode != 0 and not (tmp_path / '.venv').exists()
    assert f'toolweave needs Python >= 3.11, and {old} is Python 3.10' in refused.stderr


@pytest.mark.skipif(shutil.which('make') is None, reason='make is not installed')
def test_make_rebuilds_a_venv_made_by_another_python(tmp_path: Path) -> None:
    shutil.copy(ROOT / 'Makefile', tmp_path / 'Makefile')
    shutil.copy(ROOT / 'pyproject.toml', tmp_path / 'pyproject.toml')
    version = '.'.join(map(str, sys.version_info[:3]))
    (tmp_path / '.venv').mkdir()
    (tmp_path / '.venv' / '.installed-3.10.13').touch()  # what `make install` with Python 3.10 left
    plan = subprocess.run(['make', '-n', 'install', f'PYTHON={sys.executable}'], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60).stdout
    assert f'{sys.executable} -m venv --clear .venv' in plan and f'touch .venv/.installed-{version}' in plan
    (tmp_path / '.venv' / f'.installed-{version}').touch()  # made by this Python: kept
    plan = subprocess.run(['make', '-n', 'install', f'PYTHON={sys.executable}'], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60).stdout
    assert '-m venv' not in plan and 'pip install' not in plan
