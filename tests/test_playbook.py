"""PlaybookTool: construction, unlock conditions, registration forms, locked calls and descriptions, state
tracking, errors, prompts and result packaging."""

from __future__ import annotations

from typing import Any

import pytest

from toolweave import (
    AfterTools,
    Agent,
    AgentProcess,
    AgentRunResult,
    AllOf,
    AnyOf,
    DuplicateToolError,
    OnArtifact,
    OnArtifactMatching,
    OnBlackboard,
    OnBlackboardMatching,
    PlaybookContext,
    PlaybookTool,
    ToolConfigurationError,
    ToolResult,
    UnlockCondition,
    UserError,
    WhenPredicate,
    current_process,
    tool,
)
from toolweave.testing import ScriptedModel

pytestmark = pytest.mark.anyio

LOCKED = 'This tool is not yet available.'


def call(name: str, arguments: Any = None) -> dict[str, Any]:
    return {'tool': name, 'arguments': arguments or {}}


async def run_inside(agentic: Any, arguments: Any = None) -> tuple[ToolResult, AgentRunResult]:
    """Call `agentic` from an outer agent run; returns the call's result and the outer run."""
    outer = ScriptedModel([call(agentic.name, arguments), 'outer done'])
    run = await Agent(outer, tools=[agentic]).run('go')
    return run.process.history[0].result, run


def tool_outputs(model: ScriptedModel) -> list[str]:
    return [m.content for m in model.last_messages if m.role == 'tool']


class Doc:
    def __init__(self, title: str = 'doc') -> None:
        self.title = title


class Report(Doc):
    pass


calls: list[str] = []


def make(name: str, output: Any = None, *, fail: bool = False) -> Any:
    """A sub-tool that records that it ran."""

    def body() -> Any:
        calls.append(name)
        if fail:
            raise RuntimeError(f'{name} broke')
        return output if output is not None else f'{name} ok'

    return tool(name=name, description=f'{name.capitalize()} things.')(body)


search, fetch, analyze, summarize, report = (make(n) for n in ('search', 'fetch', 'analyze', 'summarize', 'report'))


@pytest.fixture(autouse=True)
def _clear_calls() -> None:
    calls.clear()


# --- construction and registration -----------------------------------------------------------------------------------


def test_construction_and_counts() -> None:
    playbook = PlaybookTool('researcher', 'Research and analyze topics')
    assert (playbook.name, playbook.description) == ('researcher', 'Research and analyze topics')
    assert playbook.unlocked_tool_count == 0 and playbook.locked_tool_count == 0
    two = playbook.with_tools(search, fetch)
    assert two.unlocked_tool_count == 2 and two.locked_tool_count == 0
    locked = playbook.with_tool(analyze).unlocked_by(search)
    assert locked.unlocked_tool_count == 0 and locked.locked_tool_count == 1
    curried = playbook.with_tool(analyze)(search)
    assert curried.locked_tool_count == 1
    chained = (two.with_tool(analyze).unlocked_by(search).with_tool(summarize).unlocked_by(analyze)
               .with_tool(report).unlocked_by_all(search, analyze))
    assert chained.unlocked_tool_count == 2 and chained.locked_tool_count == 3
    assert playbook.locked_tool_count == 0 and two.locked_tool_count == 0  # copies


def test_registration_forms_create_their_conditions() -> None:
    base = PlaybookTool('p', 'd')

    def pred(ctx: PlaybookContext) -> bool:
        return True

    forms = {
        'all': base.with_tool(report).unlocked_by_all(search, 'fetch'),
        'any': base.with_tool(report).unlocked_by_any(search, fetch),
        'artifact': base.with_tool(report).unlocked_by_artifact(Doc),
        'artifact_matching': base.with_tool(report).unlocked_by_artifact_matching(lambda a: True),
        'blackboard': base.with_tool(report).unlocked_by_blackboard(Doc),
        'blackboard_matching': base.with_tool(report).unlocked_by_blackboard_matching(lambda bb: True),
        'when_pred': base.with_tool(report).unlocked_when(pred),
        'when_cond': base.with_tool(report).unlocked_when(OnArtifact(Doc) & AfterTools(search)),
    }
    conditions = {key: value.locked_tools[0].condition for key, value in forms.items()}
    assert isinstance(conditions['all'], AfterTools) and conditions['all'].names == ('search', 'fetch')
    any_of = conditions['any']
    assert isinstance(any_of, AnyOf)
    assert [c.names for c in any_of.conditions if isinstance(c, AfterTools)] == [('search',), ('fetch',)]
    assert isinstance(conditions['artifact'], OnArtifact) and conditions['artifact'].type is Doc
    assert isinstance(conditions['artifact_matching'], OnArtifactMatching)
    assert isinstance(conditions['blackboard'], OnBlackboard) and conditions['blackboard'].type is Doc
    assert isinstance(conditions['blackboard_matching'], OnBlackboardMatching)
    assert isinstance(conditions['when_pred'], WhenPredicate) and conditions['when_pred'].predicate is pred
    assert isinstance(conditions['when_cond'], AllOf)
    assert all(form.locked_tools[0].tool is report for form in forms.values())


