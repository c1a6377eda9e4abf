"""`Upstream`: one MCP server behind the gateway, kept running.

`run()` connects, lists the server's tools, and follows `tools/list_changed` (a notification on connections
with the initialize handshake, a `subscriptions/listen` stream on 2026-07-28 ones). When the server cannot be
started, its connection ends (it crashed or exited), or it stops answering (a call timed out and a quick
`tools/list` probe got no answer either), the connection is closed (a stdio server is stopped) and opened again
after a delay that doubles from `Backoff.initial` to `Backoff.maximum`, back to the start once a connection has
stayed up for `Backoff.stable` seconds. Meanwhile its tools fail at once with a message naming the server, and
every other server keeps working. A stdio server's stderr goes to `<log_dir>/<name>.log`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal, TextIO

import anyio
import anyio.abc

from toolweave.mcp._config import ServerConfig
from toolweave.mcp._meta import McpMetaConverter, meta_for_call
from toolweave.mcp._session import (
    CallFailed,
    HttpTarget,
    StdioTarget,
    call_tool,
    error_message,
    list_all_tools,
    open_client,
)
from toolweave.tools._context import ToolCallContext
from toolweave.tools._result import ToolResult

__all__ = ('DEFAULT_BACKOFF', 'Backoff', 'Upstream', 'UpstreamState')

logger = logging.getLogger('toolweave.mcp.gateway')

UpstreamState = Literal['starting', 'up', 'down', 'stopped']


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
        self.relist = anyio.Event()
        self._on_end = on_end

    def end(self, reason: str) -> None:
        """Mark the connection as over (the upstream's task closes it); calls fail from now on."""
        if self.reason is None:
            self.reason = reason
            self._on_end(reason)
        self.ended.set()


class Upstream:
    """One upstream server: its last known tools, its state, and calls to it (see the module docstring)."""

    def __init__(self, config: ServerConfig, *, log_dir: Path, backoff: Backoff = DEFAULT_BACKOFF,
                 on_tools: Callable[[Upstream], Awaitable[None]] | None = None) -> None:
        self.config = config
        self.backoff = backoff
        self.log_path = log_dir / f'{config.tool_prefix}.log'
        self.state: UpstreamState = 'starting'
        self.tools: dict[str, Any] = {}
        """The server's tools as it lists them (the SDK's `Tool`), by server-side name, after allow/deny."""
        self.reason: str | None = None
        """Why the server is down."""
        self.instructions: str | None = None
        """What the server says about using its tools."""
        self.failures = 0
        self.restarts = 0
        self.next_attempt: float | None = None
        self._on_tools = on_tools
        self._connection: _Connection | None = None
        self._state_changed = anyio.Event()
        self._meta = McpMetaConverter.allow_keys(*config.forward_context)
        self._left_out: set[str] = set()

    @property
    def name(self) -> str:
        return self.config.name

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
            if holder and isinstance(message, types.ToolListChangedNotification):
                holder[0].relist.set()

        client = await open_client(self._target(errlog), stack, on_closed=closed, message_handler=on_message)
        connection = _Connection(client, self._lost)
        holder.append(connection)
        self.instructions = client.instructions
        await self._relist(connection)
        logger.info('MCP server %r is up: %d tools', self.name, len(self.tools))
        return connection

    def _target(self, errlog: TextIO | None) -> Any:
        config = self.config
        if config.command is not None:
            return StdioTarget(config.command, config.args, env=config.env, cwd=config.cwd, errlog=errlog)
        assert config.url is not None
        return HttpTarget(config.url, config.headers, sse=config.transport == 'sse')

    async def _relist(self, connection: _Connection) -> None:
        listed = await list_all_tools(connection.client, fresh=True)
        tools = {tool.name: tool for tool in listed if self._keeps(tool)}
        if tools != self.tools:
            self.tools = tools
            if self._on_tools is not None:
                await self._on_tools(self)

    def _keeps(self, tool: Any) -> bool:
        name = tool.name
        config = self.config
        if config.allow_tools is not None and not any(fnmatchcase(name, p) for p in config.allow_tools):
            return False
        if any(fnmatchcase(name, pattern) for pattern in config.deny_tools):
            return False
        execution = getattr(tool, 'execution', None)
        if execution is not None and getattr(execution, 'task_support', None) == 'required':
            if name in self._left_out:
                return False
            self._left_out.add(name)
            logger.warning('Tool %r of MCP server %r is left out: it requires task-augmented calls, which the '
                           'gateway does not make', name, self.name)
            return False
        return True

    async def _follow_changes(self, connection: _Connection) -> None:
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        client = connection.client
        tools_capability = client.server_capabilities.tools
        async with anyio.create_task_group() as group:
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS and tools_capability and \
                    tools_capability.list_changed:
                group.start_soon(self._listen, connection)
            while True:
                await connection.relist.wait()
                connection.relist = anyio.Event()
                try:
                    await self._relist(connection)
                except Exception as exc:
                    logger.warning('MCP server %r announced new tools, and listing them failed: %s', self.name,
                                   error_message(exc))

    async def _listen(self, connection: _Connection) -> None:
        try:
            async with connection.client.listen(tools_list_changed=True) as subscription:
                async for _ in subscription:
                    connection.relist.set()
        except Exception as exc:  # the server ended the stream or never served it: calls still work
            logger.info('Listening for tool changes of MCP server %r ended: %s', self.name, error_message(exc))

    # --- calls --------------------------------------------------------------------------------------------

    async def call(self, exposed: str, mcp_name: str, arguments: dict[str, Any],
                   context: ToolCallContext) -> ToolResult:
        """Call one of the server's tools; every failure is a `ToolResult` naming the tool and the server."""
        connection = await self._ready()
        where = f'Tool {exposed!r} of MCP server {self.name!r}'
        if connection is None:
            return ToolResult.failure(f'{where} is not available: {self.unavailable()}')
        meta = meta_for_call(self._meta, context, exposed)
        try:
            return await call_tool(connection.client, mcp_name, arguments, meta=meta, timeout=self.config.timeout,
                                   server=self.name, where=where)
        except CallFailed as exc:
            if exc.kind == 'closed':
                connection.end('its connection closed (the server exited or crashed)')
                again = 'restarts the server' if self.config.command else 'connects to the server again'
                return ToolResult.failure(f'{exc} The gateway {again}; try again in a moment.')
            if exc.kind == 'timeout':
                await self._probe(connection)
            return ToolResult.failure(str(exc))

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

    async def _probe(self, connection: _Connection) -> None:
        """After a timed-out call: a server that cannot even list its tools is hung, and is restarted."""
        with anyio.move_on_after(self.backoff.probe_timeout):
            try:
                await list_all_tools(connection.client, fresh=True)
            except Exception as exc:
                connection.end(f'it failed after a call timed out: {error_message(exc)}')
            return
        connection.end(f'it stopped answering (a call timed out, then tools/list got no answer within '
                       f'{self.backoff.probe_timeout:g} s)')

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
        return {'server': self.name, 'state': self.state, 'tools': sorted(self.tools), 'reason': self.reason,
                'restarts': self.restarts, 'log': str(self.log_path) if self.config.command else None}


def _write_header(errlog: TextIO | None, upstream: Upstream) -> None:
    if errlog is None:
        return
    stamp = time.strftime('%Y-%m-%d %H:%M:%S')
    command = ' '.join([upstream.config.command or '', *upstream.config.args])
    errlog.write(f'--- {stamp} toolweave gateway: starting {upstream.name!r} ({command}), attempt '
                 f'{upstream.failures + 1}\n')
    errlog.flush()

