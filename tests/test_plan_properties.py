"""Properties over generated plans: ordering and accounting for random valid DAGs, and malformed plans that
never raise out of the meta-tool and never run a tool."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolweave
from toolweave import PlanTool
from toolweave.testing import FakeTool

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# A step: its dependencies (indexes of earlier steps, by generation), a delay, and whether it fails.
behaviours = st.sampled_from(['ok', 'ok', 'ok', 'fail', 'raise'])
delays = st.sampled_from([0.0, 0.0, 0.001, 0.003])


@st.composite
def dags(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, str], int | None]:
    n = draw(st.integers(1, 18))
    steps = []
    behaviour: dict[str, str] = {}
    for i in range(n):
        deps = draw(st.sets(st.integers(0, i - 1), max_size=3)) if i else set()
        how = draw(behaviours)
        delay = draw(delays)
        behaviour[f's{i}'] = how
        arguments = {'refs': [f'$ref:s{d}' for d in sorted(deps)], 'tool': how, 'delay': delay}
        if bool(deps) and draw(st.booleans()):  # bool(): mypy types the right side of `deps and ...` as a set
            arguments['text'] = f'from {{{{$ref:s{min(deps)}}}}}'
        steps.append({'id': f's{i}', 'tool': 'work', 'arguments': arguments})
    order = draw(st.permutations(range(n)))
    concurrency = draw(st.one_of(st.none(), st.integers(1, 4)))
    return {'steps': [steps[i] for i in order]}, behaviour, concurrency


def _work_sync(arguments: dict[str, Any]) -> Any:
    if arguments['tool'] == 'raise':
        raise RuntimeError('generated failure')
    if arguments['tool'] == 'fail':
        return toolweave.ToolResult.failure('generated returned failure')
    return {'n': len(arguments['refs']), 'from': [ref['n'] for ref in arguments['refs']], 'text': arguments.get('text')}


async def _work(arguments: dict[str, Any]) -> Any:
    if arguments['delay']:
        await anyio.sleep(arguments['delay'])
    return _work_sync(arguments)


def reference_run(plan: dict[str, Any]) -> dict[str, tuple[str, str | None, Any]]:
    """The oracle: the plan run one step at a time in dependency order, written as plainly as possible. Returns
    each step's (status, error, arguments the tool received)."""
    steps = {s['id']: s for s in plan['steps']}
    done: dict[str, tuple[str, str | None, Any]] = {}
    values: dict[str, Any] = {}

    def refs(arguments: dict[str, Any]) -> list[str]:
        found = [ref.removeprefix('$ref:') for ref in arguments['refs']]
        if 'text' in arguments:
            found.append(arguments['text'].split('$ref:')[1].split('}}')[0])
        return list(dict.fromkeys(found))

    while len(done) < len(steps):
        for step_id, spec in steps.items():
            deps = refs(spec['arguments'])
            if step_id in done or any(d not in done for d in deps):
                continue
            failed = [d for d in deps if done[d][0] != 'succeeded']
            if failed:
                done[step_id] = ('skipped', f"Skipped because dependency '{failed[0]}' failed", None)
                continue
            arguments = dict(spec['arguments'])
            arguments['refs'] = [values[ref.removeprefix('$ref:')] for ref in spec['arguments']['refs']]
            if 'text' in arguments:
                source = refs({'refs': [], 'text': arguments['text']})[0]
                arguments['text'] = 'from ' + json.dumps(values[source], separators=(',', ':'))
            try:
                value = _work_sync(arguments)
            except RuntimeError as exc:
                done[step_id] = ('failed', f'Tool execution failed: {exc}', arguments)
                continue
            if isinstance(value, toolweave.ToolResult):
                done[step_id] = ('failed', value.error, arguments)
                continue
            values[step_id] = value
            done[step_id] = ('succeeded', None, arguments)
    return done


@SETTINGS
@given(dags())
def test_random_dags_match_the_reference_executor(case: tuple[dict[str, Any], dict[str, str], int | None]) -> None:
    plan, _, concurrency = case
    run = anyio.run(partial(toolweave.run_plan, plan, [FakeTool('work', _work)], concurrency=concurrency))
    expected = reference_run(plan)
    assert {r.id: (r.status, r.error, r.arguments) for r in run.steps} == expected


