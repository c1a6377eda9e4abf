"""The reference servers behind the gateway, everything relayed: `@modelcontextprotocol/server-everything` (whose
questions are requests of the server on connections with the initialize handshake, and whose research tool
requires task-augmented calls) and `@modelcontextprotocol/server-filesystem` (which asks the client for its roots),
read by the official SDK client in both protocol eras, in-process and through the `toolweave gateway` process over
stdio and streamable HTTP."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning

from toolweave.mcp import McpGateway

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
NODE = shutil.which('node')
TOOLWEAVE = shutil.which('toolweave', path=str(Path(sys.executable).parent)) or 'toolweave'
ERAS = ['auto', 'legacy']


def npm_server(package: str) -> Path | None:
    """The entry point of an npm MCP server in `.mcp-npm` (or `TOOLWEAVE_MCP_NPM_PREFIX`) or `.mcp-npm-extra`."""
    prefixes = [Path(os.environ.get('TOOLWEAVE_MCP_NPM_PREFIX', ROOT / '.mcp-npm')), ROOT / '.mcp-npm-extra']
    for prefix in prefixes:
        entry = prefix / 'node_modules/@modelcontextprotocol' / package / 'dist/index.js'
        if entry.is_file():
            return entry
    return None


EVERYTHING = npm_server('server-everything')
FILESYSTEM = npm_server('server-filesystem')
needs_everything = pytest.mark.skipif(NODE is None or EVERYTHING is None, reason=(
    'node or @modelcontextprotocol/server-everything is not installed: npm install --prefix .mcp-npm '
    '@modelcontextprotocol/server-everything'))
needs_filesystem = pytest.mark.skipif(NODE is None or FILESYSTEM is None, reason=(
    'node or @modelcontextprotocol/server-filesystem is not installed: npm install --prefix .mcp-npm-extra '
    '@modelcontextprotocol/server-filesystem'))


@pytest.fixture(scope='module')
def anyio_backend() -> str:
    return 'asyncio'


def everything() -> dict[str, Any]:
    assert NODE is not None and EVERYTHING is not None
    return {'command': NODE, 'args': [str(EVERYTHING), 'stdio']}


@pytest.fixture(scope='module')
async def gateway(anyio_backend: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpGateway]:
    if NODE is None or EVERYTHING is None:
        pytest.skip('node or @modelcontextprotocol/server-everything is not installed: npm install --prefix '
                    '.mcp-npm @modelcontextprotocol/server-everything')
    config = {'mcpServers': {'everything': everything()}}
    async with McpGateway(config, log_dir=tmp_path_factory.mktemp('logs')) as running:
        yield running


class Person:
    """A client's person and model: answers every question, records what was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def elicit(self, context: Any, params: Any) -> Any:
        self.asked.append(params.message)
        if params.message.startswith('Allow this'):
            return types.ElicitResult(action='accept', content={'approve': True})
        return types.ElicitResult(action='accept', content={'name': 'Ada', 'interpretation': 'technical'})

    async def sample(self, context: Any, params: Any) -> Any:
        self.asked.append('sampling')
        return types.CreateMessageResult(role='assistant', content=types.TextContent(text='sampled!'), model='m')

    async def roots(self, context: Any) -> Any:
        self.asked.append('roots')
        return types.ListRootsResult(roots=[types.Root(uri=Path(tempfile.gettempdir()).as_uri(), name='tmp')])

    def callbacks(self) -> dict[str, Any]:
        return {'elicitation_callback': self.elicit, 'sampling_callback': self.sample,
                'list_roots_callback': self.roots}


def text_of(result: Any) -> str:
    return '\n'.join(block.text for block in result.content if isinstance(block, types.TextContent))


class Progress:
    def __init__(self) -> None:
        self.seen: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total, message))


async def relays_everything(client: Client, person: Person) -> None:
    """One round of every relay server-everything has, through `client` (the gateway's)."""
    elicited = await client.call_tool('trigger-elicitation-request', {})
    sampled = await client.call_tool('trigger-sampling-request', {'prompt': 'hi'})
    rooted = await client.call_tool('get-roots-list', {})
    progress = Progress()
    long = await client.call_tool('trigger-long-running-operation', {'duration': 0.3, 'steps': 3},
                                  progress_callback=progress)
    assert 'Name: Ada' in text_of(elicited) and '"text": "sampled!"' in text_of(sampled)
    assert 'URI: file://' in text_of(rooted) and 'Duration: 0.3 seconds, Steps: 3' in text_of(long)
    assert progress.seen == [(1.0, 3.0, None), (2.0, 3.0, None), (3.0, 3.0, None)]
    # server-everything asks for roots once per connection, when it likes, and keeps them.
    assert {'Please provide inputs for the following fields:', 'sampling'} <= set(person.asked)


