"""toolweave inside LangGraph graphs (`ToolNode`), run with LangChain's own fake chat model."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, Self

import anyio
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool, ToolException
from langchain_core.tools import tool as langchain_tool_decorator
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, ToolRuntime, create_react_agent, tools_condition
from langgraph.types import Command, interrupt
from langgraph.warnings import LangGraphDeprecatedSinceV10
from meeting import Hang, Meeting
from pydantic import ValidationError

from toolweave import (
    McpToolset,
    TextTool,
    ToolCallContext,
    ToolPipeline,
    Toolset,
    requires_approval,
    run_plan,
    tool,
    validate_plan,
)
from toolweave.integrations.langgraph import (
    langchain_tool,
    langchain_tools,
    plan_tool,
    planning_instructions,
    toolweave_tool,
)
from toolweave.testing import RecordingReviewHandler

pytestmark = pytest.mark.anyio


class ToolCallingFakeModel(GenericFakeChatModel):
    """LangChain's fake chat model, replying with the scripted messages in order, with `bind_tools` as a real chat
    model has it: it records the tool schemas it would send (`convert_to_openai_tool`) and the requests it got."""

    bound: list[dict[str, Any]] = []
    requests: list[list[BaseMessage]] = []

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Self:
        self.bound = [convert_to_openai_tool(t) for t in tools]
        return self

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> AIMessage:
        self.requests.append(list(input))
        return await super().ainvoke(input, config, **kwargs)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> AIMessage:
        self.requests.append(list(input))
        return super().invoke(input, config, **kwargs)


def scripted(*replies: AIMessage) -> ToolCallingFakeModel:
    messages: Iterator[AIMessage] = iter(replies)
    return ToolCallingFakeModel(messages=messages, bound=[], requests=[])


def step(step_id: str, tool_name: str, **arguments: Any) -> dict[str, str]:
    return {'id': step_id, 'tool': tool_name, 'arguments': json.dumps(arguments)}


def plan(*steps: dict[str, str], output_steps: list[str] | None = None) -> dict[str, Any]:
    return {'steps': list(steps), 'output_steps': output_steps}


def calls(name: str, arguments: dict[str, Any], call_id: str = 'call-1') -> AIMessage:
    return AIMessage('', tool_calls=[{'name': name, 'args': arguments, 'id': call_id, 'type': 'tool_call'}])


Graph = CompiledStateGraph[Any, Any, Any, Any]


def react_graph(model: ToolCallingFakeModel, tools: list[BaseTool], *, durable: bool = False) -> Graph:
    """The usual agent graph: a model node and a `ToolNode`, looping while the model calls tools."""
    bound = model.bind_tools(tools)

    async def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {'messages': [await bound.ainvoke(state['messages'])]}

    def agent_sync(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {'messages': [bound.invoke(state['messages'])]}

    builder = StateGraph(MessagesState)
    builder.add_node('agent', RunnableLambda(agent_sync, afunc=agent))
    builder.add_node('tools', ToolNode(tools))
    builder.add_edge(START, 'agent')
    builder.add_conditional_edges('agent', tools_condition)
    builder.add_edge('tools', 'agent')
    return builder.compile(checkpointer=InMemorySaver() if durable else None)


def weather_tools(meeting: Meeting) -> list[BaseTool]:
    @langchain_tool_decorator
    async def weather(city: str) -> dict[str, Any]:
        """The weather in a city."""
        await meeting.meet(city)
        return {'city': city, 'celsius': len(city) * 3}

    @langchain_tool_decorator
    def warmer(a: float, b: float) -> str:
        """Which of two temperatures is warmer."""
        return 'first' if a > b else 'second'

    return [weather, warmer]


def with_plan_tool(tools: list[BaseTool]) -> list[BaseTool]:
    return [*tools, plan_tool(tools)]


def tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state['messages'] if isinstance(m, ToolMessage)]


async def test_the_agent_plans_once_and_answers_after_two_model_calls() -> None:
    meeting = Meeting(parties=2)
    the_plan = plan(step('paris', 'weather', city='Paris'), step('tokyo', 'weather', city='Tokyo'),
                    step('cmp', 'warmer', a='$ref:paris.celsius', b='$ref:tokyo.celsius'), output_steps=['cmp'])
    model = scripted(calls('execute_tool_plan', the_plan), AIMessage('Tokyo is warmer'))
    graph = react_graph(model, with_plan_tool(weather_tools(meeting)))
    prompt = [('system', planning_instructions()), ('user', 'Which is warmer, Paris or Tokyo?')]
    state = await graph.ainvoke({'messages': prompt})

    assert state['messages'][-1].content == 'Tokyo is warmer'
    assert len(model.requests) == 2
    assert [t['function']['name'] for t in model.bound] == ['weather', 'warmer', 'execute_tool_plan']
    assert meeting.overlapped('Paris', 'Tokyo')
    [message] = tool_messages(state)
    assert (message.name, message.content, message.status) == ('execute_tool_plan', '{"cmp": "second"}', 'success')


def test_a_sync_graph_runs_sync_tools_in_parallel() -> None:
    meeting = Meeting(parties=2)

    @langchain_tool_decorator
    def lookup(key: str) -> str:
        """Looks a key up."""
        meeting.meet_in_thread(key)
        return key.upper()

    model = scripted(calls('execute_tool_plan', plan(step('a', 'lookup', key='x'), step('b', 'lookup', key='y'))),
                     AIMessage('done'))
    state = react_graph(model, with_plan_tool([lookup])).invoke({'messages': [('user', 'go')]})
    assert meeting.overlapped('x', 'y')
    assert tool_messages(state)[0].content == '{"a": "X", "b": "Y"}'


async def test_errors_of_a_step_become_step_failures_and_siblings_still_run() -> None:
    @langchain_tool_decorator
    def explode(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(f'cannot do {reason}')

    @langchain_tool_decorator
    def refuse() -> str:
        """Fails in a way the tool handles itself."""
        raise ToolException('not allowed')

    refuse.handle_tool_error = True

    @langchain_tool_decorator
    def fine() -> str:
        """Works."""
        return 'ok'

    the_plan = plan(step('a', 'explode', reason='that'), step('b', 'fine'), step('c', 'refuse'),
                    step('d', 'fine', x='$ref:a'))
    model = scripted(calls('execute_tool_plan', the_plan), AIMessage('done'))
    state = await react_graph(model, with_plan_tool([explode, refuse, fine])).ainvoke({'messages': [('user', 'go')]})
    assert tool_messages(state)[0].content == (
        'Plan completed with errors.\nResults: {"a": "ERROR: Tool execution failed: cannot do that", "b": "ok", '
        '"c": "ERROR: not allowed", "d": "ERROR: Skipped because dependency \'a\' failed"}\nErrors: a: Tool '
        "execution failed: cannot do that; c: not allowed; d: Skipped because dependency 'a' failed"
    )


async def test_a_plan_naming_an_unknown_tool_runs_nothing_and_lists_the_tools() -> None:
    meeting = Meeting(parties=1, patience=0.5)
    model = scripted(calls('execute_tool_plan', plan(step('a', 'weather', city='Oslo'), step('b', 'nope'))),
                     AIMessage('done'))
    state = await react_graph(model, with_plan_tool(weather_tools(meeting))).ainvoke({'messages': [('user', 'go')]})
    [message] = tool_messages(state)
    assert message.status == 'error'
    assert message.content == ("Plan execution failed: steps[1] (id 'b'): Unknown tool 'nope' in step 'b'. "
                               'Available tools: weather, warmer.')
    assert meeting.intervals == {}


async def test_malformed_plan_json_gets_every_problem_and_nothing_runs() -> None:
    meeting = Meeting(parties=1, patience=0.5)
    model = scripted(calls('execute_tool_plan', {'steps': '[{"id": "a", ', 'output_steps': None}), AIMessage('done'))
    state = await react_graph(model, with_plan_tool(weather_tools(meeting))).ainvoke({'messages': [('user', 'go')]})
    [message] = tool_messages(state)
    assert message.status == 'error' and '"steps" must be an array of step objects' in str(message.content)
    assert meeting.intervals == {}


async def test_cancelling_the_graph_cancels_every_running_step() -> None:
    hang = Hang(parties=2)

    @langchain_tool_decorator
    async def wait(key: str) -> str:
        """Waits."""
        await hang.hang(key)
        return key

    model = scripted(calls('execute_tool_plan', plan(step('a', 'wait', key='a'), step('b', 'wait', key='b'))))
    graph = react_graph(model, with_plan_tool([wait]))
    async with anyio.create_task_group() as group:
        group.start_soon(graph.ainvoke, {'messages': [('user', 'go')]})
        await hang.wait_until_all_started()
        group.cancel_scope.cancel()
    assert sorted(hang.cancelled) == ['a', 'b']


# --- toolweave tools as LangChain tools -------------------------------------------------------------------------


@tool
def greet(name: str, context: ToolCallContext) -> str:
    """Greets someone on behalf of the tenant."""
    return f'hello {name} from {context.get("tenant")}'


@tool
def fail_always(text: str) -> str:
    """Always fails."""
    raise ValueError(f'no {text}')


async def test_toolweave_tools_keep_their_schema_and_the_context_stays_hidden() -> None:
    tools = langchain_tools([greet, fail_always], context=lambda config: {'tenant': config['configurable']['tenant']})
    model = scripted(AIMessage('', tool_calls=[{'name': 'greet', 'args': {'name': 'Ada'}, 'id': 'g'},
                                               {'name': 'fail_always', 'args': {'text': 'way'}, 'id': 'f'}]),
                     AIMessage('done'))
    state = await react_graph(model, tools).ainvoke({'messages': [('user', 'hi')]},
                                                    {'configurable': {'tenant': 'acme'}})
    assert model.bound[0]['function']['parameters'] == dict(greet.definition.parameters)
    assert 'context' not in json.dumps(model.bound)
    assert [(m.content, m.status) for m in tool_messages(state)] == [('hello Ada from acme', 'success'),
                                                                     ('no way', 'error')]


async def test_mcp_tools_as_langchain_tools() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Adds two integers."""
        return a + b

    async with McpToolset(Toolset([add])) as served:
        [added] = langchain_tools(served)
        message = await added.ainvoke({'name': 'add', 'args': {'a': 2, 'b': 3}, 'id': 'm', 'type': 'tool_call'})
    assert (message.content, message.status) == ('5', 'success')


