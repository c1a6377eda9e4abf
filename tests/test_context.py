"""ToolCallContext: an immutable mapping, merging, the loop id, and how it reaches tool bodies and wrappers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from pydantic import BaseModel

from toolweave import (
    DelegatingTool,
    OneShotPerLoopTool,
    TextTool,
    Tool,
    ToolCallContext,
    Toolset,
    tool,
    with_description,
)
from toolweave.testing import FakeTool

pytestmark = pytest.mark.anyio


def test_empty_is_empty_and_get_gives_none() -> None:
    assert ToolCallContext.EMPTY.is_empty
    assert ToolCallContext.EMPTY.get('anything') is None
    assert len(ToolCallContext.EMPTY) == 0
    assert ToolCallContext.EMPTY.loop_id is None


def test_of_keeps_types_and_returns_the_empty_singleton() -> None:
    ctx = ToolCallContext.of(key='value', num=42)
    assert ctx['key'] == 'value'
    assert ctx['num'] == 42 and isinstance(ctx['num'], int)
    assert not ctx.is_empty
    assert ToolCallContext.of() is ToolCallContext.EMPTY
    assert ToolCallContext.of({}) is ToolCallContext.EMPTY
    assert ToolCallContext.of(None) is ToolCallContext.EMPTY
    assert ToolCallContext.of(ctx) is ctx
    assert ToolCallContext.of({'a': 1}, b=2).to_map() == {'a': 1, 'b': 2}


def test_lookup_contains_and_defaults() -> None:
    ctx = ToolCallContext.of(a=1, present='yes')
    assert ctx.get('missing') is None
    assert 'present' in ctx
    assert 'absent' not in ctx
    assert ctx.get_or_default('missing', 'fallback') == 'fallback'
    assert ctx.get_or_default('a', 99) == 1
    with pytest.raises(KeyError):
        ctx['missing']


def test_to_map_is_a_copy_and_the_context_is_immutable() -> None:
    ctx = ToolCallContext.of(tenant='acme')
    copy = ctx.to_map()
    copy['tenant'] = 'changed'
    copy['new'] = 1
    assert ctx.to_map() == {'tenant': 'acme'}
    with pytest.raises(TypeError):
        ctx['tenant'] = 'x'  # type: ignore[index]
    with pytest.raises(AttributeError):
        ctx.extra = 1  # type: ignore[attr-defined]


def test_constructor_copies_its_input() -> None:
    source = {'a': 1}
    ctx = ToolCallContext(source)
    source['a'] = 2
    assert ctx['a'] == 1


def test_reads_from_many_threads() -> None:
    ctx = ToolCallContext.of({f'k{i}': i for i in range(100)})
    errors: list[str] = []

    def read() -> None:
        for i in range(100):
            if ctx[f'k{i}'] != i:
                errors.append(f'k{i}')

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_merge_unions_and_the_argument_wins() -> None:
    merged = ToolCallContext.of(key='old', a=1).merge({'key': 'new', 'b': 2})
    assert merged.to_map() == {'key': 'new', 'a': 1, 'b': 2}
    assert ToolCallContext.of(key='old').merge(ToolCallContext.of(key='new'))['key'] == 'new'


def test_merge_with_empty_returns_the_other_side_itself() -> None:
    ctx = ToolCallContext.of(a=1)
    assert ctx.merge(ToolCallContext.EMPTY) is ctx
    assert ToolCallContext.EMPTY.merge(ctx) is ctx
    assert ctx.merge(None) is ctx
    assert ctx.merge({}) is ctx


def test_equality_hash_and_str() -> None:
    a = ToolCallContext.of(x=1, y='two')
    b = ToolCallContext({'y': 'two', 'x': 1})
    assert a == b
    assert hash(a) == hash(b)
    assert a != ToolCallContext.of(x=2, y='two')
    assert len({a, b}) == 1
    text = str(a)
    assert 'x' in text and '1' in text and 'y' in text and 'two' in text
    assert a != {'x': 1, 'y': 'two'}  # a context equals only a context


def test_unhashable_values_still_hash_consistently() -> None:
    a = ToolCallContext.of(items=[1, 2])
    b = ToolCallContext.of(items=[1, 2])
    assert a == b and hash(a) == hash(b)


def test_loop_id_key() -> None:
    assert ToolCallContext.of({'toolweave.loop_id': 7}).loop_id == '7'
    assert ToolCallContext.of(other=1).loop_id is None


async def test_every_call_through_a_toolset_sees_the_context() -> None:
    first, second = FakeTool('first'), FakeTool('second')
    tools = Toolset([first, second])
    ctx = ToolCallContext.of(key='value')
    await tools.call('first', '{}', ctx)
    await tools.call('second', '{}', ctx)
    assert first.calls[0].context['key'] == 'value'
    assert second.calls[0].context['key'] == 'value'
    await tools.get('first').call('{}')
    assert first.calls[1].context is ToolCallContext.EMPTY  # never None


async def test_context_aware_function_tool_gets_the_context() -> None:  # through a Toolset
    seen: list[Mapping[str, object]] = []

    @tool
    def whoami(ctx: ToolCallContext, greeting: str = 'hi') -> str:
        """Say who is calling."""
        seen.append(ctx)
        return f"{greeting} {ctx.get('user')}"

    tools = Toolset([whoami])
    assert 'ctx' not in tools.get('whoami').definition.parameters.get('properties', {})
    result = await tools.call('whoami', '{}', ToolCallContext.of(user='ann'))
    assert result.output == 'hi ann'
    assert (await tools.call('whoami', '{}')).output == 'hi None'
    assert seen[1] is ToolCallContext.EMPTY


@pytest.mark.parametrize(
    'decorate',
    [DelegatingTool, lambda t: with_description(t, 'x'), OneShotPerLoopTool,
     lambda t: Toolset([t]).prefixed('p').tools[0]],
)
async def test_decorators_forward_the_context_unchanged(decorate: Callable[[Tool], Tool]) -> None:
    fake = FakeTool('inner')
    decorated = decorate(fake)
    ctx = ToolCallContext.of(tenant='acme')
    await decorated.call('{}', ctx)
    assert fake.calls[0].context is ctx
    await decorated.call('{}')
    assert fake.calls[1].context is ToolCallContext.EMPTY


# --- one rule for where a function receives the context --------------------------------------------------------


class Query(BaseModel):
    q: str


async def test_one_rule_decides_which_handlers_receive_the_context() -> None:
    ctx = ToolCallContext.of(tenant='acme')
    seen: dict[str, object] = {}

    def required(args: dict[str, Any], context: ToolCallContext) -> str:
        seen['required'] = context
        return 'ok'

    def optional(args: dict[str, Any], extra: object = None) -> str:  # an optional parameter keeps its default
        seen['optional'] = extra
        return 'ok'

    def annotated(args: dict[str, Any], ctx: ToolCallContext | None = None) -> str:  # the annotation decides
        seen['annotated'] = ctx
        return 'ok'

    def keyword(args: dict[str, Any], *, context: ToolCallContext) -> str:
        seen['keyword'] = context
        return 'ok'

    for handler in (required, optional, annotated, keyword):
        await Tool.create(handler.__name__, 'd', handler).call('{}', ctx)
    assert seen == {'required': ctx, 'optional': None, 'annotated': ctx, 'keyword': ctx}

    texts: dict[str, object] = {}
    await TextTool.from_function('t1', 'd', lambda text, context: texts.setdefault('required', context)).call('x', ctx)
    await TextTool.from_function('t2', 'd', lambda text, extra=None: texts.setdefault('optional', extra)).call('x', ctx)
    assert texts == {'required': ctx, 'optional': None}


async def test_a_typed_handler_with_an_optional_context_gets_the_model() -> None:
    def lookup(query: Query, ctx: ToolCallContext | None = None) -> str:
        assert isinstance(query, Query)
        return f'{query.q}@{ctx.get("tenant") if ctx is not None else None}'

    created = Tool.create('lookup', 'Look up.', lookup)
    decorated = tool(lookup)
    for made in (created, decorated):
        result = await made.call('{"query": {"q": "x"}}' if made is decorated else '{"q": "x"}', {'tenant': 'acme'})
        assert result.output == 'x@acme', made


def test_the_loop_id_travels_beside_the_entries() -> None:
    ctx = ToolCallContext.of(tenant='acme').with_loop_id('turn-1')
    assert (dict(ctx), ctx.to_map(), ctx.loop_id, len(ctx)) == ({'tenant': 'acme'}, {'tenant': 'acme'}, 'turn-1', 1)
    assert 'toolweave.loop_id' not in ctx and repr(ctx) == "ToolCallContext({'tenant': 'acme'}, loop_id='turn-1')"
    assert ctx.merge({'locale': 'en'}).loop_id == 'turn-1'  # merging entries keeps the loop
    assert ToolCallContext.EMPTY.merge(ctx) is ctx and ToolCallContext.of(ctx) is ctx
    assert ctx.merge(ToolCallContext.EMPTY.with_loop_id('turn-2')).loop_id == 'turn-2'  # a later loop wins
    assert ctx != ToolCallContext.of(tenant='acme') and ctx == ToolCallContext.of(tenant='acme').with_loop_id('turn-1')
    assert not ToolCallContext.EMPTY.with_loop_id('x').is_empty
    assert ToolCallContext.of({'toolweave.loop_id': 'mine'}).loop_id == 'mine'  # a caller may still name its loop
