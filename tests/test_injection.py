"""The agent loop's tool-injection hook and the unfolding strategy in real runs (scripted models): what each
model request offers after facades and strategies run."""

from __future__ import annotations

from typing import Any

import pytest

from toolweave import (
    Agent,
    AgentProcess,
    DelegatingTool,
    Tool,
    ToolCallOutcome,
    ToolInjection,
    ToolInjectionStrategy,
    Toolset,
    UnfoldingTool,
    UserError,
    tool,
    unfolding_tools,
    with_note,
)
from toolweave.testing import FakeTool, ScriptedModel

pytestmark = pytest.mark.anyio


def offered(model: ScriptedModel, request: int) -> list[str]:
    """The tool names the model was offered in request number `request` (0-based)."""
    return [definition.name for definition in model.requests[request].tools]


def tool_texts(messages: Any) -> list[str]:
    from toolweave.models import ToolMessage

    return [m.content for m in messages if isinstance(m, ToolMessage)]


def call(name: str, arguments: dict[str, Any] | str | None = None) -> dict[str, Any]:
    return {'tool': name, 'arguments': arguments or {}}


async def test_facade_call_offers_inner_tools_next() -> None:
    a, b, sibling = FakeTool('a', 'from a'), FakeTool('b'), FakeTool('sibling')
    facade = UnfoldingTool.of('group', 'Group of tools', [a, b])
    model = ScriptedModel([call('group'), call('a'), 'done'])
    result = await Agent(model, tools=[facade, sibling]).run('go')
    assert result.output == 'done'
    assert offered(model, 0) == ['group', 'sibling']
    assert offered(model, 1) == ['sibling', 'a', 'b', 'group', 'group_context']
    assert offered(model, 2) == offered(model, 1)
    assert a.call_count == 1 and tool_texts(result.messages)[1] == 'from a'
    assert tool_texts(result.messages)[0].startswith('Tools now available: a, b.')


async def test_calling_the_facade_again_reaches_the_guide() -> None:
    facade = UnfoldingTool.of('group', 'Group', [FakeTool('a'), FakeTool('b')])
    model = ScriptedModel([call('group'), call('group'), call('group', {'x': 1}), 'done'])
    result = await Agent(model, tools=[facade]).run('go')
    texts = tool_texts(result.messages)
    assert 'already open' in texts[1] and 'a, b' in texts[1] and 'Tools now available' not in texts[1]
    assert texts[2] == texts[1]
    assert offered(model, 1) == offered(model, 2) == offered(model, 3) == ['a', 'b', 'group', 'group_context']


async def test_two_facade_calls_in_one_reply_unfold_once() -> None:  # no duplicate injections
    facade = UnfoldingTool.of('group', 'Group', [FakeTool('a')])
    model = ScriptedModel([[call('group'), call('group')], 'done'])
    await Agent(model, tools=[facade]).run('go')
    assert offered(model, 1) == ['a', 'group', 'group_context']


async def test_context_tool_in_the_loop() -> None:
    facade = UnfoldingTool.of('spotify_search', 'Search Spotify', [FakeTool('vector_search', description='Vector')],
                              child_tool_usage_notes='Vector first.')
    model = ScriptedModel([call('spotify_search'), call('spotify_search_context'), 'done'])
    result = await Agent(model, tools=[facade]).run('go')
    assert tool_texts(result.messages)[1] == 'Tools for Search Spotify:\n- vector_search: Vector\n\nUsage notes: ' \
                                             'Vector first.'
    context = next(d for d in model.requests[1].tools if d.name == 'spotify_search_context')
    assert context.description == 'Search Spotify. Available: vector_search. Vector first.'


