"""`Agent.run_stream`: one stream of events for the whole run, with the model's deltas; empty answers."""

from __future__ import annotations

import time
from collections.abc import Sequence

import anyio
import pytest

from toolweave import Agent, AgentRunResult, UserError, tool
from toolweave.agent import (
    AgentEvent,
    EmptyAnswer,
    MessageEvent,
    ProgressEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    current_process,
)
from toolweave.models import Message, ModelResponse, ModelSettings, StreamingModel, ToolCall
from toolweave.testing import FunctionModel, ScriptedModel
from toolweave.testing._models import Reply
from toolweave.tools import ToolDefinition

pytestmark = pytest.mark.anyio


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def slow_report(seconds: float) -> str:
    """Report progress from a worker thread, then wait."""
    process = current_process()
    assert process is not None
    process.report_progress('halfway')
    time.sleep(seconds)
    return 'reported'


async def events_of(agent: Agent, prompt: str) -> tuple[list[AgentEvent], AgentRunResult]:
    seen: list[AgentEvent] = []
    async with agent.run_stream(prompt) as stream:
        async for event in stream:
            seen.append(event)
    return seen, stream.result


async def test_deltas_then_tool_calls_then_the_answer() -> None:
    model = ScriptedModel([{'tool': 'add', 'arguments': {'a': 2, 'b': 3}, 'id': 'c1'}, 'The sum is 5.'])
    seen, result = await events_of(Agent(model, tools=[add]), 'What is 2 + 3?')

    kinds = [type(e).__name__ for e in seen if not isinstance(e, MessageEvent)]
    assert kinds[0] == 'ToolCallDelta'
    assert kinds.index('ToolCallStarted') > max(i for i, k in enumerate(kinds) if k == 'ToolCallDelta')
    calls = [e for e in seen if isinstance(e, ToolCallDelta)]
    assert (calls[0].index, calls[0].call_id, calls[0].tool_name, calls[0].arguments) == (0, 'c1', 'add', '')
    assert ''.join(e.arguments for e in calls) == '{"a":2,"b":3}'
    assert all(len(e.arguments) <= 4 for e in calls)  # a fake token is four characters
    text = [e.text for e in seen if isinstance(e, TextDelta)]
    assert text == ['The ', 'sum ', 'is 5', '.']
    assert result.output == 'The sum is 5.'


async def test_a_streamed_run_ends_like_a_plain_one() -> None:
    script: list[Reply] = [{'tool': 'add', 'arguments': {'a': 1, 'b': 1}}, 'Two.']
    plain = await Agent(ScriptedModel(script), tools=[add]).run('1 + 1?')
    _, streamed = await events_of(Agent(ScriptedModel(script), tools=[add]), '1 + 1?')
    assert streamed.output == plain.output
    assert streamed.messages == plain.messages
    assert streamed.usage == plain.usage


class WholeModel:
    """A model that cannot stream: only `respond`."""

    name = 'whole'

    async def respond(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                      settings: ModelSettings | None = None) -> ModelResponse:
        if messages[-1].role == 'tool':
            return ModelResponse(text='Done.')
        return ModelResponse(tool_calls=(ToolCall('w1', 'add', '{"a": 1, "b": 2}'),))


async def test_a_model_that_cannot_stream_is_reported_as_the_same_deltas() -> None:
    assert not isinstance(WholeModel(), StreamingModel)
    seen, result = await events_of(Agent(WholeModel(), tools=[add]), 'Add.')
    assert [(e.call_id, e.arguments) for e in seen if isinstance(e, ToolCallDelta)] == [('w1', ''),
                                                                                        ('w1', '{"a": 1, "b": 2}')]
    assert [e.text for e in seen if isinstance(e, TextDelta)] == ['Done.']
    assert result.output == 'Done.'


async def test_deltas_arrive_while_the_model_is_still_writing() -> None:
    model = ScriptedModel(['One two three four five six seven.'], tokens_per_second=50)
    seen, _ = await events_of(Agent(model), 'Count.')
    deltas = [e for e in seen if isinstance(e, TextDelta)]
    assert len(deltas) == 9
    assert deltas[-1].time - deltas[0].time >= 8 / 50 * 0.9


async def test_progress_from_a_worker_thread_reaches_the_stream() -> None:
    model = ScriptedModel([{'tool': 'slow_report', 'arguments': {'seconds': 0.01}}, 'ok'])
    seen, _ = await events_of(Agent(model, tools=[slow_report]), 'Go.')
    assert [e.status for e in seen if isinstance(e, ProgressEvent)] == ['halfway']


