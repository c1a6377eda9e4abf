"""toolweave inside pydantic-ai agents, run with pydantic-ai's own `FunctionModel`."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from meeting import Hang, Meeting
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RunUsage

from toolweave import TextTool, ToolCallContext, ToolConfigurationError, ToolPipeline, requires_approval, run_plan, tool
from toolweave.integrations.pydantic_ai import PlanToolset, ToolPlanning, ToolweaveToolset, toolweave_tools
from toolweave.testing import RecordingReviewHandler

pytestmark = pytest.mark.anyio


def step(step_id: str, tool_name: str, **arguments: Any) -> dict[str, str]:
    return {'id': step_id, 'tool': tool_name, 'arguments': json.dumps(arguments)}


def plan(*steps: dict[str, str], output_steps: list[str] | None = None) -> dict[str, Any]:
    return {'steps': list(steps), 'output_steps': output_steps}


@dataclass
class Script:
    """A `FunctionModel` that gives these replies in order and keeps what it was sent."""

    replies: list[ModelResponse]
    requests: list[list[ModelMessage]] = field(default_factory=list)
    tools: list[list[str]] = field(default_factory=list)

    def model(self) -> FunctionModel:
        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.requests.append(list(messages))
            self.tools.append([t.name for t in info.function_tools])
            return self.replies[len(self.requests) - 1]

        return FunctionModel(respond)

    def tool_returns(self, index: int) -> list[ToolReturnPart | RetryPromptPart]:
        last = self.requests[index][-1]
        assert isinstance(last, ModelRequest)
        return [p for p in last.parts if isinstance(p, ToolReturnPart | RetryPromptPart)]


def calls_plan(arguments: dict[str, Any] | str, call_id: str = 'plan-1') -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart('execute_tool_plan', arguments, tool_call_id=call_id)])


def answer(text: str = 'done') -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)])


def weather_agent(script: Script, meeting: Meeting, **planning: Any) -> Agent[None, str]:
    agent = Agent(script.model(), capabilities=[ToolPlanning(**planning)])

    @agent.tool_plain
    async def weather(city: str) -> dict[str, Any]:
        """The weather in a city."""
        await meeting.meet(city)
        return {'city': city, 'celsius': len(city) * 3}

    @agent.tool_plain
    def warmer(a: float, b: float) -> str:
        """Which of two temperatures is warmer."""
        return 'first' if a > b else 'second'

    return agent


async def test_the_agent_plans_once_and_answers_after_two_model_calls() -> None:
    meeting = Meeting(parties=2)
    the_plan = plan(step('paris', 'weather', city='Paris'), step('tokyo', 'weather', city='Tokyo'),
                    step('cmp', 'warmer', a='$ref:paris.celsius', b='$ref:tokyo.celsius'), output_steps=['cmp'])
    script = Script([calls_plan(the_plan), answer('Tokyo is warmer')])
    result = await weather_agent(script, meeting).run('Which is warmer, Paris or Tokyo?')

    assert result.output == 'Tokyo is warmer'
    assert len(script.requests) == 2
    assert script.tools[0] == ['weather', 'warmer', 'execute_tool_plan']
    assert meeting.overlapped('Paris', 'Tokyo')  # both steps were running at one moment
    [returned] = script.tool_returns(1)
    assert isinstance(returned, ToolReturnPart)
    assert (returned.tool_name, returned.content) == ('execute_tool_plan', '{"cmp": "second"}')
    first = script.requests[0][0]
    assert isinstance(first, ModelRequest) and first.instructions is not None
    assert first.instructions.startswith('# Tool Planning')


async def test_sync_tools_of_a_toolset_run_in_parallel_in_worker_threads() -> None:
    meeting = Meeting(parties=2)

    def lookup(key: str) -> str:
        """Look a key up."""
        meeting.meet_in_thread(key)
        return key.upper()

    toolset = PlanToolset(FunctionToolset([lookup]))
    script = Script([calls_plan(plan(step('a', 'lookup', key='x'), step('b', 'lookup', key='y'))), answer()])
    await Agent(script.model(), toolsets=[toolset]).run('go')
    assert meeting.overlapped('x', 'y')
    [returned] = script.tool_returns(1)
    assert returned.content == '{"a": "X", "b": "Y"}'


async def test_a_tool_that_raises_fails_its_step_and_its_sibling_still_runs() -> None:
    toolset = FunctionToolset[None]()

    @toolset.tool_plain
    def explode(reason: str) -> str:
        """Always fails."""
        raise ModelRetry(f'cannot do {reason}')

    @toolset.tool_plain
    def crash() -> str:
        """Raises a plain exception."""
        raise RuntimeError('disk on fire')

    @toolset.tool_plain
    def fine() -> str:
        """Works."""
        return 'ok'

    the_plan = plan(step('a', 'explode', reason='that'), step('b', 'fine'), step('c', 'crash'),
                    step('d', 'explode', reason='$ref:a'))
    script = Script([calls_plan(the_plan), answer()])
    await Agent(script.model(), toolsets=[PlanToolset(toolset)]).run('go')
    [returned] = script.tool_returns(1)
    assert returned.content == (
        'Plan completed with errors.\n'
        'Results: {"a": "ERROR: cannot do that", "b": "ok", "c": "ERROR: Tool execution failed: disk on fire", '
        '"d": "ERROR: Skipped because dependency \'a\' failed"}\n'
        "Errors: a: cannot do that; c: Tool execution failed: disk on fire; d: Skipped because dependency 'a' failed"
    )


async def test_invalid_arguments_of_a_step_are_reported_with_the_field() -> None:
    toolset = FunctionToolset[None]()

    @toolset.tool_plain
    def double(n: int) -> int:
        """Doubles n."""
        return n * 2

    script = Script([calls_plan(plan(step('a', 'double', n='many'))), answer()])
    await Agent(script.model(), toolsets=[PlanToolset(toolset)]).run('go')
    [returned] = script.tool_returns(1)
    assert str(returned.content) == "Plan execution failed: steps[0] (id 'a'): arguments.n: 'many' is not of type " \
        "'integer'."


async def test_a_plan_naming_an_unknown_tool_runs_nothing_and_lists_the_tools() -> None:
    meeting = Meeting(parties=1, patience=0.5)
    script = Script([calls_plan(plan(step('a', 'weather', city='Oslo'), step('b', 'nope'))), answer()])
    await weather_agent(script, meeting).run('go')
    [returned] = script.tool_returns(1)
    assert isinstance(returned, ToolReturnPart)
    assert "Unknown tool 'nope' in step 'b'. Available tools: weather, warmer" in str(returned.content)
    assert str(returned.content).startswith('Plan execution failed')
    assert meeting.intervals == {}


async def test_malformed_plan_json_gets_a_retry_prompt_then_the_fixed_plan_runs() -> None:
    meeting = Meeting(parties=1)
    script = Script([calls_plan('{"steps": [{"id": "a", '), calls_plan(plan(step('a', 'weather', city='Rome'))),
                     answer()])
    await weather_agent(script, meeting).run('go')
    [retry] = script.tool_returns(1)
    assert isinstance(retry, ToolReturnPart) and (retry.tool_name, retry.outcome) == ('execute_tool_plan', 'retried')
    assert 'Invalid JSON' in str(retry.content)
    [returned] = script.tool_returns(2)
    assert returned.content == '{"a": {"city": "Rome", "celsius": 12}}'


async def test_a_plan_whose_steps_is_not_a_list_gets_every_problem() -> None:
    script = Script([calls_plan({'steps': 'weather Paris', 'output_steps': None}), answer()])
    await weather_agent(script, Meeting(parties=1)).run('go')
    [returned] = script.tool_returns(1)
    assert '"steps" must be an array of step objects' in str(returned.content)


# --- toolweave tools as pydantic-ai tools ------------------------------------------------------------------------


@tool
def greet(name: str, context: ToolCallContext) -> str:
    """Greets someone on behalf of the tenant."""
    return f'hello {name} from {context.get("tenant")}'


@tool
def fail_always(text: str) -> str:
    """Always fails."""
    raise ValueError(f'no {text}')


async def test_toolweave_tools_keep_their_schema_and_the_context_stays_hidden() -> None:
    seen: list[dict[str, Any]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            seen.extend({'name': t.name, 'parameters': t.parameters_json_schema} for t in info.function_tools)
            return ModelResponse(parts=[ToolCallPart('greet', {'name': 'Ada'}), ToolCallPart('fail_always',
                                                                                           {'text': 'way'})])
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        return ModelResponse(parts=[TextPart(' | '.join(str(getattr(p, 'content', '')) for p in last.parts))])

    agent = Agent(FunctionModel(respond), deps_type=str,
                  toolsets=[ToolweaveToolset([greet, fail_always], context=lambda ctx: {'tenant': ctx.deps})])
    result = await agent.run('hi', deps='acme')
    assert seen[0] == {'name': 'greet', 'parameters': dict(greet.definition.parameters)}
    assert 'context' not in json.dumps(seen)
    assert result.output == 'hello Ada from acme | no way'


async def test_a_gated_tool_is_deferred_then_runs_once_approved() -> None:
    ran: list[str] = []

    @requires_approval
    @tool
    def delete(path: str) -> str:
        """Deletes a file."""
        ran.append(path)
        return f'deleted {path}'

    script = Script([ModelResponse(parts=[ToolCallPart('delete', {'path': '/tmp/x'}, tool_call_id='d1')]),
                     answer()])
    agent = Agent(script.model(), toolsets=[ToolweaveToolset([delete])], output_type=[str, DeferredToolRequests])
    first = await agent.run('clean up')
    assert isinstance(first.output, DeferredToolRequests)
    assert [call.tool_name for call in first.output.approvals] == ['delete'] and ran == []
    second = await agent.run(message_history=first.all_messages(),
                             deferred_tool_results=DeferredToolResults(approvals={'d1': True}))
    assert second.output == 'done' and ran == ['/tmp/x']


async def test_a_plan_with_gated_steps_asks_once_before_anything_runs() -> None:
    ran: list[str] = []

    @requires_approval
    @tool
    def delete(path: str) -> str:
        """Deletes a file."""
        ran.append(path)
        return f'deleted {path}'

    @tool
    def listing() -> list[str]:
        """Lists files."""
        ran.append('listing')
        return ['/a', '/b']

    the_plan = plan(step('ls', 'listing'), step('rm', 'delete', path='$ref:ls[0]'))
    script = Script([calls_plan(the_plan), answer('denied'), calls_plan(the_plan, 'plan-2'), answer('approved')])
    agent = Agent(script.model(), output_type=[str, DeferredToolRequests],
                  toolsets=[PlanToolset(ToolweaveToolset([delete, listing]))])
    asked = await agent.run('clean up')
    assert isinstance(asked.output, DeferredToolRequests) and ran == []
    gated = [{'id': 'rm', 'tool': 'delete', 'arguments': {'path': '$ref:ls[0]'}}]
    assert asked.output.metadata['plan-1']['steps'] == gated

    denied = await agent.run(message_history=asked.all_messages(),
                             deferred_tool_results=DeferredToolResults(approvals={'plan-1': ToolDenied('not today')}))
    assert denied.output == 'denied' and ran == []
    assert 'not today' in str(script.tool_returns(1)[0].content)

    again = await agent.run('clean up', message_history=denied.all_messages())
    assert isinstance(again.output, DeferredToolRequests)
    approved = await agent.run(message_history=again.all_messages(),
                               deferred_tool_results=DeferredToolResults(approvals={'plan-2': True}))
    assert approved.output == 'approved' and ran == ['listing', '/a']
    assert script.tool_returns(3)[0].content == '{"ls": ["/a", "/b"], "rm": "deleted /a"}'


async def test_a_pipeline_and_a_hidden_gate_inside_it_asks_the_review_handler() -> None:
    reviewer = RecordingReviewHandler()
    shout = TextTool.from_function('shout', 'Upper-cases text', str.upper)
    publish = requires_approval(TextTool.from_function('publish', 'Publishes', lambda text: f'published {text}'))
    pipeline = ToolPipeline.of(shout, publish)
    script = Script([ModelResponse(parts=[ToolCallPart(pipeline.name, {'input': 'hi'})]), answer()])
    agent = Agent(script.model(), toolsets=[ToolweaveToolset([pipeline], review_handler=reviewer)])
    await agent.run('go')
    assert script.tool_returns(1)[0].content == 'published HI'
    assert [r.tool_name for r in reviewer.requests] == ['publish']


async def test_a_hidden_gate_without_a_review_handler_is_a_configuration_error() -> None:
    publish = requires_approval(TextTool.from_function('publish', 'Publishes', lambda text: f'published {text}'))
    pipeline = ToolPipeline.of(TextTool.from_function('same', 'Same text', str.strip), publish)
    gated_step_plan = plan(step('p', pipeline.name, input='x'))
    script = Script([calls_plan(gated_step_plan)])
    agent = Agent(script.model(), capabilities=[ToolPlanning()], toolsets=[ToolweaveToolset([pipeline])])
    with pytest.raises(ToolConfigurationError) as raised:
        await agent.run('go')
    assert str(raised.value) == (  # what the adapter's user does, not what a toolweave Agent's user would
        "Tool 'publish' asked for approval while it ran, where the framework could not ask before the call (a gated "
        'tool inside a pipeline, a tool that calls another, a sub-agent). Pass `review_handler=` to `PlanToolset`, '
        'or gate the outer tool with `requires_approval` so the framework asks first.')


async def test_cancelling_the_run_cancels_every_running_step() -> None:
    hang = Hang(parties=2)
    agent = Agent(Script([calls_plan(plan(step('a', 'wait', key='a'), step('b', 'wait', key='b')))]).model(),
                  capabilities=[ToolPlanning()])

    @agent.tool_plain
    async def wait(key: str) -> str:
        """Waits."""
        await hang.hang(key)
        return key

    async with anyio.create_task_group() as group:
        group.start_soon(agent.run, 'go')
        await hang.wait_until_all_started()
        group.cancel_scope.cancel()
    assert sorted(hang.cancelled) == ['a', 'b']


async def test_a_toolsets_tools_as_toolweave_tools_outside_an_agent_run() -> None:
    toolset = FunctionToolset[str]()

    @toolset.tool
    def whoami(ctx: RunContext[str], greeting: str) -> str:
        """Greets with the user's name."""
        return f'{greeting}, {ctx.deps}'

    ctx = RunContext(deps='Ada', model=TestModel(), usage=RunUsage())
    tools = await toolweave_tools(toolset, ctx)
    assert [t.name for t in tools] == ['whoami']
    assert tools[0].definition.parameters['required'] == ['greeting']
    run = await run_plan(plan(step('a', 'whoami', greeting='hi'), step('b', 'whoami', greeting={'$ref': 'a'})), tools)
    assert run.steps[0].output == 'hi, Ada'
    assert run.steps[1].output == 'hi, Ada, Ada'