async def test_exclusive_mode_offers_only_inner_tools() -> None:
    inner = FakeTool('inner')
    facade = UnfoldingTool.of('exclusive_tool', 'Exclusive', [inner], exclusive=True)
    model = ScriptedModel([call('exclusive_tool'), call('sibling'), 'done'])
    result = await Agent(model, tools=[facade, FakeTool('sibling')], tool_planning=True).run('go')
    assert offered(model, 0) == ['exclusive_tool', 'sibling', 'execute_tool_plan']
    assert offered(model, 1) == ['inner']
    assert tool_texts(result.messages)[1] == "Error: Unknown tool 'sibling'. Available tools: inner."


async def test_wrapped_facade_unfolds_and_the_wrapper_goes() -> None:
    facade = UnfoldingTool.of('group', 'Group', [FakeTool('a')])
    wrapped = with_note(DelegatingTool(facade), 'Open me first')
    model = ScriptedModel([call('group'), 'done'])
    await Agent(model, tools=[wrapped]).run('go')
    assert model.requests[0].tools[0].description == 'Group. Open me first'
    assert offered(model, 1) == ['a', 'group', 'group_context']


async def test_category_facade_in_the_loop() -> None:
    query, insert = FakeTool('query'), FakeTool('insert')
    facade = UnfoldingTool.by_category('db', 'Database', {'read': [query], 'write': [insert]})
    model = ScriptedModel([call('db', {'category': 'write'}), 'done'])
    await Agent(model, tools=[facade]).run('go')
    assert offered(model, 1) == ['insert', 'db', 'db_context']


async def test_empty_selection_keeps_the_facade() -> None:
    facade = UnfoldingTool.selectable('g', 'G', [FakeTool('a')], None, lambda raw: [])
    model = ScriptedModel([call('g'), 'done'])
    await Agent(model, tools=[facade]).run('go')
    assert offered(model, 1) == ['g']


async def test_plain_tool_call_changes_nothing() -> None:
    model = ScriptedModel([call('plain'), 'done'])
    await Agent(model, tools=[FakeTool('plain'), FakeTool('other')]).run('go')
    assert offered(model, 0) == offered(model, 1) == ['plain', 'other']


async def test_inner_tool_is_unknown_before_unfolding() -> None:
    facade = UnfoldingTool.of('group', 'Group', [FakeTool('a')])
    model = ScriptedModel([call('a'), 'done'])
    result = await Agent(model, tools=[facade]).run('go')
    assert tool_texts(result.messages) == ["Error: Unknown tool 'a'. Available tools: group."]


async def test_shortcut_runs_the_inner_tool_and_unfolds() -> None:
    create = FakeTool('create_task', lambda args: f'created {args["name"]}')
    facade = UnfoldingTool.of('tasks', 'Tasks', [create, FakeTool('list_tasks')])
    model = ScriptedModel([call('tasks', {'create_task': {'name': 'review-auth'}}), 'done'])
    result = await Agent(model, tools=[facade]).run('go')
    assert tool_texts(result.messages) == ['created review-auth']
    assert offered(model, 1) == ['create_task', 'list_tasks', 'tasks', 'tasks_context']


def nested(depth: int) -> tuple[UnfoldingTool, FakeTool]:
    leaf = FakeTool('leaf', 'leaf result')
    current: Tool = leaf
    for level in range(depth, 0, -1):
        current = UnfoldingTool.of(f'level_{level}', f'Level {level}', [current])
    assert isinstance(current, UnfoldingTool)
    return current, leaf


async def test_nesting_three_levels() -> None:
    outer, leaf = nested(2)  # outer -> inner_category -> leaf
    model = ScriptedModel([call('level_1'), call('level_2'), call('leaf'), 'done'])
    result = await Agent(model, tools=[outer]).run('go')
    assert 'level_2' in offered(model, 1) and 'leaf' not in offered(model, 1)
    assert 'leaf' in offered(model, 2)
    assert leaf.call_count == 1 and result.output == 'done'
    # both facades were replaced by guides: no UnfoldingTool is offered any more
    assert sum(1 for name in offered(model, 2) if name in ('level_1', 'level_2')) == 2
    assert tool_texts(result.messages)[2] == 'leaf result'


