"""The event loop keeps running while plans are read and validated, at the largest sizes the limits accept, and
plans over the limits are refused before the work they would cost.

Two kinds of evidence: where the work runs (a large plan is validated in a worker thread, a small one on the
loop, seen by a tool that records which thread reads its definition), and how long the loop was held
(`LoopWatch`: a 10 ms ticker beside the work, reporting the longest gap between its ticks) for cases that take a
second or more on the loop, against the same work done on the loop in the same test. The garbage collector is
paused while they are timed (a collection holds every thread, whichever made the garbage). The benchmark
`python -m benchmarks.bench_blocking` reports the gaps themselves."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest

import toolweave
from toolweave import PlanTool, PlanValidationError
from toolweave.testing import FakeTool, LoopWatch
from toolweave.tools import ToolDefinition, Toolset

pytestmark = pytest.mark.anyio

class Recording(FakeTool):
    """A tool that records the threads that read its definition (validation reads it)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.threads: set[int] = set()

    @property
    def definition(self) -> ToolDefinition:
        self.threads.add(threading.get_ident())
        return super().definition


def steps(count: int, payload: Any = 'x') -> list[dict[str, Any]]:
    """`count` steps, each referring to the one before, the last calling a tool that does not exist (the plan
    fails validation after all the work of validating it, and nothing runs)."""
    made = [{'id': f's{i}', 'tool': 'echo', 'arguments': {'text': f'$ref:s{i - 1}' if i else 'go', 'data': payload}}
            for i in range(count)]
    made[-1]['tool'] = 'missing'
    return made


