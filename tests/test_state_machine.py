"""StateMachineTool: construction, state-bound and global tools, transitions, descriptions, errors, prompts and
per-invocation state."""

from __future__ import annotations

from enum import Enum
from typing import Any

import pytest

from toolweave import (
    Agent,
    AgentProcess,
    AgentRunResult,
    DuplicateToolError,
    StateMachineTool,
    ToolResult,
    UserError,
    tool,
)
from toolweave.testing import ScriptedModel

pytestmark = pytest.mark.anyio


class Phase(Enum):
    INITIAL = 'initial'
    PROCESSING = 'processing'
    DONE = 'done'


class OrderState(Enum):
    DRAFT = 1
    CONFIRMED = 2
    SHIPPED = 3
    DELIVERED = 4


def call(name: str, arguments: Any = None) -> dict[str, Any]:
    return {'tool': name, 'arguments': arguments or {}}


async def run_inside(agentic: Any, arguments: Any = None) -> tuple[ToolResult, AgentRunResult]:
    outer = ScriptedModel([call(agentic.name, arguments), 'outer done'])
    run = await Agent(outer, tools=[agentic]).run('go')
    return run.process.history[0].result, run


def tool_outputs(model: ScriptedModel) -> list[str]:
    return [m.content for m in model.last_messages if m.role == 'tool']


ran: list[str] = []


def make(name: str, *, fail: bool = False, output: Any = None) -> Any:
    def body() -> Any:
        ran.append(name)
        if fail:
            raise RuntimeError(f'{name} failed')
        return output if output is not None else f'{name} ok'

    return tool(name=name, description=f'{name.capitalize()} it.')(body)


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


t1, t2, t3, start, finish, status, help_tool = (make(n) for n in ('t1', 't2', 't3', 'start', 'finish', 'status',
                                                                  'help'))


# --- construction ----------------------------------------------------------------------------------------------


def test_construction_and_starting_in_copies() -> None:
    machine = StateMachineTool('flow', 'A flow', Phase)
    assert machine.name == 'flow' and machine.state_type is Phase and machine.initial_state is None
    initial = machine.with_initial_state(Phase.INITIAL)
    resumed = initial.starting_in(Phase.PROCESSING)
    assert initial.initial_state is Phase.INITIAL and resumed.initial_state is Phase.PROCESSING
    assert machine.initial_state is None
    assert isinstance(resumed, StateMachineTool)


def test_registration_counts_and_transitions() -> None:
    machine = (StateMachineTool('flow', 'A flow', Phase)
               .in_state(Phase.INITIAL).with_tool(t1).with_tool(t2).with_tool(t3).transitions_to(Phase.PROCESSING)
               .in_state(Phase.PROCESSING).with_tool(finish).build())
    assert [t.name for t in machine.tools_in(Phase.INITIAL)] == ['t1', 't2', 't3']
    assert machine.state_tool_counts == {Phase.INITIAL: 3, Phase.PROCESSING: 1}
    assert [(s, t.name, target) for s, t, target in machine.state_tools] == [
        (Phase.INITIAL, 't1', None), (Phase.INITIAL, 't2', None), (Phase.INITIAL, 't3', Phase.PROCESSING),
        (Phase.PROCESSING, 'finish', None)]
    assert machine.tools_in(Phase.DONE) == ()
    builder = StateMachineTool('f', 'd', Phase).in_state(Phase.INITIAL)
    assert builder.with_global_tool(status).global_tools[0] is status
    assert builder.with_tool(t1).in_state(Phase.DONE).build().state_tool_counts == {Phase.INITIAL: 1}


def test_bad_configuration() -> None:
    with pytest.raises(UserError, match='Enum class'):
        StateMachineTool('f', 'd', str)  # type: ignore[type-var]
    with pytest.raises(UserError, match='member of Phase'):
        StateMachineTool('f', 'd', Phase).with_initial_state(OrderState.DRAFT)  # type: ignore[arg-type]
    with pytest.raises(UserError, match='member of Phase'):
        StateMachineTool('f', 'd', Phase).in_state('INITIAL')  # type: ignore[arg-type]
    with pytest.raises(UserError, match='target'):
        StateMachineTool('f', 'd', Phase).in_state(Phase.INITIAL).with_tool(t1).transitions_to(3)  # type: ignore[arg-type]
    with pytest.raises(DuplicateToolError, match="'t1'"):
        StateMachineTool('f', 'd', Phase).in_state(Phase.INITIAL).with_tool(t1).in_state(Phase.DONE).with_tool(
            t1).build()
    with pytest.raises(DuplicateToolError, match="'status'"):
        StateMachineTool('f', 'd', Phase).with_global_tools(status, status)
    with pytest.raises(UserError, match='function'):
        StateMachineTool('f', 'd', Phase).with_state_aware_system_prompt('prompt')  # type: ignore[arg-type]


