"""Decorators: DelegatingTool, with_description / with_note, OneShotPerLoopTool and LoopMemo, ArtifactSinkingTool
and sinks."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, cast

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolweave import (
    GLOBAL_METRICS,
    Agent,
    ArtifactSinkingTool,
    CompositeSink,
    DelegatingTool,
    ExitEarly,
    ListSink,
    LoopMemo,
    OneShotPerLoopTool,
    Sink,
    Tool,
    ToolCallContext,
    ToolConfigurationError,
    ToolMetadata,
    ToolResult,
    Toolset,
    UserError,
    tool,
    with_description,
    with_note,
)
from toolweave.testing import FakeTool, ScriptedModel

pytestmark = pytest.mark.anyio

LOOP = 'toolweave.loop_id'


def loop(loop_id: str) -> ToolCallContext:
    return ToolCallContext.of({LOOP: loop_id})


# --- DelegatingTool -------------------------------------------------------------------------------------


async def test_delegating_tool_forwards_call_and_definition() -> None:
    fake = FakeTool('calculator', 42, description='Adds.')
    wrapped = DelegatingTool(fake)
    assert wrapped.delegate is fake
    assert wrapped.definition is fake.definition
    assert wrapped.name == 'calculator'
    ctx = ToolCallContext.of(tenant='acme')
    result = await wrapped.call('{}', ctx)
    assert result.value == 42
    assert fake.calls[0].context is ctx  # the same object, unchanged
    assert fake.calls[0].arguments == '{}'


async def test_single_argument_call_routes_with_empty_context() -> None:
    fake = FakeTool('t')
    await DelegatingTool(fake).call('{}')
    assert fake.calls[0].context is ToolCallContext.EMPTY
    await DelegatingTool(fake).call('{}', {'k': 'v'})
    assert fake.calls[1].context == ToolCallContext.of(k='v')


async def test_delegating_tool_is_instrumented_once() -> None:
    fake = FakeTool('once')
    wrapped = with_note(with_description(DelegatingTool(fake), 'x'), 'y')
    await wrapped.call()
    assert GLOBAL_METRICS.stats('once').calls == 1


async def test_subclass_changes_one_thing() -> None:
    class Upper(DelegatingTool):
        async def execute(self, arguments: Any, context: ToolCallContext) -> ToolResult:
            result = await super().execute(arguments, context)
            return ToolResult.success(result.output.upper(), result.value)

    assert (await Upper(FakeTool('t', 'quiet')).call()).output == 'QUIET'


async def test_delegating_tool_execute_forwards_too() -> None:
    fake = FakeTool('t', 'body')
    assert (await DelegatingTool(fake).execute(None, ToolCallContext.EMPTY)).output == 'body'


async def test_decorators_let_control_flow_and_configuration_errors_through() -> None:
    with pytest.raises(ExitEarly):
        await OneShotPerLoopTool(FakeTool('t', raises=ExitEarly('stop'))).call()
    gated = FakeTool('gated', metadata=ToolMetadata(requires_approval=True))
    with pytest.raises(ToolConfigurationError):
        await DelegatingTool(gated).call('{}')


@pytest.mark.parametrize('bad', [None, 'search', 42, lambda: 1])
def test_delegate_must_be_a_tool(bad: object) -> None:
    with pytest.raises(UserError, match='must be a Tool'):
        DelegatingTool(bad)  # type: ignore[arg-type]


# --- with_description / with_note -----------------------------------------------------------------------


def calculator() -> Tool:
    schema = {'type': 'object', 'properties': {'x': {'type': 'integer'}}, 'required': []}
    return FakeTool('calculator', 42, description='Does math', parameters=schema,
                    metadata=ToolMetadata(return_direct=True))


async def test_with_description_keeps_everything_else() -> None:
    original = calculator()
    changed = with_description(original, 'X')
    assert changed.description == 'X'
    assert original.description == 'Does math'
    assert changed.name == 'calculator'
    assert changed.definition.parameters == original.definition.parameters
    assert changed.definition.metadata == original.definition.metadata
    assert (await changed.call('{}')).output == '42'


async def test_with_note_is_a_literal_join() -> None:
    assert with_note(calculator(), 'Fast').description == 'Does math. Fast'
    dotted = FakeTool('t', description='Ends with a dot.')
    assert with_note(dotted, 'More').description == 'Ends with a dot.. More'


async def test_doc_example_chain() -> None:
    chained = with_description(calculator(), 'Specialized math tool').with_note('Optimized for financial calculations')
    assert chained.description == 'Specialized math tool. Optimized for financial calculations'
    assert chained.name == 'calculator'
    assert (await chained.call('{}')).output == '42'
    assert chained.with_description('again').description == 'again'


def test_description_must_be_text() -> None:
    with pytest.raises(UserError, match="tool 'calculator'"):
        with_description(calculator(), None)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="tool 'calculator'"):
        with_note(calculator(), 3)  # type: ignore[arg-type]


# --- OneShotPerLoopTool ---------------------------------------------------------------------------------


async def test_first_call_in_a_loop_delegates() -> None:
    fake = FakeTool('skill', 'body:{}')
    one_shot = OneShotPerLoopTool(fake)
    result = await one_shot.call('{}', loop('loop-1'))
    assert result.output == 'body:{}'
    assert fake.call_count == 1


async def test_second_call_in_same_loop_short_circuits() -> None:
    fake = FakeTool('skill', 'body')
    one_shot = OneShotPerLoopTool(fake, advice='Use the skill text above.')
    await one_shot.call('{}', loop('loop-1'))
    second = await one_shot.call('{}', loop('loop-1'))
    assert fake.call_count == 1
    assert second.ok
    assert second.output == (
        "ALREADY LOADED. The body of 'skill' was returned earlier in this turn \u2014 read it from your conversation "
        'history above. Do not call this tool again. Use the skill text above.'
    )
    assert '\n' not in second.output
    assert 'ALREADY LOADED' in second.output and 'skill' in second.output


async def test_each_loop_delegates_once() -> None:
    fake = FakeTool('skill')
    one_shot = OneShotPerLoopTool(fake)
    for loop_id in ['loop-1', 'loop-2', 'loop-3']:
        await one_shot.call('{}', loop(loop_id))
    assert fake.call_count == 3


async def test_ten_calls_in_one_loop_delegate_once() -> None:
    fake = FakeTool('skill')
    one_shot = OneShotPerLoopTool(fake)
    for _ in range(10):
        await one_shot.call('{}', loop('same'))
    assert fake.call_count == 1


async def test_no_loop_id_passes_through() -> None:
    fake = FakeTool('skill')
    one_shot = OneShotPerLoopTool(fake)
    await one_shot.call('{}')
    await one_shot.call('{}', ToolCallContext.EMPTY)
    await one_shot.call('{}', {'other': 'key'})
    assert fake.call_count == 3


async def test_loop_id_key_and_context_passthrough() -> None:
    fake = FakeTool('skill')
    ctx = ToolCallContext.of({LOOP: 'L', 'tenant': 'acme'})
    assert ctx.loop_id == 'L'
    await OneShotPerLoopTool(fake).call('{}', ctx)
    assert fake.calls[0].context is ctx


def test_exposes_delegate_and_its_definition() -> None:
    fake = calculator()
    one_shot = OneShotPerLoopTool(fake)
    assert one_shot.delegate is fake
    assert one_shot.definition == fake.definition


@pytest.mark.parametrize('failing', [FakeTool('skill', fail='nope'), FakeTool('skill', raises=RuntimeError('boom'))])
async def test_loop_marked_before_delegate_runs(failing: FakeTool) -> None:
    one_shot = OneShotPerLoopTool(failing)
    first = await one_shot.call('{}', loop('L'))
    assert not first.ok
    second = await one_shot.call('{}', loop('L'))
    assert 'ALREADY LOADED' in second.output
    assert failing.call_count == 1


async def test_two_wrappers_keep_separate_memories() -> None:
    fake = FakeTool('skill')
    a, b = OneShotPerLoopTool(fake), OneShotPerLoopTool(fake)
    await a.call('{}', loop('L'))
    await b.call('{}', loop('L'))
    assert fake.call_count == 2


async def test_one_shot_inside_a_toolset_per_loop() -> None:  # through dispatch
    fake = FakeTool('skill')
    tools = Toolset([OneShotPerLoopTool(fake)])
    await tools.call('skill', '{}', loop('x'))
    assert 'ALREADY LOADED' in (await tools.call('skill', '{}', loop('x'))).output


def test_loop_memo_sequence() -> None:
    memo = LoopMemo()
    assert memo.first_call('x') is True
    assert memo.first_call('x') is False
    assert [memo.first_call(i) for i in ['a', 'b', 'a', 'b']] == [True, True, False, False]
    assert memo.first_call(None) is True
    assert memo.first_call(None) is True
    assert memo.first_call('fresh') is True  # no-id calls never polluted it


def test_loop_memo_capacity_evicts_by_first_insertion() -> None:
    assert LoopMemo().capacity == 1024
    memo = LoopMemo(capacity=2)
    assert [memo.first_call(i) for i in ['a', 'b']] == [True, True]
    assert memo.first_call('a') is False  # re-checking does not refresh 'a'
    assert memo.first_call('c') is True  # evicts 'a', the oldest by insertion
    assert memo.first_call('c') is False
    assert memo.first_call('a') is True
    assert len(memo) == 2


@pytest.mark.parametrize('capacity', [0, -1, 1.5, True, '3'])
def test_loop_memo_rejects_bad_capacity(capacity: object) -> None:
    with pytest.raises(UserError, match='capacity'):
        LoopMemo(capacity)  # type: ignore[arg-type]


def test_loop_memo_is_thread_safe() -> None:
    memo = LoopMemo()
    barrier = threading.Barrier(32)
    results: list[bool] = []

    def worker() -> None:
        barrier.wait()
        results.append(memo.first_call('same'))

    threads = [threading.Thread(target=worker) for _ in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(True) == 1
    assert len(results) == 32


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_concurrent_first_calls_delegate_once(anyio_backend: str) -> None:  # with tasks
    fake = FakeTool('skill', delay=0.01)
    one_shot = OneShotPerLoopTool(fake)
    outputs: list[str] = []

    async def one() -> None:
        outputs.append((await one_shot.call('{}', loop('L'))).output)

    async with anyio.create_task_group() as tg:
        for _ in range(32):
            tg.start_soon(one)
    assert fake.call_count == 1
    assert outputs.count('ok') == 1
    assert sum('ALREADY LOADED' in o for o in outputs) == 31


def test_one_shot_rejects_bad_advice() -> None:
    with pytest.raises(UserError, match='advice'):
        OneShotPerLoopTool(FakeTool('t'), advice=None)  # type: ignore[arg-type]


# --- ArtifactSinkingTool --------------------------------------------------------------------------------


class Animal:
    def __init__(self, name: str) -> None:
        self.name = name


class Dog(Animal):
    pass


@dataclass
class Person:
    name: str


async def test_passes_result_and_definition_through() -> None:
    fake = FakeTool('find', {'id': 1}, description='Find.', metadata=ToolMetadata(category='db'))
    sink = ListSink()
    sinking = ArtifactSinkingTool(fake, sink)
    direct = await fake.call('{}')
    through = await sinking.call('{}')
    assert through == direct
    assert sinking.definition == fake.definition
    assert sink.items() == [{'id': 1}]


async def test_failure_from_delegate_sinks_nothing() -> None:
    sink = ListSink()
    result = await ArtifactSinkingTool(FakeTool('t', raises=RuntimeError('boom')), sink).call()
    assert result.error == 'boom'
    assert sink.items() == []


async def test_control_flow_from_delegate_propagates_and_sinks_nothing() -> None:
    sink = ListSink()
    with pytest.raises(ExitEarly):
        await ArtifactSinkingTool(FakeTool('t', raises=ExitEarly('stop')), sink).call()
    assert sink.items() == []


@pytest.mark.parametrize(
    'fake', [FakeTool('t', 'plain text'), FakeTool('t', 42), FakeTool('t', True), FakeTool('t', fail='bad')]
)
async def test_only_artifacts_are_sunk(fake: FakeTool) -> None:
    sink = ListSink()
    await ArtifactSinkingTool(fake, sink).call()
    assert sink.items() == []


async def test_type_filter_matches_subtypes() -> None:
    dog = Dog('rex')
    sink = ListSink()
    await ArtifactSinkingTool(FakeTool('t', dog), sink, type=Animal).call()
    assert sink.items() == [dog]
    other = ListSink()
    await ArtifactSinkingTool(FakeTool('t', Animal('cat')), other, type=Dog).call()
    assert other.items() == []


async def test_filter_then_transform() -> None:
    seen: list[object] = []

    def to_person(animal: Animal) -> Person:
        seen.append(animal)
        return Person(animal.name)

    sink = ListSink()
    items = [Dog('a'), Animal('b'), 'text', Dog('c')]
    await ArtifactSinkingTool(FakeTool('t', items), sink, type=Dog, transform=to_person).call()
    assert sink.items() == [Person('a'), Person('c')]
    assert seen == [items[0], items[3]]  # the transform never saw rejected items


@pytest.mark.parametrize('container', [list, tuple, set, frozenset])
async def test_iterables_are_unwrapped(container: type) -> None:
    sink = ListSink()
    await ArtifactSinkingTool(FakeTool('t', container([1, 2])), sink, type=int).call()
    assert sorted(cast('list[int]', sink.items())) == [1, 2]  # `items()` is list[object]; these are the ints sunk


async def test_empty_iterable_sinks_nothing() -> None:
    sink = ListSink()
    await ArtifactSinkingTool(FakeTool('t', []), sink).call()
    assert sink.items() == []


async def test_mapping_is_one_artifact() -> None:  # a dict is not unwrapped into its keys
    sink = ListSink()
    await ArtifactSinkingTool(FakeTool('t', {'a': 1, 'b': 2}), sink, type=dict).call()
    assert sink.items() == [{'a': 1, 'b': 2}]


def test_list_sink_returns_a_copy() -> None:
    sink = ListSink()
    sink.accept(1)
    copy = sink.items()
    copy.append(2)
    assert sink.items() == [1]
    assert len(sink) == 1
    assert list(sink) == [1]
    sink.clear()
    assert sink.items() == []


def test_composite_sink_sends_to_every_sink_in_order() -> None:
    order: list[str] = []

    class Recording:
        def __init__(self, label: str) -> None:
            self.label = label

        def accept(self, item: object) -> None:
            order.append(f'{self.label}:{item}')

    first, second = Recording('a'), Recording('b')
    assert isinstance(first, Sink)
    CompositeSink(first, second).accept('x')
    assert order == ['a:x', 'b:x']
    CompositeSink().accept('dropped')  # an empty composite is fine


async def test_composite_through_the_tool() -> None:
    a, b = ListSink(), ListSink()
    await ArtifactSinkingTool(FakeTool('t', [{'k': 1}]), CompositeSink(a, b)).call()
    assert a.items() == b.items() == [{'k': 1}]


async def test_failing_transform_is_a_failure_that_says_so() -> None:
    def broken(item: object) -> object:
        raise ValueError('cannot convert')

    sink = ListSink()
    result = await ArtifactSinkingTool(FakeTool('find', [{'a': 1}]), sink, transform=broken).call()
    assert result.error is not None
    assert 'cannot convert' in result.error and "'find'" in result.error
    assert sink.items() == []


def test_bad_sink_type_and_transform_are_rejected() -> None:
    with pytest.raises(UserError, match='accept'):
        ArtifactSinkingTool(FakeTool('t'), object())  # type: ignore[arg-type]
    with pytest.raises(UserError, match='accept'):
        CompositeSink(ListSink(), 'nope')  # type: ignore[arg-type]
    with pytest.raises(UserError, match='class'):
        ArtifactSinkingTool(FakeTool('t'), ListSink(), type='dict')  # type: ignore[arg-type]
    with pytest.raises(UserError, match='class'):
        ArtifactSinkingTool(FakeTool('t'), ListSink(), type=())
    with pytest.raises(UserError, match='callable'):
        ArtifactSinkingTool(FakeTool('t'), ListSink(), transform='upper')  # type: ignore[arg-type]


async def test_function_tool_values_are_sunk() -> None:  # with a real function tool
    @tool
    def people() -> list[Person]:
        """List people."""
        return [Person('Ann'), Person('Bob')]

    sink = ListSink()
    result = await ArtifactSinkingTool(people, sink, type=Person).call('{}')
    assert result.output == '[{"name":"Ann"},{"name":"Bob"}]'
    assert sink.items() == [Person('Ann'), Person('Bob')]


def test_decorated_tools_repr() -> None:
    assert repr(DelegatingTool(FakeTool('t'))) == "DelegatingTool(FakeTool(name='t'))"



async def test_sink_configuration_error_propagates() -> None:  # the blackboard sink relies on it (no process -> raise)
    class Unwired:
        def accept(self, item: object) -> None:
            raise ToolConfigurationError('No AgentProcess available for BlackboardSink')

    with pytest.raises(ToolConfigurationError, match='No AgentProcess'):
        await ArtifactSinkingTool(FakeTool('t', {'a': 1}), Unwired()).call()


@given(capacity=st.integers(1, 5), ids=st.lists(st.sampled_from(['a', 'b', 'c', 'd', 'e', 'f', None]), max_size=60))
def test_loop_memo_matches_a_reference_model(capacity: int, ids: list[str | None]) -> None:
    memo = LoopMemo(capacity)
    remembered: list[str] = []  # insertion order; the oldest is evicted first
    for loop_id in ids:
        if loop_id is None:
            expected = True
        elif loop_id in remembered:
            expected = False
        else:
            expected = True
            remembered.append(loop_id)
            if len(remembered) > capacity:
                remembered.pop(0)
        assert memo.first_call(loop_id) is expected
    assert len(memo) == len(remembered)


# --- sink filters, sink targets, plain values as artifacts -------------------------------------------------------


async def test_the_filter_runs_after_the_type_check_and_before_the_transform() -> None:
    transformed: list[object] = []

    def name_of(animal: Animal) -> str:
        transformed.append(animal)
        return animal.name

    sink = ListSink()
    items = [Dog('rex'), Dog('fido'), Animal('cat'), 'text']
    result = await ArtifactSinkingTool(FakeTool('t', items), sink, type=Animal, filter=lambda a: a.name != 'fido',
                                       transform=name_of).call()
    assert result.ok and sink.items() == ['rex', 'cat']
    assert transformed == [items[0], items[2]]  # the transform never saw what the filter dropped


async def test_a_filter_alone_keeps_the_items_as_they_are() -> None:
    sink = ListSink()
    await ArtifactSinkingTool(FakeTool('t', [{'score': 0.9}, {'score': 0.2}]), sink,
                              filter=lambda hit: hit['score'] > 0.5).call()
    assert sink.items() == [{'score': 0.9}]


async def test_a_failing_filter_is_a_failure_that_names_it() -> None:
    def broken(item: object) -> bool:
        raise KeyError('score')

    sink = ListSink()
    result = await ArtifactSinkingTool(FakeTool('find', [{'a': 1}]), sink, filter=broken).call()
    assert result.error is not None and 'KeyError' in result.error and 'filter' in result.error
    assert sink.items() == []
    with pytest.raises(UserError, match='filter of ArtifactSinkingTool'):
        ArtifactSinkingTool(FakeTool('t'), ListSink(), filter='big')  # type: ignore[arg-type]


def test_a_list_sink_fills_the_list_it_is_given() -> None:
    found: list[Any] = ['already here']
    sink = ListSink(found)
    sink.accept(1)
    assert found == ['already here', 1] and sink.items() == ['already here', 1]
    with pytest.raises(UserError, match='ListSink fills a list'):
        ListSink('not a list')  # type: ignore[arg-type]


async def test_a_composite_sink_takes_its_sinks_as_a_list_too() -> None:
    a, b = ListSink(), ListSink()
    await ArtifactSinkingTool(FakeTool('t', [{'k': 1}]), CompositeSink([a, b])).call()
    assert a.items() == b.items() == [{'k': 1}]
    assert len(CompositeSink([]).sinks) == 0 and len(CompositeSink((a,)).sinks) == 1
    with pytest.raises(UserError, match='CompositeSink sink #1'):
        CompositeSink([a, 'nope'])  # type: ignore[list-item]


async def test_a_plain_value_given_as_the_result_value_is_an_artifact() -> None:
    @tool
    def capture() -> ToolResult:
        """Capture a page."""
        return ToolResult.success('content', 'captured')

    @tool
    def count() -> int:
        """Count things."""
        return 3

    @tool
    def keep_quiet() -> ToolResult:
        """Return a value that is not an artifact."""
        return ToolResult.success('3 rows', 3, artifact=False)

    sink = ListSink()
    for source in (capture, count, keep_quiet):
        await ArtifactSinkingTool(source, sink).call()
    assert sink.items() == ['captured']  # a returned number is a value, not an artifact
    assert (await count.call()).value == 3 and (await keep_quiet.call()).value == 3


async def test_one_shot_per_loop_in_agent_runs_whose_tools_see_only_their_configured_context() -> None:
    body = FakeTool('skill', 'long body')
    skill = OneShotPerLoopTool(body)
    agent = Agent(ScriptedModel([{'tool': 'skill', 'arguments': {}}, {'tool': 'skill', 'arguments': {}}, 'ok',
                                 {'tool': 'skill', 'arguments': {}}, 'ok']), tools=[skill])
    first = await agent.run('go')
    second = await agent.run('again')
    replies = [m.content or '' for r in (first, second) for m in r.messages if type(m).__name__ == 'ToolMessage']
    assert replies[0] == 'long body' and replies[1].startswith('ALREADY LOADED') and replies[2] == 'long body'
    assert body.call_count == 2 and all(dict(call.context) == {} for call in body.calls)