@SETTINGS
@given(dags())
def test_random_dags_run_in_dependency_order_and_add_up(case: tuple[dict[str, Any], dict[str, str], int | None]
                                                        ) -> None:
    plan, behaviour, concurrency = case
    work = FakeTool('work', _work)
    run = anyio.run(partial(toolweave.run_plan, plan, [work], concurrency=concurrency))
    assert run.succeeded + run.failed + run.skipped + run.cancelled == run.total == len(plan['steps'])
    assert run.cancelled == 0
    for record in run.steps:
        deps = [run.step(d) for d in record.depends_on]
        if any(not d.ok for d in deps):
            assert record.status == 'skipped'
            assert record.started_at is None
            first = next(d for d in deps if not d.ok)
            assert record.error == f"Skipped because dependency '{first.id}' failed"
            continue
        assert record.started_at is not None
        for dep in deps:
            assert dep.ended_at is not None and dep.ended_at <= record.started_at
        expected = 'succeeded' if behaviour[record.id] == 'ok' else 'failed'
        assert record.status == expected, record
    assert work.call_count == run.total - run.skipped
    if concurrency is not None:
        assert work.max_in_flight <= concurrency


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
step_fields = st.fixed_dictionaries({}, optional={
    'id': st.one_of(st.sampled_from(['a', 'b', 'c', '', ' ', 'a b', 'x' * 70]), json_values),
    'tool': st.one_of(st.sampled_from(['work', 'nope', 'Work', '', 'execute_tool_plan']), json_values),
    'arguments': st.one_of(
        st.sampled_from(['{}', '{bad', '[]', '{"x": "$ref:a"}', '{"x": "$ref:zz"}', '{"x": "$ref:a."}',
                         '{"x": "{{$ref:b"}', '{"x": {"$ref": 5}}']),
        json_values),
    'args': json_values,
})


@st.composite
def malformed(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(['text', 'json', 'steps', 'cycle']))
    if kind == 'text':
        return draw(st.text(max_size=40))
    if kind == 'json':
        return draw(json_values)
    if kind == 'cycle':
        n = draw(st.integers(1, 5))
        steps = [{'id': f'c{i}', 'tool': 'work', 'arguments': {'x': f'$ref:c{(i + 1) % n}'}} for i in range(n)]
        return {'steps': steps + [{'id': 'free', 'tool': 'work', 'arguments': {}}]}
    steps = draw(st.lists(step_fields, max_size=5))
    data: dict[str, Any] = {'steps': steps}
    if draw(st.booleans()):
        data['output_steps'] = draw(json_values)
    # Make sure the plan is invalid: one step calls a tool that does not exist.
    data['steps'] = [*steps, {'id': 'zz_unknown', 'tool': 'no_such_tool', 'arguments': '{}'}]
    return json.dumps(data) if draw(st.booleans()) else data


@SETTINGS
@given(malformed())
def test_malformed_plans_never_raise_and_never_run_a_tool(payload: Any) -> None:
    work = FakeTool('work')
    planner = PlanTool([work])
    result = anyio.run(planner.call, payload)
    assert result.error is not None
    assert result.text.startswith('Error: ')
    assert work.call_count == 0
    problems = toolweave.validate_plan(payload, [work]) if isinstance(payload, (str, dict)) else ['x']
    assert problems


@SETTINGS
@given(json_values | st.text(max_size=30))
def test_any_json_or_text_to_the_meta_tool_is_handled(payload: Any) -> None:
    work = FakeTool('work')
    result = anyio.run(PlanTool([work]).call, payload if isinstance(payload, (str, dict)) else json.dumps(payload))
    assert isinstance(result, toolweave.ToolResult)
    if result.error is not None:
        assert work.call_count == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(st.integers(-1000, 1000), max_size=30), concurrency=st.none() | st.integers(1, 8),
       threshold=st.integers(-1000, 1000))
