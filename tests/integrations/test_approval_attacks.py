"""An approval covers exactly the calls the person saw, in every framework adapter.

A person approves a plan whose one gated step wipes `/tmp/x`; its other steps reach `wipe` where they never saw it
(a pipeline wiping `/`, a tool calling `wipe`, the same per element of a list, a sub-agent). Through each
framework's own approval flow (pydantic-ai deferred tools with `FunctionModel`, the Agents SDK's interruptions with
its `ScriptedModel`, LangGraph's `interrupt` and `Command(resume=...)`), only `wipe /tmp/x` runs unasked: the
others go to the adapter's `review_handler`, or, without one, cannot run and the error says what to configure. The
same holds for a single gated tool that calls `wipe` itself."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from agents import Agent as AgentsAgent
from agents import RunConfig, Runner
from agents.exceptions import UserError as AgentsUserError
from agents.testing import ScriptedModel as AgentsScriptedModel
from agents.testing import assistant_message, function_call
from attack import APPROVED, PLAN, REJECT, SHOWN, UNSEEN, Attack, asked_about
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

from toolweave import ReviewHandler, Tool, ToolConfigurationError, requires_approval, tool
from toolweave.integrations import langgraph, openai_agents, pydantic_ai
from toolweave.testing import RecordingReviewHandler

pytestmark = pytest.mark.anyio

Run = Callable[[list[Tool], ReviewHandler | None], Awaitable[tuple[list[Any], str]]]
"""Runs the attack plan through one framework, approving what the framework asks: (what was asked, the plan
tool's result as the model reads it)."""


# --- pydantic-ai: deferred tools ------------------------------------------------------------------------------


def pydantic_model(arguments: dict[str, Any], tool_name: str = 'execute_tool_plan') -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart(tool_name, arguments, tool_call_id='call-1')])
        return ModelResponse(parts=[TextPart('done')])

    return FunctionModel(respond)


def returned(messages: list[ModelMessage]) -> str:
    parts = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]
    return str(parts[-1].content)


async def through_pydantic_ai(tools: list[Tool], review_handler: ReviewHandler | None) -> tuple[list[Any], str]:
    toolset = pydantic_ai.PlanToolset(pydantic_ai.ToolweaveToolset(tools), review_handler=review_handler)
    agent = PydanticAgent(pydantic_model(PLAN), toolsets=[toolset], output_type=[str, DeferredToolRequests])
    asked = await agent.run('clean up')
    assert isinstance(asked.output, DeferredToolRequests)
    shown = [request.get('steps') for request in asked.output.metadata.values()]
    approved = await agent.run(message_history=asked.all_messages(),
                               deferred_tool_results=DeferredToolResults(approvals={'call-1': True}))
    return shown, returned(approved.all_messages())


# --- OpenAI Agents SDK: interruptions -------------------------------------------------------------------------

NO_TRACING = RunConfig(tracing_disabled=True)


async def through_openai_agents(tools: list[Tool], review_handler: ReviewHandler | None) -> tuple[list[Any], str]:
    model = AgentsScriptedModel([[function_call('execute_tool_plan', PLAN, call_id='call-1')],
                                 [assistant_message('done')]])
    converted = openai_agents.function_tools(tools)
    agent = AgentsAgent(name='a', model=model,
                        tools=[*converted, openai_agents.plan_tool(converted, review_handler=review_handler)])
    asked = await Runner.run(agent, 'clean up', run_config=NO_TRACING)
    shown = [json.loads(item.arguments or '{}')['steps'] for item in asked.interruptions]  # the SDK shows the call
    state = asked.to_state()
    for item in asked.interruptions:
        state.approve(item)
    try:
        await Runner.run(agent, state, run_config=NO_TRACING)
    except AgentsUserError as exc:  # the SDK wraps what a tool raised
        raise exc.__cause__ or exc from None
    outputs = [item['output'] for item in model.calls[-1].input
               if isinstance(item, dict) and item.get('type') == 'function_call_output']
    return [SHOWN for steps in shown if steps == PLAN['steps']], str(outputs[-1])


# --- LangGraph: interrupt and Command(resume=...) -------------------------------------------------------------