async def test_nesting_depth_five() -> None:
    outer, leaf = nested(5)
    script: list[Any] = [call(f'level_{level}') for level in range(1, 6)]
    model = ScriptedModel([*script, call('leaf'), 'done'])
    result = await Agent(model, tools=[outer]).run('go')
    for level in range(1, 6):
        assert f'level_{level}' in offered(model, level - 1)
        assert 'leaf' not in offered(model, level - 1)
    assert 'leaf' in offered(model, 5) and leaf.call_count == 1
    assert all(text.startswith('Tools now available') for text in tool_texts(result.messages)[:5])


async def test_annotated_nested_classes_unfold_level_by_level() -> None:
    @unfolding_tools(name='admin_operations', description='Administrative operations.')
    class AdminTools:
        @tool(name='getStatus')
        def get_status(self) -> str:
            """Get system status."""
            return 'System is healthy'

        @unfolding_tools(name='user_management', description='User management.')
        class UserManagement:
            @tool
            def create_user(self, username: str) -> str:
                """Create a user."""
                return f'Created user: {username}'

    model = ScriptedModel([call('admin_operations'), call('user_management'),
                           call('create_user', {'username': 'ada'}), 'done'])
    result = await Agent(model, tools=[UnfoldingTool.from_instance(AdminTools())]).run('go')
    assert offered(model, 1)[:2] == ['getStatus', 'user_management']
    assert 'create_user' in offered(model, 2)
    assert tool_texts(result.messages)[2] == 'Created user: ada'


class Marked(DelegatingTool):
    """A test decorator: marks the description so the test can see it was applied."""

    @property
    def definition(self) -> Any:
        inner = self.delegate.definition
        return inner.with_description(f'[decorated] {inner.description}')


async def test_tool_decorator_applies_to_injected_tools_at_every_level() -> None:
    outer, leaf = nested(2)
    decorated: list[str] = []

    def decorate(t: Tool) -> Tool:
        decorated.append(t.name)
        return Marked(t)

    model = ScriptedModel([call('level_1'), call('level_2'), call('leaf'), 'done'])
    result = await Agent(model, tools=[outer], tool_decorator=decorate).run('go')
    assert model.requests[0].tools[0].description == 'Level 1'  # the agent's own tools are not decorated
    second = {d.name: d.description for d in model.requests[1].tools}
    assert second['level_2'].startswith('[decorated]')
    third = {d.name: d.description for d in model.requests[2].tools}
    assert third['leaf'].startswith('[decorated]')
    assert 'leaf' in decorated and 'level_2' in decorated and 'level_1_context' in decorated
    assert leaf.call_count == 1 and result.output == 'done'  # the decorated nested facade still unfolded


async def test_toolset_is_never_changed_and_each_run_starts_afresh() -> None:
    facade = UnfoldingTool.of('group', 'Group', [FakeTool('a')])
    toolset = Toolset([facade])
    agent = Agent(ScriptedModel([call('group'), 'one', 'two']), tools=toolset)
    await agent.run('first')
    assert toolset.names == ['group']
    await agent.run('second')
    model = agent.model
    assert isinstance(model, ScriptedModel) and offered(model, 2) == ['group']


async def test_tools_added_to_the_toolset_during_a_run_are_still_offered() -> None:
    toolset = Toolset([UnfoldingTool.of('group', 'Group', [FakeTool('a')])])

    def add_more(args: dict[str, Any]) -> str:
        toolset.add(FakeTool('late'))
        return 'added'

    toolset.add(FakeTool('adder', add_more))
    model = ScriptedModel([[call('group'), call('adder')], 'done'])
    await Agent(model, tools=toolset).run('go')
    assert offered(model, 1) == ['adder', 'late', 'a', 'group', 'group_context']


