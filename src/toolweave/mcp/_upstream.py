"""One upstream server of the gateway: its supervised connection, what it offers, and the requests made to it.

The connection is kept open for the life of the gateway. What the server offers (its capabilities, tools, prompts,
resources and resource templates) is listed when it connects, and again when it announces a change (a
`notifications/.../list_changed` on connections with the initialize handshake, a `subscriptions/listen` event on
2026-07-28 ones). When the server cannot be started, its connection ends (it crashed or exited), or it stops
answering (a call timed out and a quick `tools/list` probe, made in the background, got no answer either), the
connection is closed (a stdio server is stopped) and opened again after a delay that doubles from
`Backoff.initial` to `Backoff.maximum`, back to the start once a connection has stayed up for `Backoff.stable`
seconds. Meanwhile its tools fail at once with a message naming the server, and every other server keeps
working. A stdio server's stderr goes to `<log_dir>/<name>.log`.

**What the server asks of the client.** The gateway declares sampling, elicitation and roots to every upstream
server, and passes each such request on to the client whose request the server is working on (`Exchange`), found
by, in order: the request the gateway is making when the SDK hands the question over inside it (2026-07-28:
the question arrives in the server's `InputRequiredResult`); the task the question names
(`io.modelcontextprotocol/related-task`); the only client with requests in flight on this server. A question no
client can be found for is refused with an error that says why: it is never shown to another client. The time
the person takes to answer does not count against the server's `timeout` (it still counts against the plan's
`planTimeout`). Progress reaches the request that asked for it; a log message reaches the client found the same
way as a question, or `on_log` when there is none.

**Task-augmented tools** (2025-11-25 `execution.taskSupport: "required"`) are called as tasks (see `_tasks`); the
client calls them like any tool.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal, TextIO

import anyio
import anyio.abc

from toolweave.mcp._config import ServerConfig
from toolweave.mcp._meta import McpMetaConverter, meta_for_call
from toolweave.mcp._relay import Exchange, current_exchange
from toolweave.mcp._session import (
    CallFailed,
    HttpTarget,
    ProgressCallback,
    StdioTarget,
    call_tool,
    error_message,
    list_all,
    open_client,
)
from toolweave.mcp._tasks import call_as_task
from toolweave.tools._context import ToolCallContext
from toolweave.tools._result import ToolResult

__all__ = ('DEFAULT_BACKOFF', 'Backoff', 'ListKind', 'Upstream', 'UpstreamState')

logger = logging.getLogger('toolweave.mcp.gateway')

UpstreamState = Literal['starting', 'up', 'down', 'stopped']
ListKind = Literal['tools', 'prompts', 'resources', 'resource_templates']

_RELATED_TASK = 'io.modelcontextprotocol/related-task'
_TASK_TTL_MS = 3_600_000
_TASK_POLL = (0.2, 5.0)
_RETURNED = 10_000
"""Seconds between `tasks/get` polls of a running task (the server's `pollInterval`, kept within these)."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delays between restarts of an upstream server."""

    initial: float = 0.5
    maximum: float = 60.0
    stable: float = 30.0
    """Seconds a connection must stay up before the delay starts again from `initial`."""
    probe_timeout: float = 5.0
    """Seconds a server that let a call time out has to answer `tools/list` before it counts as hung."""

    def delay(self, failures: int) -> float:
        return float(min(self.maximum, self.initial * 2.0 ** max(0, failures - 1)))


DEFAULT_BACKOFF = Backoff()


class _Connection:
    """One connection to the server: its client, and why it ended once it did."""

    def __init__(self, client: Any, on_end: Callable[[str], None]) -> None:
        self.client = client
        self.ended = anyio.Event()
        self.reason: str | None = None
        self.relist: set[ListKind] = set()
        self.changed = anyio.Event()
        self.probe_wanted = anyio.Event()
        self._on_end = on_end

    def end(self, reason: str) -> None:
        """Mark the connection as over (the upstream's task closes it); calls fail from now on."""
        if self.reason is None:
            self.reason = reason
            self._on_end(reason)
        self.ended.set()

    def wants(self, kind: ListKind) -> None:
        self.relist.add(kind)
        self.changed.set()


@dataclass(eq=False)
class _Request:
    """A request in flight to the server, made for a client's request (`exchange`)."""

    exchange: Exchange | None
    scope: anyio.CancelScope
    own_deadline: float
    """When the server's `timeout` runs out; moved later by the time the client's person takes to answer."""
    outer_deadline: float = math.inf
    """When the client's request (a plan) runs out of time; it does not move."""
    task_id: str | None = None
    waiting: int = 0
    """Questions of the server its client's person is answering now."""

    def named(self, task_id: str) -> None:
        """The request is the task `task_id` (its questions name it)."""
        self.task_id = task_id

    def pause(self) -> None:
        """A person is answering the server's question: the server's `timeout` stops running meanwhile."""
        self.waiting += 1
        self.scope.deadline = self.outer_deadline

    def resume(self, waited: float) -> None:
        """The question was answered after `waited` seconds: the server's `timeout` goes on where it stopped."""
        self.own_deadline += waited
        self.waiting -= 1
        if not self.waiting:
            self.scope.deadline = min(self.own_deadline, self.outer_deadline)


@dataclass
class _Offer:
    """What the server offers, by its own names (tools, prompts) or URIs (resources, templates)."""

    tools: dict[str, Any] = field(default_factory=dict)
    prompts: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)
    resource_templates: dict[str, Any] = field(default_factory=dict)


