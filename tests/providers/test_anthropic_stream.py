"""`AnthropicModel.stream` on Messages API server-sent events (the documented event shapes), and tool choice."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolweave import Agent, ModelError, ToolDefinition, tool
from toolweave.agent import TextDelta, ToolCallDelta
from toolweave.models import (
    AnthropicModel,
    ModelSettings,
    ResponseChunk,
    TextChunk,
    ToolCall,
    ToolCallChunk,
    Usage,
    UserMessage,
)

from .conftest import Replay

pytestmark = pytest.mark.anyio

WEATHER = ToolDefinition('get_weather', 'Current weather for a city.',
                         {'type': 'object', 'properties': {'city': {'type': 'string'}}, 'required': ['city']})


def sse(*events: dict[str, Any]) -> dict[str, Any]:
    body = ''.join(f'event: {e["type"]}\ndata: {json.dumps(e)}\n\n' for e in events)
    return {'status': 200, 'headers': {'content-type': 'text/event-stream'}, 'body': body}


def start(input_tokens: int = 400, cached: int = 100) -> dict[str, Any]:
    return {'type': 'message_start', 'message': {
        'id': 'msg_1', 'type': 'message', 'role': 'assistant', 'model': 'claude-sonnet-4-6', 'content': [],
        'stop_reason': None, 'stop_sequence': None,
        'usage': {'input_tokens': input_tokens, 'cache_read_input_tokens': cached, 'output_tokens': 1}}}


def text_block(index: int, *pieces: str) -> list[dict[str, Any]]:
    return [{'type': 'content_block_start', 'index': index, 'content_block': {'type': 'text', 'text': ''}},
            *({'type': 'content_block_delta', 'index': index, 'delta': {'type': 'text_delta', 'text': piece}}
              for piece in pieces),
            {'type': 'content_block_stop', 'index': index}]


def tool_block(index: int, call_id: str, *pieces: str) -> list[dict[str, Any]]:
    return [{'type': 'content_block_start', 'index': index,
             'content_block': {'type': 'tool_use', 'id': call_id, 'name': 'get_weather', 'input': {}}},
            *({'type': 'content_block_delta', 'index': index,
               'delta': {'type': 'input_json_delta', 'partial_json': piece}} for piece in pieces),
            {'type': 'content_block_stop', 'index': index}]


def end(reason: str, output_tokens: int) -> list[dict[str, Any]]:
    return [{'type': 'message_delta', 'delta': {'stop_reason': reason, 'stop_sequence': None},
             'usage': {'output_tokens': output_tokens}},
            {'type': 'message_stop'}]


TOOL_USE = sse(start(), *text_block(0, "I'll check", ' the weather.'), {'type': 'ping'},
               *tool_block(1, 'toolu_1', '', '{"city": ', '"Paris"}'), *end('tool_use', 57))
ANSWER = sse(start(500, 0), *text_block(0, 'Paris: 18 C.'), *end('end_turn', 9))


def make_model(replay: Replay) -> AnthropicModel:
    return AnthropicModel('claude-sonnet-4-6', api_key='sk-ant-test', http_client=replay.httpx2_client())


async def streamed(model: AnthropicModel, **kwargs: Any) -> tuple[list[ResponseChunk], Any]:
    chunks: list[ResponseChunk] = []
    async with model.stream([UserMessage('Weather in Paris?')], [WEATHER], **kwargs) as reply:
        async for chunk in reply:
            chunks.append(chunk)
    return chunks, reply.response


async def test_text_and_tool_use_stream_as_chunks() -> None:
    replay = Replay([TOOL_USE])
    chunks, response = await streamed(make_model(replay))

    assert chunks == [
        TextChunk("I'll check"), TextChunk(' the weather.'),
        ToolCallChunk(0, 'toolu_1', 'get_weather', ''),
        ToolCallChunk(0, 'toolu_1', 'get_weather', '{"city": '), ToolCallChunk(0, 'toolu_1', 'get_weather', '"Paris"}'),
    ]
    assert response.text == "I'll check the weather."
    assert response.tool_calls == (ToolCall('toolu_1', 'get_weather', '{"city": "Paris"}'),)
    assert response.usage == Usage(1, 500, 57)  # 400 + 100 read from the prompt cache; the last output count
    assert response.model_name == 'claude-sonnet-4-6' and not response.truncated
    body = replay.sent[0].body
    assert body['stream'] is True and body['tool_choice'] == {'type': 'auto'} and body['max_tokens'] == 4096


async def test_a_tool_use_without_input_gets_an_empty_object_and_max_tokens_is_truncation() -> None:
    replay = Replay([sse(start(), *tool_block(0, 'toolu_2'), *end('max_tokens', 4096))])
    _, response = await streamed(make_model(replay))
    assert response.tool_calls == (ToolCall('toolu_2', 'get_weather', '{}'),)
    assert response.truncated


@pytest.mark.parametrize(('reply', 'match'), [
    (sse(start(), *text_block(0, 'Cut')), 'ended before the reply did'),
    ({**sse(start()), 'body': sse(start())['body'] + 'event: content_block_start\ndata: {"type": "cont\n\n'},
     'sent malformed JSON in the stream'),
    (sse(start(), {'type': 'error', 'error': {'type': 'overloaded_error', 'message': 'Overloaded'}}),
     r'broke off the stream .*Overloaded'),
    (sse({'type': 'message_start', 'message': 'oops'}), 'not of the expected shape'),
])
async def test_a_broken_stream_is_a_model_error(reply: dict[str, Any], match: str) -> None:
    replay = Replay([reply])
    with pytest.raises(ModelError, match=match):
        await streamed(make_model(replay))
    assert len(replay.sent) == 1


async def test_an_agent_streams_over_anthropic() -> None:
    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return '18 C'

    replay = Replay([TOOL_USE, ANSWER])
    async with make_model(replay) as model:
        async with Agent(model, tools=[get_weather]).run_stream('Weather in Paris?') as stream:
            events = [event async for event in stream]
    assert ''.join(e.text for e in events if isinstance(e, TextDelta)) == "I'll check the weather.Paris: 18 C."
    assert {e.call_id for e in events if isinstance(e, ToolCallDelta)} == {'toolu_1'}
    assert stream.result.output == 'Paris: 18 C.'
    assert stream.result.usage.input_tokens == 1000 and stream.result.usage.output_tokens == 66
    tool_result = replay.sent[1].body['messages'][2]['content'][0]
    assert (tool_result['type'], tool_result['tool_use_id'], tool_result['content']) == ('tool_result', 'toolu_1',
                                                                                         '18 C')


@pytest.mark.parametrize(('settings', 'sent'), [
    (ModelSettings(), {'type': 'auto'}),
    (ModelSettings(tool_choice='required'), {'type': 'any'}),
    (ModelSettings(tool_choice='none'), {'type': 'none'}),
    (ModelSettings(tool_choice='get_weather'), {'type': 'tool', 'name': 'get_weather'}),
    (ModelSettings(tool_choice='required', parallel_tool_calls=False), {'type': 'any',
                                                                         'disable_parallel_tool_use': True}),
    (ModelSettings(parallel_tool_calls=False), {'type': 'auto', 'disable_parallel_tool_use': True}),
])
def test_tool_choice_in_anthropic_shape(settings: ModelSettings, sent: dict[str, Any]) -> None:
    model = AnthropicModel('claude-sonnet-4-6', api_key='k')
    assert model.build_request([UserMessage('x')], [WEATHER], settings)['tool_choice'] == sent


def test_extra_body_joins_temperature_and_wins() -> None:
    model = AnthropicModel('claude-sonnet-4-6', api_key='k')
    request = model.build_request([UserMessage('x')], [], ModelSettings(temperature=0.3,
                                                                        extra_body={'top_k': 5, 'temperature': 0.1}))
    assert request['extra_body'] == {'temperature': 0.1, 'top_k': 5}
    assert 'tool_choice' not in request and request['timeout'] == 300.0