async def test_the_plan_tool_name_must_not_clash() -> None:
    toolset = FunctionToolset[None]()

    @toolset.tool_plain
    def execute_tool_plan() -> str:
        """A tool already called like the plan tool."""
        return ''

    agent = Agent(TestModel(), toolsets=[PlanToolset(toolset)])
    with pytest.raises(ValueError, match="already has a tool named 'execute_tool_plan'"):
        await agent.run('go')


_: Callable[..., Any] = greet  # the decorated function stays usable as a tool object


async def test_plan_steps_call_toolweave_tools_with_their_context_and_keep_their_failures() -> None:
    toolset = PlanToolset(ToolweaveToolset([greet, fail_always], context=lambda ctx: {'tenant': ctx.deps}))
    script = Script([calls_plan(plan(step('a', 'greet', name='Ada'), step('b', 'fail_always', text='way'))),
                     answer()])
    await Agent(script.model(), deps_type=str, toolsets=[toolset]).run('go', deps='acme')
    assert script.tool_returns(1)[0].content == ('Plan completed with errors.\nResults: {"a": "hello Ada from acme", '
                                                 '"b": "ERROR: no way"}\nErrors: b: no way')


async def test_a_step_whose_tool_asks_for_approval_while_it_runs_fails_and_says_to_call_it_directly() -> None:
    toolset = FunctionToolset[None]()

    @toolset.tool_plain
    def transfer(amount: int) -> str:
        """Moves money."""
        return f'moved {amount}'

    gated = toolset.approval_required(lambda ctx, tool_def, args: args['amount'] > 100)
    the_plan = plan(step('small', 'transfer', amount=5), step('big', 'transfer', amount=500))
    script = Script([calls_plan(the_plan), answer()])
    await Agent(script.model(), toolsets=[PlanToolset(gated)], output_type=[str, DeferredToolRequests]).run('go')
    assert script.tool_returns(1)[0].content == (
        'Plan completed with errors.\nResults: {"small": "moved 5", "big": "ERROR: Tool \'transfer\' asked to be '
        "approved or completed outside the run when it was called, which a plan step cannot wait for. Call 'transfer' "
        "directly instead of in a plan.\"}\nErrors: big: Tool 'transfer' asked to be approved or completed outside the "
        "run when it was called, which a plan step cannot wait for. Call 'transfer' directly instead of in a plan."
    )


