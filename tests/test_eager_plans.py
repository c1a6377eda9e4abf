"""Eager plans through the public API: steps of `execute_tool_plan` that start while the model still streams the
plan (read-only tools that need no approval, select steps), every other step held for the whole plan, and what
happens when the plan turns out invalid, breaks off, or the run is cancelled."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from toolweave import Agent, AutoApproveHandler, Budget, tool
from toolweave.agent import AgentEvent, PlanStepStarted, ToolCallDelta, ToolCallStarted
from toolweave.exceptions import UsageLimitExceeded, UserError
from toolweave.testing import ScriptedModel

pytestmark = pytest.mark.anyio

TOKENS_PER_SECOND = 2_000.0  # 8,000 characters a second: a 300-character plan streams over ~40 ms


class Log:
    """One timeline of what happened: the stream's pieces, tool starts and ends, plan events."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, str]] = []

    def event(self, event: AgentEvent) -> None:
        if isinstance(event, ToolCallDelta):
            self.entries.append(('delta', ''))
        elif isinstance(event, PlanStepStarted):
            self.entries.append(('eager' if event.eager else 'started', event.step.id))

    def last_delta(self) -> int:
        return max(i for i, (kind, _) in enumerate(self.entries) if kind == 'delta')

    def index(self, kind: str, name: str) -> int:
        return self.entries.index((kind, name))


def tools(log: Log, *, hang: bool = False) -> list[Any]:
    @tool(read_only=True)
    async def lookup(key: str) -> str:
        """Read a value (read-only)."""
        log.entries.append(('tool', key))
        try:
            await anyio.sleep(30 if hang else 0.001)
        except anyio.get_cancelled_exc_class():
            log.entries.append(('cancelled', key))
            raise
        return f'value of {key}'

    @tool
    async def write(text: str) -> str:
        """Write something (a side effect)."""
        log.entries.append(('tool', f'write {text}'))
        return f'wrote {text}'

    @tool(read_only=True, requires_approval=True)
    async def secret(key: str) -> str:
        """Read a secret (read-only, gated)."""
        log.entries.append(('tool', f'secret {key}'))
        return f'secret {key}'

    return [lookup, write, secret]


def agent(plan: Any, log: Log, *, eager: bool = True, hang: bool = False, **options: Any) -> Agent:
    model = ScriptedModel([{'tool': 'execute_tool_plan', 'arguments': plan}, 'Done.'],
                          tokens_per_second=TOKENS_PER_SECOND)
    return Agent(model, tools=tools(log, hang=hang), tool_planning=True, eager_plans=eager, **options)


PLAN = {'steps': [{'id': 'a', 'tool': 'lookup', 'arguments': {'key': 'a'}},
                  {'id': 'b', 'tool': 'lookup', 'arguments': {'key': 'b'}},
                  {'id': 'both', 'from': {'a': '$ref:a', 'b': '$ref:b'}, 'select': "join(', ', [a, b])"},
                  {'id': 'w', 'tool': 'write', 'arguments': {'text': '$ref:both'}},
                  {'id': 'c', 'tool': 'lookup', 'arguments': {'key': 'c'}}],
        'output_steps': ['both', 'w', 'c']}


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_read_only_steps_start_while_the_plan_streams_and_the_result_is_the_whole_plans(
        anyio_backend: str) -> None:
    log = Log()
    eager = await agent(PLAN, log).run('go', on_event=log.event)
    last = log.last_delta()
    for step in ('a', 'b', 'both'):  # read-only tools and a select step over them: before the stream ended
        assert log.index('eager', step) < last
    assert log.index('tool', 'write value of a, value of b') > last  # a side effect waits for the whole plan
    assert log.index('started', 'w') > last
    (plan,) = eager.plan_runs
    assert plan.eager == ('a', 'b', 'both', 'c') and plan.ok
    # The same plan run whole gives the same outcome, word for word.
    whole = await agent(PLAN, Log(), eager=False).run('go')
    (whole_plan,) = whole.plan_runs
    assert whole_plan.summary == plan.summary and whole_plan.eager == ()
    assert [(r.id, r.status, r.output) for r in plan.steps] == [(r.id, r.status, r.output) for r in whole_plan.steps]


async def test_gated_steps_and_steps_referring_ahead_wait_for_the_whole_plan() -> None:
    log = Log()
    plan = {'steps': [{'id': 'early', 'tool': 'lookup', 'arguments': {'key': '$ref:later'}},  # refers ahead
                      {'id': 's', 'tool': 'secret', 'arguments': {'key': 'k'}},
                      {'id': 'later', 'tool': 'lookup', 'arguments': {'key': 'x'}}],
            'output_steps': ['early', 's']}
    result = await agent(plan, log, review_handler=AutoApproveHandler()).run(
        'go', on_event=log.event)
    last = log.last_delta()
    assert log.index('started', 'early') > last and log.index('started', 's') > last
    (run,) = result.plan_runs
    assert run.ok and run.eager == ('later',)
    assert run.step('early').output == 'value of value of x'


