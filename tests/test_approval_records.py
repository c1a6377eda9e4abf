"""Every review decision of a run is in its record: `PlanRun.approvals` and `AgentRunResult.approvals`."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from toolweave import (
    Agent,
    CallbackReviewHandler,
    ReviewDecision,
    ReviewRequest,
    requires_approval,
    run_plan,
)
from toolweave.testing import FakeTool, ScriptedModel

pytestmark = pytest.mark.anyio


async def decide(request: ReviewRequest) -> ReviewDecision:
    return ReviewDecision.reject('too risky') if 'prod' in request.description else ReviewDecision.approve()


async def test_plan_run_records_each_decision_with_resolved_arguments() -> None:
    target = FakeTool('target', lambda args: 'prod-db')
    delete = requires_approval(FakeTool('delete', lambda args: f"deleted {args['name']}"))
    plan = {'steps': [
        {'id': 'which', 'tool': 'target', 'arguments': {}},
        {'id': 'dev', 'tool': 'delete', 'arguments': {'name': 'dev-db'}},
        {'id': 'prod', 'tool': 'delete', 'arguments': {'name': '$ref:which'}},
    ]}
    run = await run_plan(plan, [target, delete], review_handler=CallbackReviewHandler(decide))
    decided = []
    for r in run.approvals:
        assert isinstance(r.request.arguments, Mapping)  # these steps' arguments are JSON objects
        decided.append((r.request.arguments['name'], r.outcome))
    assert sorted(decided) == [('dev-db', 'approved'), ('prod-db', 'rejected')]
    assert [s.status for s in run.steps] == ['succeeded', 'succeeded', 'failed']
    assert sorted(a['outcome'] for a in run.to_dict()['approvals']) == ['approved', 'rejected']


async def test_plan_without_gated_tools_has_no_approvals() -> None:
    run = await run_plan({'steps': [{'id': 'a', 'tool': 'ok', 'arguments': {}}]}, [FakeTool('ok')])
    assert run.approvals == ()
    assert run.to_dict()['approvals'] == []


async def test_agent_run_records_decisions_of_direct_calls_and_plan_steps() -> None:
    delete = requires_approval(FakeTool('delete', lambda args: f"deleted {args['name']}"))
    plan = {'steps': [{'id': 'p', 'tool': 'delete', 'arguments': {'name': 'prod-db'}}]}
    model = ScriptedModel([
        {'tool': 'delete', 'arguments': {'name': 'dev-db'}},
        {'tool': 'execute_tool_plan', 'arguments': plan},
        'done',
    ])
    agent = Agent(model, tools=[delete], tool_planning=True, review_handler=CallbackReviewHandler(decide))
    result = await agent.run('clean up')
    assert [r.outcome for r in result.approvals] == ['approved', 'rejected']
    assert [r.outcome for r in result.plan_runs[0].approvals] == ['rejected']
