"""MCP server: a toolweave `Toolset` served over stdio (a real subprocess), streamable HTTP and in-process,
and read back with our own client: listing, schemas, calls, failures as `isError`, the context from `_meta`."""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import toolweave
from mcp_server_fixture import served_toolset
from toolweave import (
    CallbackReviewHandler,
    ExitEarly,
    ReviewDecision,
    ToolCallContext,
    ToolConfigurationError,
    Toolset,
    requires_approval,
    tool,
    use_review_handler,
)
from toolweave.mcp import McpToolset, mcp_server, serve_http, streamable_http_app

pytestmark = pytest.mark.anyio

FIXTURE = str(Path(__file__).with_name('mcp_server_fixture.py'))


@pytest.fixture(scope='module')
def anyio_backend() -> str:
    return 'asyncio'


@pytest.fixture(scope='module')
async def served(anyio_backend: str) -> AsyncIterator[McpToolset]:
    """`served_toolset()` behind `serve_stdio` in a subprocess, connected with `McpToolset.stdio`."""
    async with McpToolset.stdio(sys.executable, [FIXTURE, 'toolweave']) as tools:
        yield tools


# round trip over stdio


async def test_lists_the_same_tools_with_the_same_schemas(served: McpToolset) -> None:
    local = served_toolset()
    assert served.names == local.names == ['add', 'divide', 'profile', 'whoami', 'nap']
    for original, remote in zip(local.definitions(), served.definitions(), strict=True):
        assert remote.parameters == original.parameters
        assert remote.description == original.description
    # the context parameter never reaches the schema
    assert served.get('whoami').definition.parameters['properties'] == {}


async def test_a_call_returns_output_and_value(served: McpToolset) -> None:
    added = await served.get('add').call({'a': 2, 'b': 40})
    assert (added.ok, added.output, added.value) == (True, '42', 42)
    profile = await served.get('profile').call('{"name": "Ada"}')
    assert profile.value == {'name': 'Ada', 'length': 3} and profile.output == '{"name":"Ada","length":3}'


async def test_a_tool_failure_is_an_error_result(served: McpToolset) -> None:
    result = await served.get('divide').call({'a': 1, 'b': 0})
    assert (result.ok, result.error) == (False, 'float division by zero')


async def test_invalid_arguments_are_an_error_result(served: McpToolset) -> None:
    result = await served.get('add').call({'a': 'two'})
    assert result.error is not None and result.error.startswith("Invalid arguments for tool 'add'")
    assert 'b: Field required' in result.error


async def test_the_context_arrives_from_meta(served: McpToolset) -> None:  # end to end
    result = await served.get('whoami').call({}, ToolCallContext.of(tenantId='acme', attempt=2))
    assert result.value == {'tenantId': 'acme', 'attempt': 2}  # and no protocol keys
    assert (await served.get('whoami').call({})).value == {}


async def test_a_cancelled_call_leaves_the_server_usable(served: McpToolset) -> None:
    started = time.perf_counter()
    with anyio.move_on_after(0.2):
        await served.get('nap').call({'seconds': 30})
    assert time.perf_counter() - started < 3
    assert (await served.get('add').call({'a': 1, 'b': 1})).output == '2'


async def test_a_plan_over_served_tools(served: McpToolset) -> None:
    plan = {'steps': [
        {'id': 'x', 'tool': 'add', 'arguments': {'a': 1, 'b': 2}},
        {'id': 'y', 'tool': 'add', 'arguments': {'a': '$ref:x', 'b': 10}},
        {'id': 'who', 'tool': 'whoami', 'arguments': {}},
    ]}
    run = await toolweave.run_plan(plan, served, context={'tenantId': 'acme'})
    assert run.ok and run.step('y').value == 13 and run.step('who').value == {'tenantId': 'acme'}


# in-process: the SDK server object, protocol eras, errors the server must not die of


async def test_unknown_tool_is_a_protocol_error() -> None:
    from mcp import Client, MCPError

    async with Client(mcp_server(served_toolset())) as client:
        with pytest.raises(MCPError, match=r"Unknown tool 'nope'\. Available tools: add, divide"):
            await client.call_tool('nope', {})


async def test_legacy_protocol_sends_only_objects_as_structured_content() -> None:
    async with McpToolset(served_toolset(), mode='legacy') as tools:
        number = await tools.get('add').call({'a': 1, 'b': 2})
        obj = await tools.get('profile').call({'name': 'Bo'})
    assert (number.output, number.has_value) == ('3', False)  # a plan still reads 3 from the JSON text
    assert obj.value == {'name': 'Bo', 'length': 2}


async def test_a_function_list_is_served_too_with_name_and_instructions() -> None:
    server = mcp_server([served_toolset().get('add')], name='calc', instructions='Use add for sums.')
    async with McpToolset(server) as tools:
        assert tools.names == ['add'] and tools.label == 'calc' and tools.instructions == 'Use add for sums.'


@requires_approval
@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f'deleted {path}'


@tool
def misconfigured() -> str:
    """Raise a configuration error."""
    raise ToolConfigurationError('the tool is wired wrong')


@tool
def stop_now() -> str:
    """End the run."""
    raise ExitEarly('the task is done')


async def test_approval_gates_run_on_the_server_side() -> None:
    async def reviewer(request: Any) -> ReviewDecision:
        return ReviewDecision.reject('read-only today')

    with use_review_handler(CallbackReviewHandler(reviewer)):
        async with McpToolset(Toolset([delete_file])) as tools:
            rejected = await tools.get('delete_file').call({'path': '/tmp/x'})
    assert not rejected.ok and 'read-only today' in (rejected.error or '')


