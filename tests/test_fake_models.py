"""ScriptedModel and FunctionModel: replies, recording, the documented usage estimate, errors."""

from __future__ import annotations

import json
import math

import anyio
import anyio.lowlevel
import pytest

from toolweave import ToolDefinition, UserError
from toolweave.models import (
    AssistantMessage,
    Message,
    Model,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from toolweave.testing import FunctionModel, ScriptedModel, estimate_tokens, estimate_usage

pytestmark = pytest.mark.anyio

ADD = ToolDefinition('add', 'Add two numbers.', {'type': 'object', 'properties': {'a': {'type': 'integer'}}})


async def test_scripted_model_replies_in_order_and_records_requests() -> None:
    model = ScriptedModel(['first', ModelResponse(text='second')])
    assert isinstance(model, Model)
    one = await model.respond([UserMessage('hi')], [ADD])
    two = await model.respond([UserMessage('again')], [])
    assert (one.text, two.text) == ('first', 'second')
    assert model.call_count == 2 and model.remaining == 0
    assert model.requests[0].messages == (UserMessage('hi'),)
    assert model.requests[0].tools == (ADD,)
    assert model.last_messages == (UserMessage('again'),)
    assert one.model_name == 'scripted'


async def test_scripted_tool_call_specs() -> None:
    model = ScriptedModel([
        {'tool': 'add', 'arguments': {'a': 1}},
        [{'tool': 'add', 'arguments': {'a': 2}, 'id': 'x'}, ToolCall('y', 'add', '{"a":3}')],
        {'name': 'add', 'arguments': 'not json'},
    ])
    single = await model.respond([UserMessage('go')], [ADD])
    assert single.tool_calls == (ToolCall('call_1', 'add', '{"a":1}'),)
    parallel = await model.respond([UserMessage('go')], [ADD])
    assert parallel.tool_calls == (ToolCall('x', 'add', '{"a":2}'), ToolCall('y', 'add', '{"a":3}'))
    raw = await model.respond([UserMessage('go')], [ADD])
    assert raw.tool_calls[0].arguments == 'not json'  # malformed JSON can be scripted on purpose


async def test_scripted_model_runs_out_with_a_clear_error() -> None:
    model = ScriptedModel(['only'])
    await model.respond([UserMessage('a')], [])
    with pytest.raises(UserError) as info:
        await model.respond([UserMessage('what now?')], [])
    message = str(info.value)
    assert 'ran out of replies' in message
    assert 'scripted with 1 reply' in message and 'request #2' in message
    assert 'what now?' in message


def test_scripted_model_rejects_bad_entries_at_construction() -> None:
    with pytest.raises(UserError, match='Script entry 1'):
        ScriptedModel(['ok', 42])  # type: ignore[list-item]
    with pytest.raises(UserError, match='no tool name'):
        ScriptedModel([{'arguments': {}}])
    with pytest.raises(UserError, match='latency'):
        ScriptedModel([], latency=-1)


async def test_usage_estimate_is_ceil_chars_over_four_of_what_was_sent() -> None:
    messages: list[Message] = [SystemMessage('Be brief.'), UserMessage('Add 1 and 2')]
    model = ScriptedModel([{'tool': 'add', 'arguments': {'a': 1}}])
    response = await model.respond(messages, [ADD])
    sent = json.dumps([{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'Add 1 and 2'}],
                      separators=(',', ':'))
    tools = json.dumps([{'name': 'add', 'description': 'Add two numbers.', 'parameters': dict(ADD.parameters)}],
                       separators=(',', ':'))
    assert response.usage.input_tokens == math.ceil((len(sent) + len(tools)) / 4)
    reply = json.dumps([{'role': 'assistant', 'content': None,
                         'tool_calls': [{'id': 'call_1', 'name': 'add', 'arguments': '{"a":1}'}]}],
                       separators=(',', ':'))
    assert response.usage.output_tokens == math.ceil(len(reply) / 4)
    assert response.usage.requests == 1
    assert estimate_usage(messages, [ADD], response) == response.usage
    assert model.requests[0].usage == response.usage


async def test_estimate_grows_with_history_and_tools() -> None:
    short = estimate_usage([UserMessage('x')], [], ModelResponse(text='y'))
    longer = estimate_usage([UserMessage('x'), AssistantMessage(None, (ToolCall('1', 'add', '{}'),)),
                             ToolMessage('1', 'add', '3' * 400)], [ADD], ModelResponse(text='y'))
    assert longer.input_tokens > short.input_tokens + 100
    assert estimate_tokens('') == 0 and estimate_tokens('abcde') == 2


async def test_explicit_usage_is_kept() -> None:
    model = ScriptedModel([ModelResponse(text='x', usage=Usage(1, 7, 3))])
    assert (await model.respond([UserMessage('a')], [])).usage == Usage(1, 7, 3)


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_function_model_sync_and_async(anyio_backend: str) -> None:
    seen: list[int] = []

    def sync_fn(messages: list[Message], tools: list[ToolDefinition]) -> str:
        seen.append(len(messages))
        return f'{len(messages)} messages, {len(tools)} tools'

    async def async_fn(messages: list[Message], tools: list[ToolDefinition]) -> object:
        await anyio.lowlevel.checkpoint()
        return [{'tool': 'add', 'arguments': {'a': 1}}, {'tool': 'add', 'arguments': {'a': 2}}]

    assert (await FunctionModel(sync_fn).respond([UserMessage('a')], [ADD])).text == '1 messages, 1 tools'
    response = await FunctionModel(async_fn, name='fn').respond([UserMessage('a')], [])
    assert [c.id for c in response.tool_calls] == ['call_1', 'call_2']
    assert response.model_name == 'fn' and response.usage.input_tokens > 0
    assert seen == [1]


async def test_function_model_bad_reply_and_bad_fn() -> None:
    with pytest.raises(UserError, match='Unsupported reply'):
        await FunctionModel(lambda m, t: 3.5).respond([UserMessage('a')], [])
    with pytest.raises(UserError, match='Unsupported reply'):
        await FunctionModel(lambda m, t: []).respond([UserMessage('a')], [])
    with pytest.raises(UserError, match='callable'):
        FunctionModel('nope')  # type: ignore[arg-type]


async def test_latency_is_simulated() -> None:
    model = ScriptedModel(['a'], latency=0.05)
    with anyio.fail_after(2):
        start = anyio.current_time()
        await model.respond([UserMessage('a')], [])
        assert anyio.current_time() - start >= 0.045
