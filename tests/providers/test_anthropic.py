"""`AnthropicModel` against recorded Messages API payloads, replayed through a mock HTTP transport."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import anyio
import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolweave.models
from toolweave import ModelError, ToolDefinition, UserError
from toolweave.models import (
    AnthropicModel,
    AssistantMessage,
    Message,
    Model,
    ModelSettings,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)

from .conftest import Replay, Sleeps, load_cassette

pytestmark = pytest.mark.anyio

WEATHER = ToolDefinition(
    'get_weather',
    'Current weather for a city.',
    {'type': 'object', 'properties': {'city': {'type': 'string', 'description': 'City name'}}, 'required': ['city']},
)
ERRORS: dict[str, dict[str, Any]] = load_cassette('anthropic_errors.json')['responses']
TEXT_REPLY: dict[str, Any] = load_cassette('anthropic_text.json')['interactions'][0]['response']


def make_model(replay: Replay, **kwargs: Any) -> AnthropicModel:
    kwargs.setdefault('api_key', 'sk-ant-test')
    return AnthropicModel('claude-sonnet-4-6', http_client=replay.httpx2_client(), **kwargs)


def cassette_requests(name: str) -> list[Any]:
    return [item['request']['body'] for item in load_cassette(name)['interactions']]


async def test_plain_text_reply_with_separate_system_prompt() -> None:
    replay = Replay.from_cassette('anthropic_text.json')

    response = await make_model(replay).respond([SystemMessage('You are terse.'), UserMessage('Say hello.')], [])

    assert response.text == 'Hello!'
    assert response.tool_calls == ()
    assert response.usage == Usage(requests=1, input_tokens=12, output_tokens=6)
    assert response.model_name == 'claude-sonnet-4-6'
    [sent] = replay.sent
    assert (sent.method, sent.path) == ('POST', '/v1/messages')
    assert sent.body == cassette_requests('anthropic_text.json')[0]
    assert sent.body['system'] == 'You are terse.'
    assert all(m['role'] != 'system' for m in sent.body['messages'])


async def test_one_tool_use_with_text() -> None:
    replay = Replay.from_cassette('anthropic_tool_use.json')

    response = await make_model(replay).respond([UserMessage('What is the weather in Paris?')], [WEATHER])

    assert response.text == "I'll check the current weather in Paris."
    assert response.tool_calls == (ToolCall('toolu_01A09q90qw90lq917835lq9', 'get_weather', '{"city": "Paris"}'),)
    assert json.loads(response.tool_calls[0].arguments) == {'city': 'Paris'}
    assert response.usage == Usage(1, 384, 52)
    assert replay.sent[0].body == cassette_requests('anthropic_tool_use.json')[0]
    assert replay.sent[0].body['tools'] == [
        {
            'name': 'get_weather',
            'description': 'Current weather for a city.',
            'input_schema': {
                'type': 'object',
                'properties': {'city': {'type': 'string', 'description': 'City name'}},
                'required': ['city'],
            },
        }
    ]


async def test_parallel_tool_use_and_cached_input_tokens() -> None:
    replay = Replay.from_cassette('anthropic_parallel_tool_use.json')

    response = await make_model(replay).respond([UserMessage('Weather in Paris, Tokyo and Lima?')], [WEATHER])

    assert response.text is None
    assert [(c.id, json.loads(c.arguments)['city']) for c in response.tool_calls] == [
        ('toolu_01P', 'Paris'),
        ('toolu_01T', 'Tokyo'),
        ('toolu_01L', 'Lima'),
    ]
    # 402 uncached + 1200 written to the prompt cache + 300 read from it.
    assert response.usage == Usage(1, 1902, 140)
    assert replay.sent[0].body == cassette_requests('anthropic_parallel_tool_use.json')[0]
    assert replay.sent[0].body['tool_choice'] == {'type': 'auto'}  # sent whenever tools are


async def test_tool_result_round_trip_merges_results_into_one_user_turn() -> None:
    replay = Replay.from_cassette('anthropic_tool_round_trip.json')
    model = make_model(replay)
    history: list[Any] = [SystemMessage('Use tools.'), UserMessage('Weather in Paris and Atlantis?')]

    first = await model.respond(history, [WEATHER])
    history.append(AssistantMessage(first.text, first.tool_calls))
    history.append(ToolMessage('toolu_a1', 'get_weather', '{"temp_c":18,"sky":"cloudy"}'))
    history.append(ToolMessage('toolu_b2', 'get_weather', "Error: Unknown city 'Atlantis'", is_error=True))
    second = await model.respond(history, [WEATHER])

    assert second.text == 'Paris: 18 C and cloudy. Atlantis is not a real city.'
    assert first.usage + second.usage == Usage(requests=2, input_tokens=940, output_tokens=111)
    assert [s.body for s in replay.sent] == cassette_requests('anthropic_tool_round_trip.json')
    messages = replay.sent[1].body['messages']
    assert [m['role'] for m in messages] == ['user', 'assistant', 'user']
    assert messages[1]['content'][1] == {
        'type': 'tool_use',
        'id': 'toolu_a1',
        'name': 'get_weather',
        'input': {'city': 'Paris'},
    }
    results = messages[2]['content']
    assert [r['type'] for r in results] == ['tool_result', 'tool_result']
    assert 'is_error' not in results[0]
    assert results[1]['is_error'] is True


async def test_user_text_after_tool_results_joins_the_same_turn() -> None:
    replay = Replay([TEXT_REPLY])
    history: list[Message] = [
        UserMessage('go'),
        AssistantMessage(None, (ToolCall('t1', 'get_weather', '{"city":"Oslo"}'),)),
        ToolMessage('t1', 'get_weather', 'sunny'),
        UserMessage('and now?'),
        AssistantMessage(None),  # nothing to say: dropped, Anthropic rejects empty content
        SystemMessage('Second system note.'),
    ]

    await make_model(replay).respond([SystemMessage('First.'), *history], [WEATHER])

    body = replay.sent[0].body
    assert body['system'] == 'First.\n\nSecond system note.'
    assert body['messages'] == [
        {'role': 'user', 'content': [{'type': 'text', 'text': 'go'}]},
        {
            'role': 'assistant',
            'content': [{'type': 'tool_use', 'id': 't1', 'name': 'get_weather', 'input': {'city': 'Oslo'}}],
        },
        {
            'role': 'user',
            'content': [
                {'type': 'tool_result', 'tool_use_id': 't1', 'content': 'sunny'},
                {'type': 'text', 'text': 'and now?'},
            ],
        },
    ]


async def test_malformed_tool_arguments_in_history_stay_visible() -> None:
    replay = Replay([TEXT_REPLY])
    history: list[Message] = [
        UserMessage('go'),
        AssistantMessage(
            None, (ToolCall('t1', 'a', 'not json'), ToolCall('t2', 'b', '[1, 2]'), ToolCall('t3', 'c', ''))
        ),
        ToolMessage('t1', 'a', 'x'),
        ToolMessage('t2', 'b', 'y'),
        ToolMessage('t3', 'c', 'z'),
    ]
    await make_model(replay).respond(history, [])
    inputs = [block['input'] for block in replay.sent[0].body['messages'][1]['content']]
    assert inputs == [{'input': 'not json'}, {'input': '[1, 2]'}, {}]


async def test_httpx_client_with_mock_transport_is_bridged() -> None:
    # The Anthropic SDK refuses `httpx` objects outright; the adapter bridges them to `httpx2`.
    replay = Replay.from_cassette('anthropic_text.json')
    model = AnthropicModel('claude-sonnet-4-6', api_key='sk-ant-test', http_client=replay.httpx_client())

    response = await model.respond([SystemMessage('You are terse.'), UserMessage('Say hello.')], [])

    assert response.text == 'Hello!'
    assert replay.sent[0].body == cassette_requests('anthropic_text.json')[0]


async def test_settings_map_to_the_messages_api() -> None:
    replay = Replay([TEXT_REPLY, TEXT_REPLY])
    model = make_model(replay, max_tokens=1000, settings=ModelSettings(parallel_tool_calls=False))

    await model.respond([UserMessage('x')], [WEATHER], ModelSettings(temperature=0.3, max_tokens=50))
    await model.respond([UserMessage('x')], [])

    first, second = (s.body for s in replay.sent)
    assert first['max_tokens'] == 50
    assert first['temperature'] == 0.3
    assert first['tool_choice'] == {'type': 'auto', 'disable_parallel_tool_use': True}
    assert second['max_tokens'] == 1000
    assert 'temperature' not in second and 'tool_choice' not in second


async def test_rate_limit_then_success_honours_retry_after(sleeps: Sleeps) -> None:
    replay = Replay([ERRORS['rate_limit'], TEXT_REPLY])

    response = await make_model(replay, retry=sleeps.policy()).respond([UserMessage('x')], [])

    assert response.text == 'Hello!'
    assert len(replay.sent) == 2
    assert sleeps.waits == [3.0]


async def test_overloaded_then_success(sleeps: Sleeps) -> None:
    replay = Replay([ERRORS['overloaded'], ERRORS['overloaded'], TEXT_REPLY])
    response = await make_model(replay, retry=sleeps.policy(initial_delay=1.0)).respond([UserMessage('x')], [])
    assert response.text == 'Hello!'
    assert sleeps.waits == [1.0, 2.0]


async def test_server_errors_exhaust_retries_into_model_error(sleeps: Sleeps) -> None:
    replay = Replay([ERRORS['server_error']] * 4)

    with pytest.raises(ModelError) as info:
        await make_model(replay, retry=sleeps.policy(max_retries=3)).respond([UserMessage('x')], [])

    message = str(info.value)
    assert len(replay.sent) == 4
    assert 'Anthropic request for model' in message
    assert 'after 4 attempts (HTTP 500: Internal server error)' in message
    assert isinstance(info.value.__cause__, anthropic.InternalServerError)


async def test_unauthorized_names_the_env_var(sleeps: Sleeps) -> None:
    replay = Replay([ERRORS['unauthorized'], TEXT_REPLY])

    with pytest.raises(ModelError) as info:
        await make_model(replay, retry=sleeps.policy()).respond([UserMessage('x')], [])

    message = str(info.value)
    assert 'HTTP 401: invalid x-api-key' in message
    assert 'ANTHROPIC_API_KEY' in message
    assert len(replay.sent) == 1


async def test_forbidden() -> None:
    with pytest.raises(ModelError, match='HTTP 403: Your API key does not have permission'):
        await make_model(Replay([ERRORS['forbidden']])).respond([UserMessage('x')], [])


async def test_bad_request_quotes_the_provider_message() -> None:
    replay = Replay([ERRORS['bad_request'], TEXT_REPLY])
    with pytest.raises(ModelError) as info:
        await make_model(replay).respond([UserMessage('x')], [])
    assert 'unexpected `tool_use_id` found in `tool_result` blocks: toolu_zz' in str(info.value)
    assert len(replay.sent) == 1


async def test_unknown_model_names_the_model() -> None:
    with pytest.raises(ModelError) as info:
        await make_model(Replay([ERRORS['not_found']])).respond([UserMessage('x')], [])
    assert "does not know model 'claude-sonnet-4-6'" in str(info.value)
    assert 'model: claude-sonnet-9' in str(info.value)


async def test_connection_errors_are_retried(sleeps: Sleeps) -> None:
    replay = Replay([httpx2.ConnectError('Connection refused'), httpx2.ReadTimeout('timed out'), TEXT_REPLY])
    response = await make_model(replay, retry=sleeps.policy()).respond([UserMessage('x')], [])
    assert response.text == 'Hello!'
    assert len(sleeps.waits) == 2


async def test_real_requests_are_blocked_in_tests() -> None:
    with pytest.raises(RuntimeError, match='ALLOW_MODEL_REQUESTS'):
        await AnthropicModel('claude-sonnet-4-6', api_key='k').respond([UserMessage('x')], [])


async def test_missing_api_key_names_the_env_var() -> None:
    # A custom transport is not guarded; the SDK finds no credential and the adapter says which to set.
    replay = Replay([TEXT_REPLY])
    model = AnthropicModel('claude-sonnet-4-6', http_client=replay.httpx2_client())
    with pytest.raises(ModelError, match='ANTHROPIC_API_KEY'):
        await model.respond([UserMessage('x')], [])
    assert replay.sent == []


async def test_given_client_is_used_without_sdk_retries() -> None:
    replay = Replay([ERRORS['overloaded'], TEXT_REPLY])
    client = anthropic.AsyncAnthropic(api_key='own', http_client=replay.httpx2_client(), max_retries=4)
    with pytest.raises(ModelError, match='after 1 attempt '):
        await AnthropicModel('claude-sonnet-4-6', client=client, max_retries=0).respond([UserMessage('x')], [])
    assert len(replay.sent) == 1


@pytest.mark.parametrize('body', ['<html>502 Bad Gateway</html>', {'choices': []}])
async def test_a_reply_that_is_not_a_message(body: Any) -> None:
    headers = {'content-type': 'text/html'} if isinstance(body, str) else {}
    with pytest.raises(ModelError, match='that is not a message'):
        await make_model(Replay([{'status': 200, 'headers': headers, 'body': body}])).respond([UserMessage('x')], [])


async def test_it_is_a_model() -> None:
    model = make_model(Replay([]))
    assert isinstance(model, Model)
    assert model.name == 'anthropic:claude-sonnet-4-6'
    assert repr(model) == "AnthropicModel('claude-sonnet-4-6')"
    assert toolweave.models.AnthropicModel is AnthropicModel


@pytest.mark.parametrize(
    ('kwargs', 'match'),
    [
        ({'model_name': ' '}, 'non-empty string'),
        ({'model_name': 'm', 'max_tokens': 0}, 'max_tokens'),
        ({'model_name': 'm', 'max_tokens': True}, 'max_tokens'),
        ({'model_name': 'm', 'http_client': 'http://x'}, 'httpx2.AsyncClient'),
        ({'model_name': 'm', 'client': object()}, 'anthropic.AsyncAnthropic'),
        ({'model_name': 'm', 'client': anthropic.AsyncAnthropic(api_key='k'), 'api_key': 'k'}, 'client='),
    ],
)
def test_bad_constructor_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(UserError, match=match):
        AnthropicModel(**kwargs)


async def test_unsupported_message_type() -> None:
    with pytest.raises(UserError, match='Unsupported message type in AnthropicModel: int'):
        await make_model(Replay([TEXT_REPLY])).respond([3], [])  # type: ignore[list-item]


async def test_missing_api_key_without_any_credential_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    # No key, no config directory, no profile: the SDK has nothing to sign the request with.
    monkeypatch.delenv('ANTHROPIC_CONFIG_DIR', raising=False)
    monkeypatch.setenv('HOME', str(tmp_path))
    monkeypatch.setenv('XDG_CONFIG_HOME', str(tmp_path / 'config'))
    monkeypatch.setenv('APPDATA', str(tmp_path / 'appdata'))
    replay = Replay([TEXT_REPLY])
    model = AnthropicModel('claude-sonnet-4-6', http_client=replay.httpx2_client())
    with pytest.raises(ModelError, match=r'No usable credentials .*\(no API key found\). Set ANTHROPIC_API_KEY'):
        await model.respond([UserMessage('x')], [])
    assert replay.sent == []


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_concurrent_requests_share_one_model(anyio_backend: str) -> None:
    replay = Replay([TEXT_REPLY] * 5)
    model = AnthropicModel('claude-sonnet-4-6', api_key='k', http_client=replay.httpx_client())
    texts: list[str | None] = []

    async def ask(n: int) -> None:
        texts.append((await model.respond([UserMessage(f'q{n}')], [])).text)

    async with anyio.create_task_group() as tg:
        for n in range(5):
            tg.start_soon(ask, n)

    assert texts == ['Hello!'] * 5
    assert sorted(s.body['messages'][0]['content'][0]['text'] for s in replay.sent) == [f'q{n}' for n in range(5)]


message_strategy = st.one_of(
    st.builds(UserMessage, st.text(min_size=1, max_size=5)),
    st.builds(SystemMessage, st.text(min_size=1, max_size=5)),
    st.builds(
        AssistantMessage,
        st.one_of(st.none(), st.text(max_size=5)),
        st.lists(st.builds(ToolCall, st.text(max_size=3), st.just('t'), st.just('{}')), max_size=3).map(tuple),
    ),
    st.builds(ToolMessage, st.text(max_size=3), st.just('t'), st.text(max_size=5), st.booleans()),
)


@given(st.lists(message_strategy, max_size=12))
@settings(max_examples=200, deadline=None)
def test_turns_alternate_and_keep_every_block_in_order(messages: list[Any]) -> None:
    model = AnthropicModel('claude-sonnet-4-6', api_key='k')
    request = model.build_request(messages, [], ModelSettings())

    turns = request['messages']
    roles = [turn['role'] for turn in turns]
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False))  # never two turns of one role in a row
    assert all(turn['content'] for turn in turns)  # never an empty turn
    expected: list[tuple[str, str]] = []
    for m in messages:
        if isinstance(m, UserMessage):
            expected.append(('user', 'text'))
        elif isinstance(m, ToolMessage):
            expected.append(('user', 'tool_result'))
        elif isinstance(m, AssistantMessage):
            expected += [('assistant', 'text')] * bool(m.content) + [('assistant', 'tool_use')] * len(m.tool_calls)
    assert [(turn['role'], block['type']) for turn in turns for block in turn['content']] == expected
    systems = [m.content for m in messages if isinstance(m, SystemMessage)]
    assert request.get('system', '') == '\n\n'.join(systems)
