"""The console review handler: a person approves, edits or rejects each gated call at a terminal.

Concurrent reviews (parallel plan steps, several tools in one model turn, several event loops in several
threads) are serialised by ONE process-wide lock, so prompts never interleave and every answer goes to the
prompt it was typed for. The lock is a `threading.Lock` polled from async code, which works across
event loops and threads and never blocks an event loop.

Answers are read from the file descriptor with `select`, in a worker thread that checks for cancellation, so a
review times out (or is cancelled with its run) even while it waits for a line. Streams without a file
descriptor (an `io.StringIO` in a test), and every stream on Windows, are read with a plain `readline` instead;
such a wait cannot be interrupted until the line arrives.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import sys
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import IO, TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.to_thread

from toolweave._checks import check_number
from toolweave.approval._model import (
    PlanReviewDecision,
    PlanReviewRequest,
    ReviewDecision,
    ReviewRequest,
    describe_arguments,
)
from toolweave.exceptions import ExitEarly

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ('ConsoleReviewHandler', 'console_lock')

_CONSOLE_LOCK = threading.Lock()
_POLL_SECONDS = 0.02
_SELECT_SECONDS = 0.05
# Bytes read past the end of a line, per file descriptor; only touched while the console lock is held.
_pending: dict[int, bytearray] = {}

_APPROVE = frozenset({'a', 'approve', 'y', 'yes', 'c', 'continue'})
_ALWAYS = frozenset({'l', 'always'})
_ALWAYS_APPROVED = ReviewDecision('continue', reason='the reviewer answered "always" for this tool earlier')
_REJECT = frozenset({'r', 'reject', 'n', 'no', 'x', 'exit'})
_EDIT = frozenset({'e', 'edit'})
_QUIT = frozenset({'q', 'quit'})


@asynccontextmanager
async def console_lock() -> AsyncIterator[None]:
    """Hold the process-wide console lock: anything that prompts at the terminal takes it first."""
    # Polled, not awaited on an anyio primitive: the holder may run in another thread's event loop, and a
    # blocking acquire in a worker thread could take the lock after this task was cancelled and leak it.
    while not _CONSOLE_LOCK.acquire(blocking=False):  # noqa: ASYNC110
        await anyio.sleep(_POLL_SECONDS)
    try:
        yield
    finally:
        _CONSOLE_LOCK.release()


def _rich_console(stderr: bool) -> Console:
    try:
        from rich.console import Console
    except ImportError as e:  # pragma: no cover - rich ships with the cli extra
        raise ImportError(
            'Please install `rich` to use ConsoleReviewHandler: `pip install "toolweave[cli]"`.'
        ) from e
    return Console(stderr=stderr, highlight=False)


class ConsoleReviewHandler:
    """Asks a person at the terminal: approve, edit (type the revised input), reject (with an optional reason),
    or quit the whole run.

    Answers: `a` (approve), `l` (always: approve this call and every later call of the same tool without asking),
    `e` or `e <revised input>` (edit), `r` or `r <reason>` (reject), `q` (quit: raises `ExitEarly`, which stops
    the run). An edit of a tool that takes one argument may be typed as the bare new
    value; otherwise type the revised arguments as one JSON object. A closed input rejects the call.

    A whole plan (`review_mode='whole_plan'`) is shown as a table of every step (gated steps marked `*`, arguments
    as written, dependencies), then: `a` (approve the gated steps not denied or edited so far), `d <step> [reason]`
    (deny one step: it fails and its dependents are skipped), `e <step> <JSON arguments>` (edit one step's
    arguments), `r [reason]` (reject the plan: nothing runs), `q` (quit the run). A closed input rejects the plan.

    Args:
        stdin: where answers are read from; `sys.stdin` (looked up at each review) by default.
        console: a `rich.console.Console` to draw the prompt on; one writing to stderr by default, so the
            program's standard output stays clean.
        max_chars: at most this many characters of the request are shown; the prompt says how many more exist.

    ```python
    from toolweave import ConsoleReviewHandler, use_review_handler

    with use_review_handler(ConsoleReviewHandler()):
        ...  # every gated tool call inside asks at the terminal, one prompt at a time
    ```
    """

    applies_timeout = True  # the clock starts once the prompt is on screen, not while waiting for the console

    def __init__(self, *, stdin: IO[str] | None = None, console: Console | None = None,
                 max_chars: int = 4000) -> None:
        check_number(max_chars, 'max_chars of ConsoleReviewHandler', integer=True, minimum=1)
        self._stdin = stdin
        self._console = console if console is not None else _rich_console(stderr=True)
        self._max_chars = max_chars
        self._always: set[str] = set()
        """Tools the reviewer approved for the rest of this handler's life (answer `l`, always)."""

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        if request.tool_name in self._always:
            return _ALWAYS_APPROVED
        async with console_lock():
            if request.tool_name in self._always:  # answered `always` while this call waited for the lock
                return _ALWAYS_APPROVED
            stdin = self._stdin if self._stdin is not None else sys.stdin
            _discard_typeahead(stdin)
            self._show(request)
            # The clock starts once the prompt is on screen: waiting for the lock does not eat the reviewer's time.
            with anyio.move_on_after(request.timeout if request.timeout is not None else float('inf')):
                return await self._ask(request, stdin)
            decision = ReviewDecision.on_timeout(request)
            verdict = 'approved' if decision.kind == 'continue' else 'rejected'
            self._console.print()
            self._console.print(f'No answer within {request.timeout:g} s: {verdict}.', style='yellow', markup=False)
            return decision

    async def review_plan(self, request: PlanReviewRequest) -> PlanReviewDecision:
        async with console_lock():
            stdin = self._stdin if self._stdin is not None else sys.stdin
            _discard_typeahead(stdin)
            self._show_plan(request)
            timeout = request.timeout
            with anyio.move_on_after(timeout if timeout is not None else float('inf')):
                return await self._ask_plan(request, stdin)
            self._console.print()
            self._console.print(f'No answer within {timeout:g} s: each gated step gets its on-timeout action.',
                                style='yellow', markup=False)
            return PlanReviewDecision({step.id: ReviewDecision.on_timeout(step.request()) for step in request.gated})

    def _show_plan(self, request: PlanReviewRequest) -> None:
        from rich.table import Table
        from rich.text import Text

        table = Table(title=Text(request.goal or 'Plan review', style='bold'), title_justify='left', expand=False)
        for column in ('', 'step', 'tool', 'arguments (as written)', 'after'):
            table.add_column(column, overflow='fold')
        for step in request.steps:
            shown = describe_arguments(step.arguments)
            if len(shown) > self._max_chars:
                shown = f'{shown[:self._max_chars]}... ({len(shown) - self._max_chars} more chars)'
            table.add_row('*' if step.gated else '', step.id, step.tool, Text(shown), ', '.join(step.depends_on),
                          style='bold' if step.gated else 'dim')
        self._console.print(table)
        gated = len(request.gated)
        self._console.print(f'{gated} step{"s" if gated != 1 else ""} marked * need approval; the others run as '
                            'they are.', markup=False)

    async def _ask_plan(self, request: PlanReviewRequest, stdin: IO[str]) -> PlanReviewDecision:
        gated = {step.id: step for step in request.gated}
        decided: dict[str, ReviewDecision] = {}
        while True:
            self._prompt('[a]pprove the rest / [d]eny STEP / [e]dit STEP JSON / [r]eject plan / [q]uit run > ')
            line = await _read_line(stdin)
            if line is None:
                self._console.print()
                return PlanReviewDecision.reject('no reviewer input (stdin closed)')
            word, _, rest = line.strip().partition(' ')
            word, rest = word.lower(), rest.strip()
            if word in _APPROVE:
                return PlanReviewDecision(decided, otherwise=ReviewDecision.approve())
            if word in _REJECT:
                return PlanReviewDecision.reject(rest or 'rejected at the console')
            if word in _QUIT:
                raise ExitEarly('Run stopped by the reviewer at the plan review.')
            step_id, _, argument = rest.partition(' ')
            if word in ('d', 'deny', 'e', 'edit') and step_id not in gated:
                listed = ', '.join(gated) or '(none)'
                self._console.print(f'No gated step {step_id!r}: name one of {listed}.', style='yellow', markup=False)
                continue
            if word in ('d', 'deny'):
                decided[step_id] = ReviewDecision.reject(argument.strip() or 'denied at the console')
                self._console.print(f'{step_id}: denied.', markup=False)
            elif word in _EDIT:
                revised = revise(gated[step_id].arguments, argument.strip()) if argument.strip() else None
                if revised is None:
                    self._console.print(f'Type the new arguments of {step_id} as JSON, for example '
                                        f'{describe_arguments(gated[step_id].arguments)}', style='yellow', markup=False)
                    continue
                decided[step_id] = ReviewDecision.edit(revised)
                self._console.print(f'{step_id}: {describe_arguments(revised)}', markup=False)
            else:
                self._console.print(f'Unknown answer {line.strip()!r}: type a, d STEP, e STEP JSON, r or q.',
                                    style='yellow', markup=False)

    def _show(self, request: ReviewRequest) -> None:
        from rich.panel import Panel
        from rich.text import Text

        shown = _readable(request)
        if len(shown) > self._max_chars:
            shown = f'{shown[:self._max_chars]}... ({len(shown) - self._max_chars} more chars not shown)'
        timeout = 'no timeout' if request.timeout is None else f'timeout {request.timeout:g} s'
        action = 'approve' if request.on_timeout == 'continue' else 'reject'
        self._console.print(Panel(
            Text(shown),
            title=Text(f'Approval required: {request.tool_name or "action"}', style='bold'),
            subtitle=Text(f'{timeout}, then {action}'),
            title_align='left',
            expand=False,
        ))

    async def _ask(self, request: ReviewRequest, stdin: IO[str]) -> ReviewDecision:
        while True:
            self._prompt('[a]pprove / a[l]ways / [e]dit / [r]eject / [q]uit run > ')
            line = await _read_line(stdin)
            if line is None:
                self._console.print()
                return ReviewDecision.reject('no reviewer input (stdin closed)')
            word, _, rest = line.strip().partition(' ')
            word, rest = word.lower(), rest.strip()
            if word in _APPROVE:
                return ReviewDecision.approve()
            if word in _ALWAYS:
                if request.tool_name:
                    self._always.add(request.tool_name)
                return ReviewDecision.approve()
            if word in _REJECT:
                return ReviewDecision.reject(rest or None)
            if word in _QUIT:
                raise ExitEarly(f'Run stopped by the reviewer at tool {request.tool_name!r}.')
            if word in _EDIT:
                decision = await self._edit(request, rest, stdin)
                if decision is not None:
                    return decision
                continue
            self._console.print(f'Unknown answer {line.strip()!r}: type a, l, e, r or q.', style='yellow',
                                markup=False)

    async def _edit(self, request: ReviewRequest, typed: str, stdin: IO[str]) -> ReviewDecision | None:
        if not typed:
            self._console.print(f'Current input: {describe_arguments(request.arguments)}', markup=False)
            self._prompt('Revised input (empty to go back) > ')
            line = await _read_line(stdin)
            typed = (line or '').strip()
            if not typed:
                return None
        revised = revise(request.arguments, typed)
        if revised is None:
            self._console.print('This tool takes several arguments: type the revised arguments as one JSON object, '
                                f'for example {describe_arguments(request.arguments)}', style='yellow', markup=False)
            return None
        return ReviewDecision.edit(revised)

    def _prompt(self, text: str) -> None:
        self._console.print(text, end='', style='bold', markup=False)
        with contextlib.suppress(AttributeError, ValueError, OSError):
            self._console.file.flush()

    def __repr__(self) -> str:
        return 'ConsoleReviewHandler()'


