"""The eager executor: waves and parallelism, fail-forward, limits; timeouts, cancellation, concurrency,
approval, propagation of configuration errors and control-flow signals. Runs on asyncio and trio."""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

import anyio
import pytest

import toolweave
from toolweave import ExitEarly, PlanEvent, ReviewDecision, ReviewRequest, ToolConfigurationError, ToolMetadata
from toolweave.testing import FakeTool, concat_tool, echo_tool

pytestmark = pytest.mark.anyio


@pytest.fixture(params=['asyncio', 'trio'])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def step(step_id: str, tool: str = 'echo', arguments: Any = None) -> dict[str, Any]:
    return {'id': step_id, 'tool': tool, 'arguments': arguments if arguments is not None else {}}


# waves and parallelism


async def test_independent_steps_run_concurrently() -> None:
    slow = FakeTool('slow', 'done', delay=0.3)
    started = time.perf_counter()
    run = await toolweave.run_plan({'steps': [step('a', 'slow'), step('b', 'slow'), step('c', 'slow')]}, [slow])
    assert time.perf_counter() - started < 0.75
    assert [r.output for r in run.steps] == ['done', 'done', 'done']
    assert run.waves == (('a', 'b', 'c'),)
    assert slow.max_in_flight == 3


async def test_diamond() -> None:
    plan = {'steps': [step('a', 'alpha'), step('b', 'beta'), step('c', 'concat', {'x': '$ref:a', 'y': '$ref:b'})],
            'output_steps': ['c']}
    run = await toolweave.run_plan(plan, [FakeTool('alpha', 'alpha'), FakeTool('beta', 'beta'),
                                          concat_tool(separator=' + ')])
    assert run.waves == (('a', 'b'), ('c',))
    assert run.summary == '{"c": "alpha + beta"}'


async def test_linear_chain() -> None:
    plan = {'steps': [step('s1', 'A'), step('s2', 'concat', {'a': '$ref:s1', 'b': 'B'}),
                      step('s3', 'concat', {'a': '$ref:s2', 'b': 'C'})]}
    run = await toolweave.run_plan(plan, [FakeTool('A', 'A'), concat_tool(separator=' + ')])
    assert run.waves == (('s1',), ('s2',), ('s3',))
    assert run.step('s3').output == 'A + B + C'
    assert [r.wave for r in run.steps] == [0, 1, 2]


async def test_waves_and_plan_order_records() -> None:
    plan = {'steps': [step('d', 'echo', {'x': '$ref:a', 'y': '$ref:c'}), step('s2', 'slow'),
                      step('a', 'echo'), step('b', 'echo', {'x': '$ref:a'}), step('c', 'echo', {'x': '$ref:b'})]}
    run = await toolweave.run_plan(plan, [echo_tool(), FakeTool('slow', 'z', delay=0.05)])
    assert run.waves == (('s2', 'a'), ('b',), ('c',), ('d',))
    assert [r.id for r in run.steps] == ['d', 's2', 'a', 'b', 'c']
    assert run.step('d').wave == 3
    assert run.step('d').depends_on == ('a', 'c')


async def test_a_step_starts_as_soon_as_its_last_dependency_finishes() -> None:  # eager, not wave by wave
    plan = {'steps': [step('slow', 'slow'), step('fast', 'fast'), step('after_fast', 'echo', {'x': '$ref:fast'}),
                      step('after_slow', 'echo', {'x': '$ref:slow'})]}
    run = await toolweave.run_plan(plan, [FakeTool('slow', 's', delay=0.3), FakeTool('fast', 'f', delay=0.01),
                                          echo_tool()])
    after_fast, slow = run.step('after_fast'), run.step('slow')
    assert after_fast.started_at is not None and slow.ended_at is not None
    assert after_fast.started_at < slow.ended_at - 0.15
    assert run.step('after_slow').started_at >= slow.ended_at  # type: ignore[operator]


async def test_every_step_starts_after_all_its_dependencies_end() -> None:
    plan = {'steps': [step('a', 'w'), step('b', 'w'), step('c', 'w', {'x': '$ref:a'}),
                      step('d', 'w', {'x': '$ref:b', 'y': '$ref:c'})]}
    run = await toolweave.run_plan(plan, [FakeTool('w', 'v', delay=0.01)])
    for record in run.steps:
        for dep in record.depends_on:
            assert run.step(dep).ended_at <= record.started_at  # type: ignore[operator]
    assert run.duration >= 0
    assert all(r.duration is not None and r.duration >= 0 for r in run.steps)


