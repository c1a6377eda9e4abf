"""What a person can do to a stored run's steps, and what a resume does with it, on SQLite and PostgreSQL: retry a
failed step, resolve a parked one as done, decide while a resume parks the step again, and a `for_each` step whose
elements are journaled one by one (a finished element never runs again)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from toolweave import CallbackReviewHandler, ReviewDecision, ReviewRequest, tool
from toolweave.exceptions import ApprovalPending, DecisionError
from toolweave.plan import PlanEvent, run_plan
from toolweave.plan.durable import decide, open_store, resolve_step, resume_plan, retry_step
from toolweave.testing import RecordingReviewHandler

pytestmark = pytest.mark.anyio


async def later(request: ReviewRequest) -> ReviewDecision:
    raise ApprovalPending('a person decides later')


async def test_a_failed_step_retried_by_a_person_runs_again_with_what_it_skipped_and_nothing_else(
        store_url: str) -> None:
    calls: list[str] = []
    flaky = {'fail': True}

    @tool
    def fetch(name: str) -> str:
        """Fails the first time."""
        calls.append(name)
        if flaky['fail']:
            raise ConnectionError('the service was down')
        return f'data of {name}'

    @tool
    def use(text: str) -> str:
        """Uses what was fetched."""
        calls.append(f'use {text}')
        return text.upper()

    plan = {'steps': [{'id': 'a', 'tool': 'fetch', 'arguments': {'name': 'a'}},
                      {'id': 'b', 'tool': 'fetch', 'arguments': {'name': 'b'}},
                      {'id': 'c', 'tool': 'use', 'arguments': {'text': '$ref:b'}}]}
    flaky['fail'] = False
    first = await run_plan({'steps': plan['steps'][:1]}, [fetch, use], store=store_url, run_id='warm')
    assert first.ok
    flaky['fail'] = True
    run = await run_plan(plan, [fetch, use], store=store_url, run_id='r')
    assert [(r.id, r.status) for r in run.steps] == [('a', 'failed'), ('b', 'failed'), ('c', 'skipped')]
    with pytest.raises(DecisionError, match="Step 'c' of plan run 'r' is skipped: a failed step can be retried"):
        await retry_step('r', 'c', store=store_url)
    calls.clear()
    flaky['fail'] = False
    await retry_step('r', 'b', store=store_url, reason='the service is back')
    with pytest.raises(DecisionError, match='already has a decision'):
        await retry_step('r', 'b', store=store_url)
    again = await resume_plan('r', [fetch, use], store=store_url)
    assert calls == ['b', 'use data of b']  # a stays failed (nobody retried it); b and what it skipped ran
    assert [(r.id, r.status) for r in again.steps] == [('a', 'failed'), ('b', 'succeeded'), ('c', 'succeeded')]
    assert again.step('c').value == 'DATA OF B'


async def test_a_parked_step_resolved_as_done_counts_as_succeeded_and_its_dependents_run(store_url: str) -> None:
    sent: list[str] = []

    @tool(requires_approval=True)
    def send(to: str) -> dict[str, Any]:
        """Sends (gated)."""
        sent.append(to)
        return {'id': 1}

    @tool
    def confirm(message_id: int) -> str:
        """Confirms a message."""
        return f'confirmed {message_id}'

    plan = {'steps': [{'id': 's', 'tool': 'send', 'arguments': {'to': 'ann'}},
                      {'id': 'c', 'tool': 'confirm', 'arguments': {'message_id': '$ref:s.id'}}]}
    parked = await run_plan(plan, [send, confirm], store=store_url, run_id='r',
                            review_handler=CallbackReviewHandler(later))
    assert parked.step('s').status == 'parked'
    await resolve_step('r', 's', {'id': 42}, store=store_url, reason='sent by hand')
    run = await resume_plan('r', [send, confirm], store=store_url)
    assert sent == []  # the tool never ran: the person did it
    assert run.ok and run.step('s').value == {'id': 42} and run.step('c').value == 'confirmed 42'
    with pytest.raises(DecisionError, match="Step 's' of plan run 'r' is succeeded"):
        await resolve_step('r', 's', 'again', store=store_url)


async def test_a_decision_made_while_a_resume_parks_the_step_again_is_kept(store_url: str) -> None:
    sent: list[str] = []

    @tool(requires_approval=True)
    def send(to: str) -> str:
        """Sends (gated)."""
        sent.append(to)
        return 'sent'

    plan = {'steps': [{'id': 's', 'tool': 'send', 'arguments': {'to': 'ann'}}]}
    await run_plan(plan, [send], store=store_url, run_id='r', review_handler=CallbackReviewHandler(later))
    store = open_store(store_url)

    def decide_meanwhile(event: PlanEvent) -> None:
        if event.kind == 'step_parked':  # the resume parks it again; the person decides at that very moment
            store.decide('r', _decision('s', ReviewDecision.approve()))

    try:
        again = await resume_plan('r', [send], store=store_url, on_event=decide_meanwhile)
        assert again.step('s').status == 'parked' and sent == []
        final = await resume_plan('r', [send], store=store_url)
    finally:
        store.close()
    assert final.ok and sent == ['ann']  # the decision was not dropped


def _decision(step_id: str, decision: ReviewDecision) -> Any:
    import json
    import time

    from toolweave.plan.durable import Transition

    return Transition(step_id, 'decided', time.time(), decision.reason,
                      detail=json.dumps({'kind': decision.kind, 'revised': decision.revised, 'reason': None}))


async def test_the_elements_of_a_for_each_step_are_journaled_one_by_one(store_url: str) -> None:
    wiped: list[str] = []

    @tool(requires_approval=True)
    def wipe(path: str) -> str:
        """Deletes a file (gated)."""
        wiped.append(path)
        return f'wiped {path}'

    async def third_waits(request: ReviewRequest) -> ReviewDecision:
        if request.arguments == {'path': '/c'}:
            raise ApprovalPending('a person decides about /c later')
        return ReviewDecision.approve()

    plan = {'steps': [{'id': 'w', 'tool': 'wipe', 'for_each': ['/a', '/b', '/c', '/d', '/e'],
                       'arguments': {'path': '$item'}}]}
    parked = await run_plan(plan, [wipe], store=store_url, run_id='r', concurrency=1,
                            review_handler=CallbackReviewHandler(third_waits))
    assert parked.step('w').status == 'parked' and wiped == ['/a', '/b']
    await decide('r', 'w', ReviewDecision.approve(), store=store_url)  # the person saw /c, and approves /c only
    reviewer = RecordingReviewHandler(ReviewDecision.approve())
    run = await resume_plan('r', [wipe], store=store_url, review_handler=reviewer)
    assert run.ok and run.step('w').value == ['wiped /a', 'wiped /b', 'wiped /c', 'wiped /d', 'wiped /e']
    assert wiped == ['/a', '/b', '/c', '/d', '/e']  # /a and /b did not run again
    assert [r.arguments for r in reviewer.requests] == [{'path': '/d'}, {'path': '/e'}]  # /c ran under the decision
    items = run.step('w').items or []
    assert [item.arguments for item in items] == [{'path': p} for p in ['/a', '/b', '/c', '/d', '/e']]


def test_an_element_that_may_have_run_waits_for_its_own_decision(store_url: str, tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import textwrap
    import time

    ledger = tmp_path / 'ledger'
    script = tmp_path / 'child.py'
    script.write_text(textwrap.dedent(f'''
        import time
        from pathlib import Path
        import anyio
        from toolweave import tool
        from toolweave.plan import run_plan

        @tool
        def wipe(path: str) -> str:
            """Deletes a file; /c takes long."""
            if path == '/c':
                Path({str(ledger)!r}).write_text('started /c')
                time.sleep(60)
            return f'wiped {{path}}'

        plan = {{'steps': [{{'id': 'w', 'tool': 'wipe', 'for_each': ['/a', '/b', '/c'],
                             'arguments': {{'path': '$item'}}}}]}}
        anyio.run(lambda: run_plan(plan, [wipe], store={store_url!r}, run_id='k', concurrency=1))
    '''))
    child = subprocess.Popen([sys.executable, str(script)], cwd=Path(__file__).parent.parent)
    deadline = time.monotonic() + 30
    while not ledger.exists():
        assert child.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait()
    ran: list[str] = []

    @tool
    def wipe(path: str) -> str:
        """Deletes a file."""
        ran.append(path)
        return f'wiped {path}'

    parked = anyio.run(lambda: resume_plan('k', [wipe], store=store_url))
    assert ran == [] and parked.step('w').status == 'parked'  # /a and /b are kept; /c may have run: nobody decided
    assert 'Unknown after a crash: element 2 of the step started at' in (parked.step('w').error or '')
    anyio.run(lambda: decide('k', 'w', ReviewDecision.approve(), store=store_url))
    run = anyio.run(lambda: resume_plan('k', [wipe], store=store_url))
    assert run.ok and ran == ['/c'] and run.step('w').value == ['wiped /a', 'wiped /b', 'wiped /c']


async def test_a_run_waiting_for_decisions_goes_on_as_each_arrives(store_url: str) -> None:
    sent: list[str] = []

    @tool(requires_approval=True)
    def send(to: str) -> str:
        """Sends (gated)."""
        sent.append(to)
        return f'sent to {to}'

    @tool
    def tally(results: list[str]) -> int:
        """Counts what was sent."""
        return len(results)

    plan = {'steps': [{'id': 'a', 'tool': 'send', 'arguments': {'to': 'ann'}},
                      {'id': 'b', 'tool': 'send', 'arguments': {'to': 'bob'}},
                      {'id': 't', 'tool': 'tally', 'arguments': {'results': ['$ref:a', '$ref:b']}}]}

    async def person() -> None:  # decides in the store, as `toolweave runs approve` or the browser would
        for step, decision in (('a', ReviewDecision.approve()), ('b', ReviewDecision.edit({'to': 'carol'}))):
            while True:
                await anyio.sleep(0.05)
                stored = open_store(store_url)
                try:
                    parked = [t for t in stored.load('w').transitions if t.step_id == step and t.status == 'parked']
                finally:
                    stored.close()
                if parked:
                    break
            await decide('w', step, decision, store=store_url)

    async with anyio.create_task_group() as group:
        group.start_soon(person)
        run = await run_plan(plan, [send, tally], store=store_url, run_id='w', concurrency=1,
                             review_handler=CallbackReviewHandler(later), wait_for_decisions=30)
    assert run.ok and run.step('t').value == 2 and sorted(sent) == ['ann', 'carol']
    assert run.step('b').arguments == {'to': 'carol'}


async def test_a_parked_review_past_its_deadline_is_rejected_or_asked_again(store_url: str) -> None:
    sent: list[str] = []

    @tool(requires_approval=True)
    def send(to: str) -> str:
        """Sends (gated)."""
        sent.append(to)
        return 'sent'

    plan = {'steps': [{'id': 's', 'tool': 'send', 'arguments': {'to': 'ann'}}]}
    waited = await run_plan(plan, [send], store=store_url, run_id='late', review_handler=CallbackReviewHandler(later),
                            decision_deadline=0.3, wait_for_decisions=10)
    assert waited.step('s').status == 'failed' and sent == []  # nobody decided in time: rejected, not run
    assert 'no decision before its deadline' in (waited.step('s').error or '')
    store = open_store(store_url)
    try:
        decided = [t for t in store.load('late').transitions if t.status == 'decided']
    finally:
        store.close()
    assert len(decided) == 1 and 'deadline' in (decided[0].error or '')  # on record: the deadline decided

    await run_plan(plan, [send], store=store_url, run_id='esc', review_handler=CallbackReviewHandler(later),
                   decision_deadline=0.05, on_deadline='escalate')
    await anyio.sleep(0.1)
    fallback = RecordingReviewHandler(ReviewDecision.approve())
    escalated = await resume_plan('esc', [send], store=store_url, review_handler=fallback)
    assert escalated.ok and sent == ['ann'] and len(fallback.requests) == 1  # the fallback reviewer decided


async def test_a_tools_own_review_timeout_is_its_parked_steps_deadline(store_url: str) -> None:
    from toolweave import requires_approval

    sent: list[str] = []

    @requires_approval(timeout=0.05)
    @tool
    def urgent(to: str) -> str:
        """Sends now or never (its review waits 0.05 s)."""
        sent.append(to)
        return 'sent'

    @tool(requires_approval=True)
    def slow(to: str) -> str:
        """Sends whenever (the run's deadline)."""
        sent.append(to)
        return 'sent'

    plan = {'steps': [{'id': 'u', 'tool': 'urgent', 'arguments': {'to': 'ann'}},
                      {'id': 's', 'tool': 'slow', 'arguments': {'to': 'bob'}}]}
    parked = await run_plan(plan, [urgent, slow], store=store_url, run_id='own',
                            review_handler=CallbackReviewHandler(later))
    assert parked.parked == 2
    await anyio.sleep(0.1)
    later_run = await resume_plan('own', [urgent, slow], store=store_url, review_handler=CallbackReviewHandler(later))
    assert later_run.step('u').status == 'failed'
    assert 'no decision before its deadline' in (later_run.step('u').error or '')
    assert later_run.step('s').status == 'parked' and sent == []  # the run's 7 days have not passed
