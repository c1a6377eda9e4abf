"""Whole-plan review: the reviewer sees every step (arguments as written, dependencies, the gated ones marked)
once, before anything runs, and decides once; approved steps then run in parallel without asking again. The
per-step mode stays the default."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import anyio
import pytest
from rich.console import Console

from toolweave import (
    ApprovalRule,
    AutoApproveHandler,
    CallbackReviewHandler,
    ConsoleReviewHandler,
    ReviewDecision,
    ReviewRequest,
    RuleBasedReviewHandler,
    tool,
    use_review_handler,
)
from toolweave.approval import PlanReviewDecision, PlanReviewRequest
from toolweave.exceptions import ApprovalPending, PlanValidationError, ToolConfigurationError
from toolweave.plan import run_plan
from toolweave.plan.durable import resume_plan
from toolweave.testing import RecordingReviewHandler

pytestmark = pytest.mark.anyio


class Mail:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def tools(self) -> list[Any]:
        sent = self.sent

        @tool
        def find(name: str) -> dict[str, str]:
            """Look a person up."""
            return {'email': f'{name.lower()}@example.com'}

        @tool(requires_approval=True)
        async def send(to: str, body: str = '') -> str:
            """Send an email."""
            await anyio.sleep(0.01)
            sent.append(to)
            return f'sent to {to}'

        @tool(requires_approval=True)
        def delete(path: str) -> str:
            """Delete a file."""
            sent.append(f'deleted {path}')
            return 'deleted'

        return [find, send, delete]


PLAN = {'steps': [
    {'id': 'ada', 'tool': 'find', 'arguments': {'name': 'Ada'}},
    {'id': 'mail_ada', 'tool': 'send', 'arguments': {'to': '$ref:ada.email', 'body': 'hi'}},
    {'id': 'mail_bob', 'tool': 'send', 'arguments': {'to': 'bob@example.com'}},
    {'id': 'clean', 'tool': 'delete', 'arguments': {'path': '/tmp/x'}},
    {'id': 'after', 'tool': 'find', 'arguments': {'name': '$ref:clean'}},
]}


class PlanRecorder:
    """Answers every plan review with `decision` and keeps the requests."""

    def __init__(self, decision: PlanReviewDecision) -> None:
        self.decision = decision
        self.plans: list[PlanReviewRequest] = []
        self.calls: list[ReviewRequest] = []

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        self.calls.append(request)
        return ReviewDecision.approve()

    async def review_plan(self, request: PlanReviewRequest) -> PlanReviewDecision:
        self.plans.append(request)
        return self.decision


async def test_the_reviewer_sees_the_whole_plan_once_and_approved_steps_do_not_ask_again() -> None:
    mail = Mail()
    reviewer = PlanRecorder(PlanReviewDecision.approve_all())
    run = await run_plan(PLAN, mail.tools(), review_handler=reviewer, review_mode='whole_plan')
    assert run.ok and sorted(mail.sent) == ['ada@example.com', 'bob@example.com', 'deleted /tmp/x']
    (plan,) = reviewer.plans
    assert reviewer.calls == []
    assert [(s.id, s.gated, s.depends_on) for s in plan.steps] == [
        ('ada', False, ()), ('mail_ada', True, ('ada',)), ('mail_bob', True, ()), ('clean', True, ()),
        ('after', False, ('clean',))]
    assert plan.step('mail_ada').arguments == {'to': '$ref:ada.email', 'body': 'hi'}  # symbolic, as written
    assert plan.describe().splitlines() == [
        'Plan of 5 steps; 3 need approval (*):',
        '  ada (find) {"name":"Ada"}',
        '* mail_ada (send) {"to":"$ref:ada.email","body":"hi"} after ada',
        '* mail_bob (send) {"to":"bob@example.com"}',
        '* clean (delete) {"path":"/tmp/x"}',
        '  after (find) {"name":"$ref:clean"} after clean',
    ]
    records = [(a.tool_name, a.outcome, a.handler) for a in run.approvals]
    assert records[:3] == [('send', 'approved', 'PlanRecorder'), ('send', 'approved', 'PlanRecorder'),
                           ('delete', 'approved', 'PlanRecorder')]
    assert sorted(records[3:]) == [('delete', 'approved', 'decided ahead'), ('send', 'approved', 'decided ahead'),
                                   ('send', 'approved', 'decided ahead')]


async def test_approve_some_deny_some_edit_some() -> None:
    mail = Mail()
    decision = PlanReviewDecision.decide(approve=['mail_ada'], edit={'mail_bob': {'to': '$ref:ada.email'}},
                                         deny={'clean': 'not today'})
    run = await run_plan(PLAN, mail.tools(), review_handler=PlanRecorder(decision), review_mode='whole_plan')
    assert sorted(mail.sent) == ['ada@example.com', 'ada@example.com']
    assert run.step('mail_bob').arguments == {'to': 'ada@example.com'}  # the edit's reference was resolved
    assert run.step('clean').error == 'Rejected by reviewer: {"path":"/tmp/x"} (not today)'
    assert run.step('after').status == 'skipped'


async def test_unnamed_gated_steps_are_rejected_unless_others_approve() -> None:
    mail = Mail()
    run = await run_plan(PLAN, mail.tools(), review_handler=PlanRecorder(PlanReviewDecision.decide(approve=['clean'])),
                         review_mode='whole_plan')
    assert mail.sent == ['deleted /tmp/x']
    assert run.step('mail_bob').error == ('Rejected by reviewer: {"to":"bob@example.com"} (not approved in the plan '
                                          'review)')


async def test_rejecting_the_plan_runs_nothing() -> None:
    mail = Mail()
    run = await run_plan(PLAN, mail.tools(), review_handler=PlanRecorder(PlanReviewDecision.reject('wrong person')),
                         review_mode='whole_plan')
    assert mail.sent == [] and run.cancelled == 5
    assert run.step('ada').error == 'Cancelled: the reviewer rejected the plan (wrong person)'


async def test_an_edit_that_breaks_the_plan_is_a_validation_error() -> None:
    decision = PlanReviewDecision.decide(edit={'mail_bob': {'to': '$ref:nobody'}}, others='approve')
    with pytest.raises(PlanValidationError, match="after the reviewer's edits: .*nobody"):
        await run_plan(PLAN, Mail().tools(), review_handler=PlanRecorder(decision), review_mode='whole_plan')


async def test_parked_steps_wait_while_the_rest_runs() -> None:
    mail = Mail()
    decision = PlanReviewDecision.decide(approve=['mail_ada', 'mail_bob'], park={'clean': 'ask the owner'})
    run = await run_plan(PLAN, mail.tools(), review_handler=PlanRecorder(decision), review_mode='whole_plan')
    assert sorted(mail.sent) == ['ada@example.com', 'bob@example.com']
    assert (run.step('clean').status, run.step('after').status) == ('parked', 'pending')
    assert run.step('clean').error == 'Waiting for approval: ask the owner'


async def test_a_handler_without_review_plan_is_asked_about_each_gated_step_before_anything_runs() -> None:
    mail = Mail()
    reviewer = RecordingReviewHandler()
    run = await run_plan(PLAN, mail.tools(), review_handler=reviewer, review_mode='whole_plan')
    assert run.ok
    assert [(r.tool_name, r.arguments, r.timing) for r in reviewer.requests] == [
        ('send', {'to': '$ref:ada.email', 'body': 'hi'}, 'before_execution'),
        ('send', {'to': 'bob@example.com'}, 'before_execution'),
        ('delete', {'path': '/tmp/x'}, 'before_execution')]


async def test_per_step_mode_stays_the_default_with_resolved_arguments() -> None:
    reviewer = RecordingReviewHandler()
    await run_plan(PLAN, Mail().tools(), review_handler=reviewer)
    assert {r.tool_name: r.arguments for r in reviewer.requests}['send'] in (
        {'to': 'ada@example.com', 'body': 'hi'}, {'to': 'bob@example.com'})
    assert {r.timing for r in reviewer.requests} == {'during_execution'}


async def test_callback_handlers_answer_plans_with_on_plan() -> None:
    seen: list[int] = []

    def on_plan(request: PlanReviewRequest) -> bool:
        seen.append(len(request.gated))
        return False

    mail = Mail()
    run = await run_plan(PLAN, mail.tools(), review_mode='whole_plan',
                         review_handler=CallbackReviewHandler(lambda request: True, on_plan=on_plan))
    assert seen == [3] and mail.sent == [] and run.cancelled == 5


async def test_rules_decide_what_they_match_and_ask_the_fallback_about_the_rest_as_one_plan() -> None:
    fallback = PlanRecorder(PlanReviewDecision.approve_all())
    rules = RuleBasedReviewHandler([ApprovalRule.deny('delete', reason='no deletes'),
                                    ApprovalRule.allow('send', when=lambda args: args['to'].endswith('example.com'))],
                                   default=fallback)
    mail = Mail()
    run = await run_plan(PLAN, mail.tools(), review_handler=rules, review_mode='whole_plan')
    assert run.step('clean').error == 'Rejected by reviewer: {"path":"/tmp/x"} (no deletes)'
    # '$ref:ada.email' (as written) does not end with example.com: that step goes to the fallback, alone.
    (asked,) = fallback.plans
    assert [s.id for s in asked.gated] == ['mail_ada']
    assert sorted(mail.sent) == ['ada@example.com', 'bob@example.com']


async def test_nested_reviewers_combine_the_stricter_wins() -> None:
    outer = PlanRecorder(PlanReviewDecision.decide(deny=['mail_bob'], others='approve'))
    inner = AutoApproveHandler()
    mail = Mail()
    with use_review_handler(outer):
        run = await run_plan(PLAN, mail.tools(), review_handler=inner, review_mode='whole_plan')
    assert run.step('mail_bob').status == 'failed' and 'bob@example.com' not in mail.sent
    assert [s.id for s in outer.plans[0].gated] == ['mail_ada', 'mail_bob', 'clean']


async def test_a_reviewer_that_cannot_answer_now_parks_every_gated_step() -> None:
    def later(request: PlanReviewRequest) -> PlanReviewDecision:
        raise ApprovalPending('the owner is away')

    mail = Mail()
    run = await run_plan(PLAN, mail.tools(), review_mode='whole_plan',
                         review_handler=CallbackReviewHandler(lambda r: True, on_plan=later))
    assert [r.status for r in run.steps] == ['succeeded', 'parked', 'parked', 'parked', 'pending']
    assert mail.sent == []


async def test_no_reviewer_is_a_configuration_error_before_anything_runs() -> None:
    mail = Mail()
    with pytest.raises(ToolConfigurationError, match=r'requires? approval \(delete, send\) but no ReviewHandler'):
        await run_plan(PLAN, mail.tools(), review_mode='whole_plan')
    assert mail.sent == []


async def test_the_console_shows_the_plan_and_takes_one_answer() -> None:
    output = io.StringIO()
    console = ConsoleReviewHandler(stdin=io.StringIO('d clean keep it\ne nope {}\ne mail_bob {"to": "eve@x.org"}\na\n'),
                                   console=Console(file=output, width=120))
    mail = Mail()
    run = await run_plan(PLAN, mail.tools(), review_handler=console, review_mode='whole_plan')
    shown = output.getvalue()
    assert 'arguments (as written)' in shown and '$ref:ada.email' in shown
    assert "No gated step 'nope'" in shown
    assert sorted(mail.sent) == ['ada@example.com', 'eve@x.org']
    assert run.step('clean').error == 'Rejected by reviewer: {"path":"/tmp/x"} (keep it)'


async def test_the_console_rejects_the_plan_when_its_input_closes() -> None:
    console = ConsoleReviewHandler(stdin=io.StringIO(''), console=Console(file=io.StringIO()))
    mail = Mail()
    run = await run_plan(PLAN, mail.tools(), review_handler=console, review_mode='whole_plan')
    assert mail.sent == [] and run.step('ada').error == (
        'Cancelled: the reviewer rejected the plan (no reviewer input (stdin closed))')


async def test_a_durable_run_is_reviewed_once(tmp_path: Path) -> None:
    reviewer = PlanRecorder(PlanReviewDecision.decide(approve=['mail_bob'], park=['mail_ada', 'clean']))
    mail = Mail()
    store = tmp_path / 'runs.db'
    run = await run_plan(PLAN, mail.tools(), review_handler=reviewer, review_mode='whole_plan', store=store,
                         run_id='once')
    assert mail.sent == ['bob@example.com'] and run.parked == 2
    again = await resume_plan('once', mail.tools(), store=store, review_handler=reviewer)
    assert len(reviewer.plans) == 1 and again.parked == 2 and mail.sent == ['bob@example.com']


EACH = {'steps': [
    {'id': 'people', 'from': ['Ada', 'Bob'], 'select': '@'},
    {'id': 'mail', 'tool': 'send', 'for_each': '$ref:people', 'arguments': {'to': '{{$item}}@example.com'}},
    {'id': 'count', 'from': '$ref:mail', 'select': 'length(@)'},
]}


async def test_approving_a_for_each_step_approves_each_of_its_calls() -> None:
    mail = Mail()
    reviewer = PlanRecorder(PlanReviewDecision.approve_all())
    run = await run_plan(EACH, mail.tools(), review_handler=reviewer, review_mode='whole_plan')
    assert run.ok and sorted(mail.sent) == ['Ada@example.com', 'Bob@example.com']
    assert reviewer.calls == []  # each element's call was decided ahead, not asked again
    assert run.step('count').value == 2
    (plan,) = reviewer.plans
    assert [(s.id, s.gated) for s in plan.steps] == [('people', False), ('mail', True), ('count', False)]
    assert plan.describe().splitlines()[2] == ('* mail (send) {"to":"{{$item}}@example.com"} for each of '
                                               '$ref:people after people')


async def test_denying_a_for_each_step_runs_none_of_its_calls() -> None:
    mail = Mail()
    decision = PlanReviewDecision.decide(deny={'mail': 'no mass mail'})
    run = await run_plan(EACH, mail.tools(), review_handler=PlanRecorder(decision), review_mode='whole_plan')
    assert mail.sent == []
    assert run.step('mail').status == 'failed' and 'Rejected by reviewer' in (run.step('mail').error or '')
    assert 'no mass mail' in (run.step('mail').error or '')
    assert run.step('count').status == 'skipped'


async def test_a_parked_for_each_step_runs_none_of_its_calls_until_decided() -> None:
    mail = Mail()
    decision = PlanReviewDecision.decide(park={'mail': 'ask the owner'})
    run = await run_plan(EACH, mail.tools(), review_handler=PlanRecorder(decision), review_mode='whole_plan')
    assert mail.sent == []
    assert (run.step('people').status, run.step('mail').status, run.step('count').status) == (
        'succeeded', 'parked', 'pending')
    assert run.suspended


async def test_one_element_of_a_for_each_step_waiting_for_a_decision_parks_the_step_and_starts_no_other() -> None:
    started: list[str] = []

    @tool(requires_approval=True)
    async def send(to: str) -> str:
        """Send (gated)."""
        started.append(to)
        await anyio.sleep(0.2)  # still running when its sibling parks: it finishes (never left half done)
        return to

    def review(request: ReviewRequest) -> ReviewDecision:
        if 'bob' in str(request.arguments):
            raise ApprovalPending('Bob is decided tomorrow')
        return ReviewDecision.approve()

    plan = {'steps': [{'id': 'mail', 'tool': 'send', 'for_each': ['ada', 'bob', 'cy'], 'arguments': {'to': '$item'}},
                      {'id': 'after', 'from': '$ref:mail', 'select': 'length(@)'}]}
    with anyio.fail_after(3):
        run = await run_plan(plan, [send], review_handler=CallbackReviewHandler(review), concurrency=2)
    mail = run.step('mail')
    assert (mail.status, run.step('after').status, run.suspended) == ('parked', 'pending', True)
    assert mail.error == 'Waiting for approval: Bob is decided tomorrow'
    assert started == ['ada'] and [item.status for item in mail.items or []] == ['succeeded', 'parked', 'cancelled']
    assert (mail.items or [])[2].error == 'Not started: another element waits for a decision'