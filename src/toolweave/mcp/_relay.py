"""How the work done for one client request reaches that client again: `Exchange`.

A served request (a tool call, a prompt, a resource read) may need its client while it runs: to ask the person
(approvals, an upstream server's elicitation), to sample the client's model or list its roots for an upstream
server, to tell it about progress and to pass on log messages. The request's `Exchange` is that channel; whatever
runs for the request (plan steps, the gateway's upstream calls) finds it with `current_exchange()`. It asks:

- on a connection with the initialize handshake (up to 2025-11-25): with a server-to-client request related to
  the client's request (`elicitation/create`, `sampling/createMessage`, `roots/list`);
- on a 2026-07-28 connection, where a server sends no requests of its own: by pausing the work (`PausedCalls`):
  the request answers with an `InputRequiredResult` carrying the questions, the client repeats the request with
  the answers and the state token, and the paused work goes on where it stopped.

A question waits a bounded time (`Patience`): until the request's deadline when the whole request has one (a
plan's `planTimeout`), else up to the called server's `timeout` for each question. Past it, the asker gets an error
(an approval, a rejection), never a hang. A client that did not declare the capability is not asked: the asker gets
an error that says so.

Progress and log messages go through the exchange's outbox, in order, to the request that is waiting now (a paused
call's latest repetition): a plan's steps report as one plan (`PlanProgress`), and a value that would not increase
is not sent (MCP requires progress to increase).
"""

from __future__ import annotations

import logging
import math
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

import anyio
import anyio.abc

__all__ = ('Exchange', 'Patience', 'PausedCalls', 'PlanProgress', 'Questions', 'current_exchange', 'exchange_scope')

T = TypeVar('T')

logger = logging.getLogger('toolweave.mcp')

_SETTLE_SECONDS = 0.05
"""How long a paused call waits for sibling questions (parallel plan steps) before sending what it has."""
_DRAIN_SECONDS = 1.0
"""How long progress and log messages left at the end of a request may take to reach the client."""
_OUTBOX = 256
"""Progress and log messages an exchange holds for a slow client before it drops the newest."""

_current: ContextVar[Exchange | None] = ContextVar('toolweave_mcp_exchange', default=None)


def current_exchange() -> Exchange | None:
    """The exchange of the client request being served, if any."""
    return _current.get()


@contextmanager
def exchange_scope(exchange: Exchange | None) -> Iterator[None]:
    token = _current.set(exchange)
    try:
        yield
    finally:
        _current.reset(token)


class Patience(NamedTuple):
    """How long a request waits for its client's answers."""

    seconds: float | None
    """`None`: no limit."""
    label: str = ''
    """What the limit is called, for messages (`"planTimeout (600 s)"`)."""
    whole: bool = False
    """The seconds bound the whole request (a plan: its calls too), else each question."""


NO_LIMIT = Patience(None)


def _can(capabilities: Any, request: Any) -> str | None:
    """Why a client with these `ClientCapabilities` cannot answer `request` (`None`: it can)."""
    import mcp_types as types

    if isinstance(request, types.ElicitRequest):
        elicitation = getattr(capabilities, 'elicitation', None)
        if elicitation is None:
            return 'elicitation'
        url_mode = isinstance(request.params, types.ElicitRequestURLParams)
        if url_mode and elicitation.url is None:
            return 'URL elicitation'
        # `"elicitation": {}` (2025-06-18) means form mode; a client that lists only `url` cannot show a form.
        if not url_mode and elicitation.form is None and elicitation.url is not None:
            return 'form elicitation'
        return None
    if isinstance(request, types.CreateMessageRequest):
        sampling = getattr(capabilities, 'sampling', None)
        if sampling is None:
            return 'sampling'
        if (request.params.tools or request.params.tool_choice) and sampling.tools is None:
            return 'sampling with tools'
        return None
    if isinstance(request, types.ListRootsRequest):
        return 'roots' if getattr(capabilities, 'roots', None) is None else None
    return type(request).__name__


