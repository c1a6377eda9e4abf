"""Toolset resolution: mixed items, name rules, duplicates, lookup, dispatch, and the live views filtered /
prefixed / combined."""

from __future__ import annotations

import functools

import pytest

import toolweave
from toolweave import (
    DuplicateToolError,
    Tool,
    ToolCallContext,
    ToolNameError,
    Toolset,
    UnknownToolError,
    UserError,
    tool,
)
from toolweave.testing import FakeTool

pytestmark = pytest.mark.anyio


@tool
def search(query: str) -> str:
    """Search the web.

    Args:
        query: What to look for.
    """
    return f'results for {query}'


def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


class Calculator:
    def __init__(self) -> None:
        self.calls = 0

    @tool
    def add(self, a: int, b: int) -> int:
        """Add two integers."""
        self.calls += 1
        return a + b

    @tool
    def mul(self, a: int, b: int) -> int:
        """Multiply two integers."""
        self.calls += 1
        return a * b


class Plain:
    def helper(self) -> int:
        return 1


# --- resolution ------------------------------------------------------------------------------------------


async def test_mixed_items_resolve_to_one_tool_each_in_order() -> None:
    calc = Calculator()
    tools = Toolset([FakeTool('fake'), search, shout, calc])
    assert tools.names == ['fake', 'search', 'shout', 'add', 'mul']
    assert len(tools) == 5
    assert [t.name for t in tools] == tools.names
    assert all(isinstance(t, Tool) for t in tools.tools)
    assert (await tools.get('shout').call({'text': 'hi'})).output == 'HI'
    # annotated methods pass through bound to the object: its state changes
    assert (await tools.get('add').call('{"a": 2, "b": 3}')).value == 5
    assert calc.calls == 1


async def test_partial_and_lambda_functions_become_tools() -> None:
    def power(base: int, exponent: int) -> int:
        """Raise to a power."""
        result: int = base**exponent  # int ** int is typed Any (a negative exponent gives a float)
        return result

    tools = Toolset([functools.partial(power, exponent=2)])
    assert len(tools) == 1
    only = tools.tools[0]
    assert (await only.call({'base': 7})).value == 49


def test_empty_list_is_valid() -> None:
    tools = Toolset([])
    assert tools.names == []
    assert len(tools) == 0
    assert not tools
    assert tools.definitions() == []
    assert Toolset().names == []


def test_null_entry_names_its_index() -> None:
    with pytest.raises(UserError, match=r'^Tool at index 1 must not be null'):
        Toolset([FakeTool('a'), None])


def test_object_without_tool_methods_is_rejected_with_type_and_index() -> None:
    with pytest.raises(UserError) as info:
        Toolset([FakeTool('a'), Plain()])
    message = str(info.value)
    assert "Tool object of type 'Plain' is neither a Tool nor has @tool-decorated methods" in message
    assert 'index 1' in message


@pytest.mark.parametrize('bad', [42, 'search', b'x', 3.5, {'name': 'x'}])
def test_non_tool_values_are_rejected(bad: object) -> None:
    with pytest.raises(UserError, match='is neither a Tool nor has @tool-decorated methods'):
        Toolset([bad])


def test_a_class_instead_of_an_instance_says_to_instantiate() -> None:
    with pytest.raises(UserError, match=r'class Calculator, not an instance.*`Calculator\(\)`'):
        Toolset([Calculator])


