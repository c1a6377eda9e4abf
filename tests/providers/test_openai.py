"""`OpenAIChatModel` against recorded Chat Completions payloads, replayed through a mock HTTP transport."""

from __future__ import annotations

import gzip
import json
from typing import Any

import anyio
import httpx
import httpx2
import openai
import pytest

import toolweave.models
from toolweave import ModelError, ToolDefinition, UserError
from toolweave.models import (
    AssistantMessage,
    Model,
    ModelSettings,
    OpenAIChatModel,
    RetryPolicy,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)

from .conftest import Replay, Reply, Sleeps, load_cassette

pytestmark = pytest.mark.anyio

WEATHER = ToolDefinition(
    'get_weather',
    'Current weather for a city.',
    {'type': 'object', 'properties': {'city': {'type': 'string', 'description': 'City name'}}, 'required': ['city']},
)
ERRORS: dict[str, dict[str, Any]] = load_cassette('openai_errors.json')['responses']
TEXT_REPLY: dict[str, Any] = load_cassette('openai_text.json')['interactions'][0]['response']


def make_model(replay: Replay, **kwargs: Any) -> OpenAIChatModel:
    kwargs.setdefault('api_key', 'sk-test')
    return OpenAIChatModel('gpt-4o-mini', http_client=replay.httpx2_client(), **kwargs)


def cassette_requests(name: str) -> list[Any]:
    return [item['request']['body'] for item in load_cassette(name)['interactions']]


async def test_plain_text_reply() -> None:
    replay = Replay.from_cassette('openai_text.json')
    model = make_model(replay)

    response = await model.respond([SystemMessage('You are terse.'), UserMessage('Say hello.')], [])

    assert response.text == 'Hello!'
    assert response.tool_calls == ()
    assert response.usage == Usage(requests=1, input_tokens=19, output_tokens=3)
    assert response.model_name == 'gpt-4o-mini-2024-07-18'
    [sent] = replay.sent
    assert (sent.method, sent.path) == ('POST', '/v1/chat/completions')
    assert sent.headers['authorization'] == 'Bearer sk-test'
    assert sent.body == cassette_requests('openai_text.json')[0]
    # No tools: no `tools` key and no `parallel_tool_calls` (OpenAI rejects the flag without tools).
    assert 'tools' not in sent.body and 'parallel_tool_calls' not in sent.body


async def test_one_tool_call() -> None:
    replay = Replay.from_cassette('openai_tool_call.json')
    model = make_model(replay)

    response = await model.respond([UserMessage('What is the weather in Paris?')], [WEATHER])

    assert response.text is None
    assert response.tool_calls == (ToolCall('call_DdmO9pD3xa9XTPNJ32zg2hcA', 'get_weather', '{"city":"Paris"}'),)
    assert response.usage == Usage(1, 61, 15)
    assert replay.sent[0].body == cassette_requests('openai_tool_call.json')[0]
    assert replay.sent[0].body['tools'] == [
        {
            'type': 'function',
            'function': {
                'name': 'get_weather',
                'description': 'Current weather for a city.',
                'parameters': {
                    'type': 'object',
                    'properties': {'city': {'type': 'string', 'description': 'City name'}},
                    'required': ['city'],
                },
            },
        }
    ]


async def test_parallel_tool_calls() -> None:
    replay = Replay.from_cassette('openai_parallel_tool_calls.json')
    model = make_model(replay)

    response = await model.respond(
        [UserMessage('Weather in Paris, Tokyo and Lima?')], [WEATHER], ModelSettings(parallel_tool_calls=True)
    )

    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ('call_62136354', 'get_weather', '{"city":"Paris"}'),
        ('call_62136355', 'get_weather', '{"city":"Tokyo"}'),
        ('call_62136356', 'get_weather', '{"city":"Lima"}'),
    ]
    assert response.usage == Usage(1, 66, 62)
    assert replay.sent[0].body == cassette_requests('openai_parallel_tool_calls.json')[0]
    assert replay.sent[0].body['parallel_tool_calls'] is True