def _result_type(types: Any, request: Any) -> Any:
    if isinstance(request, types.ElicitRequest):
        return types.ElicitResult
    if isinstance(request, types.ListRootsRequest):
        return types.ListRootsResult
    if request.params.tools or request.params.tool_choice:
        return types.CreateMessageResultWithTools
    return types.CreateMessageResult


class Exchange:
    """One client request being served (see the module docstring).

    Args:
        ctx: the SDK's request context (the request that is waiting now; `attach` replaces it).
        patience: how long questions wait.
        client: who made the request.
    """

    def __init__(self, ctx: Any, *, patience: Patience = NO_LIMIT, client: object = None) -> None:
        self.ctx = ctx
        self.client = client
        """Who made the request (requests of one client may share an upstream server's questions)."""
        self.capabilities = ctx.session.client_capabilities
        seconds, self.limit, whole = patience
        self.deadline = anyio.current_time() + seconds if whole and seconds is not None else None
        """When the whole request runs out of time (`None`: it has no deadline of its own)."""
        self.patience = None if whole else seconds
        """Seconds each question may wait (`None`: until the deadline)."""
        self.plan: PlanProgress | None = None
        """Set while the request runs a plan: progress is reported for the plan as a whole."""
        self.log_level: int = 0
        """The lowest log level (an index into `LOG_LEVELS`) the client wants (connections with the handshake)."""
        self._paused: _Paused[Any] | None = None
        self._last_progress = -math.inf
        self._outbox, self._inbox = anyio.create_memory_object_stream[tuple[str, Any]](_OUTBOX)

    def attach(self, ctx: Any) -> None:
        """The request that waits for the work from now on (a paused call's repetition)."""
        self.ctx = ctx
        self.capabilities = ctx.session.client_capabilities or self.capabilities

    @property
    def remaining(self) -> float | None:
        """Seconds to the deadline (`None`: no limit)."""
        return None if self.deadline is None else max(0.0, self.deadline - anyio.current_time())

    async def ask(self, request: Any) -> Any:
        """Ask the client `request` (an `ElicitRequest`, `CreateMessageRequest` or `ListRootsRequest`): its
        answer, or an `ErrorData` saying why there is none."""
        import mcp_types as types
        from mcp import MCPError

        missing = _can(self.capabilities, request)
        if missing is not None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f'The client of the gateway does not support '
                                   f'{missing}, so the request cannot be passed on.')
        remaining = self.remaining
        wait = min(math.inf if remaining is None else remaining, math.inf if self.patience is None else self.patience)
        with anyio.move_on_after(wait):
            if self._paused is not None:
                return await self._paused.ask(request)
            if not self.ctx.session.can_send_request:
                return types.ErrorData(code=types.INVALID_REQUEST, message='The client connection cannot carry '
                                       'a request from the server.')
            from mcp.shared.message import ServerMessageMetadata

            try:
                return await self.ctx.session.send_request(
                    request, _result_type(types, request),
                    metadata=ServerMessageMetadata(related_request_id=self.ctx.request_id))
            except MCPError as exc:
                return types.ErrorData(code=exc.code, message=exc.message)
        return types.ErrorData(code=types.REQUEST_TIMEOUT, message=f'The client did not answer within {self.limit}.')

    # --- progress and log messages --------------------------------------------------------------------------

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Report progress of the request (dropped unless it increases)."""
        if progress <= self._last_progress:
            return
        self._last_progress = progress
        self._post('progress', (progress, total, message))

    def log(self, params: Any) -> None:
        """Pass on an upstream server's log message (`LoggingMessageNotificationParams`)."""
        if LOG_LEVELS.index(params.level) >= self.log_level:
            self._post('log', params)

    def _post(self, kind: str, item: Any) -> None:
        try:
            self._outbox.send_nowait((kind, item))
        except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # progress and log messages are best effort: a slow or gone client loses some

    async def deliver(self) -> None:
        """Send what is posted, in order, to the request waiting now; runs for the life of the exchange."""
        async for kind, item in self._inbox:
            try:
                if kind == 'progress':
                    await self.ctx.session.report_progress(*item)
                else:
                    await self._send_log(item)
            except Exception as exc:  # the client went away, or the request ended: the rest is dropped too
                logger.debug('Could not pass a %s message to the MCP client: %r', kind, exc)

    async def _send_log(self, params: Any) -> None:
        import warnings

        from mcp.shared.exceptions import MCPDeprecationWarning

        with warnings.catch_warnings():  # logging is deprecated in 2026-07-28, and still how servers log
            warnings.simplefilter('ignore', MCPDeprecationWarning)
            await self.ctx.session.send_log_message(params.level, params.data, params.logger,
                                                    related_request_id=self.ctx.request_id)

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[Exchange]:
        """While the block runs, the exchange is current and delivers what is posted; at the end, what is left
        gets a moment to reach the client."""
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self.deliver)
            try:
                with exchange_scope(self):
                    yield self
            finally:
                self._outbox.close()
                tasks.cancel_scope.deadline = anyio.current_time() + _DRAIN_SECONDS


