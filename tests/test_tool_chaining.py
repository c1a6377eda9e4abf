"""Tool chaining: domain tool sources, last wins, predicates, auto-discovery, loop injection and approval."""

from __future__ import annotations

from enum import Enum
from typing import Any

import pytest

from toolweave import (
    Agent,
    AgentProcess,
    AgentRunResult,
    DomainToolSource,
    DomainToolTracker,
    PlaybookTool,
    SimpleAgenticTool,
    StateMachineTool,
    ToolCallOutcome,
    ToolChainingInjectionStrategy,
    ToolConfigurationError,
    ToolInjection,
    ToolResult,
    UserError,
    tool,
)
from toolweave.testing import FunctionModel, ScriptedModel

pytestmark = pytest.mark.anyio


def call(name: str, arguments: Any = None) -> dict[str, Any]:
    return {'tool': name, 'arguments': arguments or {}}


async def run_inside(agentic: Any, arguments: Any) -> tuple[ToolResult, AgentRunResult]:
    """Call `agentic` from an outer agent run; returns the call's result and the outer run."""
    outer = ScriptedModel([call(agentic.name, arguments), 'outer done'])
    run = await Agent(outer, tools=[agentic]).run('go')
    return run.process.history[0].result, run

NOT_YET = 'This tool is not yet available. You must first retrieve a single User instance.'


class User:
    def __init__(self, name: str, role: str = 'user') -> None:
        self.name = name
        self.role = role

    @tool
    def get_profile(self) -> str:
        """Get user's profile information."""
        return f'Profile for {self.name}'

    @tool
    def update_settings(self, settings: str) -> str:
        """Update user's settings."""
        return f'Settings updated for {self.name}: {settings}'

    def __repr__(self) -> str:
        return f'User({self.name!r})'


class Admin(User):
    pass


class Order:
    def __init__(self, number: int) -> None:
        self.number = number

    @tool
    def cancel(self) -> str:
        """Cancel the order."""
        return f'Order {self.number} cancelled'


class Plain:
    """An object without tool methods."""


def placeholders(tracker: DomainToolTracker) -> dict[str, Any]:
    return {t.name: t for t in tracker.placeholders()}


# --- the tracker -----------------------------------------------------------------------------------------------


def test_registering_a_type_declares_placeholders_at_once() -> None:
    tools = DomainToolTracker([DomainToolSource(User)]).placeholders()
    assert [t.name for t in tools] == ['get_profile', 'update_settings']
    note = '\n\nNote: This tool requires a User instance to be retrieved first.'
    assert tools[0].description == "Get user's profile information." + note
    assert tools[1].description == "Update user's settings." + note
    assert tools[1].definition.parameters['required'] == ['settings']


async def test_placeholder_before_binding_says_what_to_retrieve() -> None:
    profile = placeholders(DomainToolTracker([DomainToolSource(User)]))['get_profile']
    result = await profile.call('{}')
    assert result.ok and result.output == NOT_YET


async def test_binding_then_last_wins() -> None:
    tracker = DomainToolTracker([DomainToolSource(User)])
    tools = placeholders(tracker)
    assert tracker.offer(User('Alice')) is True
    assert (await tools['get_profile'].call('{}')).output == 'Profile for Alice'
    assert tracker.offer(User('Bob')) is True
    assert (await tools['get_profile'].call('{}')).output == 'Profile for Bob'
    assert (await tools['update_settings'].call({'settings': 'dark'})).output == 'Settings updated for Bob: dark'


async def test_bound_placeholder_validates_arguments_like_the_method() -> None:
    tracker = DomainToolTracker([DomainToolSource(User)])
    tracker.offer(User('Alice'))
    update = placeholders(tracker)['update_settings']
    missing = await update.call('{}')
    assert not missing.ok and 'settings' in (missing.error or '')
    malformed = await update.call('{not json')
    assert not malformed.ok and 'Invalid JSON' in (malformed.error or '')