# fail-forward


async def test_a_raising_tool_fails_its_step_and_siblings_still_run() -> None:
    plan = {'steps': [step('s1', 'boom'), step('s2', 'ok')]}
    run = await toolweave.run_plan(plan, [FakeTool('boom', raises=RuntimeError('Intentional failure')),
                                          FakeTool('ok', 'ok')])
    assert run.step('s1').status == 'failed'
    assert run.step('s1').error == 'Tool execution failed: Intentional failure'
    assert run.step('s2').output == 'ok'
    assert (run.succeeded, run.failed, run.skipped, run.total, run.ok) == (1, 1, 0, 2, False)


async def test_dependents_are_skipped_and_never_called() -> None:
    process = echo_tool('process')
    plan = {'steps': [step('s1', 'boom'), step('s2', 'process', {'data': '$ref:s1'})]}
    run = await toolweave.run_plan(plan, [FakeTool('boom', raises=RuntimeError('x')), process])
    assert run.step('s2').status == 'skipped'
    assert run.step('s2').error == "Skipped because dependency 's1' failed"
    assert process.call_count == 0
    assert [r.id for r in run.errors] == ['s1', 's2']


async def test_skips_are_transitive_and_name_the_immediate_dependency() -> None:
    plan = {'steps': [step('s1', 'boom'), step('s2', 'echo', {'x': '$ref:s1'}), step('s3', 'echo', {'x': '$ref:s2'}),
                      step('s4', 'echo', {'x': '$ref:s3', 'y': 'literal'})]}
    run = await toolweave.run_plan(plan, [FakeTool('boom', raises=ValueError('no')), echo_tool()])
    assert run.step('s3').error == "Skipped because dependency 's2' failed"
    assert run.step('s4').error == "Skipped because dependency 's3' failed"
    assert run.skipped == 3


async def test_the_first_failed_dependency_in_order_of_appearance_is_named() -> None:
    plan = {'steps': [step('s1', 'fast_fail'), step('s2', 'slow_fail'),
                      step('s3', 'echo', {'a': '$ref:s2', 'b': '$ref:s1'})]}
    run = await toolweave.run_plan(plan, [FakeTool('fast_fail', fail='one'), FakeTool('slow_fail', fail='two',
                                                                                      delay=0.05), echo_tool()])
    assert run.step('s3').error == "Skipped because dependency 's2' failed"


async def test_resolution_failure_fails_the_step_and_skips_dependents() -> None:
    plan = {'steps': [step('s1', 'text'), step('s2', 'echo', {'x': '$ref:s1.field'}),
                      step('s3', 'echo', {'x': '$ref:s2'})]}
    run = await toolweave.run_plan(plan, [FakeTool('text', 'plain'), echo_tool()])
    assert run.step('s2').error == "Cannot extract field 'field' from step 's1' output: not valid JSON"
    assert run.step('s3').status == 'skipped'


async def test_a_returned_failure_fails_the_step() -> None:
    plan = {'steps': [step('s1', 'bad'), step('s2', 'echo', {'x': '$ref:s1'}), step('s3', 'echo')]}
    run = await toolweave.run_plan(plan, [FakeTool('bad', fail='null params'), echo_tool()])
    assert run.step('s1').status == 'failed'
    assert run.step('s1').error == 'null params'
    assert run.step('s2').error == "Skipped because dependency 's1' failed"
    assert run.step('s3').ok
    assert 'Errors: s1: null params; s2: Skipped because dependency' in run.summary


# timeouts, limits; cancellation


async def test_step_timeout_fails_a_hanging_step_like_a_raise() -> None:
    hang = FakeTool('hang', hang=True)
    plan = {'steps': [step('h', 'hang'), step('after', 'echo', {'x': '$ref:h'}), step('ok', 'echo')]}
    started = time.perf_counter()
    run = await toolweave.run_plan(plan, [hang, echo_tool()], step_timeout=0.1)
    assert time.perf_counter() - started < 2
    assert run.step('h').error == "Tool execution failed: step 'h' timed out after 0.1 s (step_timeout)"
    assert run.step('after').status == 'skipped'
    assert run.step('ok').ok
    assert hang.calls[0].ended is not None


