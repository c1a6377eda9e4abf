"""The client side of one MCP connection, shared by `McpToolset` and the gateway's upstream servers: where the
server is (`StdioTarget`, `HttpTarget`), opening an SDK `Client` to it, listing its tools, and one tool call with
its failures sorted by kind."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Literal, TextIO, TypeAlias

import anyio

from toolweave import _tracing
from toolweave._version import __version__
from toolweave.mcp._content import McpCallResult, to_tool_result
from toolweave.mcp._sdk import require_mcp

__all__ = ('CallFailed', 'HttpTarget', 'StdioTarget', 'call_tool', 'client_info', 'error_message', 'list_all',
           'list_all_tools', 'open_client', 'send_raw', 'ProgressCallback')

ProgressCallback: TypeAlias = Callable[[float, float | None, str | None], Awaitable[None]]
"""Receives a request's progress: the value, the total (if known) and a message."""
FailureKind = Literal['timeout', 'closed', 'error']


class CallFailed(Exception):
    """A tool call that got no result. `kind` says why: the call timed out, the connection is closed, or the
    server answered with a protocol error. The message names the tool and the server."""

    def __init__(self, message: str, kind: FailureKind) -> None:
        super().__init__(message)
        self.kind: FailureKind = kind


class StdioTarget:
    """A server started as a subprocess speaking over its stdin and stdout; its stderr goes to `errlog`."""

    def __init__(self, command: str, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
                 cwd: str | os.PathLike[str] | None = None, errlog: TextIO | None = None) -> None:
        self.parameters = require_mcp().StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env else None,
            cwd=os.fspath(cwd) if cwd is not None else None,
        )
        self.errlog = errlog

    @property
    def label(self) -> str:
        return ' '.join([Path(self.parameters.command).name, *(Path(a).name for a in self.parameters.args[:1])])

    async def open(self, stack: AsyncExitStack) -> Any:
        from mcp.client.stdio import stdio_client

        return await stack.enter_async_context(stdio_client(self.parameters, errlog=self.errlog or sys.stderr))


class HttpTarget:
    """A server reached over streamable HTTP (or the older SSE transport, `sse=True`); the HTTP client, with
    `headers`, lives as long as the session."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None, *, sse: bool = False) -> None:
        self.url = url
        self.headers = dict(headers or {})
        self.sse = sse

    @property
    def label(self) -> str:
        return self.url

    async def open(self, stack: AsyncExitStack) -> Any:
        if self.sse:
            from mcp.client.sse import sse_client

            return await stack.enter_async_context(sse_client(self.url, headers=self.headers or None))
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=self.headers, timeout=httpx2.Timeout(30.0, read=300.0))
        )
        return await stack.enter_async_context(streamable_http_client(self.url, http_client=http))


class _Opened:
    """A transport whose streams are already open: the SDK `Client` enters it like any transport."""

    def __init__(self, streams: Any) -> None:
        self._streams = streams

    async def __aenter__(self) -> Any:
        return self._streams

    async def __aexit__(self, *exc_info: object) -> None:
        return None


class _WatchedReadStream:
    """A transport's read stream that reports its end: the server closed the connection (or its process died)."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:  # `last_context` and whatever else the SDK reads off a stream
        return getattr(self._inner, name)


async def open_client(target: Any, stack: AsyncExitStack, *, mode: str = 'auto',
                      on_closed: Callable[[], None] | None = None, **callbacks: Any) -> Any:
    """An SDK `Client` to `target` (a `StdioTarget`, `HttpTarget`, URL, SDK server object or transport), entered
    on `stack` (which then owns the connection). `on_closed` is called when a target's connection ends;
    `callbacks` go to the `Client` (`message_handler`, ...)."""
    mcp = require_mcp()
    if isinstance(target, (StdioTarget, HttpTarget)):
        read_stream, write_stream = await target.open(stack)
        if on_closed is not None:
            read_stream = _WatchedReadStream(read_stream, on_closed)
        target = _Opened((read_stream, write_stream))
    client = mcp.Client(target, mode=mode, client_info=client_info(), **callbacks)
    await stack.enter_async_context(client)
    return client


