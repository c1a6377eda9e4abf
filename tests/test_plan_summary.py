"""What the model sees and what the record keeps: the JSON summary, the digest of index-based plans,
`PlanRun.to_dict`."""

from __future__ import annotations

import json
from typing import Any

import pytest

import toolweave
from toolweave.testing import FakeTool, echo_tool

pytestmark = pytest.mark.anyio


def step(step_id: str, tool: str = 'echo', arguments: Any = None) -> dict[str, Any]:
    return {'id': step_id, 'tool': tool, 'arguments': arguments if arguments is not None else {}}


def say(name: str, text: str, **knobs: Any) -> FakeTool:
    return FakeTool(name, text, **knobs)


async def test_output_steps_filter_the_summary_not_the_record() -> None:
    run = await toolweave.run_plan({'steps': [step('s1', 'a'), step('s2', 'b')], 'output_steps': ['s2']},
                                   [say('a', 'first'), say('b', 'final')])
    assert run.summary == '{"s2": "final"}'
    assert [r.output for r in run.steps] == ['first', 'final']


@pytest.mark.parametrize('output_steps', [None, []])
async def test_without_output_steps_every_step_is_returned(output_steps: Any) -> None:
    run = await toolweave.run_plan({'steps': [step('s1', 'a'), step('s2', 'b')], 'output_steps': output_steps},
                                   [say('a', 'hello'), say('b', 'world')])
    assert run.summary == '{"s1": "hello", "s2": "world"}'


async def test_unknown_output_steps_are_a_validation_problem() -> None:
    tools = [say('a', 'x')]
    with pytest.raises(toolweave.PlanValidationError) as caught:
        await toolweave.run_plan({'steps': [step('s1', 'a')], 'output_steps': ['nope', 's1', 'neither']}, tools)
    assert caught.value.problems == ['"output_steps" names \'nope\', \'neither\', not steps of this plan. Name step '
                                     'ids of this plan (s1), or leave "output_steps" out to get every output.']


async def test_output_steps_sent_as_a_json_string_are_read() -> None:
    run = await toolweave.run_plan({'steps': [step('s1', 'a'), step('s2', 'a')], 'output_steps': '["s2"]'},
                                   [say('a', 'x')])
    assert run.summary == '{"s2": "x"}'


async def test_entries_follow_output_steps_order() -> None:
    run = await toolweave.run_plan({'steps': [step('a', 'x'), step('b', 'x')], 'output_steps': ['b', 'a']},
                                   [say('x', 'v')])
    assert run.summary == '{"b": "v", "a": "v"}'


async def test_json_outputs_are_embedded_as_json_and_text_as_strings() -> None:
    tools = [say('obj', ' {"a": [1, 2]} '), say('num', '42'), say('flag', 'true'), say('txt', 'hi "you"'),
             say('fake', '{not json'), say('nan', 'NaN')]
    run = await toolweave.run_plan({'steps': [step(t.name, t.name) for t in tools]}, tools)
    assert run.summary == ('{"obj": {"a": [1, 2]}, "num": 42, "flag": true, "txt": "hi \\"you\\"", '
                           '"fake": "{not json", "nan": "NaN"}')
    assert json.loads(run.summary)['obj'] == {'a': [1, 2]}


async def test_tool_values_are_shown_from_their_output_text() -> None:
    run = await toolweave.run_plan({'steps': [step('v', 'v')]}, [FakeTool('v', {'k': 'é'})])
    assert run.summary == '{"v": {"k": "é"}}'


async def test_errors_layout() -> None:
    plan = {'steps': [step('s1', 'flaky_api'), step('s2', 'reliable_api'), step('s3', 'process', {'d': '$ref:s1'})],
            'output_steps': ['s2', 's3']}
    run = await toolweave.run_plan(plan, [FakeTool('flaky_api', raises=RuntimeError('503 upstream')),
                                          say('reliable_api', 'fine'), echo_tool('process')])
    assert run.summary == (
        'Plan completed with errors.\n'
        'Results: {"s2": "fine", "s3": "ERROR: Skipped because dependency \'s1\' failed"}\n'
        "Errors: s1: Tool execution failed: 503 upstream; s3: Skipped because dependency 's1' failed"
    )