async def test_once_the_whole_plan_is_known_ready_steps_start_longest_chain_first() -> None:
    # Every step arrives and may start early (read-only), but `gate` lasts past the end of the stream: when it ends,
    # `short` (nothing after it) and `long` (two steps after it) are ready at once, with room for one. While the
    # plan streamed no chain was known; from close on the longer chain starts first, as in a run of the whole plan.
    log = Log()
    plan = {'steps': [{'id': 'gate', 'tool': 'slow', 'arguments': {'key': 'gate'}},
                      {'id': 'short', 'tool': 'lookup', 'arguments': {'key': '$ref:gate'}},
                      {'id': 'long', 'tool': 'lookup', 'arguments': {'key': '$ref:gate'}},
                      {'id': 'next', 'tool': 'lookup', 'arguments': {'key': '$ref:long'}},
                      {'id': 'last', 'tool': 'lookup', 'arguments': {'key': '$ref:next'}}],
            'output_steps': ['short', 'last']}

    arrived = anyio.Event()

    def on_event(event: AgentEvent) -> None:
        log.event(event)
        if isinstance(event, ToolCallStarted):  # the whole call has arrived: the loop closes the plan next
            arrived.set()

    @tool(read_only=True)
    async def slow(key: str) -> str:
        """Read a value once the plan has arrived (read-only)."""
        await arrived.wait()
        await anyio.sleep(0.1)  # the plan is closed meanwhile (validating five steps takes well under 1 ms)
        return key

    model = ScriptedModel([{'tool': 'execute_tool_plan', 'arguments': plan}, 'Done.'],
                          tokens_per_second=TOKENS_PER_SECOND)
    result = await Agent(model, tools=[*tools(log), slow], tool_planning=True, eager_plans=True,
                         plan_options={'concurrency': 1}).run('go', on_event=on_event)
    (run,) = result.plan_runs
    assert run.ok and run.eager == ('gate',), run.eager  # the others waited for it, and it outlasted the stream
    assert log.index('eager', 'gate') < log.last_delta() < log.index('started', 'long') < log.index(
        'started', 'short')


async def test_an_invalid_plan_cancels_what_started_early_and_reports_it_with_its_problems() -> None:
    log = Log()
    plan = {'steps': [{'id': 'a', 'tool': 'lookup', 'arguments': {'key': 'a'}},
                      {'id': 'w', 'tool': 'write', 'arguments': {'text': '$ref:a'}},
                      {'id': 'bad', 'tool': 'no_such_tool', 'arguments': {}}]}
    model = ScriptedModel([{'tool': 'execute_tool_plan', 'arguments': plan}, 'Sorry.'],
                          tokens_per_second=TOKENS_PER_SECOND)
    result = await Agent(model, tools=tools(log, hang=True), tool_planning=True, eager_plans=True).run(
        'go', on_event=log.event)
    assert ('tool', 'a') in log.entries and ('cancelled', 'a') in log.entries  # it started, then was stopped
    assert not any(kind == 'tool' and name.startswith('write') for kind, name in log.entries)
    # What started early is on record and in the reply, never hidden.
    (early,) = result.plan_runs
    assert [(r.id, r.status) for r in early.steps] == [('a', 'cancelled')] and early.eager == ('a',)
    plan_reply = str(model.requests[1].messages[-1].content)
    assert "Unknown tool 'no_such_tool'" in plan_reply
    assert 'These steps ran while the plan was being written' in plan_reply
    assert '"a": "ERROR: Cancelled: the plan did not validate' in plan_reply
    # The same plan, not streamed, reports the very same problems, and that nothing ran.
    whole = ScriptedModel([{'tool': 'execute_tool_plan', 'arguments': plan}, 'Sorry.'])
    await Agent(whole, tools=tools(Log()), tool_planning=True).run('go')
    whole_reply = str(whole.requests[1].messages[-1].content)
    assert plan_reply.startswith(whole_reply) and 'These steps ran' not in whole_reply


async def test_a_duplicate_step_id_stops_early_starts_and_fails_validation() -> None:
    log = Log()
    plan = {'steps': [{'id': 'a', 'tool': 'lookup', 'arguments': {'key': 'a'}},
                      {'id': 'a', 'tool': 'lookup', 'arguments': {'key': 'again'}},
                      {'id': 'c', 'tool': 'lookup', 'arguments': {'key': 'c'}}]}
    model = ScriptedModel([{'tool': 'execute_tool_plan', 'arguments': plan}, 'Sorry.'],
                          tokens_per_second=TOKENS_PER_SECOND)
    result = await Agent(model, tools=tools(log), tool_planning=True, eager_plans=True).run('go', on_event=log.event)
    assert ('tool', 'again') not in log.entries and ('tool', 'c') not in log.entries
    # Step `a` had finished before the duplicate arrived: its result is recorded and shown with the problems.
    (early,) = result.plan_runs
    assert [(r.id, r.status) for r in early.steps] == [('a', 'succeeded')]
    reply = str(model.requests[1].messages[-1].content)
    assert 'duplicate' in reply.lower() and 'These steps ran while the plan was being written' in reply
    assert result.usage.tool_calls == 1