def durable(thread: str) -> RunnableConfig:
    return {'configurable': {'thread_id': thread}}


async def test_a_gated_tool_interrupts_the_graph_and_the_resume_decides() -> None:
    ran: list[str] = []

    @requires_approval
    @tool
    def delete(path: str) -> str:
        """Deletes a file."""
        ran.append(path)
        return f'deleted {path}'

    def graph() -> Graph:
        model = scripted(calls('delete', {'path': '/tmp/x'}), AIMessage('done'))
        return react_graph(model, [langchain_tool(delete)], durable=True)

    rejected = graph()
    state = await rejected.ainvoke({'messages': [('user', 'clean up')]}, durable('r'))
    [asked] = state['__interrupt__']
    assert asked.value == {'tool': 'delete', 'arguments': {'path': '/tmp/x'}, 'description': 'delete: {"path": '
                           '"/tmp/x"}'}
    state = await rejected.ainvoke(Command(resume={'approved': False, 'reason': 'not today'}), durable('r'))
    assert tool_messages(state)[0].content == 'Rejected by reviewer: delete: {"path": "/tmp/x"} (not today)'
    assert ran == []

    edited = graph()
    await edited.ainvoke({'messages': [('user', 'clean up')]}, durable('e'))
    state = await edited.ainvoke(Command(resume={'approved': True, 'arguments': {'path': '/tmp/y'}}), durable('e'))
    assert tool_messages(state)[0].content == 'deleted /tmp/y' and ran == ['/tmp/y']