async def test_tool_result_round_trip() -> None:
    replay = Replay.from_cassette('openai_tool_round_trip.json')
    model = make_model(replay)
    history: list[Any] = [SystemMessage('Use tools.'), UserMessage('Weather in Paris and Atlantis?')]

    first = await model.respond(history, [WEATHER])
    history.append(AssistantMessage(first.text, first.tool_calls))
    history.append(ToolMessage('call_a1', 'get_weather', '{"temp_c":18,"sky":"cloudy"}'))
    history.append(ToolMessage('call_b2', 'get_weather', "Error: Unknown city 'Atlantis'", is_error=True))
    second = await model.respond(history, [WEATHER])

    assert second.text == 'Paris: 18 C and cloudy. Atlantis is not a real city.'
    assert first.usage + second.usage == Usage(requests=2, input_tokens=201, output_tokens=57)
    assert [s.body for s in replay.sent] == cassette_requests('openai_tool_round_trip.json')
    messages = replay.sent[1].body['messages']
    assert messages[2] == {
        'role': 'assistant',
        'content': '',  # never null: llama-cpp-python rejects it
        'tool_calls': [
            {'id': 'call_a1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': '{"city":"Paris"}'}},
            {
                'id': 'call_b2',
                'type': 'function',
                'function': {'name': 'get_weather', 'arguments': '{"city":"Atlantis"}'},
            },
        ],
    }
    assert messages[3] == {'role': 'tool', 'tool_call_id': 'call_a1', 'content': '{"temp_c":18,"sky":"cloudy"}'}
    assert messages[4]['content'] == "Error: Unknown city 'Atlantis'"


async def test_assistant_text_without_tool_calls_is_sent_as_plain_message() -> None:
    replay = Replay([TEXT_REPLY])
    await make_model(replay).respond(
        [UserMessage('a'), AssistantMessage('b'), AssistantMessage(None), UserMessage('c')], []
    )
    assert replay.sent[0].body['messages'] == [
        {'role': 'user', 'content': 'a'},
        {'role': 'assistant', 'content': 'b'},
        {'role': 'assistant', 'content': ''},
        {'role': 'user', 'content': 'c'},
    ]


async def test_httpx_client_with_mock_transport_works_too() -> None:
    # The SDK speaks `httpx2`; an `httpx.AsyncClient` (and its MockTransport) is bridged.
    replay = Replay.from_cassette('openai_text.json')
    model = OpenAIChatModel('gpt-4o-mini', api_key='sk-test', http_client=replay.httpx_client())

    response = await model.respond([SystemMessage('You are terse.'), UserMessage('Say hello.')], [])

    assert response.text == 'Hello!'
    assert replay.sent[0].body == cassette_requests('openai_text.json')[0]
    assert replay.sent[0].headers['authorization'] == 'Bearer sk-test'


async def test_settings_are_sent_and_call_settings_win() -> None:
    replay = Replay([TEXT_REPLY, TEXT_REPLY])
    model = make_model(replay, settings=ModelSettings(temperature=0.2, max_tokens=100, parallel_tool_calls=False))

    await model.respond([UserMessage('x')], [WEATHER])
    await model.respond([UserMessage('x')], [], ModelSettings(temperature=0.9, timeout=5.0))

    first, second = (s.body for s in replay.sent)
    assert first['temperature'] == 0.2
    assert first['max_completion_tokens'] == 100  # OpenAI's own endpoint: the newer field
    assert first['parallel_tool_calls'] is False
    assert second['temperature'] == 0.9
    assert second['max_completion_tokens'] == 100
    assert 'parallel_tool_calls' not in second  # no tools in this request


async def test_compatible_server_gets_max_tokens_and_a_placeholder_key() -> None:
    replay = Replay([TEXT_REPLY])
    model = OpenAIChatModel(
        'qwen2.5', base_url='http://localhost:8000/v1', http_client=replay.httpx2_client(), provider='vllm'
    )

    await model.respond([UserMessage('x')], [], ModelSettings(max_tokens=64))

    assert replay.sent[0].body['max_tokens'] == 64
    assert 'max_completion_tokens' not in replay.sent[0].body
    assert replay.sent[0].headers['authorization'] == 'Bearer not-needed'
    assert replay.sent[0].headers['host'] == 'localhost:8000'
    assert model.name == 'vllm:qwen2.5'


async def test_rate_limit_then_success_honours_retry_after(sleeps: Sleeps) -> None:
    replay = Replay([ERRORS['rate_limit'], TEXT_REPLY])
    model = make_model(replay, retry=sleeps.policy())

    response = await model.respond([UserMessage('x')], [])

    assert response.text == 'Hello!'
    assert len(replay.sent) == 2
    assert sleeps.waits == [2.0]  # the `retry-after: 2` header, not the computed backoff