# --- running ---------------------------------------------------------------------------------------------------


def machine_for(inner: ScriptedModel) -> StateMachineTool[Phase]:
    return (StateMachineTool('flow', 'A flow', Phase, model=inner).with_initial_state(Phase.INITIAL)
            .in_state(Phase.INITIAL).with_tool(t1).with_tool(start).transitions_to(Phase.PROCESSING)
            .in_state(Phase.PROCESSING).with_tool(finish).build()
            .with_global_tools(status))


async def test_wrong_state_is_refused_without_running() -> None:
    inner = ScriptedModel([call('finish'), call('t1'), 'done'])
    await run_inside(machine_for(inner))
    assert tool_outputs(inner) == [
        'This tool is not available in the current state (INITIAL). It is only available in state: PROCESSING',
        't1 ok',  # the refusal left the state alone
    ]
    assert ran == ['t1']


async def test_transition_and_refusal_the_other_way() -> None:
    inner = ScriptedModel([call('t1'), call('t1'), call('start'), call('t1'), call('finish'), call('finish'), 'ok'])
    result, _ = await run_inside(machine_for(inner))
    assert tool_outputs(inner) == [
        't1 ok', 't1 ok',  # no transition configured, the state stays put
        'start ok',  # moves to PROCESSING
        'This tool is not available in the current state (PROCESSING). It is only available in state: INITIAL',
        'finish ok', 'finish ok',
    ]
    assert result.ok and result.output == 'ok'


async def test_an_error_result_does_not_transition() -> None:
    broken_start = make('start', fail=True)
    inner = ScriptedModel([call('start'), call('t1'), 'done'])
    machine = (StateMachineTool('flow', 'A flow', Phase, model=inner).with_initial_state(Phase.INITIAL)
               .in_state(Phase.INITIAL).with_tool(t1).with_tool(broken_start).transitions_to(Phase.DONE).build())
    await run_inside(machine)
    assert tool_outputs(inner) == ['Error: start failed', 't1 ok']


async def test_descriptions_say_where_tools_work() -> None:
    inner = ScriptedModel(['nothing to do'])
    await run_inside(machine_for(inner))
    descriptions = {t.name: t.description for t in inner.requests[0].tools}
    assert descriptions == {
        't1': 'T1 it.\n\n[Available in state: INITIAL]',
        'start': 'Start it.\n\n[Available in state: INITIAL] [Transitions to: PROCESSING]',
        'finish': 'Finish it.\n\n[Available in state: PROCESSING]',
        'status': 'Status it.\n\n[Available in all states]',
    }
    assert t1.description == 'T1 it.'


async def test_global_tools_work_everywhere_and_never_transition() -> None:
    inner = ScriptedModel([call('status'), call('start'), call('status'), call('finish'), 'done'])
    await run_inside(machine_for(inner))
    assert tool_outputs(inner) == ['status ok', 'start ok', 'status ok', 'finish ok']


async def test_error_order() -> None:
    no_initial = StateMachineTool('f', 'd', Phase).in_state(Phase.INITIAL).with_tool(t1).build()
    assert (await no_initial.call('{}')).error == 'No initial state configured for StateMachineTool'
    assert (await StateMachineTool('f', 'd', Phase).call('{}')).error == (
        'No initial state configured for StateMachineTool')  # comes before everything
    with_initial = no_initial.with_initial_state(Phase.INITIAL)
    assert (await with_initial.call('{}')).error == 'No AgentProcess context available'
    empty = StateMachineTool('f', 'd', Phase, initial_state=Phase.INITIAL, model=ScriptedModel([]))
    assert (await empty.call('{}')).error == 'No AgentProcess context available'  # checked before the tools
    result, _ = await run_inside(empty)
    assert result.error == 'No tools registered for StateMachineTool'