def test_predicate_rejection_keeps_the_existing_binding() -> None:
    seen: list[tuple[str, object]] = []

    def admins_only(user: User, process: AgentProcess | None) -> bool:
        seen.append((user.name, process))
        return user.role == 'admin'

    tracker = DomainToolTracker([DomainToolSource(User, admins_only)])
    admin1, regular, admin2 = User('a1', 'admin'), User('r', 'user'), User('a2', 'admin')
    bound = []
    for user in (admin1, regular, admin2):
        tracker.offer(user)
        bound.append(tracker.bound(User))
    assert bound == [admin1, admin1, admin2]
    assert [name for name, _ in seen] == ['a1', 'r', 'a2']


def test_unregistered_types_are_ignored_and_subtypes_bind_under_the_supertype() -> None:
    tracker = DomainToolTracker([DomainToolSource(User)])
    assert tracker.offer(Order(1)) is False
    assert tracker.offer('a string') is False and tracker.offer(None) is False
    admin = Admin('root', 'admin')
    assert tracker.offer(admin) is True
    assert tracker.bound(User) is admin


def test_the_tracker_never_binds_collections() -> None:
    tracker = DomainToolTracker([DomainToolSource(User)])
    for collection in ([User('a')], (User('b'),), {User('c')}, frozenset({User('d')})):
        assert tracker.offer(collection) is False
    assert tracker.bound(User) is None


def test_auto_discovery_replaces_every_earlier_binding() -> None:
    tracker = DomainToolTracker([DomainToolSource(User)], auto_discovery=True)
    alice = User('Alice')
    assert tracker.offer(alice) is True and tracker.bound(User) is alice  # a registered type binds as registered
    order = Order(7)
    assert tracker.offer(order) is True
    assert tracker.current is order
    assert tracker.bound(User) is None  # the User tools went away
    drained = tracker.drain()
    assert drained is not None and [t.name for t in drained] == ['cancel']
    assert tracker.offer(Plain()) is False  # no tool methods: ignored, binding kept
    assert tracker.current is order


def test_auto_discovery_of_unregistered_objects() -> None:
    tracker = DomainToolTracker(auto_discovery=True)
    first = User('Alice')
    tracker.offer(first)
    assert tracker.current is first
    assert [t.name for t in tracker.drain() or []] == ['get_profile', 'update_settings']
    tracker.offer(Order(1))
    assert [t.name for t in tracker.drain() or []] == ['cancel']


async def test_strategy_drains_once_and_swaps_the_previous_tools() -> None:
    tracker = DomainToolTracker(auto_discovery=True)
    strategy = ToolChainingInjectionStrategy(tracker)
    process = AgentProcess()
    event = ToolCallOutcome(tool=_any_tool(), arguments='{}', result=ToolResult.success('ok'), current_tools=(),
                            process=process)
    assert strategy.evaluate(event) is None  # nothing discovered yet
    tracker.offer(User('Alice'))
    first = strategy.evaluate(event)
    assert isinstance(first, ToolInjection)
    assert first.remove == () and [t.name for t in first.add] == ['get_profile', 'update_settings']
    assert strategy.evaluate(event) is None  # the drain emptied the buffer
    tracker.offer(Order(3))
    second = strategy.evaluate(event)
    assert second is not None
    assert second.remove == ('get_profile', 'update_settings') and [t.name for t in second.add] == ['cancel']
    assert (await second.add[0].call('{}')).output == 'Order 3 cancelled'


def test_registered_mode_does_not_buffer() -> None:
    tracker = DomainToolTracker([DomainToolSource(User)])
    strategy = ToolChainingInjectionStrategy(tracker)
    tracker.offer(User('Alice'))
    assert tracker.drain() is None
    event = ToolCallOutcome(tool=_any_tool(), arguments='{}', result=ToolResult.success('ok'), current_tools=(),
                            process=AgentProcess())
    assert strategy.evaluate(event) is None