def nested_arrays(size: int) -> list[Any]:
    """About `size` bytes of JSON made of small nested arrays: the slowest kind of JSON to read."""
    return [[[[1]]]] * (size // 10)


def numbers(size: int) -> list[int]:
    """About `size` bytes of JSON: one array of small numbers."""
    return [7] * (size // 3)


@dataclass
class Big:
    name: str
    plan: Any


BIG = [
    Big('10,000 steps as a mapping', {'steps': steps(10_000)}),
    Big('10,000 steps as text', json.dumps({'steps': steps(10_000)})),
    Big('2 MB of numbers in one step', json.dumps({'steps': [{'id': 'a', 'tool': 'missing', 'arguments': {
        'x': numbers(1_900_000)}}]})),
    Big('99,000 objects and arrays', json.dumps({'steps': [{'id': 'a', 'tool': 'missing', 'arguments': {
        'x': [[]] * 98_990}}]})),
]


async def refused(plan: Any, tools: Any) -> None:
    with pytest.raises(PlanValidationError, match="Unknown tool 'missing'"):
        await toolweave.run_plan(plan, tools)


@pytest.mark.parametrize('case', BIG, ids=[case.name for case in BIG])
async def test_a_large_plan_is_validated_in_a_worker_thread(case: Big) -> None:
    echo = Recording('echo')
    tools = Toolset([echo])
    echo.threads.clear()
    await refused(case.plan, tools)
    assert echo.threads and threading.get_ident() not in echo.threads


async def test_a_small_plan_is_validated_on_the_loop() -> None:
    echo = Recording('echo')
    tools = Toolset([echo])
    echo.threads.clear()
    await refused({'steps': steps(50)}, tools)  # a few milliseconds: a thread would cost more
    assert echo.threads == {threading.get_ident()}


async def test_the_plan_tool_reads_and_validates_a_large_plan_in_a_worker_thread() -> None:
    echo = Recording('echo')
    tools = Toolset([echo])
    echo.threads.clear()
    result = await PlanTool(tools).call(json.dumps({'steps': steps(1000, 'y' * 1900)}))  # 1,000 steps, 2 MB
    assert result.error is not None and "Unknown tool 'missing'" in result.error
    assert echo.threads and threading.get_ident() not in echo.threads


@pytest.mark.usefixtures('no_gc')
async def test_the_loop_runs_on_while_the_largest_plan_text_is_read() -> None:
    text = BIG[2].plan
    started = time.perf_counter()
    assert toolweave.validate_plan(text, [FakeTool('echo')])  # the same work, holding the loop (no loop here)
    inline = time.perf_counter() - started
    async with LoopWatch() as watch:
        await refused(text, [FakeTool('echo')])
    assert watch.ticks > 0 and watch.longest_gap < inline / 2, (watch.longest_gap, inline)


@pytest.mark.usefixtures('no_gc')
@pytest.mark.parametrize('values', [[[7]] * 300_000, [{'k': 'v'}] * 300_000], ids=['arrays', 'objects'])
async def test_a_few_steps_holding_many_values_are_validated_off_the_loop(values: list[Any]) -> None:
    # A plan as a mapping of few steps is validated on the loop until it turns out to hold too many values: then
    # all of it again in a worker thread, with the problems validating it whole gives.
    plan = {'steps': [{'id': 'a', 'tool': 'echo', 'arguments': {'x': values}},
                      {'id': 'b', 'tool': 'missing', 'arguments': {'y': '$ref:a'}}]}
    started = time.perf_counter()
    expected = toolweave.validate_plan(plan, [FakeTool('echo')])  # the same work, holding the loop (no loop here)
    inline = time.perf_counter() - started
    async with LoopWatch() as watch:
        with pytest.raises(PlanValidationError) as raised:
            await toolweave.run_plan(plan, [FakeTool('echo')])
    assert raised.value.problems == expected and "Unknown tool 'missing'" in expected[0]
    assert watch.ticks > 0 and watch.longest_gap < inline / 2, (watch.longest_gap, inline)


@pytest.mark.usefixtures('no_gc')
async def test_the_loop_runs_on_while_a_select_spends_its_whole_budget() -> None:
    ten = '[' + ', '.join(['@'] * 10) + ']'
    plan = {'steps': [{'id': 'v', 'tool': 'echo', 'arguments': {}},
                      {'id': 'x', 'from': '$ref:v', 'select': ten + f' | [].{ten}' * 6 + ' | length(@)'}]}
    async with LoopWatch() as watch:
        run = await toolweave.run_plan(plan, [FakeTool('echo')])
    assert 'needs more than 2,000,000 steps of work' in (run.step('x').error or '')
    assert watch.ticks > 0 and watch.longest_gap < run.duration / 2, (watch.longest_gap, run.duration)


@dataclass
class Over:
    name: str
    plan: Any
    problem: str


HUGE = '{"steps": [' + ' ' * 100_000_000 + ']}'
ACCENTS = json.dumps({'steps': [{'id': 'a', 'tool': 'echo', 'arguments': {'x': '\u00e9' * 1_000_000}}]},
                     ensure_ascii=False)  # 1 M characters, 2 M bytes
OVER = [
    Over('100 MB of text', HUGE, 'The plan text is larger than the limit of 2,000,000 bytes (`max_bytes`): at least '
                                 f'{len(HUGE):,} bytes.'),
    Over('100,000 steps', {'steps': [{'id': f's{i}', 'tool': 'echo', 'arguments': {}} for i in range(100_000)]},
         'The plan has 100,000 steps, more than the limit of 10,000. Split it into smaller plans or raise '
         '`max_steps`.'),
    Over('2 MB of multi-byte text', ACCENTS, f'at least {len(ACCENTS.encode()):,} bytes'),
    Over('2 MB of nested arrays', json.dumps({'steps': [{'id': 'a', 'tool': 'echo', 'arguments': {
        'x': nested_arrays(1_900_000)}}]}), 'The plan text holds more than 100,000 JSON objects and arrays. Split it '
         'into smaller plans'),
]


@pytest.mark.parametrize('case', OVER, ids=[case.name for case in OVER])
@pytest.mark.usefixtures('no_gc')
async def test_a_plan_over_a_limit_is_refused_before_it_is_read(case: Over) -> None:
    echo = FakeTool('echo')
    async with LoopWatch() as watch:
        with pytest.raises(PlanValidationError) as caught:
            await toolweave.run_plan(case.plan, [echo])
    assert len(caught.value.problems) == 1 and case.problem in caught.value.problems[0], caught.value.problems
    assert watch.longest_gap < 1.0 and echo.call_count == 0  # refused at once, whatever the size
    result = await PlanTool([echo], max_steps=10_000).call(case.plan)
    assert result.error is not None and case.problem in result.error


async def test_max_bytes_is_settable_where_max_steps_is() -> None:
    plan = json.dumps({'steps': [{'id': 'a', 'tool': 'echo', 'arguments': {'text': 'x' * 100}}]})
    problem = f'The plan text is larger than the limit of 100 bytes (`max_bytes`): at least {len(plan)} bytes.'
    assert toolweave.validate_plan(plan, [FakeTool('echo')], max_bytes=100)[0].startswith(problem)
    with pytest.raises(PlanValidationError, match='limit of 100 bytes'):
        await toolweave.run_plan(plan, [FakeTool('echo')], max_bytes=100)
    result = await PlanTool([FakeTool('echo')], max_bytes=100).call(plan)
    assert result.error is not None and problem in result.error
    index = await PlanTool([FakeTool('echo')], dialect='index', max_bytes=100).call(
        json.dumps({'plan': json.dumps({'goal': 'g', 'steps': [{'tool': 'echo', 'args': {'text': 'x' * 100},
                                                                 'description': 'd'}]})}))
    assert json.loads(index.text)['error'].startswith('Plan validation failed: The plan text is larger than the '
                                                      'limit of 100 bytes')
    assert (await toolweave.run_plan(plan, [FakeTool('echo')], max_bytes=len(plan))).ok
    with pytest.raises(toolweave.UserError, match='max_bytes must be'):
        await toolweave.run_plan(plan, [FakeTool('echo')], max_bytes=0)