async def test_a_plan_with_gated_steps_interrupts_once_before_anything_runs() -> None:
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
    tools = langchain_tools([delete, listing])
    graph = react_graph(scripted(calls('execute_tool_plan', the_plan), AIMessage('done')), with_plan_tool(tools),
                        durable=True)
    state = await graph.ainvoke({'messages': [('user', 'clean up')]}, durable('p'))
    [asked] = state['__interrupt__']
    assert asked.value['steps'] == [{'id': 'rm', 'tool': 'delete', 'arguments': {'path': '$ref:ls[0]'}}]
    assert ran == []
    state = await graph.ainvoke(Command(resume={'approved': True}), durable('p'))
    assert ran == ['listing', '/a']
    assert tool_messages(state)[0].content == '{"ls": ["/a", "/b"], "rm": "deleted /a"}'

    graph = react_graph(scripted(calls('execute_tool_plan', the_plan), AIMessage('done')), with_plan_tool(tools),
                        durable=True)
    await graph.ainvoke({'messages': [('user', 'clean up')]}, durable('q'))
    state = await graph.ainvoke(Command(resume={'approved': False}), durable('q'))
    assert tool_messages(state)[0].content == 'Rejected by reviewer: the plan did not run' and ran == ['listing', '/a']


async def test_a_resume_value_that_does_not_fit_can_be_sent_again() -> None:
    @requires_approval
    @tool
    def delete(path: str) -> str:
        """Deletes a file."""
        return f'deleted {path}'

    graph = react_graph(scripted(calls('delete', {'path': '/x'}), AIMessage('done')), [langchain_tool(delete)],
                        durable=True)
    await graph.ainvoke({'messages': [('user', 'clean up')]}, durable('v'))
    with pytest.raises(ValidationError, match='validation error for ReviewAnswer'):
        await graph.ainvoke(Command(resume='yes please'), durable('v'))
    state = await graph.ainvoke(Command(resume={'approved': True}), durable('v'))
    assert tool_messages(state)[0].content == 'deleted /x'