async def test_retry_after_ms_header(sleeps: Sleeps) -> None:
    replay = Replay([ERRORS['rate_limit_ms'], TEXT_REPLY])
    await make_model(replay, retry=sleeps.policy()).respond([UserMessage('x')], [])
    assert sleeps.waits == [0.25]


async def test_transient_errors_back_off_exponentially(sleeps: Sleeps) -> None:
    replay = Replay([ERRORS['server_error'], ERRORS['overloaded'], ERRORS['server_error'], TEXT_REPLY])
    model = make_model(replay, retry=sleeps.policy(max_retries=3, initial_delay=0.5))

    response = await model.respond([UserMessage('x')], [])

    assert response.text == 'Hello!'
    assert sleeps.waits == [0.5, 1.0, 2.0]


async def test_server_errors_exhaust_retries_into_model_error(sleeps: Sleeps) -> None:
    replay = Replay([ERRORS['server_error']] * 3)
    model = make_model(replay, retry=sleeps.policy(), max_retries=2)

    with pytest.raises(ModelError) as info:
        await model.respond([UserMessage('x')], [])

    message = str(info.value)
    assert len(replay.sent) == 3
    assert 'after 3 attempts' in message
    assert 'HTTP 500' in message
    assert 'a transient provider error' in message
    assert 'The server had an error while processing your request.' in message
    assert "'gpt-4o-mini'" in message
    assert isinstance(info.value.__cause__, openai.InternalServerError)
    assert len(sleeps.waits) == 2


async def test_retry_after_longer_than_the_limit_gives_up_at_once(sleeps: Sleeps) -> None:
    replay = Replay([ERRORS['quota_wait'], TEXT_REPLY])
    model = make_model(replay, retry=sleeps.policy())

    with pytest.raises(ModelError, match='asked to wait 3600 s') as info:
        await model.respond([UserMessage('x')], [])

    assert len(replay.sent) == 1
    assert sleeps.waits == []
    assert 'You exceeded your current quota' in str(info.value)


async def test_unauthorized_names_the_env_var_and_is_not_retried(sleeps: Sleeps) -> None:
    replay = Replay([ERRORS['unauthorized'], TEXT_REPLY])
    model = make_model(replay, retry=sleeps.policy())

    with pytest.raises(ModelError) as info:
        await model.respond([UserMessage('x')], [])

    message = str(info.value)
    assert 'HTTP 401' in message
    assert 'OPENAI_API_KEY' in message and '`api_key=...`' in message
    assert 'Incorrect API key provided' in message
    assert len(replay.sent) == 1
    assert sleeps.waits == []


async def test_forbidden_says_to_check_the_key() -> None:
    replay = Replay([ERRORS['forbidden']])
    with pytest.raises(ModelError, match='HTTP 403') as info:
        await make_model(replay).respond([UserMessage('x')], [])
    assert 'OPENAI_API_KEY' in str(info.value)
    assert 'does not have access to model' in str(info.value)


async def test_bad_request_quotes_the_provider_message(sleeps: Sleeps) -> None:
    replay = Replay([ERRORS['bad_request'], TEXT_REPLY])
    model = make_model(replay, retry=sleeps.policy())

    with pytest.raises(ModelError) as info:
        await model.respond([UserMessage('x')], [])

    assert "an assistant message with 'tool_calls' must be followed by tool messages" in str(info.value)
    assert 'HTTP 400' in str(info.value)
    assert 'not retried' in str(info.value)
    assert len(replay.sent) == 1


async def test_unknown_model_names_the_model() -> None:
    replay = Replay([ERRORS['not_found']])
    with pytest.raises(ModelError) as info:
        await make_model(replay).respond([UserMessage('x')], [])
    message = str(info.value)
    assert "does not know model 'gpt-4o-mini'" in message
    assert 'https://api.openai.com/v1' in message
    assert 'does not exist or you do not have access to it' in message
    assert 'ollama pull' not in message


