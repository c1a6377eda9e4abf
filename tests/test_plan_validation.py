"""Plan parsing and validation: ids, tools, references, cycles and limits; every problem is reported at once."""

from __future__ import annotations

import dataclasses
import json
import pickle
from typing import Any

import pytest

import toolweave
from toolweave import Plan, PlanStep, PlanValidationError, parse_plan, validate_plan
from toolweave.testing import FakeTool, echo_tool

pytestmark = pytest.mark.anyio


def tools() -> list[FakeTool]:
    return [echo_tool(), FakeTool('search'), FakeTool('fetch')]


def step(step_id: Any, tool: Any = 'echo', arguments: Any = '{}') -> dict[str, Any]:
    return {'id': step_id, 'tool': tool, 'arguments': arguments}


async def problems_of(plan: Any, toolset: list[FakeTool] | None = None, **options: Any) -> list[str]:
    """The problems `run_plan` raises with; asserts no tool ran."""
    used = toolset if toolset is not None else tools()
    with pytest.raises(PlanValidationError) as info:
        await toolweave.run_plan(plan, used, **options)
    assert all(t.call_count == 0 for t in used), 'a tool ran although validation failed'
    assert info.value.problems == validate_plan(plan, used, **options)
    return info.value.problems


@pytest.mark.parametrize('plan', [{}, {'steps': None}, {'steps': []}])
async def test_missing_or_empty_steps(plan: dict[str, Any]) -> None:
    (problem,) = await problems_of(plan)
    assert problem.startswith('Tool plan must contain at least one step')


@pytest.mark.parametrize('bad', [None, '', '   '])
async def test_blank_step_id(bad: Any) -> None:
    (problem,) = await problems_of({'steps': [step(bad)]})
    assert problem.startswith('steps[0]: Step ID cannot be null or blank.')


async def test_duplicate_ids_name_both_steps_and_nothing_runs() -> None:
    (problem,) = await problems_of({'steps': [step('s1'), step('s1')]})
    assert problem == ("steps[1] (id 's1'): Duplicate step ID: 's1' (also used by steps[0]). "
                       'Give each step its own id.')


@pytest.mark.parametrize('bad', ['', '  ', None])
async def test_blank_tool(bad: Any) -> None:
    (problem,) = await problems_of({'steps': [step('s1', bad)]})
    assert 'Step tool name cannot be null or blank' in problem


async def test_recursive_plan_is_refused_even_when_the_meta_tool_is_registered() -> None:
    toolset = toolweave.Toolset([echo_tool()])
    toolset.add(toolweave.PlanTool(toolset))
    plan = {'steps': [step('s1', 'execute_tool_plan')]}
    problems = validate_plan(plan, toolset)
    assert problems == ["steps[0] (id 's1'): Step 's1' cannot call 'execute_tool_plan' (recursive plans are not "
                        'allowed). Call the tools themselves as steps of this plan.']


async def test_unknown_tool_lists_the_available_ones_and_is_case_sensitive() -> None:
    problems = await problems_of({'steps': [step('s1', 'nonexistent'), step('s2', 'Echo'), step('s3', 'serch')]})
    assert problems == [
        "steps[0] (id 's1'): Unknown tool 'nonexistent' in step 's1'. Available tools: echo, search, fetch.",
        "steps[1] (id 's2'): Unknown tool 'Echo' in step 's2'. Tool names are case-sensitive: did you mean 'echo'? "
        'Available tools: echo, search, fetch.',
        "steps[2] (id 's3'): Unknown tool 'serch' in step 's3'. Did you mean 'search'? "
        'Available tools: echo, search, fetch.',
    ]


async def test_validation_is_all_or_nothing() -> None:
    await problems_of({'steps': [step('s1'), step('s2', 'nonexistent')]})


async def test_every_problem_is_reported_in_step_order() -> None:  # every problem, not only the first
    plan = {'steps': [step('s1'), step('s2', 'nonexistent'), step('s1', 'echo', '{"x": "$ref:nowhere"}')],
            'extra': 1}
    problems = await problems_of(plan)
    assert len(problems) == 4
    assert problems[0].startswith("The plan: unknown field 'extra'")
    assert problems[1].startswith("steps[1] (id 's2'): Unknown tool 'nonexistent' in step 's2'")
    assert problems[2].startswith("steps[2] (id 's1'): Duplicate step ID: 's1'")
    assert problems[3].startswith("steps[2] (id 's1'): arguments.x: reference '$ref:nowhere'")


