"""The meta-tools: `execute_tool_plan` (schema, instructions, malformed payloads) and the index-based
`execute_plan` (its plan text, references, digest and errors)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import toolweave
from toolweave import ExitEarly, PlanRun, PlanTool, ToolMetadata, Toolset
from toolweave.testing import FakeTool, echo_tool

pytestmark = pytest.mark.anyio


def metrics_tools() -> list[FakeTool]:
    return [
        FakeTool('list_metrics', {'metrics': [{'name': 'cpu_usage', 'unit': '%'}, {'name': 'memory_usage'}]}),
        FakeTool('query_metric', lambda a: {'name': a['name'], 'current': 72.5, 'unit': '%'}),
        FakeTool('check_threshold', lambda a: {'status': 'ok', 'args': a}),
    ]


# execute_tool_plan


def test_schema() -> None:
    definition = PlanTool(Toolset([echo_tool()])).definition
    assert definition.name == 'execute_tool_plan'
    assert 'plan' in definition.description
    # the default, compact schema: small, not strict; the step shapes are in the description
    assert definition.metadata.strict is False
    assert definition.parameters == {
        'type': 'object', 'required': ['steps'],
        'properties': {'steps': {'type': 'array', 'items': {'type': 'object'}},
                       'output_steps': {'type': 'array', 'items': {'type': 'string'}}}}
    for needle in ('"id", "tool", "arguments"', '"$ref:ID"', 'select', 'for_each', 'when'):
        assert needle in definition.description


def test_string_schema_is_strict() -> None:
    definition = PlanTool(Toolset([echo_tool()]), plan_schema='string').definition
    schema = definition.parameters
    # strict mode on: every property is required, so `output_steps` is nullable instead of optional.
    assert definition.metadata.strict is True
    assert schema['required'] == ['steps', 'output_steps'] and schema['additionalProperties'] is False
    assert schema['properties']['output_steps'] == {
        'type': ['array', 'null'], 'items': {'type': 'string'},
        'description': schema['properties']['output_steps']['description']}
    items = schema['properties']['steps']['items']
    assert items['required'] == ['id', 'tool', 'arguments'] and items['additionalProperties'] is False
    assert {k: v['type'] for k, v in items['properties'].items()} == {'id': 'string', 'tool': 'string',
                                                                       'arguments': 'string'}


def test_instructions_teach_the_language_and_the_description_stays_short() -> None:
    text = toolweave.planning_instructions()
    description = PlanTool(Toolset([echo_tool()])).definition.description
    assert text.startswith('# Tool Planning\n')
    for needle in ('"output_steps"', '"$ref:ID"', '"$ref:ID.items[0].name"', '{{$ref:', 'parallel', '"from"',
                   '"select"', 'JMESPath', '"for_each"', '"$item"', '"$item.field"', '"$index"', '"when"', 'Example:',
                   '"where"', '"sort_by"', '"first"', '"keep"'):
        assert needle in text
    for needle in ('"id", "tool", "arguments"', '"$ref:ID"', 'select', 'for_each', 'when', 'Tool Planning'):
        assert needle in description
    assert len(text) / 4 < 260 and len(description) / 4 < 65
    assert PlanTool([echo_tool()], name='plan_it').instructions().count('`plan_it`') == 1


async def test_a_plan_runs_and_returns_the_summary_with_the_run_as_value() -> None:
    planner = PlanTool(Toolset([echo_tool()]))
    arguments = json.dumps({'steps': [{'id': 'a', 'tool': 'echo', 'arguments': '{"x": 1}'},
                                      {'id': 'b', 'tool': 'echo', 'arguments': '{"y": "$ref:a.x"}'}],
                            'output_steps': ['b']})
    result = await planner.call(arguments)
    assert result.ok and result.text == '{"b": {"y": 1}}'
    assert isinstance(result.value, PlanRun) and result.value.total == 2


async def test_arguments_may_be_objects_at_call_time() -> None:  # leniency
    result = await PlanTool([echo_tool()]).call({'steps': [{'id': 'a', 'tool': 'echo', 'arguments': {'x': 1}}]})
    assert result.text == '{"a": {"x": 1}}'


async def test_lazy_lookup_sees_tools_added_later() -> None:
    toolset = Toolset([echo_tool()])
    planner = PlanTool(toolset)
    toolset.add(FakeTool('late', 'here'))
    result = await planner.call({'steps': [{'id': 'a', 'tool': 'late', 'arguments': '{}'}]})
    assert result.text == '{"a": "here"}'


async def test_validation_failures_are_text_and_nothing_runs() -> None:
    echo = echo_tool()
    planner = PlanTool(Toolset([echo]))
    assert (await planner.call({'steps': []})).text.startswith('Error: Tool plan must contain at least one step')
    result = await planner.call({'steps': [{'id': 's1', 'tool': 'execute_tool_plan', 'arguments': '{}'}]})
    assert result.text == ("Error: Plan execution failed: steps[0] (id 's1'): Step 's1' cannot call "
                           "'execute_tool_plan' (recursive plans are not allowed). Call the tools themselves as steps "
                           'of this plan.')
    result = await planner.call({'steps': [{'id': 's1', 'tool': 'echo', 'arguments': '{}'},
                                           {'id': 's2', 'tool': 'nonexistent', 'arguments': '{}'},
                                           {'id': 's2', 'tool': 'echo', 'arguments': '{}'}]})
    assert result.text.startswith('Error: Plan execution failed: 2 problems (nothing ran; fix them all and resend):\n'
                                  "- steps[1] (id 's2'): Unknown tool 'nonexistent' in step 's2'.")
    assert echo.call_count == 0


async def test_a_renamed_planner_refuses_itself() -> None:
    toolset = Toolset([echo_tool()])
    toolset.add(PlanTool(toolset, name='plan'))
    result = await toolset.call('plan', {'steps': [{'id': 's1', 'tool': 'plan', 'arguments': '{}'}]})
    assert 'recursive plans are not allowed' in result.text


@pytest.mark.parametrize('payload', ['not json', '[]', '{"steps": 5}', '{"steps": [{"id": 1}]}', None, '""'])
async def test_malformed_payloads_become_error_text(payload: Any) -> None:
    result = await PlanTool([echo_tool()]).call(payload)
    assert result.text.startswith('Error: ')


async def test_step_failures_give_a_successful_text_with_errors() -> None:
    planner = PlanTool([FakeTool('flaky_api', raises=RuntimeError('down')), FakeTool('reliable_api', 'ok'),
                        echo_tool('process')])
    result = await planner.call({'steps': [
        {'id': 's1', 'tool': 'flaky_api', 'arguments': '{}'},
        {'id': 's2', 'tool': 'reliable_api', 'arguments': '{}'},
        {'id': 's3', 'tool': 'process', 'arguments': '{"data": "$ref:s1"}'}], 'output_steps': ['s2', 's3']})
    assert result.ok
    assert result.text == ('Plan completed with errors.\n'
                           'Results: {"s2": "ok", "s3": "ERROR: Skipped because dependency \'s1\' failed"}\n'
                           "Errors: s1: Tool execution failed: down; s3: Skipped because dependency 's1' failed")


async def test_control_flow_signals_propagate_from_the_meta_tool() -> None:
    planner = PlanTool([FakeTool('stop', raises=ExitEarly('done'))])
    with pytest.raises(ExitEarly):
        await planner.call({'steps': [{'id': 's', 'tool': 'stop', 'arguments': '{}'}]})


async def test_the_meta_tool_passes_its_context_and_options_on() -> None:
    work = FakeTool('work', hang=True)
    planner = PlanTool([work], step_timeout=0.05)
    result = await planner.call({'steps': [{'id': 'w', 'tool': 'work', 'arguments': '{}'}]}, {'tenant': 't1'})
    assert 'timed out after 0.05 s' in result.text
    assert work.calls[0].context['tenant'] == 't1'


async def test_gated_tools_ask_the_planner_reviewer() -> None:
    class No:
        async def review(self, request: toolweave.ReviewRequest) -> toolweave.ReviewDecision:
            return toolweave.ReviewDecision.reject()

    planner = PlanTool([FakeTool('rm', metadata=ToolMetadata(requires_approval=True))], review_handler=No())
    result = await planner.call({'steps': [{'id': 'r', 'tool': 'rm', 'arguments': '{"p": 1}'}]})
    assert 'Errors: r: Rejected by reviewer: {"p":1}' in result.text


# the index dialect and execute_plan


def index_planner() -> PlanTool:
    return PlanTool(metrics_tools(), dialect='index')


SEED_PLAN = {
    'goal': 'Check if CPU usage exceeds 80%',
    'steps': [
        {'tool': 'list_metrics', 'args': {'category': 'compute'}, 'description': 'Get available compute metrics'},
        {'tool': 'query_metric', 'args': {'name': {'$ref': 'steps[0].result.metrics[0].name'}},
         'description': 'Query the first compute metric'},
        {'tool': 'check_threshold', 'args': {'metric_name': {'$ref': 'steps[0].result.metrics[0].name'},
                                             'current': {'$ref': 'steps[1].result.current'},
                                             'threshold': 80, 'operator': 'gt'},
         'description': 'Check if above 80%'},
    ],
}


def test_execute_plan_schema() -> None:
    definition = index_planner().definition
    assert definition.name == 'execute_plan'
    assert definition.parameters['required'] == ['plan']
    assert definition.parameters['properties']['plan']['type'] == 'string'


async def test_the_metrics_plan_of_three_steps_runs() -> None:
    result = await index_planner().call({'plan': json.dumps(SEED_PLAN)})
    run = result.value
    assert isinstance(run, PlanRun)
    assert [r.id for r in run.steps] == ['step_0', 'step_1', 'step_2']
    assert run.step('step_1').arguments == {'name': 'cpu_usage'}
    assert run.step('step_2').arguments == {'metric_name': 'cpu_usage', 'current': '72.5', 'threshold': 80,
                                            'operator': 'gt'}
    assert result.text.split('\n')[0] == 'Plan executed: 3/3 succeeded.'
    assert result.text.split('\n')[2] == 'Step 2 (query_metric): {"name":"cpu_usage","current":72.5,"unit":"%"}'


async def test_invalid_json() -> None:
    result = await index_planner().call({'plan': 'not json at all {{'})
    assert json.loads(result.text) == {'error': 'Invalid JSON: not json at all {{...'}
    long = 'x' * 300
    assert json.loads((await index_planner().call({'plan': long})).text) == {'error': f'Invalid JSON: {"x" * 100}...'}


def index_problems(plan: dict[str, Any]) -> list[str]:
    return toolweave.validate_plan(plan, metrics_tools())


async def test_validation_errors_are_joined_json() -> None:
    tools = metrics_tools()
    plan = {'goal': 'g', 'steps': [{'tool': 'nope', 'args': {}}, {'tool': 'list_metrics', 'args': {}}]}
    result = await PlanTool(tools, dialect='index').call({'plan': json.dumps(plan)})
    error = json.loads(result.text)['error']
    assert error.startswith('Plan validation failed: ')
    assert ('steps[0]: "description" must be a string saying what the step does, got null.; '
            "steps[0]: Unknown tool 'nope'.") in error
    assert all(t.call_count == 0 for t in tools)


async def test_missing_goal() -> None:
    problems = index_problems({'steps': [{'tool': 'list_metrics', 'args': {}, 'description': 'd'}], 'goal': None})
    assert problems == ['"goal" must be a string saying what the plan is for, got null.']


@pytest.mark.parametrize(('ref', 'message'), [
    ('steps[1].result.x', 'forward reference'),
    ('steps[0].result.x', 'refers to itself'),
    ('steps[0].result', 'needs a field path'),
    ('step[0].result.x', 'must look like'),
    ('$.x', 'must look like'),
])
async def test_bad_index_references(ref: str, message: str) -> None:
    plan = {'goal': 'g', 'steps': [{'tool': 'list_metrics', 'args': {'a': {'$ref': ref}}, 'description': 'd'},
                                   {'tool': 'list_metrics', 'args': {}, 'description': 'd'}]}
    (problem,) = index_problems(plan)
    assert problem.startswith('steps[0]: arguments.a: ') and message in problem


async def test_literal_strings_are_not_references_in_the_index_dialect() -> None:
    plan = {'goal': 'g', 'steps': [{'tool': 'check_threshold', 'args': {'a': '$ref:x', 'b': '{{$ref:y}}'},
                                    'description': 'd'}]}
    run = await toolweave.run_plan(plan, metrics_tools())
    assert run.step('step_0').arguments == {'a': '$ref:x', 'b': '{{$ref:y}}'}


async def test_a_missing_or_null_field_fails_its_step_in_index_based_plans() -> None:
    plan = {'goal': 'g', 'steps': [
        {'tool': 'list_metrics', 'args': {}, 'description': 'd'},
        {'tool': 'check_threshold', 'args': {'x': {'$ref': 'steps[0].result.nope.deeper'}}, 'description': 'd'},
        {'tool': 'check_threshold', 'args': {'x': {'$ref': 'steps[0].result.limit'}}, 'description': 'd'},
        {'tool': 'check_threshold', 'args': {'x': {'$ref': 'steps[0].result.metrics[0].unit'}}, 'description': 'd'}]}
    tools = [FakeTool('list_metrics', {'metrics': [{'name': 'cpu_usage', 'unit': '%'}], 'limit': None}),
             *metrics_tools()[1:]]
    for option in ('null', 'error'):  # the option of id-based plans does not change this
        run = await toolweave.run_plan(plan, tools, missing_field=option)
        missing, null, present = run.step('step_1'), run.step('step_2'), run.step('step_3')
        assert missing.status == 'failed' and 'Available keys: metrics, limit.' in (missing.error or '')
        assert null.status == 'failed' and 'resolved to null' in (null.error or '')
        assert present.status == 'succeeded' and present.arguments == {'x': '%'}
    assert [call.arguments for call in tools[2].calls] == [{'x': '%'}, {'x': '%'}]  # no tool saw "null"


async def test_a_reference_to_a_failed_step_skips_and_later_steps_still_run() -> None:
    plan = {'goal': 'g', 'steps': [
        {'tool': 'broken', 'args': {}, 'description': 'd'},
        {'tool': 'check_threshold', 'args': {'x': {'$ref': 'steps[0].result.a'}}, 'description': 'd'},
        {'tool': 'list_metrics', 'args': {}, 'description': 'd'}]}
    result = await PlanTool([*metrics_tools(), FakeTool('broken', fail='kaput')], dialect='index').call(
        {'plan': json.dumps(plan)})
    assert result.text == ('Plan executed: 1/3 succeeded.\n'
                           'Step 1 (broken): FAILED: kaput\n'
                           "Step 2 (check_threshold): SKIPPED: Skipped because dependency 'step_0' failed\n"
                           'Step 3 (list_metrics): '
                           '{"metrics":[{"name":"cpu_usage","unit":"%"},{"name":"memory_usage"}]}')


async def test_empty_index_plan_is_valid() -> None:
    result = await index_planner().call({'plan': '{"goal": "nothing", "steps": []}'})
    assert result.text == 'Plan executed: 0/0 succeeded.\n'


async def test_index_plans_also_run_through_execute_tool_plan_detection() -> None:
    run = await toolweave.run_plan(json.dumps(SEED_PLAN), metrics_tools())
    assert run.plan.dialect == 'index' and run.ok and run.plan.goal == SEED_PLAN['goal']


async def test_execute_tool_plan_also_accepts_the_index_dialect() -> None:
    result = await PlanTool(metrics_tools()).call(SEED_PLAN)
    assert result.ok and json.loads(result.text)['step_1'] == {'name': 'cpu_usage', 'current': 72.5, 'unit': '%'}


def test_dialect_detection() -> None:
    assert toolweave.parse_plan({'goal': 'g', 'steps': [{'id': 'a', 'tool': 't', 'arguments': {}}]}).dialect == 'id'
    assert toolweave.parse_plan({'steps': [{'tool': 't', 'args': {}, 'description': 'd'}], 'goal': 'g'}).dialect == (
        'index')
    assert toolweave.parse_plan({'goal': 'g', 'steps': []}).dialect == 'index'
    with pytest.raises(toolweave.PlanValidationError, match='"goal" must be a string'):
        toolweave.parse_plan({'steps': [{'tool': 't', 'args': {}, 'description': 'd'}]}, dialect='index')


async def test_steps_encoded_twice_are_read() -> None:  # leniency
    steps = json.dumps([{'id': 'a', 'tool': 'echo', 'arguments': '{"x": 1}'}])
    result = await PlanTool([echo_tool()]).call({'steps': steps})
    assert result.text == '{"a": {"x": 1}}'
    bad = await PlanTool([echo_tool()]).call({'steps': 'not a list'})
    assert bad.text.startswith('Error: Plan execution failed: "steps" must be an array of step objects, got string')
