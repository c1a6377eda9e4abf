"""Serve a `Toolset` over MCP: stdio, streamable HTTP, or in-process (an SDK server object).

Every call goes through `Tool.call`, so approval gates, metrics, logging and exception-to-failure conversion
behave as they do for a direct call. The request's `_meta`, less the protocol's own keys, becomes the
`ToolCallContext` the tool receives.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import anyio

from toolweave._version import __version__
from toolweave.exceptions import ToolweaveError
from toolweave.mcp._content import structured_value
from toolweave.mcp._meta import context_from_meta
from toolweave.mcp._sdk import require_mcp
from toolweave.tools import ToolDefinition, ToolResult, Toolset, ToolsetItem

__all__ = ('mcp_server', 'serve_http', 'serve_stdio', 'serve_stdio_sync', 'streamable_http_app')

logger = logging.getLogger('toolweave.mcp')


def mcp_server(
    tools: Toolset | Iterable[ToolsetItem],
    *,
    name: str = 'toolweave',
    version: str | None = None,
    instructions: str | None = None,
) -> Any:
    """An MCP SDK low-level `Server` that lists `tools` and calls them. Run it with any SDK transport, connect
    to it in-process (`McpToolset(server)`), or use `serve_stdio` / `streamable_http_app`.

    Args:
        tools: a `Toolset`, or anything `Toolset(...)` accepts.
        name: the server name the client sees.
        version: the server version (default: toolweave's).
        instructions: text a client may show its model about how to use the server.
    """
    require_mcp()
    import mcp_types as types
    from mcp import MCPError
    from mcp.server.lowlevel import Server
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    toolset = tools if isinstance(tools, Toolset) else Toolset(tools)

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[_mcp_tool(types, d) for d in toolset.definitions()])

    async def call_tool(ctx: Any, params: Any) -> Any:
        tool = toolset.find(params.name)
        if tool is None:
            available = ', '.join(toolset.names) or '(none)'
            raise MCPError(types.INVALID_PARAMS, f'Unknown tool {params.name!r}. Available tools: {available}.')
        context = context_from_meta(params.meta)
        try:
            result = await tool.call(params.arguments, context)
        except ToolweaveError as exc:  # configuration errors and control-flow signals: tell the client, stay up
            logger.warning('MCP call of %r stopped by %s: %s', params.name, type(exc).__name__, exc)
            result = ToolResult.failure(f'{type(exc).__name__}: {exc}')
        return _call_result(types, result, any_json=ctx.protocol_version in MODERN_PROTOCOL_VERSIONS)

    return Server(name, version=version or __version__, instructions=instructions,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def _mcp_tool(types: Any, definition: ToolDefinition) -> Any:
    return types.Tool(name=definition.name, description=definition.description or None,
                      input_schema=dict(definition.parameters))


def _call_result(types: Any, result: ToolResult, *, any_json: bool) -> Any:
    text = result.output if result.ok else (result.error or '')
    return types.CallToolResult(
        content=[types.TextContent(text=text)] if text else [],
        structured_content=structured_value(result, any_json=any_json),
        is_error=not result.ok,
    )


async def serve_stdio(tools: Toolset | Iterable[ToolsetItem], **server_options: Any) -> None:
    """Serve `tools` over this process's stdin and stdout until the client closes stdin.

    ```python
    if __name__ == '__main__':
        serve_stdio_sync([add, search])  # a client runs: python my_server.py
    ```
    """
    server = mcp_server(tools, **server_options)
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_stdio_sync(tools: Toolset | Iterable[ToolsetItem], **server_options: Any) -> None:
    """`serve_stdio` for a script's `if __name__ == '__main__':` block."""
    anyio.run(partial(serve_stdio, tools, **server_options))


def streamable_http_app(
    tools: Toolset | Iterable[ToolsetItem],
    *,
    path: str = '/mcp',
    stateless: bool = False,
    json_response: bool = False,
    host: str = '127.0.0.1',
    **server_options: Any,
) -> Any:
    """An ASGI (Starlette) app serving `tools` over streamable HTTP at `path`; run it with any ASGI server.
    `host` sets the DNS-rebinding protection the SDK enables for local hosts."""
    server = mcp_server(tools, **server_options)
    return server.streamable_http_app(streamable_http_path=path, stateless_http=stateless,
                                      json_response=json_response, host=host)


async def serve_http(
    tools: Toolset | Iterable[ToolsetItem],
    *,
    host: str = '127.0.0.1',
    port: int = 8000,
    path: str = '/mcp',
    on_started: Callable[[str], object] | None = None,
    **server_options: Any,
) -> None:
    """Serve `tools` over streamable HTTP with uvicorn until cancelled (asyncio backend only).

    `on_started` receives the endpoint URL once the socket listens (with `port=0` the system picks a free
    port, and the URL says which).
    """
    import uvicorn

    app = streamable_http_app(tools, path=path, host=host, **server_options)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level='warning', lifespan='on'))
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve)
        while not server.started:
            if server.should_exit:  # startup failed (port in use, ...): uvicorn logged why
                raise OSError(f'MCP HTTP server could not listen on {host}:{port}. Pick another port, or 0.')
            await anyio.sleep(0.01)
        url = f'http://{host}:{server.servers[0].sockets[0].getsockname()[1]}{path}'
        logger.info('Serving MCP tools at %s', url)
        if on_started is not None:
            on_started(url)
        try:
            await anyio.sleep_forever()
        finally:
            server.should_exit = True
