"""A plan's steps (`PlanSteps`): they read like a tuple of `PlanStep`s, and a large plan costs the garbage collector
next to nothing, however many steps it has."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

import toolweave
from toolweave.plan import Plan, PlanStep, PlanSteps, StepForms, parse_plan
from toolweave.testing import FakeTool


def _steps() -> tuple[PlanStep, ...]:
    return (PlanStep('a', 'echo', {'x': 1}, 'first'),
            PlanStep('b', 'echo', {'y': '$ref:a'}),
            PlanStep('c', '', {}, None, StepForms(source='$ref:b', select='length(@)')),
            PlanStep('d', 'echo', {'z': '$ref:c'}, 'last'))


def test_steps_read_like_the_tuple_they_were_made_from() -> None:
    given = _steps()
    plan = Plan(given)
    steps = plan.steps
    assert isinstance(steps, PlanSteps)
    assert len(steps) == 4 and steps == given and steps == list(given) and given == tuple(steps)
    assert list(steps) == list(given)
    assert steps[0] == given[0] and steps[-1] == given[-1] and steps[2].select == 'length(@)'
    assert steps[0].description == 'first' and steps[1].description is None
    assert [step.id for step in steps] == ['a', 'b', 'c', 'd']
    assert steps.ids == ['a', 'b', 'c', 'd'] and steps.tools == ['echo', 'echo', '', 'echo']
    assert steps != given[:3] and steps != 'abcd' and steps != (1, 2, 3, 4)
    assert 'PlanStep(id=' in repr(steps)
    with pytest.raises(IndexError):
        steps[4]
    with pytest.raises(IndexError):
        steps[-5]
    with pytest.raises(TypeError):
        hash(steps)  # (steps hold their arguments, which are dicts: a tuple of them does not hash either)
    # A plan's steps do not grow: only the steps still being read do (the parser's, a stream's validator's).
    assert not any(hasattr(steps, name) for name in ('append', 'extend', 'truncate'))
    assert not hasattr(parse_plan({'steps': [{'id': 'a', 'tool': 'echo', 'arguments': {}}]}).steps, 'append')


@pytest.mark.parametrize('given', [[PlanStep('a', 'echo', {}), {'id': 'b', 'tool': 'echo', 'arguments': {}}],
                                   'ab', [None]])
def test_a_plan_of_anything_but_steps_says_which_item_is_not_a_step(given: Any) -> None:
    with pytest.raises(TypeError, match=r'steps\[\d\] is (dict|str|NoneType), not a PlanStep.*parse_plan'):
        Plan(given)


@pytest.mark.parametrize('cut', [slice(1, 3), slice(2, None), slice(None, -1), slice(None, None, 2),
                                 slice(None, None, -1), slice(5, 9), slice(3, 1)])
def test_a_slice_of_steps_holds_those_steps_with_their_descriptions_and_forms(cut: slice) -> None:
    given = _steps()
    part = Plan(given).steps[cut]
    assert isinstance(part, PlanSteps)
    assert part == given[cut] and list(part) == list(given[cut])


def test_steps_equal_other_steps_column_by_column() -> None:
    assert Plan(_steps()).steps == PlanSteps(_steps())
    edited = list(_steps())
    edited[3] = PlanStep('d', 'echo', {'z': '$ref:c'})  # the description differs
    assert Plan(_steps()).steps != PlanSteps(edited)
    assert Plan(_steps()) == Plan(list(_steps())) and Plan(_steps()) != Plan(edited)


def test_a_parsed_plan_equals_the_plan_built_from_its_steps() -> None:
    parsed = parse_plan({'steps': [
        {'id': 'a', 'tool': 'echo', 'arguments': {'x': 1}, 'description': 'first'},
        {'id': 'b', 'tool': 'echo', 'arguments': '{"y": "$ref:a"}'},
        {'id': 'c', 'from': '$ref:b', 'select': 'length(@)'},
        {'id': 'd', 'tool': 'echo', 'arguments': {'z': '$ref:c'}, 'description': 'last'},
    ]})
    assert parsed == Plan(_steps())
    indexed = parse_plan({'goal': 'g', 'steps': [{'tool': 'echo', 'args': {'x': 1}, 'description': 'one'},
                                                  {'tool': 'echo', 'args': {'y': '$steps[0]'}, 'description': 'two'}]})
    assert [step.description for step in indexed.steps] == ['one', 'two']


def _tracked(make: Any) -> tuple[Any, int]:
    """What `make()` returns, and how many more objects the garbage collector tracks once it has (after a
    collection: objects it can untrack, such as tuples of ints, are not counted)."""
    gc.collect()
    before = len(gc.get_objects())
    made = make()
    gc.collect()
    return made, len(gc.get_objects()) - before


def _large(count: int) -> dict[str, Any]:
    return {'steps': [{'id': f's{i}', 'tool': 'echo',
                       'arguments': {'inputs': [f'$ref:s{i - 1}', f'$ref:s{i // 2}'] if i else []}}
                      for i in range(count)]}


@pytest.fixture
def no_collection() -> Iterator[None]:
    """(Counting tracked objects needs the collector not to run on its own meanwhile.)"""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.usefixtures('no_collection')
def test_a_large_plan_read_and_validated_adds_no_object_per_step_for_the_garbage_collector() -> None:
    # 100k objects that live on set off a full collection (which walks the whole process); a plan of 20,000 steps
    # read, validated and prepared adds a few dozen: its columns, its graph's lists, its tables.
    from toolweave.plan._parse import parse_lenient
    from toolweave.plan._validate import as_toolset, prepare

    data = _large(20_000)
    parsed, added = _tracked(lambda: parse_lenient(data, max_steps=20_000))
    assert not parsed.problems and len(parsed.plan.steps) == 20_000
    assert added < 50, f'reading a plan of 20,000 steps left {added} more tracked objects'
    (prepared, problems), added = _tracked(lambda: prepare(parsed, as_toolset([FakeTool('echo')]),
                                                           max_steps=20_000))
    assert prepared is not None and not problems
    assert added < 100, f'validating a plan of 20,000 steps left {added} more tracked objects'


@pytest.mark.anyio
async def test_a_large_plan_runs_from_its_columns() -> None:
    run = await toolweave.run_plan(_large(5_000), [FakeTool('echo')], max_steps=5_000)
    assert run.succeeded == 5_000
    assert run.step('s4999').depends_on == ('s4998', 's2499')
    assert run.steps[10].step == PlanStep('s10', 'echo', {'inputs': ['$ref:s9', '$ref:s5']})
