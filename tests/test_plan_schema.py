"""The input schemas the plan tool offers: compact by default, typed from the toolset within strict-mode limits
(with `auto` falling back and saying why), and the string form; every one accepted whatever was offered."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from toolweave import PlanTool, Toolset, tool
from toolweave.plan import SchemaTooLarge
from toolweave.testing import FakeTool

pytestmark = pytest.mark.anyio


class Window(BaseModel):
    start: str
    end: str | None = None


@tool
def get_weather(city: str, days: int = 1, unit: Literal['c', 'f'] = 'c') -> dict[str, Any]:
    """Weather for a city."""
    return {'city': city, 'days': days, 'unit': unit}


@tool
def report(title: str, window: Window, cities: list[str]) -> str:
    """Make a report."""
    return f'{title}: {", ".join(cities)} from {window.start}'


def objects(schema: Any, depth: int = 0) -> Iterator[tuple[Mapping[str, Any], int]]:
    """Every object schema in `schema`, with its nesting depth."""
    if isinstance(schema, Mapping):
        if schema.get('type') == 'object':
            yield schema, depth + 1
            depth += 1
        for value in schema.values():
            yield from objects(value, depth)
    elif isinstance(schema, list):
        for value in schema:
            yield from objects(value, depth)


def keywords(schema: Any) -> set[str]:
    if isinstance(schema, Mapping):
        found = set(schema)
        for key, value in schema.items():
            found |= keywords(value) if key != 'properties' else set().union(*map(keywords, value.values()))
        return found
    if isinstance(schema, list):
        return set().union(*map(keywords, schema)) if schema else set()
    return set()


def test_the_typed_schema_fits_strict_mode() -> None:
    planner = PlanTool(Toolset([get_weather, report]), plan_schema='typed')
    definition = planner.definition
    schema = definition.parameters
    assert definition.metadata.strict is True and planner.plan_schema == 'typed' and planner.schema_note is None
    assert schema['type'] == 'object' and 'anyOf' not in schema
    for node, depth in objects(schema):
        assert node['additionalProperties'] is False
        assert node['required'] == list(node['properties'])
        assert depth <= 10
    assert not keywords(schema) & {'oneOf', 'allOf', 'not', 'if', 'minimum', 'maxLength', 'default', 'title'}
    variants = schema['properties']['steps']['items']['anyOf']
    assert [v['properties'].get('tool', {}).get('enum') for v in variants] == [['get_weather'], ['report'], None]
    weather = variants[0]['properties']['arguments']['properties']
    assert weather['city'] == {'type': 'string'}
    assert weather['days'] == {'anyOf': [{'type': 'integer'}, {'$ref': '#/$defs/ref'}, {'type': 'null'}]}
    assert weather['unit'] == {'anyOf': [{'enum': ['c', 'f'], 'type': 'string'}, {'type': 'null'}]}
    window = variants[1]['properties']['arguments']['properties']['window']['anyOf']
    assert window[0]['properties']['end'] == {'anyOf': [{'type': 'string'}, {'type': 'null'}]}  # $defs inlined
    assert window[1] == {'$ref': '#/$defs/ref'}  # a reference may stand for the whole object


async def test_a_plan_written_against_the_typed_schema_runs() -> None:
    planner = PlanTool(Toolset([get_weather, report]), plan_schema='typed')
    plan = {'steps': [
        {'id': 'w', 'tool': 'get_weather', 'arguments': {'city': 'Oslo', 'days': None, 'unit': None},
         'for_each': None, 'when': None},
        {'id': 'r', 'tool': 'report', 'arguments': {'title': 'T', 'window': {'start': '$ref:w.city', 'end': None},
                                                    'cities': ['$ref:w.city']},
         'for_each': None, 'when': {'from': '$ref:w', 'select': 'days == `1`'}},
        {'id': 'n', 'from': '$ref:w', 'select': 'unit', 'when': None},
    ], 'output_steps': None}
    result = await planner.call(json.dumps(plan))
    assert result.ok, result.error
    assert json.loads(result.text) == {'w': {'city': 'Oslo', 'days': 1, 'unit': 'c'}, 'r': 'T: Oslo from Oslo',
                                       'n': 'c'}


def test_free_form_or_recursive_schemas_do_not_fit_and_auto_falls_back_saying_why(
        caplog: pytest.LogCaptureFixture) -> None:
    @tool
    def tag(labels: dict[str, str]) -> str:
        """Free-form keys."""
        return ''

    with pytest.raises(SchemaTooLarge, match=r"tool 'tag', arguments.labels: an object with free-form keys"):
        PlanTool(Toolset([get_weather, tag]), plan_schema='typed')
    with caplog.at_level(logging.WARNING, logger='toolweave.plan'):
        planner = PlanTool(Toolset([get_weather, tag]), plan_schema='auto')
    assert planner.plan_schema == 'compact' and planner.definition.metadata.strict is False
    assert planner.schema_note == ("typed plan schema not used (tool 'tag', arguments.labels: an object with free-form "
                                   'keys (strict mode needs every key declared)): the compact schema is offered '
                                   'instead')
    assert planner.schema_note in caplog.text
    recursive = FakeTool('tree', parameters={
        'type': 'object', 'properties': {'node': {'$ref': '#/$defs/Node'}}, 'required': ['node'],
        '$defs': {'Node': {'type': 'object', 'properties': {'kids': {'type': 'array',
                                                                     'items': {'$ref': '#/$defs/Node'}}}}}})
    with pytest.raises(SchemaTooLarge, match=r'a recursive schema \(#/\$defs/Node\)'):
        PlanTool(Toolset([recursive]), plan_schema='typed')
    assert PlanTool(Toolset([get_weather]), plan_schema='auto').plan_schema == 'typed'


def test_a_toolset_past_the_property_limit_falls_back() -> None:
    many = [FakeTool(f't{i}', parameters={'type': 'object', 'properties': {f'p{j}': {'type': 'string'}
                                                                          for j in range(60)}}) for i in range(90)]
    with pytest.raises(SchemaTooLarge, match='more than 5000 object properties'):
        PlanTool(Toolset(many), plan_schema='typed')
    assert PlanTool(Toolset(many), plan_schema='auto').plan_schema == 'compact'


def test_an_unknown_schema_name_is_a_user_error() -> None:
    from toolweave import UserError

    with pytest.raises(UserError, match="plan_schema must be 'compact', 'typed', 'auto', 'constrained' or 'string'"):
        PlanTool(Toolset([get_weather]), plan_schema='fancy')  # type: ignore[arg-type]


async def test_every_schema_accepts_every_form_of_plan() -> None:
    for plan_schema in ('compact', 'string', 'typed'):
        planner = PlanTool(Toolset([get_weather]), plan_schema=plan_schema)
        as_string = await planner.call({'steps': [{'id': 'a', 'tool': 'get_weather',
                                                   'arguments': '{"city": "Rome"}'}]})
        as_object = await planner.call({'steps': [{'id': 'a', 'tool': 'get_weather', 'arguments': {'city': 'Rome'}}],
                                        'output_steps': '["a"]'})
        assert as_string.text == as_object.text == '{"a": {"city": "Rome", "days": 1, "unit": "c"}}'