async def test_signals_and_configuration_errors_become_error_results_and_the_server_stays_up() -> None:
    async with McpToolset(Toolset([delete_file, stop_now, misconfigured, served_toolset().get('add')])) as tools:
        unreviewed = await tools.get('delete_file').call({'path': '/tmp/x'})  # this client cannot be asked
        broken = await tools.get('misconfigured').call({})
        stopped = await tools.get('stop_now').call({})
        after = await tools.get('add').call({'a': 2, 'b': 2})
    assert unreviewed.error == ('Rejected by reviewer: {"path":"/tmp/x"} (it needs approval, and this MCP client '
                                "cannot be asked: it does not support elicitation, and the server's approval "
                                "fallback is 'deny')")
    assert broken.error == 'ToolConfigurationError: the tool is wired wrong'
    assert stopped.error == 'ExitEarly: the task is done'
    assert after.output == '4'


# streamable HTTP


async def test_served_over_streamable_http() -> None:
    urls: list[str] = []
    listening = anyio.Event()

    def started(url: str) -> None:
        urls.append(url)
        listening.set()

    async with anyio.create_task_group() as group:
        group.start_soon(lambda: serve_http(served_toolset(), port=0, on_started=started))
        with anyio.fail_after(20):
            await listening.wait()
        async with McpToolset.http(urls[0]) as tools:
            added = await tools.get('add').call({'a': 20, 'b': 22})
            who = await tools.get('whoami').call({}, {'tenantId': 'acme'})
        async with McpToolset.http(urls[0], headers={'X-Trace': 't-1'}) as tools:
            assert tools.label == urls[0] and (await tools.get('add').call({'a': 1, 'b': 1})).output == '2'
        group.cancel_scope.cancel()
    assert urls[0].startswith('http://127.0.0.1:') and urls[0].endswith('/mcp')
    assert added.value == 42 and who.value == {'tenantId': 'acme'}


def test_streamable_http_app_is_an_asgi_app() -> None:
    app = streamable_http_app(served_toolset(), path='/tools')
    assert callable(app) and app.path == '/tools'


# plans and approvals asked of the client


async def test_tool_planning_serves_execute_tool_plan_next_to_the_tools() -> None:
    from mcp import Client

    async with Client(mcp_server(served_toolset(), tool_planning=True, instructions='Numbers.')) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        result = await client.call_tool('execute_tool_plan', {'steps': [
            {'id': 'x', 'tool': 'add', 'arguments': '{"a": 1, "b": 2}'},
            {'id': 'y', 'tool': 'divide', 'arguments': '{"a": "$ref:x", "b": 0}'},
            {'id': 'z', 'tool': 'profile', 'arguments': '{"name": "Ada"}'}], 'output_steps': ['y', 'z']})
        instructions = client.instructions
    assert names == ['execute_tool_plan', 'add', 'divide', 'profile', 'whoami', 'nap']
    assert instructions is not None and instructions.startswith('Numbers.\n\n# Tool Planning')
    assert not result.is_error and result.structured_content == {
        'results': {'z': {'name': 'Ada', 'length': 3}},
        'errors': {'y': 'Tool execution failed: float division by zero'}}


async def test_served_plans_shape_data_and_a_false_condition_is_no_error() -> None:
    from mcp import Client

    async with Client(mcp_server(served_toolset(), tool_planning=True)) as client:
        result = await client.call_tool('execute_tool_plan', {'steps': [
            {'id': 'names', 'tool': 'profile', 'for_each': ['Ada', 'Grace'], 'arguments': {'name': '$item'}},
            {'id': 'longest', 'from': '$ref:names', 'select': 'max_by(@, &length).name'},
            {'id': 'sum', 'tool': 'add', 'arguments': {'a': 1, 'b': 2},
             'when': {'from': '$ref:names', 'select': 'length(@) > `5`'}}], 'output_steps': ['longest', 'sum']})
    assert not result.is_error and result.structured_content == {'results': {'longest': 'Grace'}, 'errors': {}}


def test_tool_planning_refuses_a_toolset_that_already_has_the_name() -> None:
    from toolweave.testing import FakeTool

    with pytest.raises(toolweave.UserError, match=r"serves 'execute_tool_plan', and the toolset already has a tool "
                                                  r'of that name'):
        mcp_server([FakeTool('execute_tool_plan')], tool_planning=True)


@pytest.mark.parametrize('mode', ['auto', 'legacy'])
@pytest.mark.parametrize(('approve', 'output'), [(True, 'deleted /tmp/x'), (False, None)])
async def test_a_gated_tool_asks_the_client(mode: str, approve: bool, output: str | None) -> None:
    import mcp_types as types
    from mcp import Client

    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> Any:
        asked.append(params.message)
        return types.ElicitResult(action='accept', content={'approve': approve})

    async with Client(mcp_server([delete_file]), mode=mode, elicitation_callback=elicit) as client:
        result = await client.call_tool('delete_file', {'path': '/tmp/x'})
    assert asked == ['Allow this tool call?\n\ndelete_file: {"path":"/tmp/x"}']
    text = result.content[0].text if isinstance(result.content[0], types.TextContent) else None
    if output is None:
        assert result.is_error and text == 'Rejected by reviewer: {"path":"/tmp/x"} (declined in the MCP client)'
    else:
        assert not result.is_error and text == output


async def test_approval_fallback_allow_runs_gated_tools_for_clients_that_cannot_be_asked() -> None:
    async with McpToolset(mcp_server([delete_file], approval_fallback='allow')) as tools:
        result = await tools.get('delete_file').call({'path': '/tmp/x'})
    assert result.output == 'deleted /tmp/x'
    with pytest.raises(toolweave.UserError, match="approval_fallback must be 'deny' or 'allow', got 'ask'"):
        mcp_server([delete_file], approval_fallback='ask')  # type: ignore[arg-type]
