"""Upstream MCP servers for the gateway tests, run as real stdio subprocesses.

`python tests/gateway_upstream.py sdk` serves `SDK_TOOLS` with the MCP SDK's low-level server (2026-07-28 and
the initialize handshake, `subscriptions/listen` for changes): read-only, structured, destructive, media,
`_meta`, slow (it remembers being cancelled: `cancelled` tells), crashing, freezing and list-changing tools, a
tool without annotations (`touch`), tools that ask the client (`ask`: elicitation, `sample`: sampling, `roots`),
report progress (`progress`) and log (`log`); a prompt with a completable argument, resources (and a link to one it
does not list), and a resource template. On 2026-07-28 connections the questions travel in an
`InputRequiredResult`; with the initialize handshake as requests of the server. `python tests/gateway_upstream.py
legacy` is a bare JSON-RPC loop that only knows the initialize handshake (so the gateway must follow tool changes
from `notifications/tools/list_changed`), with `echo`, `grow`, `shrink` (removes `echo`), `die` and any tool
names given after `legacy` (they echo their arguments; all read-only). `python tests/gateway_upstream.py http
PORT` serves the SDK fixture over streamable HTTP (port 0: any free port) and prints its URL.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from typing import Any

import anyio

AUDIO = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA='
IMAGE = 'iVBORw0KGgo='


def _schema(**properties: Any) -> dict[str, Any]:
    return {'type': 'object', 'properties': properties, 'required': list(properties)}


SAFE = {'read_only_hint': False, 'destructive_hint': False}
READ = {'read_only_hint': True}


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
     'input_schema': {'type': 'object'}, 'annotations': READ},
    {'name': 'meta_echo', 'description': 'Report the _meta the call carried.', 'input_schema': {'type': 'object'},
     'annotations': READ},
    {'name': 'slow', 'description': 'Sleep, then answer.', 'input_schema': _schema(seconds={'type': 'number'}),
     'annotations': READ},
    {'name': 'fail', 'description': 'Fail with the message.', 'input_schema': _schema(message={'type': 'string'}),
     'annotations': READ},
    {'name': 'die', 'description': 'End the server process at once.', 'input_schema': {'type': 'object'},
     'annotations': SAFE},
    {'name': 'freeze', 'description': 'Block the whole server process.', 'input_schema': {'type': 'object'},
     'annotations': SAFE},
    {'name': 'grow', 'description': 'Add a tool and announce the change.', 'input_schema': {'type': 'object'},
     'annotations': SAFE},
    {'name': 'touch', 'description': 'Change something; the server says nothing about how.',
     'input_schema': {'type': 'object'}},
    {'name': 'ask', 'description': 'Ask the person a question, answer with what they said.',
     'input_schema': {'type': 'object'}, 'annotations': READ},
    {'name': 'sample', 'description': "Ask the client's model, answer with what it said.",
     'input_schema': {'type': 'object'}, 'annotations': READ},
    {'name': 'roots', 'description': "List the client's roots.", 'input_schema': {'type': 'object'},
     'annotations': READ},
    {'name': 'progress', 'description': 'Report progress n times, then answer.',
     'input_schema': _schema(n={'type': 'integer'}), 'annotations': READ},
    {'name': 'log', 'description': 'Log a message at each level, then answer.', 'input_schema': {'type': 'object'},
     'annotations': READ},
    {'name': 'cancelled', 'description': 'Which calls of slow were cancelled.', 'input_schema': {'type': 'object'},
     'annotations': READ},
]
QUESTION = {'message': 'Which colour?', 'requested_schema': {'type': 'object', 'properties': {
    'colour': {'type': 'string'}}, 'required': ['colour']}}


class _Fixture:
    """The SDK fixture's handlers: `tool_<name>` for each tool of `SDK_TOOLS`."""

    def __init__(self) -> None:
        from mcp.server.subscriptions import InMemorySubscriptionBus

        self.bus = InMemorySubscriptionBus()
        self.grown: list[str] = []
        self.cancelled: list[float] = []

    async def list_tools(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        extra = [{'name': name, 'description': f'Added by grow ({name}).', 'input_schema': {'type': 'object'},
                  'annotations': READ} for name in self.grown]
        return types.ListToolsResult(tools=[types.Tool.model_validate(spec) for spec in [*SDK_TOOLS, *extra]])

    async def call_tool(self, ctx: Any, params: Any) -> Any:
        handler = getattr(self, f'tool_{params.name}', None)
        if handler is None:
            return _text(f'called {params.name}')
        return await handler(ctx, params, params.arguments or {})

    async def tool_echo(self, ctx: Any, params: Any, args: dict[str, Any]) -> Any:
        return _text(str(args['text']))

    async def tool_add(self, ctx: Any, params: Any, args: dict[str, Any]) -> Any:
        total = args['a'] + args['b']
        return _text(json.dumps({'sum': total}), structured_content={'sum': total})

    async def tool_wipe(self, ctx: Any, params: Any, args: dict[str, Any]) -> Any:
        return _text(f'wiped {args["path"]}')

    async def tool_media(self, ctx: Any, params: Any, args: dict[str, Any]) -> Any:
        import mcp_types as types

        return types.CallToolResult.model_validate({'content': [
            {'type': 'text', 'text': 'four blocks follow'},
            {'type': 'image', 'data': IMAGE, 'mimeType': 'image/png'},
            {'type': 'audio', 'data': AUDIO, 'mimeType': 'audio/wav'},
            {'type': 'resource', 'resource': {'uri': 'file:///notes.txt', 'mimeType': 'text/plain',
                                              'text': 'a note'}},
            {'type': 'resource_link', 'uri': 'memo://linked/big', 'name': 'big'},
        ], '_meta': {'example.com/trace': 't-1'}})

    async def tool_meta_echo(self, ctx: Any, params: Any, args: dict[str, Any]) -> Any:
        hidden = ('progressToken', 'progress_token')
        meta = {k: v for k, v in (params.meta or {}).items() if '/' not in k and k not in hidden}
        return _text(json.dumps(meta), structured_content={'meta': meta})

    async def tool_slow(self, ctx: Any, params: Any, args: dict[str, Any]) -> Any:
        try:
            await anyio.sleep(float(args['seconds']))
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(float(args['seconds']))
            if os.environ.get('GATEWAY_UPSTREAM_CANCELLED'):  # also on disk, for clients that outlive the process
                record = os.open(os.environ['GATEWAY_UPSTREAM_CANCELLED'], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
                os.write(record, f'{float(args["seconds"])}\n'.encode())
                os.close(record)
            raise
        return _text('slept')

    async def tool_cancelled(self, ctx: Any, params: Any, args: dict[str, Any]) -> Any:
        return _text(json.dumps(self.cancelled), structured_content={'cancelled': self.cancelled})

    async def tool_fail(self, ctx: Any, params: Any, args: dict[str, Any]) -> Any:
        return _text(str(args['message']), is_error=True)

    async def tool_die(self, ctx: Any, params: Any, args: dict[str, Any]) -> Any:
        os._exit(3)

    async def tool_freeze(self, ctx: Any, params: Any, args: dict[str, Any]) -> Any:
        time.sleep(3600)  # noqa: ASYNC251 - blocks the event loop on purpose: the server answers nothing any more

    async def tool_grow(self, ctx: Any, params: Any, args: dict[str, Any]) -> Any:
        from mcp.server.subscriptions import ToolsListChanged
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        self.grown.append(f'extra_{len(self.grown) + 1}')
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await self.bus.publish(ToolsListChanged())
        else:
            await ctx.session.send_tool_list_changed()
        return _text(self.grown[-1])

    async def tool_progress(self, ctx: Any, params: Any, args: dict[str, Any]) -> Any:
        for step in range(1, int(args['n']) + 1):
            await ctx.session.report_progress(step, int(args['n']), f'step {step}')
        return _text('progressed')

    async def tool_log(self, ctx: Any, params: Any, args: dict[str, Any]) -> Any:
        for level in ('debug', 'info', 'warning', 'error'):
            await ctx.session.send_log_message(level, {'said': level}, 'fixture', related_request_id=ctx.request_id)
        return _text('logged')

    async def tool_ask(self, ctx: Any, params: Any, args: dict[str, Any]) -> Any:
        import mcp_types as types

        return await _questions(ctx, params, types.ElicitRequest(params=types.ElicitRequestFormParams(**QUESTION)),
                                types.ElicitResult)

    async def tool_sample(self, ctx: Any, params: Any, args: dict[str, Any]) -> Any:
        import mcp_types as types

        request = types.CreateMessageRequest(params=types.CreateMessageRequestParams(
            messages=[types.SamplingMessage(role='user', content=types.TextContent(text='Say hi.'))], max_tokens=10))
        return await _questions(ctx, params, request, types.CreateMessageResult)

    async def tool_roots(self, ctx: Any, params: Any, args: dict[str, Any]) -> Any:
        import mcp_types as types

        return await _questions(ctx, params, types.ListRootsRequest(), types.ListRootsResult)

    async def list_prompts(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        return types.ListPromptsResult(prompts=[types.Prompt(
            name='greet', title='Greeting', description='Greet someone.',
            arguments=[types.PromptArgument(name='name', description='Who', required=True)])])

    async def get_prompt(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types
        from mcp import MCPError

        if params.name != 'greet':
            raise MCPError(types.INVALID_PARAMS, f'Unknown prompt {params.name}')
        who = (params.arguments or {}).get('name', 'nobody')
        return types.GetPromptResult(description='A greeting', messages=[types.PromptMessage(
            role='user', content=types.TextContent(text=f'Say hello to {who}.'))])

    async def list_resources(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        return types.ListResourcesResult(resources=[types.Resource(uri='memo://notes', name='notes',
                                                                   mime_type='text/plain')])

    async def list_templates(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        return types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
            uri_template='memo://notes/{id}', name='note', mime_type='text/plain')])

    async def read_resource(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types
        from mcp import MCPError

        uri = str(params.uri)
        if not uri.startswith('memo://'):
            raise MCPError(types.INVALID_PARAMS, f'No resource {uri}')
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type='text/plain',
                                                                              text=f'the text of {uri}')])

    async def complete(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        names = [n for n in ('Ada', 'Alan', 'Grace') if n.startswith(params.argument.value)]
        return types.CompleteResult(completion=types.Completion(values=names, total=len(names)))


def _text(value: str, **extra: Any) -> Any:
    import mcp_types as types

    return types.CallToolResult(content=[types.TextContent(text=value)], **extra)


async def _questions(ctx: Any, params: Any, request: Any, result_type: Any) -> Any:
    """Ask the client: in an `InputRequiredResult` on 2026-07-28 connections, else as a request of the server."""
    import mcp_types as types
    from mcp.shared.message import ServerMessageMetadata
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        answer = (params.input_responses or {}).get('q')
        if answer is None:
            return types.InputRequiredResult(input_requests={'q': request}, request_state=params.name)
    else:
        answer = await ctx.session.send_request(request, result_type, metadata=ServerMessageMetadata(
            related_request_id=ctx.request_id))
    said = answer.model_dump(mode='json', by_alias=True, exclude_none=True)
    return _text(json.dumps(said), structured_content={'answer': said})


def sdk_server() -> Any:
    from mcp.server.lowlevel import NotificationOptions, Server
    from mcp.server.subscriptions import ListenHandler

    fixture = _Fixture()
    with warnings.catch_warnings():  # logging/setLevel is deprecated in 2026-07-28, and still served
        warnings.simplefilter('ignore')
        server = Server('gateway-upstream', version='1.0', instructions='Upstream test tools.',
                        on_list_tools=fixture.list_tools, on_call_tool=fixture.call_tool,
                        on_subscriptions_listen=ListenHandler(fixture.bus), on_list_prompts=fixture.list_prompts,
                        on_get_prompt=fixture.get_prompt, on_list_resources=fixture.list_resources,
                        on_list_resource_templates=fixture.list_templates, on_read_resource=fixture.read_resource,
                        on_completion=fixture.complete, on_set_logging_level=_set_level)
    return server, server.create_initialization_options(NotificationOptions(tools_changed=True))


async def _set_level(ctx: Any, params: Any) -> Any:
    import mcp_types as types

    return types.EmptyResult()


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
            reply['result'] = {'tools': [{'name': n, 'inputSchema': {'type': 'object'},
                                          'annotations': {'readOnlyHint': True}} for n in names]}
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
