"""Sub-agents: an Agent used as a tool, its input schema, the spawned blackboard, context and usage."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

import toolweave
from toolweave import Agent, Budget, SubAgentTool, UserError, tool
from toolweave.models import ToolMessage, UserMessage
from toolweave.testing import FakeTool, FunctionModel, ScriptedModel

pytestmark = pytest.mark.anyio


class WorksToFind(BaseModel):
    composer: str = Field(description='Who wrote the works.')
    count: int = 3


def call(name: str, arguments: Any = None) -> dict[str, Any]:
    return {'tool': name, 'arguments': arguments or {}}


def test_input_schema_comes_from_the_pydantic_model() -> None:
    child = Agent(ScriptedModel([]), name='finder', description='Finds performances.')
    sub = child.as_tool(input_type=WorksToFind)
    assert isinstance(sub, SubAgentTool)
    assert sub.name == 'finder' and sub.description == 'Finds performances.'
    params = dict(sub.definition.parameters)
    assert params['properties'] == {
        'composer': {'description': 'Who wrote the works.', 'type': 'string'},
        'count': {'default': 3, 'type': 'integer'},
    }
    assert params['required'] == ['composer'] and params['additionalProperties'] is False
    assert 'title' not in params


def test_default_schema_is_a_prompt_string() -> None:
    sub = Agent(ScriptedModel([]), name='helper').as_tool('ask_helper', 'Ask the helper.')
    assert sub.name == 'ask_helper' and sub.description == 'Ask the helper.'
    assert sub.definition.parameters['required'] == ['prompt']


def test_bad_sub_agent_configuration() -> None:
    agent = Agent(ScriptedModel([]))
    with pytest.raises(UserError, match='pydantic BaseModel'):
        agent.as_tool(input_type=dict)  # type: ignore[arg-type]
    with pytest.raises(UserError, match='input_type'):
        agent.as_tool(prompt=lambda x: 'x')
    with pytest.raises(toolweave.ToolNameError):
        agent.as_tool('bad name')


async def test_sub_agent_shares_a_spawned_blackboard_with_its_parent() -> None:
    seen_by_child: list[Any] = []

    @tool
    def look() -> str:
        """Look at what the parent put on the blackboard."""
        process = toolweave.current_process()
        assert process is not None
        seen_by_child.append(process.blackboard.get('order'))
        seen_by_child.append(process.blackboard.get('input'))
        process.add('child finding', name='finding')
        return 'looked'

    @tool
    def prepare() -> str:
        """Put an order on the blackboard."""
        process = toolweave.current_process()
        assert process is not None
        process.add({'id': 7}, name='order')
        return 'prepared'

    child_model = ScriptedModel([call('look'), 'child answer'])
    child = Agent(child_model, tools=[look], name='finder')
    parent_model = ScriptedModel([call('prepare'), call('finder', {'composer': 'Bach'}), 'parent answer'])
    parent = Agent(parent_model, tools=[prepare, child.as_tool(input_type=WorksToFind)])
    result = await parent.run('go')

    assert result.output == 'parent answer'
    assert seen_by_child == [{'id': 7}, WorksToFind(composer='Bach')]
    board = result.process.blackboard
    assert board.get('finding') == 'child finding'  # published to the parent when the child finished
    tool_messages = [m for m in result.messages if isinstance(m, ToolMessage)]
    assert tool_messages[1].content == 'child answer'
    # the child's prompt is the validated input as JSON
    assert child_model.requests[0].messages[-1] == UserMessage('{"composer":"Bach","count":3}')
    # usage rolls up: 3 parent LLM calls + 2 child calls; tool calls: prepare, finder, look
    assert result.usage.llm_calls == 5 and result.usage.tool_calls == 3
    assert result.process.models['scripted'].requests == 5


async def test_sub_agent_input_errors_go_back_to_the_model() -> None:
    child_model = ScriptedModel([])
    child = Agent(child_model, name='finder')
    parent_model = ScriptedModel([call('finder', {'count': 'many'}), 'gave up'])
    result = await Agent(parent_model, tools=[child.as_tool(input_type=WorksToFind)]).run('go')
    [message] = [m for m in result.messages if isinstance(m, ToolMessage)]
    assert message.is_error and 'composer: Field required' in message.content and 'count:' in message.content
    assert child_model.call_count == 0


async def test_sub_agent_gets_the_call_context_and_a_new_loop_id() -> None:
    probe = FakeTool('probe')
    child = Agent(ScriptedModel([call('probe'), 'done']), tools=[probe], name='child', context={'base': 1})
    parent = Agent(ScriptedModel([call('child', {'prompt': 'do it'}), 'ok']), tools=[child.as_tool()],
                   context={'tenant': 'acme'})
    result = await parent.run('go', context={'user': 'u1'})
    seen = probe.calls[0].context
    assert seen['tenant'] == 'acme' and seen['user'] == 'u1' and seen['base'] == 1
    assert seen.loop_id is not None and seen.loop_id != result.process.context.loop_id


async def test_sub_agent_prompt_formatter_and_failure() -> None:
    child = Agent(ScriptedModel(['x']), name='child', budget=Budget(max_llm_calls=0))
    sub = child.as_tool(input_type=WorksToFind, prompt=lambda w: f'Find {w.count} works by {w.composer}.')
    result = await Agent(ScriptedModel([call('child', {'composer': 'Bach'}), 'ok']), tools=[sub]).run('go')
    [message] = [m for m in result.messages if isinstance(m, ToolMessage)]
    assert message.is_error and 'max_llm_calls=0' in message.content  # a child's budget becomes a failure


async def test_sub_agent_events_bubble_up_to_the_parent() -> None:
    child = Agent(ScriptedModel(['child says hi']), name='child')
    parent = Agent(ScriptedModel([call('child', {'prompt': 'hi'}), 'ok']), tools=[child.as_tool()])
    events: list[toolweave.AgentEvent] = []
    result = await parent.run('go', on_event=events.append)
    assert len({e.process_id for e in events}) == 2
    assert result.process.id in {e.process_id for e in events}


async def test_sub_agent_tool_outside_a_run_uses_a_fresh_blackboard() -> None:
    child = Agent(ScriptedModel(['alone']), name='child')
    result = await child.as_tool().call({'prompt': 'hi'})
    assert result.output == 'alone'
    missing = await child.as_tool().call({'prompt': ''})
    assert missing.error is not None and 'prompt' in missing.error


async def test_an_agent_calling_itself_stops_at_the_nesting_limit() -> None:
    model = FunctionModel(lambda messages, tools: 'gave up' if isinstance(messages[-1], ToolMessage) else
                          call('recurse', {'prompt': 'again'}))
    agent = Agent(model, name='recurse')
    agent.toolset.add(agent.as_tool())
    result = await agent.run('go')
    assert result.output == 'gave up'
    assert model.call_count == 2 * 9  # the top run and 8 nested levels, each: call, then answer
    deepest = [m for m in model.requests[9].messages if isinstance(m, ToolMessage)]
    assert deepest and 'nested more than 8 levels' in deepest[0].content


# --- one budget for the whole tree of runs -------------------------------------------------------------------


def self_planner(breadth: int) -> FunctionModel:
    """A model that answers every new task with a plan calling the agent itself `breadth` times."""

    def reply(messages: list[Any], tools: list[Any]) -> Any:
        if not isinstance(messages[-1], UserMessage):
            return 'done'
        steps = [{'id': f's{i}', 'tool': 'myself', 'arguments': '{"prompt": "again"}'} for i in range(breadth)]
        return {'tool': 'execute_tool_plan', 'arguments': {'steps': steps, 'output_steps': None}}

    return FunctionModel(reply)


async def test_a_budget_bounds_every_model_request_of_the_tree_of_sub_agents() -> None:
    from toolweave import Toolset, UsageLimitExceeded

    model = self_planner(2)
    tools = Toolset()
    agent = Agent(model, tools=tools, tool_planning=True, name='myself',
                  budget=Budget(max_llm_calls=20, max_tool_calls=20))
    tools.add(agent.as_tool())
    with pytest.raises(UsageLimitExceeded):
        await agent.run('go')
    assert model.call_count <= 20


async def test_concurrent_plan_steps_never_run_past_the_tool_call_budget() -> None:
    from toolweave import UsageLimitExceeded

    probe = FakeTool('probe', delay=0.01)
    steps = [{'id': f's{i}', 'tool': 'probe', 'arguments': '{}'} for i in range(30)]
    model = ScriptedModel([{'tool': 'execute_tool_plan', 'arguments': {'steps': steps, 'output_steps': None}},
                           call('probe'), 'never'])
    agent = Agent(model, tools=[probe], tool_planning=True, budget=Budget(max_tool_calls=10))
    with pytest.raises(UsageLimitExceeded, match='max_tool_calls=10'):
        await agent.run('go')
    assert probe.call_count == 10


async def test_an_agent_run_started_by_a_tool_is_part_of_the_callers_run_and_budget() -> None:
    from toolweave import UsageLimitExceeded, current_process

    helper = Agent(ScriptedModel(['one', 'two', 'three']), name='helper')
    seen: list[str] = []

    @tool
    async def ask_helper(question: str) -> str:
        """Ask the helper agent."""
        result = await helper.run(question, objects={'question': question})
        parent = current_process()
        assert parent is not None and result.process.parent is parent
        seen.append(str(result.process.blackboard.get('question')))
        return result.output

    model = ScriptedModel([call('ask_helper', {'question': 'q1'}), call('ask_helper', {'question': 'q2'}), 'never'])
    agent = Agent(model, tools=[ask_helper], budget=Budget(max_llm_calls=3))
    with pytest.raises(UsageLimitExceeded, match='max_llm_calls=3') as caught:
        await agent.run('go')
    assert seen == ['q1']  # the second helper run found the budget used up: 2 of ours + 1 of the first helper's
    process = caught.value.process
    assert isinstance(process, toolweave.AgentProcess) and process.usage.llm_calls == 3
    failure = process.history[1].result.error or ''
    assert "the budget of agent 'agent', 1 level(s) up" in failure
    # a nested run publishes its blackboard to the caller's when it ends, whatever its outcome: the last was q2
    assert process.blackboard.get('question') == 'q2'


async def test_a_parents_token_budget_bounds_its_sub_agents() -> None:
    from toolweave import UsageLimitExceeded

    child = Agent(ScriptedModel(['a long answer ' * 40, 'again']), name='child')
    parent = Agent(ScriptedModel([call('child', {'prompt': 'talk'}), call('child', {'prompt': 'more'}), 'never']),
                   tools=[child.as_tool()], budget=Budget(max_tokens=150))
    with pytest.raises(UsageLimitExceeded, match='Token budget exhausted'):
        await parent.run('go')
    assert child.model.call_count == 1  # type: ignore[attr-defined]