def test_bad_registrations() -> None:
    base = PlaybookTool('p', 'd', tools=[search])
    with pytest.raises(UserError, match='at least one'):
        base.with_tool(report).unlocked_by()
    with pytest.raises(UserError, match='at least one'):
        base.with_tool(report).unlocked_by_any()
    with pytest.raises(UserError, match='Tool or a tool name'):
        base.with_tool(report).unlocked_by(42)  # type: ignore[arg-type]
    with pytest.raises(UserError, match='class'):
        base.with_tool(report).unlocked_by_artifact('Doc')  # type: ignore[arg-type]
    with pytest.raises(UserError, match='UnlockCondition or a predicate'):
        base.with_tool(report).unlocked_when('soon')  # type: ignore[arg-type]
    with pytest.raises(UserError, match='function'):
        base.with_tool(report).unlocked_by_artifact_matching(None)  # type: ignore[arg-type]
    with pytest.raises(UserError, match='UnlockConditions'):
        AllOf(AfterTools('a'), 'b')  # type: ignore[arg-type]
    with pytest.raises(DuplicateToolError, match="'search'"):
        base.with_tool(search).unlocked_by(fetch)
    with pytest.raises(DuplicateToolError, match="'report'"):
        base.with_tool(report).unlocked_by(search).with_tools(report)


# --- conditions -----------------------------------------------------------------------------------


def ctx(*called: str, artifacts: tuple[object, ...] = (), process: AgentProcess | None = None) -> PlaybookContext:
    return PlaybookContext(called, artifacts, len(called), process)


def test_after_tools_needs_every_name() -> None:
    condition = AfterTools('search', 'fetch')
    assert not condition.is_satisfied(ctx())
    assert not condition.is_satisfied(ctx('search'))
    assert condition.is_satisfied(ctx('search', 'fetch'))
    assert condition.hint(ctx('search')) == 'You must first use: fetch'
    assert condition.hint(ctx()) == 'You must first use: search, fetch'


def test_any_of_needs_one() -> None:
    condition = AnyOf(AfterTools('search'), AfterTools('fetch'))
    assert condition.is_satisfied(ctx('search')) and condition.is_satisfied(ctx('fetch'))
    assert not condition.is_satisfied(ctx('analyze'))
    assert (AfterTools('search') | AfterTools('fetch')).is_satisfied(ctx('fetch'))


def test_all_of_needs_both() -> None:
    condition = AllOf(AfterTools('search'), OnArtifact(Doc))
    assert not condition.is_satisfied(ctx('search'))
    assert not condition.is_satisfied(ctx(artifacts=(Doc(),)))
    assert condition.is_satisfied(ctx('search', artifacts=(Doc(),)))


def test_on_artifact_matches_the_type_and_subtypes_only() -> None:
    condition = OnArtifact(Doc)
    assert condition.is_satisfied(ctx(artifacts=(Doc(),)))
    assert condition.is_satisfied(ctx(artifacts=(Report(),)))
    assert not condition.is_satisfied(ctx(artifacts=('a string',)))
    assert condition.hint(ctx()) == 'You must first produce an artifact of type: Doc'


def test_predicates_and_blackboard_conditions() -> None:
    condition: UnlockCondition = WhenPredicate(lambda c: c.iteration_count >= 3)
    assert not condition.is_satisfied(PlaybookContext(iteration_count=2))
    assert condition.is_satisfied(PlaybookContext(iteration_count=3))
    process = AgentProcess()
    on_board = OnBlackboard(Doc)
    matching = OnBlackboardMatching(lambda board: board.count(Doc) > 0)
    by_name = OnBlackboard('Doc')
    for condition in (on_board, matching, by_name):
        assert not condition.is_satisfied(ctx(process=process))
        assert not condition.is_satisfied(ctx())  # no process at all
    process.add(Report('r'))
    for condition in (on_board, matching, by_name):
        assert condition.is_satisfied(ctx(process=process))
    assert OnArtifactMatching(lambda a: getattr(a, 'title', '') == 'x').is_satisfied(ctx(artifacts=(Doc('x'),)))