async def task_tool(client: Client, person: Person) -> None:
    """The research tool requires task-augmented calls: the gateway makes them, and its question (in
    `input_required`) reaches the person."""
    progress = Progress()
    report = await client.call_tool('simulate-research-query', {'topic': 'python', 'ambiguous': True},
                                    progress_callback=progress)
    assert not report.is_error and text_of(report).startswith('# Research Report: python (technical)')
    assert person.asked[-1].startswith('The research query "python" could have multiple interpretations.')
    # The task's status messages, polled (so a short-lived one may be missed), are the call's progress.
    messages = [message for _, _, message in progress.seen]
    assert messages[0] == 'Gathering sources...' and 'Generating report...' in messages


async def prompts_and_resources(client: Client) -> None:
    prompts = [prompt.name for prompt in (await client.list_prompts()).prompts]
    resources = (await client.list_resources()).resources
    templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
    args = await client.get_prompt('args-prompt', {'city': 'Paris', 'state': 'Texas'})
    links = await client.call_tool('get-resource-links', {'count': 2})
    link = next(block for block in links.content if isinstance(block, types.ResourceLink))
    linked = await client.read_resource(str(link.uri))
    static = await client.read_resource(str(resources[0].uri))
    completed = await client.complete(types.PromptReference(name='completable-prompt'),
                                      {'name': 'department', 'value': 'E'})
    assert prompts == ['simple-prompt', 'args-prompt', 'completable-prompt', 'resource-prompt']
    assert len(resources) == 7 and templates == ['demo://resource/dynamic/text/{resourceId}',
                                                 'demo://resource/dynamic/blob/{resourceId}']
    assert isinstance(args.messages[0].content, types.TextContent) and 'Paris' in args.messages[0].content.text
    assert str(linked.contents[0].uri) == str(link.uri) and static.contents[0].uri == resources[0].uri
    assert completed.completion.values == ['Engineering']


# in-process


@needs_everything
@pytest.mark.parametrize('mode', ERAS)
async def test_questions_progress_of_server_everything_reach_the_client(gateway: McpGateway, mode: str) -> None:
    person = Person()
    async with Client(gateway.server(), mode=mode, **person.callbacks()) as client:
        await relays_everything(client, person)


@needs_everything
async def test_a_tool_that_requires_tasks_is_called_as_a_task(gateway: McpGateway) -> None:
    """With the handshake here; with 2026-07-28 through the gateway process over HTTP (below)."""
    person = Person()
    async with Client(gateway.server(), mode='legacy', **person.callbacks()) as client:
        await task_tool(client, person)


@needs_everything
@pytest.mark.parametrize('mode', ERAS)
async def test_prompts_resources_links_and_completions_of_server_everything(gateway: McpGateway, mode: str) -> None:
    async with Client(gateway.server(), mode=mode) as client:
        await prompts_and_resources(client)


@needs_everything
async def test_a_question_with_calls_of_two_clients_in_flight_is_asked_of_neither(gateway: McpGateway) -> None:
    """server-everything's questions carry nothing that says which call they belong to: with calls of two clients
    in flight, the gateway refuses the question rather than show it to the wrong person."""
    first, second = Person(), Person()
    async with Client(gateway.server(), mode='legacy', **first.callbacks()) as a, \
            Client(gateway.server(), mode='legacy', **second.callbacks()) as b:
        async with anyio.create_task_group() as group:
            group.start_soon(a.call_tool, 'trigger-long-running-operation', {'duration': 2, 'steps': 2})
            await anyio.sleep(0.3)
            refused = await b.call_tool('trigger-elicitation-request', {})
    assert first.asked == [] and second.asked == []
    assert 'The gateway cannot tell which of its clients this elicitation/create request is for: requests of 2 ' \
           'clients are in flight on it.' in text_of(refused)


# through the gateway process


