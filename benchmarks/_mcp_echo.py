"""A minimal MCP server for the gateway benchmark: one `echo` tool, served over stdio with the SDK's low-level
server, so a measured call costs the protocol and the hops, not the tool."""

from __future__ import annotations

from typing import Any

import anyio


def server() -> Any:
    import mcp_types as types
    from mcp.server.lowlevel import Server

    echo = types.Tool(name='echo', description='Echo the text back.',
                      input_schema={'type': 'object', 'properties': {'text': {'type': 'string'}}, 'required': ['text']},
                      annotations=types.ToolAnnotations(read_only_hint=True))

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[echo])

    async def call_tool(ctx: Any, params: Any) -> Any:
        return types.CallToolResult(content=[types.TextContent(text=str((params.arguments or {}).get('text')))])

    return Server('bench-echo', version='1', on_list_tools=list_tools, on_call_tool=call_tool)


async def _serve() -> None:
    from mcp.server.stdio import stdio_server

    echo_server = server()
    async with stdio_server() as (read_stream, write_stream):
        await echo_server.run(read_stream, write_stream, echo_server.create_initialization_options())


if __name__ == '__main__':
    anyio.run(_serve)
