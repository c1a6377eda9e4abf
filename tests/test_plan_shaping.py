"""Plan steps that shape data without code: `select` (JMESPath over earlier results), `for_each` (one tool call
per element), `when` (a condition that skips a step and its dependents), and every bad input of them."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from typing_extensions import TypedDict

import toolweave
from toolweave import PlanValidationError, requires_approval, tool
from toolweave.plan import PlanEvent
from toolweave.testing import FakeTool, RecordingReviewHandler

pytestmark = pytest.mark.anyio

class Level(TypedDict):
    count: int
    warehouse: str


PRODUCTS: list[dict[str, Any]] = [{'id': i, 'name': f'laptop {i}', 'price': 400 + 150 * i, 'rating': (i * 7) % 5}
                                   for i in range(10)]


@tool
def search(query: str) -> list[dict[str, Any]]:
    """Search the catalogue."""
    return [dict(product) for product in PRODUCTS]


@tool
async def get_reviews(product_id: int) -> dict[str, Any]:
    """Reviews of one product (slower for lower ids, so calls finish out of order)."""
    if product_id == 99:
        raise ValueError(f'no product {product_id}')
    await anyio.sleep(0.002 * (10 - product_id))
    return {'product_id': product_id, 'stars': 3 + product_id % 3}


@tool
def notify(text: str) -> str:
    """Send a notification."""
    return f'sent: {text}'


TOOLS = [search, get_reviews, notify]
CHEAP_TOP3 = '[?price < `1000`] | sort_by(@, &rating) | reverse(@) | [:3]'


async def run(steps: list[dict[str, Any]], tools: list[Any] = TOOLS, **options: Any) -> toolweave.PlanRun:
    return await toolweave.run_plan({'steps': steps}, tools, **options)


async def problems(steps: list[dict[str, Any]], tools: list[Any] = TOOLS, **options: Any) -> list[str]:
    with pytest.raises(PlanValidationError) as caught:
        await run(steps, tools, **options)
    return list(caught.value.problems)


# --- select -------------------------------------------------------------------------------------------------------

async def test_select_filters_sorts_and_cuts_an_earlier_result() -> None:
    result = await run([{'id': 's', 'tool': 'search', 'arguments': {'query': 'laptop'}},
                        {'id': 'cheap', 'from': '$ref:s', 'select': CHEAP_TOP3}])
    cheap = result.step('cheap')
    expected = sorted([p for p in PRODUCTS if p['price'] < 1000], key=lambda p: p['rating'])[::-1][:3]
    assert cheap.status == 'succeeded' and cheap.kind == 'select' and cheap.tool == ''
    assert cheap.value == expected
    assert json.loads(cheap.output or '') == expected
    assert cheap.arguments == PRODUCTS  # what the expression ran over


async def test_select_joins_several_sources_and_without_select_packs_them() -> None:
    result = await run([
        {'id': 's', 'tool': 'search', 'arguments': {'query': 'x'}},
        {'id': 'r', 'tool': 'get_reviews', 'arguments': {'product_id': 2}},
        {'id': 'joined', 'from': {'all': '$ref:s', 'first': '$ref:s[0].name', 'stars': '$ref:r.stars'},
         'select': '{first: first, stars: stars, count: length(all)}'},
        {'id': 'packed', 'from': ['$ref:r.stars', 7]},
    ])
    assert result.step('joined').value == {'first': 'laptop 0', 'stars': 5, 'count': 10}
    assert result.step('packed').value == [5, 7]
    assert result.summary == '{"s": ' + json.dumps(PRODUCTS) + ', "r": {"product_id": 2, "stars": 5}, ' \
        '"joined": {"first": "laptop 0", "stars": 5, "count": 10}, "packed": [5, 7]}'


async def test_a_select_that_does_not_fit_the_data_fails_its_step_only() -> None:
    result = await run([{'id': 's', 'tool': 'search', 'arguments': {'query': 'x'}},
                        {'id': 'bad', 'from': '$ref:s', 'select': 'sum([].name)'},
                        {'id': 'after', 'tool': 'notify', 'arguments': {'text': '{{$ref:bad}}'}},
                        {'id': 'ok', 'from': '$ref:s', 'select': 'length(@)'}])
    assert [r.status for r in result.steps] == ['succeeded', 'failed', 'skipped', 'succeeded']
    assert (result.step('bad').error or '').startswith("select of step 'bad' failed: In function sum(), invalid type")
    assert result.step('ok').value == 10


# --- for_each -----------------------------------------------------------------------------------------------------

async def test_for_each_calls_the_tool_per_element_and_keeps_list_order() -> None:
    result = await run([{'id': 's', 'tool': 'search', 'arguments': {'query': 'x'}},
                        {'id': 'top', 'from': '$ref:s', 'select': '[:4]'},
                        {'id': 'reviews', 'tool': 'get_reviews', 'for_each': '$ref:top',
                         'arguments': {'product_id': '$item.id'}},
                        {'id': 'labels', 'tool': 'notify', 'for_each': '$ref:top',
                         'arguments': {'text': '{{$index}}: {{$item.name}}'}}])
    reviews = result.step('reviews')
    assert reviews.kind == 'for_each' and reviews.status == 'succeeded'
    assert reviews.value == [{'product_id': i, 'stars': 3 + i % 3} for i in range(4)]
    assert reviews.arguments == [{'product_id': i} for i in range(4)]
    items = reviews.items or []
    assert [item.index for item in items] == [0, 1, 2, 3] and all(item.status == 'succeeded' for item in items)
    # the calls ran at once: the slowest element (id 0) ended last although it was first in the list
    assert max(items, key=lambda item: item.ended_at or 0).index == 0
    assert result.step('labels').value == ['sent: 0: laptop 0', 'sent: 1: laptop 1', 'sent: 2: laptop 2',
                                           'sent: 3: laptop 3']


async def test_for_each_over_a_literal_list_and_an_empty_one() -> None:
    result = await run([{'id': 'a', 'tool': 'notify', 'for_each': ['x', 'y'], 'arguments': {'text': '$item'}},
                        {'id': 'none', 'tool': 'notify', 'for_each': [], 'arguments': {'text': '$item'}}])
    assert result.step('a').value == ['sent: x', 'sent: y']
    assert result.step('none').value == [] and result.step('none').status == 'succeeded'


async def test_for_each_runs_at_most_concurrency_calls_at_once() -> None:
    running = 0
    peak = 0

    @tool
    async def slow(n: int) -> int:
        """Count."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.005)
        running -= 1
        return n

    result = await run([{'id': 'each', 'tool': 'slow', 'for_each': list(range(9)), 'arguments': {'n': '$item'}}],
                       [slow], concurrency=3)
    assert result.step('each').value == list(range(9))
    assert peak == 3