def test_strategy_can_offer_results_itself() -> None:  # plain-agent chaining
    tracker = DomainToolTracker(auto_discovery=True)
    strategy = ToolChainingInjectionStrategy(tracker, offer_results=True)
    order = Order(5)
    event = ToolCallOutcome(tool=_any_tool(), arguments='{}', result=ToolResult.success('order', order),
                            current_tools=(), process=AgentProcess())
    injection = strategy.evaluate(event)
    assert injection is not None and [t.name for t in injection.add] == ['cancel']
    listed = ToolCallOutcome(tool=_any_tool(), arguments='{}', result=ToolResult.success('[..]', [Order(1), User('x')]),
                             current_tools=(), process=AgentProcess())
    last = strategy.evaluate(listed)  # both objects were discovered before this drain: their tools add up
    assert last is not None and last.remove == ('cancel',)
    assert [t.name for t in last.add] == ['cancel', 'get_profile', 'update_settings']
    assert strategy.evaluate(listed) is not None  # offered again: a new discovery


def test_objects_discovered_before_a_drain_all_contribute_their_tools() -> None:
    tracker = DomainToolTracker(auto_discovery=True)
    tracker.offer(Order(1))
    tracker.offer(User('ada'))
    tracker.offer(Order(2))  # the same names again: the latest object's tools win
    pending = tracker.drain()
    assert pending is not None and [t.name for t in pending] == ['cancel', 'get_profile', 'update_settings']
    assert pending[0].call_sync('{}').output == 'Order 2 cancelled' and tracker.drain() is None


def _any_tool() -> Any:
    @tool
    def noop() -> str:
        """Do nothing."""
        return 'ok'

    return noop


def test_bad_sources_fail_at_build_time() -> None:
    with pytest.raises(UserError, match='needs a class'):
        DomainToolSource(User('x'))  # type: ignore[arg-type]
    with pytest.raises(UserError, match='predicate'):
        DomainToolSource(User, 'admins')  # type: ignore[arg-type]
    with pytest.raises(UserError, match='DomainToolSource'):
        DomainToolTracker([User])  # type: ignore[list-item]
    with pytest.raises(UserError, match='DomainToolTracker'):
        ToolChainingInjectionStrategy(object())  # type: ignore[arg-type]


def test_chaining_registration_on_agentic_tools() -> None:
    base = SimpleAgenticTool('users', 'Manage users')
    two = base.with_tool_chaining_from(User).with_tool_chaining_from(Order)
    assert [s.type for s in two.domain_tool_sources] == [User, Order]
    assert base.domain_tool_sources == () and not base.auto_discovery
    both = two.with_tool_chaining_from_any()
    assert both.auto_discovery and len(both.domain_tool_sources) == 2
    assert PlaybookTool('p', 'd').with_tool_chaining_from_any().auto_discovery
    assert len(base.with_tool_chaining_from(Plain).domain_tool_sources) == 1


def test_a_class_without_tool_methods_registers_and_declares_no_placeholders() -> None:
    tracker = DomainToolTracker([DomainToolSource(Plain), DomainToolSource(User)])
    assert DomainToolSource(Plain).tool_names == ()
    assert [t.name for t in tracker.placeholders()] == ['get_profile', 'update_settings']
    assert tracker.offer(Plain()) and tracker.bound(Plain) is not None


# --- inside agentic tools ------------------------------------------------------------------------------------


@tool
def get_user(name: str) -> User:
    """Retrieve one user."""
    return User(name, 'admin' if name.startswith('admin') else 'user')


@tool
def list_users() -> list[User]:
    """List every user."""
    return [User('Alice'), User('Bob')]


@tool
def get_order(number: int) -> Order:
    """Retrieve one order."""
    return Order(number)


async def test_simple_agentic_tool_binds_returned_users() -> None:  # end to end
    inner = ScriptedModel([
        call('get_profile'),
        call('get_user', {'name': 'Alice'}),
        call('get_profile'),
        call('get_user', {'name': 'Bob'}),
        call('update_settings', {'settings': 'dark'}),
        'done',
    ])
    users = SimpleAgenticTool('users', 'Manage users', model=inner).with_tools(get_user).with_tool_chaining_from(User)
    result, run = await run_inside(users, {})
    outputs = [m.content for m in inner.last_messages if m.role == 'tool']
    assert outputs[0] == NOT_YET
    assert outputs[2] == 'Profile for Alice'
    assert outputs[4] == 'Settings updated for Bob: dark'
    assert [t.name for t in inner.requests[0].tools] == ['get_user', 'get_profile', 'update_settings']
    assert result.ok and result.output == 'done'
    assert isinstance(result.value, list) and [u.name for u in result.value] == ['Alice', 'Bob']