class Recording:
    """A strategy that records what it saw and adds a tool after `trigger` runs."""

    def __init__(self, trigger: str, add: Tool | None = None, remove: tuple[str, ...] = ()) -> None:
        self.trigger = trigger
        self.add = add
        self.remove = remove
        self.seen: list[ToolCallOutcome] = []

    def evaluate(self, event: ToolCallOutcome) -> ToolInjection | None:
        self.seen.append(event)
        if event.tool.name != self.trigger:
            return None
        return ToolInjection(remove=self.remove, add=(self.add,) if self.add is not None else ())


async def test_custom_strategy_sees_each_call_in_order() -> None:
    strategy = Recording('unlock', FakeTool('secret'), remove=('unlock',))
    assert isinstance(strategy, ToolInjectionStrategy)
    model = ScriptedModel([[call('first', {'n': 1}), call('unlock')], call('secret'), 'done'])
    result = await Agent(model, tools=[FakeTool('first', 'one'), FakeTool('unlock')],
                         injection_strategies=[strategy]).run('go')
    assert [e.tool.name for e in strategy.seen] == ['first', 'unlock', 'secret']
    first = strategy.seen[0]
    assert first.arguments == '{"n":1}' and first.result.output == 'one'
    assert isinstance(first.process, AgentProcess) and first.process is result.process
    assert [t.name for t in first.current_tools] == ['first', 'unlock']
    assert offered(model, 1) == ['first', 'secret']


async def test_strategies_run_after_unfolding_and_see_its_changes() -> None:
    strategy = Recording('group')
    model = ScriptedModel([call('group'), 'done'])
    await Agent(model, tools=[UnfoldingTool.of('group', 'Group', [FakeTool('a')])],
                injection_strategies=[strategy]).run('go')
    assert [t.name for t in strategy.seen[0].current_tools] == ['a', 'group', 'group_context']


async def test_injected_tool_replaces_one_of_the_same_name() -> None:
    replacement = FakeTool('target', 'new')
    strategy = Recording('swap', replacement)
    model = ScriptedModel([call('swap'), call('target'), 'done'])
    result = await Agent(model, tools=[FakeTool('target', 'old'), FakeTool('swap')],
                         injection_strategies=[strategy]).run('go')
    assert offered(model, 1) == ['swap', 'target']
    assert tool_texts(result.messages)[1] == 'new'


async def test_removing_an_unknown_name_is_ignored() -> None:
    strategy = Recording('a', remove=('no_such_tool',))
    model = ScriptedModel([call('a'), 'done'])
    await Agent(model, tools=[FakeTool('a')], injection_strategies=[strategy]).run('go')
    assert offered(model, 1) == ['a']


async def test_strategy_returning_garbage_is_an_error() -> None:
    class Broken:
        def evaluate(self, event: ToolCallOutcome) -> Any:
            return ['not', 'an', 'injection']

    agent = Agent(ScriptedModel([call('a'), 'done']), tools=[FakeTool('a')], injection_strategies=[Broken()])
    with pytest.raises(UserError, match='Return a ToolInjection or None'):
        await agent.run('go')


async def test_injection_adding_a_non_tool_is_an_error() -> None:
    class Broken:
        def evaluate(self, event: ToolCallOutcome) -> ToolInjection:
            return ToolInjection(add=('nope',))  # type: ignore[arg-type]

    agent = Agent(ScriptedModel([call('a'), 'done']), tools=[FakeTool('a')], injection_strategies=[Broken()])
    with pytest.raises(UserError, match='not a Tool'):
        await agent.run('go')


async def test_decorator_returning_a_non_tool_is_an_error() -> None:
    facade = UnfoldingTool.of('group', 'Group', [FakeTool('a')])
    agent = Agent(ScriptedModel([call('group'), 'done']), tools=[facade], tool_decorator=lambda t: 'nope')  # type: ignore[arg-type,return-value]
    with pytest.raises(UserError, match='tool_decorator returned str'):
        await agent.run('go')