def test_for_each_and_select_agree_with_python(values: list[int], concurrency: int | None, threshold: int) -> None:
    async def slow_double(args: dict[str, Any]) -> int:
        await anyio.sleep(((args['n'] * 7919) % 5) / 2000)  # calls end out of order
        return int(args['n']) * 2

    double = FakeTool('double', slow_double, parameters={'type': 'object', 'properties': {'n': {'type': 'integer'}},
                                                         'required': ['n']})
    plan = {'steps': [
        {'id': 'big', 'from': values, 'select': f'[?@ > `{threshold}`]'},
        {'id': 'doubled', 'tool': 'double', 'for_each': '$ref:big', 'arguments': {'n': '$item'}},
        {'id': 'total', 'from': '$ref:doubled', 'select': 'sum(@)',
         'when': {'from': '$ref:doubled', 'select': 'length(@) > `0`'}}]}
    run = anyio.run(partial(toolweave.run_plan, plan, [double], concurrency=concurrency))
    kept = [v for v in values if v > threshold]
    assert run.step('doubled').value == [v * 2 for v in kept]
    assert [item.index for item in run.step('doubled').items or []] == list(range(len(kept)))
    if kept:
        assert run.step('total').value == sum(v * 2 for v in kept)
    else:
        assert run.step('total').condition_skipped and run.ok


@st.composite
def streamed_plans(draw: st.DrawFn) -> dict[str, Any]:
    """Plans as a model streams them: steps that refer back (or ahead, or to themselves), typed literal arguments
    right or wrong, select steps."""
    n = draw(st.integers(1, 12))
    steps: list[dict[str, Any]] = []
    for i in range(n):
        refs = draw(st.lists(st.integers(0, n - 1), max_size=2))
        kind = draw(st.sampled_from(['typed', 'typed', 'loose', 'select']))
        if kind == 'select':
            steps.append({'id': f's{i}', 'from': [f'$ref:s{r}' for r in refs], 'select': 'length(@)'})
        elif kind == 'typed':
            count: Any = f'$ref:s{refs[0]}' if refs else draw(st.sampled_from([1, 2, 'three']))
            steps.append({'id': f's{i}', 'tool': 'typed', 'arguments': {'count': count}})
        else:
            steps.append({'id': f's{i}', 'tool': 'loose', 'arguments': {'refs': [f'$ref:s{r}' for r in refs]}})
    return {'steps': steps}


@SETTINGS
@given(streamed_plans())
def test_a_plan_validated_as_it_streams_in_validates_as_the_whole_plan_does(plan: dict[str, Any]) -> None:
    # The validator a stream uses (`admit` each step that arrives; `hold` one that does not validate with the
    # steps before it), then the whole plan validated taking what it checked: the same problems, and the same
    # prepared plan (graph, chains, checks) as validating the plan whole.
    from toolweave.plan._parse import parse_lenient
    from toolweave.plan._validate import PLAN_TOOL_NAMES, Validator, as_toolset, prepare

    @toolweave.tool(read_only=True)
    def typed(count: int) -> int:
        """Counts."""
        return count

    tools = as_toolset([typed, FakeTool('loose')])
    parsed = parse_lenient(plan)
    validator = Validator(tools, dialect='id', max_items=1000, refused=PLAN_TOOL_NAMES, earlier={})
    for step in parsed.plan.steps:
        if not validator.admit(step):
            validator.hold(step.id)
        # The levels of the plan so far, read as it grows (counted again once it has grown): each step one above
        # the highest it refers to (the steps so far refer only to steps before them).
        growing = validator.so_far()
        levels = growing.waves
        assert len(levels) == len(growing.deps)
        assert all(level == max((levels[d] + 1 for d in deps), default=0)
                   for level, deps in zip(levels, growing.deps, strict=True))
    streamed, streamed_problems = prepare(parsed, tools, max_steps=100, max_items=1000, arrived=validator)
    whole, whole_problems = prepare(parsed, tools, max_steps=100, max_items=1000)
    assert streamed_problems.messages() == whole_problems.messages()
    assert (streamed is None) == (whole is None)
    if streamed is not None and whole is not None:
        assert streamed.deps == whole.deps and streamed.rewrite == whole.rewrite
        assert streamed.waves == whole.waves and streamed.chains == whole.chains
        assert [list(d) for d in streamed.dependents] == [list(d) for d in whole.dependents]
        assert streamed.checked == whole.checked and streamed.kinds.keys() == whole.kinds.keys()
