"""What a plan run may never do, tried as an attacker would: run a reviewed call the reviewer did not see, lose
track of a step whose review a crash cut short, hide what a reviewer changed, copy a value once per reference, or
let a long `for_each` list hold the plan past its timeout."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolweave import CallbackReviewHandler, ReviewDecision, ReviewRequest, Tool, tool
from toolweave.exceptions import ApprovalPending
from toolweave.plan import run_plan
from toolweave.plan.durable import decide, open_store, resume_plan
from toolweave.testing import RecordingReviewHandler

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).parent.parent


# --- a crash while a reviewer decides --------------------------------------------------------------------------

CHILD = textwrap.dedent('''
    import sys
    from pathlib import Path

    import anyio

    from toolweave import CallbackReviewHandler, tool
    from toolweave.plan import run_plan

    store, ledger, asked = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])

    @tool
    def prepare(name: str) -> str:
        """Prepare a message."""
        return f'hello {name}'

    @tool(requires_approval=True)
    def send(text: str) -> str:
        """Send a message (gated)."""
        with ledger.open('a') as out:
            out.write(text + '\\n')
        return 'sent'

    async def review(request):
        asked.write_text(request.description)
        await anyio.sleep_forever()  # a person who has not answered yet

    plan = {'steps': [{'id': 'p', 'tool': 'prepare', 'arguments': {'name': 'ann'}},
                      {'id': 's', 'tool': 'send', 'arguments': {'text': '$ref:p'}}]}
    anyio.run(lambda: run_plan(plan, [prepare, send], store=store, run_id='r1',
                               review_handler=CallbackReviewHandler(review)))
''')


def _tools(ledger: Path) -> list[Tool]:
    @tool
    def prepare(name: str) -> str:
        """Prepare a message."""
        return f'hello {name}'

    @tool(requires_approval=True)
    def send(text: str) -> str:
        """Send a message (gated)."""
        with ledger.open('a') as out:
            out.write(text + '\n')
        return 'sent'

    return [prepare, send]


@pytest.mark.parametrize('kind', ['sqlite', 'postgres'])
def test_a_process_killed_while_its_reviewer_decides_asks_again_on_resume(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = f'sqlite:///{tmp_path}/runs.db' if kind == 'sqlite' else request.getfixturevalue('postgres_url')
    ledger, asked = tmp_path / 'ledger', tmp_path / 'asked'
    script = tmp_path / 'child.py'
    script.write_text(CHILD)
    child = subprocess.Popen([sys.executable, str(script), url, str(ledger), str(asked)], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not asked.exists():
            assert child.poll() is None, child.communicate()[1].decode()[-2000:]
            assert time.monotonic() < deadline, 'the reviewer was never asked'
            time.sleep(0.02)
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=30)
    assert asked.read_text() == 'send: {"text":"hello ann"}'
    assert not ledger.exists()  # the tool never ran

    store = open_store(url)
    try:
        last = {t.step_id: t.status for t in store.load('r1').transitions if t.status != 'ready'}
    finally:
        store.close()
    assert last == {'p': 'succeeded', 's': 'reviewing'}  # on record as being reviewed, not as started

    reviewer = RecordingReviewHandler(ReviewDecision.approve())
    run = anyio.run(lambda: resume_plan('r1', _tools(ledger), store=url, review_handler=reviewer))
    assert [r.description for r in reviewer.requests] == ['send: {"text":"hello ann"}']  # asked again
    assert run.step('s').status == 'succeeded' and run.ok
    assert ledger.read_text() == 'hello ann\n'  # exactly once


# --- the record shows what a reviewer changed --------------------------------------------------------------------

async def test_an_edit_by_a_per_step_reviewer_is_what_the_record_shows(tmp_path: Path) -> None:
    ledger = tmp_path / 'ledger'
    plan = {'steps': [{'id': 'p', 'tool': 'prepare', 'arguments': {'name': 'ann'}},
                      {'id': 's', 'tool': 'send', 'arguments': {'text': '$ref:p'}}]}
    reviewer = RecordingReviewHandler(ReviewDecision.edit({'text': 'hello bob'}))
    run = await run_plan(plan, _tools(ledger), review_handler=reviewer)
    assert ledger.read_text() == 'hello bob\n'
    assert run.step('s').arguments == {'text': 'hello bob'}
    assert run.step('s').to_dict()['arguments'] == {'text': 'hello bob'}
    assert [(a.decision.kind, a.request.tool_name) for a in run.approvals] == [('edit', 'send')]


@pytest.mark.parametrize('kind', ['sqlite', 'postgres'])
async def test_a_stored_edit_is_what_the_record_shows_now_and_after_another_resume(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = f'sqlite:///{tmp_path}/runs.db' if kind == 'sqlite' else request.getfixturevalue('postgres_url')
    ledger = tmp_path / 'ledger'
    plan = {'steps': [{'id': 'p', 'tool': 'prepare', 'arguments': {'name': 'ann'}},
                      {'id': 's', 'tool': 'send', 'arguments': {'text': '$ref:p'}}]}

    async def later(request: ReviewRequest) -> ReviewDecision:
        raise ApprovalPending('a person decides later')

    parked = await run_plan(plan, _tools(ledger), store=url, run_id='e1',
                            review_handler=CallbackReviewHandler(later))
    assert parked.step('s').status == 'parked'
    await decide('e1', 's', ReviewDecision.edit({'text': 'hello carol'}), store=url)
    run = await resume_plan('e1', _tools(ledger), store=url)
    assert ledger.read_text() == 'hello carol\n'
    assert run.step('s').arguments == {'text': 'hello carol'}
    again = await resume_plan('e1', _tools(ledger), store=url)  # nothing left to run: the records from the store
    assert again.step('s').arguments == {'text': 'hello carol'} and ledger.read_text() == 'hello carol\n'


# --- one copy per referenced value per step, and a bound on what references copy ------------------------------

async def test_a_value_referred_to_a_thousand_times_in_one_step_is_copied_once() -> None:
    big = {'rows': [{'id': i, 'text': 'x' * 60} for i in range(10_000)]}  # about 0.8 MB of JSON

    @tool
    def produce() -> dict[str, Any]:
        """A big value."""
        return big

    seen: list[int] = []

    @tool
    def consume(values: list[Any]) -> int:
        """Reads many references to the same value."""
        seen.append(len({id(value) for value in values}))
        values[0]['rows'].clear()  # a tool that changes its input changes nothing another step sees
        return len(values)

    plan = {'steps': [{'id': 'b', 'tool': 'produce', 'arguments': {}},
                      {'id': 'c', 'tool': 'consume', 'arguments': {'values': ['$ref:b'] * 1000}},
                      {'id': 'd', 'tool': 'consume', 'arguments': {'values': ['$ref:b']}}]}
    tracemalloc.start()
    try:
        run = await run_plan(plan, [produce, consume], concurrency=1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert run.ok and seen == [1, 1]
    assert run.step('b').value['rows'][0] == {'id': 0, 'text': 'x' * 60}  # the record is intact
    assert peak < 40 * 1024 * 1024, peak  # a copy per reference would be about 800 MB


async def test_references_that_would_copy_more_than_a_step_may_take_fail_that_step_before_copying() -> None:
    @tool
    def produce() -> list[str]:
        """About 70 MB of JSON."""
        return ['y' * 70_000] * 1000

    @tool
    def consume(values: Any) -> str:
        """Never called."""
        raise AssertionError('must not run')

    plan = {'steps': [{'id': 'b', 'tool': 'produce', 'arguments': {}},
                      {'id': 'c', 'tool': 'consume', 'arguments': {'values': '$ref:b'}},
                      {'id': 'ok', 'tool': 'consume', 'arguments': {'values': '$ref:b[0]'}}]}
    run = await run_plan(plan, [produce, consume])
    error = run.step('c').error or ''
    assert run.step('c').status == 'failed'
    assert 'refers to more data than one step may take' in error and 'select them with a select step' in error


async def test_running_steps_hold_at_most_the_memory_limit_of_copies_at_once() -> None:
    from toolweave.plan._kernel import Run
    from toolweave.plan._parse import parse_lenient
    from toolweave.plan._validate import as_toolset, prepare

    holding: list[int] = []
    running = 0

    @tool
    def produce() -> dict[str, Any]:
        """About 100 kB."""
        return {'data': 'z' * 100_000}

    @tool
    async def consume(value: dict[str, Any]) -> int:
        """Holds its input a while."""
        nonlocal running
        running += 1
        holding.append(running)
        await anyio.sleep(0.01)
        running -= 1
        return len(value['data'])

    plan = {'steps': [{'id': 'b', 'tool': 'produce', 'arguments': {}}]
            + [{'id': f'c{i}', 'tool': 'consume', 'arguments': {'value': '$ref:b'}} for i in range(20)]}
    prepared, problems = prepare(parse_lenient(plan), as_toolset([produce, consume]), max_steps=100)
    assert prepared is not None, problems.messages()
    run = await Run(prepared, memory_limit=350_000).run()  # room for three copies at once
    assert run.ok
    assert max(holding) == 3


# --- for_each under the plan's clock ------------------------------------------------------------------------------

async def test_a_long_for_each_list_cannot_hold_the_plan_past_its_timeout() -> None:
    @tool
    async def slow(n: int) -> int:
        """Waits a second."""
        await anyio.sleep(1)
        return n

    plan = {'steps': [{'id': 'all', 'tool': 'slow', 'for_each': list(range(30_000)), 'arguments': {'n': '$item'}}]}
    started = time.monotonic()
    run = await run_plan(plan, [slow], timeout=0.5, max_items=30_000)
    elapsed = time.monotonic() - started
    assert run.step('all').status == 'cancelled'
    assert 'timed out after 0.5 s' in (run.step('all').error or '')
    assert elapsed < 5, elapsed  # the list used to hold the plan for 8 s past a 0.5 s timeout


async def test_for_each_over_null_says_so_once() -> None:
    @tool
    def nothing() -> None:
        """Returns null."""

    @tool
    def each(n: int) -> int:
        """Never called."""
        return n

    plan = {'steps': [{'id': 'n', 'tool': 'nothing', 'arguments': {}},
                      {'id': 'e', 'tool': 'each', 'for_each': '$ref:n', 'arguments': {'n': '$item'}}]}
    run = await run_plan(plan, [nothing, each])
    error = run.step('e').error or ''
    assert 'must be a list, got null.' in error and 'null null' not in error