async def test_order_example_from_the_doc() -> None:
    add_item, confirm, ship, deliver, review, help_ = (make(n) for n in ('add_item', 'confirm', 'ship', 'deliver',
                                                                         'review', 'help'))
    inner = ScriptedModel([call('ship'), call('help'), call('add_item'), call('confirm'), call('review'),
                           call('ship'), call('status'), call('deliver'), call('review'), call('help'), 'delivered'])
    orders = (StateMachineTool('orderProcessor', 'Process orders', OrderState, model=inner)
              .with_initial_state(OrderState.DRAFT)
              .in_state(OrderState.DRAFT).with_tool(add_item).with_tool(confirm).transitions_to(OrderState.CONFIRMED)
              .in_state(OrderState.CONFIRMED).with_tool(ship).transitions_to(OrderState.SHIPPED)
              .in_state(OrderState.SHIPPED).with_tool(deliver).transitions_to(OrderState.DELIVERED)
              .in_state(OrderState.DELIVERED).with_tool(review).build()
              .with_global_tools(status, help_))
    result, _ = await run_inside(orders)
    outputs = tool_outputs(inner)
    assert outputs[0] == ('This tool is not available in the current state (DRAFT). It is only available in '
                          'state: CONFIRMED')
    assert outputs[1:4] == ['help ok', 'add_item ok', 'confirm ok']
    assert outputs[4].startswith('This tool is not available in the current state (CONFIRMED)')
    assert outputs[5:] == ['ship ok', 'status ok', 'deliver ok', 'review ok', 'help ok']
    assert result.output == 'delivered'


async def test_state_is_per_invocation() -> None:
    inner = ScriptedModel([call('start'), 'first', call('finish'), 'second'])
    machine = machine_for(inner)
    outer = ScriptedModel([call('flow'), call('flow'), 'done'])
    await Agent(outer, tools=[machine]).run('go')
    assert tool_outputs(inner) == [
        'This tool is not available in the current state (INITIAL). It is only available in state: PROCESSING']
    resumed = ScriptedModel([call('finish'), 'resumed'])
    await run_inside(machine_for(resumed).starting_in(Phase.PROCESSING))
    assert tool_outputs(resumed) == ['finish ok']


async def test_result_is_plain_text_and_tool_objects_are_global() -> None:
    class Lookup:
        @tool
        def lookup(self) -> dict[str, int]:
            """Look something up."""
            return {'answer': 42}

    inner = ScriptedModel([call('lookup'), 'looked up'])
    machine = (StateMachineTool('flow', 'Find answers', Phase, model=inner, initial_state=Phase.DONE)
               .with_tool_object(Lookup()).with_tool_object(object()))
    assert [t.name for t in machine.global_tools] == ['lookup']
    result, _ = await run_inside(machine)
    assert result.ok and result.output == 'looked up' and not result.has_value
    prompt = inner.requests[0].messages[0].content
    assert prompt is not None
    assert 'Current state: DONE' in prompt and 'Task: Find answers' in prompt
    assert inner.requests[0].tools[0].description == 'Look something up.\n\n[Available in all states]'


async def test_custom_prompts() -> None:
    inner = ScriptedModel(['a', 'b', 'c'])
    machine = machine_for(inner)
    await run_inside(machine.with_system_prompt('Fixed'))
    seen: list[tuple[object, str, Phase]] = []

    def aware(process: AgentProcess, text: str, state: Phase) -> str:
        seen.append((process, text, state))
        return f'In {state.name}'

    await run_inside(machine.with_state_aware_system_prompt(aware).starting_in(Phase.PROCESSING))
    await run_inside(machine.with_state_aware_system_prompt(aware).with_system_prompt('Back to fixed'))
    assert [r.messages[0].content for r in inner.requests] == ['Fixed', 'In PROCESSING', 'Back to fixed']
    assert len(seen) == 1 and seen[0][1:] == ('{}', Phase.PROCESSING) and isinstance(seen[0][0], AgentProcess)


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_parallel_calls_in_one_reply_see_one_state(anyio_backend: str) -> None:
    inner = ScriptedModel([[call('start'), call('status')], call('finish'), 'done'])
    await run_inside(machine_for(inner))
    assert tool_outputs(inner) == ['start ok', 'status ok', 'finish ok']
