"""Properties over hostile input: generated expressions, tool schemas and plan shapes and sizes, sent to
`validate_plan`, `run_plan` and the `execute_tool_plan` tool.

For every example: nothing escapes (a problem is a validation problem or a failed step; `run_plan` raises only
`PlanValidationError`, and only when `validate_plan` lists problems), nothing hangs (each run is bounded by its
`timeout`, and the whole example by a deadline), and memory stays bounded (the peak traced by `tracemalloc`).
Examples are derandomized, so a run in CI sees the same ones."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolweave
from toolweave import PlanTool, PlanValidationError, validate_plan
from toolweave.plan import PlanRun
from toolweave.testing import FakeTool
from toolweave.tools import ToolMetadata

SETTINGS = settings(max_examples=40, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
RUN_TIMEOUT = 0.5
"""Seconds a generated plan may run: an expression spending its whole work budget is cut here."""
DEADLINE = 20.0
"""Seconds one example may take in all (its three entry points, with tracemalloc slowing everything down)."""
PEAK = 160_000_000
"""Bytes an example may allocate at its peak: an expression's budget allows about 100 MB (16 bytes of text per
unit of work, and what it builds), a plan text its 2 MB and 100,000 objects and arrays."""


@contextmanager
def bounded_memory() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < PEAK, f'peak {peak / 1e6:.0f} MB'


def json_data(value: Any) -> None:
    """`value` is JSON data: it serializes without `NaN`/`Infinity` and without falling back to `repr`."""
    json.dumps(value, allow_nan=False)


async def all_doors(plan: Any, tools: list[Any], **limits: Any) -> None:
    """`validate_plan`, `run_plan` and the plan tool on one plan: they agree, and nothing escapes."""
    problems = validate_plan(plan, tools, **limits)
    assert all(isinstance(problem, str) for problem in problems)
    with anyio.fail_after(DEADLINE):
        try:
            run: PlanRun | None = await toolweave.run_plan(plan, tools, timeout=RUN_TIMEOUT, **limits)
        except PlanValidationError as exc:
            assert problems and exc.problems == problems
            run = None
        if run is not None:
            assert not problems
            if run.ok:
                json.loads(run.summary)
            for step in run.steps:
                assert step.status in ('succeeded', 'failed', 'skipped', 'cancelled'), step
                if step.status == 'succeeded':
                    json_data(step.value if step.kind == 'select' else step.output)
        result = await PlanTool(tools, timeout=RUN_TIMEOUT, **limits).call(plan)
        assert isinstance(result.text, str)


def run_example(work: Callable[[], Awaitable[None]]) -> None:
    with bounded_memory():
        anyio.run(work)


# --- expressions ------------------------------------------------------------------------------------------------

FUNCTIONS = ['abs', 'avg', 'ceil', 'contains', 'ends_with', 'floor', 'from_json', 'join', 'keys', 'length', 'map',
             'max', 'max_by', 'merge', 'min', 'min_by', 'not_null', 'reverse', 'sort', 'sort_by', 'starts_with', 'sum',
             'to_array', 'to_number', 'to_string', 'type', 'values', 'foo']
atoms = st.sampled_from(['@', 'a', 'b', 'items', 'items[0]', '`1`', '`"x"`', "'s'", '`[1, 2]`', '`{"a": 1}`',
                         '`1e999`', '`-1e400`', '`null`', '`true`', '*', "'{\"a\": [1]}'", '`"1e999"`'])


def _compound(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    pairs = st.tuples(children, children)
    return st.one_of(
        pairs.map(' | '.join),
        pairs.map(lambda p: f'{p[0]}.{p[1]}'),
        pairs.map(lambda p: f'{p[0]}[?{p[1]}]'),
        pairs.map(lambda p: f'{p[0]} || {p[1]}'),
        pairs.map(lambda p: f'{p[0]} == {p[1]}'),
        pairs.map(lambda p: f'{p[0]} < {p[1]}'),
        st.lists(children, min_size=1, max_size=5).map(lambda xs: '[' + ', '.join(xs) + ']'),
        st.lists(children, min_size=1, max_size=4).map(lambda xs: '{' + ', '.join(f'k{i}: {x}' for i, x in
                                                                                 enumerate(xs)) + '}'),
        st.tuples(st.sampled_from(FUNCTIONS), st.lists(children, max_size=3)).map(
            lambda f: f'{f[0]}(' + ', '.join(f[1]) + ')'),
        children.map(lambda x: f'&{x}'),
        children.map(lambda x: f'!{x}'),
        children.map(lambda x: f'{x}[*]'),
        children.map(lambda x: f'{x}[]'),
        children.map(lambda x: f'{x}[::-1]'),
        children.map(lambda x: f'({x})'),
    )


EXPONENTIAL = ['[@, @]', "join('', [@, @])", '[@, @, @, @]', 'to_string([@, @])', '[].[@, @]', 'sort([@, @][])',
               '[@, @][]', 'merge(@, @)', '{a: @, b: @}', 'map(&[@, @], [@, @])', 'sort_by([@, @][], &@)']
expressions = st.one_of(
    st.recursive(atoms, _compound, max_leaves=25),
    st.text(alphabet='[]{}()@|&!.*,:`\'"?=<>abc01 ', max_size=80),
    st.tuples(st.sampled_from('[(!&{'), st.integers(1, 5000)).map(lambda t: t[0] * t[1] + '@'),
    st.tuples(st.sampled_from(EXPONENTIAL), st.integers(1, 60)).map(lambda t: ' | '.join([t[0]] * t[1])),
    st.integers(2001, 20_000).map(lambda n: 'a' * n),
)
values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False),
              st.text(max_size=8), st.just('{"a": [1, 2]}'), st.just('[' * 3000)),
    lambda children: st.one_of(st.lists(children, max_size=5),
                               st.dictionaries(st.sampled_from(['a', 'b', 'items', 'text']), children, max_size=4)),
    max_leaves=30)


@SETTINGS
@given(expression=expressions, value=values)
def test_a_generated_expression_is_a_validation_problem_or_a_step_outcome(expression: str, value: Any) -> None:
    tools = [FakeTool('source', value), FakeTool('echo', lambda args: args)]
    plan = {'steps': [
        {'id': 'src', 'tool': 'source', 'arguments': {}},
        {'id': 'x', 'from': '$ref:src', 'select': expression},
        {'id': 'y', 'tool': 'echo', 'arguments': {'v': 1}, 'when': {'from': '$ref:src', 'select': expression}},
    ]}
    run_example(partial(all_doors, plan, tools))


# --- schemas ----------------------------------------------------------------------------------------------------

pointers = st.sampled_from(['#', '#/$defs/a', '#/$defs/b', '#/$defs/missing', '#/properties/x', '#/properties',
                            'https://example.com/s.json', '#/$defs/a/properties/x', '#a', 5])
schema_leaves = st.one_of(
    st.sampled_from([{'type': 'string'}, {'type': 'integer'}, {'type': 'null'}, {}, True, False, {'type': 3},
                     {'enum': [1, 'a']}, {'const': None}, {'type': ['string', 'null']}, 7, 'object']),
    pointers.map(lambda ref: {'$ref': ref}),
)


def _schema_node(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.dictionaries(st.sampled_from(['x', 'y', 'z']), children, max_size=3).map(
            lambda props: {'type': 'object', 'properties': props}),
        children.map(lambda items: {'type': 'array', 'items': items}),
        st.lists(children, min_size=1, max_size=3).flatmap(
            lambda branches: st.sampled_from(['anyOf', 'oneOf', 'allOf']).map(lambda key: {key: branches})),
        children.map(lambda inner: {'not': inner}),
        st.tuples(children, pointers).map(lambda t: {'allOf': [t[0], {'$ref': t[1]}]}),
        st.tuples(st.sampled_from(['properties', 'required', 'items', 'additionalProperties', 'type']),
                  st.sampled_from([5, 'x', [1], None, True])).map(lambda t: {t[0]: t[1]}),
    )


schema_parts = st.recursive(schema_leaves, _schema_node, max_leaves=20)


def _deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {'type': 'string'}
    for _ in range(levels):
        schema = {'type': 'object', 'properties': {'x': schema}}
    return schema


schemas = st.one_of(
    st.tuples(schema_parts, schema_parts, schema_parts).map(lambda t: {
        'type': 'object', 'properties': {'x': t[0]}, '$defs': {'a': t[1], 'b': t[2]}}),
    schema_parts,
    st.integers(60, 3000).map(_deep),
    st.sampled_from([4_999, 5_000]).map(lambda n: {'type': 'object', 'properties': {f'p{i}': {} for i in range(n)}}),
)
arguments = st.one_of(st.just({'x': None}), st.just({'x': {'x': None, 'y': [None]}}), values.map(lambda v: {'x': v}))


@settings(SETTINGS, max_examples=25)
@given(schema=schemas, output=schemas, given_arguments=arguments)
def test_a_generated_tool_schema_never_hangs_or_escapes(schema: Any, output: Any, given_arguments: Any) -> None:
    tool = FakeTool('t', {'x': 1, 'y': [1]}, parameters=schema if isinstance(schema, dict) else {'type': 'object'},
                    metadata=ToolMetadata(extra={'output_schema': output}))
    plan = {'steps': [{'id': 'a', 'tool': 't', 'arguments': given_arguments},
                      {'id': 'b', 'tool': 't', 'arguments': {'x': '$ref:a.x', 'y': '$ref:a.y[0]'}}]}

    async def work() -> None:
        planner = PlanTool([tool], plan_schema='auto')  # bounded by the schema check: no await to time out
        assert planner.plan_schema in ('typed', 'compact')
        await all_doors(plan, [tool])

    run_example(work)


# --- plan shapes and sizes -----------------------------------------------------------------------------------------

garbage = st.one_of(st.none(), st.integers(), st.text(max_size=20), st.lists(st.integers(), max_size=3),
                    st.just('$ref:'), st.just('$ref:s0'), st.just('{{$ref:s1.x}}'), st.just('$item'),
                    st.just({'$ref': 's0'}), st.integers(1, 3000).map(lambda n: [[]] * 1 if n < 2 else
                                                                            json.loads('[' * min(n, 900) + ']' *
                                                                                       min(n, 900))))


@st.composite
def plans(draw: st.DrawFn) -> tuple[Any, dict[str, int]]:
    """A plan (a mapping or its text, maybe encoded badly), and the limits it runs under."""
    count = draw(st.integers(0, 40))
    steps: list[Any] = []
    for index in range(count):
        if draw(st.integers(0, 9)) == 0:
            steps.append(draw(garbage))
            continue
        step: dict[str, Any] = {'id': draw(st.sampled_from([f's{index}', f's{index}', 's0', '', 'bad id', 'x' * 70])),
                                'tool': draw(st.sampled_from(['echo', 'echo', 'missing', 'execute_tool_plan', '']))}
        step['arguments'] = draw(st.one_of(
            st.dictionaries(st.sampled_from(['a', 'b', 'c']), garbage, max_size=3),
            st.just('{"a": 1'), st.just('[' * 5000), garbage))
        if draw(st.booleans()):
            step['for_each'] = draw(st.one_of(st.just(f'$ref:s{max(index - 1, 0)}'), st.lists(st.integers(),
                                                                                              max_size=4), garbage))
        if draw(st.integers(0, 4)) == 0:
            step['when'] = {'from': f'$ref:s{max(index - 1, 0)}', 'select': draw(expressions)}
        steps.append(step)
    plan: Any = {'steps': steps, 'output_steps': draw(st.one_of(st.none(), st.lists(st.text(max_size=3))))}
    form = draw(st.sampled_from(['mapping', 'text', 'bytes', 'steps as text']))
    if form == 'text':
        plan = json.dumps(plan)
    elif form == 'bytes':
        plan = json.dumps(plan).encode() + draw(st.sampled_from([b'', b'\xff']))
    elif form == 'steps as text':
        plan = {'steps': json.dumps(steps)}
    limits = {'max_steps': draw(st.sampled_from([10, 10_000])), 'max_bytes': draw(st.sampled_from([500, 2_000_000])),
              'max_items': draw(st.sampled_from([2, 100]))}
    return plan, limits


@SETTINGS
@given(case=plans())
def test_a_generated_plan_shape_is_a_validation_problem_or_runs_bounded(case: tuple[Any, dict[str, int]]) -> None:
    plan, limits = case
    tools = [FakeTool('echo', lambda args: args)]
    run_example(partial(all_doors, plan, tools, **limits))


@pytest.mark.parametrize(('kind', 'size'), [('strings', 1_990_000), ('arrays', 1_990_000), ('numbers', 300_000),
                                            ('strings', 50_000_000)])
def test_a_plan_at_or_over_the_size_limit_is_read_within_bounded_memory(kind: str, size: int) -> None:
    # Numbers are the slowest JSON to read in pure Python (and tracemalloc slows it tenfold): a smaller text shows
    # the same bound, as memory grows with the text, up to `max_bytes`.
    payload = {'strings': ['x' * 50] * (size // 54), 'numbers': [7] * (size // 3), 'arrays': [[]] * (size // 4)}[kind]
    text = json.dumps({'steps': [{'id': 'a', 'tool': 'missing', 'arguments': {'x': payload}}]})

    async def work() -> None:
        with anyio.fail_after(DEADLINE), pytest.raises(PlanValidationError) as caught:
            await toolweave.run_plan(text, [FakeTool('echo')])
        assert len(caught.value.problems) == 1, caught.value.problems

    run_example(work)
