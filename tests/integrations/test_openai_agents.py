"""toolweave inside OpenAI Agents SDK agents, run with the SDK's own `ScriptedModel`."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from agents import Agent, FunctionTool, RunConfig, Runner, RunResult
from agents import function_tool as agents_tool
from agents.exceptions import ToolInputGuardrailTripwireTriggered
from agents.exceptions import UserError as AgentsUserError
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool import Tool as AgentsTool
from agents.tool_guardrails import (
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    ToolOutputGuardrailData,
    tool_input_guardrail,
    tool_output_guardrail,
)
from meeting import Hang, Meeting

from toolweave import (
    McpToolset,
    TextTool,
    ToolCallContext,
    ToolConfigurationError,
    ToolPipeline,
    Toolset,
    requires_approval,
    run_plan,
    tool,
    validate_plan,
)
from toolweave.integrations.openai_agents import (
    function_tool,
    function_tools,
    plan_tool,
    planning_instructions,
    toolweave_tool,
)
from toolweave.testing import RecordingReviewHandler

pytestmark = pytest.mark.anyio

NO_TRACING = RunConfig(tracing_disabled=True)


def step(step_id: str, tool_name: str, **arguments: Any) -> dict[str, str]:
    return {'id': step_id, 'tool': tool_name, 'arguments': json.dumps(arguments)}


def plan(*steps: dict[str, str], output_steps: list[str] | None = None) -> dict[str, Any]:
    return {'steps': list(steps), 'output_steps': output_steps}


def calls_plan(arguments: dict[str, Any] | str, call_id: str = 'plan-1') -> list[Any]:
    return [function_call('execute_tool_plan', arguments, call_id=call_id)]


def with_plan_tool(agent: Agent[Any]) -> Agent[Any]:
    return agent.clone(tools=[*agent.tools, plan_tool(agent.tools)])


def tool_output(model: ScriptedModel, call: int) -> str:
    """What the model was told a tool returned, in the request it got on call `call` (0-based)."""
    return str(function_call_outputs(model, call)[-1])


def function_call_outputs(model: ScriptedModel, call: int) -> list[Any]:
    return [item['output'] for item in model.calls[call].input
            if isinstance(item, dict) and item.get('type') == 'function_call_output']


def weather_tools(meeting: Meeting) -> list[AgentsTool]:
    @agents_tool
    async def weather(city: str) -> dict[str, Any]:
        """The weather in a city."""
        await meeting.meet(city)
        return {'city': city, 'celsius': len(city) * 3}

    @agents_tool
    def warmer(a: float, b: float) -> str:
        """Which of two temperatures is warmer."""
        return 'first' if a > b else 'second'

    return [weather, warmer]


async def test_the_agent_plans_once_and_answers_after_two_model_calls() -> None:
    meeting = Meeting(parties=2)
    the_plan = plan(step('paris', 'weather', city='Paris'), step('tokyo', 'weather', city='Tokyo'),
                    step('cmp', 'warmer', a='$ref:paris.celsius', b='$ref:tokyo.celsius'), output_steps=['cmp'])
    model = ScriptedModel([calls_plan(the_plan), [assistant_message('Tokyo is warmer')]])
    agent = with_plan_tool(Agent(name='forecaster', instructions=planning_instructions(), model=model,
                                 tools=weather_tools(meeting)))
    result = await Runner.run(agent, 'Which is warmer, Paris or Tokyo?', run_config=NO_TRACING)

    assert result.final_output == 'Tokyo is warmer'
    assert len(model.calls) == 2
    model.assert_complete()
    assert [t.name for t in model.calls[0].tools] == ['weather', 'warmer', 'execute_tool_plan']
    assert meeting.overlapped('Paris', 'Tokyo')
    assert tool_output(model, 1) == '{"cmp": "second"}'
    assert (model.calls[0].system_instructions or '').startswith('# Tool Planning')


async def test_errors_of_a_step_become_step_failures_and_siblings_still_run() -> None:
    @agents_tool
    def explode(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(f'cannot do {reason}')

    @agents_tool
    def fine() -> str:
        """Works."""
        return 'ok'

    the_plan = plan(step('a', 'explode', reason='that'), step('b', 'fine'), step('c', 'explode', reason='$ref:a'))
    model = ScriptedModel([calls_plan(the_plan), [assistant_message('done')]])
    await Runner.run(with_plan_tool(Agent(name='a', model=model, tools=[explode, fine])), 'go', run_config=NO_TRACING)
    assert tool_output(model, 1) == (
        'Plan completed with errors.\nResults: {"a": "ERROR: Tool execution failed: cannot do that", "b": "ok", '
        '"c": "ERROR: Skipped because dependency \'a\' failed"}\nErrors: a: Tool execution failed: cannot do that; '
        "c: Skipped because dependency 'a' failed"
    )


async def test_a_plan_naming_an_unknown_tool_runs_nothing_and_lists_the_tools() -> None:
    meeting = Meeting(parties=1, patience=0.5)
    model = ScriptedModel([calls_plan(plan(step('a', 'weather', city='Oslo'), step('b', 'nope'))),
                           [assistant_message('done')]])
    await Runner.run(with_plan_tool(Agent(name='a', model=model, tools=weather_tools(meeting))), 'go',
                     run_config=NO_TRACING)
    assert tool_output(model, 1) == ("Error: Plan execution failed: steps[1] (id 'b'): Unknown tool 'nope' in step "
                                     "'b'. Available tools: weather, warmer.")
    assert meeting.intervals == {}


async def test_malformed_plan_json_is_told_to_the_model_and_nothing_runs() -> None:
    meeting = Meeting(parties=1, patience=0.5)
    model = ScriptedModel([calls_plan('{"steps": [{"id": "a", '), [assistant_message('done')]])
    agent = with_plan_tool(Agent(name='a', model=model, tools=weather_tools(meeting)))
    # The SDK asks a human about any call whose arguments it cannot read, before a `needs_approval` policy could.
    asked = await Runner.run(agent, 'go', run_config=NO_TRACING)
    assert [item.name for item in asked.interruptions] == ['execute_tool_plan']
    state = asked.to_state()
    state.approve(asked.interruptions[0])
    await Runner.run(agent, state, run_config=NO_TRACING)
    assert tool_output(model, 1).startswith('Error: Plan execution failed: ')
    assert 'JSON' in tool_output(model, 1)
    assert meeting.intervals == {}


# --- toolweave tools as Agents tools ----------------------------------------------------------------------------


@tool
def greet(name: str, context: ToolCallContext) -> str:
    """Greets someone on behalf of the tenant."""
    return f'hello {name} from {context.get("tenant")}'


@tool
def fail_always(text: str) -> str:
    """Always fails."""
    raise ValueError(f'no {text}')


async def test_toolweave_tools_keep_their_schema_and_the_context_stays_hidden() -> None:
    model = ScriptedModel([[function_call('greet', {'name': 'Ada'}, call_id='g'),
                            function_call('fail_always', {'text': 'way'}, call_id='f')],
                           [assistant_message('done')]])
    tools = function_tools([greet, fail_always], context=lambda ctx: {'tenant': ctx.context['tenant']})
    await Runner.run(Agent(name='a', model=model, tools=tools), 'hi', context={'tenant': 'acme'},
                     run_config=NO_TRACING)
    [sent_greet, _] = model.calls[0].tools
    assert isinstance(sent_greet, FunctionTool)
    assert sent_greet.params_json_schema == dict(greet.definition.parameters)
    assert 'context' not in json.dumps(sent_greet.params_json_schema)
    assert function_call_outputs(model, 1) == ['hello Ada from acme', 'Error: no way']


async def test_mcp_tools_as_agents_tools() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Adds two integers."""
        return a + b

    async with McpToolset(Toolset([add])) as served:
        model = ScriptedModel([[function_call('add', {'a': 2, 'b': 3}, call_id='m')], [assistant_message('5')]])
        await Runner.run(Agent(name='a', model=model, tools=function_tools(served)), 'add', run_config=NO_TRACING)
    assert tool_output(model, 1) == '5'