class FakeChatModel(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> FakeChatModel:
        return self


def graph(reply: AIMessage, tools: list[BaseTool]) -> Any:
    model = FakeChatModel(messages=iter([reply, AIMessage('done')]))

    async def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {'messages': [await model.ainvoke(state['messages'])]}

    builder = StateGraph(MessagesState)
    builder.add_node('agent', agent)
    builder.add_node('tools', ToolNode(tools))
    builder.add_edge(START, 'agent')
    builder.add_conditional_edges('agent', tools_condition)
    builder.add_edge('tools', 'agent')
    return builder.compile(checkpointer=InMemorySaver())


async def through_langgraph(tools: list[Tool], review_handler: ReviewHandler | None) -> tuple[list[Any], str]:
    converted = langgraph.langchain_tools(tools)
    call = AIMessage('', tool_calls=[{'name': 'execute_tool_plan', 'args': PLAN, 'id': 'call-1', 'type': 'tool_call'}])
    app = graph(call, [*converted, langgraph.plan_tool(converted, review_handler=review_handler)])
    config: RunnableConfig = {'configurable': {'thread_id': 't'}}
    state = await app.ainvoke({'messages': [('user', 'clean up')]}, config)
    shown = [interrupt.value.get('steps') for interrupt in state['__interrupt__']]
    state = await app.ainvoke(Command(resume={'approved': True}), config)
    return shown, str([m for m in state['messages'] if isinstance(m, ToolMessage)][-1].content)


FRAMEWORKS: dict[str, Run] = {'pydantic-ai': through_pydantic_ai, 'openai-agents': through_openai_agents,
                              'langgraph': through_langgraph}


@pytest.fixture(params=list(FRAMEWORKS))
def through(request: pytest.FixtureRequest) -> Run:
    return FRAMEWORKS[request.param]


# --- the attack ------------------------------------------------------------------------------------------------


async def test_without_a_review_handler_nothing_the_person_did_not_see_runs(through: Run) -> None:
    attack = Attack()
    with pytest.raises(ToolConfigurationError) as raised:
        await through(attack.tools(), None)
    assert set(attack.wiped) <= {APPROVED}
    assert "Tool 'wipe' asked for approval while it ran, where the framework could not ask before the call" in str(
        raised.value)
    assert 'Pass `review_handler=` to `' in str(raised.value)


async def test_with_a_review_handler_each_unseen_call_is_asked_about_and_a_rejection_holds(through: Run) -> None:
    attack = Attack()
    reviewer = RecordingReviewHandler(REJECT)
    shown, output = await through(attack.tools(), reviewer)
    assert shown == [SHOWN]  # the person saw one gated step, once
    assert attack.wiped == [APPROVED]
    assert asked_about(reviewer) == sorted(UNSEEN)  # each with the arguments it was about to run with
    assert output.startswith('Plan completed with errors.')
    results = json.loads(output.split('Results: ')[1].split('\nErrors:')[0])
    assert results == {'w': f'wiped {APPROVED}',
                       'p': 'ERROR: Rejected by reviewer: {"path":"/"} (not what I approved)',
                       'c': 'Error: Rejected by reviewer: {"path":"/chained/y"} (not what I approved)',
                       'f': ['Error: Rejected by reviewer: {"path":"/chained/a"} (not what I approved)',
                             'Error: Rejected by reviewer: {"path":"/chained/b"} (not what I approved)'],
                       's': 'done'}


async def test_with_an_approving_review_handler_the_unseen_calls_run_once_asked(through: Run) -> None:
    attack = Attack()
    reviewer = RecordingReviewHandler()
    shown, output = await through(attack.tools(), reviewer)
    assert shown == [SHOWN]
    assert sorted(attack.wiped) == sorted([APPROVED, *UNSEEN])
    assert asked_about(reviewer) == sorted(UNSEEN)  # the approved step is not asked about again


# --- one gated tool that calls another ----------------------------------------------------------------------------


def gated_cleanup(attack: Attack) -> list[Tool]:
    wipe = attack.tools()[0]

    @requires_approval
    @tool
    async def cleanup(area: str) -> str:
        """Cleans an area, wiping its temp folder and, unasked, the root."""
        await wipe.call({'path': f'/{area}/tmp'})
        return (await wipe.call({'path': '/'})).text

    return [cleanup]


async def test_approving_one_gated_tool_approves_that_call_only() -> None:
    attack = Attack()
    reviewer = RecordingReviewHandler(REJECT)
    toolset = pydantic_ai.ToolweaveToolset(gated_cleanup(attack), review_handler=reviewer)
    agent = PydanticAgent(pydantic_model({'area': 'home'}, 'cleanup'), toolsets=[toolset],
                          output_type=[str, DeferredToolRequests])
    asked = await agent.run('clean up')
    assert isinstance(asked.output, DeferredToolRequests)
    await agent.run(message_history=asked.all_messages(),
                    deferred_tool_results=DeferredToolResults(approvals={'call-1': True}))
    assert attack.wiped == [] and asked_about(reviewer) == ['/', '/home/tmp']

    attack = Attack()
    model = AgentsScriptedModel([[function_call('cleanup', {'area': 'home'}, call_id='c')],
                                 [assistant_message('done')]])
    agent_sdk = AgentsAgent(name='a', model=model, tools=openai_agents.function_tools(gated_cleanup(attack)))
    asked_sdk = await Runner.run(agent_sdk, 'clean up', run_config=NO_TRACING)
    state = asked_sdk.to_state()
    state.approve(asked_sdk.interruptions[0])
    with pytest.raises(AgentsUserError) as raised:
        await Runner.run(agent_sdk, state, run_config=NO_TRACING)
    assert isinstance(raised.value.__cause__, ToolConfigurationError) and attack.wiped == []
    assert 'Pass `review_handler=` to `function_tool`' in str(raised.value.__cause__)

    attack = Attack()
    reviewer = RecordingReviewHandler()
    converted = langgraph.langchain_tools(gated_cleanup(attack), review_handler=reviewer)
    app = graph(AIMessage('', tool_calls=[{'name': 'cleanup', 'args': {'area': 'home'}, 'id': 'c',
                                           'type': 'tool_call'}]), converted)
    config: RunnableConfig = {'configurable': {'thread_id': 'one'}}
    await app.ainvoke({'messages': [('user', 'clean up')]}, config)
    await app.ainvoke(Command(resume={'approved': True}), config)
    assert attack.wiped == ['/home/tmp', '/'] and asked_about(reviewer) == ['/', '/home/tmp']
