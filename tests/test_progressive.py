"""UnfoldingTool on its own: factories, messages, selection, shortcuts, the class-decorator form, and the
unfolding strategy evaluated directly (the cases in a running loop are in test_injection.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from toolweave import (
    AgentProcess,
    DuplicateToolError,
    Tool,
    ToolCallOutcome,
    ToolConfigurationError,
    ToolInjection,
    ToolMetadata,
    ToolNameError,
    ToolResult,
    UnfoldingInjectionStrategy,
    UnfoldingSelection,
    UnfoldingTool,
    UserError,
    tool,
    tools_from_instance,
    unfolding_tools,
    with_note,
)
from toolweave.progressive import UnfoldingContextTool, UnfoldingGuideTool, record_unfoldings
from toolweave.testing import FakeTool

pytestmark = pytest.mark.anyio

PREAMBLE = ("Tools now available: {}. You MUST call one of these tools to complete the user's request. "
            'Do NOT respond with text \u2014 call a tool.')


def names(tools: Any) -> list[str]:
    return [t.name for t in tools]


def outcome(tool: Tool, arguments: str, result: ToolResult, current: list[Tool],
            unfolded: Sequence[UnfoldingSelection] = ()) -> ToolCallOutcome:
    return ToolCallOutcome(tool, arguments, result, tuple(current), AgentProcess(), tuple(unfolded))


async def called(facade: Tool, arguments: str, current: list[Tool]) -> ToolCallOutcome:
    """Call `facade` like the loop does (recording what unfolds) and describe the call as the loop would."""
    with record_unfoldings() as unfolded:
        result = await facade.call(arguments)
    return outcome(facade, arguments, result, current, unfolded)


async def unfold(facade: Tool, arguments: str, current: list[Tool]) -> ToolInjection | None:
    """Call `facade` like the loop does, then ask the strategy what changes."""
    return UnfoldingInjectionStrategy().evaluate(await called(facade, arguments, current))


# --- building and the unfold message -----------------------------------------------------------------------


def test_of_definition_and_defaults() -> None:
    facade = UnfoldingTool.of('database_operations', 'Work with the database.', [FakeTool('a'), FakeTool('b')])
    assert facade.name == 'database_operations'
    assert facade.description == 'Work with the database.'
    assert facade.definition.parameters == {'type': 'object', 'properties': {}, 'required': []}
    assert facade.child_tool_usage_notes is None and facade.exclusive is False
    assert names(facade.inner_tools) == ['a', 'b']


def test_call_lists_enabled_tools() -> None:
    facade = UnfoldingTool.of('group', 'Group.', [FakeTool('tool_a'), FakeTool('tool_b')])
    result = facade.call_sync('{}')
    assert result.ok and result.output == PREAMBLE.format('tool_a, tool_b')
    assert isinstance(result.value, UnfoldingSelection) and result.value.names == ['tool_a', 'tool_b']


@pytest.mark.parametrize(('notes', 'suffix'), [(None, ''), ('', ''), ('   ', ''), ('Use a first.', '\n\nUse a first.')])
def test_notes_follow_the_preamble(notes: str | None, suffix: str) -> None:
    facade = UnfoldingTool.of('group', 'Group.', [FakeTool('a')], child_tool_usage_notes=notes)
    assert facade.call_sync('{}').output == PREAMBLE.format('a') + suffix


def test_select_tools_defaults_to_all() -> None:
    inner = [FakeTool('a'), FakeTool('b')]
    facade = UnfoldingTool.of('group', 'Group.', inner)
    assert facade.select_tools('{}') == inner and facade.select_tools('') == inner


async def test_remove_on_invoke_is_reported_but_ignored() -> None:
    facade = UnfoldingTool.of('group', 'Group.', [FakeTool('a')], remove_on_invoke=False)
    assert facade.remove_on_invoke is False
    injection = await unfold(facade, '{}', [facade])
    assert injection is not None and injection.remove == ('group',)


def test_inner_items_may_be_functions_and_tool_objects() -> None:
    def ping() -> str:
        """Ping."""
        return 'pong'

    class Ops:
        @tool
        def status(self) -> str:
            """Status."""
            return 'fine'

    facade = UnfoldingTool.of('group', 'Group.', [ping, Ops(), FakeTool('x')])
    assert names(facade.inner_tools) == ['ping', 'status', 'x']


@pytest.mark.parametrize('bad', ['name with space', '', 'a' * 65, 'caf\u00e9', 'a.b'])
def test_bad_facade_names_are_rejected(bad: str) -> None:
    with pytest.raises(ToolNameError, match='must match'):
        UnfoldingTool.of(bad, 'Group.', [FakeTool('a')])


@pytest.mark.parametrize('bad', ['not a list', None, 42, {'a': 1}, [None], [3], [FakeTool]])
def test_bad_inner_tools_are_rejected(bad: Any) -> None:
    with pytest.raises(UserError, match='unfolding tool'):
        UnfoldingTool.of('group', 'Group.', bad)


def test_duplicate_inner_names_are_rejected_but_the_same_tool_twice_is_kept_once() -> None:
    shared = FakeTool('a')
    assert names(UnfoldingTool.of('g', 'G.', [shared, shared]).inner_tools) == ['a']
    with pytest.raises(DuplicateToolError, match="'a'"):
        UnfoldingTool.of('g', 'G.', [FakeTool('a'), FakeTool('a')])


def test_bad_notes_and_selector_are_rejected() -> None:
    with pytest.raises(UserError, match='child_tool_usage_notes'):
        UnfoldingTool.of('g', 'G.', [FakeTool('a')], child_tool_usage_notes=3)  # type: ignore[arg-type]
    with pytest.raises(UserError, match='selector'):
        UnfoldingTool.selectable('g', 'G.', [], None, 'nope')  # type: ignore[arg-type]
    with pytest.raises(UserError, match='type'):
        UnfoldingTool.selectable('g', 'G.', [], {'type': 'string'}, lambda raw: [])


# --- selection ---------------------------------------------------------------------------------------------


def test_selectable_receives_raw_json() -> None:
    read, write = FakeTool('read'), FakeTool('write')
    seen: list[str] = []

    def selector(raw: str) -> list[Tool]:
        seen.append(raw)
        return [read] if 'read' in raw else [write]

    facade = UnfoldingTool.selectable('access', 'Access.', [read, write],
                                      {'type': 'object', 'properties': {'mode': {'type': 'string'}}}, selector)
    assert names(facade.select_tools('{"mode":"read"}')) == ['read']
    assert names(facade.select_tools('{"mode":"write"}')) == ['write']
    assert names(facade.inner_tools) == ['read', 'write']
    facade.call_sync({'mode': 'read'})
    assert json.loads(seen[-1]) == {'mode': 'read'}  # a mapping from Python code reaches the selector as JSON


def test_selector_that_returns_garbage_is_a_configuration_error() -> None:
    facade = UnfoldingTool.selectable('g', 'G.', [], None, lambda raw: 'oops')  # type: ignore[arg-type,return-value]
    with pytest.raises(ToolConfigurationError, match='Return a list of Tool'):
        facade.call_sync('{}')
    facade = UnfoldingTool.selectable('g', 'G.', [], None, lambda raw: ['oops'])  # type: ignore[list-item]
    with pytest.raises(ToolConfigurationError, match='Tool objects only'):
        facade.call_sync('{}')


def test_selector_that_raises_is_a_failure_the_model_reads() -> None:
    def selector(raw: str) -> list[Tool]:
        raise KeyError('accessLevel')

    facade = UnfoldingTool.selectable('g', 'G.', [FakeTool('a')], None, selector)
    result = facade.call_sync('{}')
    assert not result.ok and 'accessLevel' in (result.error or '')
    assert UnfoldingInjectionStrategy().evaluate(outcome(facade, '{}', result, [facade])) is None


def by_category() -> tuple[UnfoldingTool, FakeTool, FakeTool, FakeTool]:
    query, insert, delete = FakeTool('query'), FakeTool('insert'), FakeTool('delete')
    facade = UnfoldingTool.by_category('db', 'Database.', {'read': [query], 'write': [insert, delete]})
    return facade, query, insert, delete


def test_by_category_selects() -> None:
    facade, query, insert, delete = by_category()
    assert facade.inner_tools == (query, insert, delete)
    assert facade.select_tools('{"category":"read"}') == [query]
    assert facade.select_tools('{"category":"write"}') == [insert, delete]
    assert facade.categories == {'read': (query,), 'write': (insert, delete)}


@pytest.mark.parametrize('raw', ['{"category":"admin"}', '{}', '', '   ', '{not json', '{"category": 5}',
                                 '{"category": null}', '["read"]', '"read"', '{"other":"read"}'])
def test_unknown_or_missing_category_gives_all(raw: str) -> None:
    facade, query, insert, delete = by_category()
    assert facade.select_tools(raw) == [query, insert, delete]


def test_category_schema() -> None:
    facade, *_ = by_category()
    assert facade.definition.parameters == {
        'type': 'object',
        'properties': {'category': {'type': 'string', 'description': 'Category to access. Available: read, write',
                                    'enum': ['read', 'write']}},
        'required': ['category'],
    }
    custom = UnfoldingTool.by_category('c', 'C.', {'alpha': [FakeTool('a')], 'beta': [FakeTool('b')],
                                                   'gamma': [FakeTool('g')]}, category_parameter='area')
    prop = custom.definition.parameters['properties']['area']
    assert prop['description'] == 'Category to access. Available: alpha, beta, gamma'
    assert custom.definition.parameters['required'] == ['area']
    assert names(custom.select_tools('{"area":"beta"}')) == ['b']


@pytest.mark.parametrize('bad', [{}, [], None, {'': [FakeTool('a')]}, {3: [FakeTool('a')]}])
def test_bad_categories_are_rejected(bad: Any) -> None:
    with pytest.raises(UserError, match='unfolding tool'):
        UnfoldingTool.by_category('c', 'C.', bad)


def test_dynamic_tools_get_fresh_state_per_call() -> None:
    def selector(raw: str) -> list[Tool]:
        connection = json.loads(raw or '{}').get('connection', 'localhost')
        state: dict[str, int] = {'calls': 0}

        def query(args: dict[str, Any]) -> str:
            state['calls'] += 1
            return f'{connection} call {state["calls"]}'

        def count(args: dict[str, Any]) -> int:
            return state['calls']

        return [FakeTool('query', query, description=f'Query database at {connection}'),
                FakeTool('count', count, description=f'Calls made to {connection}')]

    facade = UnfoldingTool.selectable('database', 'Database.', [], {'type': 'object', 'properties': {}}, selector)
    first = facade.call_sync('{"connection":"prod-db.example.com"}').value
    assert isinstance(first, UnfoldingSelection)
    assert all('prod-db.example.com' in t.description for t in first.tools)
    query, count = first.tools
    query.call_sync('{}')
    query.call_sync('{}')
    assert count.call_sync('{}').output == '2'  # tools of one call share state
    second = facade.call_sync('{"connection":"other"}').value
    assert isinstance(second, UnfoldingSelection)
    assert second.tools[1].call_sync('{}').output == '0'  # each call gets fresh state


# --- builders ----------------------------------------------------------------------------------------------


def test_with_tools_returns_a_new_facade() -> None:
    base = UnfoldingTool.of('ws', 'Workspace.', [FakeTool('a')], child_tool_usage_notes='Notes.', exclusive=True)
    extended = base.with_tools(FakeTool('b'), FakeTool('c'))
    assert names(extended.inner_tools) == ['a', 'b', 'c'] and names(base.inner_tools) == ['a']
    assert (extended.name, extended.description, extended.child_tool_usage_notes, extended.exclusive) == (
        'ws', 'Workspace.', 'Notes.', True)
    with pytest.raises(DuplicateToolError):
        base.with_tools(FakeTool('a'))


def test_with_tool_object_and_categories() -> None:
    class Helpers:
        @tool
        def helper(self) -> str:
            """Help."""
            return 'helped'

    facade, query, insert, delete = by_category()
    extended = facade.with_tool_object(Helpers())
    assert names(extended.inner_tools) == ['query', 'insert', 'delete', 'helper']
    assert names(extended.select_tools('{"category":"read"}')) == ['query', 'helper']
    assert extended.definition.parameters == facade.definition.parameters
    assert names(facade.select_tools('{"category":"read"}')) == ['query']  # the original is unchanged
    with pytest.raises(UserError, match='neither a Tool nor has @tool'):
        facade.with_tool_object(object())


def test_from_tool_object() -> None:
    class FileWriteTools:
        @tool
        def write_file(self, path: str) -> str:
            """Write."""
            return path

        @tool
        def append_file(self, path: str) -> str:
            """Append."""
            return path

    facade = UnfoldingTool.from_tool_object(FileWriteTools(), 'file_write_tools', 'Writing files.',
                                            remove_on_invoke=False, child_tool_usage_notes='Use write first.')
    assert names(facade.inner_tools) == ['write_file', 'append_file']
    assert facade.child_tool_usage_notes == 'Use write first.' and facade.remove_on_invoke is False
    with pytest.raises(UserError, match=r"from_tool_object\('x'\) got a object with no `@tool` methods"):
        UnfoldingTool.from_tool_object(object(), 'x', 'X.')


# --- the class-decorator form ------------------------------------------------------------------------------


@unfolding_tools(name='mixed', description='Mixed tools.')
class MixedCategoryTools:
    @tool(category='read')
    def read_it(self) -> str:
        """Read."""
        return 'read'

    @tool(category='write')
    def write_it(self) -> str:
        """Write."""
        return 'write'

    @tool
    def describe(self) -> str:
        """Uncategorised."""
        return 'about'


def test_uncategorised_tools_join_every_category_and_all() -> None:
    facade = UnfoldingTool.from_instance(MixedCategoryTools())
    assert list(facade.categories or {}) == ['read', 'write', 'all']
    assert names(facade.select_tools('{"category":"all"}')) == ['read_it', 'write_it', 'describe']
    assert names(facade.select_tools('{"category":"read"}')) == ['read_it', 'describe']
    assert names(facade.select_tools('{"category":"write"}')) == ['write_it', 'describe']
    # the fallback has every tool once, in first-seen order
    assert names(facade.select_tools('{"category":"nope"}')) == ['read_it', 'describe', 'write_it']


def test_no_categories_gives_a_plain_facade() -> None:
    @unfolding_tools(name='db', description='Database.', child_tool_usage_notes='Query first.')
    class DatabaseTools:
        @tool
        def query(self, sql: str) -> str:
            """Run SQL."""
            return sql

        @tool
        def insert(self, table: str) -> str:
            """Insert."""
            return table

    facade = UnfoldingTool.from_instance(DatabaseTools())
    assert facade.categories is None and facade.definition.parameters['properties'] == {}
    assert names(facade.inner_tools) == ['query', 'insert'] and facade.child_tool_usage_notes == 'Query first.'
    assert facade.call_sync('{}').output == PREAMBLE.format('query, insert') + '\n\nQuery first.'


def test_all_exists_only_with_uncategorised_tools() -> None:
    @unfolding_tools(name='files', description='Files.', category_parameter='kind')
    class FileTools:
        @tool(category='read')
        def read_file(self) -> str:
            """Read."""
            return 'r'

        @tool(category='write')
        def write_file(self) -> str:
            """Write."""
            return 'w'

    facade = UnfoldingTool.from_instance(FileTools())
    assert list(facade.categories or {}) == ['read', 'write']
    assert facade.definition.parameters['properties']['kind']['enum'] == ['read', 'write']
    assert names(facade.select_tools('{"kind":"all"}')) == ['read_file', 'write_file']


def test_introspection_errors() -> None:
    class Plain:
        @tool
        def a(self) -> str:
            """A."""
            return 'a'

    @unfolding_tools(name='empty', description='Nothing.')
    class Empty:
        pass

    with pytest.raises(UserError, match='not annotated with @unfolding_tools'):
        UnfoldingTool.from_instance(Plain())
    with pytest.raises(UserError, match='has no methods annotated with @tool and no inner classes annotated with '
                                        '@unfolding_tools'):
        UnfoldingTool.from_instance(Empty())
    with pytest.raises(UserError, match='not an instance'):
        UnfoldingTool.from_instance(MixedCategoryTools)
    assert UnfoldingTool.safely_from_instance(Plain()) is None
    assert UnfoldingTool.safely_from_instance(Empty()) is None


def test_decorator_checks_its_arguments() -> None:
    with pytest.raises(ToolNameError):
        unfolding_tools(name='bad name', description='x')
    with pytest.raises(UserError, match='decorates classes'):
        unfolding_tools(name='ok', description='x')(lambda: None)  # type: ignore[type-var]
    with pytest.raises(UserError, match='description'):
        unfolding_tools(name='ok', description=None)  # type: ignore[arg-type]


def test_tools_from_instance_is_one_facade_or_the_methods() -> None:
    [facade] = tools_from_instance(MixedCategoryTools())
    assert isinstance(facade, UnfoldingTool) and facade.name == 'mixed'

    class Plain:
        @tool
        def a(self) -> str:
            """A."""
            return 'a'

        @tool
        def b(self) -> str:
            """B."""
            return 'b'

    assert names(tools_from_instance(Plain())) == ['a', 'b']
    with pytest.raises(UserError):
        tools_from_instance(object())


def test_every_way_of_listing_an_objects_tools_gives_the_facade_of_an_unfolding_class() -> None:
    from toolweave import SimpleAgenticTool, Toolset, tools_from, tools_from_safely

    instance = MixedCategoryTools()
    for found in (tools_from(instance), tools_from_safely(instance), Toolset([instance]).tools,
                  SimpleAgenticTool('s', 'd').with_tool_object(instance).tools):
        assert [type(t) for t in found] == [UnfoldingTool] and found[0].name == 'mixed'

    class Subclass(MixedCategoryTools):  # not decorated itself: it stands for its methods
        pass

    assert names(tools_from_safely(Subclass())) == ['read_it', 'write_it', 'describe']


def test_with_tool_object_nests_the_facade_of_an_unfolding_class() -> None:
    outer = UnfoldingTool.of('outer', 'Outer.', [FakeTool('a')]).with_tool_object(MixedCategoryTools())
    assert names(outer.inner_tools) == ['a', 'mixed'] and isinstance(outer.inner_tools[1], UnfoldingTool)
    with pytest.raises(UserError, match='neither a Tool nor has @tool'):
        outer.with_tool_object(object())


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

        @unfolding_tools(name='user_permissions', description='Permissions.')
        class Permissions:
            @tool
            def grant(self, user: str) -> str:
                """Grant."""
                return 'Granted'

    @unfolding_tools(name='system_config', description='System configuration.')
    class SystemConfig:
        @tool
        def backup(self) -> str:
            """Back up."""
            return 'Backed up'


def test_nested_classes_become_nested_facades() -> None:
    admin = UnfoldingTool.from_instance(AdminTools())
    assert names(admin.inner_tools) == ['getStatus', 'user_management', 'system_config']
    users = admin.inner_tools[1]
    assert isinstance(users, UnfoldingTool) and names(users.inner_tools) == ['create_user', 'user_permissions']
    permissions = users.inner_tools[1]
    assert isinstance(permissions, UnfoldingTool) and names(permissions.inner_tools) == ['grant']


def test_nested_class_that_needs_arguments_is_an_error() -> None:
    @unfolding_tools(name='outer', description='Outer.')
    class Outer:
        @unfolding_tools(name='inner', description='Inner.')
        class Inner:
            def __init__(self, required: str) -> None:
                self.required = required

            @tool
            def x(self) -> str:
                """X."""
                return self.required

    with pytest.raises(UserError, match='could not be created with no arguments'):
        UnfoldingTool.from_instance(Outer())


# --- shortcut dispatch -------------------------------------------------------------------------------------


async def test_shortcut_calls_the_inner_tool() -> None:
    received: list[Any] = []

    def record(args: dict[str, Any]) -> str:
        received.append(args)
        return 'created'

    create = FakeTool('create_task', record)
    facade = UnfoldingTool.of('tasks', 'Tasks.', [create])
    result = await facade.call('{"create_task":{"name":"review-auth"}}')
    assert result.output == 'created' and received == [{'name': 'review-auth'}]
    assert not isinstance(result.value, UnfoldingSelection)


async def test_shortcut_passes_scalars_json_encoded() -> None:
    class Recorder(Tool):
        def __init__(self) -> None:
            self.arguments: list[Any] = []

        @property
        def definition(self) -> Any:
            from toolweave import ToolDefinition

            return ToolDefinition('activate', 'Activate.')

        async def execute(self, arguments: Any, context: Any) -> ToolResult:
            self.arguments.append(arguments)
            return ToolResult.success('on')

    recorder = Recorder()
    facade = UnfoldingTool.of('personality', 'Personality.', [recorder])
    assert (await facade.call('{"activate":"ecstasy"}')).output == 'on'
    assert recorder.arguments == ['"ecstasy"']


@pytest.mark.parametrize('raw', ['', '{}', '{not json', '["create_task"]', '{"other":{}}', '"create_task"'])
async def test_no_shortcut_means_a_normal_unfold(raw: str) -> None:
    create = FakeTool('create_task')
    facade = UnfoldingTool.of('tasks', 'Tasks.', [create])
    result = await facade.call(raw)
    assert result.output == PREAMBLE.format('create_task') and create.call_count == 0


async def test_no_shortcut_with_no_inner_tools() -> None:
    facade = UnfoldingTool.of('tasks', 'Tasks.', [])
    result = await facade.call('{"create_task":{}}')
    assert result.ok and 'no tools' in result.output


async def test_shortcut_picks_the_first_key_across_all_categories() -> None:
    facade, query, insert, delete = by_category()
    result = await facade.call('{"category":"read","delete":{"id":1},"insert":{}}')
    assert result.ok and delete.call_count == 1 and insert.call_count == 0  # `delete` is not in "read"


async def test_shortcut_failure_is_the_inner_failure() -> None:
    facade = UnfoldingTool.of('tasks', 'Tasks.', [FakeTool('broken', fail='disk full')])
    result = await facade.call('{"broken":{}}')
    assert result.error == 'disk full'


async def test_shortcut_never_targets_a_nested_facade() -> None:
    inner = UnfoldingTool.of('inner', 'Inner.', [FakeTool('leaf')])
    outer = UnfoldingTool.of('outer', 'Outer.', [inner])
    result = await outer.call('{"inner":{}}')
    assert result.output == PREAMBLE.format('inner')


# --- the strategy, evaluated directly ----------------------------------------------------------------------


async def test_strategy_replaces_the_facade_and_keeps_siblings() -> None:
    a, b, sibling = FakeTool('a'), FakeTool('b'), FakeTool('sibling')
    facade = UnfoldingTool.of('group', 'Group.', [a, b])
    injection = await unfold(facade, '{}', [facade, sibling])
    assert injection is not None
    assert injection.remove == ('group',)
    assert names(injection.add) == ['a', 'b', 'group', 'group_context']
    assert injection.add[0] is a and injection.add[1] is b


async def test_strategy_ignores_other_tools() -> None:
    plain = FakeTool('plain')
    assert await unfold(plain, '{}', [plain]) is None


async def test_empty_selection_changes_nothing() -> None:
    facade = UnfoldingTool.selectable('g', 'G.', [FakeTool('a')], None, lambda raw: [])
    result = await facade.call('{}')
    assert result.ok and 'no tools' in result.output
    assert await unfold(facade, '{}', [facade]) is None


async def test_wrapped_facade_is_recognised_and_the_wrapper_removed() -> None:
    facade = UnfoldingTool.of('group', 'Group.', [FakeTool('a')])
    wrapped = with_note(with_note(facade, 'first'), 'second')
    injection = await unfold(wrapped, '{}', [wrapped])
    assert injection is not None and injection.remove == ('group',) and names(injection.add)[0] == 'a'


async def test_exclusive_removes_everything_and_adds_only_inner() -> None:
    inner, sibling = FakeTool('inner'), FakeTool('sibling')
    facade = UnfoldingTool.of('exclusive_tool', 'Exclusive.', [inner], exclusive=True)
    injection = await unfold(facade, '{}', [facade, sibling])
    assert injection is not None
    assert set(injection.remove) == {'exclusive_tool', 'sibling'} and injection.add == (inner,)


async def test_facade_no_longer_in_the_set_does_not_unfold_twice() -> None:
    facade = UnfoldingTool.of('group', 'Group.', [FakeTool('a')])
    assert await unfold(facade, '{}', [FakeTool('group')]) is None


async def test_refused_or_failed_facade_call_does_not_unfold() -> None:
    facade = UnfoldingTool.of('group', 'Group.', [FakeTool('a')])
    refused = ToolResult.failure('Refused by reviewer')
    assert UnfoldingInjectionStrategy().evaluate(outcome(facade, '{}', refused, [facade])) is None


async def test_shortcut_call_still_unfolds() -> None:  # in the loop
    facade = UnfoldingTool.of('tasks', 'Tasks.', [FakeTool('create_task'), FakeTool('list_tasks')])
    injection = await unfold(facade, '{"create_task":{}}', [facade])
    assert injection is not None and names(injection.add)[:2] == ['create_task', 'list_tasks']


async def test_guide_lists_tools_and_never_unfolds() -> None:
    facade = UnfoldingTool.of('group', 'Group.', [FakeTool('a'), FakeTool('b')])
    injection = await unfold(facade, '{}', [facade])
    assert injection is not None
    guide = injection.add[2]
    assert isinstance(guide, UnfoldingGuideTool) and guide.name == 'group'
    for raw in ('{}', '{"category":"x"}', 'garbage', ''):
        result = await guide.call(raw)
        assert result.ok and 'a, b' in result.output and 'Tools now available' not in result.output
        assert await unfold(guide, raw, [guide]) is None  # calling it again injects nothing


async def test_guide_forwards_a_shortcut() -> None:
    a = FakeTool('a', 'from a')
    guide = UnfoldingGuideTool('group', [a])
    assert (await guide.call('{"a":{}}')).output == 'from a'


async def test_context_tool_format() -> None:
    a = FakeTool('vector_search', description='Semantic search')
    b = FakeTool('text_search', description='Exact search')
    facade = UnfoldingTool.of('spotify_search', 'Search Spotify', [a, b], child_tool_usage_notes='Try vector first.')
    injection = await unfold(facade, '{}', [facade])
    assert injection is not None
    context = injection.add[3]
    assert isinstance(context, UnfoldingContextTool) and context.name == 'spotify_search_context'
    assert context.description == 'Search Spotify. Available: vector_search, text_search. Try vector first.'
    assert (await context.call('{}')).output == ('Tools for Search Spotify:\n- vector_search: Semantic search\n'
                                                 '- text_search: Exact search\n\nUsage notes: Try vector first.')
    assert a.description == 'Semantic search'  # children are unchanged


async def test_context_tool_without_notes() -> None:
    facade = UnfoldingTool.of('g', 'Group', [FakeTool('a', description='Does a')], child_tool_usage_notes='  ')
    injection = await unfold(facade, '{}', [facade])
    assert injection is not None
    context = injection.add[-1]
    assert context.description == 'Group. Available: a'
    assert (await context.call(None)).output == 'Tools for Group:\n- a: Does a'


def test_context_name_stays_within_the_name_rule() -> None:
    long_name = 'x' * 64
    context = UnfoldingContextTool(long_name, 'Long.', [FakeTool('a')], None)
    assert len(context.name) == 64 and context.name.endswith('_context')


async def test_inner_tool_named_like_the_facade_wins_over_the_guide() -> None:
    inner = FakeTool('group')
    facade = UnfoldingTool.of('group', 'Group.', [inner])
    injection = await unfold(facade, '{}', [facade])
    assert injection is not None and injection.add[0] is inner and names(injection.add) == ['group', 'group_context']


async def test_category_unfold_reveals_only_that_category() -> None:
    facade, query, insert, delete = by_category()
    injection = await unfold(facade, '{"category":"write"}', [facade])
    assert injection is not None and names(injection.add) == ['insert', 'delete', 'db', 'db_context']


def test_facade_repr_and_metadata() -> None:
    facade = UnfoldingTool.of('group', 'Group.', [FakeTool('a')])
    assert repr(facade) == "UnfoldingTool(name='group', inner_tools=['a'])"
    assert facade.definition.metadata == ToolMetadata()


def test_public_classes_show_the_public_module() -> None:
    for cls in (UnfoldingTool, UnfoldingSelection, UnfoldingInjectionStrategy, ToolInjection, ToolCallOutcome):
        assert cls.__module__ == 'toolweave'


def test_selection_value_is_the_message_text() -> None:
    import copy
    import pickle

    facade = UnfoldingTool.of('group', 'Group.', [FakeTool('a')])
    result = facade.call_sync('{}')
    value = result.value
    assert isinstance(value, UnfoldingSelection) and value == result.output and value.facade is facade
    assert result.artifact is None  # sinks and tool chaining see plain text, not an object
    assert copy.deepcopy(value) is value and json.dumps(value) == json.dumps(result.output)
    restored = pickle.loads(pickle.dumps(value))
    assert type(restored) is str and restored == result.output


def test_toolset_resolves_an_unfolding_tools_object_to_one_facade() -> None:
    from toolweave import Toolset, UnfoldingTool, tool, unfolding_tools

    @unfolding_tools(name='music', description='Music controls')
    class Music:
        @tool
        def play(self, song: str) -> str:
            """Play a song."""
            return f'playing {song}'

        @tool
        def pause(self) -> str:
            """Pause playback."""
            return 'paused'

    toolset = Toolset([Music()])
    assert toolset.names == ['music']
    facade = toolset.get('music')
    assert isinstance(facade, UnfoldingTool)
    assert sorted(t.name for t in facade.inner_tools) == ['pause', 'play']