def gated_delete(ran: list[str]) -> Any:
    @requires_approval
    @tool
    def delete(path: str) -> str:
        """Deletes a file."""
        ran.append(path)
        return f'deleted {path}'

    return delete


async def test_a_gated_tool_needs_approval_and_a_rejection_never_runs_it() -> None:
    ran: list[str] = []
    model = ScriptedModel([[function_call('delete', {'path': '/tmp/x'}, call_id='d1')], [assistant_message('ok')]])
    agent = Agent(name='a', model=model, tools=[function_tool(gated_delete(ran))])
    first = await Runner.run(agent, 'clean up', run_config=NO_TRACING)
    assert [item.name for item in first.interruptions] == ['delete'] and ran == []
    state = first.to_state()
    state.reject(first.interruptions[0], rejection_message='not today')
    second = await Runner.run(agent, state, run_config=NO_TRACING)
    assert second.final_output == 'ok' and ran == []
    assert tool_output(model, 1) == 'not today'


async def plan_with_a_gated_step(approve: bool) -> tuple[RunResult, list[str], ScriptedModel]:
    ran: list[str] = []

    @tool
    def listing() -> list[str]:
        """Lists files."""
        ran.append('listing')
        return ['/a', '/b']

    the_plan = plan(step('ls', 'listing'), step('rm', 'delete', path='$ref:ls[0]'))
    model = ScriptedModel([calls_plan(the_plan), [assistant_message('finished')]])
    agent = with_plan_tool(Agent(name='a', model=model, tools=function_tools([gated_delete(ran), listing])))
    asked = await Runner.run(agent, 'clean up', run_config=NO_TRACING)
    assert [item.name for item in asked.interruptions] == ['execute_tool_plan'] and ran == []
    state = asked.to_state()
    if approve:
        state.approve(asked.interruptions[0])
    else:
        state.reject(asked.interruptions[0], rejection_message='not today')
    return await Runner.run(agent, state, run_config=NO_TRACING), ran, model


