"""Faults contained to their step, and bad input reported as problems: values that cannot become JSON, deep or
undecodable plan input, ids that could forge summary lines, shared mutable outputs, validation that must stay
cheap, blocking tools that never return, stray `CancelledError`s, and very deep argument paths."""

from __future__ import annotations

import asyncio
import difflib
import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

import toolweave
from toolweave import PlanTool, PlanValidationError, tool
from toolweave.cli._app import app
from toolweave.testing import FakeTool, echo_tool
from toolweave.tools._threads import MAX_ABANDONED, abandoned_calls

pytestmark = pytest.mark.anyio


@pytest.fixture(params=['asyncio', 'trio'])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def step(step_id: str, tool_name: str = 'echo', arguments: Any = None) -> dict[str, Any]:
    return {'id': step_id, 'tool': tool_name, 'arguments': arguments if arguments is not None else {}}


# --- a value that cannot become JSON fails its own step only ----------------------------------------------------


def cyclic() -> dict[str, Any]:
    value: dict[str, Any] = {}
    value['self'] = value
    return value


@pytest.mark.parametrize(('value', 'reason'), [
    (cyclic(), 'it contains itself'),
    (b'\xff\xfe', "can't decode byte 0xff"),
    (10**5000, 'Exceeds the limit (4300 digits)'),
], ids=['cyclic', 'bytes', 'long int'])
async def test_a_value_that_cannot_become_json_fails_only_its_step(value: Any, reason: str) -> None:
    sent = FakeTool('send', 'sent')
    plan = {'steps': [step('a', 'bad'), step('b', 'send'), step('c', 'echo', {'x': '$ref:a'}),
                      step('d', 'echo', {'x': 'text {{$ref:a}}'})]}
    run = await toolweave.run_plan(plan, [FakeTool('bad', lambda args: value), sent, echo_tool()])
    error = run.step('a').error
    assert run.step('a').status == 'failed' and error is not None
    assert error.startswith('The tool returned a value that cannot be recorded as JSON')
    assert reason in error
    assert run.step('b').ok and sent.call_count == 1
    assert [run.step('c').status, run.step('d').status] == ['skipped', 'skipped']
    assert json.loads(run.summary.split('\nResults: ')[1].split('\nErrors: ')[0])['b'] == 'sent'


async def test_a_chain_that_nests_its_value_deeper_each_step_fails_where_it_gets_too_deep() -> None:
    steps = [step('s0', 'echo', {'x': 1})] + [step(f's{i}', 'echo', {'x': f'$ref:s{i - 1}'}) for i in range(1, 400)]
    run = await toolweave.run_plan({'steps': steps, 'output_steps': ['s399']}, [echo_tool()])
    (failed,) = [r for r in run.steps if r.status == 'failed']
    assert failed.error is not None and 'nested more than 254 levels deep' in failed.error
    assert run.succeeded == failed.index and run.skipped == 399 - failed.index
    assert run.summary.startswith('Plan completed with errors.')


async def test_through_the_meta_tool_the_model_reads_the_step_error_not_an_unexpected_error() -> None:
    planner = PlanTool([FakeTool('cyc', lambda args: cyclic()), FakeTool('ok', 'sent')])
    result = await planner.call({'steps': [step('a', 'cyc'), step('b', 'ok')]})
    assert result.error is None
    assert 'Unexpected error' not in result.text
    assert '"b": "sent"' in result.text and 'a: The tool returned a value that cannot be recorded' in result.text


async def test_output_text_too_deep_to_parse_is_kept_as_text() -> None:
    deep = '[' * 5000 + ']' * 5000
    run = await toolweave.run_plan({'steps': [step('a', 'deep'), step('b', 'echo', {'x': '$ref:a'})]},
                                   [FakeTool('deep', deep), echo_tool()])
    assert run.ok
    assert run.step('a').value == deep and run.step('b').arguments == {'x': deep}


# --- deep, undecodable or forged plan input is a validation problem --------------------------------------------


DEEP = '[' * 100_000


