"""Fake tools from `toolweave.testing`: every knob, exactly."""

from __future__ import annotations

import dataclasses
from time import perf_counter

import anyio
import pytest

from toolweave import ExitEarly, ToolCallContext, ToolMetadata, ToolResult, UserError
from toolweave.testing import FakeTool, concat_tool, echo_tool, huge_output, non_json_output

pytestmark = pytest.mark.anyio


@dataclasses.dataclass
class Point:
    x: int
    y: int


async def test_default_responds_ok() -> None:
    fake = FakeTool('ping')
    result = await fake.call()
    assert result == ToolResult.success('ok', 'ok')
    assert fake.call_count == 1
    assert fake.definition.parameters == {'type': 'object', 'properties': {}, 'required': []}


@pytest.mark.parametrize(
    ('respond', 'output'),
    [
        ('plain text', 'plain text'),
        (42, '42'),
        (True, 'true'),
        (None, ''),
        ({'a': 1, 'b': [1, 2]}, '{"a":1,"b":[1,2]}'),
        ([1, 'x'], '[1,"x"]'),
        (Point(1, 2), '{"x":1,"y":2}'),
        ({'name': 'é'}, '{"name":"é"}'),
    ],
)
async def test_constant_output_renders_like_function_tools(respond: object, output: str) -> None:
    result = await FakeTool('t', respond).call('{}')
    assert result.ok
    assert result.output == output
    assert result.has_value
    assert result.value == respond


async def test_callable_respond_gets_parsed_arguments() -> None:
    seen: list[dict[str, object]] = []

    def respond(args: dict[str, object]) -> dict[str, object]:
        seen.append(args)
        return {'echo': args}

    fake = FakeTool('t', respond)
    assert (await fake.call('{"a": 1}')).output == '{"echo":{"a":1}}'
    assert (await fake.call({'b': 2})).value == {'echo': {'b': 2}}
    assert (await fake.call(None)).value == {'echo': {}}
    assert seen == [{'a': 1}, {'b': 2}, {}]


async def test_async_respond_is_awaited() -> None:
    async def respond(args: dict[str, object]) -> str:
        await anyio.sleep(0.001)
        return f"hello {args['name']}"

    assert (await FakeTool('t', respond).call({'name': 'Ann'})).output == 'hello Ann'


async def test_respond_returning_a_tool_result_passes_through() -> None:
    result = await FakeTool('t', lambda _: ToolResult.failure('custom')).call()
    assert result.error == 'custom'


async def test_respond_raising_becomes_failure() -> None:
    def respond(args: dict[str, object]) -> object:
        raise KeyError('missing')

    result = await FakeTool('t', respond).call()
    assert not result.ok and result.raised
    assert 'missing' in (result.error or '')


@pytest.mark.parametrize('arguments', ['not valid json', '[1, 2]', '{"a": '])
async def test_malformed_json_arguments_fail(arguments: str) -> None:
    for fake in (FakeTool('t'), FakeTool('t', lambda args: args)):
        result = await fake.call(arguments)
        assert not result.ok
        assert "tool 't'" in (result.error or '')
        assert fake.calls[0].arguments == arguments


async def test_calls_record_arguments_context_and_times() -> None:
    fake = FakeTool('t', delay=0.01)
    ctx = ToolCallContext.of(tenant='acme')
    before = perf_counter()
    await fake.call('{"a": 1}', ctx)
    after = perf_counter()
    (call,) = fake.calls
    assert call.arguments == '{"a": 1}'
    assert call.context is ctx
    assert call.ended is not None
    assert before <= call.started < call.ended <= after
    assert call.seconds is not None and call.seconds >= 0.009


async def test_delay_sleeps_and_parallel_calls_overlap() -> None:
    fake = FakeTool('slow', delay=0.3)
    start = perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(fake.call)
    assert perf_counter() - start < 0.9  # 3 x 0.3 s concurrently, far below sequential
    assert fake.max_in_flight == 3
    assert fake.in_flight == 0


@pytest.mark.parametrize('raises', [RuntimeError('Service unavailable'), RuntimeError])
async def test_raises_becomes_a_failure(raises: BaseException | type[BaseException]) -> None:
    fake = FakeTool('t', raises=raises)
    result = await fake.call()
    assert not result.ok and result.raised
    if isinstance(raises, BaseException):
        assert result.error == 'Service unavailable'
    else:
        assert result.error == 'Tool execution failed with no message'
    assert fake.calls[0].ended is not None


async def test_raises_control_flow_signal_propagates() -> None:
    with pytest.raises(ExitEarly):
        await FakeTool('t', raises=ExitEarly('stop')).call()


async def test_fail_returns_a_failure_result() -> None:
    result = await FakeTool('t', fail='Network timeout').call()
    assert result.error == 'Network timeout'
    assert not result.raised
    assert result.text == 'Error: Network timeout'


async def test_hang_runs_until_cancelled_and_records_the_end() -> None:
    fake = FakeTool('t', hang=True)
    with anyio.move_on_after(0.05) as scope:
        await fake.call()
    assert scope.cancelled_caught
    assert fake.call_count == 1
    assert fake.calls[0].ended is not None
    assert fake.in_flight == 0


async def test_hang_is_cancelled_by_fail_after() -> None:
    with pytest.raises(TimeoutError):
        with anyio.fail_after(0.05):
            await FakeTool('t', hang=True, delay=0.01).call()


async def test_output_chars_gives_exact_huge_output() -> None:
    result = await FakeTool('t', output_chars=1_000_000).call()
    assert len(result.output) == 1_000_000
    assert (await FakeTool('t', output_chars=0).call()).output == ''


def test_huge_output_and_non_json_output_responders() -> None:
    assert len(huge_output(12345)({})) == 12345
    text = non_json_output()({})
    import json

    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(UserError):
        huge_output(-1)


async def test_description_parameters_and_metadata() -> None:
    schema = {'type': 'object', 'properties': {'q': {'type': 'string'}}, 'required': ['q']}
    fake = FakeTool('t', description='Find things.', parameters=schema, metadata=ToolMetadata(category='web'))
    assert fake.definition.description == 'Find things.'
    assert fake.definition.parameters == schema
    assert fake.definition.metadata.category == 'web'


@pytest.mark.parametrize(
    'kwargs',
    [{'delay': -1}, {'delay': 'soon'}, {'raises': 'boom'}, {'output_chars': -5}, {'output_chars': 1.5}],
)
def test_bad_knobs_are_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(UserError, match=r"FakeTool\('t'\)"):
        FakeTool('t', **kwargs)  # type: ignore[arg-type]


async def test_reset_forgets_calls() -> None:
    fake = FakeTool('t')
    await fake.call()
    fake.reset()
    assert fake.call_count == 0 and fake.max_in_flight == 0


async def test_echo_and_concat_tools() -> None:
    echo = echo_tool()
    result = await echo.call('{"a": 1, "b": "x"}')
    assert result.value == {'a': 1, 'b': 'x'}
    assert result.output == '{"a":1,"b":"x"}'
    concat = concat_tool(separator=' ')
    assert (await concat.call({'first': 'Hello', 'second': 'world', 'n': 3})).output == 'Hello world 3'
    assert echo.name == 'echo' and concat.name == 'concat'


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_works_on_both_backends(anyio_backend: str) -> None:
    fake = FakeTool('t', {'ok': True}, delay=0.001)
    assert (await fake.call()).value == {'ok': True}


def test_call_sync_for_scripts() -> None:
    assert FakeTool('t', 7).call_sync().output == '7'