async def test_direct_cycle_names_the_path() -> None:
    plan = {'steps': [step('s1', 'echo', '{"a": "$ref:s2"}'), step('s2', 'echo', '{"a": "$ref:s1"}')]}
    (problem,) = await problems_of(plan)
    assert problem.startswith("steps[0] (id 's1'): Cycle detected in tool plan dependencies: s1 -> s2 -> s1")


async def test_self_reference_is_a_cycle() -> None:
    (problem,) = await problems_of({'steps': [step('s1', 'echo', '{"message": "$ref:s1"}')]})
    assert 'Cycle detected in tool plan dependencies: s1 -> s1' in problem
    assert 'refers to itself' in problem


async def test_longer_cycle_rejects_the_whole_plan() -> None:
    plan = {'steps': [step('a', 'echo', '{"x": "$ref:c"}'), step('b', 'echo', '{"x": "$ref:a"}'),
                      step('c', 'echo', '{"x": "$ref:b"}'), step('d'), step('e', 'echo', '{"x": "$ref:c"}')]}
    (problem,) = await problems_of(plan)
    assert 'a -> c -> b -> a' in problem


async def test_two_separate_cycles_are_both_reported() -> None:
    plan = {'steps': [step('a', 'echo', '{"x": "$ref:b"}'), step('b', 'echo', '{"x": "$ref:a"}'),
                      step('c', 'echo', '{"x": "$ref:d"}'), step('d', 'echo', '{"x": "$ref:c"}')]}
    problems = await problems_of(plan)
    assert len(problems) == 2
    assert 'a -> b -> a' in problems[0] and 'c -> d -> c' in problems[1]


async def test_forward_position_is_legal_in_id_plans() -> None:
    plan = {'steps': [step('late', 'echo', '{"x": "$ref:early"}'), step('early', 'echo', '{"v": 1}')]}
    run = await toolweave.run_plan(plan, tools())
    assert run.ok
    assert run.step('late').arguments == {'x': {'v': 1}}
    assert run.waves == (('early',), ('late',))


async def test_arguments_that_are_not_json_fail_at_run_time() -> None:
    plan = {'steps': [step('s1', 'echo', '{not json'), step('s2', 'echo', '{"x": "$ref:s1"}'), step('s3')]}
    run = await toolweave.run_plan(plan, tools())
    error = run.step('s1').error
    assert error is not None
    assert error.startswith("Failed to deserialize arguments for tool 'echo': Expecting property name")
    assert run.step('s2').status == 'skipped'
    assert run.step('s3').status == 'succeeded'


@pytest.mark.parametrize(('bad', 'kind'), [(5, 'number'), ([1], 'array'), ('[1, 2]', 'array'), (True, 'boolean')])
async def test_arguments_of_the_wrong_type(bad: Any, kind: str) -> None:
    (problem,) = await problems_of({'steps': [step('s1', 'echo', bad)]})
    assert problem.startswith(f"steps[0] (id 's1'): \"arguments\" must be a JSON object (or a string holding one), "
                              f'got {kind}')


async def test_arguments_may_be_an_object_or_missing() -> None:
    run = await toolweave.run_plan({'steps': [step('s1', 'echo', {'a': 1}), {'id': 's2', 'tool': 'echo'}]}, tools())
    assert run.step('s1').arguments == {'a': 1}
    assert run.step('s2').arguments == {}


@pytest.mark.parametrize(('bad', 'what'), [
    ('step one', 'has characters outside'), ('x' * 65, 'is longer than 64'), ('ñ', 'has characters outside')])
async def test_bad_step_ids(bad: str, what: str) -> None:
    (problem,) = await problems_of({'steps': [step(bad)]})
    assert f'invalid step id {bad!r}: it {what}' in problem


async def test_wrong_types_everywhere_are_all_reported() -> None:
    plan = {'steps': [5, {'id': 7, 'tool': ['x'], 'arguments': 3, 'args': {}}], 'output_steps': 'a'}
    problems = await problems_of(plan)
    assert problems[0].startswith('"output_steps" must be an array of step id strings')
    assert problems[1].startswith('steps[0]: a step must be an object')
    assert any(p.startswith("steps[1]: unknown field 'args'. A step has \"id\", \"tool\" and \"arguments\"")
               and p.endswith('(not "args").') for p in problems)
    assert any('"id" must be a string, got number 7' in p for p in problems)
    assert any('"tool" must be a string, got array' in p for p in problems)
    assert any('"arguments" must be a JSON object' in p for p in problems)


@pytest.mark.parametrize(('text', 'start'), [
    ('not json', 'The plan is not valid JSON: Expecting value at line 1 column 1'),
    ('[1, 2]', 'The plan must be a JSON object with a "steps" array, got array'),
    ('{"steps": {"id": "a"}}', '"steps" must be an array of step objects, got object'),
])
async def test_malformed_plan_text(text: str, start: str) -> None:
    (problem,) = await problems_of(text)
    assert problem.startswith(start)