async def test_failed_elements_are_recorded_each_and_fail_the_step() -> None:
    result = await run([{'id': 'each', 'tool': 'get_reviews', 'for_each': [1, 99, 2],
                         'arguments': {'product_id': '$item'}},
                        {'id': 'after', 'tool': 'notify', 'arguments': {'text': '{{$ref:each}}'}},
                        {'id': 'other', 'tool': 'notify', 'arguments': {'text': 'independent'}}])
    each = result.step('each')
    assert each.status == 'failed'
    assert each.error == '1 of 3 for_each items failed: item 1: Tool execution failed: no product 99'
    assert [(i.index, i.status) for i in each.items or []] == [(0, 'succeeded'), (1, 'failed'), (2, 'succeeded')]
    assert (each.items or [])[0].value == {'product_id': 1, 'stars': 4}
    assert result.step('after').status == 'skipped' and result.step('other').status == 'succeeded'
    json.dumps(result.to_dict())  # every item of the record is JSON data
    assert result.to_dict()['steps'][0]['items'][1] == {
        'index': 1, 'status': 'failed', 'arguments': {'product_id': 99}, 'output': None, 'value': None,
        'error': 'Tool execution failed: no product 99', 'started_at': each.items[1].started_at,  # type: ignore[index]
        'ended_at': each.items[1].ended_at, 'attempts': 1}  # type: ignore[index]