async def test_predicate_sees_the_inner_process() -> None:  # end to end
    processes: list[object] = []

    def admins(user: User, process: AgentProcess | None) -> bool:
        processes.append(process)
        return user.role == 'admin'

    inner = ScriptedModel([call('get_user', {'name': 'admin1'}), call('get_user', {'name': 'regular'}),
                           call('get_profile'), 'done'])
    users = SimpleAgenticTool('users', 'Manage', model=inner, tools=[get_user]).with_tool_chaining_from(User, admins)
    result, _ = await run_inside(users, {})
    assert result.ok
    assert inner.last_messages[-1].content == 'Profile for admin1'
    assert all(isinstance(p, AgentProcess) and p.depth == 1 for p in processes)


async def test_raising_predicate_turns_the_call_into_a_failure() -> None:
    def broken(user: User, process: AgentProcess | None) -> bool:
        raise RuntimeError('no role service')

    inner = ScriptedModel([call('get_user', {'name': 'a'}), 'done'])
    users = SimpleAgenticTool('users', 'Manage', model=inner, tools=[get_user]).with_tool_chaining_from(User, broken)
    result, _ = await run_inside(users, {})
    message = inner.last_messages[-1].content
    assert message is not None
    assert 'tool chaining failed' in message and 'no role service' in message
    assert result.ok


async def test_simple_and_playbook_bind_the_last_element_of_a_list() -> None:
    for cls in (SimpleAgenticTool, PlaybookTool):
        inner = ScriptedModel([call('list_users'), call('get_profile'), 'done'])
        agentic = cls('users', 'Manage', model=inner).with_tools(list_users).with_tool_chaining_from(User)
        await run_inside(agentic, {})
        assert inner.last_messages[-1].content == 'Profile for Bob', cls


class Phase(Enum):
    ONE = 1
    TWO = 2


async def test_state_machine_skips_collections_and_chained_tools_are_global() -> None:
    inner = ScriptedModel([call('list_users'), call('get_profile'), call('get_user', {'name': 'Carol'}),
                           call('go'), call('get_profile'), 'done'])

    @tool
    def go() -> str:
        """Move on."""
        return 'moved'

    machine = (StateMachineTool('m', 'Machine', Phase, model=inner).with_initial_state(Phase.ONE)
               .in_state(Phase.ONE).with_tool(list_users).with_tool(get_user).with_tool(go).transitions_to(Phase.TWO)
               .build().with_tool_chaining_from(User))
    result, _ = await run_inside(machine, {})
    outputs = [m.content for m in inner.last_messages if m.role == 'tool']
    assert outputs[1] == NOT_YET  # a list never binds in the state machine
    assert outputs[4] == 'Profile for Carol'  # state TWO: the chained tool still works
    profile = next(t for t in inner.requests[0].tools if t.name == 'get_profile')
    assert '[Available' not in profile.description
    assert result.ok and result.value is None  # plain text


async def test_playbook_chained_tools_ignore_unlock_conditions() -> None:
    inner = ScriptedModel([call('get_user', {'name': 'Ann'}), call('get_profile'), 'done'])

    @tool
    def never() -> str:
        """Never unlocked."""
        return 'x'

    playbook = (PlaybookTool('p', 'Playbook', model=inner).with_tools(get_user)
                .with_tool(never).unlocked_when(lambda ctx: False).with_tool_chaining_from(User))
    await run_inside(playbook, {})
    assert inner.last_messages[-1].content == 'Profile for Ann'


async def test_auto_discovered_tools_are_injected_into_the_inner_loop() -> None:  # end to end
    inner = ScriptedModel([call('get_user', {'name': 'Alice'}), call('get_profile'), call('get_order', {'number': 9}),
                           call('cancel'), call('get_profile'), 'done'])
    explorer = SimpleAgenticTool('explorer', 'Explore', model=inner, tools=[get_user, get_order])
    result, _ = await run_inside(explorer.with_tool_chaining_from_any(), {})
    offered = [[t.name for t in request.tools] for request in inner.requests]
    assert offered[0] == ['get_user', 'get_order']
    assert offered[1] == ['get_user', 'get_order', 'get_profile', 'update_settings']
    assert offered[3] == ['get_user', 'get_order', 'cancel']  # the User tools went away
    outputs = [m.content for m in inner.last_messages if m.role == 'tool']
    assert outputs[1] == 'Profile for Alice' and outputs[3] == 'Order 9 cancelled'
    assert 'Unknown tool' in outputs[4]
    assert result.ok


