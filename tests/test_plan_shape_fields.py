"""Structured shaping: `where`, `sort_by`, `descending`, `first` and `keep` on a step, compiled to a select step."""

from __future__ import annotations

from typing import Any

import pytest

from toolweave import run_plan_sync, tool, validate_plan


@tool
def search(query: str) -> list[dict[str, Any]]:
    """Search."""
    return [{'name': 'Aero 14', 'price': 1299, 'tags': ['fast']}, {'name': 'Nimbus 13', 'price': 799, 'tags': []},
            {'name': 'Volt 15', 'price': 1049, 'tags': ['fast', 'big']}, {'name': 'odd "name"', 'price': 5}]


def shaped(**fields: Any) -> dict[str, Any]:
    return {'steps': [{'id': 's1', 'tool': 'search', 'arguments': {'query': 'laptop'}},
                      {'id': 's2', 'from': '$ref:s1', **fields}], 'output_steps': ['s2']}


@pytest.mark.parametrize(('fields', 'value'), [
    ({'keep': ['name']}, [{'name': 'Aero 14'}, {'name': 'Nimbus 13'}, {'name': 'Volt 15'}, {'name': 'odd "name"'}]),
    ({'sort_by': 'price', 'first': 2, 'keep': ['name']}, [{'name': 'odd "name"'}, {'name': 'Nimbus 13'}]),
    ({'sort_by': 'price', 'descending': True, 'first': 1, 'keep': ['price']}, [{'price': 1299}]),
    ({'where': {'field': 'price', 'op': '>=', 'value': 1049}, 'keep': ['name']},
     [{'name': 'Aero 14'}, {'name': 'Volt 15'}]),
    ({'where': {'field': 'tags', 'op': 'contains', 'value': 'big'}, 'keep': ['name']}, [{'name': 'Volt 15'}]),
    ({'where': {'field': 'name', 'op': '==', 'value': 'odd "name"'}, 'keep': ['price']}, [{'price': 5}]),
    ({'first': 0}, []),
    ({}, None),  # no shaping field: a plain select step with "from" only
])
def test_shaping_fields_compile_to_the_select_they_stand_for(fields: dict[str, Any], value: Any) -> None:
    run = run_plan_sync(shaped(**fields), [search])
    assert run.ok, run.summary
    expected = value if value is not None else run.step('s1').value
    assert run.step('s2').value == expected
    assert run.step('s2').kind == 'select'


@pytest.mark.parametrize(('fields', 'problem'), [
    ({'first': -1}, '"first" must be a whole number >= 0 (how many items to keep), got -1.'),
    ({'first': True}, '"first" must be a whole number >= 0'),
    ({'keep': []}, '"keep" must be a non-empty list of field names'),
    ({'keep': 'name'}, '"keep" must be a non-empty list of field names'),
    ({'keep': [3]}, '"keep" must name a field of the items (a string), got 3.'),
    ({'sort_by': ''}, '"sort_by" must name a field of the items'),
    ({'descending': 'yes', 'sort_by': 'price'}, '"descending" must be true or false'),
    ({'where': {'field': 'price', 'op': '~', 'value': 1}}, '"where.op" must be one of ==, !=, <, <=, >, >=, contains'),
    ({'where': {'field': 'price', 'value': 1}}, '"where" must be {"field", "op", "value"}'),
    ({'where': {'field': 'price', 'op': '<', 'value': [1]}}, '"where.value" must be a string, number or true/false'),
    ({'where': 'price < 5'}, '"where" must be {"field", "op", "value"}'),
    ({'select': '@', 'first': 1}, 'either "select" (JMESPath) or the shaping fields'),
])
def test_a_bad_shaping_field_is_a_validation_problem_naming_the_step_and_field(fields: dict[str, Any],
                                                                             problem: str) -> None:
    problems = validate_plan(shaped(**fields), [search])
    assert len(problems) == 1 and problems[0].startswith("steps[1] (id 's2'): ") and problem in problems[0]


def test_shaping_a_tool_step_is_refused_like_select_on_a_tool_step() -> None:
    plan = {'steps': [{'id': 's1', 'tool': 'search', 'arguments': {'query': 'x'}, 'first': 2}]}
    problems = validate_plan(plan, [search])
    assert any('calls no tool, so it cannot have "tool", "arguments"' in p for p in problems)