async def test_for_each_over_a_non_list_or_too_long_a_list_at_run_time_fails_the_step() -> None:
    thing = FakeTool('thing', '{"a": 1}')  # declares no output schema: its shape is known only once it ran
    result = await run([{'id': 's', 'tool': 'search', 'arguments': {'query': 'x'}},
                        {'id': 't', 'tool': 'thing', 'arguments': {}},
                        {'id': 'obj', 'tool': 'notify', 'for_each': '$ref:t', 'arguments': {'text': '$item'}},
                        {'id': 'long', 'tool': 'notify', 'for_each': '$ref:s', 'arguments': {'text': '$item.name'}}],
                       [*TOOLS, thing], max_items=5)
    assert result.step('obj').error == (
        "for_each of step 'obj' must be a list, got an object {\"a\": 1}. Refer to a list, or select one first (for "
        'example "from": "$ref:STEP", "select": "items").')
    assert result.step('long').error == (
        "for_each of step 'long' has 10 elements, more than the limit of 5. Narrow the list with a select step "
        'first (for example "[:20]"), or raise `max_items`.')


async def test_a_missing_field_of_an_element_fails_that_element() -> None:
    result = await run([{'id': 'each', 'tool': 'notify', 'for_each': [{'name': 'a'}, {'nom': 'b'}],
                         'arguments': {'text': '$item.name'}}])
    items = result.step('each').items or []
    assert items[0].status == 'succeeded'
    assert items[1].error == ("Reference '$item.name' in step 'each': field 'name' not found in the for_each element "
                              'at the top level. Available keys: nom.')


async def test_approval_sees_each_elements_resolved_arguments() -> None:
    gated = requires_approval(notify)
    reviewer = RecordingReviewHandler()
    result = await run([{'id': 'each', 'tool': 'notify', 'for_each': ['a', 'b', 'c'],
                         'arguments': {'text': 'hello {{$item}}'}}], [gated], review_handler=reviewer)
    assert result.ok
    assert sorted(json.dumps(r.arguments) for r in reviewer.requests) == [
        '{"text": "hello a"}', '{"text": "hello b"}', '{"text": "hello c"}']
    assert len(result.approvals) == 3


async def test_events_report_each_element() -> None:
    events: list[PlanEvent] = []
    await run([{'id': 'each', 'tool': 'notify', 'for_each': ['a', 'b'], 'arguments': {'text': '$item'}}],
              on_event=events.append)
    kinds = [(e.kind, e.item.index if e.item else None) for e in events]
    assert kinds[0] == ('step_started', None) and kinds[-1] == ('step_finished', None)
    assert sorted(kinds[1:-1]) == [('item_finished', 0), ('item_finished', 1)]


async def test_a_plan_timeout_cancels_the_running_elements() -> None:
    hang = FakeTool('hang', hang=True, parameters={'type': 'object', 'properties': {'n': {'type': 'integer'}}})
    result = await run([{'id': 'each', 'tool': 'hang', 'for_each': [1, 2], 'arguments': {'n': '$item'}}], [hang],
                       timeout=0.05)
    step = result.step('each')
    assert step.status == 'cancelled'
    assert [item.status for item in step.items or []] == ['cancelled', 'cancelled']


# --- when ---------------------------------------------------------------------------------------------------------

async def test_a_false_condition_skips_the_step_and_its_dependents_without_an_error() -> None:
    result = await run([
        {'id': 's', 'tool': 'search', 'arguments': {'query': 'x'}},
        {'id': 'none', 'from': '$ref:s', 'select': '[?price < `100`]'},
        {'id': 'alert', 'tool': 'notify', 'arguments': {'text': 'cheap: {{$ref:none}}'},
         'when': {'from': '$ref:none', 'select': 'length(@) > `0`'}},
        {'id': 'follow', 'tool': 'notify', 'arguments': {'text': '$ref:alert'}},
        {'id': 'shown', 'tool': 'notify', 'arguments': {'text': 'always'}, 'when': {'from': '$ref:s'}},
    ])
    alert, follow = result.step('alert'), result.step('follow')
    assert (alert.status, alert.condition_skipped, alert.started_at) == ('skipped', True, None)
    assert alert.error == "Skipped because its condition is false: 'length(@) > `0`' gave false"
    assert follow.error == "Skipped because the condition of step 'alert' is false" and follow.condition_skipped
    assert result.step('shown').output == 'sent: always'
    assert result.ok and result.errors == [] and result.skipped == 2
    summary = json.loads(result.summary)
    assert summary['alert'] == alert.error and summary['follow'] == follow.error