@pytest.mark.parametrize('bad', ['strategy', [object()], [None], 42])
def test_bad_strategies_are_rejected_at_construction(bad: Any) -> None:
    with pytest.raises(UserError, match='injection_strategies'):
        Agent(ScriptedModel(['x']), injection_strategies=bad)


def test_bad_decorator_is_rejected_at_construction() -> None:
    with pytest.raises(UserError, match='tool_decorator'):
        Agent(ScriptedModel(['x']), tool_decorator='upper')  # type: ignore[arg-type]


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_facade_and_slow_sibling_in_one_reply(anyio_backend: str) -> None:
    slow = FakeTool('slow', 'slow done', delay=0.05)
    facade = UnfoldingTool.of('group', 'Group', [FakeTool('a')])
    model = ScriptedModel([[call('slow'), call('group')], call('a'), 'done'])
    result = await Agent(model, tools=[slow, facade]).run('go')
    assert offered(model, 1) == ['slow', 'a', 'group', 'group_context']
    assert result.output == 'done' and result.usage.tool_calls == 3


async def test_failed_facade_call_does_not_unfold() -> None:
    def selector(raw: str) -> list[Tool]:
        raise ValueError('pick a level')

    facade = UnfoldingTool.selectable('levels', 'Levels', [FakeTool('a')], None, selector)
    model = ScriptedModel([call('levels'), 'done'])
    result = await Agent(model, tools=[facade]).run('go')
    assert tool_texts(result.messages) == ['Error: pick a level']
    assert offered(model, 1) == ['levels']


