"""The MCP gateway, reached by the official `mcp` SDK client (in-process, in both protocol eras) in front of real
upstream servers started as subprocesses (our SDK and legacy fixtures, `mcp-server-time`, `mcp-server-git`):
listing and results passed through unchanged, plans across servers, search mode, name collisions, tool list
changes, approvals by elicitation, `_meta` forwarding, and servers that fail to start, crash or hang."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters

from gateway_upstream import AUDIO, IMAGE, SDK_TOOLS
from toolweave.mcp import Backoff, GatewayTool, McpGateway

pytestmark = pytest.mark.anyio

UPSTREAM = str(Path(__file__).with_name('gateway_upstream.py'))
BIN = Path(sys.executable).parent
TIME_SERVER = shutil.which('mcp-server-time', path=str(BIN))
GIT_SERVER = shutil.which('mcp-server-git', path=str(BIN))
FAST = Backoff(initial=0.05, maximum=0.2, stable=60.0, probe_timeout=1.0)
ERAS = ['auto', 'legacy']  # the SDK client's default negotiates 2026-07-28; 'legacy' uses the initialize handshake


def sdk(**options: Any) -> dict[str, Any]:
    return {'command': sys.executable, 'args': [UPSTREAM, 'sdk'], **({'toolweave': options} if options else {})}


def legacy(*tools: str, **options: Any) -> dict[str, Any]:
    return {'command': sys.executable, 'args': [UPSTREAM, 'legacy', *tools],
            **({'toolweave': options} if options else {})}


@asynccontextmanager
async def gateway_of(servers: dict[str, Any], log_dir: Path, **options: Any) -> AsyncIterator[McpGateway]:
    async with McpGateway({'mcpServers': servers, 'toolweave': options}, log_dir=log_dir, backoff=FAST) as gateway:
        yield gateway


@pytest.fixture(scope='module')
def anyio_backend() -> str:
    return 'asyncio'


@pytest.fixture(scope='module')
async def main(anyio_backend: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpGateway]:
    """alpha and gamma run the same fixture (every name collides); alpha may receive `tenantId`; time is
    mcp-server-time."""
    assert TIME_SERVER is not None, 'mcp-server-time is a dev dependency'
    servers = {'alpha': sdk(forwardContext=['tenantId'], timeout=2), 'gamma': sdk(),
               'time': {'command': TIME_SERVER, 'args': ['--local-timezone', 'UTC']}}
    async with gateway_of(servers, tmp_path_factory.mktemp('logs')) as gateway:
        yield gateway


@pytest.fixture(scope='module')
async def direct(anyio_backend: str) -> AsyncIterator[Client]:
    """The same upstream fixture, reached directly by the SDK client: what the gateway must pass on."""
    async with Client(StdioServerParameters(command=sys.executable, args=[UPSTREAM, 'sdk'])) as client:
        yield client


async def until(condition: Callable[[], bool], seconds: float = 20) -> None:
    """Wait for something the gateway does in the background (a restart, a relisting)."""
    with anyio.fail_after(seconds):
        while not condition():  # noqa: ASYNC110 - the state lives in the gateway; polling keeps the test honest
            await anyio.sleep(0.02)


def wire(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode='json')
    return dumped


# what clients see


@pytest.mark.parametrize('mode', ERAS)
async def test_tools_mode_lists_the_plan_tool_and_every_upstream_tool(main: McpGateway, mode: str) -> None:
    async with Client(main.server(), mode=mode) as client:
        listed = (await client.list_tools()).tools
        instructions = client.instructions
    names = [tool.name for tool in listed]
    assert names[0] == 'execute_tool_plan'
    assert {'alpha_echo', 'gamma_echo', 'alpha_wipe', 'get_current_time', 'convert_time'} <= set(names)
    assert 'echo' not in names  # two servers offer it: both are prefixed
    assert len(names) == 1 + 2 * len(SDK_TOOLS) + 2
    assert instructions is not None and '# Tool Planning' in instructions and 'Upstream test tools.' in instructions


@pytest.mark.parametrize('mode', ERAS)
async def test_listing_is_passed_through_unchanged(main: McpGateway, direct: Client, mode: str) -> None:
    upstream = {tool.name: wire(tool) for tool in (await direct.list_tools()).tools}
    async with Client(main.server(), mode=mode) as client:
        served = {tool.name: wire(tool) for tool in (await client.list_tools()).tools}
    for name, original in upstream.items():
        expected = {**original, 'name': f'alpha_{name}'}
        if '_meta' in original:  # the protocol's own keys describe one hop; the others pass
            expected['_meta'] = {k: v for k, v in original['_meta'].items() if not k.startswith('io.model')}
        assert served[f'alpha_{name}'] == expected
    assert served['alpha_add']['outputSchema'] == {'type': 'object', 'properties': {'sum': {'type': 'number'}},
                                                   'required': ['sum']}
    assert served['alpha_echo']['annotations'] == {'readOnlyHint': True, 'destructiveHint': False,
                                                   'idempotentHint': True}
    assert served['alpha_echo']['title'] == 'Echo'


@pytest.mark.parametrize('mode', ERAS)
@pytest.mark.parametrize(('tool', 'arguments'), [('media', {}), ('add', {'a': 2, 'b': 40}),
                                                 ('fail', {'message': 'quota exceeded'})])
async def test_results_are_passed_through_unchanged(main: McpGateway, direct: Client, mode: str, tool: str,
                                                    arguments: dict[str, Any]) -> None:
    original = wire(await direct.call_tool(tool, arguments))
    async with Client(main.server(), mode=mode) as client:
        served = wire(await client.call_tool(f'alpha_{tool}', arguments))
    for result in (original, served):
        result.pop('resultType', None)
        result['_meta'] = {k: v for k, v in result.get('_meta', {}).items() if not k.startswith('io.model')}
    assert served == original
    if tool == 'media':
        assert [block['type'] for block in served['content']] == ['text', 'image', 'audio', 'resource',
                                                                  'resource_link']
        assert (served['content'][1]['data'], served['content'][2]['data']) == (IMAGE, AUDIO)
        assert served['_meta'] == {'example.com/trace': 't-1'}


async def test_one_plan_mixes_two_servers_with_references(main: McpGateway) -> None:
    plan = {'steps': [
        {'id': 'now', 'tool': 'get_current_time', 'arguments': '{"timezone": "Asia/Tokyo"}'},
        {'id': 'say', 'tool': 'alpha_echo', 'arguments': '{"text": "Tokyo: {{$ref:now.datetime}}"}'},
        {'id': 'sum', 'tool': 'gamma_add', 'arguments': '{"a": 1, "b": 2}'},
        {'id': 'twice', 'tool': 'alpha_add', 'arguments': '{"a": "$ref:sum.sum", "b": "$ref:sum.sum"}'},
    ], 'output_steps': ['say', 'twice']}
    async with Client(main.server()) as client:
        result = await client.call_tool('execute_tool_plan', plan)
    assert not result.is_error
    assert result.structured_content is not None and result.structured_content['errors'] == {}
    said, twice = result.structured_content['results']['say'], result.structured_content['results']['twice']
    assert said.startswith('Tokyo: ') and said.endswith('+09:00') and twice == {'sum': 6}
    assert isinstance(result.content[0], types.TextContent) and json.loads(result.content[0].text)['twice'] == {
        'sum': 6}


async def test_a_plan_returns_the_images_audio_and_resources_of_its_output_steps(main: McpGateway) -> None:
    plan = {'steps': [{'id': 'm', 'tool': 'alpha_media', 'arguments': '{}'},
                      {'id': 'e', 'tool': 'alpha_echo', 'arguments': '{"text": "hi"}'}], 'output_steps': ['m', 'e']}
    async with Client(main.server()) as client:
        result = await client.call_tool('execute_tool_plan', plan)
    assert [block.type for block in result.content] == ['text', 'image', 'audio', 'resource', 'resource_link']
    assert isinstance(result.content[0], types.TextContent) and '[image image/png, 8 bytes]' in result.content[0].text


@pytest.mark.parametrize('mode', ERAS)
async def test_a_plan_is_an_error_result_only_when_every_output_step_failed(main: McpGateway, mode: str) -> None:
    failing = {'id': 'bad', 'tool': 'alpha_fail', 'arguments': '{"message": "quota exceeded"}'}
    working = {'id': 'ok', 'tool': 'alpha_echo', 'arguments': '{"text": "fine"}'}
    async with Client(main.server(), mode=mode) as client:
        mixed = await client.call_tool('execute_tool_plan', {'steps': [failing, working], 'output_steps': None})
        only_failed = await client.call_tool('execute_tool_plan', {'steps': [failing, working],
                                                                   'output_steps': ['bad']})
        invalid = await client.call_tool('execute_tool_plan', {'steps': [{'id': 'x', 'tool': 'nope',
                                                                          'arguments': '{}'}]})
    assert not mixed.is_error
    assert mixed.structured_content == {'results': {'ok': 'fine'}, 'errors': {'bad': 'quota exceeded'}}
    assert isinstance(mixed.content[0], types.TextContent)
    assert mixed.content[0].text.startswith('Plan completed with errors.') and 'bad: quota exceeded' in \
        mixed.content[0].text
    assert only_failed.is_error and only_failed.structured_content == {'results': {}, 'errors': {'bad':
                                                                                                 'quota exceeded'}}
    assert invalid.is_error and isinstance(invalid.content[0], types.TextContent)
    assert invalid.content[0].text.startswith(
        "Plan execution failed: steps[0] (id 'x'): Unknown tool 'nope' in step 'x'.")


async def test_unknown_tools_and_bad_arguments(main: McpGateway) -> None:
    async with Client(main.server()) as client:
        with pytest.raises(MCPError, match=r"Unknown tool 'echo'\. Available tools: execute_tool_plan, search_tools"):
            await client.call_tool('echo', {'text': 'x'})
        missing = await client.call_tool('alpha_add', {'a': 1})
    assert missing.is_error  # the upstream server's own answer, passed on


async def test_only_the_allowed_context_keys_travel_as_meta(main: McpGateway) -> None:
    meta: Any = {'tenantId': 'acme', 'apiKey': 'secret'}  # RequestParamsMeta: an open TypedDict mypy cannot read
    async with Client(main.server()) as client:
        allowed = await client.call_tool('alpha_meta_echo', {}, meta=meta)
        nothing = await client.call_tool('gamma_meta_echo', {}, meta=meta)
        in_plan = await client.call_tool('execute_tool_plan', {'steps': [
            {'id': 'a', 'tool': 'alpha_meta_echo', 'arguments': '{}'},
            {'id': 'g', 'tool': 'gamma_meta_echo', 'arguments': '{}'}], 'output_steps': None}, meta=meta)
    assert allowed.structured_content == {'meta': {'tenantId': 'acme'}}
    assert nothing.structured_content == {'meta': {}}
    assert in_plan.structured_content is not None
    assert in_plan.structured_content['results'] == {'a': {'meta': {'tenantId': 'acme'}}, 'g': {'meta': {}}}


# search mode


async def test_search_mode_lists_three_tools_that_never_change(tmp_path: Path) -> None:
    async with gateway_of({'alpha': sdk(), 'beta': legacy()}, tmp_path, mode='search') as gateway:
        async with Client(gateway.server()) as client:
            before = [tool.name for tool in (await client.list_tools()).tools]
            grown = await client.call_tool('alpha_grow', {})  # hidden tools can still be called
            await until(lambda: 'extra_1' in gateway.tools)
            after = [tool.name for tool in (await client.list_tools()).tools]
            found = await client.call_tool('search_tools', {'query': 'added by grow'})
            described = await client.call_tool('describe_tools', {'names': ['add', 'wipe', 'nope']})
            ran = await client.call_tool('execute_tool_plan', {'steps': [
                {'id': 'x', 'tool': 'extra_1', 'arguments': '{}'}], 'output_steps': None})
            no_match = await client.call_tool('search_tools', {'query': 'zebra'})
            bad = await client.call_tool('search_tools', {'query': ' '})
            bad_limit = await client.call_tool('search_tools', {'query': 'echo', 'limit': 0})
            no_names = await client.call_tool('describe_tools', {'names': []})
    assert before == after == ['search_tools', 'describe_tools', 'execute_tool_plan']
    assert isinstance(grown.content[0], types.TextContent) and grown.content[0].text == 'extra_1'
    assert found.structured_content is not None
    assert 'extra_1' in [row['name'] for row in found.structured_content['tools']]  # a tool added later is found
    assert described.structured_content is not None
    add, wipe = described.structured_content['add'], described.structured_content['wipe']
    assert add['output_schema'] == {'type': 'object', 'properties': {'sum': {'type': 'number'}}, 'required': ['sum']}
    assert add['input_schema']['required'] == ['a', 'b'] and add['server'] == 'alpha'
    assert wipe['hints'] == {'read_only': False, 'destructive': True} and wipe['requires_approval'] is True
    assert "Unknown tools: 'nope'" in described.structured_content['unknown']
    assert not ran.is_error and ran.structured_content == {'results': {'x': 'called extra_1'}, 'errors': {}}
    assert not no_match.is_error and isinstance(no_match.content[0], types.TextContent)
    assert no_match.content[0].text.startswith("No tool matches 'zebra'")
    assert bad.is_error and bad_limit.is_error and no_names.is_error
    assert isinstance(bad_limit.content[0], types.TextContent)
    assert bad_limit.content[0].text == '"limit" must be a whole number from 1 to 50, got 0.'


# names


async def test_prefix_always_and_custom_prefixes(tmp_path: Path) -> None:
    async with gateway_of({'alpha': sdk(prefix='a'), 'beta': legacy()}, tmp_path, prefixTools='always') as gateway:
        names = [tool.name for tool in gateway.listed()]
    assert {'a_echo', 'a_add', 'beta_echo', 'beta_grow'} <= set(names) and 'echo' not in names


async def test_allow_and_deny_lists(tmp_path: Path) -> None:
    servers = {'alpha': sdk(allowTools=['e*', 'ad*', 'w*'], denyTools=['wipe'])}
    async with gateway_of(servers, tmp_path) as gateway:
        names = [tool.name for tool in gateway.listed()]
        async with Client(gateway.server()) as client:
            with pytest.raises(MCPError, match="Unknown tool 'wipe'"):
                await client.call_tool('wipe', {'path': '/'})
    assert names == ['execute_tool_plan', 'echo', 'add']


# tool list changes


@pytest.mark.parametrize('upstream', ['sdk', 'legacy'])
async def test_upstream_tool_changes_are_followed_and_announced(tmp_path: Path, upstream: str) -> None:
    servers = {'up': sdk() if upstream == 'sdk' else legacy()}
    async with gateway_of(servers, tmp_path) as gateway:
        heard: list[str] = []

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                heard.append('legacy client')

        async with Client(gateway.server()) as modern, \
                Client(gateway.server(), mode='legacy', message_handler=on_message) as old:
            async with modern.listen(tools_list_changed=True) as subscription:
                await modern.call_tool('grow', {})
                with anyio.fail_after(10):
                    event = await subscription.__anext__()
                await until(lambda: bool(heard))
            names = [tool.name for tool in (await old.list_tools()).tools]
            called = await old.call_tool('extra_1', {})
    assert type(event).__name__ == 'ToolsListChanged' and heard == ['legacy client']
    assert 'extra_1' in names and not called.is_error


async def test_a_tool_the_server_drops_leaves_the_list_and_fails_clearly(tmp_path: Path) -> None:
    async with gateway_of({'up': legacy()}, tmp_path) as gateway:
        echo = gateway.tools.get('echo')
        assert isinstance(echo, GatewayTool)
        async with Client(gateway.server()) as client:
            await client.call_tool('shrink', {})
            await until(lambda: not echo.available)
            names = [tool.name for tool in (await client.list_tools()).tools]
            in_plan = await client.call_tool('execute_tool_plan', {'steps': [
                {'id': 'e', 'tool': 'echo', 'arguments': '{}'}], 'output_steps': None})
    assert 'echo' not in names and 'grow' in names
    assert in_plan.is_error and in_plan.structured_content is not None
    assert in_plan.structured_content['errors'] == {
        'e': "Tool 'echo' is no longer offered by MCP server 'up'. Pick another tool."}


async def test_upstream_names_never_hide_the_gateway_tools(tmp_path: Path) -> None:
    servers = {'odd': legacy('execute_tool_plan', 'search_tools', 'a.b')}
    async with gateway_of(servers, tmp_path, mode='search') as gateway:
        async with Client(gateway.server()) as client:
            hidden = await client.call_tool('odd_execute_tool_plan', {'x': 1})
            dotted = await client.call_tool('a_b', {'y': 2})
    assert {'odd_execute_tool_plan', 'odd_search_tools', 'a_b'} <= set(gateway.tools.names)
    assert isinstance(hidden.content[0], types.TextContent) and hidden.content[0].text == '{"x": 1}'
    assert isinstance(dotted.content[0], types.TextContent) and dotted.content[0].text == '{"y": 2}'


# timeouts, cancellation, concurrency


async def test_a_plan_that_runs_out_of_time_reports_its_unfinished_steps(tmp_path: Path) -> None:
    async with gateway_of({'alpha': sdk()}, tmp_path, planTimeout=0.5) as gateway:
        async with Client(gateway.server()) as client:
            result = await client.call_tool('execute_tool_plan', {'steps': [
                {'id': 'quick', 'tool': 'echo', 'arguments': '{"text": "done"}'},
                {'id': 'late', 'tool': 'slow', 'arguments': '{"seconds": 30}'}], 'output_steps': None})
            after = await client.call_tool('echo', {'text': 'still fine'})
    assert not result.is_error and result.structured_content is not None
    assert result.structured_content['results'] == {'quick': 'done'} and list(result.structured_content['errors']) == [
        'late']
    assert not after.is_error


async def test_a_cancelled_call_stops_and_the_gateway_stays_usable(main: McpGateway) -> None:
    async with Client(main.server()) as client:
        with anyio.move_on_after(0.3) as scope:
            await client.call_tool('alpha_slow', {'seconds': 30})
        after = await client.call_tool('alpha_echo', {'text': 'next'})
    assert scope.cancelled_caught and not after.is_error


async def test_plan_steps_on_one_server_run_in_parallel(main: McpGateway) -> None:
    plan = {'steps': [{'id': f's{i}', 'tool': 'alpha_slow', 'arguments': '{"seconds": 0.5}'} for i in range(4)],
            'output_steps': None}
    async with Client(main.server()) as client:
        started = anyio.current_time()
        result = await client.call_tool('execute_tool_plan', plan)
        elapsed = anyio.current_time() - started
    assert result.structured_content == {'results': {f's{i}': 'slept' for i in range(4)}, 'errors': {}}
    assert elapsed < 1.9  # four calls of 0.5 s, together (one after another: 2 s)


def http_upstream(port: str) -> tuple[subprocess.Popen[str], str]:
    """The SDK fixture over streamable HTTP in a subprocess, and its URL once it listens."""
    process = subprocess.Popen([sys.executable, UPSTREAM, 'http', port], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


async def test_an_http_server_that_goes_away_is_reached_again(tmp_path: Path) -> None:
    first, url = await anyio.to_thread.run_sync(http_upstream, '0')
    try:
        async with gateway_of({'web': {'url': url, 'headers': {'X-Trace': 't-1'}}}, tmp_path) as gateway:
            upstream = gateway.upstreams[0]
            async with Client(gateway.server()) as client:
                before = await client.call_tool('add', {'a': 1, 'b': 2})
                first.kill()
                first.wait()
                gone = await client.call_tool('add', {'a': 1, 'b': 2})
                port = url.rsplit(':', 1)[1].split('/')[0]
                second, _ = await anyio.to_thread.run_sync(http_upstream, port)
                try:
                    await until(lambda: upstream.state == 'up' and upstream.restarts > 0)
                    back = await client.call_tool('add', {'a': 2, 'b': 2})
                finally:
                    second.kill()
                    second.wait()
    finally:
        if first.poll() is None:
            first.kill()
    assert before.structured_content == {'sum': 3} and back.structured_content == {'sum': 4}
    assert gone.is_error and isinstance(gone.content[0], types.TextContent)
    assert gone.content[0].text == ("Tool 'add' of MCP server 'web' failed: the connection to the server is closed. "
                                    'The gateway connects to the server again; try again in a moment.')


# approvals


def answering(approve: bool | None, asked: list[str]) -> Any:
    async def elicit(context: Any, params: Any) -> Any:
        asked.append(params.message)
        if approve is None:
            return types.ElicitResult(action='cancel')
        return types.ElicitResult(action='accept', content={'approve': approve})
    return elicit


@pytest.mark.parametrize('mode', ERAS)
async def test_destructive_and_listed_tools_ask_the_client(main: McpGateway, mode: str) -> None:
    asked: list[str] = []
    async with Client(main.server(), mode=mode, elicitation_callback=answering(True, asked)) as client:
        wiped = await client.call_tool('alpha_wipe', {'path': '/tmp/x'})
        echoed = await client.call_tool('alpha_echo', {'text': 'no question'})
    assert not wiped.is_error and isinstance(wiped.content[0], types.TextContent)
    assert wiped.content[0].text == 'wiped /tmp/x' and not echoed.is_error
    assert asked == ['Allow this tool call?\n\nalpha_wipe: {"path":"/tmp/x"}']


@pytest.mark.parametrize('mode', ERAS)
@pytest.mark.parametrize(('answer', 'reason'), [(False, 'declined in the MCP client'),
                                                (None, 'dismissed in the MCP client')])
async def test_a_declined_approval_rejects_the_call(main: McpGateway, mode: str, answer: bool | None,
                                                    reason: str) -> None:
    asked: list[str] = []
    async with Client(main.server(), mode=mode, elicitation_callback=answering(answer, asked)) as client:
        result = await client.call_tool('alpha_wipe', {'path': '/'})
    assert result.is_error and isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == f'Rejected by reviewer: {{"path":"/"}} ({reason})'


@pytest.mark.parametrize('mode', ERAS)
async def test_a_plan_with_gated_steps_is_approved_whole_by_one_elicitation(main: McpGateway, mode: str) -> None:
    asked: list[Any] = []

    async def elicit(context: Any, params: Any) -> Any:
        asked.append(params)
        return types.ElicitResult(action='accept', content={'w1': True, 'w2': False})

    plan = {'steps': [{'id': 'w1', 'tool': 'alpha_wipe', 'arguments': '{"path": "/tmp/a"}'},
                      {'id': 'w2', 'tool': 'gamma_wipe', 'arguments': '{"path": "/keep"}'},
                      {'id': 'e', 'tool': 'alpha_echo', 'arguments': '{"text": "$ref:w1"}'}], 'output_steps': None}
    async with Client(main.server(), mode=mode, elicitation_callback=elicit) as client:
        result = await client.call_tool('execute_tool_plan', plan)
    (question,) = asked
    assert question.message == ('Allow this plan?\n\nPlan of 3 steps; 2 need approval (*):\n'
                                '* w1 (alpha_wipe) {"path":"/tmp/a"}\n* w2 (gamma_wipe) {"path":"/keep"}\n'
                                '  e (alpha_echo) {"text":"$ref:w1"} after w1')
    assert question.requested_schema['required'] == ['w1', 'w2']
    assert question.requested_schema['properties']['w1']['default'] is True
    assert not result.is_error and result.structured_content == {
        'results': {'w1': 'wiped /tmp/a', 'e': 'wiped /tmp/a'},
        'errors': {'w2': 'Rejected by reviewer: {"path":"/keep"} (declined in the MCP client)'}}


async def test_a_plan_travels_as_one_question_on_2026_connections(main: McpGateway) -> None:
    plan = {'steps': [{'id': f'w{i}', 'tool': 'alpha_wipe', 'arguments': f'{{"path": "/tmp/{i}"}}'}
                      for i in range(3)], 'output_steps': None}
    async with Client(main.server(), elicitation_callback=answering(True, [])) as client:  # it can be asked
        first = await client.session.call_tool('execute_tool_plan', plan, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.input_requests is not None
        assert len(first.input_requests) == 1 and first.request_state is not None  # the plan, asked whole
        with pytest.raises(MCPError, match=r"No request 'tools/call execute_tool_plan' is waiting for answers under "
                                           r'this request state'):
            await client.session.call_tool('execute_tool_plan', plan, request_state='forged',
                                           input_responses={})
        with pytest.raises(MCPError, match=r"No request 'tools/call alpha_echo' is waiting"):  # bound to its tool
            await client.session.call_tool('alpha_echo', {'text': 'x'}, request_state=first.request_state,
                                           input_responses={})
        answers: dict[str, Any] = {key: types.ElicitResult(action='accept', content={'w0': False, 'w1': False,
                                                                                     'w2': True})
                                   for key in first.input_requests}
        final = await client.session.call_tool('execute_tool_plan', plan, request_state=first.request_state,
                                               input_responses=answers, allow_input_required=True)
    assert isinstance(final, types.CallToolResult) and final.structured_content is not None
    assert len(final.structured_content['results']) == 1 and len(final.structured_content['errors']) == 2


async def test_clients_that_cannot_be_asked_get_the_fallback_policy(tmp_path: Path) -> None:
    servers = {'alpha': sdk(requireApproval=['echo']), 'beta': sdk(approvalFallback='allow')}
    async with gateway_of(servers, tmp_path) as gateway:
        async with Client(gateway.server()) as client:  # declares no elicitation support
            denied = await client.call_tool('alpha_echo', {'text': 'x'})
            allowed = await client.call_tool('beta_wipe', {'path': '/tmp/y'})
    assert denied.is_error and isinstance(denied.content[0], types.TextContent)
    assert "this MCP client cannot be asked: it does not support elicitation, and the server's approval fallback " \
           "is 'deny'" in denied.content[0].text
    assert not allowed.is_error


# robustness


async def test_a_crashed_server_is_restarted_and_the_others_keep_working(tmp_path: Path) -> None:
    async with gateway_of({'alpha': sdk(), 'beta': legacy()}, tmp_path) as gateway:
        alpha = gateway.upstreams[0]
        async with Client(gateway.server()) as client:
            died = await client.call_tool('alpha_die', {})
            other = await client.call_tool('beta_echo', {'x': 1})
            await until(lambda: alpha.state == 'up' and alpha.restarts == 1)
            again = await client.call_tool('alpha_echo', {'text': 'back'})
    assert died.is_error and isinstance(died.content[0], types.TextContent)
    assert died.content[0].text == ("Tool 'alpha_die' of MCP server 'alpha' failed: the connection to the server is "
                                    'closed. The gateway restarts the server; try again in a moment.')
    assert not other.is_error and not again.is_error
    log = (tmp_path / 'alpha.log').read_text()
    assert log.count("gateway upstream ['sdk'] starting") == 2 and 'attempt 2' in log


async def test_a_hung_server_is_restarted(tmp_path: Path) -> None:
    async with gateway_of({'alpha': sdk(timeout=0.5)}, tmp_path) as gateway:
        upstream = gateway.upstreams[0]
        async with Client(gateway.server()) as client:
            frozen = await client.call_tool('freeze', {})
            # Answered at its timeout: the probe (up to 1 s here) that finds the server hung runs afterwards.
            state_at_answer = upstream.state
            await until(lambda: upstream.restarts == 1 and upstream.state == 'up')
            after = await client.call_tool('echo', {'text': 'back'})
    assert isinstance(frozen.content[0], types.TextContent)
    assert frozen.content[0].text == "Tool 'freeze' of MCP server 'alpha' timed out after 0.5 s."
    assert state_at_answer == 'up' and not after.is_error
    assert upstream.reason == 'it stopped answering (a call timed out, then tools/list got no answer within 1 s)'


@pytest.mark.parametrize(('entry', 'reason'), [
    ({'command': '/nonexistent/mcp-server'}, "it could not be started: [Errno 2] No such file or directory: "
                                             "'/nonexistent/mcp-server'"),
    ({'command': sys.executable, 'args': ['-c', 'import sys; sys.exit(3)']}, 'it could not be started: '),
    ({'command': sys.executable, 'args': ['-c', 'import sys; sys.stdin.read()'], 'toolweave': {'startTimeout': 0.5}},
     'it could not be started: no answer to the handshake and tools/list within 0.5 s'),
])
async def test_a_server_that_cannot_start_is_retried_and_the_others_work(tmp_path: Path, entry: dict[str, Any],
                                                                         reason: str) -> None:
    async with gateway_of({'broken': entry, 'alpha': sdk()}, tmp_path) as gateway:
        broken = gateway.upstreams[0]
        async with Client(gateway.server()) as client:
            echoed = await client.call_tool('echo', {'text': 'still here'})
        await until(lambda: broken.failures >= 2)
        status, state = gateway.status()[0], broken.state
    assert not echoed.is_error and state in ('down', 'starting')
    assert status['server'] == 'broken' and status['tools'] == [] and status['reason'].startswith(reason)


async def test_leaving_the_gateway_stops_every_upstream_process(tmp_path: Path) -> None:
    before = set(_children())
    async with gateway_of({'alpha': sdk(), 'beta': legacy()}, tmp_path) as gateway:
        started = set(_children()) - before
        assert len(started) == 2
    assert all(upstream.state == 'stopped' for upstream in gateway.upstreams)
    assert not started & set(_children())


async def test_gateway_tools_keep_their_definition_current(main: McpGateway) -> None:
    tool = main.tools.get('alpha_wipe')
    assert isinstance(tool, GatewayTool) and tool.available and tool.mcp_name == 'wipe'
    metadata = tool.definition.metadata
    assert (metadata.destructive, metadata.read_only, metadata.requires_approval) == (True, False, True)
    assert main.tools.get('alpha_echo').definition.metadata.requires_approval is False


def _children() -> list[str]:
    found = subprocess.run(['pgrep', '-P', str(os.getpid())], capture_output=True, text=True).stdout
    return [pid for pid in found.split() if pid != str(os.getpid())]