async def test_ollama_model_not_pulled() -> None:
    replay = Replay([ERRORS['ollama_not_found']])
    model = OpenAIChatModel(
        'qwen9',
        base_url='http://localhost:11434/v1',
        api_key='ollama',
        provider='ollama',
        api_key_env=None,
        http_client=replay.httpx2_client(),
    )

    with pytest.raises(ModelError) as info:
        await model.respond([UserMessage('x')], [])

    message = str(info.value)
    assert message.startswith("Ollama at http://localhost:11434/v1 does not know model 'qwen9'")
    assert 'model "qwen9" not found, try pulling it first' in message
    assert 'ollama pull' in message
    assert replay.sent[0].headers['host'] == 'localhost:11434'


async def test_connection_error_is_retried(sleeps: Sleeps) -> None:
    replay = Replay([httpx2.ConnectError('[Errno 111] Connection refused'), TEXT_REPLY])
    response = await make_model(replay, retry=sleeps.policy()).respond([UserMessage('x')], [])
    assert response.text == 'Hello!'
    assert len(sleeps.waits) == 1


async def test_unreachable_server_becomes_model_error(sleeps: Sleeps) -> None:
    replay = Replay([httpx2.ConnectError('[Errno 111] Connection refused')] * 2)
    model = OpenAIChatModel(
        'qwen2.5',
        base_url='http://localhost:11434/v1',
        provider='ollama',
        http_client=replay.httpx2_client(),
        retry=sleeps.policy(max_retries=1),
    )

    with pytest.raises(ModelError) as info:
        await model.respond([UserMessage('x')], [])

    message = str(info.value)
    assert 'after 2 attempts' in message
    assert 'connection error' in message
    assert 'Ollama at http://localhost:11434/v1 could not be reached' in message
    assert 'Connection refused' in message


async def test_timeouts_are_retried_then_reported(sleeps: Sleeps) -> None:
    timeouts: list[Reply] = [httpx2.ReadTimeout('timed out')] * 3
    replay = Replay(timeouts + [TEXT_REPLY])
    model = make_model(replay, retry=sleeps.policy(max_retries=2))

    with pytest.raises(ModelError, match=r'OpenAI at https://api.openai.com/v1 did not answer in time for model '
                       r"'gpt-4o-mini' \(3 attempts\): Request timed out\. The server was reached"):
        await model.respond([UserMessage('x')], [])

    assert len(replay.sent) == 3


async def test_real_requests_are_blocked_in_tests() -> None:
    model = OpenAIChatModel('gpt-4o-mini', api_key='sk-test')
    with pytest.raises(RuntimeError, match='ALLOW_MODEL_REQUESTS'):
        await model.respond([UserMessage('x')], [])


@pytest.mark.usefixtures('allow_model_requests')
async def test_missing_api_key_names_the_env_var() -> None:
    # Fails before any request is built, so no network is touched even with requests allowed.
    model = OpenAIChatModel('gpt-4o-mini')
    with pytest.raises(ModelError, match='OPENAI_API_KEY') as info:
        await model.respond([UserMessage('x')], [])
    assert "No API key for model 'openai:gpt-4o-mini'" in str(info.value)


async def test_api_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('OPENAI_API_KEY', 'sk-from-env')
    replay = Replay([TEXT_REPLY])
    await OpenAIChatModel('gpt-4o-mini', http_client=replay.httpx2_client()).respond([UserMessage('x')], [])
    assert replay.sent[0].headers['authorization'] == 'Bearer sk-from-env'


async def test_given_client_is_used_without_sdk_retries() -> None:
    replay = Replay([ERRORS['server_error'], TEXT_REPLY])
    client = openai.AsyncOpenAI(api_key='sk-own', http_client=replay.httpx2_client(), max_retries=5)
    model = OpenAIChatModel('gpt-4o-mini', client=client, max_retries=0)

    with pytest.raises(ModelError, match='after 1 attempt '):
        await model.respond([UserMessage('x')], [])

    assert len(replay.sent) == 1  # the SDK's own retries are off, ours are set to none
    assert replay.sent[0].headers['authorization'] == 'Bearer sk-own'