async def test_a_condition_that_cannot_be_evaluated_fails_the_step() -> None:
    result = await run([{'id': 's', 'tool': 'search', 'arguments': {'query': 'x'}},
                        {'id': 'a', 'tool': 'notify', 'arguments': {'text': 'x'},
                         'when': {'from': '$ref:s', 'select': 'abs(@)'}}])
    assert result.step('a').status == 'failed' and not result.ok
    assert (result.step('a').error or '').startswith("Condition of step 'a' could not be evaluated: In function abs()")


# --- bad input: validation problems, nothing runs ---------------------------------------------------------------

async def test_for_each_over_a_reference_the_output_schema_says_is_no_list() -> None:
    assert await problems([{'id': 's', 'tool': 'search', 'arguments': {'query': 'x'}},
                           {'id': 'obj', 'tool': 'notify', 'for_each': '$ref:s[0]', 'arguments': {'text': '$item'}}]
                          ) == ["steps[1] (id 'obj'): for_each: '$ref:s[0]' gives object, not a list. Refer to a list "
                                '(for example a field holding one), or make one with a select step first.']


async def test_every_kind_of_bad_input_is_a_validation_problem_and_nothing_runs() -> None:
    called = FakeTool('called', parameters={'type': 'object', 'properties': {'x': {}}})
    found = await problems([
        {'id': 'first', 'tool': 'called', 'arguments': {}},
        {'id': 's', 'tool': 'search', 'arguments': {'query': 'x'}},
        {'id': 'bad_expr', 'from': '$ref:s', 'select': '[?price < 1000'},
        {'id': 'not_list', 'tool': 'notify', 'for_each': 'abc', 'arguments': {'text': '$item'}},
        {'id': 'too_long', 'tool': 'notify', 'for_each': list(range(101)), 'arguments': {'text': 'x'}},
        {'id': 'stray_item', 'tool': 'notify', 'arguments': {'text': '$item.name'}},
        {'id': 'stray_index', 'tool': 'notify', 'arguments': {'text': 'n{{$index}}'}},
        {'id': 'c1', 'from': '$ref:c2', 'select': '@'},
        {'id': 'c2', 'from': {'x': '$ref:c1'}},
    ], [*TOOLS, called])
    assert called.calls == []
    assert found[0] == (
        "steps[2] (id 'bad_expr'): select: invalid JMESPath expression at position 10, near '1000': invalid token."
        '\n[?price < 1000\n          ^\nExamples: "items[?price < `1000`]", "sort_by(@, &rating) | '
        'reverse(@) | [:3]", "length(@) > `0`", "{names: [].name, total: sum([].amount)}" (literals go in backticks).')
    assert found[1:] == [
        "steps[3] (id 'not_list'): for_each: must be a reference to a list (like \"$ref:search.items\") or an array, "
        'got string "abc".',
        "steps[4] (id 'too_long'): for_each: 101 elements, more than the limit of 100. Narrow the list with a select "
        'step first, or raise `max_items`.',
        "steps[5] (id 'stray_item'): arguments.text: '$item.name' is only defined in the arguments of a step with "
        '"for_each" (it stands for the element the tool is called with). Add "for_each": "$ref:STEP.list" to this '
        'step, or refer to a step with "$ref:STEP".',
        "steps[6] (id 'stray_index'): arguments.text: '{{$index}}' is only defined in the arguments of a step with "
        '"for_each" (it stands for the element the tool is called with). Add "for_each": "$ref:STEP.list" to this '
        'step, or refer to a step with "$ref:STEP".',
        "steps[7] (id 'c1'): Cycle detected in tool plan dependencies: c1 -> c2 -> c1 (step 'c1' is part of a "
        'reference cycle). Remove one of these references so the steps can run in order.',
    ]


