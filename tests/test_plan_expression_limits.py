"""Expressions a model writes cannot hurt the process: too long, too deep, unknown functions and wrong arguments are
validation problems (nothing runs); expensive ones fail their step within a budget while timeouts still hold;
their results are JSON, always; `from_json` reads JSON text within bounds."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import toolweave
from toolweave import PlanTool, PlanValidationError, validate_plan
from toolweave.cli._app import app
from toolweave.testing import FakeTool, LoopWatch

pytestmark = pytest.mark.anyio


@pytest.fixture(params=['asyncio', 'trio'])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def side_effect() -> FakeTool:
    return FakeTool('send', 'sent')


def source(value: Any) -> FakeTool:
    return FakeTool('source', lambda args: value)


def select_plan(expression: str, *, when: bool = False) -> dict[str, Any]:
    """A plan whose first step has a side effect, then a step reading it with `expression`."""
    last: dict[str, Any] = ({'id': 'x', 'tool': 'send', 'arguments': {}, 'when': {'from': '$ref:src',
                                                                                 'select': expression}}
                            if when else {'id': 'x', 'from': '$ref:src', 'select': expression})
    return {'steps': [{'id': 'first', 'tool': 'send', 'arguments': {}},
                      {'id': 'src', 'tool': 'source', 'arguments': {}}, last]}


# --- found at validation: nothing runs ----------------------------------------------------------------------------


@dataclass
class Bad:
    expression: str
    problem: str


BAD = [
    Bad('[' * 400, 'the expression is nested more than 50 levels deep. Split it into several steps (a select step '
                   'can read the result of another).'),
    Bad('!' * 400 + '@', 'the expression is nested more than 50 levels deep.'),
    Bad('[*].a' * 300, 'the expression is nested more than 50 levels deep.'),
    Bad('a' * 2001, 'the expression is 2,001 characters long, more than the limit of 2,000.'),
    Bad('foo(@)', 'unknown function foo(). The functions are: abs, avg, ceil, contains, ends_with, floor, from_json, '
                  'join, keys, length, map, max, max_by, merge, min, min_by, not_null, reverse, sort, sort_by, '
                  'starts_with, sum, to_array, to_number, to_string, type, values.'),
    Bad('length(@, @)', 'length() takes 1 argument, got 2.'),
    Bad('not_null()', 'not_null() takes at least 1 argument, got 0.'),
    Bad('sort_by(@, price)', 'argument 2 of sort_by() must be an expression reference, like &price.'),
    Bad('&a', '`&` makes an expression reference, which only the functions that take one read (map, max_by, '
              'min_by, sort_by): for example sort_by(@, &price).'),
    Bad('to_string(&a)', '`&` makes an expression reference'),
    Bad('abs(`"x"`)', 'argument 1 of abs() must be number, got string "x".'),
    Bad("join(', ', `[1, 2]`)", 'argument 2 of join() must be array-string, got array [1, 2].'),
    Bad('from_json(`1`)', 'argument 1 of from_json() must be string, got number 1.'),
    Bad('`1e999`', 'a literal number is out of range (it reads as infinity): JSON numbers are finite.'),
    Bad('length(@, @) | foo(@)', 'unknown function foo()'),
]


@pytest.mark.parametrize('case', BAD, ids=[case.expression[:20] for case in BAD])
@pytest.mark.parametrize('when', [False, True], ids=['select', 'when'])
async def test_a_bad_expression_is_a_validation_problem_and_nothing_runs(case: Bad, when: bool) -> None:
    send, src = side_effect(), source([1])
    field = 'when.select' if when else 'select'
    label = "steps[2] (id 'x')"
    [problem] = validate_plan(select_plan(case.expression, when=when), [send, src])
    assert problem.startswith(f'{label}: {field}: ') and case.problem in problem, problem
    with pytest.raises(PlanValidationError) as caught:
        await toolweave.run_plan(select_plan(case.expression, when=when), [send, src])
    assert caught.value.problems == [problem]
    result = await PlanTool([send, src]).call(select_plan(case.expression, when=when))
    assert result.error is not None and case.problem in result.error
    assert send.call_count == 0 and src.call_count == 0


async def test_every_problem_of_an_expression_is_listed_at_once() -> None:
    [problem] = validate_plan(select_plan('[length(@, @), foo(@), abs(`"x"`), &a]'), [side_effect(), source(1)])
    assert problem == (
        "steps[2] (id 'x'): select: `&` makes an expression reference, which only the functions that take one read "
        '(map, max_by, min_by, sort_by): for example sort_by(@, &price).; argument 1 of abs() must be number, got '
        'string "x".; unknown function foo(). The functions are: abs, avg, ceil, contains, ends_with, floor, '
        'from_json, join, keys, length, map, max, max_by, merge, min, min_by, not_null, reverse, sort, sort_by, '
        'starts_with, sum, to_array, to_number, to_string, type, values.; length() takes 1 argument, got 2.')


def test_run_plan_sync_and_the_cli_report_a_deep_expression_without_a_traceback(tmp_path: Path) -> None:
    with pytest.raises(PlanValidationError, match='nested more than 50 levels deep'):
        toolweave.run_plan_sync(select_plan('[' * 400), [side_effect(), source(1)])
    path = tmp_path / 'plan.json'
    path.write_text(json.dumps({'steps': [{'id': 'x', 'from': [1], 'select': '[' * 400}]}))
    result = CliRunner().invoke(app, ['validate', str(path), '--tools', 'toolweave.testing:echo_tool'])
    assert result.exit_code == 1 and 'Traceback' not in result.output
    assert 'nested more than 50 levels deep' in ' '.join(result.output.split())


# --- at run time: within the budget, the step fails; the run goes on ----------------------------------------------


@dataclass
class Expensive:
    expression: str
    value: Any
    error: str


EXPENSIVE = [
    Expensive(' | '.join(['[@, @]'] * 22), [1], 'the expression builds a value larger than 8 MB as JSON'),
    Expensive('[' + ', '.join(['@'] * 40) + '] | [' + ', '.join(['@'] * 40) + '] | [' + ', '.join(['@'] * 40)
              + '] | [' + ', '.join(['@'] * 40) + ']', [1], 'larger than 8 MB'),
    Expensive("join('', [@, @])" + " | join('', [@, @])" * 40, 'ab', 'larger than 8 MB'),
    Expensive('to_string([@, @, @, @]) | to_string([@, @, @, @]) | to_string([@, @, @, @])',
              ['x' * 1000] * 1000, 'larger than 8 MB'),
    Expensive('sort(@)', list(range(300_000)), 'needs more than 2,000,000 steps of work'),
]


@pytest.mark.parametrize('case', EXPENSIVE, ids=[case.expression[:24] for case in EXPENSIVE])
async def test_an_expensive_expression_fails_its_step_and_the_others_run(case: Expensive) -> None:
    send = side_effect()
    run = await toolweave.run_plan(select_plan(case.expression), [send, source(case.value)], timeout=60)
    step = run.step('x')
    assert step.status == 'failed' and step.error is not None and case.error in step.error, step.error
    assert run.step('first').ok and send.call_count == 1


@pytest.mark.parametrize('anyio_backend', ['asyncio'])  # seconds of work: once is enough
async def test_an_expression_that_visits_too_much_fails_its_step() -> None:
    ten = '[' + ', '.join(['@'] * 10) + ']'
    run = await toolweave.run_plan(select_plan(ten + f' | [].{ten}' * 6 + ' | length(@)'), [side_effect(), source(1)])
    assert run.step('x').error == (
        "select of step 'x' failed: the expression needs more than 2,000,000 steps of work over this value. Narrow "
        'the value in an earlier step (fewer elements or fields), or simplify the expression.')


@pytest.mark.usefixtures('no_gc')  # a full collection of the suite's heap would hold the loop too
async def test_a_plan_timeout_holds_while_an_expression_runs_and_the_event_loop_keeps_running() -> None:
    ten = '[' + ', '.join(['@'] * 10) + ']'
    expression = ten + f' | [].{ten}' * 5 + ' | length(@)'  # about 2 M steps of work: seconds in the thread
    async with LoopWatch() as watch:
        run = await toolweave.run_plan(select_plan(expression), [side_effect(), source(1)], timeout=0.3)
    step = run.step('x')
    assert step.status == 'cancelled' and step.error == 'Cancelled: the plan timed out after 0.3 s (timeout)'
    # Inline, the expression would take seconds (its whole budget): the run ends at its timeout instead, and the
    # event loop ran on meanwhile.
    assert run.duration < 1.5
    assert watch.ticks > 0 and watch.longest_gap < 1.0


# --- results are JSON -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(('expression', 'error'), [
    ('to_number(`"1e999"`)', 'the expression gives inf, which is not a JSON number'),
    ('[to_number(`"1e999"`)]', 'the expression gives inf, which is not a JSON number'),
    ('{a: to_number(`"-1e999"`)}', 'the expression gives -inf, which is not a JSON number'),
])
async def test_a_result_that_is_not_json_fails_the_step(expression: str, error: str) -> None:
    run = await toolweave.run_plan(select_plan(expression), [side_effect(), source([1])])
    assert run.step('x').status == 'failed' and error in (run.step('x').error or '')


async def test_a_result_is_json_data_and_the_summary_is_valid_json() -> None:
    run = await toolweave.run_plan(select_plan('{n: length(@), first: [0], doubled: [@, @]}'),
                                   [side_effect(), source([1, 2])])
    assert run.step('x').value == {'n': 2, 'first': 1, 'doubled': [[1, 2], [1, 2]]}
    assert json.loads(run.summary)['x'] == {'n': 2, 'first': 1, 'doubled': [[1, 2], [1, 2]]}


# --- from_json ----------------------------------------------------------------------------------------------------


async def test_from_json_reads_json_text_that_a_tool_returned() -> None:
    mcp_like = {'content': [{'type': 'text', 'text': '{"items": [{"id": 1, "ok": true}, {"id": 2, "ok": false}]}'}]}
    plan = {'steps': [{'id': 'src', 'tool': 'source', 'arguments': {}},
                      {'id': 'ok', 'from': '$ref:src', 'select': 'from_json(content[0].text).items[?ok].id'}]}
    run = await toolweave.run_plan(plan, [source(mcp_like)])
    assert run.step('ok').value == [1]


@pytest.mark.parametrize(('text', 'error'), [
    ('{"a": ', "from_json() got text that is not JSON (Expecting value at line 1 column 7): '{\"a\": '."),
    ('[NaN]', 'from_json() got JSON it cannot read: NaN is not a JSON number.'),
    ('[' * 100_000, 'from_json() got JSON nested too deeply to read.'),
    (' ' * 1_000_001, 'from_json() reads texts of at most 1,000,000 characters, got 1,000,001.'),
    ('1' * 5000, 'from_json() got JSON it cannot read: Exceeds the limit (4300 digits)'),
    ('[' + '[], ' * 150_000 + '[]]', 'from_json() reads at most 100,000 objects and arrays.'),
    ('[' + 'NaN, ' * 20_000 + '1]', 'from_json() got JSON it cannot read: NaN is not a JSON number.'),
], ids=['broken', 'nan', 'deep', 'long', 'long int', 'many arrays', 'large text with nan'])
async def test_from_json_of_bad_text_fails_the_step_with_why(text: str, error: str) -> None:
    plan = {'steps': [{'id': 'src', 'tool': 'source', 'arguments': {}},
                      {'id': 'x', 'from': '$ref:src', 'select': 'from_json(text)'}]}
    run = await toolweave.run_plan(plan, [source({'text': text})])
    assert run.step('x').status == 'failed' and error in (run.step('x').error or ''), run.step('x').error


async def test_from_json_of_a_value_that_is_not_text_fails_the_step() -> None:
    plan = {'steps': [{'id': 'src', 'tool': 'source', 'arguments': {}},
                      {'id': 'x', 'from': '$ref:src', 'select': 'from_json(@)'}]}
    run = await toolweave.run_plan(plan, [source([1])])
    assert "In function from_json(), invalid type for value: [1], expected one of: ['string']" in (
        run.step('x').error or '')