async def test_malformed_arguments_and_refusals_pass_through() -> None:
    body = load_cassette('openai_tool_call.json')['interactions'][0]['response']['body']
    body['choices'][0]['message']['tool_calls'][0]['function']['arguments'] = 'not valid json'
    refusal = {**TEXT_REPLY['body'], 'choices': [{**TEXT_REPLY['body']['choices'][0]}]}
    refusal['choices'][0]['message'] = {'role': 'assistant', 'content': None, 'refusal': "I can't help with that."}
    no_usage = {key: value for key, value in TEXT_REPLY['body'].items() if key != 'usage'}
    replay = Replay(
        [{'status': 200, 'body': body}, {'status': 200, 'body': refusal}, {'status': 200, 'body': no_usage}]
    )
    model = make_model(replay)

    calls = await model.respond([UserMessage('x')], [WEATHER])
    refused = await model.respond([UserMessage('x')], [])
    unmetered = await model.respond([UserMessage('x')], [])

    assert calls.tool_calls[0].arguments == 'not valid json'  # the tool layer reports bad JSON, not the adapter
    assert refused.text == "I can't help with that."
    assert unmetered.usage == Usage(requests=1)


@pytest.mark.parametrize(
    'body',
    [
        '<html><body>502 Bad Gateway</body></html>',
        {'object': 'list', 'data': []},
        {'id': 'x', 'object': 'chat.completion', 'choices': []},
    ],
)
async def test_a_reply_that_is_not_a_chat_completion(body: Any) -> None:
    replay = Replay(
        [{'status': 200, 'headers': {'content-type': 'text/html'} if isinstance(body, str) else {}, 'body': body}]
    )
    with pytest.raises(ModelError, match='is not a chat completion') as info:
        await make_model(replay).respond([UserMessage('x')], [])
    assert '`/v1`' in str(info.value)


async def test_it_is_a_model() -> None:
    model = make_model(Replay([]))
    assert isinstance(model, Model)
    assert model.name == 'openai:gpt-4o-mini'
    assert repr(model) == "OpenAIChatModel('gpt-4o-mini')"
    assert toolweave.models.OpenAIChatModel is OpenAIChatModel


@pytest.mark.parametrize(
    ('kwargs', 'match'),
    [
        ({'model_name': ''}, 'non-empty string'),
        ({'model_name': 42}, 'non-empty string'),
        ({'model_name': 'm', 'http_client': object()}, 'httpx2.AsyncClient'),
        ({'model_name': 'm', 'client': openai.AsyncOpenAI(api_key='k'), 'base_url': 'http://x'}, 'client='),
        ({'model_name': 'm', 'client': object()}, 'openai.AsyncOpenAI'),
        ({'model_name': 'm', 'max_retries': -1}, 'max_retries'),
    ],
)
def test_bad_constructor_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(UserError, match=match):
        OpenAIChatModel(**kwargs)


async def test_bad_tool_schema_and_message_types() -> None:
    model = make_model(Replay([TEXT_REPLY]))
    bad_tool = ToolDefinition('bad', parameters={'type': 'object', 'default': object()})
    with pytest.raises(UserError, match="Parameters schema of tool 'bad' is not JSON-serialisable"):
        await model.respond([UserMessage('x')], [bad_tool])
    with pytest.raises(UserError, match='Unsupported message type'):
        await model.respond(['hello'], [])  # type: ignore[list-item]


async def test_cancellation_is_not_turned_into_a_model_error() -> None:
    async def hang(request: httpx2.Request) -> httpx2.Response:
        await anyio.sleep_forever()
        raise AssertionError('unreachable')

    model = OpenAIChatModel(
        'gpt-4o-mini', api_key='k', http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(hang))
    )
    with anyio.move_on_after(0.05) as scope:
        await model.respond([UserMessage('x')], [])
    assert scope.cancelled_caught


async def test_aclose_leaves_a_callers_http_client_open() -> None:
    replay = Replay([TEXT_REPLY])
    http_client = replay.httpx2_client()
    async with OpenAIChatModel('gpt-4o-mini', api_key='k', http_client=http_client) as model:
        await model.respond([UserMessage('x')], [])
    assert not http_client.is_closed
    await http_client.aclose()


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_retry_with_real_sleep_on_both_backends(anyio_backend: str) -> None:
    replay = Replay([ERRORS['server_error'], TEXT_REPLY])
    model = make_model(replay, retry=RetryPolicy(max_retries=1, initial_delay=0.01))
    response = await model.respond([UserMessage('x')], [])
    assert response.text == 'Hello!'
    assert len(replay.sent) == 2