def plan_call(*steps: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    import json

    return call('execute_tool_plan', {'steps': [{'id': sid, 'tool': name, 'arguments': json.dumps(arguments)}
                                                for sid, name, arguments in steps]})


async def test_facade_called_in_a_plan_unfolds_too() -> None:
    facade = UnfoldingTool.of('group', 'Group', [FakeTool('a')])
    seen: list[dict[str, Any]] = []

    def record(args: dict[str, Any]) -> str:
        seen.append(args)
        return 'ok'

    other = FakeTool('other', record)
    model = ScriptedModel([plan_call(('s1', 'group', {}), ('s2', 'other', {'x': '$ref:s1'})), call('a'), 'done'])
    result = await Agent(model, tools=[facade, other], tool_planning=True).run('go')
    assert offered(model, 1) == ['other', 'execute_tool_plan', 'a', 'group', 'group_context']
    # a reference to the facade step reads the unfold message as text
    assert seen[0]['x'].startswith('Tools now available: a.')
    assert result.output == 'done'


async def test_facade_step_with_nothing_to_reveal_does_not_unfold() -> None:
    facade = UnfoldingTool.selectable('levels', 'Levels', [FakeTool('a')], None,
                                      lambda raw: [] if 'none' in raw else [FakeTool('b')])
    model = ScriptedModel([plan_call(('s1', 'levels', {'pick': 'none'}), ('s2', 'missing', {})), 'done'])
    await Agent(model, tools=[facade], tool_planning=True).run('go')
    assert offered(model, 1) == ['levels', 'execute_tool_plan']


async def test_facade_twice_in_one_plan_unfolds_once() -> None:
    facade = UnfoldingTool.of('group', 'Group', [FakeTool('a')])
    model = ScriptedModel([plan_call(('s1', 'group', {}), ('s2', 'group', {})), 'done'])
    await Agent(model, tools=[facade], tool_planning=True).run('go')
    assert offered(model, 1) == ['execute_tool_plan', 'a', 'group', 'group_context']


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_shortcut_to_a_hanging_tool_times_out_and_still_unfolds(anyio_backend: str) -> None:
    stuck = FakeTool('stuck', hang=True)
    facade = UnfoldingTool.of('group', 'Group', [stuck, FakeTool('fine')])
    model = ScriptedModel([call('group', {'stuck': {}}), call('fine'), 'done'])
    result = await Agent(model, tools=[facade], tool_timeout=0.05).run('go')
    assert 'timed out' in tool_texts(result.messages)[0]
    assert offered(model, 1) == ['stuck', 'fine', 'group', 'group_context']
    assert result.output == 'done'


async def test_malformed_facade_arguments_unfold_normally() -> None:  # in the loop
    facade = UnfoldingTool.of('group', 'Group', [FakeTool('a')])
    model = ScriptedModel([call('group', '{"broken": '), 'done'])
    result = await Agent(model, tools=[facade]).run('go')
    assert tool_texts(result.messages)[0].startswith('Tools now available: a.')
    assert offered(model, 1) == ['a', 'group', 'group_context']


async def test_a_plan_may_call_tools_unfolded_earlier_in_the_run() -> None:
    from toolweave import Agent, UnfoldingTool
    from toolweave.testing import FakeTool, ScriptedModel

    inner = FakeTool('lookup', lambda args: {'id': args['id'], 'name': 'Ada'})
    facade = UnfoldingTool.of('directory', 'People directory', [inner])
    plan = {'steps': [{'id': 'a', 'tool': 'lookup', 'arguments': {'id': 7}}]}
    model = ScriptedModel([{'tool': 'directory', 'arguments': {}},
                           {'tool': 'execute_tool_plan', 'arguments': plan}, 'Ada'])
    result = await Agent(model, tools=[facade], tool_planning=True).run('who is 7?')
    assert result.plan_runs[0].ok
    assert result.plan_runs[0].step('a').value == {'id': 7, 'name': 'Ada'}


async def test_a_plan_sent_before_unfolding_cannot_call_inner_tools() -> None:
    from toolweave import Agent, UnfoldingTool
    from toolweave.testing import FakeTool, ScriptedModel

    inner = FakeTool('lookup', lambda args: 'x')
    facade = UnfoldingTool.of('directory', 'People directory', [inner])
    plan = {'steps': [{'id': 'a', 'tool': 'lookup', 'arguments': {}}]}
    model = ScriptedModel([{'tool': 'execute_tool_plan', 'arguments': plan}, 'gave up'])
    result = await Agent(model, tools=[facade], tool_planning=True).run('who?')
    tool_message = result.messages[3]
    assert "Unknown tool 'lookup' in step 'a'" in str(getattr(tool_message, 'content', ''))
    assert inner.call_count == 0


# --- wrappers around facades ---------------------------------------------------------------------------------


async def test_a_facade_behind_an_approval_gate_unfolds() -> None:
    from toolweave import AutoApproveHandler, requires_approval

    query_table = FakeTool('query_table', 'rows')
    database = requires_approval(UnfoldingTool.of('database', 'Database operations.', [query_table]))
    model = ScriptedModel([call('database'), call('query_table'), 'done'])
    result = await Agent(model, tools=[database], review_handler=AutoApproveHandler()).run('go')
    assert tool_texts(result.messages)[0].startswith('Tools now available: query_table')
    assert 'query_table' in offered(model, 1)
    assert query_table.call_count == 1 and tool_texts(result.messages)[1] == 'rows'


class Shouting(DelegatingTool):
    """An output-transforming wrapper: it replaces the result with one of its own (no value)."""

    async def execute(self, arguments: Any, context: Any) -> Any:
        from toolweave import ToolResult

        result = await self.delegate.execute(arguments, context)
        return ToolResult.success(result.output.upper())


async def test_a_facade_behind_an_output_transforming_wrapper_unfolds() -> None:
    inner = FakeTool('inner', 'from inner')
    model = ScriptedModel([call('group'), call('inner'), 'done'])
    result = await Agent(model, tools=[Shouting(UnfoldingTool.of('group', 'Group.', [inner]))]).run('go')
    assert tool_texts(result.messages)[0].startswith('TOOLS NOW AVAILABLE: INNER')
    assert offered(model, 1) == ['inner', 'group', 'group_context']
    assert inner.call_count == 1
