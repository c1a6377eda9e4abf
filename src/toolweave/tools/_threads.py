"""Running a blocking function off the event loop, in a daemon thread that cannot keep the process alive.

A blocking function cannot be interrupted. When the call waiting for it is cancelled (a `step_timeout`, a plan
timeout, an outer cancellation), the caller returns at once and the function is *abandoned*: it keeps running in
its thread until it returns by itself, and its result is dropped. Its thread is a daemon thread, so the
interpreter can still exit while it runs.

Threads running at once are bounded by anyio's default thread limiter (40 per event loop unless the application
changes it): a call waits for a token before its thread starts, and an abandoned call keeps its token until its
function returns. A tool that never returns therefore costs one thread (and, while its event loop runs, one
token) for the rest of the process. Abandoned calls are counted process-wide: once `MAX_ABANDONED` of them are
still running, new blocking calls fail at once, until some of those functions return (calls already running
when that happens may still be abandoned, so the count can pass the cap by at most one limiter's worth).
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

__all__ = ('MAX_ABANDONED', 'abandoned_calls', 'run_blocking')

T = TypeVar('T')
logger = logging.getLogger('toolweave.tools')

MAX_ABANDONED = 32
"""Abandoned blocking calls still running (process-wide) at which new blocking calls are refused."""

_lock = threading.Lock()
_abandoned = 0


def abandoned_calls() -> int:
    """How many abandoned blocking calls are still running in their threads (in this process)."""
    return _abandoned


class _Call:
    """One blocking call: its outcome, and whether the caller has stopped waiting for it."""

    __slots__ = ('abandoned', 'error', 'finished', 'result')

    def __init__(self) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.finished = False
        self.abandoned = False


async def run_blocking(function: Callable[[], T], name: str) -> T:
    """Call `function()` in a new daemon thread (with the caller's context variables) and wait for its result.

    Raises:
        RuntimeError: `MAX_ABANDONED` abandoned calls are still running; nothing was started.
    """
    global _abandoned
    if _abandoned >= MAX_ABANDONED:
        raise RuntimeError(
            f'{_abandoned} earlier calls to blocking tools were abandoned (timed out or cancelled) and are still '
            f'running in their threads, the most allowed; {name!r} was not started. Make the blocking tools return '
            '(a timeout inside the function itself), or make them async.'
        )
    call = _Call()
    done = anyio.Event()
    token = anyio.lowlevel.current_token()
    context = contextvars.copy_context()

    def target() -> None:
        global _abandoned
        try:
            call.result = context.run(function)
        except BaseException as exc:  # delivered to the waiting caller, which re-raises it
            call.error = exc
        with _lock:
            call.finished = True
            abandoned = call.abandoned
            if abandoned:
                _abandoned -= 1
        try:  # wake the caller, or give the abandoned call's token back
            anyio.from_thread.run_sync(limiter.release_on_behalf_of if abandoned else done.set,
                                       *((call,) if abandoned else ()), token=token)
        except RuntimeError:  # the event loop has closed meanwhile: nobody is waiting any more
            pass

    limiter = anyio.to_thread.current_default_thread_limiter()
    await limiter.acquire_on_behalf_of(call)
    threading.Thread(target=target, name=f'toolweave blocking tool {name}', daemon=True).start()
    try:
        await done.wait()
    except BaseException:
        with _lock:
            call.abandoned = not call.finished
            if call.abandoned:
                _abandoned += 1
        if not call.abandoned:
            limiter.release_on_behalf_of(call)
        else:
            logger.warning('Blocking tool %r was cancelled while running; its thread keeps running until the '
                           'function returns (%d abandoned calls).', name, _abandoned)
        raise
    limiter.release_on_behalf_of(call)
    if call.error is not None:
        raise call.error
    return call.result  # type: ignore[no-any-return]