async def test_httpx_transport_errors_are_bridged_and_retried(sleeps: Sleeps) -> None:
    replay = Replay([httpx.ConnectError('Connection refused'), httpx.ReadTimeout('read timed out'), TEXT_REPLY])
    model = OpenAIChatModel('gpt-4o-mini', api_key='k', http_client=replay.httpx_client(), retry=sleeps.policy())

    response = await model.respond([UserMessage('x')], [])

    assert response.text == 'Hello!'
    assert len(replay.sent) == 3 and len(sleeps.waits) == 2


async def test_httpx_bridge_passes_decoded_compressed_bodies() -> None:
    raw = json.dumps(TEXT_REPLY['body']).encode()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={'content-type': 'application/json', 'content-encoding': 'gzip'}, content=gzip.compress(raw)
        )

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    response = await OpenAIChatModel('gpt-4o-mini', api_key='k', http_client=client).respond([UserMessage('x')], [])
    assert response.text == 'Hello!'
    assert not client.is_closed
    await client.aclose()


async def test_timeout_setting_is_not_part_of_the_body() -> None:
    replay = Replay([TEXT_REPLY])
    await make_model(replay).respond([UserMessage('x')], [], ModelSettings(timeout=3.0))
    assert 'timeout' not in replay.sent[0].body


async def test_strict_tools_ask_the_provider_to_enforce_their_schema() -> None:
    from toolweave import PlanTool, Toolset
    from toolweave.testing import FakeTool

    replay = Replay.from_cassette('openai_text.json')
    planner = PlanTool(Toolset([FakeTool('echo')]), plan_schema='string')
    await make_model(replay).respond([UserMessage('Say hello.')], [WEATHER, planner.definition])

    weather, plan = (tool['function'] for tool in replay.sent[0].body['tools'])
    assert 'strict' not in weather
    assert plan['strict'] is True
    assert plan['parameters']['required'] == ['steps', 'output_steps']


async def test_a_request_that_outlives_its_timeout_is_retried_then_reported(sleeps: Sleeps) -> None:
    async def hang(request: httpx2.Request) -> httpx2.Response:
        await anyio.sleep_forever()
        raise AssertionError('unreachable')

    model = OpenAIChatModel('gpt-4o-mini', api_key='k', retry=sleeps.policy(max_retries=1),
                            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(hang)))
    with anyio.fail_after(5):
        with pytest.raises(ModelError, match=r'\(2 attempts\): no reply within timeout=0.05 s\.'):
            await model.respond([UserMessage('x')], [], ModelSettings(timeout=0.05))


async def test_a_local_server_that_times_out_is_not_asked_again(sleeps: Sleeps) -> None:
    """A local server keeps generating the abandoned reply: a retry would queue behind it and wait twice."""
    sent: list[httpx2.Request] = []

    async def hang(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        await anyio.sleep_forever()
        raise AssertionError('unreachable')

    def local(**options: Any) -> OpenAIChatModel:
        return OpenAIChatModel('qwen', base_url='http://127.0.0.1:8080/v1', provider='llamacpp',
                               http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(hang)), **options)

    with anyio.fail_after(5):
        with pytest.raises(ModelError) as info:
            await local(retry=sleeps.policy(max_retries=3)).respond([UserMessage('x')], [], ModelSettings(timeout=0.05))
    assert len(sent) == 1 and sleeps.waits == []
    assert str(info.value) == (
        "llama.cpp server at http://127.0.0.1:8080/v1 did not answer in time for model 'qwen': no reply within "
        'timeout=0.05 s. The server was reached but its reply did not come: raise `ModelSettings.timeout`, lower '
        '`max_tokens`, or use a smaller model or a faster machine.')
    assert 'network' not in str(info.value)

    sent.clear()
    with anyio.fail_after(5), pytest.raises(ModelError, match=r'\(2 attempts\)'):
        await local(retry=sleeps.policy(max_retries=1, retry_timeouts=True)).respond(
            [UserMessage('x')], [], ModelSettings(timeout=0.05))
    assert len(sent) == 2


async def test_tool_calls_without_ids_get_one() -> None:
    body = load_cassette('openai_tool_call.json')['interactions'][0]['response']['body']
    body['choices'][0]['message']['tool_calls'][0].pop('id')
    replay = Replay([{'status': 200, 'body': body}])

    response = await make_model(replay).respond([UserMessage('x')], [WEATHER])

    [call] = response.tool_calls
    assert call.id.startswith('call_') and len(call.id) > 10 and call.name == 'get_weather'