LOG_LEVELS = ('debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency')


class PlanProgress:
    """A plan's progress as one value: steps finished plus the fraction done of each call still running, out of
    the plan's steps. A step's calls report through `call` (each call its own key)."""

    def __init__(self, exchange: Exchange, steps: int) -> None:
        self.exchange = exchange
        self.steps = steps
        self.finished = 0
        self.running: dict[object, float] = {}

    def step_finished(self, step: str) -> None:
        self.finished += 1
        self._report(f'step {step} finished ({self.finished} of {self.steps})')

    def call(self, key: object, label: str, progress: float, total: float | None, message: str | None) -> None:
        # Without a total, progress still grows: p / (p + 1) climbs towards 1 as p does.
        fraction = min(progress / total, 1.0) if total else progress / (progress + 1.0) if progress > 0 else 0.0
        self.running[key] = max(self.running.get(key, 0.0), min(fraction, 0.999))
        self._report(f'{label}: {message}' if message else f'{label}: {progress:g}' + (f'/{total:g}' if total else ''))

    def call_ended(self, key: object) -> None:
        self.running.pop(key, None)

    def _report(self, message: str) -> None:
        done = min(self.finished + sum(self.running.values()), float(self.steps))
        self.exchange.progress(done, float(self.steps), message)


# --- 2026-07-28: paused work --------------------------------------------------------------------------------


@dataclass(eq=False)
class _Question:
    request: Any
    """The input request (`ElicitRequest`, `CreateMessageRequest`, `ListRootsRequest`)."""
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: Any = None
    """The client's answer: an `ElicitResult`, `CreateMessageResult` or `ListRootsResult` (anything else the asker
    treats as no answer)."""


@dataclass(frozen=True, slots=True)
class Questions:
    """What a paused call sends back instead of its result: the `InputRequiredResult` fields."""

    input_requests: dict[str, Any]
    request_state: str