async def test_no_static_tools_but_chaining_goes_on_to_the_process_check() -> None:
    for agentic in (SimpleAgenticTool('s', 'd').with_tool_chaining_from(User),
                    PlaybookTool('p', 'd').with_tool_chaining_from_any()):
        result = await agentic.call('{}')
        assert result.error == 'No AgentProcess context available'
    assert (await SimpleAgenticTool('s', 'd').call('{}')).error == 'No tools available for SimpleAgenticTool'
    assert (await PlaybookTool('p', 'd').call('{}')).error == 'No tools available for PlaybookTool'


async def test_chaining_only_agentic_tool_runs_inside_a_process() -> None:
    def reply(messages: list[Any], tools: list[Any]) -> Any:
        return 'no tools needed' if messages[-1].role == 'user' else 'unexpected'

    agentic = SimpleAgenticTool('s', 'd', model=FunctionModel(reply)).with_tool_chaining_from(User)
    result, _ = await run_inside(agentic, {})
    assert result.ok and result.output == 'no tools needed'


async def test_chaining_on_a_plain_agent_through_the_injection_hook() -> None:
    tracker = DomainToolTracker([DomainToolSource(User)], auto_discovery=True)
    model = ScriptedModel([call('get_user', {'name': 'Dana'}), call('get_profile'), call('get_order', {'number': 4}),
                           call('cancel'), 'done'])
    agent = Agent(model, tools=[get_user, get_order, *tracker.placeholders()],
                  injection_strategies=[ToolChainingInjectionStrategy(tracker, offer_results=True)])
    run = await agent.run('go')
    outputs = [m.content for m in run.messages if m.role == 'tool']
    assert outputs[1] == 'Profile for Dana' and outputs[3] == 'Order 4 cancelled'
    assert [t.name for t in model.requests[3].tools][-1] == 'cancel'
    assert [t.name for t in agent.tool_definitions()] == ['get_user', 'get_order', 'get_profile', 'update_settings']


async def test_a_sub_tool_clashing_with_a_chained_tool_is_a_configuration_error() -> None:
    @tool
    def get_profile() -> str:
        """A static tool with a chained tool's name."""
        return 'static'

    clash = SimpleAgenticTool('u', 'd', model=ScriptedModel(['x']), tools=[get_profile]).with_tool_chaining_from(User)
    with pytest.raises(ToolConfigurationError, match="SimpleAgenticTool 'u': Duplicate tool name: 'get_profile'"):
        await run_inside(clash, {})


# --- approval through chained tools --------------------------------------------------------------------------


class PlainInfo:
    @tool
    def info(self) -> str:
        """Show information."""
        return 'info'


class AdminInfo(PlainInfo):
    @tool(requires_approval=True)
    def info(self) -> str:
        """Wipe everything."""
        return 'WIPED'


async def test_an_override_that_requires_approval_is_reviewed_through_its_placeholder() -> None:
    from toolweave import ReviewDecision, use_review_handler
    from toolweave.testing import RecordingReviewHandler

    tracker = DomainToolTracker([DomainToolSource(PlainInfo)])
    [placeholder] = tracker.placeholders()
    tracker.offer(AdminInfo())
    with pytest.raises(ToolConfigurationError, match='requires approval'):
        await placeholder.call('{}')
    reviewer = RecordingReviewHandler(ReviewDecision.reject())
    with use_review_handler(reviewer):
        result = await placeholder.call('{}')
    assert not result.ok and [r.tool_name for r in reviewer.requests] == ['info']
    tracker.offer(PlainInfo())
    assert (await placeholder.call('{}')).output == 'info'  # the plain method needs no reviewer