def test_hints_of_every_condition() -> None:
    empty = ctx()
    assert AllOf(AfterTools('a')).hint(empty) == 'Multiple conditions must be met before this tool is available.'
    assert AnyOf(AfterTools('a')).hint(empty) == 'At least one prerequisite condition must be met.'
    for condition in (WhenPredicate(lambda c: False), OnBlackboard(Doc), OnBlackboardMatching(lambda b: False),
                      OnArtifactMatching(lambda a: False)):
        assert condition.hint(empty) == 'Prerequisites have not been met yet.'


def test_custom_conditions_subclass_unlock_condition() -> None:
    class Never(UnlockCondition):
        def is_satisfied(self, context: PlaybookContext) -> bool:
            return False

    assert Never().hint(ctx()) == 'Prerequisites have not been met yet.'
    assert not (Never() & AfterTools('a')).is_satisfied(ctx('a'))


# --- a playbook run -----------------------------------------------------------------------------------


async def test_locked_calls_are_refused_with_their_hint_and_not_run() -> None:
    inner = ScriptedModel([call('analyze'), call('summarize'), call('report'), call('process'), call('format'),
                           call('finalize'), 'done'])
    playbook = (PlaybookTool('researcher', 'Research', model=inner).with_tools(search, fetch)
                .with_tool(analyze).unlocked_by(search)
                .with_tool(summarize).unlocked_by_all(search, fetch)
                .with_tool(report).unlocked_when(AllOf(AfterTools('search'), OnArtifact(Doc)))
                .with_tool(make('process')).unlocked_by_any(search, fetch)
                .with_tool(make('format')).unlocked_by_artifact(Doc)
                .with_tool(make('finalize')).unlocked_when(lambda c: c.iteration_count >= 3))
    result, _ = await run_inside(playbook)
    assert tool_outputs(inner) == [
        f'{LOCKED} You must first use: search',
        f'{LOCKED} You must first use: search, fetch',
        f'{LOCKED} Multiple conditions must be met before this tool is available.',
        f'{LOCKED} At least one prerequisite condition must be met.',
        f'{LOCKED} You must first produce an artifact of type: Doc',
        f'{LOCKED} Prerequisites have not been met yet.',
    ]
    assert calls == [] and result.output == 'done'


async def test_hint_lists_only_the_missing_tools() -> None:
    inner = ScriptedModel([call('search'), call('summarize'), call('fetch'), call('summarize'), 'done'])
    playbook = (PlaybookTool('p', 'd', model=inner).with_tools(search, fetch)
                .with_tool(summarize).unlocked_by_all(search, fetch))
    await run_inside(playbook)
    assert tool_outputs(inner) == ['search ok', f'{LOCKED} You must first use: fetch', 'fetch ok', 'summarize ok']
    assert calls == ['search', 'fetch', 'summarize']


async def test_a_locked_call_is_not_recorded() -> None:
    inner = ScriptedModel([call('analyze'), call('finalize'), call('search'), call('finalize'), call('analyze'),
                           'done'])
    playbook = (PlaybookTool('p', 'd', model=inner).with_tools(search)
                .with_tool(analyze).unlocked_by(search)
                .with_tool(make('finalize')).unlocked_when(lambda c: c.iteration_count >= 1))
    await run_inside(playbook)
    outputs = tool_outputs(inner)
    assert outputs[0].startswith(LOCKED) and outputs[1].startswith(LOCKED)  # the refusal did not count
    assert outputs[2:] == ['search ok', 'finalize ok', 'analyze ok']


async def test_description_shows_the_lock_until_unlocked() -> None:
    inner = ScriptedModel([call('search'), 'done'])
    playbook = PlaybookTool('p', 'd', model=inner).with_tools(search).with_tool(analyze).unlocked_by(search)
    await run_inside(playbook)
    before = {t.name: t.description for t in inner.requests[0].tools}
    after = {t.name: t.description for t in inner.requests[1].tools}
    assert before['analyze'] == f'Analyze things.\n\n{LOCKED} You must first use: search'
    assert after['analyze'] == 'Analyze things.'
    assert before['search'] == after['search'] == 'Search things.'
    assert analyze.description == 'Analyze things.'  # the registered tool itself is untouched


