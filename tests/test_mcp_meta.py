"""Context -> `_meta` converters, `_meta` -> context on the server side, and server tool names adapted to the
name rule."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_server_fixture import raw_server
from toolweave import ToolCallContext, ToolConfigurationError, UserError
from toolweave.mcp import McpMetaConverter, McpTool, McpToolset, context_from_meta, is_reserved_meta_key

pytestmark = pytest.mark.anyio

FULL = ToolCallContext.of(tenantId='acme', correlationId='c-1', apiKey='k', authToken='t')
converters = [
    McpMetaConverter.pass_through(), McpMetaConverter.no_op(), McpMetaConverter.allow_keys('tenantId'),
    McpMetaConverter.deny_keys('apiKey'), McpMetaConverter.of(lambda ctx: {'x': 1}),
]


# converters


def test_pass_through_sends_every_entry() -> None:
    assert McpMetaConverter.pass_through()(FULL) == FULL.to_map()


def test_no_op_sends_nothing() -> None:
    assert McpMetaConverter.no_op()(FULL) == {}


def test_allow_keys_keeps_only_present_listed_keys() -> None:
    converter = McpMetaConverter.allow_keys('tenantId', 'correlationId', 'absent')
    assert converter(FULL) == {'tenantId': 'acme', 'correlationId': 'c-1'}
    assert McpMetaConverter.allow_keys('nope')(FULL) == {}


def test_deny_keys_drops_listed_keys() -> None:
    assert McpMetaConverter.deny_keys('apiKey', 'authToken')(FULL) == {'tenantId': 'acme', 'correlationId': 'c-1'}
    assert McpMetaConverter.deny_keys(*FULL)(FULL) == {}


@pytest.mark.parametrize('converter', converters, ids=repr)
def test_every_converter_gives_nothing_for_empty(converter: McpMetaConverter) -> None:
    assert converter(ToolCallContext.EMPTY) == {}


@given(st.dictionaries(st.text(min_size=1, max_size=5), st.integers(), max_size=6), st.data())
def test_allow_equals_deny_of_the_complement(entries: dict[str, int], data: st.DataObject) -> None:
    keys = sorted(entries)
    allowed = data.draw(st.lists(st.sampled_from(keys), unique=True)) if keys else []
    ctx = ToolCallContext.of(entries)
    denied = [key for key in keys if key not in allowed]
    assert McpMetaConverter.allow_keys(*allowed)(ctx) == McpMetaConverter.deny_keys(*denied)(ctx)


def test_custom_function_receives_the_full_context() -> None:
    seen: list[ToolCallContext] = []

    def upper(ctx: ToolCallContext) -> dict[str, Any]:
        seen.append(ctx)
        return {key.upper(): value for key, value in ctx.items() if key != 'apiKey'}

    assert McpMetaConverter.of(upper)(FULL) == {'TENANTID': 'acme', 'CORRELATIONID': 'c-1', 'AUTHTOKEN': 't'}
    assert seen == [FULL]
    assert McpMetaConverter.of(lambda ctx: {})(FULL) == {}
    assert McpMetaConverter.of(lambda ctx: None)(FULL) == {}


def test_converter_that_returns_a_non_mapping_is_a_configuration_error() -> None:
    converter = McpMetaConverter.of(lambda ctx: ['tenantId'])  # type: ignore[arg-type,return-value]
    with pytest.raises(ToolConfigurationError, match='returned list'):
        converter(FULL)


def test_bad_converter_arguments_are_rejected_with_the_fix() -> None:
    with pytest.raises(UserError, match='must be strings'):
        McpMetaConverter.allow_keys(1)  # type: ignore[arg-type]
    with pytest.raises(UserError, match='must be callable'):
        McpMetaConverter.of('tenantId')  # type: ignore[arg-type]


def test_converters_are_thread_safe_to_share() -> None:  # read from any thread
    converter = McpMetaConverter.deny_keys('apiKey')
    results: list[dict[str, Any]] = []
    threads = [threading.Thread(target=lambda: results.append(converter(FULL))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [{'tenantId': 'acme', 'correlationId': 'c-1', 'authToken': 't'}] * 8


# server side: _meta -> ToolCallContext


def test_reserved_meta_keys_are_not_context() -> None:
    meta = {'tenant': 'acme', 'progressToken': 7, 'io.modelcontextprotocol/clientInfo': {'name': 'x'},
            'dev.mcp/flag': True, 'com.example/trace': 'abc'}
    assert context_from_meta(meta) == ToolCallContext.of(tenant='acme', **{'com.example/trace': 'abc'})
    assert context_from_meta(None) is ToolCallContext.EMPTY
    assert context_from_meta({'progressToken': 1}) is ToolCallContext.EMPTY
    assert [is_reserved_meta_key(k) for k in ('a/b', 'mcp/x', 'x.mcp.y/z', 'io.modelcontextprotocol/v')] == [
        False, False, True, True]


# over a real MCP session (in-process, both protocol eras)


async def meta_seen(toolset: McpToolset, context: ToolCallContext) -> dict[str, Any]:
    result = await toolset.get('meta_echo').call({}, context)
    assert result.ok, result.error
    return dict(json.loads(result.output))


@pytest.mark.parametrize('mode', ['legacy', 'auto'])
async def test_default_converter_sends_every_entry_as_meta(mode: Any) -> None:
    async with McpToolset(raw_server(), mode=mode) as tools:
        seen = await meta_seen(tools, ToolCallContext.of(tenantId='acme', attempt=2, tags=['a', 'b']))
    assert seen['meta'] == {'tenantId': 'acme', 'attempt': 2, 'tags': ['a', 'b']}


async def test_empty_context_calls_without_meta() -> None:  # the context-free path
    async with McpToolset(raw_server(), mode='legacy') as tools:
        assert await meta_seen(tools, ToolCallContext.EMPTY) == {'meta': {}, 'has_meta': False}
        # a converter that selects nothing is the same as an empty context
        tools.meta_converter = McpMetaConverter.allow_keys('absent')
        assert await meta_seen(tools, FULL) == {'meta': {}, 'has_meta': False}


async def test_toolset_converter_filters_what_travels() -> None:  # at the boundary
    async with McpToolset(raw_server(), meta_converter=McpMetaConverter.deny_keys('apiKey', 'authToken')) as tools:
        assert (await meta_seen(tools, FULL))['meta'] == {'tenantId': 'acme', 'correlationId': 'c-1'}
    custom = McpToolset(raw_server(), meta_converter=lambda ctx: {'tenant': ctx.get('tenantId')})
    async with custom as tools:
        assert (await meta_seen(tools, FULL))['meta'] == {'tenant': 'acme'}


async def test_context_value_that_is_not_json_is_a_configuration_error() -> None:
    async with McpToolset(raw_server()) as tools:
        with pytest.raises(ToolConfigurationError, match=r"Context entry 'db'.*deny_keys\('db'\)"):
            await tools.get('meta_echo').call({}, {'db': object()})


# server tool names at the MCP boundary (sync: hypothesis drives its own event loops)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=90), min_size=1, max_size=6, unique=True))
def test_adapted_names_always_follow_the_rule_and_stay_distinct(names: list[str]) -> None:
    import mcp_types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: object, params: object) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name=n, input_schema={'type': 'object'}) for n in names])

    async def adapted() -> tuple[list[str], list[str]]:
        async with McpToolset(Server('generated', on_list_tools=list_tools)) as tools:
            return tools.names, [t.mcp_name for t in tools.tools if isinstance(t, McpTool)]

    first, originals = anyio.run(adapted)
    assert originals == names and len(set(first)) == len(names)
    assert all(re.fullmatch(r'[A-Za-z0-9_-]{1,64}', name) for name in first)
    assert [a for a, n in zip(first, names, strict=True) if re.fullmatch(r'[A-Za-z0-9_-]{1,64}', n)] == [
        n for n in names if re.fullmatch(r'[A-Za-z0-9_-]{1,64}', n)]  # valid names are kept
    assert anyio.run(adapted)[0] == first  # the same server always gives the same names
