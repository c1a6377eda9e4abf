"""Schemas a tool or an upstream server lists cannot hang the process: one that refers to itself, points nowhere,
nests thousands of levels, holds a hundred thousand parts or is not JSON Schema at all. The plan tool still
builds, plans over the tool still run (the tool checks its own arguments), and the contract check says it did not
check that schema instead of looping."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any

import pytest

import toolweave
from providers.gbnf import Grammar
from toolweave import PlanTool, validate_plan
from toolweave.plan import SchemaTooLarge, constrained_grammar
from toolweave.testing import FakeTool
from toolweave.tools import ToolMetadata

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(20)]


def deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {'type': 'string'}
    for _ in range(levels):
        schema = {'type': 'object', 'properties': {'a': schema}}
    return schema


@dataclass
class Hostile:
    name: str
    schema: Any
    reason: str


def with_x(x: Any, **rest: Any) -> dict[str, Any]:
    return {'type': 'object', 'properties': {'x': x}, **rest}


HOSTILE = [
    Hostile('refers to itself', with_x({'$ref': '#/$defs/a'}, **{'$defs': {'a': {'$ref': '#/$defs/a'}}}),
            'it refers to itself without descending into the value (#/$defs/a)'),
    Hostile('a cycle of two', with_x({'$ref': '#/$defs/a'}, **{'$defs': {'a': {'$ref': '#/$defs/b'},
                                                                         'b': {'$ref': '#/$defs/a'}}}),
            'it refers to itself without descending into the value'),
    Hostile('a cycle through allOf', with_x({'$ref': '#/$defs/a'}, **{'$defs': {'a': {'allOf': [
        {'type': 'object'}, {'anyOf': [{'$ref': '#/$defs/a'}]}]}}}), 'it refers to itself without descending'),
    Hostile('the root', {'$ref': '#', 'type': 'object'}, 'it refers to itself without descending'),
    Hostile('points nowhere', with_x({'$ref': '#/$defs/nope'}),
            'it has a "$ref" that points nowhere: \'#/$defs/nope\''),
    Hostile('another document', with_x({'$ref': 'https://example.com/s.json'}),
            "it refers to another document ('https://example.com/s.json'), which is not fetched"),
    Hostile('a $ref that is no string', with_x({'$ref': 5}), 'it has a "$ref" that is not a string: 5'),
    Hostile('$dynamicRef', with_x({'$dynamicRef': '#node'}), 'it uses "$dynamicRef", which is not followed here'),
    Hostile('5,000 levels', with_x(deep(5000)), 'it is nested more than 64 levels deep'),
    Hostile('100,000 properties', {'type': 'object', 'properties': {f'p{i}': {'type': 'string'}
                                                                    for i in range(100_000)}},
            'it has more than 10,000 parts'),
    Hostile('properties is a number', {'type': 'object', 'properties': 5, 'required': 'x'},
            "it is not valid JSON Schema: \"required\" at # is 'x', not a list of names"),
    Hostile('a property is a number', with_x(7), 'it is not valid JSON Schema'),
    Hostile('type is a number', with_x({'type': 3}), 'it is not valid JSON Schema: "type" at #/properties/x is 3, '
                                                     'not a JSON type (or a list of them)'),
    Hostile('patternProperties', {'type': 'object', 'patternProperties': {'^(a+)+$': {'type': 'string'}}},
            'it matches property names with regular expressions ("patternProperties"), which are not run here'),
    Hostile('$id below the root', with_x({'$id': 'https://example.com/x', 'type': 'string'}),
            'it sets "$id" below its root (#/properties/x)'),
]
IDS = [case.name for case in HOSTILE]


def gated_plan() -> dict[str, Any]:
    return {'steps': [{'id': 'a', 'tool': 't', 'arguments': {'x': {'y': None, 'z': [None, {'w': None}]}}}]}


@pytest.mark.parametrize('case', HOSTILE, ids=IDS)
async def test_a_plan_over_a_tool_with_a_hostile_input_schema_runs_and_says_it_was_not_checked(
        case: Hostile, caplog: pytest.LogCaptureFixture) -> None:
    tool = FakeTool('t', lambda args: 'ok', parameters=case.schema)
    with caplog.at_level(logging.WARNING, logger='toolweave.plan'):
        assert validate_plan(gated_plan(), [tool]) == []
        run = await toolweave.run_plan(gated_plan(), [tool])
        result = await PlanTool([tool]).call(gated_plan())  # drops unset nulls along the tool's schema
    assert run.ok and result.text == '{"a": "ok"}' and tool.call_count == 2
    assert tool.calls[1].arguments == {'x': {'y': None, 'z': [None, {'w': None}]}}
    warnings = [r.getMessage() for r in caplog.records if r.name == 'toolweave.plan']
    assert warnings == [f"Tool 't': its input schema is not used to check plans before they run: {case.reason}"
                        + warnings[0].split(case.reason, 1)[1]], warnings
    assert warnings[0].endswith('The tool checks its own arguments when it is called.')


@pytest.mark.parametrize('case', HOSTILE, ids=IDS)
def test_the_plan_tool_builds_and_says_why_its_typed_schema_left_the_tool_out(case: Hostile) -> None:
    tool = FakeTool('t', parameters=case.schema)
    auto = PlanTool([tool], plan_schema='auto')
    assert auto.plan_schema == 'compact'
    assert auto.schema_note is not None and case.reason in auto.schema_note
    assert auto.schema_note.startswith("typed plan schema not used (tool 't': its input schema cannot be used (")
    with pytest.raises(SchemaTooLarge, match='its input schema cannot be used'):
        PlanTool([tool], plan_schema='typed')


@pytest.mark.parametrize('case', HOSTILE, ids=IDS)
async def test_a_hostile_output_schema_is_not_used_to_check_references(case: Hostile) -> None:
    producer = FakeTool('p', {'x': 1}, metadata=ToolMetadata(extra={'output_schema': case.schema}))
    consumer = FakeTool('c', lambda args: args['v'])
    plan = {'steps': [{'id': 'a', 'tool': 'p', 'arguments': {}},
                      {'id': 'b', 'tool': 'c', 'arguments': {'v': '$ref:a.x'}}]}
    assert validate_plan(plan, [producer, consumer]) == []
    run = await toolweave.run_plan(plan, [producer, consumer])
    assert run.ok and run.step('b').value == 1


async def test_a_recursive_schema_that_descends_is_still_checked() -> None:
    node = {'type': 'object', 'properties': {'name': {'type': 'string'},
                                             'kids': {'type': 'array', 'items': {'$ref': '#/$defs/node'}}},
            'required': ['name']}
    tool = FakeTool('t', parameters={'type': 'object', 'properties': {'tree': {'$ref': '#/$defs/node'}},
                                     '$defs': {'node': node}})
    plan = {'steps': [{'id': 'a', 'tool': 't', 'arguments': {'tree': {'name': 'root', 'kids': [{'kids': []}]}}}]}
    assert validate_plan(plan, [tool]) == [
        "steps[0] (id 'a'): arguments.tree.kids[0]: 'name' is a required property: it is missing. Tool 't' takes: "
        'tree.']


async def test_arguments_deeper_than_a_recursive_schema_can_follow_are_left_to_the_tool() -> None:
    node = {'type': 'object', 'properties': {'kid': {'$ref': '#/$defs/node'}}}
    tool = FakeTool('t', 'ok', parameters={'type': 'object', 'properties': {'tree': {'$ref': '#/$defs/node'}},
                                           '$defs': {'node': node}, 'required': ['tree']})
    value: dict[str, Any] = {}
    for _ in range(300):  # deeper than the JSON Schema validator follows, not the reference scanner
        value = {'kid': value}
    plan = {'steps': [{'id': 'a', 'tool': 't', 'arguments': {'tree': value}}]}
    assert validate_plan(plan, [tool]) == []
    result = await PlanTool([tool]).call(plan)
    assert result.text == '{"a": "ok"}'


@pytest.mark.parametrize(('schema', 'value'), [
    ({'type': 'string', 'pattern': '^(a+)+$'}, 'a' * 60 + '!'),  # backtracks 2^60 times in `re`
    ({'type': 'array', 'uniqueItems': True}, [{'n': i} for i in range(50_000)]),  # compares 1.25e9 pairs
], ids=['catastrophic pattern', 'uniqueItems over a long list'])
async def test_keywords_whose_cost_a_plan_controls_are_left_to_the_tool(schema: dict[str, Any], value: Any) -> None:
    tool = FakeTool('t', 'ok', parameters={'type': 'object', 'properties': {'x': schema}, 'required': ['x']})
    plan = {'steps': [{'id': 'a', 'tool': 't', 'arguments': {'x': value}}]}
    assert validate_plan(plan, [tool]) == []
    assert (await toolweave.run_plan(plan, [tool])).ok
    assert validate_plan({'steps': [{'id': 'a', 'tool': 't', 'arguments': {}}]}, [tool]) == [
        "steps[0] (id 'a'): arguments: 'x' is a required property: it is missing. Tool 't' takes: x."]


@pytest.mark.parametrize('case', HOSTILE, ids=IDS)
def test_the_plan_grammar_builds_over_a_hostile_schema_and_admits_only_valid_plans(case: Hostile) -> None:
    taking = FakeTool('t', 'ok', parameters=case.schema)
    giving = FakeTool('p', {'x': 1}, metadata=ToolMetadata(extra={'output_schema': case.schema}))
    grammar = Grammar(constrained_grammar([taking, giving]))
    rng = random.Random(3)
    for _ in range(50):
        text = grammar.sample(rng)
        assert all('JMESPath' in problem for problem in validate_plan(text, [taking, giving])), text