async def test_artifacts_are_recorded_element_by_element() -> None:
    docs = make('list_docs', [None, 'text', Report('r')])
    inner = ScriptedModel([call('format'), call('list_docs'), call('format'), 'done'])
    playbook = (PlaybookTool('p', 'd', model=inner).with_tools(docs)
                .with_tool(make('format')).unlocked_by_artifact(Report))
    result, _ = await run_inside(playbook)
    assert tool_outputs(inner)[2] == 'format ok'
    assert isinstance(result.value, list) and result.value[0] == 'text' and isinstance(result.value[1], Report)


async def test_a_prerequisite_that_failed_still_counts() -> None:
    broken_search = make('search', fail=True)
    inner = ScriptedModel([call('search'), call('analyze'), 'done'])
    playbook = PlaybookTool('p', 'd', model=inner).with_tools(broken_search).with_tool(analyze).unlocked_by('search')
    await run_inside(playbook)
    assert tool_outputs(inner) == ['Error: search broke', 'analyze ok']


async def test_conditions_are_checked_on_every_call() -> None:
    opener, closer = make('open'), make('close')
    inner = ScriptedModel([call('open'), call('edit'), call('close'), call('edit'), call('open'), call('edit'),
                           call('analyze'), call('close'), call('analyze'), 'done'])
    playbook = (PlaybookTool('p', 'd', model=inner).with_tools(opener, closer)
                .with_tool(make('edit')).unlocked_when(lambda c: c.called_tools.count('open') >
                                                       c.called_tools.count('close'))
                .with_tool(analyze).unlocked_by('open'))
    await run_inside(playbook)
    outputs = tool_outputs(inner)
    assert outputs[1] == 'edit ok'
    assert outputs[3].startswith(LOCKED)  # the predicate lock closed again
    assert outputs[5] == 'edit ok'
    assert outputs[6] == outputs[8] == 'analyze ok'  # AfterTools stays satisfied


async def test_blackboard_condition_sees_objects_added_during_the_run() -> None:  # end to end
    @tool
    def load_profile() -> str:
        """Load the profile."""
        process = current_process()
        assert process is not None
        process.add(Doc('profile'))
        return 'loaded'

    inner = ScriptedModel([call('act'), call('load_profile'), call('act'), 'done'])
    playbook = (PlaybookTool('p', 'd', model=inner).with_tools(load_profile)
                .with_tool(make('act')).unlocked_by_blackboard(Doc))
    await run_inside(playbook)
    assert tool_outputs(inner) == [f'{LOCKED} Prerequisites have not been met yet.', 'loaded', 'act ok']


async def test_a_raising_condition_keeps_the_tool_locked_and_says_why() -> None:
    def broken(c: PlaybookContext) -> bool:
        raise KeyError('budget')

    inner = ScriptedModel([call('act'), 'done'])
    playbook = PlaybookTool('p', 'd', model=inner, tools=[search]).with_tool(make('act')).unlocked_when(broken)
    result, _ = await run_inside(playbook)
    output = tool_outputs(inner)[0]
    assert output.startswith(LOCKED) and "KeyError: 'budget'" in output
    assert 'KeyError' in next(t.description for t in inner.requests[0].tools if t.name == 'act')
    assert result.ok and calls == []


async def test_unknown_tool_and_bad_arguments_inside_the_playbook() -> None:
    @tool
    def needs(n: int) -> int:
        """Needs a number."""
        return n

    inner = ScriptedModel([call('nope'), {'tool': 'needs', 'arguments': '{"n": "x"}'}, 'done'])
    await run_inside(PlaybookTool('p', 'd', model=inner, tools=[needs]))
    outputs = tool_outputs(inner)
    assert outputs[0].startswith("Error: Unknown tool 'nope'") and 'needs' in outputs[0]
    assert outputs[1].startswith("Error: Invalid arguments for tool 'needs'")




async def test_error_results() -> None:
    assert (await PlaybookTool('p', 'd').call('{}')).error == 'No tools available for PlaybookTool'
    locked_only = PlaybookTool('p', 'd').with_tool(analyze).unlocked_by(search)
    assert (await locked_only.call('{}')).error == 'No AgentProcess context available'
    assert (await PlaybookTool('p', 'd', tools=[search]).call('{}')).error == 'No AgentProcess context available'


async def test_default_and_custom_system_prompt() -> None:
    inner = ScriptedModel(['a', 'b'])
    playbook = PlaybookTool('researcher', 'Research and analyze topics', model=inner, tools=[search])
    await run_inside(playbook)
    prompt = inner.requests[0].messages[0].content
    assert prompt is not None
    assert 'Research and analyze topics' in prompt
    assert 'Some tools may require certain prerequisites' in prompt
    await run_inside(playbook.with_system_prompt('Custom prompt'))
    assert inner.requests[1].messages[0].content == 'Custom prompt'