def client_info() -> Any:
    from mcp_types import Implementation

    return Implementation(name='toolweave', version=__version__)


async def list_all_tools(client: Any, *, fresh: bool = False) -> list[Any]:
    """Every tool the server lists, following pagination (`fresh`: skip the SDK's response cache)."""
    return await list_all(client, 'tools', fresh=fresh)


_LISTS = {'tools': ('list_tools', 'tools'), 'prompts': ('list_prompts', 'prompts'),
          'resources': ('list_resources', 'resources'),
          'resource_templates': ('list_resource_templates', 'resource_templates')}


async def list_all(client: Any, kind: str, *, fresh: bool = False) -> list[Any]:
    """Every item of a list the server offers (`tools`, `prompts`, `resources`, `resource_templates`), following
    pagination (`fresh`: skip the SDK's response cache)."""
    method, field = _LISTS[kind]
    items: list[Any] = []
    cursor: str | None = None
    options = {'cache_mode': 'bypass'} if fresh else {}
    for _ in range(1000):  # a server whose pagination never ends cannot hang the connect
        page = await getattr(client, method)(cursor=cursor, **options)
        items.extend(getattr(page, field))
        cursor = page.next_cursor
        if cursor is None:
            break
    return items


async def call_tool(client: Any, mcp_name: str, arguments: dict[str, Any], *, meta: dict[str, Any] | None,
                    timeout: float | None, server: str, where: str,  # noqa: ASYNC109
                    progress: ProgressCallback | None = None) -> McpCallResult:
    """Call one tool of `server` (its label). Raises `CallFailed` (whose message starts with `where`) when no result
    came back. While tracing is on, the call's `execute_tool` span gets the MCP attributes, and the SDK sends the
    span's trace context to the server in the request's `_meta` (`traceparent`)."""
    from mcp import MCPError
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    if _tracing.ACTIVE is not None:
        _tracing.annotate({_tracing.TOOL_TYPE: 'extension', 'mcp.method.name': 'tools/call',
                           'toolweave.mcp.server': server, 'toolweave.mcp.tool': mcp_name})
    try:
        result = await client.call_tool(mcp_name, arguments, read_timeout_seconds=timeout, meta=meta,
                                        progress_callback=progress)
    except MCPError as exc:
        if exc.code == REQUEST_TIMEOUT and timeout is not None:  # the SDK's own read timeout
            raise CallFailed(f'{where} timed out after {timeout} s.', 'timeout') from None
        if exc.code == CONNECTION_CLOSED:
            raise CallFailed(f'{where} failed: the connection to the server is closed.', 'closed') from None
        raise CallFailed(f'{where} failed: {exc.message} (MCP error {exc.code}).', 'error') from None
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
        raise CallFailed(f'{where} failed: the connection to the server is closed.', 'closed') from None
    return to_tool_result(result)


def error_message(exc: BaseException) -> str:
    """The first leaf's message of an exception (group), for connection errors."""
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return error_message(exc.exceptions[0])
    return str(exc) or type(exc).__name__


async def send_raw(client: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Send a request whose result the SDK would refuse to read: the raw result. The SDK 2.x client checks each
    result against the core methods' shapes, and a task-augmented `tools/call` (2025-11-25 tasks, an extension
    since 2026-07-28) answers with a `CreateTaskResult`, so such calls go straight to the session's dispatcher,
    stamped (headers) as the session stamps its own requests. Raises `MCPError` as any request does."""
    session = client.session
    options: dict[str, Any] = {}
    data: dict[str, Any] = {'method': method, 'params': params}
    session._stamp(data, options)
    result: dict[str, Any] = await session._dispatcher.send_raw_request(method, data.get('params'), options)
    return result