async def test_a_plan_with_gated_steps_asks_once_and_approval_runs_them() -> None:
    result, ran, model = await plan_with_a_gated_step(approve=True)
    assert result.final_output == 'finished' and ran == ['listing', '/a']
    assert tool_output(model, 1) == '{"ls": ["/a", "/b"], "rm": "deleted /a"}'


async def test_a_rejected_plan_runs_nothing() -> None:
    result, ran, model = await plan_with_a_gated_step(approve=False)
    assert result.final_output == 'finished' and ran == []
    assert tool_output(model, 1) == 'not today'


async def test_a_plan_without_gated_steps_needs_no_approval() -> None:
    meeting = Meeting(parties=1)
    model = ScriptedModel([calls_plan(plan(step('a', 'weather', city='Rome'))), [assistant_message('done')]])
    result = await Runner.run(with_plan_tool(Agent(name='a', model=model, tools=weather_tools(meeting))), 'go',
                              run_config=NO_TRACING)
    assert result.interruptions == [] and result.final_output == 'done'


async def test_a_hidden_gate_asks_the_review_handler_or_fails_the_configuration() -> None:
    publish = requires_approval(TextTool.from_function('publish', 'Publishes', lambda text: f'published {text}'))
    pipeline = ToolPipeline.of(TextTool.from_function('shout', 'Upper-cases', str.upper), publish)
    reviewer = RecordingReviewHandler()
    model = ScriptedModel([[function_call(pipeline.name, {'input': 'hi'}, call_id='p')], [assistant_message('ok')]])
    await Runner.run(Agent(name='a', model=model, tools=[function_tool(pipeline, review_handler=reviewer)]), 'go',
                     run_config=NO_TRACING)
    assert tool_output(model, 1) == 'published HI'
    assert [r.tool_name for r in reviewer.requests] == ['publish']

    model = ScriptedModel([[function_call(pipeline.name, {'input': 'hi'}, call_id='p')]])
    with pytest.raises(AgentsUserError, match="Tool 'publish' asked for approval while it ran, .* Pass "
                       '`review_handler=` to `function_tool`') as raised:
        await Runner.run(Agent(name='a', model=model, tools=[function_tool(pipeline)]), 'go', run_config=NO_TRACING)
    assert isinstance(raised.value.__cause__, ToolConfigurationError)


