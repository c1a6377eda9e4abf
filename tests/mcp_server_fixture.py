"""MCP servers of our own for the MCP integration tests, run as real stdio subprocesses.

`python tests/mcp_server_fixture.py raw` serves tools written directly on the MCP SDK's low-level server (the
client tests use it, so they do not depend on toolweave's server side). `python tests/mcp_server_fixture.py
toolweave` serves `served_toolset()` through `toolweave.mcp.serve_stdio` (the server tests use it). `tiny` is a
bare JSON-RPC loop without the SDK, for tests that need a fresh server process that starts fast.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio

from toolweave import ToolCallContext, Toolset, tool

RESERVED_PREFIX = 'io.modelcontextprotocol/'
LONG_NAME = 'a_tool_name_that_is_far_too_long_for_the_rule_' + 'x' * 30

_OBJECT = {'type': 'object'}


def _schema(**properties: Any) -> dict[str, Any]:
    return {'type': 'object', 'properties': properties, 'required': list(properties)}


RAW_TOOLS: list[dict[str, Any]] = [
    {'name': 'echo', 'description': 'Echo the text back.', 'input_schema': _schema(text={'type': 'string'}),
     'annotations': {'read_only_hint': True}},
    {'name': 'add', 'description': 'Add two numbers.',
     'input_schema': _schema(a={'type': 'number'}, b={'type': 'number'}),
     'output_schema': _schema(sum={'type': 'number'})},
    {'name': 'fail', 'description': 'Always fails with the message.',
     'input_schema': _schema(message={'type': 'string'})},
    {'name': 'slow', 'description': 'Sleeps, then answers.', 'input_schema': _schema(seconds={'type': 'number'})},
    {'name': 'meta_echo', 'description': 'Reports the _meta the call carried.', 'input_schema': _OBJECT},
    {'name': 'crash', 'description': 'Raises inside the server handler.', 'input_schema': _OBJECT},
    {'name': 'image', 'description': 'Returns an image and a caption.', 'input_schema': _OBJECT},
    {'name': 'huge', 'description': 'Returns n characters.', 'input_schema': _schema(n={'type': 'integer'})},
    {'name': 'die', 'description': 'Ends the server process at once.', 'input_schema': _OBJECT},
    {'name': 'dotted.name', 'description': 'A name with a dot.', 'input_schema': _OBJECT},
    {'name': LONG_NAME, 'description': 'A name longer than 64 characters.', 'input_schema': _OBJECT},
]


def raw_server() -> Any:
    import mcp_types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[types.Tool(**spec) for spec in RAW_TOOLS])

    def text(value: str, **extra: Any) -> Any:
        return types.CallToolResult(content=[types.TextContent(text=value)], **extra)

    async def call_tool(ctx: Any, params: Any) -> Any:
        args = params.arguments or {}
        name = params.name
        if name == 'echo':
            return text(str(args['text']))
        if name == 'add':
            total = args['a'] + args['b']
            return text(json.dumps({'sum': total}), structured_content={'sum': total})
        if name == 'fail':
            return text(str(args['message']), is_error=True)
        if name == 'slow':
            await anyio.sleep(float(args['seconds']))
            return text('slept')
        if name == 'meta_echo':
            meta = dict(params.meta or {})
            user = {k: v for k, v in meta.items() if not k.startswith(RESERVED_PREFIX) and k != 'progressToken'}
            return text(json.dumps({'meta': user, 'has_meta': params.meta is not None}))
        if name == 'crash':
            raise RuntimeError('kaboom in the server')
        if name == 'image':
            return types.CallToolResult(content=[
                types.ImageContent(data='iVBORw0KGgo=', mime_type='image/png'),
                types.TextContent(text='a tiny picture'),
            ])
        if name == 'huge':
            return text('x' * int(args['n']))
        if name == 'die':
            os._exit(3)
        return text(f'called {name}')

    return Server('fixture', version='1.0', on_list_tools=list_tools, on_call_tool=call_tool)


async def _serve_raw() -> None:
    from mcp.server.stdio import stdio_server

    server = raw_server()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def _serve_tiny() -> None:
    """A bare JSON-RPC loop without the SDK (it starts in milliseconds) for the server-death test: the
    handshake, `tools/list` and `tools/call` of `echo`, `hang` (never answers) and `die` (ends the process)."""
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, message_id = message.get('method'), message.get('id')
        if message_id is None:  # a notification
            continue
        params = message.get('params') or {}
        reply: dict[str, Any] = {'jsonrpc': '2.0', 'id': message_id}
        if method == 'initialize':
            reply['result'] = {'protocolVersion': params['protocolVersion'], 'capabilities': {'tools': {}},
                               'serverInfo': {'name': 'tiny', 'version': '1'}}
        elif method == 'tools/list':
            names = ('echo', 'hang', 'die')
            reply['result'] = {'tools': [{'name': name, 'inputSchema': {'type': 'object'}} for name in names]}
        elif method == 'tools/call' and params.get('name') == 'die':
            os._exit(3)
        elif method == 'tools/call' and params.get('name') == 'hang':
            continue
        elif method == 'tools/call':
            reply['result'] = {'content': [{'type': 'text', 'text': json.dumps(params.get('arguments'))}]}
        else:  # server/discover included: the client falls back to the handshake
            reply['error'] = {'code': -32601, 'message': f'Method not found: {method}'}
        print(json.dumps(reply), flush=True)


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


@tool
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


@tool
def profile(name: str) -> dict[str, Any]:
    """Describe a name."""
    return {'name': name, 'length': len(name)}


@tool
def whoami(context: ToolCallContext) -> dict[str, Any]:
    """Report the call context this tool received."""
    return context.to_map()


@tool
async def nap(seconds: float) -> str:
    """Sleep, then answer."""
    await anyio.sleep(seconds)
    return 'rested'


def served_toolset() -> Toolset:
    return Toolset([add, divide, profile, whoami, nap])


if __name__ == '__main__':
    if sys.argv[1:2] == ['raw']:
        if sys.argv[2:] == ['--say-hello']:  # one line on stderr, for the test that sends it to a file
            print('fixture server starting', file=sys.stderr, flush=True)
        anyio.run(_serve_raw)
    elif sys.argv[1:] == ['tiny']:
        _serve_tiny()
    elif sys.argv[1:] == ['toolweave']:
        from toolweave.mcp import serve_stdio_sync

        serve_stdio_sync(served_toolset(), name='toolweave-fixture')
    else:
        raise SystemExit('usage: mcp_server_fixture.py raw|tiny|toolweave')