async def test_cancelling_the_run_mid_stream_cancels_the_early_steps() -> None:
    log = Log()
    plan = {'steps': [{'id': 'a', 'tool': 'lookup', 'arguments': {'key': 'a'}}]
            + [{'id': f'pad{i}', 'tool': 'write', 'arguments': {'text': 'x' * 200}} for i in range(20)]}
    model = ScriptedModel([{'tool': 'execute_tool_plan', 'arguments': plan}, 'Done.'], tokens_per_second=400)
    eager_agent = Agent(model, tools=tools(log, hang=True), tool_planning=True, eager_plans=True)
    with anyio.move_on_after(0.5) as scope:  # the plan takes about 3 s to stream
        await eager_agent.run('go', on_event=log.event)
    assert scope.cancelled_caught
    assert ('tool', 'a') in log.entries and ('cancelled', 'a') in log.entries
    assert not any(kind == 'tool' and name.startswith('write') for kind, name in log.entries)


async def test_a_plan_call_that_never_runs_cancels_its_early_steps() -> None:
    log = Log()
    plan = {'steps': [{'id': 'a', 'tool': 'lookup', 'arguments': {'key': 'a'}},
                      {'id': 'b', 'tool': 'lookup', 'arguments': {'key': 'b'}}], 'output_steps': ['b']}
    # The reply uses up the run's token budget: the run stops after the model call, before the plan call runs.
    model = ScriptedModel([{'tool': 'execute_tool_plan', 'arguments': plan}, 'Done.'],
                          tokens_per_second=TOKENS_PER_SECOND)
    eager_agent = Agent(model, tools=tools(log, hang=True), tool_planning=True, eager_plans=True,
                        budget=Budget(max_tokens=10))
    with anyio.fail_after(5), pytest.raises(UsageLimitExceeded):
        await eager_agent.run('go', on_event=log.event)
    assert ('tool', 'a') in log.entries and ('cancelled', 'a') in log.entries


@pytest.mark.parametrize(('options', 'message'), [
    ({'tool_planning': False}, 'tool_planning is off'),
    ({'plan_store': 'sqlite:///:memory:'}, 'plan_store'),
    ({'plan_options': {'review_mode': 'whole_plan'}}, "review_mode='whole_plan'"),
    ({'eager_plans': 'yes'}, 'must be True or False'),
])
def test_eager_plans_with_options_it_cannot_work_with_is_a_developer_error(options: dict[str, Any],
                                                                         message: str) -> None:
    settings: dict[str, Any] = {'tool_planning': True, 'eager_plans': True, **options}
    with pytest.raises(UserError, match=message):
        Agent(ScriptedModel(['hi']), tools=tools(Log()), **settings)


def test_tool_read_only_and_idempotent_flags_reach_the_definition() -> None:
    @tool(read_only=True, idempotent=True)
    def price(sku: str) -> float:
        """Price of a SKU."""
        return 1.0

    metadata = price.definition.metadata
    assert (metadata.read_only, metadata.idempotent, metadata.requires_approval) == (True, True, False)


async def test_a_streamed_plan_with_too_many_values_to_check_on_the_loop_is_checked_again_whole() -> None:
    # `big` refers ahead, so it is held for the whole plan and checked at its end, where it turns out to hold more
    # values than are checked on the event loop: the whole plan is then validated again in a worker thread (not from
    # what was checked as it streamed in), and the run ends as the same plan run whole does.
    plan = {'steps': [{'id': 'a', 'tool': 'lookup', 'arguments': {'key': 'a'}},
                      {'id': 'big', 'from': {'x': '$ref:later', 'data': [0] * 20_001}, 'select': 'x'},
                      {'id': 'later', 'tool': 'lookup', 'arguments': {'key': '$ref:a'}}],
            'output_steps': ['big']}

    async def run(eager: bool) -> Any:
        model = ScriptedModel([{'tool': 'execute_tool_plan', 'arguments': plan}, 'Done.'],
                              tokens_per_second=1_000_000.0)
        result = await Agent(model, tools=tools(Log()), tool_planning=True, eager_plans=eager).run('go')
        (ran,) = result.plan_runs
        return ran

    eager, whole = await run(True), await run(False)
    assert eager.ok and eager.step('big').value == 'value of value of a'
    assert eager.summary == whole.summary
    assert [(r.id, r.status, r.output) for r in eager.steps] == [(r.id, r.status, r.output) for r in whole.steps]