async def test_cancelling_the_run_cancels_every_running_step() -> None:
    hang = Hang(parties=2)

    @agents_tool
    async def wait(key: str) -> str:
        """Waits."""
        await hang.hang(key)
        return key

    model = ScriptedModel([calls_plan(plan(step('a', 'wait', key='a'), step('b', 'wait', key='b')))])
    agent = with_plan_tool(Agent(name='a', model=model, tools=[wait]))
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: Runner.run(agent, 'go', run_config=NO_TRACING))
        await hang.wait_until_all_started()
        group.cancel_scope.cancel()
    assert sorted(hang.cancelled) == ['a', 'b']


async def test_agents_tools_as_toolweave_tools() -> None:
    @agents_tool
    def double(n: int) -> int:
        """Doubles n."""
        return n * 2

    @agents_tool
    def broken() -> str:
        """Raises."""
        raise RuntimeError('broken on purpose')

    tools = [toolweave_tool(double), toolweave_tool(broken)]
    assert tools[0].definition.parameters['required'] == ['n']
    run = await run_plan(plan(step('a', 'double', n=4), step('b', 'double', n='$ref:a'), step('c', 'broken')), tools)
    assert [s.output for s in run.steps[:2]] == ['8', '16']
    assert run.steps[2].error == 'Tool execution failed: broken on purpose'
    assert validate_plan(plan(step('d', 'double', n='many')), tools) == [
        "steps[0] (id 'd'): arguments.n: 'many' is not of type 'integer'."]
    assert toolweave_tool(function_tool(greet)) is greet
    with pytest.raises(TypeError, match='needs an Agents FunctionTool'):
        toolweave_tool(object())  # type: ignore[arg-type]


async def test_plan_steps_call_toolweave_tools_with_their_context_and_keep_their_failures() -> None:
    tools = function_tools([greet, fail_always], context=lambda ctx: {'tenant': ctx.context['tenant']})
    model = ScriptedModel([calls_plan(plan(step('a', 'greet', name='Ada'), step('b', 'fail_always', text='way'))),
                           [assistant_message('done')]])
    await Runner.run(with_plan_tool(Agent(name='a', model=model, tools=tools)), 'go', context={'tenant': 'acme'},
                     run_config=NO_TRACING)
    assert tool_output(model, 1) == ('Plan completed with errors.\nResults: {"a": "hello Ada from acme", '
                                     '"b": "ERROR: Tool execution failed: no way"}\nErrors: b: Tool execution failed: '
                                     'no way')


async def test_guardrails_of_a_tool_run_for_its_plan_steps() -> None:
    @tool_input_guardrail
    def no_secrets(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        if 'secret' in data.context.tool_arguments:
            return ToolGuardrailFunctionOutput.reject_content('secrets stay secret')
        if 'boom' in data.context.tool_arguments:
            return ToolGuardrailFunctionOutput.raise_exception()
        return ToolGuardrailFunctionOutput.allow()

    @tool_output_guardrail
    def no_shouting(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        return ToolGuardrailFunctionOutput.reject_content('too loud') if data.output.isupper() else (
            ToolGuardrailFunctionOutput.allow())

    @agents_tool(tool_input_guardrails=[no_secrets], tool_output_guardrails=[no_shouting])
    def echo(text: str) -> str:
        """Echoes the text."""
        return text

    the_plan = plan(step('a', 'echo', text='hello'), step('b', 'echo', text='the secret'), step('c', 'echo', text='HI'))
    model = ScriptedModel([calls_plan(the_plan), [assistant_message('done')]])
    await Runner.run(with_plan_tool(Agent(name='a', model=model, tools=[echo])), 'go', run_config=NO_TRACING)
    assert tool_output(model, 1) == ('Plan completed with errors.\nResults: {"a": "hello", "b": "ERROR: secrets stay '
                                     'secret", "c": "ERROR: too loud"}\nErrors: b: secrets stay secret; c: too loud')

    model = ScriptedModel([calls_plan(plan(step('a', 'echo', text='boom')))])
    with pytest.raises(ToolInputGuardrailTripwireTriggered):
        await Runner.run(with_plan_tool(Agent(name='a', model=model, tools=[echo])), 'go', run_config=NO_TRACING)
