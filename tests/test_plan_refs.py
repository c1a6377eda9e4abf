"""Reference resolution in id-based plans: whole-string, object and embedded forms, paths, and missing fields."""

from __future__ import annotations

import json
from typing import Any

import pytest

import toolweave
from toolweave import PlanValidationError
from toolweave.testing import FakeTool, concat_tool, echo_tool

pytestmark = pytest.mark.anyio


async def resolved(output: Any, arguments: Any, **options: Any) -> Any:
    """Run `src` (returning `output`) then `use` (echo) with `arguments`; return what `use` received."""
    plan = {'steps': [{'id': 's1', 'tool': 'src', 'arguments': '{}'},
                      {'id': 's2', 'tool': 'echo', 'arguments': arguments}]}
    run = await toolweave.run_plan(plan, [FakeTool('src', output), echo_tool()], **options)
    record = run.step('s2')
    assert record.status == 'succeeded', record.error
    return record.arguments


# what a whole-output reference inserts


async def test_plain_text_output_inserted_as_string() -> None:
    assert await resolved('Hello World', '{"data": "$ref:s1"}') == {'data': 'Hello World'}


async def test_json_object_output_inserted_as_object() -> None:
    assert await resolved('{"temp": 25, "city": "Tokyo"}', '{"data": "$ref:s1"}') == {
        'data': {'temp': 25, 'city': 'Tokyo'}}


async def test_json_array_output_inserted_as_array() -> None:
    assert await resolved('[1, 2, 3]', '{"items": "$ref:s1"}') == {'items': [1, 2, 3]}


@pytest.mark.parametrize(('text', 'value'), [('42', 42), ('-1', -1), ('3.14', 3.14), ('1e5', 1e5)])
async def test_numeric_output_inserted_as_number(text: str, value: float) -> None:
    assert await resolved(text, '{"count": "$ref:s1"}') == {'count': value}


@pytest.mark.parametrize(('text', 'value'), [('true', True), ('false', False), ('null', None)])
async def test_boolean_and_null_outputs_keep_their_type(text: str, value: Any) -> None:
    assert await resolved(text, '{"active": "$ref:s1"}') == {'active': value}


async def test_json_string_literal_output_is_not_double_quoted() -> None:
    assert await resolved('"hi"', '{"x": "$ref:s1"}') == {'x': 'hi'}


async def test_surrounding_whitespace_of_json_output_is_trimmed() -> None:
    assert await resolved('  {"a":1}\n', '{"x": "$ref:s1"}') == {'x': {'a': 1}}


async def test_output_that_only_looks_like_json_is_text() -> None:
    assert await resolved('{not json', '{"x": "$ref:s1"}') == {'x': '{not json'}


async def test_empty_output() -> None:
    assert await resolved('', '{"data": "$ref:s1"}') == {'data': ''}


async def test_whitespace_only_output_is_kept_untrimmed() -> None:
    assert await resolved('   ', '{"data": "$ref:s1"}') == {'data': '   '}


async def test_special_characters_survive_and_render_as_valid_json() -> None:
    text = 'line1\nline2\ttab "quoted" back\\slash \r \x01\x1f'
    arguments = await resolved(text, '{"data": "$ref:s1"}')
    assert arguments == {'data': text}
    assert json.loads(json.dumps(arguments)) == {'data': text}


@pytest.mark.parametrize('text', ['NaN', 'Infinity', '-Infinity', '+1', '1.5d', '0x1p3'])
async def test_non_strict_numbers_are_text(text: str) -> None:
    assert await resolved(text, '{"x": "$ref:s1"}') == {'x': text}


# field paths


async def test_field() -> None:
    assert await resolved('{"city":"Tokyo","temp":25}', '{"city": "$ref:s1.city"}') == {'city': 'Tokyo'}


async def test_nested_field() -> None:
    output = '{"user":{"name":"Alice","age":30}}'
    assert await resolved(output, '{"n": "$ref:s1.user.name"}') == {'n': 'Alice'}


async def test_non_string_fields_keep_their_type() -> None:
    output = '{"temp": 25, "ok": true, "gone": null}'
    assert await resolved(output, '{"t": "$ref:s1.temp", "o": "$ref:s1.ok", "g": "$ref:s1.gone"}') == {
        't': 25, 'o': True, 'g': None}


async def test_object_field_inserted_as_object() -> None:
    output = '{"user": {"name": "Alice"}}'
    assert await resolved(output, '{"u": "$ref:s1.user"}') == {'u': {'name': 'Alice'}}