@dataclass(eq=False)
class _Paused(Generic[T]):
    """One piece of work running in the background while its questions travel to the client and back."""

    token: str
    key: str
    exchange: Exchange
    unsent: dict[str, _Question] = field(default_factory=dict)
    sent: dict[str, _Question] = field(default_factory=dict)
    changed: anyio.Event = field(default_factory=anyio.Event)
    outcome: tuple[T] | None = None
    """The work's result, once it has one."""
    error: Exception | None = None
    """What the work raised: raised again to the request that collects the outcome."""
    delivered: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    count: int = 0

    @property
    def done(self) -> bool:
        return self.outcome is not None or self.error is not None

    def poke(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def ask(self, request: Any) -> Any:
        self.count += 1
        key = f'input-{self.count}'
        question = _Question(request)
        self.unsent[key] = question
        self.poke()
        try:
            await question.answered.wait()
        finally:  # answered, or given up on (the deadline passed, the call was cancelled)
            self.unsent.pop(key, None)
            self.sent.pop(key, None)
        return question.answer


class PausedCalls(Generic[T]):
    """Work that waits for the client's answers on 2026-07-28 connections.

    `start` runs the work in `tasks` (the server's task group, so it outlives the request that started it) with
    its exchange asking through questions; `resume` hands a repeated request's answers to the paused work. Both
    return the work's result once it finishes, or the questions to send when it stops at one. The state token is
    32 random bytes that only maps to work held in this process, bound to the request it started from (`key`:
    the method and the name). Work nobody resumes ends on its own (each question gives up at the exchange's
    deadline) and is forgotten `keep` seconds later; at most `limit` pieces of work wait at once.
    """

    def __init__(self, tasks: anyio.abc.TaskGroup, *, keep: float = 600.0, limit: int = 1000) -> None:
        self._tasks = tasks
        self._keep = keep
        self.limit = limit
        self._paused: dict[str, _Paused[T]] = {}

    def __len__(self) -> int:
        return len(self._paused)

    @property
    def full(self) -> bool:
        return len(self._paused) >= self.limit

    async def start(self, key: str, exchange: Exchange, work: Callable[[], Awaitable[T]]) -> T | Questions:
        """Run `work`; its result, or the questions it stopped at."""
        paused: _Paused[T] = _Paused(secrets.token_urlsafe(32), key, exchange)
        exchange._paused = paused
        self._paused[paused.token] = paused
        self._tasks.start_soon(self._run, paused, work)
        return await self._next(paused)

    async def resume(self, token: str, key: str, answers: dict[str, Any] | None, ctx: Any) -> T | Questions | None:
        """The outcome of the paused work `token`, or `None` when no work of `key` is waiting under it."""
        paused = self._paused.get(token)
        if paused is None or paused.key != key:
            return None
        paused.exchange.attach(ctx)
        for name, answer in (answers or {}).items():
            question = paused.sent.pop(name, None)
            if question is not None:
                question.answer = answer
                question.answered.set()
        # Questions the client left unanswered are asked again.
        paused.unsent.update(paused.sent)
        paused.sent.clear()
        return await self._next(paused)

    async def _run(self, paused: _Paused[T], work: Callable[[], Awaitable[T]]) -> None:
        from mcp import MCPError
        from mcp_types import INTERNAL_ERROR

        try:
            with paused.scope:
                async with paused.exchange.serving():
                    paused.outcome = (await work(),)
        except Exception as exc:  # nothing must escape into the server's task group: the waiting request gets it
            paused.error = exc
        if paused.outcome is None and paused.error is None:  # the client cancelled the request
            paused.error = MCPError(INTERNAL_ERROR, 'The request was cancelled.')
        paused.poke()
        with anyio.move_on_after(self._keep):
            await paused.delivered.wait()
        self._paused.pop(paused.token, None)

    async def _next(self, paused: _Paused[T]) -> T | Questions:
        try:
            while not paused.done:
                if paused.unsent:
                    await anyio.sleep(_SETTLE_SECONDS)  # let parallel steps reach their own questions
                    asking, paused.unsent = paused.unsent, {}
                    if asking and not paused.done:
                        paused.sent.update(asking)
                        return Questions({key: question.request for key, question in asking.items()}, paused.token)
                    continue
                await paused.changed.wait()
        except anyio.get_cancelled_exc_class():
            paused.scope.cancel()  # the client gave up on the request while it ran: stop the work too
            raise
        paused.delivered.set()
        if paused.outcome is None:
            assert paused.error is not None
            raise paused.error
        return paused.outcome[0]
