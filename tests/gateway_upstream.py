"""Upstream MCP servers for the gateway tests, run as real stdio subprocesses.

`python tests/gateway_upstream.py sdk` serves `SDK_TOOLS` with the MCP SDK's low-level server (2026-07-28 and
the initialize handshake, `subscriptions/listen` for tool changes): read-only, structured, destructive, media,
`_meta`, slow, crashing, freezing and list-changing tools. `python tests/gateway_upstream.py legacy` is a bare
JSON-RPC loop that only knows the initialize handshake (so the gateway must follow tool changes from
`notifications/tools/list_changed`), with `echo`, `grow`, `shrink` (removes `echo`), `die` and any tool
names given after `legacy` (they echo their arguments). `python tests/gateway_upstream.py http PORT`
serves the SDK fixture over streamable HTTP (port 0: any free port) and prints its URL.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import anyio

AUDIO = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA='
IMAGE = 'iVBORw0KGgo='


def _schema(**properties: Any) -> dict[str, Any]:
    return {'type': 'object', 'properties': properties, 'required': list(properties)}


SDK_TOOLS: list[dict[str, Any]] = [
    {'name': 'echo', 'title': 'Echo', 'description': 'Echo the text back.',
     'input_schema': _schema(text={'type': 'string'}),
     'annotations': {'read_only_hint': True, 'destructive_hint': False, 'idempotent_hint': True}},
    {'name': 'add', 'description': 'Add two numbers.', 'input_schema': _schema(a={'type': 'number'},
                                                                           b={'type': 'number'}),
     'output_schema': _schema(sum={'type': 'number'}), 'annotations': {'read_only_hint': True},
     '_meta': {'example.com/owner': 'tests', 'io.modelcontextprotocol/secret': 'hop-only'}},
    {'name': 'wipe', 'description': 'Delete everything under a path.', 'input_schema': _schema(path={'type': 'string'}),
     'annotations': {'read_only_hint': False, 'destructive_hint': True}},
    {'name': 'media', 'description': 'Return an image, audio, a resource, a resource link and text.',
     'input_schema': {'type': 'object'}},
    {'name': 'meta_echo', 'description': 'Report the _meta the call carried.', 'input_schema': {'type': 'object'}},
    {'name': 'slow', 'description': 'Sleep, then answer.', 'input_schema': _schema(seconds={'type': 'number'})},
    {'name': 'fail', 'description': 'Fail with the message.', 'input_schema': _schema(message={'type': 'string'})},
    {'name': 'die', 'description': 'End the server process at once.', 'input_schema': {'type': 'object'}},
    {'name': 'freeze', 'description': 'Block the whole server process.', 'input_schema': {'type': 'object'}},
    {'name': 'grow', 'description': 'Add a tool and announce the change.', 'input_schema': {'type': 'object'}},
]


def sdk_server() -> Any:
    import mcp_types as types
    from mcp.server.lowlevel import NotificationOptions, Server
    from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    bus = InMemorySubscriptionBus()
    grown: list[str] = []

    async def list_tools(ctx: Any, params: Any) -> Any:
        extra = [{'name': name, 'description': f'Added by grow ({name}).', 'input_schema': {'type': 'object'}}
                 for name in grown]
        return types.ListToolsResult(tools=[types.Tool.model_validate(spec) for spec in [*SDK_TOOLS, *extra]])

    def text(value: str, **extra: Any) -> Any:
        return types.CallToolResult(content=[types.TextContent(text=value)], **extra)

    async def call_tool(ctx: Any, params: Any) -> Any:
        args, name = params.arguments or {}, params.name
        if name == 'echo':
            return text(str(args['text']))
        if name == 'add':
            total = args['a'] + args['b']
            return text(json.dumps({'sum': total}), structured_content={'sum': total})
        if name == 'wipe':
            return text(f'wiped {args["path"]}')
        if name == 'media':
            return types.CallToolResult.model_validate({'content': [
                {'type': 'text', 'text': 'four blocks follow'},
                {'type': 'image', 'data': IMAGE, 'mimeType': 'image/png'},
                {'type': 'audio', 'data': AUDIO, 'mimeType': 'audio/wav'},
                {'type': 'resource', 'resource': {'uri': 'file:///notes.txt', 'mimeType': 'text/plain',
                                                  'text': 'a note'}},
                {'type': 'resource_link', 'uri': 'file:///big.bin', 'name': 'big.bin'},
            ], '_meta': {'example.com/trace': 't-1'}})
        if name == 'meta_echo':
            meta = {k: v for k, v in (params.meta or {}).items() if '/' not in k and k != 'progressToken'}
            return text(json.dumps(meta), structured_content={'meta': meta})
        if name == 'slow':
            await anyio.sleep(float(args['seconds']))
            return text('slept')
        if name == 'fail':
            return text(str(args['message']), is_error=True)
        if name == 'die':
            os._exit(3)
        if name == 'freeze':
            time.sleep(3600)  # noqa: ASYNC251 - blocks the event loop on purpose: the server answers nothing any more
        if name == 'grow':
            grown.append(f'extra_{len(grown) + 1}')
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                await bus.publish(ToolsListChanged())
            else:
                await ctx.session.send_tool_list_changed()
            return text(grown[-1])
        return text(f'called {name}')

    server = Server('gateway-upstream', version='1.0', instructions='Upstream test tools.',
                    on_list_tools=list_tools, on_call_tool=call_tool, on_subscriptions_listen=ListenHandler(bus))
    return server, server.create_initialization_options(NotificationOptions(tools_changed=True))


async def _serve_sdk() -> None:
    from mcp.server.stdio import stdio_server

    server, options = sdk_server()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, options)


def _serve_http(port: int) -> None:
    """`sdk_server()` over streamable HTTP on 127.0.0.1:`port`; prints its URL once it listens."""
    import uvicorn

    server, _ = sdk_server()
    app = server.streamable_http_app(streamable_http_path='/mcp', host='127.0.0.1')
    config = uvicorn.Config(app, host='127.0.0.1', port=port, log_level='warning', lifespan='on')
    http = uvicorn.Server(config)

    async def announce() -> None:
        while not http.started:  # noqa: ASYNC110 - uvicorn offers no event to wait on
            await anyio.sleep(0.01)
        port_used = http.servers[0].sockets[0].getsockname()[1]
        print(f'http://127.0.0.1:{port_used}/mcp', flush=True)

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(announce)
            await http.serve()

    anyio.run(main)


def _serve_legacy(extra: list[str]) -> None:
    """A JSON-RPC loop that speaks only the initialize handshake; `extra` names more tools (each echoes)."""
    names = ['echo', 'grow', 'shrink', 'die', *extra]
    added = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, message_id = message.get('method'), message.get('id')
        if message_id is None:
            continue
        params = message.get('params') or {}
        reply: dict[str, Any] = {'jsonrpc': '2.0', 'id': message_id}
        if method == 'initialize':
            reply['result'] = {'protocolVersion': params['protocolVersion'],
                               'capabilities': {'tools': {'listChanged': True}},
                               'serverInfo': {'name': 'legacy', 'version': '1'}}
        elif method == 'tools/list':
            reply['result'] = {'tools': [{'name': n, 'inputSchema': {'type': 'object'}} for n in names]}
        elif method == 'tools/call' and params.get('name') == 'die':
            os._exit(3)
        elif method == 'tools/call' and params.get('name') in ('grow', 'shrink'):
            if params['name'] == 'grow':
                added += 1
                names.append(f'extra_{added}')
            else:
                names.remove('echo')
            print(json.dumps({'jsonrpc': '2.0', 'method': 'notifications/tools/list_changed'}), flush=True)
            reply['result'] = {'content': [{'type': 'text', 'text': ' '.join(names)}]}
        elif method == 'tools/call':
            reply['result'] = {'content': [{'type': 'text', 'text': json.dumps(params.get('arguments'))}]}
        else:  # server/discover included: the client falls back to the handshake
            reply['error'] = {'code': -32601, 'message': f'Method not found: {method}'}
        print(json.dumps(reply), flush=True)


if __name__ == '__main__':
    print(f'gateway upstream {sys.argv[1:]} starting', file=sys.stderr, flush=True)
    if sys.argv[1:] == ['sdk']:
        anyio.run(_serve_sdk)
    elif sys.argv[1:2] == ['legacy']:
        _serve_legacy(sys.argv[2:])
    elif sys.argv[1:2] == ['http'] and len(sys.argv) == 3:
        _serve_http(int(sys.argv[2]))
    else:
        raise SystemExit('usage: gateway_upstream.py sdk|legacy [TOOL...]|http PORT')
