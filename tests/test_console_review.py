"""The console review handler, driven through a real pseudo-terminal (approve, edit, reject, quit, timeout) and a
pipe, and the process-wide console lock that serialises concurrent prompts."""

from __future__ import annotations

import fcntl
import io
import os
import re
import select
import struct
import subprocess
import sys
import termios
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
from rich.console import Console

from toolweave import ConsoleReviewHandler, ExitEarly, ReviewRequest, TextTool, record_approvals, use_review_handler

pytestmark = pytest.mark.skipif(sys.platform == 'win32', reason='pseudo-terminals are POSIX only')

CHILD = textwrap.dedent("""
    import sys, threading
    import anyio
    from toolweave import (ConsoleReviewHandler, ExitEarly, TextTool, record_approvals, requires_approval,
                           use_review_handler)

    def gated(name, **options):
        tool = TextTool.from_function(name, 'writes', lambda text: f'{name} ran with {text}')
        return requires_approval(tool, **options)

    async def one(name, text, **options):
        result = await gated(name, **options).call({'input': text})
        print(f'RESULT {name}: {result.text}', flush=True)

    async def main(scenario):
        with use_review_handler(ConsoleReviewHandler()), record_approvals() as log:
            if scenario == 'single':
                await one('write_file', 'notes.txt')
            elif scenario == 'timeout':
                await one('slow_gate', 'x', timeout=0.5)
            elif scenario == 'concurrent':
                async with anyio.create_task_group() as tg:
                    tg.start_soon(one, 'first_gate', 'a')
                    tg.start_soon(one, 'second_gate', 'b')
            elif scenario == 'threads':
                def in_own_loop(name):
                    with use_review_handler(ConsoleReviewHandler()):
                        anyio.run(one, name, 'x')
                threads = [threading.Thread(target=in_own_loop, args=(n,)) for n in ('loop_one', 'loop_two')]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            print('OUTCOMES ' + ','.join(r.outcome for r in log), flush=True)

    try:
        anyio.run(main, sys.argv[1])
    except ExitEarly as exc:
        print(f'EXIT {exc}', flush=True)
""")

ANSI = re.compile(r'\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07')