async def test_whole_plan_timeout_records_unfinished_steps_as_cancelled() -> None:
    hang = FakeTool('hang', hang=True)
    plan = {'steps': [step('h', 'hang'), step('after', 'echo', {'x': '$ref:h'}), step('ok', 'echo')]}
    started = time.perf_counter()
    run = await toolweave.run_plan(plan, [hang, echo_tool()], timeout=0.1)
    assert time.perf_counter() - started < 2
    assert run.step('ok').ok
    assert [run.step('h').status, run.step('after').status] == ['cancelled', 'cancelled']
    assert run.step('h').error == 'Cancelled: the plan timed out after 0.1 s (timeout)'
    assert run.step('h').ended_at is not None and run.step('after').started_at is None
    assert (run.succeeded, run.cancelled, run.total) == (1, 2, 3)
    assert hang.calls[0].ended is not None
    assert 'h: Cancelled: the plan timed out' in run.summary


async def test_outer_cancellation_stops_everything_promptly() -> None:
    hang = FakeTool('hang', hang=True)
    seen: list[PlanEvent] = []
    plan = {'steps': [step(f'h{i}', 'hang') for i in range(5)] + [step('z', 'echo', {'x': '$ref:h0'})]}
    started = time.perf_counter()
    with anyio.move_on_after(0.1):
        await toolweave.run_plan(plan, [hang, echo_tool()], on_event=seen.append)
    assert time.perf_counter() - started < 2
    assert hang.call_count == 5
    assert all(call.ended is not None for call in hang.calls)
    records = {event.step.id: event.step for event in seen}
    assert {r.status for r in records.values()} == {'cancelled'}
    assert records['h0'].error == 'Cancelled: the plan run was cancelled'


async def test_steps_that_never_suspend_run_back_to_back_in_one_task(anyio_backend: str) -> None:
    # Workers are sent for when a step suspends, not before: ten ready steps whose tool returns at once all run in the
    # run's own task, and no other task is started for them; steps that wait overlap (below). (On trio, which has no
    # callback to defer it with, workers are sent for at once.)
    if anyio_backend == 'trio':
        pytest.skip('on trio workers are sent for as soon as steps wait in the heap')
    tasks: list[int] = []
    alive: list[int] = []

    @toolweave.tool
    async def quick(x: int) -> int:
        tasks.append(anyio.get_current_task().id)
        alive.append(len(anyio.get_running_tasks()))
        return x

    before = len(anyio.get_running_tasks())
    run = await toolweave.run_plan({'steps': [step(f's{i}', 'quick', {'x': i}) for i in range(10)]}, [quick])
    assert run.ok
    assert tasks == [anyio.get_current_task().id] * 10
    assert alive == [before] * 10


async def test_nothing_of_a_timed_out_run_starts_or_runs_after_it_returns() -> None:
    # Many ready steps that wait: workers are being sent for as the timeout cuts the run short. Every call that
    # started has ended by the time `run_plan` returns, and none starts after.
    work = FakeTool('work', 'v', delay=0.005)
    plan = {'steps': [step(f's{i}', 'work') for i in range(200)]
            + [step(f't{i}', 'work', {'x': f'$ref:s{i}'}) for i in range(200)]}
    run = await toolweave.run_plan(plan, [work], timeout=0.004)
    returned = time.perf_counter()
    assert not run.ok and any(record.status == 'cancelled' for record in run.steps)
    assert all(call.ended is not None and call.started <= returned for call in work.calls)
    calls = len(work.calls)
    await anyio.sleep(0.05)
    assert len(work.calls) == calls


async def test_concurrency_limit_is_honoured() -> None:
    work = FakeTool('work', 'v', delay=0.02)
    plan = {'steps': [step(f's{i}', 'work') for i in range(12)]}
    run = await toolweave.run_plan(plan, [work], concurrency=3)
    assert run.ok
    assert work.max_in_flight == 3
    work.reset()
    await toolweave.run_plan(plan, [work])
    assert work.max_in_flight == 12


async def test_with_a_limit_the_longest_chain_starts_first() -> None:
    plan = {'steps': [step('x', 'work'), step('y', 'work'), step('c1', 'work'), step('c2', 'work', {'a': '$ref:c1'}),
                      step('c3', 'work', {'a': '$ref:c2'})]}
    run = await toolweave.run_plan(plan, [FakeTool('work', 'v', delay=0.01)], concurrency=1)
    order = sorted(run.steps, key=lambda r: r.started_at or 0)
    assert order[0].id == 'c1'


# approval, context, events, fatal errors


class RecordingReviewer:
    def __init__(self, decide: Any) -> None:
        self.decide = decide
        self.requests: list[ReviewRequest] = []

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        self.requests.append(request)
        return self.decide(request)  # type: ignore[no-any-return]