def _readable(request: ReviewRequest) -> str:
    """What the panel shows: the request's description, with arguments of several fields laid out one per line."""
    arguments: Any = request.arguments
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return request.description
    if not isinstance(arguments, Mapping) or len(arguments) < 2:
        return request.description
    try:
        laid_out = json.dumps(arguments, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return request.description
    return f'{request.tool_name or "arguments"}:\n{laid_out}'


def revise(original: str | Mapping[str, Any] | None, typed: str) -> str | Mapping[str, Any] | None:
    """The revised arguments for what the reviewer typed, or `None` when it cannot stand for them.

    A JSON object replaces the arguments. For a tool with one argument, anything else is that argument's new
    value (a JSON value for a non-text argument, the text itself otherwise). A tool that takes plain text gets the
    text. A tool with several arguments needs a JSON object.
    """
    try:
        parsed: Any = json.loads(typed)
        parses = True
    except ValueError:
        parsed, parses = None, False
    if isinstance(parsed, dict):
        return parsed
    current: Any = original
    if isinstance(original, str):
        try:
            current = json.loads(original)
        except ValueError:
            current = None
    if not isinstance(current, Mapping):
        return typed
    if len(current) != 1:
        return None
    (key, value), = current.items()
    return {key: parsed if parses and not isinstance(value, str) else typed}


def _discard_typeahead(stdin: IO[str]) -> None:
    """At a terminal, drop keys typed before the prompt appeared (a late answer to a timed-out prompt must not
    answer the next one). Piped input is a script of answers and is kept."""
    try:
        fd = stdin.fileno()
        if not os.isatty(fd):
            return
        import termios

        termios.tcflush(fd, termios.TCIFLUSH)
    except (AttributeError, ValueError, OSError, ImportError):  # io.UnsupportedOperation is both of the first two
        return
    _pending.pop(fd, None)


async def _read_line(stdin: IO[str]) -> str | None:
    """One line without its newline, or `None` at end of input. Cancellable while it waits."""
    fd = _fileno(stdin)
    if fd is None:
        return await anyio.to_thread.run_sync(_readline_stream, stdin)
    return await anyio.to_thread.run_sync(_readline_fd, fd)


def _fileno(stdin: IO[str]) -> int | None:
    if os.name != 'posix':
        return None
    try:
        return stdin.fileno()
    except (AttributeError, ValueError, OSError):
        return None


def _readline_stream(stdin: IO[str]) -> str | None:
    line = stdin.readline()
    return line.rstrip('\r\n') if line else None


def _readline_fd(fd: int) -> str | None:
    buffer = _pending.setdefault(fd, bytearray())
    while True:
        end = buffer.find(b'\n')
        if end >= 0:
            line = bytes(buffer[:end])
            del buffer[:end + 1]
            return line.decode('utf-8', 'replace').rstrip('\r')
        ready, _, _ = select.select([fd], [], [], _SELECT_SECONDS)
        if not ready:
            anyio.from_thread.check_cancelled()
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # a pseudo-terminal whose other side closed reports EIO: that is end of input
            chunk = b''
        if not chunk:
            if not buffer:
                _pending.pop(fd, None)  # the descriptor number may be reused by another file later
                return None
            line = bytes(buffer)
            buffer.clear()
            return line.decode('utf-8', 'replace').rstrip('\r')
        buffer.extend(chunk)
