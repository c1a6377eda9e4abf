"""Serve a `Toolset` over MCP: stdio, streamable HTTP, or in-process (an SDK server object).

Every call goes through `Tool.call`, so approval gates, metrics, logging and exception-to-failure conversion
behave as they do for a direct call. The request's `_meta`, less the protocol's own keys, becomes the
`ToolCallContext` the tool receives.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

import anyio

from toolweave._version import __version__
from toolweave.approval import ReviewHandler
from toolweave.exceptions import UserError
from toolweave.mcp._approvals import ApprovalFallback
from toolweave.mcp._http import BearerTokens, HttpApp, http_app, serve_app
from toolweave.mcp._sdk import require_mcp
from toolweave.mcp._serving import ToolServer
from toolweave.mcp._stdio import stdio_streams
from toolweave.plan import PlanTool
from toolweave.tools import Tool, Toolset, ToolsetItem

__all__ = ('mcp_server', 'serve_http', 'serve_stdio', 'serve_stdio_sync', 'streamable_http_app')

logger = logging.getLogger('toolweave.mcp')


def mcp_server(
    tools: Toolset | Iterable[ToolsetItem],
    *,
    name: str = 'toolweave',
    version: str | None = None,
    instructions: str | None = None,
    tool_planning: bool = False,
    review_handler: ReviewHandler | None = None,
    approval_fallback: ApprovalFallback = 'deny',
) -> Any:
    """An MCP SDK low-level `Server` that lists `tools` and calls them. Run it with any SDK transport, connect
    to it in-process (`McpToolset(server)`), or use `serve_stdio` / `streamable_http_app`.

    A tool that requires approval asks the person at the client (MCP elicitation) when the client supports it;
    otherwise `approval_fallback` decides. A plan's result is an error result only when none of its output steps
    succeeded; otherwise it carries each step's result and error in its text and structured content.

    Args:
        tools: a `Toolset`, or anything `Toolset(...)` accepts.
        name: the server name the client sees.
        version: the server version (default: toolweave's).
        instructions: text a client may show its model about how to use the server.
        tool_planning: also serve `execute_tool_plan` over the tools, and teach it in the instructions.
        review_handler: decide approvals on the server instead of asking the client.
        approval_fallback: `'deny'` (default) or `'allow'` calls that need approval when the client cannot be
            asked (it does not support elicitation).
    """
    require_mcp()

    toolset = tools if isinstance(tools, Toolset) else Toolset(tools)
    front: list[Tool] = []
    if tool_planning:
        planner = PlanTool(toolset)
        if planner.name in toolset:
            raise UserError(f'mcp_server(tool_planning=True) serves {planner.name!r}, and the toolset already has a '
                            f'tool of that name ({toolset.origin(planner.name)}). Rename that tool.')
        front.append(planner)
        instructions = '\n\n'.join(text for text in (instructions, planner.instructions()) if text)
    served = ToolServer(toolset, front=front, review_handler=review_handler, approval_fallback=approval_fallback)
    return served.server(name=name, version=version or __version__, instructions=instructions)


async def serve_stdio(tools: Toolset | Iterable[ToolsetItem], **server_options: Any) -> None:
    """Serve `tools` over this process's stdin and stdout until the client closes stdin.

    ```python
    if __name__ == '__main__':
        serve_stdio_sync([add, search])  # a client runs: python my_server.py
    ```
    """
    server = mcp_server(tools, **server_options)
    async with stdio_streams() as (read_stream, write_stream):
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
    tokens: Mapping[str, str] | None = None,
    **server_options: Any,
) -> HttpApp:
    """An ASGI app serving `tools` over streamable HTTP at `path`; run it with any ASGI server (with its lifespan
    on). `host` sets the DNS-rebinding protection the SDK enables for local hosts; `tokens` (`{"client name":
    "token"}`) makes every request need `Authorization: Bearer <token>`. A request the SDK cannot parse is
    answered with a JSON-RPC error naming its id."""
    server = mcp_server(tools, **server_options)
    return http_app(server, path=path, host=host, stateless=stateless, json_response=json_response,
                    tokens=BearerTokens(tokens) if tokens else None)


async def serve_http(
    tools: Toolset | Iterable[ToolsetItem],
    *,
    host: str = '127.0.0.1',
    port: int = 8000,
    path: str = '/mcp',
    on_started: Callable[[str], object] | None = None,
    tokens: Mapping[str, str] | None = None,
    **server_options: Any,
) -> None:
    """Serve `tools` over streamable HTTP with uvicorn until cancelled (asyncio backend only).

    `on_started` receives the endpoint URL once the socket listens (with `port=0` the system picks a free
    port, and the URL says which). Cancelling it ends the MCP sessions, then lets connections drain for a few
    seconds.
    """
    app = streamable_http_app(tools, path=path, host=host, tokens=tokens, **server_options)
    await serve_app(app, host=host, port=port, on_started=on_started)