@contextmanager
def gateway_process(tmp_path: Path, servers: dict[str, Any], *extra: str) -> Iterator[tuple[Any, str | None]]:
    """`toolweave gateway` serving `servers`: stdio parameters, or the URL when `extra` asks for HTTP."""
    config = tmp_path / 'mcp.json'
    config.write_text(json.dumps({'mcpServers': servers}))
    args = ['gateway', '--config', str(config), '--log-dir', str(tmp_path / 'logs'), *extra]
    if '--http' not in extra:
        yield StdioServerParameters(command=TOOLWEAVE, args=args), None
        return
    process = subprocess.Popen([TOOLWEAVE, *args], stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert line.startswith('toolweave gateway: serving MCP at'), line
        yield None, line.rsplit(' ', 1)[1].strip()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert 'Traceback' not in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


@needs_everything
@pytest.mark.parametrize('mode', ERAS)
async def test_everything_relayed_through_the_gateway_process_over_stdio(tmp_path: Path, mode: str) -> None:
    person = Person()
    with gateway_process(tmp_path, {'everything': everything()}) as (parameters, _):
        async with Client(parameters, mode=mode, **person.callbacks()) as client:
            await relays_everything(client, person)
            await prompts_and_resources(client)


@needs_everything
async def test_everything_relayed_through_the_gateway_process_over_http(tmp_path: Path) -> None:
    """One gateway process serves a client of each protocol version (and stops cleanly on SIGTERM)."""
    with gateway_process(tmp_path, {'everything': everything()}, '--http', '127.0.0.1:0') as (_, url):
        assert url is not None
        for mode in ERAS:
            person = Person()
            async with Client(url, mode=mode, **person.callbacks()) as client:
                await relays_everything(client, person)
                await prompts_and_resources(client)
                if mode == 'auto':  # the task tool with 2026-07-28 (in-process: with the handshake)
                    await task_tool(client, person)


@needs_everything
async def test_log_messages_of_server_everything_reach_the_client_over_stdio(tmp_path: Path) -> None:
    logged: list[Any] = []

    async def log(params: Any) -> None:
        logged.append(params)

    with gateway_process(tmp_path, {'everything': everything()}) as (parameters, _):
        async with Client(parameters, mode='legacy', logging_callback=log) as client:
            with pytest.warns(MCPDeprecationWarning):
                await client.session.set_logging_level('debug')
            started = await client.call_tool('toggle-simulated-logging', {})
            with anyio.fail_after(15):
                while not logged:  # noqa: ASYNC110 - log messages arrive on their own
                    await anyio.sleep(0.05)
            await client.call_tool('toggle-simulated-logging', {})
    assert 'Started simulated, random-leveled logging' in text_of(started)
    assert logged[0].level in ('debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency')
    assert str(logged[0].data).endswith('message')


@needs_filesystem
async def test_server_filesystem_gets_the_clients_roots_through_the_gateway(tmp_path: Path) -> None:
    """server-filesystem asks for roots when its client says they changed: over stdio the gateway passes both on."""
    assert NODE is not None and FILESYSTEM is not None
    started_with, root = tmp_path / 'started', tmp_path / 'root'
    started_with.mkdir()
    root.mkdir()
    (root / 'hello.txt').write_text('hello from the root')

    async def roots(context: Any) -> Any:
        return types.ListRootsResult(roots=[types.Root(uri=root.as_uri(), name='root')])

    filesystem = {'command': NODE, 'args': [str(FILESYSTEM), str(started_with)]}
    with gateway_process(tmp_path, {'files': filesystem}) as (parameters, _):
        async with Client(parameters, mode='legacy', list_roots_callback=roots) as client:
            before = text_of(await client.call_tool('list_allowed_directories', {}))
            with pytest.warns(MCPDeprecationWarning):
                await client.send_roots_list_changed()
            with anyio.fail_after(15):
                while True:
                    after = text_of(await client.call_tool('list_allowed_directories', {}))
                    if str(root.resolve()) in after:
                        break
                    await anyio.sleep(0.05)
            read = await client.call_tool('read_text_file', {'path': str(root / 'hello.txt')})
    assert str(started_with.resolve()) in before and str(root.resolve()) not in before
    assert str(started_with.resolve()) not in after and text_of(read) == 'hello from the root'



@needs_everything
async def test_a_resource_subscription_is_passed_on_and_its_updates_come_back(gateway: McpGateway) -> None:
    updates: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))

    uri = 'demo://resource/static/document/architecture.md'
    async with Client(gateway.server(), mode='legacy', message_handler=on_message) as client:
        with pytest.warns(MCPDeprecationWarning):
            await client.subscribe_resource(uri)
        await client.call_tool('toggle-subscriber-updates', {})  # server-everything sends updates at once
        try:
            with anyio.fail_after(15):
                while not updates:  # noqa: ASYNC110 - notifications arrive on their own
                    await anyio.sleep(0.05)
        finally:
            await client.call_tool('toggle-subscriber-updates', {})
            with pytest.warns(MCPDeprecationWarning):
                await client.unsubscribe_resource(uri)
    assert updates[0] == uri
