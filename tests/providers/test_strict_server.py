"""Agents and `OpenAIChatModel` against a loopback server as strict as llama-cpp-python's (see `strict_server`).

These are the wire regressions found with a real llama.cpp server: no `tool_choice`, `content: null`, retried
invalid requests, unbounded replies, and streaming that a server refuses or breaks off.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import httpx
import pytest

from toolweave import Agent, ModelError, UserError, tool
from toolweave.agent import AgentEvent, EmptyAnswer, PlanStepStarted, TextDelta, ToolCallDelta, ToolCallFinished
from toolweave.models import ModelSettings, OpenAIChatModel, RetryPolicy, UserMessage

from .strict_server import Script, StrictServer, serve

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures('allow_model_requests')]

Start = Callable[..., StrictServer]


@pytest.fixture
def strict(monkeypatch: pytest.MonkeyPatch) -> Iterator[Start]:
    for proxy in ('HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'all_proxy'):
        monkeypatch.delenv(proxy, raising=False)  # the server is on 127.0.0.1
    with contextlib.ExitStack() as stack:

        def start(script: Script, **options: Any) -> StrictServer:
            server = stack.enter_context(contextlib.contextmanager(serve)(StrictServer(script, **options)))
            monkeypatch.setenv('LLAMACPP_BASE_URL', server.base_url)
            return server

        yield start


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    if city == 'Atlantis':
        raise ValueError(f'Unknown city {city!r}')
    return f'{city}: 18 C, cloudy'


Connect = Callable[..., OpenAIChatModel]


@pytest.fixture
async def model() -> AsyncIterator[Connect]:
    """Makes `llamacpp:` models for a server; closes them (and their connections) after the test."""
    made: list[OpenAIChatModel] = []

    def connect(server: StrictServer, **kwargs: Any) -> OpenAIChatModel:
        kwargs.setdefault('retry', RetryPolicy(max_retries=2, initial_delay=0.01))
        made.append(OpenAIChatModel('gemma', base_url=server.base_url, provider='llamacpp', api_key_env=None,
                                    **kwargs))
        return made[-1]

    yield connect
    for llm in made:
        await llm.aclose()


# --- the server is as strict as the real one (so the tests below can fail) -----------------------------------------

WEATHER_TOOL = {'type': 'function', 'function': {'name': 'get_weather', 'parameters': {'type': 'object'}}}


def post(server: StrictServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f'{server.base_url}/chat/completions', json=body, timeout=10)


def test_null_content_beside_tool_calls_is_a_500_validation_error(strict: Start) -> None:
    server = strict(['unused'])
    call = {'id': 'c1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': '{"city":"Oslo"}'}}
    response = post(server, {'messages': [{'role': 'user', 'content': 'Weather?'},
                                          {'role': 'assistant', 'content': None, 'tool_calls': [call]},
                                          {'role': 'tool', 'tool_call_id': 'c1', 'content': 'sunny'}]})
    assert response.status_code == 500
    message = response.json()['error']['message']
    assert message.startswith('5 validation errors:')
    assert "('body', 'messages', 1, '_AssistantMessage', 'content')" in message
    assert 'Input should be a valid string' in message


def test_without_tool_choice_a_tool_call_becomes_an_echo(strict: Start) -> None:
    server = strict([{'tool': 'get_weather', 'arguments': {'city': 'Paris'}}])
    response = post(server, {'messages': [{'role': 'user', 'content': 'Weather in PARIS?'}], 'tools': [WEATHER_TOOL]})
    assert response.json()['choices'][0]['message'] == {'role': 'assistant', 'content': 'weather in paris?'}


@pytest.mark.parametrize(('choice', 'status', 'message'), [
    ('required', 500, ''),
    ({'type': 'function', 'function': {'name': 'nope'}}, 500, "Tool with name 'nope' not found in tools"),
])
def test_tool_choice_semantics_of_llama_cpp_python(strict: Start, choice: Any, status: int, message: str) -> None:
    server = strict(['x'])
    response = post(server, {'messages': [{'role': 'user', 'content': 'q'}], 'tools': [WEATHER_TOOL],
                             'tool_choice': choice})
    assert (response.status_code, response.json()['error']['message']) == (status, message)


def test_conversation_rules_of_openai_and_ollama(strict: Start) -> None:
    server = strict(['x', 'x', 'x'])
    call = {'id': 'c1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': 'not json'}}
    broken = post(server, {'messages': [{'role': 'user', 'content': 'q'},
                                        {'role': 'assistant', 'content': '', 'tool_calls': [call]},
                                        {'role': 'tool', 'tool_call_id': 'c1', 'content': 'r'}]})
    orphan = post(server, {'messages': [{'role': 'tool', 'tool_call_id': 'zz', 'content': 'r'}]})
    choice = post(server, {'messages': [{'role': 'user', 'content': 'q'}], 'tool_choice': 'auto'})
    assert [r.status_code for r in (broken, orphan, choice)] == [400, 400, 400]
    assert 'invalid tool call arguments' in broken.json()['error']['message']
    assert "must be a response to a preceding message with 'tool_calls'" in orphan.json()['error']['message']
    assert "'tool_choice' is only allowed when 'tools' are specified" in choice.json()['error']['message']


# --- an agent on the documented model string completes a tool round trip ------------------------------------------

async def test_agent_on_llamacpp_model_string_completes_a_tool_round_trip(strict: Start) -> None:
    server = strict([[{'tool': 'get_weather', 'arguments': {'city': 'Paris'}},
                      {'tool': 'get_weather', 'arguments': {'city': 'Atlantis'}}],
                     'Paris is 18 C and cloudy; Atlantis is not a city.'])
    agent = Agent('llamacpp:gemma', tools=[get_weather])
    assert isinstance(agent.model, OpenAIChatModel)
    async with agent.model:
        result = await agent.run('Weather in Paris and Atlantis?')

    assert result.output == 'Paris is 18 C and cloudy; Atlantis is not a city.'
    assert result.usage.tool_calls == 2 and result.usage.llm_calls == 2
    first, second = server.requests
    assert first['tool_choice'] == 'auto' and first['max_tokens'] == 4096
    assert second['messages'][1]['content'] == '' and len(second['messages'][1]['tool_calls']) == 2
    assert [m['role'] for m in second['messages']] == ['user', 'assistant', 'tool', 'tool']
    assert "Unknown city 'Atlantis'" in second['messages'][3]['content']
    assert server.statuses == [200, 200]


async def test_forced_tool_choice_is_sent_as_a_named_function(strict: Start, model: Connect) -> None:
    server = strict([{'tool': 'get_weather', 'arguments': {'city': 'Oslo'}}])
    response = await model(server).respond([UserMessage('Oslo?')], [get_weather.definition],
                                           ModelSettings(tool_choice='get_weather'))
    assert server.requests[0]['tool_choice'] == {'type': 'function', 'function': {'name': 'get_weather'}}
    assert [(c.name, json.loads(c.arguments)) for c in response.tool_calls] == [('get_weather', {'city': 'Oslo'})]


async def test_bad_tool_choices_fail_before_sending() -> None:
    model = OpenAIChatModel('m', base_url='http://127.0.0.1:9/v1')
    with pytest.raises(UserError, match="tool_choice='nope', which names no offered tool. Offered tools: get_weather"):
        await model.respond([UserMessage('x')], [get_weather.definition], ModelSettings(tool_choice='nope'))
    with pytest.raises(UserError, match="tool_choice='required' but no tools"):
        await model.respond([UserMessage('x')], [], ModelSettings(tool_choice='required'))


async def test_a_rejected_request_under_a_500_is_not_retried_and_names_what_was_rejected(strict: Start,
                                                                                          model: Connect) -> None:
    server = strict(['x', 'x', 'x'])
    messages = [{'role': 'user', 'content': 'q'}, {'role': 'assistant', 'content': None}]
    bad = ModelSettings(extra_body={'messages': messages})

    with pytest.raises(ModelError) as info:
        await model(server).respond([UserMessage('q')], [], bad)

    message = str(info.value)
    assert server.statuses == [500]  # once: a validation error is not transient
    assert message.startswith("llama.cpp server rejected the request for model 'gemma' as invalid (HTTP 500: ")
    assert 'Input should be a valid string' in message
    assert 'The request sent messages[1] = {"role": "assistant", "content": null}.' in message


async def test_extra_body_reaches_the_server_untouched(strict: Start, model: Connect) -> None:
    server = strict(['ok'])
    await model(server).respond([UserMessage('q')], [], ModelSettings(extra_body={'top_k': 20, 'max_tokens': 7}))
    assert server.requests[0]['top_k'] == 20 and server.requests[0]['max_tokens'] == 7


async def test_unknown_tool_and_malformed_arguments_reach_the_model_as_errors(strict: Start, model: Connect) -> None:
    server = strict([[{'tool': 'nope', 'arguments': {}}, {'tool': 'get_weather', 'arguments': '{"city": "Par'}],
                     'Sorry.'])
    result = await Agent(model(server), tools=[get_weather]).run('Weather?')

    assert result.output == 'Sorry.'
    second = server.requests[1]['messages']
    assert second[2]['content'] == "Error: Unknown tool 'nope'. Available tools: get_weather."
    assert second[3]['content'].startswith("Error: Invalid JSON arguments for tool 'get_weather'")
    # Sent back as a JSON object (Ollama parses arguments), with the model's text still visible.
    assert json.loads(second[1]['tool_calls'][1]['function']['arguments']) == {'input': '{"city": "Par'}


# --- streaming ------------------------------------------------------------------------------------------------------

async def collect(agent: Agent, prompt: str) -> tuple[list[AgentEvent], Any]:
    events: list[AgentEvent] = []
    async with agent.run_stream(prompt) as stream:
        async for event in stream:
            events.append(event)
    return events, stream.result


async def test_streamed_run_reports_deltas_as_they_arrive(strict: Start, model: Connect) -> None:
    server = strict([{'tool': 'get_weather', 'arguments': {'city': 'Paris'}}, 'Paris: 18 C and cloudy.'],
                    chunk_delay=0.02)
    agent = Agent(model(server), tools=[get_weather])

    events, result = await collect(agent, 'Weather in Paris?')

    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    assert (calls[0].call_id, calls[0].tool_name, calls[0].arguments) == ('call_1_0', 'get_weather', '')
    assert ''.join(e.arguments for e in calls) == '{"city": "Paris"}' and len(calls) > 3
    texts = [e for e in events if isinstance(e, TextDelta)]
    assert ''.join(e.text for e in texts) == result.output == 'Paris: 18 C and cloudy.'
    # Each delta was reported when its event arrived, not when the reply was complete (events 20 ms apart; a
    # loaded machine delivers some late and bunched, so only half the spacing is asked for).
    assert calls[-1].time - calls[0].time >= 0.02 * (len(calls) - 1) * 0.5
    finished = next(i for i, e in enumerate(events) if isinstance(e, ToolCallFinished))
    assert events.index(calls[-1]) < finished
    assert all(r['stream'] is True and r['stream_options'] == {'include_usage': True} for r in server.requests)
    expected = [json.loads(json.dumps(server._usage(r, None, []))) for r in server.requests]
    assert result.usage.input_tokens == sum(u['prompt_tokens'] for u in expected)  # the server's own counts


@pytest.mark.parametrize(('refusal', 'status'), [('empty', 200), ('error', 500)])
async def test_llama_cpp_python_refusing_to_stream_tool_calls_falls_back(strict: Start, model: Connect,
                                                                         refusal: str, status: int) -> None:
    server = strict([{'tool': 'get_weather', 'arguments': {'city': 'Oslo'}}, {'tool': 'get_weather',
                     'arguments': {'city': 'Oslo'}}, 'Oslo: 18 C.', 'Bye.'], streams_auto_tool_calls=False,
                    refusal=refusal)
    agent = Agent(model(server), tools=[get_weather])

    events, result = await collect(agent, 'Weather in Oslo?')

    assert result.output == 'Oslo: 18 C.'
    assert [r.get('stream', False) for r in server.requests] == [True, False, False]  # refused once, then remembered
    assert server.statuses == [status, 200, 200]  # the refusal was not retried
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert {(e.call_id, e.tool_name) for e in deltas} == {('call_2_0', 'get_weather')}
    assert ''.join(e.arguments for e in deltas) == '{"city": "Oslo"}'


@pytest.mark.parametrize(('fault', 'match'), [
    ({'cut_at': 3}, 'broke off the stream'),
    ({'malformed_at': 2}, 'sent malformed JSON in the stream'),
    ({'end_early_at': 3}, 'ended before the reply did'),
])
async def test_a_broken_stream_is_a_clear_error_and_not_retried(strict: Start, model: Connect, fault: dict[str, int],
                                                                match: str) -> None:
    server = strict(['A long enough answer to stream in pieces.'], **fault)
    with pytest.raises(ModelError, match=match):
        async with model(server).stream([UserMessage('q')], []) as reply:
            async for _ in reply:
                pass
    assert len(server.requests) == 1


async def test_a_stalled_stream_times_out(strict: Start, model: Connect) -> None:
    server = strict(['A long enough answer to stream in pieces.'], hang_at=2)
    started = time.monotonic()
    with pytest.raises(ModelError, match=r'did not finish its reply .* within timeout=0.5 s after 2 events'):
        async with model(server).stream([UserMessage('q')], [], ModelSettings(timeout=0.5)) as reply:
            async for _ in reply:
                pass
    assert time.monotonic() - started < 5


async def test_a_stream_error_ends_a_streamed_run(strict: Start, model: Connect) -> None:
    server = strict(['An answer that will be cut.'], cut_at=4)
    events: list[AgentEvent] = []
    with pytest.raises(ModelError, match='broke off the stream'):
        async with Agent(model(server)).run_stream('q') as stream:
            async for event in stream:
                events.append(event)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ['An ', 'ans', 'wer']


async def test_an_empty_answer_is_nudged_once_then_reported(strict: Start, model: Connect) -> None:
    server = strict(['', '', 'unused'])
    agent = Agent(model(server), tools=[get_weather])

    events, result = await collect(agent, 'Weather?')

    assert result.finish_reason == 'empty_answer' and result.output == ''
    assert [(e.nudged, e.truncated) for e in events if isinstance(e, EmptyAnswer)] == [(True, False), (False, False)]
    assert server.requests[1]['messages'][-1]['content'].startswith('Your last reply was empty.')


async def test_an_httpx_client_streams_event_by_event(strict: Start) -> None:
    server = strict(['One, two, three, four.'], chunk_delay=0.03)
    async with httpx.AsyncClient() as http_client:
        llm = OpenAIChatModel('gemma', base_url=server.base_url, http_client=http_client)
        events, result = await collect(Agent(llm), 'Count.')
    texts = [e for e in events if isinstance(e, TextDelta)]
    assert ''.join(e.text for e in texts) == result.output == 'One, two, three, four.'
    assert texts[-1].time - texts[0].time >= 0.03 * (len(texts) - 1) * 0.9  # not all at the end


# --- eager plans over the wire --------------------------------------------------------------------------------------

@tool(read_only=True)
async def forecast(city: str) -> str:
    """Tomorrow's forecast for a city (read-only)."""
    return f'{city}: sunny'