async def test_values_are_cut_with_a_note_and_kept_whole_in_the_record() -> None:
    plan = {'steps': [step('big', 'big'), step('json', 'json'), step('small', 'small'), step('bad', 'bad')]}
    tools = [FakeTool('big', output_chars=10_000), FakeTool('json', list(range(3000))), say('small', 'ok'),
             FakeTool('bad', fail='e' * 50)]
    run = await toolweave.run_plan(plan, tools, max_output_chars=40)
    shown = json.loads(run.summary.split('\n')[1].removeprefix('Results: '))
    assert shown['big'] == ('lorem ipsum dolor sit amet lorem ipsum d... [cut 9960 of 10000 characters; a select '
                            'step in the plan can keep only the part you need]')
    assert shown['json'].startswith('[0,1,2,3,') and shown['json'].endswith('the part you need]')
    assert shown['small'] == 'ok'
    assert shown['bad'] == 'ERROR: ' + 'e' * 40 + '... [cut 10 of 50 characters]'
    assert len(run.step('big').output or '') == 10_000
    assert run.step('json').value == list(range(3000))


async def test_huge_outputs_default_cut() -> None:
    run = await toolweave.run_plan({'steps': [step('big', 'big')]}, [FakeTool('big', output_chars=1_000_000)])
    assert len(run.summary) < 5000
    assert '[cut 996000 of 1000000 characters; ' in run.summary
    unlimited = await toolweave.run_plan({'steps': [step('big', 'big')]}, [FakeTool('big', output_chars=50_000)],
                                         max_output_chars=None)
    assert len(unlimited.summary) == 50_000 + len('{"big": ""}')


async def test_digest_for_index_plans() -> None:
    plan = {'goal': 'g', 'steps': [
        {'tool': 'ok', 'args': {}, 'description': 'one'},
        {'tool': 'boom', 'args': {}, 'description': 'two'},
        {'tool': 'ok', 'args': {'x': {'$ref': 'steps[1].result.a'}}, 'description': 'three'},
        {'tool': 'long', 'args': {}, 'description': 'four'}]}
    run = await toolweave.run_plan(plan, [say('ok', 'fine\nthanks'), FakeTool('boom', fail='bad'),
                                          FakeTool('long', output_chars=500)])
    lines = run.digest().split('\n')
    assert lines[0] == 'Plan executed: 2/4 succeeded.'
    assert lines[1] == 'Step 1 (ok): fine thanks'
    assert lines[2] == 'Step 2 (boom): FAILED: bad'
    assert lines[3] == "Step 3 (ok): SKIPPED: Skipped because dependency 'step_1' failed"
    assert lines[4].startswith('Step 4 (long): lorem') and lines[4].endswith('...')
    assert len(lines[4]) == len('Step 4 (long): ') + 123


async def test_digest_of_an_empty_index_plan() -> None:
    run = await toolweave.run_plan({'goal': 'nothing', 'steps': []}, [echo_tool()])
    assert run.digest() == 'Plan executed: 0/0 succeeded.\n'
    assert run.ok and run.total == 0


async def test_to_dict_is_json_and_complete() -> None:
    plan = {'steps': [step('a', 'v'), step('b', 'echo', {'x': '$ref:a.k'})], 'output_steps': ['b']}
    run = await toolweave.run_plan(plan, [FakeTool('v', {'k': 1}), echo_tool()])
    data = json.loads(json.dumps(run.to_dict()))
    assert data['total'] == 2 and data['succeeded'] == 2 and data['ok'] is True
    assert data['waves'] == [['a'], ['b']]
    assert data['output_steps'] == ['b']
    b = data['steps'][1]
    assert (b['id'], b['status'], b['arguments'], b['value'], b['depends_on'], b['wave']) == (
        'b', 'succeeded', {'x': 1}, {'x': 1}, ['a'], 1)
    assert b['duration'] >= 0 and b['started_at'] >= data['steps'][0]['ended_at']
    assert data['summary'] == '{"b": {"x": 1}}'


async def test_step_lookup_error_lists_the_ids() -> None:
    run = await toolweave.run_plan({'steps': [step('a')]}, [echo_tool()])
    with pytest.raises(KeyError, match="No step 'zz' in this plan run. Steps: a."):
        run.step('zz')
    assert repr(run).startswith('PlanRun(total=1, succeeded=1, failed=0, skipped=0, cancelled=0, duration=')