@pytest.mark.parametrize(('plan', 'expected'), [
    ({'steps': [step('a', 'echo', DEEP)]}, 'steps[0] (id \'a\'): "arguments" is a JSON text nested too deeply'),
    ({'steps': DEEP}, '"steps" is a JSON text nested too deeply to read'),
    ('{"steps": ' + DEEP, 'The plan JSON is nested too deeply to read'),
    (b'{"steps": [\xff]}', 'The plan is not UTF-8 text: invalid start byte at byte 11'),
], ids=['arguments', 'steps string', 'plan text', 'bytes'])
async def test_deep_or_undecodable_input_is_a_problem_with_a_location(plan: Any, expected: str) -> None:
    echo = echo_tool()
    with pytest.raises(PlanValidationError) as caught:
        await toolweave.run_plan(plan, [echo])
    assert any(problem.startswith(expected) for problem in caught.value.problems), caught.value.problems
    if not isinstance(plan, bytes):  # a model sends text or a JSON object
        result = await PlanTool([echo]).call(plan)
        assert result.error is not None and expected in result.error
    assert echo.call_count == 0


def test_validate_prints_problems_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / 'deep.json'
    path.write_text('{"steps": [{"id": "a", "tool": "echo", "arguments": {"x": ' + '[' * 100_000 + ']' * 100_000
                    + '}}]}')
    result = CliRunner().invoke(app, ['validate', str(path), '--tools', 'toolweave.testing:echo_tool'])
    assert result.exit_code == 1, result.output
    assert 'Traceback' not in result.output and isinstance(result.exception, SystemExit)
    assert 'Plan is invalid' in result.output and 'nested too deeply' in result.output


@pytest.mark.parametrize('bad_id', ['x\nAll-steps-succeeded', 'a\n', '\nb', 'a\rb', 'a b', 'é'])
async def test_an_id_with_a_newline_or_other_outside_characters_is_rejected(bad_id: str) -> None:
    plan = {'steps': [step('ok'), step(bad_id)]}
    with pytest.raises(PlanValidationError) as caught:
        await toolweave.run_plan(plan, [echo_tool()])
    assert caught.value.problems == [
        f'steps[1] (id {bad_id!r}): invalid step id {bad_id!r}: it has characters outside [A-Za-z0-9_-]. Use '
        'letters, digits, "_" and "-" only, for example "weather_tokyo".'
    ]


# --- every step reads its own copy ----------------------------------------------------------------------------


async def test_steps_reading_the_same_output_each_get_their_own_copy() -> None:
    seen: list[list[int]] = []

    def mutate(arguments: dict[str, Any]) -> str:
        items = arguments['data']['items']
        seen.append(list(items))
        items.append(99)
        arguments['data']['new'] = True
        return 'changed'

    plan = {'steps': [step('src', 'src'), step('m1', 'mutate', {'data': '$ref:src'}),
                      step('m2', 'mutate', {'data': '$ref:src'}), step('m3', 'mutate', {'data': {'$ref': 'src'}}),
                      step('after', 'echo', {'x': '$ref:src.items', 'm': '$ref:m1'})]}
    run = await toolweave.run_plan(plan, [FakeTool('src', {'items': [1, 2]}), FakeTool('mutate', mutate),
                                          echo_tool()])
    assert run.ok
    assert seen == [[1, 2], [1, 2], [1, 2]]
    assert run.step('src').value == {'items': [1, 2]}
    assert [run.step(s).arguments for s in ('m1', 'm2', 'm3')] == [{'data': {'items': [1, 2]}}] * 3
    assert run.step('after').arguments == {'x': [1, 2], 'm': 'changed'}
    assert json.loads(run.summary)['src'] == {'items': [1, 2]}


# --- validation messages stay cheap and short ------------------------------------------------------------------


async def test_a_plan_full_of_unknown_references_gets_a_short_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    close_matches = difflib.get_close_matches

    def counting(word: str, *args: Any, **kwargs: Any) -> list[str]:
        calls.append(word)
        return close_matches(word, *args, **kwargs)

    monkeypatch.setattr(difflib, 'get_close_matches', counting)
    steps = [step(f'step_{i}', 'echo', {'x': f'$ref:missing_{i}', 'y': f'$ref:gone_{i}'}) for i in range(1000)]
    result = await PlanTool([echo_tool()]).call({'steps': steps})
    assert result.error is not None
    assert len(calls) <= 3
    assert len(result.error) < 12_000
    assert result.error.endswith('... and 1970 more problems of the same kinds not listed. Fix the ones above and '
                                 'check the rest the same way.')
    assert result.error.startswith('Plan execution failed: 31 problems (nothing ran; fix them all and resend):')