@pytest.mark.parametrize('bad', ['search', FakeTool('x'), {'a': 1}, 42])
def test_items_must_be_a_list(bad: object) -> None:
    with pytest.raises(UserError, match='must be a list of tools'):
        Toolset(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize('name', ['web_search', 'calc2', '_x', 'web-search', 'a' * 64])
def test_valid_names(name: str) -> None:  # hyphens allowed
    assert Toolset([FakeTool(name)]).names == [name]


@pytest.mark.parametrize('name', ['', '  ', 'web search', 'a.b', '名前', 'a' * 65])
def test_invalid_names_fail_at_build_time(name: str) -> None:
    with pytest.raises(ToolNameError, match=r'\^\[A-Za-z0-9_-\]\{1,64\}\$'):
        Toolset([FakeTool(name)])


def test_invalid_function_name_fails_at_build_time() -> None:
    with pytest.raises(ToolNameError):
        Toolset([toolweave.tool(name='bad name')(shout)])


# --- duplicates ------------------------------------------------------------------------------------------


def test_duplicate_names_both_origins_and_the_fix() -> None:
    with pytest.raises(DuplicateToolError) as info:
        Toolset([FakeTool('add'), FakeTool('other'), Calculator()])
    message = str(info.value)
    assert message.startswith("Duplicate tool name: 'add'")
    assert "index 0 (FakeTool 'add')" in message
    assert "index 2 (method 'add' of Calculator object)" in message
    assert ".prefixed('x')" in message


def test_duplicate_function_names_the_function() -> None:
    with pytest.raises(DuplicateToolError) as info:
        Toolset([search, FakeTool('search')])
    assert 'index 0' in str(info.value)
    assert 'index 1' in str(info.value)


def test_same_tool_twice_is_a_duplicate() -> None:
    fake = FakeTool('twice')
    with pytest.raises(DuplicateToolError, match="'twice'"):
        Toolset([fake, fake])


def test_duplicate_through_a_nested_toolset() -> None:
    inner = Toolset([FakeTool('x')])
    with pytest.raises(DuplicateToolError, match='toolset'):
        Toolset([FakeTool('x'), inner])


def test_duplicate_error_is_a_user_error() -> None:
    assert issubclass(DuplicateToolError, UserError)


# --- lookup and dispatch ---------------------------------------------------------------------------------


def test_get_returns_the_same_tool_object() -> None:
    fake = FakeTool('a')
    tools = Toolset([fake])
    assert tools.get('a') is fake
    assert tools.find('a') is fake
    assert tools.find('missing') is None
    assert 'a' in tools
    assert 'b' not in tools
    assert 42 not in tools


def test_unknown_name_lists_available_names() -> None:
    tools = Toolset([FakeTool('search'), FakeTool('fetch')])
    with pytest.raises(UnknownToolError) as info:
        tools.get('serch')
    assert str(info.value) == "Unknown tool 'serch'. Available tools: search, fetch."
    assert info.value.available == ['search', 'fetch']
    assert isinstance(info.value, LookupError)


def test_unknown_name_in_empty_toolset() -> None:
    with pytest.raises(UnknownToolError, match=r'Available tools: \(none\)'):
        Toolset().get('x')


def test_unhashable_name_is_unknown_not_a_type_error() -> None:
    with pytest.raises(UnknownToolError):
        Toolset([FakeTool('a')]).get(['a'])  # type: ignore[arg-type]


async def test_dispatch_of_unknown_name_is_a_failure_result() -> None:
    tools = Toolset([FakeTool('search')])
    result = await tools.call('nope', '{}')
    assert not result.ok
    assert result.error is not None and result.error.startswith("Unknown tool 'nope'")
    assert result.text.startswith("Error: Unknown tool 'nope'")
    assert 'search' in result.error


async def test_dispatch_forwards_arguments_and_context() -> None:
    fake = FakeTool('echo', lambda args: args)
    tools = Toolset([fake])
    ctx = ToolCallContext.of(tenant='acme')
    result = await tools.call('echo', '{"q": 1}', ctx)
    assert result.value == {'q': 1}
    assert fake.calls[0].context is ctx
    await tools.call('echo')
    assert fake.calls[1].context is ToolCallContext.EMPTY


def test_add_registers_late_and_rejects_duplicates() -> None:  # plans over a live toolset rely on this
    tools = Toolset([FakeTool('a')])
    assert tools.add(FakeTool('b')) is tools
    assert tools.names == ['a', 'b']
    tools.add(shout)
    assert 'shout' in tools
    with pytest.raises(DuplicateToolError, match="'a'"):
        tools.add(FakeTool('a'))
    with pytest.raises(UserError, match='must not be null'):
        tools.add(None)


def test_definitions_in_order() -> None:
    tools = Toolset([FakeTool('a', description='first'), search])
    definitions = tools.definitions()
    assert [d.name for d in definitions] == ['a', 'search']
    assert definitions[0].description == 'first'
    assert definitions[1].parameters['required'] == ['query']


def test_origin_of_a_tool() -> None:
    tools = Toolset([FakeTool('a'), shout])
    assert tools.origin('a') == "index 0 (FakeTool 'a')"
    assert 'function' in tools.origin('shout') and 'shout' in tools.origin('shout')
    with pytest.raises(UnknownToolError):
        tools.origin('zzz')


def test_repr_lists_names() -> None:
    assert repr(Toolset([FakeTool('a'), FakeTool('b')])) == "Toolset(['a', 'b'])"


# --- derived toolsets ------------------------------------------------------------------------------------


def test_filtered_by_names_and_predicate() -> None:
    tools = Toolset([FakeTool('a'), FakeTool('b', description='keep'), FakeTool('c', description='keep')])
    assert tools.filtered(['c', 'a']).names == ['a', 'c']
    assert tools.filtered(lambda t: t.description == 'keep').names == ['b', 'c']
    assert tools.filtered([]).names == []
    assert tools.names == ['a', 'b', 'c']  # the original is unchanged
    with pytest.raises(UnknownToolError, match="'zzz'"):
        tools.filtered(['zzz'])
    with pytest.raises(UserError, match=r"\.filtered\(\['a'\]\)"):
        tools.filtered('a')


async def test_prefixed_renames_and_keeps_behaviour_and_context() -> None:
    fake = FakeTool('search', lambda args: {'got': args}, description='Search.')
    prefixed = Toolset([fake]).prefixed('web')
    assert prefixed.names == ['web_search']
    renamed = prefixed.get('web_search')
    assert renamed.definition.description == 'Search.'
    assert renamed.definition.parameters == fake.definition.parameters
    ctx = ToolCallContext.of(user='u1')
    result = await prefixed.call('web_search', {'q': 'x'}, ctx)
    assert result.value == {'got': {'q': 'x'}}
    assert fake.calls[0].context is ctx


def test_prefixed_rejects_bad_prefix_and_overlong_names() -> None:
    tools = Toolset([FakeTool('a' * 60)])
    with pytest.raises(ToolNameError):
        tools.prefixed('bad prefix')
    with pytest.raises(ToolNameError, match='longer than 64'):
        tools.prefixed('abcdef')


def test_prefixed_resolves_duplicates() -> None:
    left = Toolset([FakeTool('search')])
    right = Toolset([FakeTool('search')])
    with pytest.raises(DuplicateToolError):
        left.combined(right)
    assert left.combined(right.prefixed('x')).names == ['search', 'x_search']


def test_combined_keeps_order_and_accepts_lists() -> None:
    a = Toolset([FakeTool('a')])
    b = Toolset([FakeTool('b')])
    combined = a.combined(b, [FakeTool('c'), shout])
    assert combined.names == ['a', 'b', 'c', 'shout']
    assert a.names == ['a'] and b.names == ['b']
    assert a.combined().names == ['a']


def test_toolset_of_a_toolset_is_a_copy() -> None:
    original = Toolset([FakeTool('a')])
    copy = Toolset(original)
    copy.add(FakeTool('b'))
    assert original.names == ['a']
    assert copy.names == ['a', 'b']


def test_toolset_as_an_item_of_another() -> None:
    inner = Toolset([FakeTool('a'), FakeTool('b')])
    outer = Toolset([inner, FakeTool('c')])
    assert outer.names == ['a', 'b', 'c']
    assert outer.get('a') is inner.get('a')


# --- live views ------------------------------------------------------------------------------------------------


def test_views_read_their_toolsets_at_every_access() -> None:
    web, local = Toolset([FakeTool('search')]), Toolset([FakeTool('clock')])
    only_search = web.filtered(lambda t: t.name.startswith('se'))
    prefixed = web.prefixed('web')
    both = web.combined(local)
    web.add(FakeTool('send'))
    local.add(FakeTool('calendar'))
    assert only_search.names == ['search', 'send']
    assert prefixed.names == ['web_search', 'web_send'] and 'web_send' in prefixed
    assert both.names == ['search', 'send', 'clock', 'calendar']
    assert prefixed.get('web_send') is prefixed.get('web_send')  # each tool is wrapped once
    assert prefixed.find('search') is None and both.origin('calendar').startswith('combined() #1')


async def test_a_prefixed_view_calls_record_and_log_under_the_prefixed_name() -> None:
    from toolweave import use_metrics

    prefixed = Toolset([FakeTool('search', 'found')]).prefixed('web')
    with use_metrics() as metrics:
        assert (await prefixed.call('web_search')).output == 'found'
        assert (await prefixed.call('search')).error == "Unknown tool 'search'. Available tools: web_search."
    assert metrics.stats('web_search').calls == 1 and metrics.stats('search').calls == 0


def test_a_clash_that_appears_later_in_a_combined_view_is_reported_when_met() -> None:
    left, right = Toolset([FakeTool('a')]), Toolset([FakeTool('b')])
    both = left.combined(right)
    right.add(FakeTool('a'))
    with pytest.raises(DuplicateToolError, match=r"'a' comes from both combined\(\) #0 .* and #1"):
        both.names  # noqa: B018
    with pytest.raises(DuplicateToolError):
        both.get('a')


def test_a_view_cannot_be_added_to() -> None:
    view = Toolset([FakeTool('a')]).filtered(['a'])
    with pytest.raises(UserError, match='is a view of other toolsets'):
        view.add(FakeTool('b'))


def test_len_and_bool_never_run_a_loader_but_lookups_do() -> None:
    runs: list[int] = []

    def loader() -> list[object]:
        runs.append(1)
        return [FakeTool('search')]

    tools = Toolset([FakeTool('clock'), toolweave.ToolGroup('web', loader)])
    assert (len(tools), bool(tools), bool(Toolset([toolweave.ToolGroup('w', loader)])), runs) == (1, True, True, [])
    assert tools.prefixed('p').names == ['p_clock', 'p_search'] and runs == [1]
    assert len(tools) == 2