class Upstream:
    """One upstream server: its last known offer, its state, and requests to it (see the module docstring).

    `on_change(upstream, kind)` hears that a list changed; `on_log(upstream, params)` gets the log messages no
    client request can be found for, and `on_unplaced(upstream, question)` the questions (its answer, or an
    `ErrorData`); `on_resource_updated(upstream, uri)` hears that a subscribed resource changed.
    """

    def __init__(self, config: ServerConfig, *, log_dir: Path, backoff: Backoff = DEFAULT_BACKOFF,
                 on_change: Callable[[Upstream, ListKind], Awaitable[None]] | None = None,
                 on_log: Callable[[Upstream, Any], None] | None = None,
                 on_resource_updated: Callable[[Upstream, str], Awaitable[None]] | None = None,
                 on_unplaced: Callable[[Upstream, Any], Awaitable[Any]] | None = None) -> None:
        self.config = config
        self.backoff = backoff
        self.log_path = log_dir / f'{config.tool_prefix}.log'
        self.state: UpstreamState = 'starting'
        self.offer = _Offer()
        self.capabilities: Any = None
        """The server's `ServerCapabilities` (its last connection's)."""
        self.reason: str | None = None
        """Why the server is down."""
        self.instructions: str | None = None
        """What the server says about using its tools."""
        self.failures = 0
        self.restarts = 0
        self.next_attempt: float | None = None
        self._on_change = on_change
        self._on_log = on_log
        self._on_resource_updated = on_resource_updated
        self._on_unplaced = on_unplaced
        self._connection: _Connection | None = None
        self._state_changed = anyio.Event()
        self._meta = McpMetaConverter.allow_keys(*config.forward_context)
        self._left_out: set[str] = set()
        self._requests: list[_Request] = []
        self._returned: OrderedDict[str, None] = OrderedDict()

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def tools(self) -> dict[str, Any]:
        """The server's tools as it lists them (the SDK's `Tool`), by server-side name, after allow/deny."""
        return self.offer.tools

    @property
    def _started_word(self) -> str:
        return 'started' if self.config.command else 'reached'

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep the server connected until cancelled; reports started once the first attempt has succeeded or
        failed."""
        started = False

        def report() -> None:
            nonlocal started
            if not started:
                started = True
                task_status.started()

        with self._open_log() as errlog:
            try:
                while True:
                    await self._connect_once(errlog, report)
                    report()
                    delay = self.backoff.delay(self.failures)
                    self.next_attempt = time.monotonic() + delay
                    logger.warning('MCP server %r is down (%s); next attempt in %.1f s', self.name, self.reason, delay)
                    await anyio.sleep(delay)
                    self.restarts += 1
            finally:
                self._set_state('stopped')

    async def _connect_once(self, errlog: TextIO | None, on_up: Callable[[], None]) -> None:
        self._set_state('starting')
        self.next_attempt = None
        _write_header(errlog, self)
        connected_at: float | None = None
        reason = 'the connection ended'
        # One scope over the whole connection: its deadline bounds the start, then is lifted. (A timeout scope
        # around the start alone would end before the SDK's task groups it opened, which anyio forbids.)
        with anyio.CancelScope(deadline=anyio.current_time() + self.config.start_timeout) as lifetime:
            try:
                async with AsyncExitStack() as stack:
                    connection = await self._open(stack, errlog)
                    lifetime.deadline = math.inf
                    connected_at = time.monotonic()
                    self._connection = connection
                    self._set_state('up')
                    on_up()
                    async with anyio.create_task_group() as watchers:
                        watchers.start_soon(self._follow_changes, connection)
                        watchers.start_soon(self._probe_when_wanted, connection)
                        await connection.ended.wait()
                        watchers.cancel_scope.cancel()
                    reason = connection.reason or reason
            except Exception as exc:
                reason = f'it could not be {self._started_word}: {error_message(exc)}'
            finally:
                self._connection = None
        if lifetime.cancelled_caught and connected_at is None:
            reason = (f'it could not be {self._started_word}: no answer to the handshake and tools/list within '
                      f'{self.config.start_timeout:g} s')
        if connected_at is not None and time.monotonic() - connected_at >= self.backoff.stable:
            self.failures = 0
        self.failures += 1
        self.reason = reason
        self._set_state('down')

    async def _open(self, stack: AsyncExitStack, errlog: TextIO | None) -> _Connection:
        import mcp_types as types

        holder: list[_Connection] = []

        def closed() -> None:
            if holder:
                holder[0].end('its connection closed (the server exited or crashed)')

        async def on_message(message: Any) -> None:
            if not holder or isinstance(message, Exception):
                return
            connection = holder[0]
            if isinstance(message, types.ToolListChangedNotification):
                connection.wants('tools')
            elif isinstance(message, types.PromptListChangedNotification):
                connection.wants('prompts')
            elif isinstance(message, types.ResourceListChangedNotification):
                connection.wants('resources')
                connection.wants('resource_templates')
            elif isinstance(message, types.ResourceUpdatedNotification) and self._on_resource_updated is not None:
                await self._on_resource_updated(self, str(message.params.uri))

        async def sampling(ctx: Any, params: Any) -> Any:
            return await self._pass_on(ctx, types.CreateMessageRequest(params=params))

        async def elicitation(ctx: Any, params: Any) -> Any:
            return await self._pass_on(ctx, types.ElicitRequest(params=params))

        async def roots(ctx: Any) -> Any:
            return await self._pass_on(ctx, types.ListRootsRequest())

        async def log(params: Any) -> None:
            self._log(params)

        client = await open_client(self._target(errlog), stack, on_closed=closed, message_handler=on_message,
                                   sampling_callback=sampling, elicitation_callback=elicitation,
                                   list_roots_callback=roots, logging_callback=log, log_level='debug',
                                   sampling_capabilities=types.SamplingCapability(
                                       tools=types.SamplingToolsCapability()))
        connection = _Connection(client, self._lost)
        holder.append(connection)
        self.instructions = client.instructions
        self.capabilities = client.server_capabilities
        for kind in self._kinds():
            await self._relist(connection, kind)
        logger.info('MCP server %r is up: %d tools', self.name, len(self.tools))
        return connection

    def _kinds(self) -> list[ListKind]:
        """The lists the server offers (by its capabilities)."""
        capabilities = self.capabilities
        kinds: list[ListKind] = ['tools']
        if capabilities is not None and capabilities.prompts is not None:
            kinds.append('prompts')
        if capabilities is not None and capabilities.resources is not None:
            kinds.extend(('resources', 'resource_templates'))
        return kinds

    def _target(self, errlog: TextIO | None) -> Any:
        config = self.config
        if config.command is not None:
            return StdioTarget(config.command, config.args, env=config.env, cwd=config.cwd, errlog=errlog)
        assert config.url is not None
        return HttpTarget(config.url, config.headers, sse=config.transport == 'sse')

    async def _relist(self, connection: _Connection, kind: ListKind) -> None:
        listed = await list_all(connection.client, kind, fresh=True)
        if kind == 'tools':
            found = {tool.name: tool for tool in listed if self._keeps(tool)}
        elif kind == 'prompts':
            found = {prompt.name: prompt for prompt in listed}
        elif kind == 'resources':
            found = {str(resource.uri): resource for resource in listed}
        else:
            found = {template.uri_template: template for template in listed}
        if found != getattr(self.offer, kind):
            setattr(self.offer, kind, found)
            if self._on_change is not None:
                await self._on_change(self, kind)

    def _keeps(self, tool: Any) -> bool:
        name = tool.name
        config = self.config
        if config.allow_tools is not None and not any(fnmatchcase(name, p) for p in config.allow_tools):
            return False
        return not any(fnmatchcase(name, pattern) for pattern in config.deny_tools)

    async def _follow_changes(self, connection: _Connection) -> None:
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        client = connection.client
        async with anyio.create_task_group() as group:
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                group.start_soon(self._listen, connection)
            while True:
                await connection.changed.wait()
                connection.changed = anyio.Event()
                kinds, connection.relist = connection.relist, set()
                for kind in sorted(kinds):
                    try:
                        await self._relist(connection, kind)
                    except Exception as exc:
                        logger.warning('MCP server %r announced a new list of %s, and listing it failed: %s',
                                       self.name, kind, error_message(exc))

    async def _listen(self, connection: _Connection) -> None:
        from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged

        capabilities = self.capabilities
        wanted = {
            'tools_list_changed': bool(capabilities.tools and capabilities.tools.list_changed),
            'prompts_list_changed': bool(capabilities.prompts and capabilities.prompts.list_changed),
            'resources_list_changed': bool(capabilities.resources and capabilities.resources.list_changed),
        }
        if not any(wanted.values()):
            return
        try:
            async with connection.client.listen(**wanted) as subscription:
                async for event in subscription:
                    if isinstance(event, ToolsListChanged):
                        connection.wants('tools')
                    elif isinstance(event, PromptsListChanged):
                        connection.wants('prompts')
                    elif isinstance(event, ResourcesListChanged):
                        connection.wants('resources')
                        connection.wants('resource_templates')
        except Exception as exc:  # the server ended the stream or never served it: calls still work
            logger.info('Listening for changes of MCP server %r ended: %s', self.name, error_message(exc))

    # --- requests -----------------------------------------------------------------------------------------

    @contextmanager
    def _in_flight(self, timeout: float | None) -> Iterator[_Request]:
        """A request made for the current client request, bounded by the server's `timeout` and the client
        request's deadline, known while it runs (to pass the server's questions on)."""
        exchange = current_exchange()
        now = anyio.current_time()
        own = math.inf if timeout is None else now + timeout
        # A request with a deadline of its own (a plan) bounds its calls; a single call has only its server's.
        outer = exchange.deadline if exchange is not None and exchange.deadline is not None else math.inf
        request = _Request(exchange, anyio.CancelScope(deadline=min(own, outer)), own, outer)
        self._requests.append(request)
        try:
            yield request
        finally:
            self._requests.remove(request)

    def _ran_out(self, request: _Request, where: str) -> str:
        """Why a request whose scope's deadline passed was stopped."""
        if request.outer_deadline < request.own_deadline and request.exchange is not None:
            return f'{where} was stopped: the request ran out of time ({request.exchange.limit}).'
        return f'{where} timed out after {self.config.timeout:g} s.'

    async def call(self, exposed: str, mcp_name: str, arguments: dict[str, Any],
                   context: ToolCallContext) -> ToolResult:
        """Call one of the server's tools; every failure is a `ToolResult` naming the tool and the server."""
        connection = await self._ready()
        where = f'Tool {exposed!r} of MCP server {self.name!r}'
        if connection is None:
            return ToolResult.failure(f'{where} is not available: {self.unavailable()}')
        meta = meta_for_call(self._meta, context, exposed)
        with self._in_flight(self.config.timeout) as request:
            # Progress is always asked for: whether the client's own request asked is not known in-process.
            progress = self._progress_to(request, exposed) if request.exchange is not None else None
            try:
                with request.scope:
                    tool = self.tools.get(mcp_name)
                    execution = getattr(tool, 'execution', None)
                    if execution is not None and getattr(execution, 'task_support', None) == 'required':
                        return await call_as_task(connection.client, mcp_name, arguments, meta, where=where,
                                                  progress=progress, server=self.name, on_task=request.named)
                    result = await call_tool(connection.client, mcp_name, arguments, meta=meta, timeout=None,
                                             server=self.name, where=where, progress=progress)
                    self._remember(result)
                    return result
            except CallFailed as exc:
                if exc.kind == 'closed':
                    connection.end('its connection closed (the server exited or crashed)')
                    again = 'restarts the server' if self.config.command else 'connects to the server again'
                    return ToolResult.failure(f'{exc} The gateway {again}; try again in a moment.')
                return ToolResult.failure(str(exc))
            finally:
                if request.exchange is not None and request.exchange.plan is not None:
                    request.exchange.plan.call_ended(request)
        # Only a passed deadline gets here: the call is answered now, and the server is probed in the background.
        if request.own_deadline <= request.outer_deadline:
            connection.probe_wanted.set()
        return ToolResult.failure(self._ran_out(request, where))

    def _progress_to(self, request: _Request, label: str) -> ProgressCallback:
        async def progress(value: float, total: float | None, message: str | None) -> None:
            exchange = request.exchange
            if exchange is None:
                return
            if exchange.plan is not None:
                exchange.plan.call(request, label, value, total, message)
            else:
                exchange.progress(value, total, message)

        return progress

    async def request(self, what: str, send: Callable[[Any], Awaitable[Any]]) -> Any:
        """Make a request (`send(client)`) other than a tool call, within the server's `timeout`: its result.
        Raises `MCPError` (the server's own error, or one saying why there is no answer)."""
        import mcp_types as types
        from mcp import MCPError

        connection = await self._ready()
        if connection is None:
            raise MCPError(types.INTERNAL_ERROR, f'MCP server {self.name!r} is not available: {self.unavailable()}')
        with self._in_flight(self.config.timeout) as request:
            try:
                with request.scope:
                    return await send(connection.client)
            except MCPError as exc:
                if exc.code != types.CONNECTION_CLOSED:
                    raise
                closed = True
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
                closed = True
            if closed:
                connection.end('its connection closed (the server exited or crashed)')
                raise MCPError(types.INTERNAL_ERROR, f'{what} of MCP server {self.name!r} failed: the connection '
                                                     'to the server is closed.')
        raise MCPError(types.REQUEST_TIMEOUT, self._ran_out(request, f'{what} of MCP server {self.name!r}'))

    def returned(self, uri: str) -> bool:
        """Whether one of the server's tool results linked to or embedded the resource `uri` (the last
        `_RETURNED` URIs are kept)."""
        return uri in self._returned

    def _remember(self, result: ToolResult) -> None:
        """Note the resource URIs a result links to or embeds, so a client can read them through the gateway."""
        mcp = getattr(result, 'mcp', None)
        for block in getattr(mcp, 'content', None) or ():
            kind = getattr(block, 'type', None)
            uri = block.uri if kind == 'resource_link' else block.resource.uri if kind == 'resource' else None
            if uri is not None:
                self._returned[str(uri)] = None
                self._returned.move_to_end(str(uri))
                if len(self._returned) > _RETURNED:
                    self._returned.popitem(last=False)

    # --- what the server asks of the client ---------------------------------------------------------------

    def _request_for(self, meta: Mapping[str, Any] | None) -> _Request | None:
        """The request in flight that a question or log message from the server belongs to (see the module
        docstring)."""
        exchange = current_exchange()
        if exchange is not None:
            mine = [request for request in self._requests if request.exchange is exchange]
            return mine[-1] if mine else _Request(exchange, anyio.CancelScope(), math.inf)
        related = (meta or {}).get(_RELATED_TASK)
        task_id = related.get('taskId') if isinstance(related, Mapping) else None
        if task_id is not None:
            for request in self._requests:
                if request.task_id == task_id:
                    return request
        clients = {request.exchange.client for request in self._requests if request.exchange is not None}
        if len(clients) == 1:
            return next(request for request in reversed(self._requests) if request.exchange is not None)
        return None

    async def _pass_on(self, ctx: Any, question: Any) -> Any:
        """Pass a question of the server on to the client it is for; the answer, or an `ErrorData`."""
        import mcp_types as types

        request = self._request_for(getattr(ctx, 'meta', None))
        busy = len({r.exchange.client for r in self._requests if r.exchange is not None})
        if (request is None or request.exchange is None) and not busy and self._on_unplaced is not None:
            return await self._on_unplaced(self, question)  # outside any request: the gateway may know whom to ask
        if request is None or request.exchange is None:
            why = (f'requests of {busy} clients are in flight on it' if busy else 'no request of a client is in '
                   'flight on it')
            logger.warning('MCP server %r sent %s, and the gateway cannot tell which client it is for: %s',
                           self.name, question.method, why)
            return types.ErrorData(code=types.INVALID_REQUEST, message=f'The gateway cannot tell which of its '
                                   f'clients this {question.method} request is for: {why}.')
        paused = [other for other in self._requests if other.exchange is request.exchange]
        for other in paused:  # the person's time is not the server's
            other.pause()
        started = anyio.current_time()
        try:
            return await request.exchange.ask(question)
        finally:
            for other in paused:
                other.resume(anyio.current_time() - started)

    async def roots_changed(self) -> None:
        """The client's roots changed: tell the server (connections with the initialize handshake)."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        connection = self._connection
        if connection is None or connection.client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        try:
            await _deprecated(connection.client.send_roots_list_changed)
        except Exception as exc:
            logger.debug('Could not tell MCP server %r that the roots changed: %s', self.name, exc)

    def _log(self, params: Any) -> None:
        request = self._request_for(getattr(params, 'meta', None))
        if request is not None and request.exchange is not None:
            request.exchange.log(params)
        elif self._on_log is not None:
            self._on_log(self, params)

    # --- state --------------------------------------------------------------------------------------------

    def unavailable(self) -> str:
        """Why calls fail right now, and what happens next."""
        if self.state == 'stopped':
            return 'the gateway is shutting down.'
        when = ''
        if self.next_attempt is not None:
            when = f' in {max(0.0, self.next_attempt - time.monotonic()):.0f} s'
        return (f'{self.reason or "it is not running"}. The gateway tries again{when} (attempt '
                f'{self.failures + 1}); tools of the other servers keep working. Its log: {self.log_path}.')

    async def _ready(self) -> _Connection | None:
        """The open connection; while the server is starting, wait for it (up to its start timeout)."""
        if self.state == 'starting':
            with anyio.move_on_after(self.config.start_timeout):
                while self.state == 'starting':
                    await self._state_changed.wait()
        return self._connection if self.state == 'up' else None

    async def _probe_when_wanted(self, connection: _Connection) -> None:
        """After a timed-out call: a server that cannot even list its tools is hung, and is restarted."""
        while True:
            await connection.probe_wanted.wait()
            connection.probe_wanted = anyio.Event()
            with anyio.move_on_after(self.backoff.probe_timeout) as probe:
                try:
                    await list_all(connection.client, 'tools', fresh=True)
                except Exception as exc:
                    connection.end(f'it failed after a call timed out: {error_message(exc)}')
                    return
            if probe.cancelled_caught:
                connection.end(f'it stopped answering (a call timed out, then tools/list got no answer within '
                               f'{self.backoff.probe_timeout:g} s)')
                return

    def _lost(self, reason: str) -> None:
        if self.state == 'up':
            self.reason = reason
            self._set_state('down')

    def _set_state(self, state: UpstreamState) -> None:
        self.state = state
        self._state_changed.set()
        self._state_changed = anyio.Event()

    def _open_log(self) -> Any:
        if self.config.command is None:
            from contextlib import nullcontext

            return nullcontext(None)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        return self.log_path.open('a', encoding='utf-8')

    def status(self) -> Mapping[str, Any]:
        """The server's state as JSON data (for `--check` and logs)."""
        return {'server': self.name, 'state': self.state, 'tools': sorted(self.tools),
                'prompts': sorted(self.offer.prompts), 'resources': len(self.offer.resources),
                'resource_templates': len(self.offer.resource_templates), 'reason': self.reason,
                'restarts': self.restarts, 'log': str(self.log_path) if self.config.command else None}


async def _deprecated(method: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    """Call an SDK method deprecated in 2026-07-28 that connections with the handshake still use."""
    import warnings

    from mcp.shared.exceptions import MCPDeprecationWarning

    with warnings.catch_warnings():
        warnings.simplefilter('ignore', MCPDeprecationWarning)
        return await method(*args)


def _write_header(errlog: TextIO | None, upstream: Upstream) -> None:
    if errlog is None:
        return
    stamp = time.strftime('%Y-%m-%d %H:%M:%S')
    command = ' '.join([upstream.config.command or '', *upstream.config.args])
    errlog.write(f'--- {stamp} toolweave gateway: starting {upstream.name!r} ({command}), attempt '
                 f'{upstream.failures + 1}\n')
    errlog.flush()