async def test_leaving_the_block_cancels_the_run() -> None:
    release = anyio.Event()

    @tool
    async def wait_forever() -> str:
        """Wait."""
        await release.wait()
        return 'released'

    agent = Agent(ScriptedModel([{'tool': 'wait_forever', 'arguments': {}}, 'never']), tools=[wait_forever])
    with anyio.fail_after(5):
        async with agent.run_stream('Wait.') as stream:
            async for event in stream:
                if isinstance(event, ToolCallStarted):
                    break
    with pytest.raises(UserError, match='has not finished'):
        stream.result  # noqa: B018


async def test_a_failing_run_raises_after_its_events() -> None:
    agent = Agent(ScriptedModel([{'tool': 'add', 'arguments': {'a': 1, 'b': 1}}]), tools=[add])
    seen: list[AgentEvent] = []
    with pytest.raises(UserError, match='ran out of replies'):
        async with agent.run_stream('Add.') as stream:
            async for event in stream:
                seen.append(event)
    assert any(isinstance(e, ToolCallFinished) for e in seen)
    with pytest.raises(UserError, match='The run failed'):
        stream.result  # noqa: B018


async def test_a_failure_nobody_iterated_to_is_raised_when_the_block_ends() -> None:
    agent = Agent(ScriptedModel([]))
    with pytest.raises(UserError, match='ran out of replies'):
        async with agent.run_stream('Hi.'):
            await anyio.sleep(0.05)


async def test_an_exception_in_the_block_is_raised_as_itself() -> None:
    agent = Agent(ScriptedModel(['Hi!']))
    with pytest.raises(KeyError):
        async with agent.run_stream('Hi.') as stream:
            async for _ in stream:
                raise KeyError('mine')


async def test_a_stream_is_iterated_once_and_takes_a_string() -> None:
    agent = Agent(ScriptedModel(['Hi!']))
    async with agent.run_stream('Hi.') as stream:
        async for _ in stream:
            pass
        with pytest.raises(UserError, match='iterated once'):
            aiter(stream)
    with pytest.raises(UserError, match='prompt must be a string'):
        agent.run_stream(42)  # type: ignore[arg-type]


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_streaming_on_both_backends(anyio_backend: str) -> None:
    seen, result = await events_of(Agent(ScriptedModel(['Fine.'], tokens_per_second=1000)), 'How are you?')
    assert ''.join(e.text for e in seen if isinstance(e, TextDelta)) == result.output == 'Fine.'


# --- empty answers --------------------------------------------------------------------------------------------------

def test_an_empty_answer_is_nudged_once() -> None:
    events: list[AgentEvent] = []
    model = ScriptedModel(['', 'Now the answer.'])
    result = Agent(model).run_sync('Question?', on_event=events.append)

    assert result.output == 'Now the answer.' and result.finish_reason == 'final_answer'
    assert [(e.nudged, e.truncated) for e in events if isinstance(e, EmptyAnswer)] == [(True, False)]
    assert model.requests[1].messages[-1].content.startswith('Your last reply was empty.')  # type: ignore[union-attr]


@pytest.mark.parametrize(('nudges', 'calls'), [(0, 1), (1, 2), (3, 4)])
def test_an_agent_gives_up_after_its_nudges(nudges: int, calls: int) -> None:
    events: list[AgentEvent] = []
    model = ScriptedModel(['  '] * calls)
    result = Agent(model, empty_answer_nudges=nudges).run_sync('Question?', on_event=events.append)

    assert (result.output, result.finish_reason, model.call_count) == ('', 'empty_answer', calls)
    assert [e.nudged for e in events if isinstance(e, EmptyAnswer)] == [True] * nudges + [False]


def test_a_truncated_empty_answer_says_so() -> None:
    events: list[AgentEvent] = []
    model = FunctionModel(lambda messages, tools: ModelResponse(text=None, truncated=True))
    Agent(model, empty_answer_nudges=0).run_sync('Question?', on_event=events.append)
    assert [e.truncated for e in events if isinstance(e, EmptyAnswer)] == [True]


@pytest.mark.parametrize('bad', [-1, 1.5, True, '1'])
def test_bad_empty_answer_nudges(bad: object) -> None:
    with pytest.raises(UserError, match='empty_answer_nudges must be an int >= 0'):
        Agent(ScriptedModel([]), empty_answer_nudges=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(('kwargs', 'match'), [
    ({'max_tokens': 0}, 'max_tokens must be an int >= 1'),
    ({'timeout': -1}, 'timeout must be a number of seconds > 0'),
    ({'tool_choice': ''}, "tool_choice must be 'auto', 'required', 'none' or a tool name"),
    ({'tool_choice': 3}, 'tool_choice must be'),
    ({'extra_body': ['top_k']}, 'extra_body must be a mapping'),
    ({'temperature': 'hot'}, 'temperature must be a number'),
    ({'parallel_tool_calls': 'yes'}, 'parallel_tool_calls must be a bool'),
])
def test_bad_model_settings(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(UserError, match=match):
        ModelSettings(**kwargs)  # type: ignore[arg-type]
