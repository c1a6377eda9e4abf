"""Tool calls written as text, over the wire of a server as strict as llama.cpp's `llama-server`.

The replies in `cassettes/text_tool_calls.json` are what models wrote: `recorded` ones come from Qwen2.5-Coder
0.5B and 1.5B on `llama-server --jinja` (`make check-local-llm`), `documented` ones are the formats the model
families' chat templates define (Hermes/Qwen `<tool_call>`, Llama 3 `<|python_tag|>`, Mistral `[TOOL_CALLS]`),
for models not run here.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from toolweave import Agent, Tool, UserError, tool
from toolweave.agent import TextDelta, ToolCallDelta
from toolweave.models import ModelSettings, OpenAIChatModel, RetryPolicy, ToolCallChunk, UserMessage

from .strict_server import Script, StrictServer, serve

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures('allow_model_requests')]

CASSETTE = json.loads((Path(__file__).parent / 'cassettes' / 'text_tool_calls.json').read_text())
CALLS: list[dict[str, Any]] = CASSETTE['calls']
NOT_CALLS: list[dict[str, Any]] = CASSETTE['not_calls']


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    return {'city': city, 'temp_c': 18}


@tool
def to_fahrenheit(celsius: float) -> float:
    """Celsius to Fahrenheit."""
    return round(celsius * 9 / 5 + 32, 1)


@tool
def search_products(query: str) -> list[dict[str, Any]]:
    """Search the catalog."""
    return [{'id': 'L1', 'name': 'Aero 14'}]


TOOLS: list[Tool] = [get_weather, to_fahrenheit, search_products]
DEFINITIONS = [t.definition for t in TOOLS]

Start = Callable[..., StrictServer]


@pytest.fixture
def strict(monkeypatch: pytest.MonkeyPatch) -> Iterator[Start]:
    for proxy in ('HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'all_proxy'):
        monkeypatch.delenv(proxy, raising=False)
    with contextlib.ExitStack() as stack:

        def start(script: Script, **options: Any) -> StrictServer:
            options.setdefault('flavour', 'llama-server')
            return stack.enter_context(contextlib.contextmanager(serve)(StrictServer(script, **options)))

        yield start


@pytest.fixture
async def connect() -> AsyncIterator[Callable[..., OpenAIChatModel]]:
    made: list[OpenAIChatModel] = []

    def make(server: StrictServer, **kwargs: Any) -> OpenAIChatModel:
        kwargs.setdefault('provider', 'llamacpp')
        made.append(OpenAIChatModel('qwen', base_url=server.base_url, api_key_env=None,
                                    retry=RetryPolicy(max_retries=0), **kwargs))
        return made[-1]

    yield make
    for model in made:
        await model.aclose()


def _ids(entries: list[dict[str, Any]]) -> list[str]:
    return [entry['id'] for entry in entries]


@pytest.mark.parametrize('entry', CALLS, ids=_ids(CALLS))
async def test_a_call_written_as_text_is_a_tool_call(strict: Start, connect: Callable[..., OpenAIChatModel],
                                                     entry: dict[str, Any]) -> None:
    server = strict([entry['text']])
    response = await connect(server).respond([UserMessage('q')], DEFINITIONS)
    assert response.text is None
    assert [(c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        (call['name'], call['arguments']) for call in entry['expected']]
    assert len({c.id for c in response.tool_calls}) == len(response.tool_calls)


@pytest.mark.parametrize('entry', CALLS, ids=_ids(CALLS))
async def test_a_streamed_call_written_as_text_streams_as_a_tool_call(
        strict: Start, connect: Callable[..., OpenAIChatModel], entry: dict[str, Any]) -> None:
    server = strict([entry['text']])
    async with connect(server).stream([UserMessage('q')], DEFINITIONS) as reply:
        chunks = [chunk async for chunk in reply]
    assert server.requests[0]['stream'] is True
    assert all(isinstance(chunk, ToolCallChunk) for chunk in chunks)  # the text was held back, not shown
    assert [c.name for c in reply.response.tool_calls] == [call['name'] for call in entry['expected']]
    assert reply.response.text is None


@pytest.mark.parametrize('entry', NOT_CALLS, ids=_ids(NOT_CALLS))
async def test_text_that_is_not_a_call_of_an_offered_tool_stays_text(
        strict: Start, connect: Callable[..., OpenAIChatModel], entry: dict[str, Any]) -> None:
    server = strict([entry['text'], entry['text']])
    model = connect(server)
    response = await model.respond([UserMessage('q')], DEFINITIONS)
    assert (response.text, response.tool_calls) == (entry['text'], ())
    async with model.stream([UserMessage('q')], DEFINITIONS) as reply:
        streamed = ''.join([chunk.text async for chunk in reply if not isinstance(chunk, ToolCallChunk)])
    assert streamed == entry['text'] and reply.response.tool_calls == ()


async def test_prose_streams_at_once_and_a_json_reply_only_when_it_is_known(
        strict: Start, connect: Callable[..., OpenAIChatModel]) -> None:
    server = strict(['It is 18 C in Paris.', '{"answer": 42}'])
    model = connect(server)
    async with model.stream([UserMessage('q')], DEFINITIONS) as reply:
        first = [chunk async for chunk in reply]
    assert len(first) > 1  # prose is not held back: it streams piece by piece
    async with model.stream([UserMessage('q')], DEFINITIONS) as reply:
        second = [chunk async for chunk in reply]
    assert ''.join(getattr(c, 'text', '') for c in second) == '{"answer": 42}'


@pytest.mark.parametrize(('where', 'settings', 'converted'), [
    ('llamacpp', None, True),
    ('openai-compatible', None, True),  # on 127.0.0.1, so local
    ('llamacpp', ModelSettings(text_tool_calls=False), False),
    ('llamacpp', ModelSettings(tool_choice='none'), False),
])
async def test_reading_calls_from_text_is_on_for_local_servers_unless_turned_off(
        strict: Start, connect: Callable[..., OpenAIChatModel], where: str, settings: ModelSettings | None,
        converted: bool) -> None:
    text = CALLS[0]['text']
    server = strict([text])
    response = await connect(server, provider=where).respond([UserMessage('q')], DEFINITIONS, settings)
    assert bool(response.tool_calls) is converted
    assert response.text == (None if converted else text)


async def test_a_hosted_provider_does_not_read_calls_from_text_unless_asked() -> None:
    model = OpenAIChatModel('gpt-4o-mini', api_key='k')
    assert model.is_local is False
    local = OpenAIChatModel('m', base_url='http://localhost:1234/v1', provider='openai-compatible')
    assert local.is_local is True


async def test_an_agent_runs_the_calls_a_local_model_writes_as_text(strict: Start,
                                                                    connect: Callable[..., OpenAIChatModel]) -> None:
    """The run that used to end with the JSON text as its answer, as Qwen2.5-Coder wrote it."""
    recorded = next(entry for entry in CALLS if entry['id'] == 'qwen-1.5b-fenced')
    server = strict([recorded['text'], 'It is 18 C in Paris.'])
    agent = Agent(connect(server), tools=TOOLS)
    async with agent.run_stream('Weather in Paris?') as stream:
        events = [event async for event in stream]
    assert stream.result.output == 'It is 18 C in Paris.'
    assert stream.result.usage.tool_calls == 1
    assert not any(isinstance(e, TextDelta) and 'get_weather' in e.text for e in events)
    assert any(isinstance(e, ToolCallDelta) and e.tool_name == 'get_weather' for e in events)
    tool_message = server.requests[1]['messages'][-1]
    assert tool_message['role'] == 'tool' and json.loads(tool_message['content']) == {'city': 'Paris', 'temp_c': 18}


async def test_a_server_that_ignores_a_named_tool_choice_is_detected_and_said(
        strict: Start, connect: Callable[..., OpenAIChatModel], caplog: pytest.LogCaptureFixture) -> None:
    server = strict(['I think it is sunny.', {'tool': 'get_weather', 'arguments': {'city': 'Oslo'}},
                     {'tool': 'get_weather', 'arguments': {'city': 'Rome'}}])
    model = connect(server)
    forced = ModelSettings(tool_choice='get_weather')
    with caplog.at_level(logging.WARNING, logger='toolweave.models'):
        response = await model.respond([UserMessage('Weather in Oslo?')], DEFINITIONS, forced)
    assert [c.name for c in response.tool_calls] == ['get_weather']
    assert "ignored tool_choice='get_weather'" in caplog.text and "takes only 'auto', 'none' and 'required'" \
        in caplog.text
    assert server.requests[0]['tool_choice'] == {'type': 'function', 'function': {'name': 'get_weather'}}
    assert server.requests[1]['tool_choice'] == 'required'
    assert [t['function']['name'] for t in server.requests[1]['tools']] == ['get_weather']
    assert model.honours_named_tool_choice is False
    await model.respond([UserMessage('Weather in Rome?')], DEFINITIONS, forced)  # sent the working way at once
    assert server.requests[2]['tool_choice'] == 'required' and len(server.requests) == 3


async def test_a_server_that_honours_a_named_tool_choice_is_sent_it(strict: Start,
                                                                    connect: Callable[..., OpenAIChatModel]) -> None:
    server = strict([{'tool': 'get_weather', 'arguments': {'city': 'Oslo'}}], flavour='llama-cpp-python')
    model = connect(server)
    response = await model.respond([UserMessage('q')], DEFINITIONS, ModelSettings(tool_choice='get_weather'))
    assert [c.name for c in response.tool_calls] == ['get_weather'] and len(server.requests) == 1
    assert model.honours_named_tool_choice is True


async def test_response_format_reaches_the_server_as_a_json_schema(strict: Start,
                                                                   connect: Callable[..., OpenAIChatModel]) -> None:
    server = strict(['{"steps": []}'])
    schema = {'type': 'object', 'properties': {'steps': {'type': 'array'}}, 'required': ['steps']}
    await connect(server).respond([UserMessage('q')], [], ModelSettings(response_format=schema))
    assert server.requests[0]['response_format'] == {'type': 'json_schema', 'json_schema': {
        'name': 'reply', 'schema': schema, 'strict': False}}


@pytest.mark.parametrize('text', [
    '{"name": "get_weather", "arguments": {"city": "' + 'x' * 100_001 + '"}}',  # over MAX_TEXT_CALL_CHARS
    '{"name": "get_weather", "arguments": ' + '[' * 50_000 + ']' * 50_000 + '}',  # deeper than json can go
    '[' * 5_000,
    '<tool_call>' * 3,
    '[TOOL_CALLS]get_weather[ARGS]',
    '<|python_tag|>;;;',
    '```\n```',
])
async def test_hostile_text_stays_text_and_costs_little(strict: Start, connect: Callable[..., OpenAIChatModel],
                                                        text: str) -> None:
    server = strict([text])
    response = await connect(server).respond([UserMessage('q')], DEFINITIONS)
    assert (response.text, response.tool_calls) == (text, ())


@pytest.mark.parametrize(('settings', 'message'), [
    ({'text_tool_calls': 'yes'}, 'ModelSettings.text_tool_calls must be a bool or None'),
    ({'response_format': 'json'}, 'ModelSettings.response_format must be a JSON schema (a mapping) or None'),
])
def test_settings_are_checked(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=message.replace('(', r'\(').replace(')', r'\)')):
        ModelSettings(**settings)


def test_retry_timeouts_is_checked() -> None:
    with pytest.raises(UserError, match='RetryPolicy.retry_timeouts must be True, False or None'):
        RetryPolicy(retry_timeouts='sometimes')  # type: ignore[arg-type]


async def test_anthropic_refuses_response_format() -> None:
    from toolweave.models import AnthropicModel

    model = AnthropicModel('claude-x', api_key='k')
    with pytest.raises(UserError, match='AnthropicModel got ModelSettings.response_format'):
        model.build_request([UserMessage('q')], [], ModelSettings(response_format={'type': 'object'}))


async def test_a_streamed_reply_that_ignored_a_named_choice_makes_the_next_request_work(
        strict: Start, connect: Callable[..., OpenAIChatModel], caplog: pytest.LogCaptureFixture) -> None:
    server = strict(['Sunny, I think.', {'tool': 'get_weather', 'arguments': {'city': 'Oslo'}}])
    model = connect(server)
    forced = ModelSettings(tool_choice='get_weather')
    with caplog.at_level(logging.WARNING, logger='toolweave.models'):
        async with model.stream([UserMessage('q')], DEFINITIONS, forced) as reply:
            [chunk async for chunk in reply]
    assert reply.response.text == 'Sunny, I think.'  # its chunks were out: not sent again
    assert "ignored tool_choice='get_weather'" in caplog.text and len(server.requests) == 1
    async with model.stream([UserMessage('q')], DEFINITIONS, forced) as reply:
        [chunk async for chunk in reply]
    assert server.requests[1]['tool_choice'] == 'required'
    assert [c.name for c in reply.response.tool_calls] == ['get_weather']