async def test_a_hidden_gate_asks_the_review_handler() -> None:
    publish = requires_approval(TextTool.from_function('publish', 'Publishes', lambda text: f'published {text}'))
    pipeline = ToolPipeline.of(TextTool.from_function('shout', 'Upper-cases', str.upper), publish)
    reviewer = RecordingReviewHandler()
    converted = langchain_tool(pipeline, review_handler=reviewer)
    message = await converted.ainvoke({'name': pipeline.name, 'args': {'input': 'hi'}, 'id': 'p', 'type': 'tool_call'})
    assert message.content == 'published HI'
    assert [r.tool_name for r in reviewer.requests] == ['publish']


async def test_langchain_tools_as_toolweave_tools() -> None:
    @langchain_tool_decorator
    def double(n: int) -> int:
        """Doubles n."""
        return n * 2

    @langchain_tool_decorator
    def broken() -> str:
        """Raises."""
        raise RuntimeError('broken on purpose')

    tools = [toolweave_tool(double), toolweave_tool(broken)]
    assert tools[0].definition.parameters['required'] == ['n']
    assert tools[0].definition.description == 'Doubles n.'
    run = await run_plan(plan(step('a', 'double', n=4), step('b', 'double', n='$ref:a'), step('c', 'broken'),
                              step('d', 'double', n='$ref:c')), tools)
    assert [s.output for s in run.steps[:2]] == ['8', '16']
    assert run.steps[2].error == 'Tool execution failed: broken on purpose'
    # a literal that does not fit the tool's schema is caught before anything runs
    assert validate_plan(plan(step('d', 'double', n='many')), tools) == [
        "steps[0] (id 'd'): arguments.n: 'many' is not of type 'integer'."]
    assert toolweave_tool(langchain_tool(greet)) is greet
    with pytest.raises(TypeError, match='needs a LangChain BaseTool'):
        toolweave_tool(object())  # type: ignore[arg-type]