async def test_max_steps() -> None:
    plan = {'steps': [step(f's{i}') for i in range(6)]}
    (problem,) = await problems_of(plan, max_steps=5)
    assert problem == ('The plan has 6 steps, more than the limit of 5. Split it into smaller plans or raise '
                       '`max_steps`.')


def test_parse_plan_reads_both_argument_spellings_and_output_steps() -> None:
    plan = parse_plan(json.dumps({'steps': [step('a', 'echo', '{"x": 1}'), step('b', 'echo', {'y': '$ref:a'})],
                                  'output_steps': ['b', 'b']}))
    assert plan == Plan((PlanStep('a', 'echo', {'x': 1}), PlanStep('b', 'echo', {'y': '$ref:a'})), ('b',))
    assert plan.dialect == 'id'


def test_parse_plan_raises_with_every_structural_problem() -> None:
    with pytest.raises(PlanValidationError) as info:
        parse_plan({'steps': [{'id': 1}, 'x']})
    assert len(info.value.problems) == 2
    assert str(info.value).startswith('Plan validation failed:\n  - steps[0]: "id" must be a string')


def test_validate_plan_accepts_plan_objects() -> None:
    plan = Plan((PlanStep('a', 'echo', {}), PlanStep('b', 'nope', {'x': '$ref:c'})))
    assert validate_plan(plan, tools()) == [
        "steps[1] (id 'b'): Unknown tool 'nope' in step 'b'. Available tools: echo, search, fetch.",
        "steps[1] (id 'b'): arguments.x: reference '$ref:c' names step 'c', which is not in the plan. Refer to one "
        'of the step ids: a, b.',
    ]
    assert validate_plan(Plan((PlanStep('a', 'echo', {}),)), tools()) == []


@pytest.mark.parametrize('option', [
    {'concurrency': 0}, {'step_timeout': -1}, {'timeout': 0}, {'missing_field': 'zero'}, {'max_steps': 0},
    {'max_output_chars': 0}])
async def test_bad_options_are_rejected_with_the_value(option: dict[str, Any]) -> None:
    with pytest.raises(toolweave.UserError) as info:
        await toolweave.run_plan({'steps': [step('a')]}, tools(), **option)
    assert repr(next(iter(option.values()))) in str(info.value)


async def test_absurdly_deep_nesting_is_a_problem_not_a_crash() -> None:
    deep = '[' * 100_000 + ']' * 100_000
    (problem,) = await problems_of('{"steps": [{"id": "a", "tool": "echo", "arguments": {"x": ' + deep + '}}]}')
    assert problem.startswith('The plan JSON is nested too deeply to read.')
    nested: Any = 'leaf'
    for _ in range(5000):
        nested = [nested]
    (problem,) = await problems_of({'steps': [step('a', 'echo', {'x': nested})]})
    assert problem == ("steps[0] (id 'a'): arguments: nested too deeply to check. Use fewer levels of nested "
                       'objects and arrays.')


async def test_a_top_level_object_reference_supplies_all_the_arguments() -> None:
    run = await toolweave.run_plan({'steps': [step('a', 'echo', {'x': 1}), step('b', 'echo', {'$ref': 'a'})]},
                                   tools())
    assert run.step('b').arguments == {'x': 1}


async def test_a_mistyped_reference_suggests_the_id() -> None:
    plan = {'steps': [step('weather'), step('b', 'echo', {'t': '$ref:Weather.temp', 'u': '$ref:wether'})]}
    problems = await problems_of(plan)
    assert "names step 'Weather', which is not in the plan. Step ids are case-sensitive: did you mean 'weather'? " \
           'Refer to one of the step ids: weather, b.' in problems[0]
    assert "names step 'wether', which is not in the plan. Did you mean 'weather'?" in problems[1]


def test_a_plan_step_is_a_frozen_value() -> None:
    step = PlanStep('a', 'echo', {'text': 'hi'})
    assert step == PlanStep(id='a', tool='echo', arguments={'text': 'hi'}, description=None, forms=None)
    assert (step.description, step.forms, step.kind) == (None, None, 'tool')
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.tool = 'other'  # type: ignore[misc]
    assert dataclasses.replace(step, tool='other') == PlanStep('a', 'other', {'text': 'hi'})
    assert pickle.loads(pickle.dumps(step)) == step
    with pytest.raises(TypeError):
        PlanStep('a')  # type: ignore[call-arg]