async def test_result_packaging_and_default_iterations() -> None:
    assert PlaybookTool('p', 'd').max_iterations == 20
    one = ScriptedModel([call('write'), 'one'])
    result, _ = await run_inside(PlaybookTool('p', 'd', model=one, tools=[make('write', Doc('a'))]))
    assert isinstance(result.value, Doc)
    none = ScriptedModel([call('search'), 'plain'])
    result, _ = await run_inside(PlaybookTool('p', 'd', model=none, tools=[search]))
    assert result.output == 'plain' and not result.has_value


async def test_each_call_starts_with_fresh_state() -> None:
    inner = ScriptedModel([call('search'), call('analyze'), 'first', call('analyze'), 'second'])
    playbook = PlaybookTool('p', 'd', model=inner).with_tools(search).with_tool(analyze).unlocked_by(search)
    outer = ScriptedModel([call('p'), call('p'), 'done'])
    await Agent(outer, tools=[playbook]).run('go')
    assert tool_outputs(inner)[-1] == f'{LOCKED} You must first use: search'


async def test_a_prerequisite_that_names_no_tool_is_a_configuration_error() -> None:
    inner = ScriptedModel(['never'])
    typo = PlaybookTool('p', 'd', model=inner, tools=[search]).with_tool(analyze).unlocked_by_any('serch', search)
    with pytest.raises(ToolConfigurationError, match=r"unlocked by \['serch'\]"):
        await run_inside(typo)
    assert inner.call_count == 0
    later = PlaybookTool('p', 'd', model=ScriptedModel(['fine'])).with_tool(analyze).unlocked_by('search')
    result, _ = await run_inside(later.with_tools(search))  # added after the registration: fine
    assert result.output == 'fine'
    auto = PlaybookTool('p', 'd', model=ScriptedModel(['fine']), tools=[search]).with_tool(analyze).unlocked_by('x')
    result, _ = await run_inside(auto.with_tool_chaining_from_any())  # any name may still appear
    assert result.output == 'fine'


async def test_unfolded_tools_count_as_calls() -> None:
    from toolweave import UnfoldingTool

    group = UnfoldingTool.of('research', 'Research tools. Invoke to see them.', [search, fetch])
    inner = ScriptedModel([call('research'), call('search'), call('analyze'), 'done'])
    playbook = PlaybookTool('p', 'd', model=inner, tools=[group]).with_tool(analyze).unlocked_by(search)
    await run_inside(playbook.with_tools(make('unused')))
    assert tool_outputs(inner)[-2:] == ['search ok', 'analyze ok']


# --- the curried form with an artifact class; plain values as artifacts ------------------------------------------


def test_the_curried_form_takes_artifact_classes_and_tools() -> None:
    base = PlaybookTool('p', 'd')
    by_class = base.with_tool(report)(Doc).locked_tools[0].condition
    assert isinstance(by_class, OnArtifact) and by_class.type is Doc
    by_name = base.with_tool(report)('search').locked_tools[0].condition
    assert isinstance(by_name, AfterTools) and by_name.names == ('search',)
    both = base.with_tool(report)(search, Doc).locked_tools[0].condition
    assert isinstance(both, AllOf)
    assert [type(c).__name__ for c in both.conditions] == ['AfterTools', 'OnArtifact']


async def test_a_tool_unlocked_by_an_artifact_class_through_the_curried_form() -> None:
    inner = ScriptedModel([call('report'), call('write'), call('report'), 'done'])
    playbook = (PlaybookTool('p', 'd', model=inner).with_tools(make('write', Doc('a')))
                .with_tool(report)(Doc))
    await run_inside(playbook)
    assert calls == ['write', 'report']  # the first `report` call was refused: no Doc yet


async def test_a_plain_value_marked_as_an_artifact_is_packaged_and_unlocks() -> None:
    @tool
    def save() -> ToolResult:
        """Save a draft."""
        calls.append('save')
        return ToolResult.success('saved', 'draft-7')

    inner = ScriptedModel([call('save'), call('report'), 'done'])
    playbook = PlaybookTool('p', 'd', model=inner).with_tools(save).with_tool(report).unlocked_by_artifact(str)
    result, _ = await run_inside(playbook)
    assert calls == ['save', 'report'] and result.value == 'draft-7'