async def test_plan_steps_call_toolweave_tools_with_their_context_and_keep_their_failures() -> None:
    tools = langchain_tools([greet, fail_always], context=lambda config: {'tenant': config['configurable']['tenant']})
    model = scripted(calls('execute_tool_plan', plan(step('a', 'greet', name='Ada'), step('b', 'fail_always',
                                                                                           text='way'))),
                     AIMessage('done'))
    state = await react_graph(model, with_plan_tool(tools)).ainvoke({'messages': [('user', 'go')]},
                                                                    {'configurable': {'tenant': 'acme'}})
    assert tool_messages(state)[0].content == ('Plan completed with errors.\nResults: {"a": "hello Ada from acme", '
                                               '"b": "ERROR: Tool execution failed: no way"}\nErrors: b: Tool '
                                               'execution failed: no way')


async def test_a_step_cannot_pause_for_input_or_take_injected_arguments() -> None:
    @langchain_tool_decorator
    def ask_human(question: str) -> str:
        """Asks a human."""
        return str(interrupt(question))

    @langchain_tool_decorator
    def whoami(name: str, runtime: ToolRuntime) -> str:
        """Uses the graph's runtime."""
        return f'{name}: {runtime.tool_call_id}'

    the_plan = plan(step('a', 'ask_human', question='ok?'), step('b', 'whoami', name='x'))
    graph = react_graph(scripted(calls('execute_tool_plan', the_plan), AIMessage('done')),
                        with_plan_tool([ask_human, whoami]), durable=True)
    state = await graph.ainvoke({'messages': [('user', 'go')]}, durable('i'))
    assert '__interrupt__' not in state
    assert tool_messages(state)[0].content == (
        'Plan completed with errors.\nResults: {"a": "ERROR: Tool \'ask_human\' stopped the graph to wait for input '
        "(a LangGraph interrupt), which a plan step cannot do. Call 'ask_human' directly instead of in a plan.\", "
        '"b": "ERROR: Tool \'whoami\' needs arguments that a LangGraph ToolNode injects (runtime), which a plan step '
        "cannot give. Call 'whoami' directly instead of in a plan.\"}\nErrors: a: Tool 'ask_human' stopped the graph "
        "to wait for input (a LangGraph interrupt), which a plan step cannot do. Call 'ask_human' directly instead of "
        "in a plan.; b: Tool 'whoami' needs arguments that a LangGraph ToolNode injects (runtime), which a plan step "
        "cannot give. Call 'whoami' directly instead of in a plan."
    )


async def test_the_plan_tool_in_the_prebuilt_react_agent() -> None:
    meeting = Meeting(parties=2)
    the_plan = plan(step('paris', 'weather', city='Paris'), step('tokyo', 'weather', city='Tokyo'))
    model = scripted(calls('execute_tool_plan', the_plan), AIMessage('both sunny'))
    with pytest.warns(LangGraphDeprecatedSinceV10, match='create_react_agent has been moved'):
        agent = create_react_agent(model, with_plan_tool(weather_tools(meeting)))
    state = await agent.ainvoke({'messages': [('user', 'Weather in Paris and Tokyo?')]})
    assert state['messages'][-1].content == 'both sunny' and len(model.requests) == 2
    assert meeting.overlapped('Paris', 'Tokyo')
    assert tool_messages(state)[0].content == ('{"paris": {"city": "Paris", "celsius": 15}, "tokyo": {"city": "Tokyo", '
                                               '"celsius": 15}}')


async def test_a_toolweave_tool_may_have_an_argument_named_config() -> None:
    @tool
    def set_config(config: dict[str, int]) -> str:
        """Stores a configuration."""
        return f'stored {sorted(config)}'

    message = await langchain_tool(set_config).ainvoke({'name': 'set_config', 'args': {'config': {'b': 1, 'a': 2}},
                                                        'id': 'c', 'type': 'tool_call'})
    assert (message.content, message.status) == ("stored ['a', 'b']", 'success')
