"""Approval inside plans (and pipelines inside plans): the reviewer sees the RESOLVED arguments, a rejection fails
the step and skips its dependents, and a missing handler stops the run."""

from __future__ import annotations

from time import perf_counter

import pytest

from toolweave import (
    ExitEarly,
    ReviewDecision,
    ReviewRequest,
    TextTool,
    ToolConfigurationError,
    ToolPipeline,
    Toolset,
    record_approvals,
    requires_approval,
    tool,
    use_review_handler,
)
from toolweave.plan import PlanTool, run_plan
from toolweave.testing import RecordingReviewHandler as Recorder

pytestmark = pytest.mark.anyio




@tool
def find_file(pattern: str) -> dict[str, str]:
    """Find a file by pattern."""
    return {'path': f'/data/{pattern}.csv'}


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f'deleted {path}'


@tool
def notify(message: str) -> str:
    """Send a notification."""
    return f'notified: {message}'


TOOLS = [find_file, delete_file, notify]
PLAN = {'steps': [
    {'id': 'find', 'tool': 'find_file', 'arguments': {'pattern': 'old'}},
    {'id': 'delete', 'tool': 'delete_file', 'arguments': {'path': '$ref:find.path'}},
    {'id': 'tell', 'tool': 'notify', 'arguments': {'message': 'Done: {{$ref:delete}}'}},
]}


async def test_reviewer_sees_resolved_arguments_and_approval_runs_the_step() -> None:
    handler = Recorder()
    run = await run_plan(PLAN, TOOLS, review_handler=handler)
    assert run.ok
    assert [r.arguments for r in handler.requests] == [{'path': '/data/old.csv'}]
    assert handler.requests[0].description == 'delete_file: {"path":"/data/old.csv"}'
    assert run.step('tell').output == 'notified: Done: deleted /data/old.csv'


async def test_rejection_fails_the_step_and_skips_dependents() -> None:
    run = await run_plan(PLAN, TOOLS, review_handler=Recorder(ReviewDecision.reject('keep it')))
    assert [s.status for s in run.steps] == ['succeeded', 'failed', 'skipped']
    assert 'Rejected by reviewer: {"path":"/data/old.csv"} (keep it)' in (run.step('delete').error or '')
    assert "'delete'" in (run.step('tell').error or '')
    assert 'Plan completed with errors.' in run.summary


async def test_edit_changes_what_the_step_and_its_dependents_see() -> None:
    run = await run_plan(PLAN, TOOLS, review_handler=Recorder(ReviewDecision.edit({'path': '/tmp/copy.csv'})))
    assert run.step('delete').output == 'deleted /tmp/copy.csv'
    assert run.step('tell').output == 'notified: Done: deleted /tmp/copy.csv'


async def test_missing_handler_propagates_out_of_the_plan() -> None:
    with pytest.raises(ToolConfigurationError, match="Tool 'delete_file' requires approval but no ReviewHandler"):
        await run_plan(PLAN, TOOLS)


async def test_propagates_through_the_plan_meta_tool() -> None:
    meta = PlanTool(Toolset(TOOLS))
    with pytest.raises(ToolConfigurationError, match='requires approval but no ReviewHandler'):
        await meta.call({'steps': PLAN['steps']})


async def test_reviewer_exit_early_stops_the_plan() -> None:
    class Stopper:
        async def review(self, request: ReviewRequest) -> ReviewDecision:
            raise ExitEarly('reviewer stopped the run')

    with pytest.raises(ExitEarly, match='reviewer stopped the run'):
        await run_plan(PLAN, TOOLS, review_handler=Stopper())


async def test_handler_installed_by_the_caller_is_kept() -> None:
    handler = Recorder()
    with use_review_handler(handler):
        run = await run_plan(PLAN, TOOLS)
    assert run.ok and len(handler.requests) == 1


async def test_parallel_gated_steps_are_reviewed_concurrently_and_recorded() -> None:
    steps = [{'id': f'd{i}', 'tool': 'delete_file', 'arguments': {'path': f'/tmp/{i}'}} for i in range(4)]
    handler = Recorder(delay=0.3)
    start = perf_counter()
    with record_approvals() as log:
        run = await run_plan({'steps': steps}, TOOLS, review_handler=handler)
    assert run.ok and perf_counter() - start < 1.0  # four 0.3 s reviews overlap (not the console)
    assert sorted(r.request.arguments['path'] for r in log if isinstance(r.request.arguments, dict)) == [
        '/tmp/0', '/tmp/1', '/tmp/2', '/tmp/3']
    assert {r.outcome for r in log} == {'approved'}


async def test_unanswered_review_in_a_plan_times_out() -> None:
    slow_delete = requires_approval(TextTool.from_function('slow_delete', 'deletes', lambda t: f'deleted {t}'),
                                    timeout=0.1)
    plan = {'steps': [{'id': 'x', 'tool': 'slow_delete', 'arguments': {'input': 'a'}},
                      {'id': 'y', 'tool': 'notify', 'arguments': {'message': '$ref:x'}}]}
    run = await run_plan(plan, [slow_delete, notify], review_handler=Recorder(delay=30))
    assert [s.status for s in run.steps] == ['failed', 'skipped']
    assert 'no decision within 0.1 s' in (run.step('x').error or '')


async def test_pipeline_step_in_a_plan_asks_with_its_resolved_input() -> None:
    # inside a plan: the plan installs the handler; the pipeline's gated step asks it; a rejection under
    # FAIL_FAST stops the pipeline, which fails the plan step.
    archive = ToolPipeline.of('archive', 'Find and delete a file', find_file, delete_file)
    plan = {'steps': [{'id': 'a', 'tool': 'archive', 'arguments': {'pattern': 'logs'}},
                      {'id': 'b', 'tool': 'notify', 'arguments': {'message': '$ref:a'}}]}
    approving = Recorder()
    run = await run_plan(plan, [archive, notify], review_handler=approving)
    assert run.step('b').output == 'notified: deleted /data/logs.csv'
    assert approving.requests[0].arguments == {'path': '/data/logs.csv'}

    rejected = await run_plan(plan, [archive, notify], review_handler=Recorder(ReviewDecision.reject()))
    assert [s.status for s in rejected.steps] == ['failed', 'skipped']
    assert 'Rejected by reviewer: {"path":"/data/logs.csv"}' in (rejected.step('a').error or '')
