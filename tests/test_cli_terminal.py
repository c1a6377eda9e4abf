"""`toolweave` at a real terminal (a pty, through pexpect): Ctrl-C, approval prompts, warnings on stderr.

Each test starts the installed `toolweave` command in a fresh process, with tools written to a temporary folder.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pexpect
import pytest

TOOLWEAVE = str(Path(sys.executable).with_name('toolweave'))
ANSI = re.compile(r'\x1b\[[0-9;?]*[A-Za-z]|\r')

TOOLS = '''
import os
from pathlib import Path

import anyio

from toolweave import tool

LOG = Path(__file__).with_name('calls.log')


def called(name: str) -> None:
    with LOG.open('a') as log:
        log.write(name + '\\n')


@tool
async def fast(text: str) -> str:
    """Answer at once."""
    called('fast ' + text)
    return text.upper()


@tool(idempotent=True)  # so a resume may call it again after it was interrupted
async def slow(text: str) -> str:
    """Wait, when SLOW is set, until stopped."""
    called('slow ' + text)
    if os.environ.get('SLOW'):
        await anyio.sleep(120)
    return text + '!'


@tool
async def tick(n: int) -> int:
    """Take a moment."""
    await anyio.sleep(0.15)
    return n + 1


@tool(requires_approval=True)
async def send(to: str) -> str:
    """Send mail."""
    called('send ' + to)
    return 'sent to ' + to


TOOLS = [fast, slow, tick, send]
'''


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / 'term_tools.py').write_text(textwrap.dedent(TOOLS))
    return tmp_path


def spawn(folder: Path, *args: str, **env: str) -> pexpect.spawn[str]:
    environment = {k: v for k, v in os.environ.items() if k != 'TOOLWEAVE_STORE'}
    environment.update({'COLUMNS': '120', 'LINES': '40', 'TERM': 'xterm', **env})
    return pexpect.spawn(TOOLWEAVE, list(args), cwd=str(folder), env=environment, encoding='utf-8', timeout=60,
                         dimensions=(40, 120))


def finish(child: pexpect.spawn[str], seconds: float = 120) -> tuple[str, int]:
    """Everything the child prints until it exits, without escape codes, and its exit status."""
    try:
        child.expect(pexpect.EOF, timeout=seconds)
    except pexpect.TIMEOUT:
        child.terminate(force=True)
        pytest.fail(f'still running after {seconds:g} s; it had printed:\n{ANSI.sub("", str(child.before))}')
    child.close()
    assert child.exitstatus is not None, f'killed by signal {child.signalstatus}'
    return ANSI.sub('', str(child.before)), child.exitstatus


def calls(folder: Path) -> list[str]:
    log = folder / 'calls.log'
    return log.read_text().splitlines() if log.exists() else []


def wait_for(condition: object, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, 'timed out'
        time.sleep(0.05)


@pytest.mark.timeout(300)
def test_ctrl_c_prints_what_finished_and_the_command_that_resumes_it(folder: Path) -> None:
    plan = {'steps': [{'id': 'a', 'tool': 'fast', 'arguments': {'text': 'ada'}},
                      {'id': 'b', 'tool': 'slow', 'arguments': {'text': '$ref:a'}},
                      {'id': 'c', 'tool': 'fast', 'arguments': {'text': 'bob'}}]}
    (folder / 'plan.json').write_text(json.dumps(plan))
    store = f'sqlite:///{folder}/runs.db'
    child = spawn(folder, 'run', 'plan.json', '--tools', 'term_tools:TOOLS', '--store', store, '--run-id', 'r1',
                  SLOW='1')
    wait_for(lambda: 'slow ADA' in calls(folder))  # a and c have finished; b is running
    child.sendintr()
    out, status = finish(child)
    assert status == 130, out
    lines = ' '.join(out.split())
    assert 'Interrupted: 2 steps of 3 had finished.' in lines
    assert 'done a: ADA' in lines and 'done c: BOB' in lines
    assert (f'Run r1 is stored: `toolweave runs resume r1 --store {store} --tools term_tools:TOOLS` goes on '
            'without running a finished step again.') in lines
    assert 'Traceback' not in out

    # The printed command goes on: only b runs, a and c are not called again.
    resumed = subprocess.run([TOOLWEAVE, 'runs', 'resume', 'r1', '--store', store, '--tools', 'term_tools:TOOLS'],
                             cwd=folder, capture_output=True, text=True, timeout=120,
                             env={k: v for k, v in os.environ.items() if k not in ('SLOW', 'TOOLWEAVE_STORE')})
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert 'Run r1: 3/3 succeeded' in resumed.stdout
    assert sorted(calls(folder)) == ['fast ada', 'fast bob', 'slow ADA', 'slow ADA']


def test_an_approval_prompt_is_not_broken_up_by_progress_lines(folder: Path) -> None:
    # `send` asks at once; t1 -> t2 -> t3 keep finishing while the question is on screen.
    plan = {'steps': [{'id': 'mail', 'tool': 'send', 'arguments': {'to': 'ada@example.com'}},
                      {'id': 't1', 'tool': 'tick', 'arguments': {'n': 1}},
                      {'id': 't2', 'tool': 'tick', 'arguments': {'n': '$ref:t1'}},
                      {'id': 't3', 'tool': 'tick', 'arguments': {'n': '$ref:t2'}}]}
    (folder / 'plan.json').write_text(json.dumps(plan))
    child = spawn(folder, 'run', 'plan.json', '--tools', 'term_tools:TOOLS')
    child.expect_exact('[a]pprove / a[l]ways / [e]dit / [r]eject / [q]uit run > ')
    # The ticks end within half a second; no progress line may be printed under the question meanwhile.
    with pytest.raises(pexpect.TIMEOUT):
        child.expect(r'started|done', timeout=1.0)
    child.sendline('a')
    out, status = finish(child)
    assert status == 0, out
    # The held progress came out after the answer, in order, then the report.
    after = out[out.index('a\n'):] if 'a\n' in out else out
    for line in ('done      t1', 'done      t2', 'done      t3', 'done      mail'):
        assert line in after, out
    assert after.index('done      t1') < after.index('done      t2') < after.index('done      t3')
    assert '4 steps in 3 waves: 4 succeeded' in out
    assert calls(folder) == ['send ada@example.com']


@pytest.mark.timeout(300)
def test_workers_without_a_live_worker_warn_instead_of_hanging_silently(folder: Path) -> None:
    pytest.importorskip('dbos')
    (folder / 'plan.json').write_text(json.dumps({'steps': [{'id': 'a', 'tool': 'fast', 'arguments': {'text': 'x'}}]}))
    store = f'sqlite:///{folder}/w.db'
    child = spawn(folder, 'run', 'plan.json', '--tools', 'term_tools:TOOLS', '--workers', '--run-id', 'w1',
                  TOOLWEAVE_STORE=store)
    child.expect('warning: No live worker serves queue', timeout=120)
    child.expect('1 running', timeout=60)  # the live table, drawn again below the warning
    seen = ANSI.sub('', str(child.before))
    child.sendintr()
    out, status = finish(child)
    assert status == 130, out
    warning = ' '.join(seen.split())
    assert warning.startswith(f"'toolweave' in {store}: the steps wait in the queue until one starts (`toolweave "
                              'worker --store URL --tools module:TOOLS`).'), warning
    assert f'`toolweave runs resume w1 --store {store} --tools term_tools:TOOLS`' in ' '.join(out.split())
    assert calls(folder) == []  # no worker ran the step