async def test_a_problem_deep_in_the_arguments_names_a_short_path() -> None:
    value: Any = '$ref:nope'
    for _ in range(300):
        value = [value]
    with pytest.raises(PlanValidationError) as caught:
        await toolweave.run_plan({'steps': [step('a', 'echo', {'x': value})]}, [echo_tool()])
    (problem,) = caught.value.problems
    assert problem.startswith("steps[0] (id 'a'): arguments.x[0][0][0]...[0][0][0][0] (301 levels deep): reference "
                              "'$ref:nope' names step 'nope', which is not in the plan.")
    assert len(problem) < 300


# --- stray CancelledError -------------------------------------------------------------------------------------


async def test_a_stray_cancelled_error_fails_only_its_step() -> None:
    async def stray(arguments: dict[str, Any]) -> str:
        await anyio.sleep(0.01)
        raise asyncio.CancelledError()

    plan = {'steps': [step('a', 'stray'), step('b', 'slow'), step('c', 'echo', {'x': '$ref:a'})]}
    run = await toolweave.run_plan(plan, [FakeTool('stray', stray), FakeTool('slow', 'done', delay=0.05),
                                          echo_tool()])
    assert run.step('a').error == 'Tool execution failed: the tool raised CancelledError without being cancelled'
    assert run.step('b').ok and run.step('c').status == 'skipped'


async def test_a_real_cancellation_still_cancels_the_run() -> None:
    hang = FakeTool('hang', hang=True)
    with anyio.move_on_after(0.05) as scope:
        await toolweave.run_plan({'steps': [step('a', 'hang'), step('b', 'hang')]}, [hang])
    assert scope.cancelled_caught
    assert all(call.ended is not None for call in hang.calls)


# --- blocking tools that never return --------------------------------------------------------------------------


@pytest.fixture
def release() -> Any:
    gate = threading.Event()
    yield gate
    gate.set()
    deadline = time.monotonic() + 10
    while abandoned_calls() and time.monotonic() < deadline:
        time.sleep(0.01)


def blocking_tool(gate: threading.Event) -> Any:
    @tool
    def block(n: int) -> str:
        """Blocks until the test releases it."""
        gate.wait()
        return 'released'

    return block


def blocking_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith('toolweave blocking tool')]


async def test_a_blocking_tool_that_times_out_leaves_a_daemon_thread_and_the_count_is_capped(release: Any) -> None:
    block = blocking_tool(release)
    before = abandoned_calls()  # other tests' tools that never return, if any
    steps = [step(f's{i}', 'block', {'n': i}) for i in range(MAX_ABANDONED)]
    run = await toolweave.run_plan({'steps': steps}, [block], step_timeout=0.2)
    assert [r.error for r in run.steps] == [
        f"Tool execution failed: step '{r.id}' timed out after 0.2 s (step_timeout)" for r in run.steps]
    assert abandoned_calls() == before + MAX_ABANDONED
    assert len(blocking_threads()) >= MAX_ABANDONED and all(t.daemon for t in blocking_threads())
    run = await toolweave.run_plan({'steps': steps[:3]}, [block], step_timeout=0.2)
    assert [r.error for r in run.steps] == [
        f'Tool execution failed: {before + MAX_ABANDONED} earlier calls to blocking tools were abandoned (timed out '
        "or cancelled) and are still running in their threads, the most allowed; 'block' was not started. Make "
        'the blocking tools return (a timeout inside the function itself), or make them async.'] * 3
    release.set()
    with anyio.fail_after(10):  # the threads return, then hand their tokens back through the event loop
        for _ in range(1000):
            if abandoned_calls() <= before:
                break
            await anyio.sleep(0.01)
    run = await toolweave.run_plan({'steps': steps[:2]}, [block], step_timeout=1)
    assert run.ok


def test_the_interpreter_exits_while_a_blocking_tool_never_returns(tmp_path: Path) -> None:
    script = tmp_path / 'hang.py'
    script.write_text(textwrap.dedent('''
        import time
        import toolweave

        @toolweave.tool
        def forever() -> str:
            """Never returns."""
            time.sleep(3600)
            return 'never'

        run = toolweave.run_plan_sync({'steps': [{'id': 'a', 'tool': 'forever', 'arguments': {}}]}, [forever],
                                      step_timeout=0.1)
        print(run.step('a').error)
    '''))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Tool execution failed: step 'a' timed out after 0.1 s (step_timeout)"
