"""The agent loop through the public API, with scripted models and fake tools."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

import toolweave
from toolweave import (
    Agent,
    AgentEvent,
    Budget,
    ExitEarly,
    MessageEvent,
    ReviewDecision,
    ReviewRequest,
    ToolCallContext,
    ToolCallFinished,
    ToolCallStarted,
    ToolConfigurationError,
    ToolMetadata,
    UsageLimitExceeded,
    UserError,
    tool,
)
from toolweave.models import AssistantMessage, SystemMessage, ToolMessage, UserMessage
from toolweave.testing import FakeTool, FunctionModel, ScriptedModel

pytestmark = pytest.mark.anyio

LOOP_ID = 'toolweave.loop_id'


def call(name: str, arguments: Any = None, id: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {'tool': name, 'arguments': arguments or {}}
    if id:
        spec['id'] = id
    return spec


async def test_loop_runs_tools_until_a_reply_has_no_tool_calls() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    model = ScriptedModel([call('add', {'a': 2, 'b': 3}), 'The sum is 5.'])
    agent = Agent(model, instructions='Be precise.', tools=[add])
    result = await agent.run('What is 2 + 3?')
    assert result.output == 'The sum is 5.'
    assert result.finish_reason == 'final_answer'
    assert [m.role for m in result.messages] == ['system', 'user', 'assistant', 'tool', 'assistant']
    assert result.messages[0] == SystemMessage('Be precise.')
    tool_message = result.messages[3]
    assert isinstance(tool_message, ToolMessage) and tool_message.content == '5' and not tool_message.is_error
    assert (result.usage.llm_calls, result.usage.tool_calls) == (2, 1)
    assert result.usage.input_tokens == sum(r.usage.input_tokens for r in model.requests)
    assert result.usage.output_tokens == sum(r.usage.output_tokens for r in model.requests)
    # the second request carried the tool result, and the tool definitions every time
    assert model.requests[1].messages[-1] == tool_message
    assert [d.name for d in model.requests[0].tools] == ['add']
    assert result.process.status == 'completed' and result.process.ended_at is not None
    [record] = result.process.history
    assert (record.name, record.arguments, record.result.output) == ('add', '{"a":2,"b":3}', '5')
    assert record.duration >= 0
    assert result.plan_runs == ()


async def test_no_instructions_means_no_system_message() -> None:
    result = await Agent(ScriptedModel(['hi'])).run('hello')
    assert result.messages == (UserMessage('hello'), AssistantMessage('hi'))
    assert result.usage.tool_calls == 0


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_parallel_tool_calls_run_concurrently_and_answer_in_call_order(anyio_backend: str) -> None:
    slow = FakeTool('slow', 'slow done', delay=0.5)
    medium = FakeTool('medium', 'medium done', delay=0.3)
    fast = FakeTool('fast', 'fast done', delay=0.1)
    model = ScriptedModel([[call('slow'), call('medium'), call('fast')], 'all done'])
    result = await Agent(model, tools=[slow, medium, fast]).run('go')
    (first,), (second,), (third,) = slow.calls, medium.calls, fast.calls
    assert max(c.started for c in (first, second, third)) < min(c.ended or 0 for c in (first, second, third))
    contents = [m.content for m in result.messages if isinstance(m, ToolMessage)]
    assert contents == ['slow done', 'medium done', 'fast done']
    assert result.usage.tool_calls == 3
    assert [r.name for r in result.process.history] == ['fast', 'medium', 'slow']  # finishing order


async def test_max_iterations_stops_with_a_clear_error() -> None:
    ping = FakeTool('ping', 'pong')
    model = FunctionModel(lambda messages, tools: call('ping'))
    agent = Agent(model, tools=[ping], max_iterations=3)
    with pytest.raises(UsageLimitExceeded) as info:
        await agent.run('loop forever')
    assert 'max_iterations=3' in str(info.value) and 'Raise `max_iterations`' in str(info.value)
    process = info.value.process
    assert isinstance(process, toolweave.AgentProcess)
    assert process.status == 'stopped' and 'max_iterations=3' in (process.stop_reason or '')
    assert model.call_count == 3 and ping.call_count == 3


async def test_unknown_tool_and_malformed_arguments_are_reported_to_the_model() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    model = ScriptedModel([[call('nope', id='c1'), {'tool': 'add', 'arguments': '{"a": 1,', 'id': 'c2'},
                            call('add', {'a': 'x', 'b': 1}, id='c3')], 'sorry'])
    result = await Agent(model, tools=[add]).run('go')
    tool_messages = [m for m in result.messages if isinstance(m, ToolMessage)]
    assert all(m.is_error for m in tool_messages)
    assert tool_messages[0].content == "Error: Unknown tool 'nope'. Available tools: add."
    assert 'Invalid JSON arguments' in tool_messages[1].content
    assert tool_messages[2].content.startswith('Error: ') and 'a' in tool_messages[2].content
    assert result.usage.tool_calls == 2  # the unknown tool never ran
    assert result.output == 'sorry'


async def test_tool_exception_becomes_an_error_message() -> None:
    broken = FakeTool('broken', raises=RuntimeError('disk full'))
    result = await Agent(ScriptedModel([call('broken'), 'it failed']), tools=[broken]).run('go')
    [message] = [m for m in result.messages if isinstance(m, ToolMessage)]
    assert message.content == 'Error: disk full' and message.is_error


async def test_return_direct_tool_ends_the_loop_with_its_output() -> None:
    final = FakeTool('final', 'the report', metadata=ToolMetadata(return_direct=True))
    other = FakeTool('other', 'x')
    model = ScriptedModel([[call('other'), call('final')]])
    result = await Agent(model, tools=[final, other]).run('go')
    assert result.output == 'the report'
    assert result.finish_reason == 'return_direct'
    assert model.call_count == 1


# --- call context -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('process', 'interaction', 'expected'),
    [
        ({'tenantId': 'acme'}, None, {'tenantId': 'acme'}),
        (None, {'authToken': 'xyz'}, {'authToken': 'xyz'}),
        ({'tenantId': 'acme'}, {'authToken': 'xyz'}, {'tenantId': 'acme', 'authToken': 'xyz'}),
        ({'tenantId': 'acme'}, {'tenantId': 'override'}, {'tenantId': 'override'}),
    ],
)
async def test_effective_context_interaction_wins(
    process: dict[str, str] | None, interaction: dict[str, str] | None, expected: dict[str, str]
) -> None:
    probe = FakeTool('probe')
    agent = Agent(ScriptedModel([call('probe'), 'ok']), tools=[probe], context=process)
    await agent.run('go', context=interaction)
    seen = probe.calls[0].context
    assert isinstance(seen, ToolCallContext)
    assert dict(seen) == expected and seen.loop_id is not None  # exactly what was configured, in a tool loop


async def test_context_reaches_every_call_with_one_fresh_loop_id_per_run() -> None:
    probe = FakeTool('probe')
    agent = Agent(FunctionModel(_two_calls_then_answer), tools=[probe])
    first = await agent.run('go', context={'key': 'value'})
    await agent.run('again', context=ToolCallContext.of(key='value'))  # a mapping is the same as of()
    contexts = [c.context for c in probe.calls]
    assert len(contexts) == 4 and all(c['key'] == 'value' for c in contexts)
    loop_ids = [c.loop_id for c in contexts]
    assert loop_ids[0] == loop_ids[1] and loop_ids[2] == loop_ids[3] and loop_ids[0] != loop_ids[2]
    assert first.process.context.loop_id == loop_ids[0]


def _two_calls_then_answer(messages: list[Any], tools: list[Any]) -> object:
    done = sum(1 for m in messages if isinstance(m, ToolMessage))
    return [call('probe'), call('probe')] if done == 0 else 'done'


async def test_no_context_gives_tools_no_entries_and_the_loop_id_beside_them() -> None:  # never None
    probe = FakeTool('probe')
    await Agent(ScriptedModel([call('probe'), 'ok']), tools=[probe]).run('go')
    seen = probe.calls[0].context
    assert isinstance(seen, ToolCallContext) and dict(seen) == {} and seen.to_map() == {}
    assert seen.loop_id is not None and LOOP_ID not in seen and not seen.is_empty


async def test_with_context_accumulates_and_later_wins() -> None:
    probe = FakeTool('probe')
    base = Agent(FunctionModel(lambda m, t: 'ok' if isinstance(m[-1], ToolMessage) else call('probe')),
                 tools=[probe], context={'tenantId': 'acme'})
    derived = base.with_context({'locale': 'en-AU'}).with_context({'tenantId': 'beta'})
    await derived.run('go')
    await base.run('go')
    first = dict(probe.calls[0].context)
    second = dict(probe.calls[1].context)
    assert first == {'tenantId': 'beta', 'locale': 'en-AU'}
    assert second == {'tenantId': 'acme'}  # the original agent is unchanged


async def test_with_context_replace_does_not_accumulate() -> None:
    agent = Agent(ScriptedModel([]), context={'tenantId': 'acme', 'a': 1})
    replaced = agent.with_context({'locale': 'en-AU'}, replace=True)
    assert dict(replaced.context) == {'locale': 'en-AU'}
    assert agent.with_context(None, replace=True).context is ToolCallContext.EMPTY
    assert agent.with_context({}).context is agent.context  # merging nothing keeps the context itself


# --- events ------------------------------------------------------------------------------------------------------


async def test_events_reach_run_and_agent_subscribers_in_order() -> None:
    probe = FakeTool('probe', 'pong')
    agent = Agent(ScriptedModel([call('probe', id='c1'), 'done']), tools=[probe])
    agent_events: list[AgentEvent] = []
    unsubscribe = agent.events.subscribe(agent_events.append)
    run_events: list[AgentEvent] = []
    result = await agent.run('go', on_event=run_events.append)
    assert run_events == agent_events
    kinds = [type(e).__name__ for e in run_events]
    assert kinds == ['MessageEvent', 'MessageEvent', 'ToolCallStarted', 'ToolCallFinished', 'MessageEvent',
                     'MessageEvent']
    started, finished = run_events[2], run_events[3]
    assert isinstance(started, ToolCallStarted) and (started.call_id, started.tool_name) == ('c1', 'probe')
    assert isinstance(finished, ToolCallFinished) and finished.result.output == 'pong' and finished.duration >= 0
    assert all(e.process_id == result.process.id for e in run_events)
    last = run_events[-1]
    assert isinstance(last, MessageEvent) and last.message == AssistantMessage('done')
    unsubscribe()
    await Agent(ScriptedModel(['x']), tools=[probe]).run('other agent')
    agent.model = ScriptedModel(['y'])
    await agent.run('after unsubscribe')
    assert len(agent_events) == len(run_events)


async def test_a_failing_listener_is_logged_and_ignored(caplog: pytest.LogCaptureFixture) -> None:
    def bad(event: AgentEvent) -> None:
        raise ValueError('listener bug')

    with caplog.at_level(logging.ERROR, logger='toolweave.agent'):
        result = await Agent(ScriptedModel(['fine'])).run('go', on_event=bad)
    assert result.output == 'fine'
    assert 'listener' in caplog.text


async def test_progress_and_messages_from_a_tool() -> None:
    @tool
    async def work() -> str:
        """Do work and report progress."""
        process = toolweave.current_process()
        assert process is not None
        process.report_progress('halfway')
        process.send_message('Started the job.')
        return 'worked'

    events: list[AgentEvent] = []
    await Agent(ScriptedModel([call('work'), 'ok']), tools=[work]).run('go', on_event=events.append)
    progress = [e for e in events if isinstance(e, toolweave.ProgressEvent)]
    assert [p.status for p in progress] == ['halfway']
    persistent = [e for e in events if isinstance(e, MessageEvent) and e.persistent]
    assert [e.message.content for e in persistent] == ['Started the job.']


# --- budgets -----------------------------------------------------------------------------------------------------


async def test_llm_call_budget_stops_the_run() -> None:
    probe = FakeTool('probe')
    agent = Agent(ScriptedModel([call('probe'), 'never']), tools=[probe], budget=Budget(max_llm_calls=1))
    with pytest.raises(UsageLimitExceeded, match='max_llm_calls=1') as info:
        await agent.run('go')
    process = info.value.process
    assert isinstance(process, toolweave.AgentProcess)
    assert process.status == 'stopped' and process.usage.llm_calls == 1 and probe.call_count == 1


async def test_tool_call_budget_is_checked_before_a_round_runs() -> None:
    probe = FakeTool('probe')
    agent = Agent(ScriptedModel([[call('probe'), call('probe')]]), tools=[probe], budget=Budget(max_tool_calls=1))
    with pytest.raises(UsageLimitExceeded, match='max_tool_calls=1'):
        await agent.run('go')
    assert probe.call_count == 0


async def test_token_budget() -> None:
    agent = Agent(ScriptedModel(['a long answer ' * 50]), budget=Budget(max_tokens=20))
    with pytest.raises(UsageLimitExceeded, match='max_tokens=20') as info:
        await agent.run('go')
    assert 'Raise Budget.max_tokens' in str(info.value)


def test_budget_rejects_bad_values() -> None:
    with pytest.raises(UserError, match='max_llm_calls'):
        Budget(max_llm_calls=-1)
    with pytest.raises(UserError, match='max_tokens'):
        Budget(max_tokens=1.5)  # type: ignore[arg-type]


# --- review handler, control flow, errors --------------------------------------------------------------------------


class Rejecter:
    def __init__(self) -> None:
        self.requests: list[ReviewRequest] = []

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        self.requests.append(request)
        return ReviewDecision.reject('not today')


async def test_review_handler_is_installed_for_the_run() -> None:
    gated = FakeTool('delete', 'deleted', metadata=ToolMetadata(requires_approval=True))
    handler = Rejecter()
    agent = Agent(ScriptedModel([call('delete', {'path': '/x'}), 'ok']), tools=[gated], review_handler=handler)
    result = await agent.run('go', context={'tenant': 't1'})
    [message] = [m for m in result.messages if isinstance(m, ToolMessage)]
    assert message.is_error and 'Rejected by reviewer' in message.content and 'not today' in message.content
    assert gated.call_count == 0
    assert handler.requests[0].tool_name == 'delete' and handler.requests[0].context['tenant'] == 't1'


async def test_gated_tool_without_handler_fails_the_run() -> None:
    gated = FakeTool('delete', metadata=ToolMetadata(requires_approval=True))
    agent = Agent(ScriptedModel([call('delete')]), tools=[gated])
    events: list[AgentEvent] = []
    with pytest.raises(ToolConfigurationError, match='requires approval'):
        await agent.run('go', on_event=events.append)
    assert not any(isinstance(e, ToolCallFinished) for e in events)


async def test_exit_early_propagates_and_cancels_sibling_calls() -> None:
    stopper = FakeTool('stopper', raises=ExitEarly('enough'))
    hanging = FakeTool('hanging', hang=True)
    agent = Agent(ScriptedModel([[call('hanging'), call('stopper')]]), tools=[stopper, hanging])
    with anyio.fail_after(5):
        with pytest.raises(ExitEarly, match='enough'):
            await agent.run('go')
    assert hanging.calls[0].ended is not None  # cancelled, not left running


async def test_model_error_marks_the_process_failed() -> None:
    async def boom(messages: list[Any], tools: list[Any]) -> str:
        raise toolweave.ModelError('provider down')

    events: list[AgentEvent] = []
    with pytest.raises(toolweave.ModelError):
        await Agent(FunctionModel(boom)).run('go', on_event=events.append)
    process_ids = {e.process_id for e in events}
    assert len(process_ids) == 1


async def test_message_history_continues_a_conversation() -> None:
    model = ScriptedModel(['Hello Ann.', 'Your name is Ann.'])
    agent = Agent(model, instructions='Be kind.')
    first = await agent.run('My name is Ann.')
    second = await agent.run('What is my name?', message_history=first.messages)
    assert second.output == 'Your name is Ann.'
    assert [m.role for m in second.messages] == ['system', 'user', 'assistant', 'user', 'assistant']
    assert model.requests[1].messages == second.messages[:-1]


async def test_history_without_a_system_prompt_gets_one_and_events_name_only_new_messages() -> None:
    history = (UserMessage('earlier'), AssistantMessage('reply'))
    events: list[AgentEvent] = []
    result = await Agent(ScriptedModel(['now']), instructions='Rules.').run('next', message_history=history,
                                                                         on_event=events.append)
    assert result.messages == (SystemMessage('Rules.'), *history, UserMessage('next'), AssistantMessage('now'))
    announced = [e.message for e in events if isinstance(e, MessageEvent)]
    assert announced == [SystemMessage('Rules.'), UserMessage('next'), AssistantMessage('now')]
    with pytest.raises(UserError, match=r'message_history\[1\] must be a message'):
        await Agent(ScriptedModel(['x'])).run('go', message_history=[UserMessage('a'), 'not a message'])  # type: ignore[list-item]


def test_run_sync() -> None:
    result = Agent(ScriptedModel(['sync works'])).run_sync('go')
    assert result.output == 'sync works'


def test_bad_agent_configuration_is_rejected() -> None:
    with pytest.raises(UserError, match='max_iterations'):
        Agent(ScriptedModel([]), max_iterations=0)
    with pytest.raises(UserError, match='must be a Model'):
        Agent(42)  # type: ignore[arg-type]
    with pytest.raises(UserError, match='review_handler'):
        Agent(ScriptedModel([]), review_handler=object())  # type: ignore[arg-type]
    with pytest.raises(UserError):
        Agent('nonsense-provider:some-model')
    with pytest.raises(UserError, match='Tool at index 0 must not be null'):
        Agent(ScriptedModel([]), tools=[None])


async def test_bad_prompt_is_rejected() -> None:
    with pytest.raises(UserError, match='prompt must be a string'):
        await Agent(ScriptedModel([])).run(None)  # type: ignore[arg-type]


async def test_model_string_goes_through_infer_model() -> None:
    agent = Agent('openai:gpt-4o-mini')
    assert 'gpt-4o-mini' in agent.model.name


# --- hanging tools, huge outputs, cancellation ----------------------------------------------------------------------


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_a_hanging_tool_times_out_and_the_model_is_told(anyio_backend: str) -> None:
    hanging = FakeTool('hanging', hang=True)
    quick = FakeTool('quick', 'fine')
    model = ScriptedModel([[call('hanging'), call('quick')], 'moved on'])
    with anyio.fail_after(5):
        result = await Agent(model, tools=[hanging, quick], tool_timeout=0.2).run('go')
    first, second = [m for m in result.messages if isinstance(m, ToolMessage)]
    assert first.is_error and "Tool 'hanging' timed out after 0.2 s" in first.content
    assert second.content == 'fine' and result.output == 'moved on'
    assert hanging.calls[0].ended is not None


async def test_tool_timeout_also_limits_plan_steps() -> None:
    hanging = FakeTool('hanging', hang=True)
    plan = {'steps': [{'id': 'h', 'tool': 'hanging', 'arguments': '{}'}]}
    model = ScriptedModel([{'tool': 'execute_tool_plan', 'arguments': plan}, 'ok'])
    with anyio.fail_after(5):
        result = await Agent(model, tools=[hanging], tool_planning=True, tool_timeout=0.2).run('go')
    assert result.plan_runs[0].step('h').status == 'failed'


async def test_huge_tool_output_is_cut_for_the_model_but_kept_in_history() -> None:
    big = FakeTool('big', output_chars=100_000)
    result = await Agent(ScriptedModel([call('big'), 'ok']), tools=[big], max_output_chars=1000).run('go')
    [message] = [m for m in result.messages if isinstance(m, ToolMessage)]
    assert len(message.content) < 1100 and message.content.endswith('[cut 99000 of 100000 characters]')
    assert len(result.process.history[0].result.output) == 100_000
    default = await Agent(ScriptedModel([call('big'), 'ok']), tools=[big]).run('go')
    assert '[cut 80000 of 100000 characters]' in [m for m in default.messages if isinstance(m, ToolMessage)][0].content


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_cancelling_a_run_stops_everything_and_records_it(anyio_backend: str) -> None:
    hanging = FakeTool('hanging', hang=True)
    events: list[AgentEvent] = []
    processes: list[toolweave.AgentProcess | None] = []

    def listen(event: AgentEvent) -> None:
        events.append(event)
        processes.append(toolweave.current_process())  # listeners run inside the run

    agent = Agent(ScriptedModel([[call('hanging'), call('hanging')]]), tools=[hanging])
    with anyio.fail_after(5):
        with anyio.move_on_after(0.2):
            await agent.run('go', on_event=listen)
    assert hanging.call_count == 2 and all(c.ended is not None for c in hanging.calls)
    assert len([e for e in events if isinstance(e, ToolCallStarted)]) == 2
    process = processes[0]
    assert process is not None and process.status == 'stopped' and process.stop_reason == 'cancelled'
    assert toolweave.current_process() is None


def test_bad_limits_are_rejected() -> None:
    with pytest.raises(UserError, match='tool_timeout'):
        Agent(ScriptedModel([]), tool_timeout=0)
    with pytest.raises(UserError, match='max_output_chars'):
        Agent(ScriptedModel([]), max_output_chars=0)