def gated(name: str) -> FakeTool:
    return FakeTool(name, lambda args: args, metadata=ToolMetadata(requires_approval=True))


async def test_reviewer_sees_resolved_arguments_and_a_rejection_fails_the_step() -> None:
    reviewer = RecordingReviewer(lambda r: ReviewDecision.reject('no') if r.arguments == {'x': 'bad'}
                                 else ReviewDecision.approve())
    plan = {'steps': [step('s1', 'src'), step('s2', 'delete', {'x': '$ref:s1'}), step('s3', 'echo', {'y': '$ref:s2'}),
                      step('s4', 'delete', {'x': 'good'})]}
    run = await toolweave.run_plan(plan, [FakeTool('src', 'bad'), gated('delete'), echo_tool()],
                                   review_handler=reviewer)
    assert [r.arguments for r in reviewer.requests if r.arguments == {'x': 'bad'}] == [{'x': 'bad'}]
    assert run.step('s2').error == 'Rejected by reviewer: {"x":"bad"} (no)'
    assert run.step('s3').status == 'skipped'
    assert run.step('s4').ok


async def test_reviewer_edit_changes_what_the_tool_runs_with() -> None:
    reviewer = RecordingReviewer(lambda r: ReviewDecision.edit({'x': 'edited'}))
    run = await toolweave.run_plan({'steps': [step('s1', 'delete', {'x': 'orig'})]}, [gated('delete')],
                                   review_handler=reviewer)
    assert run.step('s1').value == {'x': 'edited'}


async def test_configuration_error_propagates_after_cancelling_the_rest() -> None:
    hang = FakeTool('hang', hang=True)
    plan = {'steps': [step('h', 'hang'), step('g', 'delete', {'x': 1})]}
    with pytest.raises(ToolConfigurationError, match='requires approval but no ReviewHandler'):
        await toolweave.run_plan(plan, [hang, gated('delete')])
    assert hang.calls[0].ended is not None


async def test_configuration_error_in_a_step_that_suspended_first_stops_the_run() -> None:
    # The step that raises runs in a worker of its own (the run's first worker takes `s0`), after a suspension.
    @toolweave.tool
    async def slow(x: int) -> int:
        await anyio.sleep(0.01 * x)
        if x == 2:
            raise ToolConfigurationError('bad configuration')
        return x

    hang = FakeTool('hang', hang=True)
    plan = {'steps': [step('h', 'hang')] + [step(f's{i}', 'slow', {'x': i}) for i in range(4)]}
    with pytest.raises(ToolConfigurationError, match='bad configuration'):
        await toolweave.run_plan(plan, [hang, slow])
    assert hang.calls[0].ended is not None


async def test_an_extension_failing_in_a_worker_of_its_own_stops_the_run() -> None:
    # `a` runs in a worker the run started for it (the run's own task is busy with `h`, which hangs); when `a` ends,
    # the extension fails as `b` becomes ready. The run stops: `h` is cancelled and the error propagates.
    from toolweave.plan._kernel import Extension, Run
    from toolweave.plan._parse import parse_lenient
    from toolweave.plan._validate import as_toolset, prepare

    class Broken(Extension):
        def ready(self, record: Any) -> None:
            if record.id == 'b':
                raise RuntimeError('the extension broke')

    hang = FakeTool('hang', hang=True)
    work = FakeTool('work', 'v', delay=0.01)
    plan = {'steps': [step('h', 'hang'), step('after_h', 'work', {'x': '$ref:h'}), step('a', 'work'),
                      step('b', 'work', {'x': '$ref:a'})]}  # equal chains: plan order decides who takes `h`
    prepared, problems = prepare(parse_lenient(plan), as_toolset([hang, work]), max_steps=10)
    assert prepared is not None, problems.messages()
    with anyio.fail_after(5), pytest.raises(RuntimeError, match='the extension broke'):
        await Run(prepared, extensions=[Broken()]).run()
    assert hang.calls[0].ended is not None


async def test_control_flow_signal_propagates() -> None:
    hang = FakeTool('hang', hang=True)
    plan = {'steps': [step('h', 'hang'), step('stop', 'stop')]}
    with pytest.raises(ExitEarly, match='enough'):
        await toolweave.run_plan(plan, [hang, FakeTool('stop', raises=ExitEarly('enough'), delay=0.01)])
    assert hang.calls[0].ended is not None