async def test_missing_field_and_missing_intermediate_give_null_when_asked() -> None:
    output = '{"city": "Tokyo"}'
    assert await resolved(output, '{"v": "$ref:s1.nonexistent", "w": "$ref:s1.a.b.c"}', missing_field='null') == {
        'v': None, 'w': None}


async def test_dotted_numeric_segments_index_arrays() -> None:
    assert await resolved('{"items":[{"name":"x"}]}', '{"n": "$ref:s1.items.0.name"}') == {'n': 'x'}
    assert await resolved('["a","b"]', '{"n": "$ref:s1.1"}') == {'n': 'b'}
    assert await resolved('["a","b"]', '{"n": "$ref:s1.5"}', missing_field='null') == {'n': None}


async def test_bracket_indexes_are_a_synonym() -> None:  # `[n]` indexes too
    output = '{"items":[{"name":"x"},{"name":"y"}]}'
    assert await resolved(output, '{"a": "$ref:s1.items[0].name", "b": "$ref:s1.items.0.name"}') == {
        'a': 'x', 'b': 'x'}


async def test_negative_indexes_count_from_the_end() -> None:
    output = '{"items":[1, 2, 3]}'
    assert await resolved(output, '{"a": "$ref:s1.items[-1]", "b": "$ref:s1.items.-2", "c": "$ref:s1.items[-4]"}',
                          missing_field='null') == {'a': 3, 'b': 2, 'c': None}


async def test_field_path_on_plain_text_fails_the_step() -> None:
    plan = {'steps': [{'id': 'step_1', 'tool': 'src', 'arguments': '{}'},
                      {'id': 's2', 'tool': 'echo', 'arguments': '{"x": "$ref:step_1.field"}'}]}
    run = await toolweave.run_plan(plan, [FakeTool('src', 'plain words'), echo_tool()])
    assert run.step('s2').status == 'failed'
    assert run.step('s2').error == "Cannot extract field 'field' from step 'step_1' output: not valid JSON"


@pytest.mark.parametrize('output', ['42', '"txt"'])
async def test_field_path_on_json_scalar_gives_null_when_asked(output: str) -> None:
    assert await resolved(output, '{"x": "$ref:s1.field"}', missing_field='null') == {'x': None}


# several references, dependencies, pass-through


async def test_every_reference_in_the_arguments_is_replaced() -> None:
    plan = {'steps': [{'id': 's1', 'tool': 'hello', 'arguments': '{}'},
                      {'id': 's2', 'tool': 'world', 'arguments': '{}'},
                      {'id': 's3', 'tool': 'echo',
                       'arguments': '{"a":"$ref:s1","b":"$ref:s2","l":["$ref:s1","$ref:s2"]}'}]}
    run = await toolweave.run_plan(plan, [FakeTool('hello', 'hello'), FakeTool('world', 'world'), echo_tool()])
    assert run.step('s3').arguments == {'a': 'hello', 'b': 'world', 'l': ['hello', 'world']}


async def test_whole_and_field_reference_to_one_step_is_one_dependency() -> None:
    plan = {'steps': [{'id': 's1', 'tool': 'src', 'arguments': '{}'},
                      {'id': 's0', 'tool': 'src', 'arguments': '{}'},
                      {'id': 's2', 'tool': 'echo', 'arguments': '{"a":"$ref:s1","b":"$ref:s1.k","c":"$ref:s0"}'}]}
    run = await toolweave.run_plan(plan, [FakeTool('src', '{"k": 1}'), echo_tool()])
    assert run.step('s2').depends_on == ('s1', 's0')
    assert run.step('s2').arguments == {'a': {'k': 1}, 'b': 1, 'c': {'k': 1}}
    assert run.step('s1').depends_on == ()


async def test_a_list_of_references_resolves_each_in_place_and_depends_on_each_step_once() -> None:
    plan = {'steps': [{'id': 'b', 'tool': 'src', 'arguments': {}},
                      {'id': 'a', 'tool': 'src', 'arguments': {}},
                      {'id': 'all', 'tool': 'echo', 'arguments': {
                          'l': ['$ref:a', '$ref:b', '$ref:a', 'plain', '$ref:b.k', 7, '$100'],
                          'again': ['$ref:b', '$ref:a']}}]}
    run = await toolweave.run_plan(plan, [FakeTool('src', '{"k": 1}'), echo_tool()])
    assert run.step('all').depends_on == ('a', 'b')
    assert run.step('all').arguments == {'l': [{'k': 1}, {'k': 1}, {'k': 1}, 'plain', 1, 7, '$100'],
                                         'again': [{'k': 1}, {'k': 1}]}