async def test_when_on_a_field_the_output_schema_does_not_have() -> None:
    @tool
    def level(sku: str) -> Level:
        """One level."""
        return {'count': 1, 'warehouse': 'b'}

    found = await problems([{'id': 'l', 'tool': 'level', 'arguments': {'sku': 'a'}},
                            {'id': 'n', 'tool': 'notify', 'arguments': {'text': 'low'},
                             'when': {'from': '$ref:l.cnt', 'select': '@ < `5`'}}], [level, notify])
    assert found == ["steps[1] (id 'n'): when.from: reference '$ref:l.cnt' cannot resolve: there is no field 'cnt' "
                     "at the top level; the fields there are: count, warehouse (in the output schema of step 'l'). "
                     'Refer to a field it has.']


async def test_a_backtick_literal_that_is_not_json_says_how_to_write_it() -> None:
    found = await problems([{'id': 's', 'tool': 'search', 'arguments': {'query': 'x'}},
                            {'id': 'f', 'from': '$ref:s', 'select': '[?name == `laptop 1`]'}])
    assert found[0].startswith("steps[1] (id 'f'): select: a literal in backticks is not JSON in '[?name == `laptop "
                               "1`]': write numbers as `1000`, strings as 'text' (single quotes) or `\"text\"`.")


async def test_malformed_step_kinds_are_reported_with_the_fix() -> None:
    found = await problems([
        {'id': 'both', 'tool': 'notify', 'arguments': {'text': 'x'}, 'from': '$ref:x', 'select': '@'},
        {'id': 'no_from', 'select': 'length(@)'},
        {'id': 'bad_when', 'tool': 'notify', 'arguments': {'text': 'x'}, 'when': '$ref:both'},
        {'id': 'when_extra', 'tool': 'notify', 'arguments': {'text': 'x'},
         'when': {'from': '$ref:both', 'select': '@', 'then': 1}},
        {'id': 'number', 'tool': 'notify', 'arguments': {'text': 'x'}, 'for_each': 3},
        {'id': 'bad_select', 'from': [1], 'select': 5},
    ])
    assert found == [
        "steps[0] (id 'both'): a step with \"from\"/\"select\" calls no tool, so it cannot have \"tool\", "
        '"arguments". Split it in two: a tool step, and a select step whose "from" refers to it.',
        "steps[0] (id 'both'): from: reference '$ref:x' names step 'x', which is not in the plan. Refer to one of "
        'the step ids: both, no_from, bad_when, when_extra, number, bad_select.',
        "steps[1] (id 'no_from'): \"select\" needs \"from\", the value to select from, for example \"from\": "
        '"$ref:search.items".',
        "steps[2] (id 'bad_when'): \"when\" must be an object with \"from\" (a reference) and \"select\" (a JMESPath "
        'condition), got "$ref:both". Write "when": {"from": "$ref:cheap", "select": "length(@) > `0`"}.',
        "steps[3] (id 'when_extra'): \"when\": unknown field 'then'. Write \"when\": {\"from\": \"$ref:cheap\", "
        '"select": "length(@) > `0`"}.',
        "steps[4] (id 'number'): \"for_each\" must be a reference to a list (like \"$ref:search.items\") or an "
        'array, got number 3.',
        "steps[5] (id 'bad_select'): \"select\" must be a JMESPath expression string, got number 5.",
    ]


async def test_a_stray_item_reference_seen_before_is_reported_where_it_is() -> None:
    found = await problems([{'id': 'e', 'tool': 'notify', 'for_each': ['a'], 'arguments': {'text': '$item'}},
                            {'id': 'n', 'tool': 'notify', 'arguments': {'text': '$item'}},
                            {'id': 'm', 'tool': 'notify', 'arguments': {'text': ['$item']}}])
    assert [p.split(": '$item'")[0] for p in found if 'only defined' in p] == [
        "steps[1] (id 'n'): arguments.text", "steps[2] (id 'm'): arguments.text[0]"]
    assert found[-1] == "steps[2] (id 'm'): arguments.text: ['$item'] is not of type 'string'."


async def test_a_selected_string_stays_a_string_in_the_summary() -> None:
    result = await run([{'id': 'n', 'from': {'v': '123'}, 'select': 'v'},
                        {'id': 'w', 'from': '$ref:n', 'when': {'from': '$ref:n', 'select': "@ == '123'"}}])
    assert json.loads(result.summary) == {'n': '123', 'w': '123'}
    assert result.step('n').output == '"123"'