EAGER_PLAN = {'steps': [{'id': 'oslo', 'tool': 'forecast', 'arguments': {'city': 'Oslo'}},
                        {'id': 'rome', 'tool': 'forecast', 'arguments': {'city': 'Rome'}},
                        {'id': 'lima', 'tool': 'forecast', 'arguments': {'city': 'Lima'}}],
              'output_steps': ['oslo', 'rome', 'lima']}


async def test_plan_steps_start_while_the_server_streams_the_plan(strict: Start, model: Connect) -> None:
    server = strict([{'tool': 'execute_tool_plan', 'arguments': EAGER_PLAN}, 'All sunny.'], chunk_delay=0.01)
    agent = Agent(model(server), tools=[forecast], tool_planning=True, eager_plans=True)

    events, result = await collect(agent, 'Forecasts?')

    last_piece = max(i for i, e in enumerate(events) if isinstance(e, ToolCallDelta))
    started = {e.step.id: i for i, e in enumerate(events) if isinstance(e, PlanStepStarted)}
    assert started['oslo'] < last_piece and started['rome'] < last_piece  # before the server finished the plan
    assert result.plan_runs[0].eager == ('oslo', 'rome', 'lima') and result.output == 'All sunny.'
    assert all(r['stream'] is True for r in server.requests)


async def test_a_stream_that_breaks_off_mid_plan_cancels_the_steps_that_started(strict: Start,
                                                                               model: Connect) -> None:
    cancelled: list[str] = []

    @tool(read_only=True)
    async def slow(city: str) -> str:
        """A slow read-only lookup."""
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            cancelled.append(city)
            raise
        return city

    plan = {'steps': [{'id': 'a', 'tool': 'slow', 'arguments': {'city': 'Oslo'}},
                      {'id': 'b', 'tool': 'slow', 'arguments': {'city': 'Rome'}},
                      {'id': 'c', 'tool': 'slow', 'arguments': {'city': 'Lima'}}]}
    server = strict([{'tool': 'execute_tool_plan', 'arguments': plan}], chunk_delay=0.005, cut_at=30)
    agent = Agent(model(server), tools=[slow], tool_planning=True, eager_plans=True)
    with anyio.fail_after(10), pytest.raises(ModelError, match='broke off the stream'):
        await agent.run('Lookups?')
    assert cancelled and 'Lima' not in cancelled  # they had started early; the stream broke off, so they stopped