async def test_context_reaches_every_tool() -> None:
    work = FakeTool('work')
    await toolweave.run_plan({'steps': [step('a', 'work'), step('b', 'work')]}, [work], context={'tenant': 'acme'})
    assert [call.context['tenant'] for call in work.calls] == ['acme', 'acme']


async def test_events_in_order_and_a_raising_handler_is_ignored(caplog: pytest.LogCaptureFixture) -> None:
    events: list[tuple[str, str, str]] = []

    def handler(event: PlanEvent) -> None:
        events.append((event.kind, event.step.id, event.step.status))
        if event.step.id == 'b':
            raise RuntimeError('handler bug')

    plan = {'steps': [step('a'), step('b', 'echo', {'x': '$ref:a'}), step('c', 'boom'),
                      step('d', 'echo', {'x': '$ref:c'})]}
    with caplog.at_level(logging.ERROR, logger='toolweave.plan'):
        run = await toolweave.run_plan(plan, [echo_tool(), FakeTool('boom', fail='x')], on_event=handler)
    assert run.step('b').ok
    assert ('step_started', 'a', 'running') in events and ('step_finished', 'a', 'succeeded') in events
    assert events.index(('step_started', 'a', 'running')) < events.index(('step_finished', 'a', 'succeeded'))
    assert ('step_finished', 'd', 'skipped') in events
    assert 'on_event handler raised' in caplog.text


async def test_tool_added_to_the_toolset_later_is_used() -> None:  # via run_plan
    toolset = toolweave.Toolset([echo_tool()])
    toolset.add(FakeTool('late', 'here'))
    run = await toolweave.run_plan({'steps': [step('a', 'late')]}, toolset)
    assert run.step('a').output == 'here'


def test_run_plan_sync() -> None:
    run = toolweave.run_plan_sync({'steps': [step('a', 'echo', {'v': 1})]}, [echo_tool()])
    assert run.summary == '{"a": {"v": 1}}'


class Interrupt(BaseException):
    """Not an `Exception`: `Tool.call` lets it through, like KeyboardInterrupt."""


async def test_a_base_exception_from_a_tool_propagates_unwrapped() -> None:
    hang = FakeTool('hang', hang=True)
    plan = {'steps': [step('h', 'hang'), step('i', 'interrupt')]}
    with pytest.raises(Interrupt):
        await toolweave.run_plan(plan, [hang, FakeTool('interrupt', raises=Interrupt(), delay=0.01)])
    assert hang.calls[0].ended is not None


async def test_a_tool_returning_nothing_succeeds_with_a_fixed_output() -> None:
    plan = {'steps': [step('n', 'nothing'), step('e', 'empty'), step('u', 'echo', {'x': '$ref:n'})]}
    run = await toolweave.run_plan(plan, [FakeTool('nothing', lambda args: None), FakeTool('empty', ''),
                                          echo_tool()])
    assert run.step('n').output == 'Function executed successfully'
    assert run.step('u').arguments == {'x': None}  # references read the value, which is None
    assert run.step('e').output == ''  # an empty text is an output, not "nothing"


# records


async def test_a_run_holds_no_object_per_step_and_its_records_read_the_same_data_however_they_are_reached() -> None:
    seen: list[int] = []

    def count_records() -> str:
        seen.append(sum(1 for each in gc.get_objects() if type(each) is toolweave.StepRecord))
        return 'counted'

    steps = [step(f's{i}', 'work', {'after': f'$ref:s{i - 1}'} if i else {}) for i in range(300)]
    steps.append(step('count', 'count_records'))
    gc.collect()
    before = sum(1 for each in gc.get_objects() if type(each) is toolweave.StepRecord)  # other tests' runs, kept
    run = await toolweave.run_plan({'steps': steps}, [FakeTool('work', 'ok'), toolweave.tool(count_records)],
                                   max_steps=301)
    assert len(seen) == 1 and seen[0] <= before  # while the plan ran: its records are columns, not an object a step
    assert run.succeeded == 301 and run.ok
    assert run.steps[0] is run.steps[0] and run.step('s299') is run.steps[299]  # made once, when first read
    views = list(run.records)
    assert [record.output for record in views] == [record.output for record in run.steps]
    assert run.steps[299].output == 'ok' and run.steps[299].depends_on == ('s298',)
    run.steps[5].error = 'noted'  # a record is a view: what is set through one is read through any other
    assert views[5].error == 'noted' and run.records[5].error == 'noted'
    with pytest.raises(IndexError, match='out of range'):
        run.records[301]
    assert run.records[-1].id == 'count' and [r.id for r in run.records[1:3]] == ['s1', 's2']
