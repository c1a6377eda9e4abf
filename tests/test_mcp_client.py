"""MCP client: `McpToolset` over real stdio servers (our fixture server, `mcp-server-time`, the npm
`server-everything` when node and the package are installed), `McpToolFactory` lookups and selections
failures, timeouts, cancellation and a plan over MCP tools."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import AsyncIterator, Mapping
from datetime import datetime
from pathlib import Path

import anyio
import pytest

import toolweave
from mcp_server_fixture import LONG_NAME, raw_server
from toolweave import (
    RunError,
    ToolCallContext,
    ToolConfigurationError,
    ToolNameError,
    Toolset,
    UnknownToolError,
    UserError,
)
from toolweave.mcp import McpCallResult, McpTool, McpToolFactory, McpToolset
from toolweave.tools import LOOP_ID_KEY

pytestmark = pytest.mark.anyio

FIXTURE = str(Path(__file__).with_name('mcp_server_fixture.py'))
ROOT = Path(__file__).resolve().parent.parent
TIME_SERVER = shutil.which('mcp-server-time', path=str(Path(sys.executable).parent)) or shutil.which('mcp-server-time')
GIT_SERVER = shutil.which('mcp-server-git', path=str(Path(sys.executable).parent)) or shutil.which('mcp-server-git')
EVERYTHING = Path(os.environ.get('TOOLWEAVE_MCP_NPM_PREFIX', ROOT / '.mcp-npm')) / (
    'node_modules/@modelcontextprotocol/server-everything/dist/index.js')
NODE = shutil.which('node')


@pytest.fixture(scope='module')
def anyio_backend() -> str:
    return 'asyncio'


@pytest.fixture(scope='module')
async def fixture_tools(anyio_backend: str) -> AsyncIterator[McpToolset]:
    """One stdio session with our fixture server, shared by the module (starting Python + the SDK costs ~1 s)."""
    async with McpToolset.stdio(sys.executable, [FIXTURE, 'raw']) as tools:
        yield tools


# listing, names, definitions


async def test_lists_the_server_tools_as_a_toolset(fixture_tools: McpToolset) -> None:
    assert isinstance(fixture_tools, Toolset) and fixture_tools.connected
    assert fixture_tools.names[:5] == ['echo', 'add', 'fail', 'slow', 'meta_echo']
    echo = fixture_tools.get('echo')
    assert isinstance(echo, McpTool) and echo.mcp_name == 'echo'
    assert echo.definition.description == 'Echo the text back.'
    assert echo.definition.parameters == {'type': 'object', 'properties': {'text': {'type': 'string'}},
                                          'required': ['text']}
    assert echo.definition.metadata.extra['mcp_server'] == fixture_tools.label == 'python mcp_server_fixture.py'
    assert echo.definition.metadata.extra['annotations'] == {'read_only_hint': True}
    assert (echo.definition.metadata.read_only, echo.definition.metadata.destructive) == (True, None)
    assert echo.mcp_definition.name == 'echo' and echo.definition.metadata.extra['mcp_tool'] is echo.mcp_definition
    assert fixture_tools.get('add').definition.metadata.extra['output_schema']['properties'] == {
        'sum': {'type': 'number'}}


async def test_names_that_break_the_rule_are_adapted(fixture_tools: McpToolset) -> None:
    dotted = fixture_tools.required_tool_by_name('dotted_name')
    assert isinstance(dotted, McpTool) and dotted.mcp_name == 'dotted.name'
    long = fixture_tools.required_tool_by_name(LONG_NAME)
    assert len(long.name) == 64 and long.name.startswith(LONG_NAME[:55] + '_')
    # the server still gets its own name
    assert (await dotted.call({})).output == 'called dotted.name'
    assert (await long.call({})).output == f'called {LONG_NAME}'


async def test_reject_policy_refuses_bad_names() -> None:
    with pytest.raises(ToolNameError, match=r"tool named 'dotted\.name'.*invalid_names=\"adapt\""):
        async with McpToolset(raw_server(), invalid_names='reject'):
            pass


# lookups


async def test_tool_by_name(fixture_tools: McpToolset) -> None:
    assert fixture_tools.tool_by_name('echo') is fixture_tools.get('echo')
    assert fixture_tools.tool_by_name('dotted.name') is fixture_tools.get('dotted_name')  # the server's name works
    assert fixture_tools.tool_by_name('missing') is None


async def test_required_tool_by_name_lists_available_tools(fixture_tools: McpToolset) -> None:
    with pytest.raises(ValueError, match=r"^MCP tool 'missing' not found\. Available: echo, add, fail,") as info:
        fixture_tools.required_tool_by_name('missing')
    assert isinstance(info.value, UnknownToolError)


# calls and results


async def test_text_result(fixture_tools: McpToolset) -> None:
    result = await fixture_tools.get('echo').call({'text': 'hello'})
    assert (result.ok, result.output, result.has_value) == (True, 'hello', False)
    assert (await fixture_tools.call('echo', '{"text": "by name"}')).output == 'by name'


async def test_structured_content_becomes_the_value(fixture_tools: McpToolset) -> None:
    result = await fixture_tools.get('add').call('{"a": 2, "b": 3.5}')
    assert result.ok and result.value == {'sum': 5.5} and json.loads(result.output) == {'sum': 5.5}
    assert isinstance(result, McpCallResult) and result.mcp.structured_content == {'sum': 5.5}  # as received


async def test_a_stdio_servers_stderr_can_go_to_a_file(tmp_path: Path) -> None:
    log = tmp_path / 'server.log'
    with log.open('a') as errlog:
        async with McpToolset.stdio(sys.executable, [FIXTURE, 'raw', '--say-hello'], errlog=errlog) as tools:
            assert 'echo' in tools.names
    assert log.read_text() == 'fixture server starting\n'


async def test_is_error_becomes_a_failure(fixture_tools: McpToolset) -> None:
    result = await fixture_tools.get('fail').call({'message': 'quota exceeded'})
    assert (result.ok, result.error, result.text) == (False, 'quota exceeded', 'Error: quota exceeded')


async def test_server_exception_becomes_a_failure_that_names_tool_and_server(fixture_tools: McpToolset) -> None:
    result = await fixture_tools.get('crash').call({})
    assert result.error == ("MCP tool 'crash' on server python mcp_server_fixture.py failed: Internal server error "
                            '(MCP error -32603).')
    assert (await fixture_tools.get('echo').call({'text': 'still up'})).output == 'still up'


async def test_non_text_content_is_described_not_pasted(fixture_tools: McpToolset) -> None:
    result = await fixture_tools.get('image').call({})
    assert result.output == '[image image/png, 8 bytes]\na tiny picture'


async def test_huge_output_arrives_whole(fixture_tools: McpToolset) -> None:
    result = await fixture_tools.get('huge').call({'n': 300_000})
    assert result.ok and len(result.output) == 300_000


@pytest.mark.parametrize(('arguments', 'message'), [
    ('{"text": ', "Invalid JSON arguments for tool 'echo'"),
    ('[1, 2]', "Arguments for tool 'echo' must be a JSON object, got list"),
    ('"text"', "Arguments for tool 'echo' must be a JSON object, got str"),
])
async def test_bad_arguments_fail_before_reaching_the_server(fixture_tools: McpToolset, arguments: str,
                                                             message: str) -> None:
    result = await fixture_tools.get('echo').call(arguments)
    assert not result.ok and result.error is not None and result.error.startswith(message)


async def test_unknown_tool_by_name_is_a_failure_the_model_can_read(fixture_tools: McpToolset) -> None:
    result = await fixture_tools.call('ehco', {})
    assert result.error is not None and result.error.startswith("Unknown tool 'ehco'. Available tools: echo, add")


async def test_context_travels_as_meta_over_stdio(fixture_tools: McpToolset) -> None:
    result = await fixture_tools.get('meta_echo').call({}, ToolCallContext.of(tenantId='acme', n=1))
    assert json.loads(result.output) == {'meta': {'tenantId': 'acme', 'n': 1}, 'has_meta': True}
    empty = await fixture_tools.get('meta_echo').call({})
    assert json.loads(empty.output)['meta'] == {}


# timeouts, cancellation, concurrency


async def test_cancel_scope_stops_a_hanging_call_and_the_session_stays_usable(fixture_tools: McpToolset) -> None:
    started = time.perf_counter()
    with anyio.move_on_after(0.3) as scope:
        await fixture_tools.get('slow').call({'seconds': 30})
    assert scope.cancelled_caught and time.perf_counter() - started < 3
    assert (await fixture_tools.get('echo').call({'text': 'next'})).output == 'next'


async def test_timeout_option_turns_a_hanging_call_into_a_failure(fixture_tools: McpToolset) -> None:
    fixture_tools.timeout = 0.3
    try:
        result = await fixture_tools.get('slow').call({'seconds': 30})
    finally:
        fixture_tools.timeout = None
    assert result.error == "MCP tool 'slow' on server python mcp_server_fixture.py timed out after 0.3 s."


async def test_calls_over_one_session_run_concurrently(fixture_tools: McpToolset) -> None:
    results: list[str] = []

    async def nap() -> None:
        results.append((await fixture_tools.get('slow').call({'seconds': 0.5})).output)

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(3):
            group.start_soon(nap)
    assert results == ['slept'] * 3 and time.perf_counter() - started < 1.4  # 3 x 0.5 s, not 1.5 s


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_works_on_both_backends(anyio_backend: str) -> None:
    async with McpToolset(raw_server()) as in_process, McpToolset.stdio(sys.executable, [FIXTURE, 'tiny']) as tiny:
        outputs: list[str] = []

        async def call(tools: McpToolset, name: str, arguments: Mapping[str, object]) -> None:
            outputs.append((await tools.get(name).call(arguments)).output)

        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(call, in_process, 'slow', {'seconds': 0.3})
            group.start_soon(call, tiny, 'echo', {'n': 1})
        with anyio.move_on_after(0.2) as scope:
            await tiny.get('hang').call({})
    assert sorted(outputs) == ['slept', 'slept', 'slept', '{"n": 1}'] and scope.cancelled_caught
    assert time.perf_counter() - started < 1.5


async def test_server_death_fails_calls_and_the_block_still_closes() -> None:
    async with McpToolset.stdio(sys.executable, [FIXTURE, 'tiny'], label='tiny') as tools:
        assert (await tools.get('echo').call({'x': 1})).output == '{"x": 1}'  # auto mode fell back to the handshake
        async with anyio.create_task_group() as group:  # a call hanging in another task when the server dies
            hanging: list[str | None] = []

            async def hang() -> None:
                hanging.append((await tools.get('hang').call({})).error)

            group.start_soon(hang)
            await anyio.sleep(0.1)
            died = await tools.get('die').call({})
        after = await tools.get('echo').call({'text': 'anyone?'})
        closing = time.perf_counter()
    assert time.perf_counter() - closing < 5
    closed = "MCP tool '{}' on server tiny failed: the connection to the server is closed."
    assert (died.error, hanging, after.error) == (closed.format('die'), [closed.format('hang')], closed.format('echo'))


# the block's life cycle and connection errors


async def test_calling_after_the_block_is_a_configuration_error() -> None:
    async with McpToolset(raw_server()) as tools:
        echo = tools.get('echo')
    with pytest.raises(ToolConfigurationError, match=r"MCP tool 'echo' was called while its server .* not connected"):
        await echo.call({'text': 'late'})
    with pytest.raises(UserError, match='already closed. Create a new McpToolset'):
        async with tools:
            pass


async def test_an_error_in_the_block_comes_out_unchanged() -> None:
    with pytest.raises(KeyError, match='mine'):
        async with McpToolset(raw_server()) as tools:
            assert tools.connected
            raise KeyError('mine')
    assert not tools.connected


@pytest.mark.parametrize(('command', 'args'), [
    ('/nonexistent/mcp-server', []),
    (sys.executable, ['-c', 'pass']),
    (sys.executable, ['-c', 'print("not json-rpc")']),
])
async def test_a_server_that_cannot_start_raises_run_error(command: str, args: list[str]) -> None:
    with pytest.raises(RunError, match=r'^Could not connect to MCP server '):
        async with McpToolset.stdio(command, args):
            pass


async def test_unreachable_http_server_raises_run_error() -> None:
    with pytest.raises(RunError, match=r'Could not connect to MCP server http://127\.0\.0\.1:9/mcp'):
        async with McpToolset.http('http://127.0.0.1:9/mcp'):
            pass


def test_bad_options_are_rejected_with_the_fix() -> None:
    with pytest.raises(UserError, match=r"Write `args=\['--x'\]`"):
        McpToolset.stdio('server', '--x')
    with pytest.raises(UserError, match='must start with http'):
        McpToolset.http('localhost:8000/mcp')
    with pytest.raises(UserError, match=r'timeout of McpToolset \(None: no limit\) must be a number of seconds > 0'):
        McpToolset(raw_server(), timeout=0)
    with pytest.raises(UserError, match="invalid_names of McpToolset must be 'adapt' or 'reject'"):
        McpToolset(raw_server(), invalid_names='rename')  # type: ignore[arg-type]
    with pytest.raises(UserError, match='McpToolset needs a server'):
        McpToolset(None)


# McpToolFactory: selections as toolsets


async def test_factory_lookups(fixture_tools: McpToolset) -> None:
    factory = McpToolFactory([fixture_tools])
    assert factory.tool_by_name('add') is fixture_tools.get('add')
    assert factory.tool_by_name('nope') is None
    with pytest.raises(ValueError, match=r"^MCP tool 'nope' not found\. Available: echo, add"):
        factory.required_tool_by_name('nope')


async def test_factory_selections(fixture_tools: McpToolset) -> None:
    factory = McpToolFactory([fixture_tools])
    assert factory.toolset_by_name(['add', 'echo', 'absent']).names == ['echo', 'add']  # exact, server order
    assert factory.matching('ech').names == ['echo', 'meta_echo']  # search, not full match
    assert factory.matching('^e', 'ai').names == ['echo', 'fail']
    assert factory.filtered(lambda t: 'number' in t.description.lower()).names == ['add']
    assert factory.toolset().names == fixture_tools.names
    selected = factory.matching('^add$')
    assert (await selected.get('add').call({'a': 1, 'b': 2})).value == {'sum': 3}


async def test_factory_without_clients_gives_empty_toolsets() -> None:
    factory = McpToolFactory()
    assert len(factory.toolset_by_name(['a'])) == 0 and len(factory.matching('.')) == 0
    assert len(factory.filtered(lambda t: True)) == 0 and factory.tool_by_name('a') is None
    with pytest.raises(ValueError, match=r"MCP tool 'a' not found\. Available: \(none\)"):
        factory.required_tool_by_name('a')


async def test_factory_facades(fixture_tools: McpToolset) -> None:
    factory = McpToolFactory([fixture_tools])
    by_name = factory.unfolding_by_name('math', 'Arithmetic. Invoke to see the tools.', {'add', 'absent'})
    matching = factory.unfolding_matching('echoes', 'Echo tools.', ['ech'], remove_on_invoke=False)  # ignored
    custom = factory.unfolding('failing', 'Tools that fail.', lambda t: t.name in ('fail', 'crash'))
    assert [t.name for t in by_name.inner_tools] == ['add']
    assert [t.name for t in matching.inner_tools] == ['echo', 'meta_echo']
    assert [t.name for t in custom.inner_tools] == ['fail', 'crash']
    assert (by_name.name, by_name.description) == ('math', 'Arithmetic. Invoke to see the tools.')
    assert (await by_name.call({})).output.startswith('Tools now available: add.')
    # a model that skips unfolding can call an inner MCP tool through the facade
    assert (await by_name.call({'add': {'a': 4, 'b': 5}})).value == {'sum': 9}


def test_factory_facades_without_clients_are_empty() -> None:
    facade = McpToolFactory().unfolding_matching('none', 'Nothing here.', '.*')
    assert facade.name == 'none' and facade.inner_tools == ()


def test_factory_rejects_bad_input() -> None:
    with pytest.raises(UserError, match='Invalid regular expression'):
        McpToolFactory().matching('(')
    with pytest.raises(UserError, match=r"Write `toolset_by_name\(\['echo'\]\)`"):
        McpToolFactory().toolset_by_name('echo')
    with pytest.raises(UserError, match='client at index 0 must be an McpToolset'):
        McpToolFactory(['server'])  # type: ignore[list-item]


async def test_factory_connects_and_closes_its_servers() -> None:
    first, second = McpToolset(raw_server()), McpToolset(raw_server())
    async with McpToolFactory([first, second]) as factory:
        assert first.connected and second.connected and len(factory.tools) == 2 * len(first.names)
        with pytest.raises(toolweave.DuplicateToolError):
            factory.toolset()
        combined = McpToolFactory([first, second.filtered(['echo']).prefixed('b')]).matching('^(b_)?echo$')
        assert combined.names == ['echo', 'b_echo']
        assert (await combined.get('b_echo').call({'text': 'via prefix'})).output == 'via prefix'
    # A tuple, not `not a and not b`: mypy keeps the `connected` narrowing from inside the block.
    assert (first.connected, second.connected) == (False, False)


# plans over MCP tools


async def test_a_plan_runs_over_mcp_tools(fixture_tools: McpToolset) -> None:
    plan = {'steps': [
        {'id': 'total', 'tool': 'add', 'arguments': {'a': 2, 'b': 3}},
        {'id': 'double', 'tool': 'add', 'arguments': {'a': '$ref:total.sum', 'b': '$ref:total.sum'}},
        {'id': 'say', 'tool': 'echo', 'arguments': {'text': 'sum={{$ref:double.sum}}'}},
        {'id': 'oops', 'tool': 'fail', 'arguments': {'message': 'nope'}},
    ], 'output_steps': ['say', 'oops']}
    run = await toolweave.run_plan(plan, fixture_tools, context={'tenantId': 'acme'})
    assert [s.status for s in run.steps] == ['succeeded', 'succeeded', 'succeeded', 'failed']
    assert run.step('double').value == {'sum': 10} and run.step('say').output == 'sum=10'
    assert run.step('oops').error == 'nope'


async def test_an_agent_calls_mcp_tools_and_its_context_travels_as_meta(fixture_tools: McpToolset) -> None:
    from toolweave.testing import ScriptedModel

    model = ScriptedModel([{'tool': 'meta_echo', 'arguments': {}}, {'tool': 'add', 'arguments': {'a': 1, 'b': 1}},
                           'done'])
    agent = toolweave.Agent(model, tools=fixture_tools, context={'tenantId': 'acme'})
    result = await agent.run('check the tenant')
    tool_messages = [m for m in result.messages if isinstance(m, toolweave.ToolMessage)]
    seen = json.loads(tool_messages[0].content)['meta']
    assert seen['tenantId'] == 'acme' and LOOP_ID_KEY not in seen  # what the caller configured, nothing more
    assert (result.output, tool_messages[1].content) == ('done', '{"sum": 2}')


# real servers from PyPI and npm


@pytest.mark.skipif(TIME_SERVER is None, reason='mcp-server-time is not installed (pip install mcp-server-time)')
async def test_mcp_server_time_over_stdio() -> None:
    assert TIME_SERVER is not None
    async with McpToolset.stdio(TIME_SERVER, ['--local-timezone', 'UTC']) as tools:
        assert {'get_current_time', 'convert_time'} <= set(tools.names)
        now = await tools.get('get_current_time').call({'timezone': 'Asia/Tokyo'})
        bad = await tools.get('get_current_time').call({'timezone': 'Mars/Olympus_Mons'})
        converted = await tools.get('convert_time').call(
            {'source_timezone': 'UTC', 'time': '12:00', 'target_timezone': 'Asia/Kolkata'})
    assert now.ok and now.value['timezone'] == 'Asia/Tokyo'
    assert datetime.fromisoformat(now.value['datetime']).utcoffset().total_seconds() == 9 * 3600  # type: ignore[union-attr]
    assert not bad.ok and 'Mars/Olympus_Mons' in (bad.error or '')
    assert converted.ok and converted.value['target']['datetime'].endswith('17:30:00+05:30')


@pytest.mark.skipif(GIT_SERVER is None or shutil.which('git') is None,
                    reason='mcp-server-git or git is not installed (pip install mcp-server-git)')
async def test_mcp_server_git_over_stdio(tmp_path: Path) -> None:
    assert GIT_SERVER is not None
    repo = tmp_path / 'repo'
    repo.mkdir()
    (repo / 'notes.txt').write_text('hello\n')
    env = {'GIT_AUTHOR_NAME': 'T', 'GIT_AUTHOR_EMAIL': 't@example.com', 'GIT_COMMITTER_NAME': 'T',
           'GIT_COMMITTER_EMAIL': 't@example.com'}
    await anyio.run_process(['git', 'init', '-q', str(repo)])
    async with McpToolset.stdio(GIT_SERVER, ['--repository', str(repo)], env=env) as git:
        assert {'git_status', 'git_add', 'git_commit', 'git_log'} <= set(git.names)
        where = {'repo_path': str(repo)}
        before = await git.get('git_status').call(where)
        added = await git.get('git_add').call({**where, 'files': ['notes.txt']})
        committed = await git.get('git_commit').call({**where, 'message': 'first note'})
        log = await git.get('git_log').call({**where, 'max_count': 1})
        outside = await git.get('git_log').call({'repo_path': str(tmp_path)})
    assert 'Untracked files' in before.output and 'notes.txt' in before.output
    assert added.ok and committed.ok and 'first note' in log.output
    assert not outside.ok and 'outside the allowed repository' in (outside.error or '')


@pytest.mark.skipif(NODE is None, reason='node is not installed')
@pytest.mark.skipif(not EVERYTHING.is_file(), reason=(
    f'@modelcontextprotocol/server-everything is not installed at {EVERYTHING} '
    '(npm install --prefix .mcp-npm @modelcontextprotocol/server-everything)'))
async def test_server_everything_over_stdio() -> None:
    assert NODE is not None
    async with McpToolset.stdio(NODE, [str(EVERYTHING), 'stdio']) as tools:
        assert {'echo', 'get-sum', 'get-tiny-image'} <= set(tools.names)  # hyphens follow the name rule
        echo = await tools.get('echo').call({'message': 'hi'}, {'tenantId': 'acme'})
        total = await tools.get('get-sum').call({'a': 2, 'b': 40})
        image = await tools.get('get-tiny-image').call({})
        bad = await tools.get('get-sum').call({'a': 'two'})
    assert echo.output == 'Echo: hi'
    assert total.ok and '42' in total.output
    assert image.ok and '[image image/png' in image.output
    assert not bad.ok
