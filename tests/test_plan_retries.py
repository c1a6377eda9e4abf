"""Retries of plan steps through the public API: a tool's own policy and a run's, which failures earn another try,
the delays, the step timeout over all attempts, a reviewer's approval covering the attempts of the call it saw,
`for_each` elements, and every attempt journaled in a durable run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from toolweave import Retries, ReviewDecision, Tool, tool, with_retries
from toolweave.exceptions import UserError
from toolweave.plan import run_plan
from toolweave.plan.durable import open_store
from toolweave.testing import RecordingReviewHandler

pytestmark = pytest.mark.anyio

QUICK: dict[str, Any] = {'initial_delay': 0.001, 'max_delay': 0.001, 'jitter': 0.0}


class Flaky:
    """A tool that fails with `error` the first `failures` calls (per argument), then succeeds."""

    def __init__(self, failures: int, error: type[Exception] = ConnectionError) -> None:
        self.failures, self.error = failures, error
        self.calls: list[Any] = []

    def tool(self, **options: Any) -> Tool:
        @tool(**options)
        def fetch(key: str) -> str:
            """Fetches a key."""
            self.calls.append(key)
            if self.calls.count(key) <= self.failures:
                raise self.error(f'{key}: the service did not answer')
            return f'value of {key}'

        return fetch


async def test_a_tools_own_policy_tries_a_failed_call_again() -> None:
    flaky = Flaky(2)
    fetch = with_retries(flaky.tool(), policy=Retries(attempts=3, **QUICK))
    run = await run_plan({'steps': [{'id': 'a', 'tool': 'fetch', 'arguments': {'key': 'k'}}]}, [fetch])
    assert run.ok and run.step('a').value == 'value of k' and flaky.calls == ['k', 'k', 'k']
    assert run.step('a').attempts == 3


async def test_attempts_run_out_and_the_step_fails_with_the_last_error() -> None:
    flaky = Flaky(5)
    run = await run_plan({'steps': [{'id': 'a', 'tool': 'fetch', 'arguments': {'key': 'k'}},
                                    {'id': 'b', 'tool': 'fetch', 'arguments': {'key': '$ref:a'}}]},
                         [flaky.tool()], retries=Retries(attempts=2, **QUICK))
    assert run.step('a').status == 'failed' and run.step('a').attempts == 2 and flaky.calls == ['k', 'k']
    assert 'k: the service did not answer' in (run.step('a').error or '')
    assert run.step('b').status == 'skipped'


async def test_only_what_the_policy_names_is_tried_again() -> None:
    flaky = Flaky(1, error=ValueError)
    run = await run_plan({'steps': [{'id': 'a', 'tool': 'fetch', 'arguments': {'key': 'k'}}]}, [flaky.tool()],
                         retries=Retries(attempts=3, on=(ConnectionError, 'TimeoutError'), **QUICK))
    assert run.step('a').status == 'failed' and flaky.calls == ['k']  # a ValueError is not transient
    by_name = Flaky(1, error=TimeoutError)
    run = await run_plan({'steps': [{'id': 'a', 'tool': 'fetch', 'arguments': {'key': 'k'}}]}, [by_name.tool()],
                         retries=Retries(attempts=3, on=('builtins.TimeoutError',), **QUICK))
    assert run.ok and by_name.calls == ['k', 'k']

    @tool
    def refuses(key: str) -> Any:
        """Returns a failure (no exception)."""
        from toolweave import ToolResult

        return ToolResult.failure('no such key')

    returned = await run_plan({'steps': [{'id': 'a', 'tool': 'refuses', 'arguments': {'key': 'k'}}]}, [refuses],
                              retries=Retries(attempts=3, **QUICK))
    assert returned.step('a').attempts == 1  # a failure the tool returned is an answer, not a hiccup


async def test_the_tools_policy_wins_over_the_runs() -> None:
    flaky = Flaky(2)
    once = with_retries(flaky.tool(), policy=Retries(attempts=1))
    run = await run_plan({'steps': [{'id': 'a', 'tool': 'fetch', 'arguments': {'key': 'k'}}]}, [once],
                         retries=Retries(attempts=5, **QUICK))
    assert run.step('a').status == 'failed' and flaky.calls == ['k']


async def test_the_step_timeout_bounds_every_attempt_together() -> None:
    @tool
    async def slow(key: str) -> str:
        """Fails after a while."""
        await anyio.sleep(0.2)
        raise ConnectionError('late')

    run = await run_plan({'steps': [{'id': 'a', 'tool': 'slow', 'arguments': {'key': 'k'}}]}, [slow],
                         step_timeout=0.5, retries=Retries(attempts=10, **QUICK))
    assert run.step('a').status == 'failed' and 'timed out after 0.5 s' in (run.step('a').error or '')
    assert 2 <= run.step('a').attempts <= 3


async def test_an_approval_covers_the_attempts_of_the_call_it_saw_and_nothing_else() -> None:
    flaky = Flaky(2)
    gated = with_retries(flaky.tool(requires_approval=True), policy=Retries(attempts=3, **QUICK))
    reviewer = RecordingReviewHandler(ReviewDecision.approve())
    run = await run_plan({'steps': [{'id': 'a', 'tool': 'fetch', 'arguments': {'key': 'k'}}]}, [gated],
                         review_handler=reviewer)
    assert run.ok and flaky.calls == ['k', 'k', 'k']
    assert len(reviewer.requests) == 1  # asked once, for the call; its attempts are the same call


async def test_each_element_of_a_for_each_step_is_tried_on_its_own() -> None:
    flaky = Flaky(1)
    run = await run_plan({'steps': [{'id': 'all', 'tool': 'fetch', 'for_each': ['x', 'y'],
                                     'arguments': {'key': '$item'}}]}, [flaky.tool()],
                         retries=Retries(attempts=2, **QUICK))
    assert run.ok and sorted(flaky.calls) == ['x', 'x', 'y', 'y']
    assert [item.attempts for item in run.step('all').items or []] == [2, 2]


@pytest.mark.parametrize('kind', ['sqlite', 'postgres'])
async def test_every_attempt_is_journaled_before_it_starts(kind: str, tmp_path: Path,
                                                           request: pytest.FixtureRequest) -> None:
    url = f'sqlite:///{tmp_path}/runs.db' if kind == 'sqlite' else request.getfixturevalue('postgres_url')
    flaky = Flaky(2)
    run = await run_plan({'steps': [{'id': 'a', 'tool': 'fetch', 'arguments': {'key': 'k'}}]}, [flaky.tool()],
                         store=url, run_id='r', retries=Retries(attempts=3, **QUICK))
    assert run.ok
    store = open_store(url)
    try:
        transitions = [(t.status, t.detail) for t in store.load('r').transitions if t.status != 'ready']
        options = store.load('r').info.options
    finally:
        store.close()
    assert [status for status, _ in transitions] == ['running', 'running', 'running', 'succeeded']
    assert '"attempt":2' in (transitions[1][1] or '') and 'k: the service did not answer' in (transitions[1][1] or '')
    assert '"retries":{"attempts":3' in options  # a resume runs under the same policy


def test_a_bad_policy_is_a_developer_error() -> None:
    with pytest.raises(UserError, match='Retries.attempts'):
        Retries(attempts=0)
    with pytest.raises(UserError, match='Retries.on must be a tuple of exception classes'):
        Retries(on=(int,))  # type: ignore[arg-type]
    with pytest.raises(UserError, match='with_retries needs `policy=Retries'):
        with_retries(Flaky(0).tool(), policy=None)  # type: ignore[call-overload]
    with pytest.raises(UserError, match='retries must be a Retries'):
        anyio.run(lambda: run_plan({'steps': []}, [], retries=3))  # type: ignore[arg-type]