@pytest.mark.parametrize(('items', 'where', 'what'), [
    (['$ref:a', '$ref:nope'], 'arguments.l[1]', "names step 'nope', which is not in the plan"),
    (['$ref:a', '$item'], 'arguments.l[1]', 'only defined in the arguments of a step with "for_each"'),
    (['$ref:a', '$ref:a.'], 'arguments.l[1]', 'malformed reference'),
    (['$ref:a', {'deep': ['$ref:zzz']}], 'arguments.l[1].deep[0]', "names step 'zzz'"),
])
async def test_a_bad_reference_in_a_list_of_good_ones_is_reported_at_its_position(
        items: list[Any], where: str, what: str) -> None:
    plan = {'steps': [{'id': 'a', 'tool': 'src', 'arguments': {}},
                      {'id': 'use', 'tool': 'echo', 'arguments': {'l': items}}]}
    with pytest.raises(PlanValidationError) as info:
        await toolweave.run_plan(plan, [FakeTool('src', '{}'), echo_tool()])
    [problem] = info.value.problems
    assert problem.startswith(f"steps[1] (id 'use'): {where}: ") and what in problem, problem


async def test_reference_to_a_step_not_in_the_plan_is_a_validation_error() -> None:
    plan = {'steps': [{'id': 's1', 'tool': 'echo', 'arguments': '{"x": "$ref:missing_step"}'}]}
    tool = echo_tool()
    with pytest.raises(PlanValidationError) as info:
        await toolweave.run_plan(plan, [tool])
    assert "steps[0] (id 's1'): arguments.x: reference '$ref:missing_step' names step 'missing_step'" in (
        info.value.problems[0])
    assert tool.call_count == 0


async def test_arguments_without_references_pass_through_unchanged() -> None:
    arguments = {'a': 1, 'b': [1, {'c': 'text with $ref: inside'}], 'd': None, 'e': 'x {{ y }}'}
    assert await resolved('ignored', json.dumps(arguments)) == arguments


async def test_embedded_references_are_spliced_as_text() -> None:
    output = '{"time": "12:00", "n": 3, "o": {"k": [1, 2]}}'
    arguments = await resolved(output, {'msg': 'Meeting {{$ref:s1.time}} at noon, n={{$ref:s1.n}}, o={{$ref:s1.o}}'})
    assert arguments == {'msg': 'Meeting 12:00 at noon, n=3, o={"k":[1,2]}'}


async def test_references_inside_longer_text_without_braces_stay_literal() -> None:
    plan = {'steps': [{'id': 's1', 'tool': 'echo', 'arguments': '{"msg": "Result: $ref:s1"}'}]}
    run = await toolweave.run_plan(plan, [echo_tool()])
    assert run.step('s1').arguments == {'msg': 'Result: $ref:s1'}
    assert run.step('s1').depends_on == ()


async def test_escaped_braces_write_a_literal() -> None:
    arguments = await resolved('v', {'a': '\\{{$ref:s1}} is {{$ref:s1}}', 'b': 'keep \\{{ as is'})
    assert arguments == {'a': '{{$ref:s1}} is v', 'b': 'keep \\{{ as is'}


async def test_hyphenated_step_ids_can_be_referenced() -> None:
    plan = {'steps': [{'id': 'step-1', 'tool': 'src', 'arguments': '{}'},
                      {'id': 'step-2', 'tool': 'echo', 'arguments': '{"x": "$ref:step-1.a-b"}'}]}
    run = await toolweave.run_plan(plan, [FakeTool('src', '{"a-b": 5}'), echo_tool()])
    assert run.step('step-2').arguments == {'x': 5}


@pytest.mark.parametrize('ref', ['$ref:s1.', '$ref:', '$ref:s1..a', '$ref:s1[x]', '$ref:s1["a]', '$ref:s 1'])
async def test_malformed_references_are_validation_errors(ref: str) -> None:
    plan = {'steps': [{'id': 's1', 'tool': 'echo', 'arguments': '{}'},
                      {'id': 's2', 'tool': 'echo', 'arguments': json.dumps({'x': ref})}]}
    with pytest.raises(PlanValidationError) as info:
        await toolweave.run_plan(plan, [echo_tool()])
    assert info.value.problems[0].startswith(f"steps[1] (id 's2'): arguments.x: malformed reference {ref!r}: ")


