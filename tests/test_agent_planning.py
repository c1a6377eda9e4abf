"""Tool planning in the agent loop: registration, plan runs captured, step events, usage and budget."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolweave import (
    Agent,
    AgentEvent,
    Budget,
    PlanStepFinished,
    PlanStepStarted,
    ReviewDecision,
    ReviewRequest,
    ToolMetadata,
    Toolset,
    UsageLimitExceeded,
)
from toolweave.models import SystemMessage, ToolMessage
from toolweave.plan import PlanRun, planning_instructions
from toolweave.testing import FakeTool, ScriptedModel

pytestmark = pytest.mark.anyio



def plan_call(steps: list[tuple[str, str, dict[str, Any]]], output_steps: list[str] | None = None) -> dict[str, Any]:
    plan: dict[str, Any] = {'steps': [{'id': i, 'tool': t, 'arguments': json.dumps(a)} for i, t, a in steps]}
    if output_steps is not None:
        plan['output_steps'] = output_steps
    return {'tool': 'execute_tool_plan', 'arguments': plan}


def test_planning_is_opt_in() -> None:
    agent = Agent(ScriptedModel([]), instructions='Help.', tools=[FakeTool('a')])
    assert not agent.tool_planning
    assert [d.name for d in agent.tool_definitions()] == ['a']
    assert agent.instructions == 'Help.'


def test_planning_registers_one_meta_tool_and_appends_instructions() -> None:
    agent = Agent(ScriptedModel([]), instructions='Help.', tools=[FakeTool('a'), FakeTool('b')], tool_planning=True)
    names = [d.name for d in agent.tool_definitions()]
    assert names == ['a', 'b', 'execute_tool_plan'] and names.count('execute_tool_plan') == 1
    assert agent.instructions.startswith('Help.\n\n# Tool Planning')
    assert agent.instructions.endswith(planning_instructions(tools=agent.toolset.tools))
    assert '"tool": "a"' in agent.instructions and '"reviews"' not in agent.instructions  # the example is real
    assert all(word in agent.instructions for word in ('execute_tool_plan', 'output_steps', '$ref:'))


def test_planning_without_tools_registers_nothing() -> None:
    agent = Agent(ScriptedModel([]), instructions='Help.', tools=[], tool_planning=True)
    assert not agent.tool_planning and agent.tool_definitions() == [] and agent.instructions == 'Help.'


async def test_instructions_are_sent_as_the_system_prompt() -> None:
    model = ScriptedModel(['ok'])
    await Agent(model, tools=[FakeTool('a')], tool_planning=True).run('go')
    first = model.requests[0].messages[0]
    assert isinstance(first, SystemMessage) and first.content.startswith('# Tool Planning')
    assert [t.name for t in model.requests[0].tools] == ['a', 'execute_tool_plan']


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_a_plan_runs_in_two_llm_calls_and_is_captured(anyio_backend: str) -> None:
    weather = FakeTool('get_weather', lambda a: {'city': a['city'], 'temp': len(a['city'])}, delay=0.2)
    compare = FakeTool('compare', lambda a: {'warmest': max(a['temps'])})
    model = ScriptedModel([
        plan_call([('a', 'get_weather', {'city': 'Oslo'}), ('b', 'get_weather', {'city': 'Lisbon'}),
                   ('c', 'get_weather', {'city': 'Rome'}),
                   ('cmp', 'compare', {'temps': ['$ref:a.temp', '$ref:b.temp', '$ref:c.temp']})], ['cmp']),
        'Lisbon is warmest.',
    ])
    agent = Agent(model, tools=[weather, compare], tool_planning=True)
    start = anyio.current_time()
    result = await agent.run('Compare the weather.')
    assert anyio.current_time() - start < 0.55  # the three lookups ran in parallel
    assert result.output == 'Lisbon is warmest.'
    assert result.usage.llm_calls == 2
    assert result.usage.tool_calls == 4  # the plan's steps; the meta-tool call itself is not counted
    [run] = result.plan_runs
    assert isinstance(run, PlanRun) and run.ok and run.total == 4
    assert run.step('cmp').value == {'warmest': 6}
    arguments = compare.calls[0].arguments
    assert (json.loads(arguments) if isinstance(arguments, str) else arguments) == {'temps': [4, 6, 4]}
    [message] = [m for m in result.messages if isinstance(m, ToolMessage)]
    assert json.loads(message.content) == {'cmp': {'warmest': 6}}  # only output_steps reach the model
    assert [r.name for r in result.process.history] == ['execute_tool_plan']
    assert result.process.plan_runs == [run]


async def test_plan_steps_become_agent_events() -> None:
    one, two = FakeTool('one', 'x'), FakeTool('two', 'y')
    model = ScriptedModel([plan_call([('s1', 'one', {}), ('s2', 'two', {'v': '$ref:s1'})]), 'done'])
    events: list[AgentEvent] = []
    await Agent(model, tools=[one, two], tool_planning=True).run('go', on_event=events.append)
    steps = [(type(e).__name__, e.step.id) for e in events if isinstance(e, PlanStepStarted | PlanStepFinished)]
    assert steps == [('PlanStepStarted', 's1'), ('PlanStepFinished', 's1'),
                     ('PlanStepStarted', 's2'), ('PlanStepFinished', 's2')]
    finished = [e for e in events if isinstance(e, PlanStepFinished)]
    assert all(e.step.status == 'succeeded' for e in finished)


async def test_plan_steps_get_the_run_context() -> None:  # inside plans
    probe = FakeTool('probe')
    model = ScriptedModel([plan_call([('a', 'probe', {}), ('b', 'probe', {})]), 'ok'])
    result = await Agent(model, tools=[probe], tool_planning=True, context={'tenant': 'acme'}).run('go')
    assert [dict(c.context) for c in probe.calls] == [{'tenant': 'acme'}, {'tenant': 'acme'}]
    assert {c.context.loop_id for c in probe.calls} == {result.process.context.loop_id} != {None}


async def test_invalid_plan_is_text_for_the_model_and_nothing_runs() -> None:
    probe = FakeTool('probe')
    model = ScriptedModel([plan_call([('a', 'nope', {}), ('b', 'probe', {'x': '$ref:zzz'})]), 'fixing'])
    result = await Agent(model, tools=[probe], tool_planning=True).run('go')
    [message] = [m for m in result.messages if isinstance(m, ToolMessage)]
    assert message.is_error and 'Plan execution failed' in message.content
    assert probe.call_count == 0 and result.plan_runs == ()


async def test_plans_use_the_live_toolset() -> None:  # through the agent
    tools = Toolset([FakeTool('a', 'A')])
    agent = Agent(ScriptedModel([plan_call([('x', 'late', {})]), 'ok']), tools=tools, tool_planning=True)
    tools.add(FakeTool('late', 'LATE'))
    result = await agent.run('go')
    assert result.plan_runs[0].step('x').output == 'LATE'


async def test_agent_review_handler_reaches_plan_steps() -> None:
    class Approver:
        def __init__(self) -> None:
            self.seen: list[ReviewRequest] = []

        async def review(self, request: ReviewRequest) -> ReviewDecision:
            self.seen.append(request)
            return ReviewDecision.approve()

    gated = FakeTool('gated', 'ran', metadata=ToolMetadata(requires_approval=True))
    handler = Approver()
    model = ScriptedModel([plan_call([('g', 'gated', {'n': 1})]), 'ok'])
    result = await Agent(model, tools=[gated], tool_planning=True, review_handler=handler).run('go')
    assert result.plan_runs[0].ok and [r.tool_name for r in handler.seen] == ['gated']


async def test_plan_steps_count_toward_the_tool_call_budget() -> None:
    probe = FakeTool('probe')
    model = ScriptedModel([plan_call([('a', 'probe', {}), ('b', 'probe', {}), ('c', 'probe', {})]),
                           {'tool': 'probe', 'arguments': {}}, 'never'])
    agent = Agent(model, tools=[probe], tool_planning=True, budget=Budget(max_tool_calls=3))
    with pytest.raises(UsageLimitExceeded, match='max_tool_calls=3'):
        await agent.run('go')
    assert probe.call_count == 3


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_an_agent_with_a_plan_store_runs_its_plans_durably(anyio_backend: str, tmp_path: Path) -> None:
    from toolweave import ApprovalPending, CallbackReviewHandler, ReviewDecision, tool
    from toolweave.plan.durable import decide, resume_plan

    sent: list[str] = []

    @tool(requires_approval=True)
    def send(to: str) -> str:
        """Send mail."""
        sent.append(to)
        return f'sent to {to}'

    def later(request: object) -> bool:
        raise ApprovalPending('Ada decides')

    lookup = FakeTool('lookup', lambda a: {'email': 'ada@example.com'})
    model = ScriptedModel([plan_call([('who', 'lookup', {}), ('mail', 'send', {'to': '$ref:who.email'})], None),
                           'Waiting for Ada.'])
    store = tmp_path / 'runs.db'
    agent = Agent(model, tools=[lookup, send], tool_planning=True, plan_store=store,
                  review_handler=CallbackReviewHandler(later))
    result = await agent.run('mail Ada')
    (run,) = result.plan_runs
    assert run.run_id is not None and run.suspended and sent == []
    told = model.requests[1].messages[-1].content or ''
    assert f'(run {run.run_id})' in told and 'mail: Waiting for approval: Ada decides' in told
    await decide(run.run_id, 'mail', ReviewDecision.approve(), store=store)
    done = await resume_plan(run.run_id, [lookup, send], store=store)
    assert done.ok and sent == ['ada@example.com'] and len(lookup.calls) == 1


async def test_a_later_plan_refers_to_an_earlier_plans_steps_instead_of_copying_them() -> None:
    rows = [{'id': i, 'score': i * 7 % 11} for i in range(300)]
    catalogue = FakeTool('catalogue', json.dumps(rows))
    first = {'tool': 'execute_tool_plan', 'arguments': {'steps': [{'id': 'all', 'tool': 'catalogue', 'arguments': {}}]}}
    second = {'tool': 'execute_tool_plan', 'arguments': {'steps': [
        {'id': 'best', 'from': '$ref:p1/all', 'select': 'max_by(@, &score).id'},
        {'id': 'count', 'from': '$ref:p1/all', 'select': 'length(@)'}]}}
    wrong = {'tool': 'execute_tool_plan', 'arguments': {'steps': [{'id': 'x', 'from': '$ref:p7/all'},
                                                                  {'id': 'y', 'from': '$ref:p1/nope'}]}}
    model = ScriptedModel([first, second, wrong, 'done'])
    result = await Agent(model, tools=[catalogue], tool_planning=True, plan_options={'max_output_chars': 200}).run('go')
    assert [run.name for run in result.plan_runs] == ['p1', 'p2']
    shown = [m for m in result.messages if isinstance(m, ToolMessage)]
    assert shown[0].content.endswith('characters; the whole value stays available: refer to it as $ref:p1/all (or '
                                     '$ref:p1/all.field) in your next plan, with a select step to keep only what you '
                                     'need]"}')
    assert json.loads(shown[1].content) == {'best': max(rows, key=lambda r: r['score'])['id'], 'count': 300}
    assert shown[2].content == (
        'Error: Plan execution failed: 2 problems (nothing ran; fix them all and resend):\n'
        "- steps[0] (id 'x'): from: reference '$ref:p7/all' names plan 'p7', which is not an earlier plan of this run "
        '(earlier plans: p1, p2).\n'
        "- steps[1] (id 'y'): from: reference '$ref:p1/nope': plan 'p1' has no step 'nope'. Its steps with a value: "
        'all.')
    assert catalogue.calls and len(catalogue.calls) == 1  # read once, used twice


async def test_for_each_elements_are_agent_events() -> None:
    from toolweave import PlanItemFinished

    echo = FakeTool('echo', lambda args: args['text'], parameters={'type': 'object', 'properties': {
        'text': {'type': 'string'}}})
    events: list[AgentEvent] = []
    model = ScriptedModel([{'tool': 'execute_tool_plan', 'arguments': {'steps': [
        {'id': 'e', 'tool': 'echo', 'for_each': ['a', 'b'], 'arguments': {'text': '$item'}}]}}, 'done'])
    await Agent(model, tools=[echo], tool_planning=True).run('go', on_event=events.append)
    items = [e for e in events if isinstance(e, PlanItemFinished)]
    assert sorted((e.step.id, e.item.index, e.item.output) for e in items) == [('e', 0, 'a'), ('e', 1, 'b')]
    assert [type(e).__name__ for e in events if isinstance(e, PlanStepStarted | PlanStepFinished)] == [
        'PlanStepStarted', 'PlanStepFinished']


async def test_a_typed_plan_schema_in_an_agent_run_accepts_nulls_for_arguments_left_out() -> None:
    from toolweave import tool

    @tool
    def weather(city: str, days: int = 1) -> str:
        """Weather."""
        return f'{city} for {days} day(s)'

    model = ScriptedModel([{'tool': 'execute_tool_plan', 'arguments': {'steps': [
        {'id': 'w', 'tool': 'weather', 'arguments': {'city': 'Oslo', 'days': None}, 'for_each': None,
         'when': None}], 'output_steps': None}}, 'done'])
    agent = Agent(model, tools=[weather], tool_planning=True, plan_options={'plan_schema': 'typed'})
    [plan_tool] = [d for d in agent.tool_definitions() if d.name == 'execute_tool_plan']
    assert plan_tool.metadata.strict is True
    result = await agent.run('go')
    assert result.plan_runs[0].summary == '{"w": "Oslo for 1 day(s)"}'
