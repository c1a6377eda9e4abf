"""MCP integration: use an MCP server's tools as a `Toolset`, serve a `Toolset` as an MCP server, and put one
gateway in front of many MCP servers.

Client: `McpToolset.stdio(...)`, `McpToolset.http(...)` or `McpToolset(server)` inside `async with`; the
context of each call travels as `_meta`, chosen by an `McpMetaConverter`. `McpToolFactory` looks tools up and
selects them across servers. Server: `mcp_server(toolset)`, `serve_stdio`, `streamable_http_app`, `serve_http`.
Gateway: `McpGateway(config)` (the `toolweave gateway` command) with a `GatewayConfig` read from an `mcpServers`
file.

Needs the optional `mcp` SDK (2.x): `pip install "toolweave[mcp]"`. This module imports without it; the
SDK is loaded when a toolset or server is built.
"""

from __future__ import annotations

from toolweave._public import present as _present
from toolweave.mcp._client import McpTool, McpToolset
from toolweave.mcp._config import GatewayConfig, GatewayMode, PrefixPolicy, ServerConfig
from toolweave.mcp._content import InvalidNamePolicy, McpCallResult
from toolweave.mcp._factory import McpToolFactory
from toolweave.mcp._gateway import GatewayTool, McpGateway, default_log_dir
from toolweave.mcp._meta import McpMetaConverter, MetaConverterLike, context_from_meta, is_reserved_meta_key
from toolweave.mcp._server import mcp_server, serve_http, serve_stdio, serve_stdio_sync, streamable_http_app
from toolweave.mcp._upstream import Backoff

__all__ = (
    'Backoff',
    'context_from_meta',
    'default_log_dir',
    'GatewayConfig',
    'GatewayMode',
    'GatewayTool',
    'InvalidNamePolicy',
    'is_reserved_meta_key',
    'mcp_server',
    'McpCallResult',
    'McpGateway',
    'McpMetaConverter',
    'McpTool',
    'McpToolFactory',
    'McpToolset',
    'MetaConverterLike',
    'PrefixPolicy',
    'serve_http',
    'serve_stdio',
    'serve_stdio_sync',
    'ServerConfig',
    'streamable_http_app',
)

_present('toolweave.mcp', __all__, globals())