async def test_tool_receives_resolved_arguments() -> None:
    plan = {'steps': [{'id': 's1', 'tool': 'say', 'arguments': '{"text": "hello"}'},
                      {'id': 's2', 'tool': 'concat', 'arguments': '{"a":"$ref:s1","b":"world"}'},
                      {'id': 's3', 'tool': 'weather', 'arguments': '{"city": "Tokyo"}'},
                      {'id': 's4', 'tool': 'say', 'arguments': '{"text": "$ref:s3.city"}'}]}
    say = FakeTool('say', lambda args: args['text'])
    weather = FakeTool('weather', lambda args: {'city': args['city'], 'temp': 25})
    run = await toolweave.run_plan(plan, [say, concat_tool(separator=' + '), weather])
    assert run.step('s2').output == 'hello + world'
    assert run.step('s4').output == 'Tokyo'
    assert say.calls[-1].arguments == {'text': 'Tokyo'}


# the other forms and path syntax


async def test_object_form_reference_keeps_the_type() -> None:
    assert await resolved('{"a": {"b": [1, 2]}}', {'x': {'$ref': 's1.a.b'}, 'y': {'$ref': '$ref:s1.a'}}) == {
        'x': [1, 2], 'y': {'b': [1, 2]}}


async def test_object_with_other_keys_is_not_a_reference() -> None:
    assert await resolved('v', {'x': {'$ref': 's1', 'other': 1}}) == {'x': {'$ref': 's1', 'other': 1}}


async def test_keys_with_spaces_and_quoted_keys() -> None:
    output = '{"Exchange Rate": 1.5, "a.b": {"c d": 2}, "x[0]": 3}'
    arguments = await resolved(output, {
        'rate': '$ref:s1.Exchange Rate', 'q': '$ref:s1["a.b"]["c d"]', 'single': "$ref:s1['x[0]']",
        'text': 'rate={{$ref:s1["Exchange Rate"]}}'})
    assert arguments == {'rate': 1.5, 'q': 2, 'single': 3, 'text': 'rate=1.5'}


async def test_references_at_any_depth() -> None:
    arguments = await resolved('{"k": "v"}', {'a': [{'b': [{'c': '$ref:s1.k'}]}], 'd': {'e': {'$ref': 's1'}}})
    assert arguments == {'a': [{'b': [{'c': 'v'}]}], 'd': {'e': {'k': 'v'}}}


async def test_references_read_the_tool_value_without_reparsing() -> None:
    class Point:
        def __init__(self) -> None:
            self.x = 1

    from pydantic import BaseModel

    class Model(BaseModel):
        name: str
        tags: list[str]

    plan = {'steps': [{'id': 's1', 'tool': 'model', 'arguments': {}},
                      {'id': 's2', 'tool': 'echo', 'arguments': {'n': '$ref:s1.name', 't': '$ref:s1.tags[-1]'}}]}
    run = await toolweave.run_plan(plan, [FakeTool('model', Model(name='n', tags=['a', 'b'])), echo_tool()])
    assert run.step('s2').arguments == {'n': 'n', 't': 'b'}
    assert isinstance(run.step('s1').value, Model)


async def test_missing_field_fails_the_step_by_default_listing_the_existing_keys() -> None:
    plan = {'steps': [{'id': 's1', 'tool': 'src', 'arguments': '{}'},
                      {'id': 's2', 'tool': 'echo', 'arguments': '{"x": "$ref:s1.user.nme"}'},
                      {'id': 's3', 'tool': 'echo', 'arguments': '{"x": "$ref:s1.list[9]"}'}]}
    run = await toolweave.run_plan(plan, [FakeTool('src', '{"user": {"name": 1, "age": 2}, "list": [1]}'),
                                          echo_tool()])
    assert run.step('s2').status == 'failed'
    assert run.step('s2').error == (
        "Reference '$ref:s1.user.nme' in step 's2': field 'nme' not found in step 's1' output at user. "
        'Available keys: name, age.')
    assert 'The array has 1 items' in (run.step('s3').error or '')


async def test_missing_field_null_mode_inserts_null() -> None:
    assert await resolved('{"a": 1}', '{"x": "$ref:s1.b"}', missing_field='null') == {'x': None}