class Terminal:
    """A child Python process whose stdin, stdout and stderr are the slave side of a pseudo-terminal."""

    def __init__(self, script: Path, scenario: str) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack('HHHH', 40, 160, 0, 0))  # wide: no wrapped panels
        env = {**os.environ, 'TERM': 'xterm', 'COLUMNS': '160', 'PYTHONUNBUFFERED': '1'}
        self.process = subprocess.Popen([sys.executable, str(script), scenario], stdin=slave, stdout=slave,
                                        stderr=slave, env=env, close_fds=True)
        os.close(slave)
        self.fd = master
        self.raw = b''
        self.cursor = 0

    @property
    def text(self) -> str:
        return ANSI.sub('', self.raw.decode('utf-8', 'replace')).replace('\r', '')

    def _pump(self, seconds: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], seconds)
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the child exited and closed the terminal
            chunk = b''
        self.raw += chunk
        return bool(chunk)

    def expect(self, pattern: str, timeout: float = 20.0) -> re.Match[str]:
        """Wait for `pattern` after the previous match; move past it."""
        deadline = time.monotonic() + timeout
        while True:
            match = re.compile(pattern).search(self.text, self.cursor)
            if match:
                self.cursor = match.end()
                return match
            if time.monotonic() > deadline or not self._pump(0.05):
                raise AssertionError(f'{pattern!r} not seen; terminal shows:\n{self.text}')

    def settle(self, seconds: float) -> str:
        """Everything that appears in the next `seconds` after the cursor."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self._pump(0.05):
            pass
        return self.text[self.cursor:]

    def send(self, line: str) -> None:
        os.write(self.fd, (line + '\n').encode())

    def finish(self) -> str:
        while self._pump(5.0):
            pass
        assert self.process.wait(timeout=20) == 0, self.text
        os.close(self.fd)
        return self.text


StartTerminal = Callable[[str], Terminal]  # the `terminal` fixture: start the child in a scenario


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[StartTerminal]:
    script = tmp_path / 'child.py'
    script.write_text(CHILD)
    started: list[Terminal] = []

    def start(scenario: str) -> Terminal:
        term = Terminal(script, scenario)
        started.append(term)
        return term

    yield start
    for term in started:
        if term.process.poll() is None:
            term.process.kill()
            term.process.wait()


PROMPT = r'\[a\]pprove / a\[l\]ways / \[e\]dit / \[r\]eject / \[q\]uit run > '


def test_approve_through_a_terminal(terminal: StartTerminal) -> None:
    term = terminal('single')
    term.expect(r'Approval required: write_file')
    term.expect(r'write_file: \{"input":"notes.txt"\}')
    term.expect(r'timeout 300 s, then reject')
    term.expect(PROMPT)
    term.send('a')
    term.expect(r'RESULT write_file: write_file ran with notes.txt')
    term.expect('OUTCOMES approved')
    term.finish()


def test_edit_through_a_terminal(terminal: StartTerminal) -> None:
    term = terminal('single')
    term.expect(PROMPT)
    term.send('what?')
    term.expect(r"Unknown answer 'what\?': type a, l, e, r or q.")
    term.expect(PROMPT)
    term.send('e')
    term.expect(r'Current input: \{"input":"notes.txt"\}')
    term.expect(r'Revised input \(empty to go back\) > ')
    term.send('safe.txt')  # one-argument tool: the bare new value
    term.expect(r'RESULT write_file: write_file ran with safe.txt')
    term.expect('OUTCOMES edited')
    term.finish()


def test_reject_through_a_terminal(terminal: StartTerminal) -> None:
    term = terminal('single')
    term.expect(PROMPT)
    term.send('r not on a Friday')
    term.expect(r'RESULT write_file: Error: Rejected by reviewer: \{"input":"notes.txt"\} \(not on a Friday\)')
    term.expect('OUTCOMES rejected')
    term.finish()


def test_quit_stops_the_run(terminal: StartTerminal) -> None:
    term = terminal('single')
    term.expect(PROMPT)
    term.send('q')
    term.expect(r"EXIT Run stopped by the reviewer at tool 'write_file'.")
    term.finish()


def test_unanswered_prompt_times_out(terminal: StartTerminal) -> None:
    term = terminal('timeout')
    term.expect(r'timeout 0.5 s, then reject')
    term.expect(r'No answer within 0.5 s: rejected.')
    term.expect(r'RESULT slow_gate: Error: Rejected by reviewer: \{"input":"x"\} \(no decision within 0.5 s\)')
    term.expect('OUTCOMES timed out, rejected')
    term.finish()


@pytest.mark.parametrize('scenario', ['concurrent', 'threads'])
def test_console_lock_serialises_prompts(terminal: StartTerminal, scenario: str) -> None:
    # two gated calls at once (two tasks of one event loop, or two event loops in two threads); the second
    # prompt appears only after the first is answered.
    term = terminal(scenario)
    first = term.expect(r'Approval required: (\w+)').group(1)
    term.expect(PROMPT)
    assert 'Approval required' not in term.settle(1.0)  # the other call waits for the lock
    term.send('a')
    second = term.expect(r'Approval required: (\w+)').group(1)
    assert {first, second} == ({'first_gate', 'second_gate'} if scenario == 'concurrent' else {'loop_one', 'loop_two'})
    term.expect(PROMPT)
    term.send('r')
    text = term.finish()
    assert f'RESULT {first}: {first} ran with' in text
    assert f'RESULT {second}: Error: Rejected by reviewer' in text


def test_answers_from_a_pipe(tmp_path: Path) -> None:
    # Piped answers arrive in one chunk; each prompt takes one line of it.
    script = tmp_path / 'child.py'
    script.write_text(CHILD)
    done = subprocess.run([sys.executable, str(script), 'concurrent'], input='a\nr piped\n', capture_output=True,
                          text=True, timeout=30, check=True)
    assert 'OUTCOMES approved,rejected' in done.stdout
    assert '(piped)' in done.stdout
    assert done.stderr.count('Approval required') == 2


def test_closed_input_rejects(tmp_path: Path) -> None:
    script = tmp_path / 'child.py'
    script.write_text(CHILD)
    done = subprocess.run([sys.executable, str(script), 'single'], input='', capture_output=True, text=True,
                          timeout=30, check=True)
    assert '(no reviewer input (stdin closed))' in done.stdout


@pytest.mark.anyio
async def test_stream_without_file_descriptor() -> None:
    output = io.StringIO()
    handler = ConsoleReviewHandler(stdin=io.StringIO('e\n{"path": "/tmp/b", "force": false}\n'),
                                   console=Console(file=output, width=100), max_chars=20)
    request = ReviewRequest('move', 'move: ' + '{"path":"/tmp/a","force":true}', {'path': '/tmp/a', 'force': True})
    decision = await handler.review(request)
    assert (decision.kind, decision.revised) == ('edit', {'path': '/tmp/b', 'force': False})
    assert re.search(r'\.\.\. \(\d+ more chars not shown\)', output.getvalue())
    panel = output.getvalue().split('Current input')[0]
    assert '/tmp/a' not in panel  # cut after 20 characters of the laid-out arguments


@pytest.mark.anyio
async def test_edit_of_several_arguments_needs_a_json_object() -> None:
    output = io.StringIO()
    handler = ConsoleReviewHandler(stdin=io.StringIO('e just text\ne {"a": 2, "b": 3}\n'),
                                   console=Console(file=output, width=100))
    decision = await handler.review(ReviewRequest('add', 'add: {"a":1,"b":1}', '{"a": 1, "b": 1}'))
    assert decision.revised == {'a': 2, 'b': 3}
    assert 'type the revised arguments as one JSON object' in output.getvalue()


@pytest.mark.anyio
async def test_quit_answer_raises_exit_early_and_bad_options() -> None:
    handler = ConsoleReviewHandler(stdin=io.StringIO('q\n'), console=Console(file=io.StringIO()))
    with use_review_handler(handler), record_approvals() as log, pytest.raises(ExitEarly):
        await TextTool.from_function('t', 't', str.upper, requires_approval=True).call('x')
    assert len(log) == 0
    with pytest.raises(ValueError, match='max_chars'):
        ConsoleReviewHandler(max_chars=0)
    await anyio.lowlevel.checkpoint()


@pytest.mark.anyio
@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_waiting_for_a_line_is_cancellable(anyio_backend: str) -> None:
    # A review waiting on a real file descriptor times out (on either backend), and a later line answers the next
    # review: nothing was lost or consumed by the cancelled wait.
    read_fd, write_fd = os.pipe()
    with open(read_fd, encoding='utf-8') as stdin:  # noqa: ASYNC230 - wraps a pipe, opens nothing
        output = io.StringIO()
        handler = ConsoleReviewHandler(stdin=stdin, console=Console(file=output, width=100))
        request = ReviewRequest('wait', 'wait: x', 'x', timeout=0.2, on_timeout='continue')
        decision = await handler.review(request)
        assert (decision.kind, decision.timed_out) == ('continue', True)
        assert 'No answer within 0.2 s: approved.' in output.getvalue()
        os.write(write_fd, b'r late\na\n')
        assert (await handler.review(request)).reason == 'late'
        assert (await handler.review(request)).kind == 'continue'  # the buffered second line
        os.close(write_fd)
        closed = await handler.review(request)
        assert (closed.kind, closed.reason) == ('exit_early', 'no reviewer input (stdin closed)')
    read_fd, write_fd = os.pipe()
    with open(read_fd, encoding='utf-8') as stdin:  # noqa: ASYNC230 - wraps a pipe, opens nothing
        handler = ConsoleReviewHandler(stdin=stdin, console=Console(file=io.StringIO()))
        with anyio.move_on_after(0.2) as scope:  # cancelling the run also ends a wait without a timeout
            await handler.review(ReviewRequest('wait', 'wait: y', 'y', timeout=None))
        assert scope.cancelled_caught
    os.close(write_fd)


@pytest.mark.anyio
async def test_always_approves_later_calls_of_that_tool_without_asking() -> None:
    output = io.StringIO()
    handler = ConsoleReviewHandler(stdin=io.StringIO('l\nr\n'), console=Console(file=output, width=100))
    deploy = TextTool.from_function('deploy', 'deploys', lambda t: f'deployed {t}', requires_approval=True)
    other = TextTool.from_function('other', 'other', lambda t: t, requires_approval=True)
    with use_review_handler(handler), record_approvals() as log:
        assert [(await deploy.call(v)).output for v in ('a', 'b', 'c')] == ['deployed a', 'deployed b', 'deployed c']
        assert not (await other.call('x')).ok  # a different tool still asks (and this answer rejects it)
    assert output.getvalue().count('Approval required') == 2
    assert [r.outcome for r in log] == ['approved'] * 3 + ['rejected']
    assert log.records[0].decision.reason is None and 'always' in (log.records[1].decision.reason or '')

    waiting = io.StringIO()
    handler = ConsoleReviewHandler(stdin=io.StringIO('l\n'), console=Console(file=waiting, width=100))
    with use_review_handler(handler):
        async with anyio.create_task_group() as tg:  # the second call waits for the lock, then needs no prompt
            for value in ('x', 'y'):
                tg.start_soon(deploy.call, value)
    assert waiting.getvalue().count('Approval required') == 1


@pytest.mark.anyio
async def test_several_arguments_are_shown_one_per_line() -> None:
    output = io.StringIO()
    handler = ConsoleReviewHandler(stdin=io.StringIO('a\n'), console=Console(file=output, width=100))
    await handler.review(ReviewRequest('transfer', 'transfer: {"to":"bob","amount":5}', '{"to":"bob","amount":5}'))
    shown = output.getvalue()
    assert 'transfer:' in shown and '"to": "bob",' in shown and '"amount": 5' in shown
    assert shown.index('"to"') < shown.index('"amount"')