async def test_a_plan_calling_a_pydantic_ai_tool_that_requires_approval_is_deferred_once() -> None:
    ran: list[int] = []
    toolset = FunctionToolset[None]()

    @toolset.tool_plain(requires_approval=True)
    def transfer(amount: int) -> str:
        """Moves money."""
        ran.append(amount)
        return f'moved {amount}'

    the_plan = plan(step('a', 'transfer', amount=5), step('b', 'transfer', amount=7))
    script = Script([calls_plan(the_plan), answer()])
    agent = Agent(script.model(), toolsets=[PlanToolset(toolset)], output_type=[str, DeferredToolRequests])
    asked = await agent.run('pay')
    assert isinstance(asked.output, DeferredToolRequests) and ran == []
    assert [s['id'] for s in asked.output.metadata['plan-1']['steps']] == ['a', 'b']
    await agent.run(message_history=asked.all_messages(),
                    deferred_tool_results=DeferredToolResults(approvals={'plan-1': True}))
    assert sorted(ran) == [5, 7]
    assert script.tool_returns(1)[0].content == '{"a": "moved 5", "b": "moved 7"}'


async def test_an_approved_plan_with_a_hidden_gate_and_no_review_handler_says_how_to_fix_it() -> None:
    @requires_approval
    @tool
    def delete(path: str) -> str:
        """Deletes a file."""
        return f'deleted {path}'

    publish = requires_approval(TextTool.from_function('publish', 'Publishes', lambda text: f'published {text}'))
    pipeline = ToolPipeline.of(TextTool.from_function('same', 'Same text', str.strip), publish)
    the_plan = plan(step('rm', 'delete', path='/x'), step('p', pipeline.name, input='news'))
    script = Script([calls_plan(the_plan), answer()])
    agent = Agent(script.model(), output_type=[str, DeferredToolRequests],
                  toolsets=[PlanToolset(ToolweaveToolset([delete, pipeline]))])
    asked = await agent.run('go')
    assert isinstance(asked.output, DeferredToolRequests)
    with pytest.raises(ToolConfigurationError) as raised:
        await agent.run(message_history=asked.all_messages(),
                        deferred_tool_results=DeferredToolResults(approvals={'plan-1': True}))
    assert str(raised.value) == (
        "Tool 'publish' asked for approval while it ran, where the framework could not ask before the call (a gated "
        'tool inside a pipeline, a tool that calls another, a sub-agent). Pass `review_handler=` to `PlanToolset`, '
        'or gate the outer tool with `requires_approval` so the framework asks first.'
    )


async def test_each_plan_step_over_a_toolweave_tool_is_traced_and_recorded_once() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from toolweave import GLOBAL_METRICS, InstrumentationSettings, instrument

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    script = Script([calls_plan(plan(step('a', 'greet', name='Ada'), step('b', 'greet', name='Bo'))), answer()])
    agent = Agent(script.model(), toolsets=[PlanToolset(ToolweaveToolset([greet]))])
    instrument(InstrumentationSettings(tracer_provider=provider))
    try:
        await agent.run('go')
    finally:
        instrument(False)
    spans = exporter.get_finished_spans()
    by_id = {span.context.span_id: span for span in spans}
    calls = [span for span in spans if span.name == 'execute_tool greet']
    assert len(calls) == 2  # one per step, not one for the step and one more for the tool behind it
    assert sorted(by_id[span.parent.span_id].name for span in calls if span.parent) == ['plan_step a', 'plan_step b']
    assert GLOBAL_METRICS.snapshot()['greet'].calls == 2
