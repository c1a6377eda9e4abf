"""OpenTelemetry traces, read back with the SDK's in-memory exporter: off by default, one call turns them on; the
spans of agent runs, model calls, tool calls, plans and their steps, pipelines and MCP calls, nested as the work
was; payloads only when asked for, cut; the hidden call context never recorded; trace context carried into worker
threads and across the MCP boundary."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import toolweave
from toolweave import (
    Agent,
    ErrorStrategy,
    ExitEarly,
    InstrumentationSettings,
    ModelError,
    TextTool,
    ToolCallContext,
    ToolPipeline,
    Toolset,
    UserError,
    instrument,
    instrumentation,
    run_plan,
    tool,
)
from toolweave.testing import FakeTool, FunctionModel, ScriptedModel

pytestmark = pytest.mark.anyio


class Spans:
    """The spans one test recorded, and ways to look at them."""

    def __init__(self, exporter: InMemorySpanExporter, provider: TracerProvider) -> None:
        self.exporter = exporter
        self.provider = provider

    @property
    def all(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.all if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, (name, [span.name for span in self.all])
        return found[0]

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        return next((s for s in self.all if s.context.span_id == span.parent.span_id), None)

    def children(self, span: ReadableSpan) -> list[ReadableSpan]:
        return sorted((s for s in self.all if s.parent is not None and s.parent.span_id == span.context.span_id),
                      key=lambda s: s.start_time or 0)

    def tree(self, span: ReadableSpan | None = None, depth: int = 0) -> list[str]:
        """The spans as an indented outline, children in the order they started."""
        if span is None:
            roots = sorted((s for s in self.all if self.parent(s) is None), key=lambda s: s.start_time or 0)
            return [line for root in roots for line in self.tree(root)]
        return ['  ' * depth + span.name, *(line for child in self.children(span)
                                            for line in self.tree(child, depth + 1))]


@contextmanager
def tracing(**settings: Any) -> Iterator[Spans]:
    """Tracing on, with its own provider and an in-memory exporter, for the block."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(InstrumentationSettings(tracer_provider=provider, **settings))
    try:
        yield Spans(exporter, provider)
    finally:
        instrument(False)


@pytest.fixture
def spans() -> Iterator[Spans]:
    with tracing() as recorded:
        yield recorded


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def boom(message: str) -> str:
    """Raise with the message."""
    raise RuntimeError(message)


# --- off by default; one call turns tracing on ------------------------------------------------------------------

def test_tracing_is_off_by_default_and_import_toolweave_does_not_load_opentelemetry() -> None:
    code = ('import sys, toolweave\n'
            'from toolweave import tool\n'
            '@tool\ndef f(x: int) -> int:\n    """F."""\n    return x\n'
            'f.call_sync({"x": 1})\n'
            'print(toolweave.instrumentation(), sorted(m for m in sys.modules if m.startswith("opentelemetry")))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ['None', '[]']


def test_without_the_opentelemetry_api_instrument_says_what_to_install() -> None:
    code = ('import sys\n'
            'sys.modules["opentelemetry"] = None  # as if it were not installed\n'
            'import toolweave\n'
            'try:\n    toolweave.instrument()\n'
            'except ImportError as exc:\n    print(exc, toolweave.instrumentation())\n')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == 'Tracing needs the OpenTelemetry API: `pip install "toolweave[otel]"`. None'


async def test_nothing_is_recorded_while_tracing_is_off() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(InstrumentationSettings(tracer_provider=provider))
    instrument(False)
    assert instrumentation() is None
    await add.call({'a': 1, 'b': 2})
    await run_plan({'steps': [{'id': 'x', 'tool': 'add', 'arguments': {'a': 1, 'b': 2}}]}, [add])
    await Agent(ScriptedModel([{'tool': 'add', 'arguments': {'a': 1, 'b': 2}}, 'done']), tools=[add]).run('sum')
    assert exporter.get_finished_spans() == ()


async def test_instrument_true_uses_the_global_provider_and_false_turns_tracing_off() -> None:
    instrument()
    try:
        settings = instrumentation()
        assert settings == InstrumentationSettings()
        assert (settings.tracer_provider, settings.include_content, settings.max_content_chars) == (None, False, 2000)
        result = await add.call({'a': 2, 'b': 2})  # no SDK is installed globally: spans are no-ops, calls work
        assert result.output == '4'
    finally:
        instrument(False)
    assert instrumentation() is None


@dataclass
class BadSettings:
    arguments: dict[str, Any]
    message: str


@pytest.mark.parametrize('case', [
    BadSettings({'tracer_provider': 'jaeger'}, "tracer_provider must be an OpenTelemetry TracerProvider (with "
                "`get_tracer`), or None for the global one, got str: 'jaeger'."),
    BadSettings({'include_content': 'yes'}, "include_content must be True or False, got 'yes'."),
    BadSettings({'max_content_chars': 0}, 'max_content_chars must be an int >= 1, got 0.'),
    BadSettings({'max_content_chars': True}, 'max_content_chars must be an int >= 1, got True.'),
    BadSettings({'max_content_chars': 10.5}, 'max_content_chars must be an int >= 1, got 10.5.'),
], ids=lambda case: next(iter(case.arguments)))
def test_bad_settings_say_what_and_how_to_fix(case: BadSettings) -> None:
    with pytest.raises(UserError) as raised:
        InstrumentationSettings(**case.arguments)
    assert str(raised.value) == f'InstrumentationSettings {case.message}'


def test_instrument_rejects_anything_but_settings_or_a_bool() -> None:
    with pytest.raises(UserError, match=r"instrument\(\) takes InstrumentationSettings, True or False, got dict: "
                                        r"\{'include_content': True\}"):
        instrument({'include_content': True})  # type: ignore[arg-type]
    assert instrumentation() is None


# --- tool calls ------------------------------------------------------------------------------------------------

async def test_a_tool_call_is_an_execute_tool_span_without_payloads_by_default(spans: Spans) -> None:
    await add.call({'a': 1, 'b': 2})
    span = spans.one('execute_tool add')
    assert span.kind == trace.SpanKind.INTERNAL
    assert attrs(span) == {'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'add',
                           'gen_ai.tool.type': 'function', 'gen_ai.tool.description': 'Add two integers.'}
    assert span.status.status_code == StatusCode.UNSET


async def test_payloads_are_recorded_when_asked_for_and_cut() -> None:
    with tracing(include_content=True, max_content_chars=13) as spans:
        await add.call({'a': 1, 'b': 2})
        await FakeTool('long', 'x' * 30).call('{"text": "a very long argument"}')
    short = attrs(spans.one('execute_tool add'))  # 13 characters: kept whole
    assert (short['gen_ai.tool.call.arguments'], short['gen_ai.tool.call.result']) == ('{"a":1,"b":2}', '3')
    long = attrs(spans.one('execute_tool long'))
    assert long['gen_ai.tool.call.arguments'] == '{"text": "a v... [cut 19 of 32 characters]'
    assert long['gen_ai.tool.call.result'] == 'xxxxxxxxxxxxx... [cut 17 of 30 characters]'


async def test_a_failed_call_is_an_error_span_and_a_raised_one_keeps_its_exception(spans: Spans) -> None:
    raised = await boom.call({'message': 'the disk is full'})
    returned = await FakeTool('refuse', fail='not today').call()
    assert not raised.ok and not returned.ok
    for name, message in (('execute_tool boom', 'the disk is full'), ('execute_tool refuse', 'not today')):
        span = spans.one(name)
        assert (span.status.status_code, span.status.description) == (StatusCode.ERROR, message)
        assert attrs(span)['error.type'] == 'tool_error'
    [event] = spans.one('execute_tool boom').events
    assert event.name == 'exception' and dict(event.attributes or {})['exception.type'] == 'RuntimeError'
    assert spans.one('execute_tool refuse').events == ()


async def test_error_messages_are_cut_too() -> None:
    with tracing(max_content_chars=10) as spans:
        await FakeTool('refuse', fail='no ' * 20).call()
    assert spans.one('execute_tool refuse').status.description == 'no no no n... [cut 50 of 60 characters]'


async def test_a_control_flow_signal_is_not_an_error(spans: Spans) -> None:
    with pytest.raises(ExitEarly):
        await FakeTool('stop', raises=ExitEarly('done for today')).call()
    span = spans.one('execute_tool stop')
    assert span.status.status_code == StatusCode.UNSET and attrs(span)['toolweave.signal'] == 'ExitEarly'


async def test_a_cancelled_call_ends_its_span_as_cancelled(spans: Spans) -> None:
    with anyio.move_on_after(0.05):
        await FakeTool('wait', hang=True).call()
    span = spans.one('execute_tool wait')
    assert (span.status.status_code, span.status.description) == (StatusCode.ERROR, 'cancelled')
    assert attrs(span)['error.type'] == 'CancelledError' and span.events == ()


async def test_wrapped_tools_are_one_span_under_the_outer_name(spans: Spans) -> None:
    wrapped = toolweave.with_note(add, 'Use small numbers.')
    renamed = Toolset([wrapped]).prefixed('math').get('math_add')
    assert (await renamed.call({'a': 1, 'b': 1})).output == '2'
    assert spans.tree() == ['execute_tool math_add']


async def test_a_tool_that_calls_tools_nests_their_spans(spans: Spans) -> None:
    async def outer(args: dict[str, Any]) -> str:
        first = await add.call({'a': 1, 'b': 2})
        second = await add.call({'a': 3, 'b': 4})
        return first.output + second.output

    await FakeTool('outer', outer).call()
    assert spans.tree() == ['execute_tool outer', '  execute_tool add', '  execute_tool add']


# --- context into worker threads --------------------------------------------------------------------------------

async def test_the_trace_context_follows_a_blocking_tool_into_its_thread(spans: Spans) -> None:
    tracer = spans.provider.get_tracer('test')
    threads: list[int] = []

    @tool
    def blocking(n: int) -> int:
        """Work in a worker thread, inside a span of the application's own."""
        threads.append(threading.get_ident())
        with tracer.start_as_current_span('inside the thread'):
            return n * 2

    assert (await blocking.call({'n': 2})).output == '4'
    assert threads and threads[0] != threading.get_ident()
    assert spans.tree() == ['execute_tool blocking', '  inside the thread']


# --- plans ----------------------------------------------------------------------------------------------------------

PLAN = {'steps': [
    {'id': 'x', 'tool': 'add', 'arguments': {'a': 1, 'b': 2}},
    {'id': 'y', 'tool': 'add', 'arguments': {'a': '$ref:x', 'b': 10}},
    {'id': 'bad', 'tool': 'boom', 'arguments': {'message': 'no luck'}},
    {'id': 'after_bad', 'tool': 'add', 'arguments': {'a': '$ref:bad', 'b': 1}},
]}


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_a_plan_is_a_span_with_a_span_per_step(anyio_backend: str, spans: Spans) -> None:
    run = await run_plan(PLAN, [add, boom])
    assert [step.status for step in run.steps] == ['succeeded', 'succeeded', 'failed', 'skipped']
    plan = spans.one('execute_plan')
    assert attrs(plan) == {'toolweave.plan.steps': 4, 'toolweave.plan.waves': 2, 'toolweave.plan.dialect': 'id',
                           'toolweave.plan.succeeded': 2, 'toolweave.plan.failed': 1, 'toolweave.plan.skipped': 1}
    assert plan.status.status_code == StatusCode.UNSET  # fail-forward: a failed step does not fail the plan
    steps = {span.name: span for span in spans.children(plan)}
    assert set(steps) == {'plan_step x', 'plan_step y', 'plan_step bad', 'plan_step after_bad'}
    assert attrs(steps['plan_step y']) == {
        'toolweave.plan.step.id': 'y', 'toolweave.plan.step.tool': 'add', 'toolweave.plan.step.index': 1,
        'toolweave.plan.step.wave': 1, 'toolweave.plan.step.status': 'succeeded'}
    assert [child.name for child in spans.children(steps['plan_step y'])] == ['execute_tool add']
    bad = steps['plan_step bad']
    assert (attrs(bad)['toolweave.plan.step.status'], attrs(bad)['error.type']) == ('failed', 'failed')
    assert bad.status.description == 'Tool execution failed: no luck'
    skipped = steps['plan_step after_bad']
    assert attrs(skipped)['toolweave.plan.step.status'] == 'skipped'
    assert attrs(skipped)['toolweave.plan.step.error'] == "Skipped because dependency 'bad' failed"
    assert skipped.status.status_code == StatusCode.UNSET and spans.children(skipped) == []
    assert skipped.start_time == skipped.end_time  # it never ran
    # A step's span lasts (at least) as long as its record says the step did, within the plan's span.
    y, record = steps['plan_step y'], run.steps[1]
    assert record.started_at is not None and record.ended_at is not None
    assert (y.end_time or 0) - (y.start_time or 0) >= (record.ended_at - record.started_at) * 1e9 - 1e6
    assert (plan.start_time or 0) <= (y.start_time or 0) <= (y.end_time or 0) <= (plan.end_time or 0)


async def test_parallel_steps_each_nest_their_own_tool_call(spans: Spans) -> None:
    async def echo(args: dict[str, Any]) -> str:
        await anyio.sleep(0.01 * (args['n'] % 3))
        return str(args['n'])

    steps = [{'id': f's{n}', 'tool': 'echo', 'arguments': {'n': n}} for n in range(20)]
    run = await run_plan({'steps': steps}, [FakeTool('echo', echo)], concurrency=8)
    assert run.succeeded == 20
    for step in spans.children(spans.one('execute_plan')):
        [call] = spans.children(step)
        assert call.name == 'execute_tool echo'
        assert step.name == f"plan_step s{attrs(step)['toolweave.plan.step.index']}"


async def test_a_plan_that_times_out_records_its_cancelled_steps(spans: Spans) -> None:
    plan = {'steps': [{'id': 'quick', 'tool': 'add', 'arguments': {'a': 1, 'b': 1}},
                      {'id': 'stuck', 'tool': 'wait', 'arguments': {}},
                      {'id': 'later', 'tool': 'add', 'arguments': {'a': '$ref:stuck', 'b': 1}}]}
    run = await run_plan(plan, [add, FakeTool('wait', hang=True)], timeout=0.1)
    assert [step.status for step in run.steps] == ['succeeded', 'cancelled', 'cancelled']
    plan_span = spans.one('execute_plan')
    reason = 'Cancelled: the plan timed out after 0.1 s (timeout)'
    assert (plan_span.status.status_code, plan_span.status.description) == (StatusCode.ERROR, reason)
    assert attrs(plan_span)['toolweave.plan.cancelled'] == 2
    for name in ('plan_step stuck', 'plan_step later'):
        span = spans.one(name)
        assert (attrs(span)['toolweave.plan.step.status'], span.status.description) == ('cancelled', reason)
    [wait] = spans.children(spans.one('plan_step stuck'))
    assert wait.status.description == 'cancelled'
    assert spans.children(spans.one('plan_step later')) == []


async def test_a_step_that_stops_the_run_fails_the_plan_span(spans: Spans) -> None:
    plan = {'steps': [{'id': 'stop', 'tool': 'stop', 'arguments': {}},
                      {'id': 'slow', 'tool': 'wait', 'arguments': {}}]}
    with pytest.raises(ExitEarly):
        await run_plan(plan, [FakeTool('stop', raises=ExitEarly('enough')), FakeTool('wait', hang=True)])
    plan_span = spans.one('execute_plan')
    assert (attrs(plan_span)['error.type'], plan_span.status.description) == ('ExitEarly', 'ExitEarly: enough')


# --- pipelines --------------------------------------------------------------------------------------------------

async def test_a_pipeline_span_names_its_steps_and_nests_their_calls(spans: Spans) -> None:
    upper = TextTool.from_function('upper', 'Upper-cases text', str.upper)
    fail = FakeTool('fail', fail='cannot exclaim')
    shout = ToolPipeline.of('shout', 'Upper-case, then exclaim', upper, fail, upper)
    assert (await shout.call('hi')).error == 'cannot exclaim'
    span = spans.one('execute_tool shout')
    assert attrs(span)['toolweave.pipeline.steps'] == ('upper', 'fail', 'upper')
    assert attrs(span)['toolweave.pipeline.error_strategy'] == ErrorStrategy.FAIL_FAST.value
    assert attrs(span)['toolweave.pipeline.failed_step'] == 'fail'
    assert spans.tree() == ['execute_tool shout', '  execute_tool upper', '  execute_tool fail']


# --- agents and models ------------------------------------------------------------------------------------------

def plan_then_answer() -> ScriptedModel:
    return ScriptedModel([
        [{'tool': 'add', 'arguments': {'a': 1, 'b': 2}},
         {'tool': 'execute_tool_plan', 'arguments': {'steps': [{'id': 's', 'tool': 'add', 'arguments': {
             'a': 5, 'b': 5}}]}}],
        'The answers are 3 and 10.'])


async def test_an_agent_run_is_the_root_of_its_model_and_tool_spans(spans: Spans) -> None:
    agent = Agent(plan_then_answer(), tools=[add], tool_planning=True, name='calculator',
                  description='Adds numbers.')
    result = await agent.run('Add things.')
    assert result.output == 'The answers are 3 and 10.'
    assert spans.tree() == [
        'invoke_agent calculator',
        '  chat scripted',
        '  execute_tool add',
        '  execute_tool execute_tool_plan',
        '    execute_plan',
        '      plan_step s',
        '        execute_tool add',
        '  chat scripted',
    ]
    run = spans.one('invoke_agent calculator')
    assert attrs(run) == {
        'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'calculator', 'gen_ai.provider.name': 'scripted',
        'gen_ai.request.model': 'scripted', 'gen_ai.agent.description': 'Adds numbers.',
        'toolweave.agent.process_id': result.process.id, 'toolweave.agent.finish_reason': 'final_answer',
        'toolweave.usage.llm_calls': 2, 'toolweave.usage.input_tokens': result.usage.input_tokens,
        'toolweave.usage.output_tokens': result.usage.output_tokens, 'toolweave.usage.tool_calls': 2}
    first, second = spans.named('chat scripted')
    assert first.kind == trace.SpanKind.CLIENT
    assert attrs(first)['gen_ai.response.finish_reasons'] == ('tool_calls',)
    assert attrs(second)['gen_ai.response.finish_reasons'] == ('stop',)
    assert (attrs(first)['gen_ai.usage.input_tokens'] + attrs(second)['gen_ai.usage.input_tokens']
            == result.usage.input_tokens)
    calls = {attrs(span).get('gen_ai.tool.call.id') for span in spans.named('execute_tool add')}
    assert calls == {'call_1', None}  # the direct call answers the model's call; the plan step answers no call
    plan_call = attrs(spans.one('execute_tool execute_tool_plan'))
    assert plan_call['gen_ai.tool.call.id'] == 'call_2' and plan_call['gen_ai.agent.name'] == 'calculator'
    assert all(attrs(span)['gen_ai.agent.name'] == 'calculator' for span in spans.named('execute_tool add'))


async def test_a_sub_agent_run_nests_under_the_call_that_started_it(spans: Spans) -> None:
    helper = Agent(ScriptedModel([{'tool': 'add', 'arguments': {'a': 2, 'b': 2}}, 'four']), tools=[add],
                   name='helper', description='Adds.')
    boss = Agent(ScriptedModel([{'tool': 'helper', 'arguments': {'prompt': 'two and two'}}, 'It is four.']),
                 tools=[helper.as_tool()], name='boss')
    await boss.run('What is two and two?')
    assert spans.tree() == [
        'invoke_agent boss', '  chat scripted', '  execute_tool helper', '    invoke_agent helper',
        '      chat scripted', '      execute_tool add', '      chat scripted', '  chat scripted']
    inner = attrs(spans.one('invoke_agent helper'))
    assert inner['toolweave.agent.parent_process_id'] == attrs(spans.one('invoke_agent boss'))[
        'toolweave.agent.process_id']
    assert attrs(spans.one('execute_tool add'))['gen_ai.agent.name'] == 'helper'


async def test_a_streamed_run_records_the_time_to_the_first_chunk(spans: Spans) -> None:
    agent = Agent(ScriptedModel(['A streamed answer.'], latency=0.02), name='streamer')
    async with agent.run_stream('Hello') as stream:
        async for _ in stream:
            pass
    chat = attrs(spans.one('chat scripted'))
    assert chat['gen_ai.request.stream'] is True
    assert 0.02 <= chat['gen_ai.response.time_to_first_chunk'] < 5


async def test_model_settings_are_recorded_on_the_chat_span(spans: Spans) -> None:
    settings = toolweave.ModelSettings(temperature=0, max_tokens=64)
    await Agent(ScriptedModel(['ok']), settings=settings).run('Hello')
    chat = attrs(spans.one('chat scripted'))
    assert (chat['gen_ai.request.temperature'], chat['gen_ai.request.max_tokens']) == (0.0, 64)
    assert chat['gen_ai.request.stream'] is False


async def test_a_failing_model_fails_its_chat_span_and_the_run(spans: Spans) -> None:
    def broken(messages: Sequence[Any], tools: Sequence[Any]) -> str:
        raise ModelError('the provider is down')

    with pytest.raises(ModelError):
        await Agent(FunctionModel(broken), name='unlucky').run('Hello')
    for name in ('chat function', 'invoke_agent unlucky'):
        span = spans.one(name)
        assert (attrs(span)['error.type'], span.status.description) == ('ModelError', 'the provider is down')
        assert [event.name for event in span.events] == ['exception']


async def test_messages_follow_the_genai_message_shapes_when_content_is_recorded() -> None:
    with tracing(include_content=True) as spans:
        agent = Agent(ScriptedModel([{'tool': 'add', 'arguments': {'a': 1, 'b': 2}}, 'It is 3.']), tools=[add],
                      instructions='You add numbers.', name='adder')
        await agent.run('What is 1 + 2?')
    first, second = (attrs(span) for span in spans.named('chat scripted'))
    assert json.loads(first['gen_ai.system_instructions']) == [{'type': 'text', 'content': 'You add numbers.'}]
    assert json.loads(first['gen_ai.input.messages']) == [
        {'role': 'user', 'parts': [{'type': 'text', 'content': 'What is 1 + 2?'}]}]
    call = {'type': 'tool_call', 'id': 'call_1', 'name': 'add', 'arguments': {'a': 1, 'b': 2}}
    assert json.loads(first['gen_ai.output.messages']) == [
        {'role': 'assistant', 'finish_reason': 'tool_calls', 'parts': [call]}]
    assert json.loads(second['gen_ai.input.messages'])[1:] == [
        {'role': 'assistant', 'parts': [call]},
        {'role': 'tool', 'parts': [{'type': 'tool_call_response', 'id': 'call_1', 'response': '3'}]}]
    assert json.loads(second['gen_ai.output.messages']) == [{'role': 'assistant', 'finish_reason': 'stop', 'parts': [
        {'type': 'text', 'content': 'It is 3.'}]}]
    run = attrs(spans.one('invoke_agent adder'))
    assert json.loads(run['gen_ai.input.messages']) == [
        {'role': 'user', 'parts': [{'type': 'text', 'content': 'What is 1 + 2?'}]}]
    assert json.loads(run['gen_ai.output.messages'])[0]['parts'] == [{'type': 'text', 'content': 'It is 3.'}]
    assert json.loads(run['gen_ai.system_instructions']) == [{'type': 'text', 'content': 'You add numbers.'}]


async def test_long_message_parts_are_cut_and_stay_valid_json() -> None:
    with tracing(include_content=True, max_content_chars=8) as spans:
        await Agent(ScriptedModel([{'tool': 'add', 'arguments': {'a': 100000, 'b': 200000}}, 'A long answer.']),
                    tools=[add]).run('A long question?')
    first, second = (attrs(span) for span in spans.named('chat scripted'))
    assert json.loads(first['gen_ai.input.messages'])[0]['parts'][0]['content'] == (
        'A long q... [cut 8 of 16 characters]')
    [call] = json.loads(first['gen_ai.output.messages'])[0]['parts']
    assert call['arguments'] == '{"a":100... [cut 15 of 23 characters]'  # too long to keep as a JSON value
    assert json.loads(second['gen_ai.output.messages'])[0]['parts'][0]['content'] == (
        'A long a... [cut 6 of 14 characters]')


# --- the hidden call context never reaches a span -------------------------------------------------------------------

SECRET = 'sk-live-0123456789'


def everything_recorded(spans: Spans) -> str:
    """Every name, attribute, event and status of every span, as one text."""
    return json.dumps([{'name': span.name, 'attributes': attrs(span), 'status': span.status.description,
                        'events': [(event.name, dict(event.attributes or {})) for event in span.events],
                        'resource': dict(span.resource.attributes)} for span in spans.all], default=str)


async def test_the_call_context_never_appears_in_a_span_even_with_payloads_recorded() -> None:
    @tool
    def whoami(context: ToolCallContext) -> str:
        """Say which tenant is calling (never the token)."""
        return f"tenant {context['tenant']}"

    tools = [add, whoami, ToolPipeline.of(whoami, TextTool.from_function('upper', 'Upper-cases text', str.upper))]
    model = ScriptedModel([
        [{'tool': 'whoami', 'arguments': {}}, {'tool': 'whoami_then_upper', 'arguments': {}},
         {'tool': 'execute_tool_plan', 'arguments': {'steps': [
             {'id': 'w', 'tool': 'whoami', 'arguments': {}},
             {'id': 's', 'tool': 'add', 'arguments': {'a': 1, 'b': 2}}]}}],
        'Done.'])
    context = {'tenant': 'acme', 'api_token': SECRET, SECRET: 'as a key too'}
    with tracing(include_content=True, max_content_chars=100_000) as spans:
        async with toolweave.McpToolset(Toolset(tools)) as remote:
            result = await Agent(model, tools=remote, tool_planning=True, context=context).run('Who am I?')
            assert (await remote.get('whoami').call({}, context)).output == 'tenant acme'
    answers = [message.content for message in result.messages if isinstance(message, toolweave.ToolMessage)]
    assert answers[:2] == ['tenant acme', 'TENANT ACME'] and json.loads(answers[2]) == {'w': 'tenant acme', 's': 3}
    recorded = everything_recorded(spans)
    assert 'tenant acme' in recorded and 'execute_tool whoami' in recorded  # payloads were recorded...
    assert SECRET not in recorded and 'api_token' not in recorded  # ...the context was not


# --- MCP: trace context across the boundary --------------------------------------------------------------------------

@contextmanager
def in_a_span(spans: Spans, name: str) -> Iterator[trace.Span]:
    with spans.provider.get_tracer('test').start_as_current_span(name) as span:
        yield span


async def test_an_mcp_tool_call_is_annotated_and_nests_the_server_side_call(spans: Spans) -> None:
    async with toolweave.McpToolset(Toolset([add]), label='numbers') as remote:
        await remote.get('add').call({'a': 1, 'b': 2})
    assert spans.tree() == ['execute_tool add', '  execute_tool add']
    client, server = spans.named('execute_tool add')[::-1]
    assert spans.parent(server) is client
    assert attrs(client) | {'gen_ai.tool.type': 'extension'} == attrs(client)
    assert {key: attrs(client)[key] for key in ('mcp.method.name', 'toolweave.mcp.server', 'toolweave.mcp.tool')} == {
        'mcp.method.name': 'tools/call', 'toolweave.mcp.server': 'numbers', 'toolweave.mcp.tool': 'add'}
    assert attrs(server)['gen_ai.tool.type'] == 'function'


async def test_over_http_the_trace_context_travels_in_meta_and_stays_out_of_the_served_context(spans: Spans) -> None:
    from toolweave.mcp import serve_http

    @tool
    def whoami(context: ToolCallContext) -> dict[str, Any]:
        """Report the call context this tool received."""
        return context.to_map()

    urls: list[str] = []
    listening = anyio.Event()

    def started(url: str) -> None:
        urls.append(url)
        listening.set()

    async with anyio.create_task_group() as group:  # the server's tasks start outside any span
        group.start_soon(lambda: serve_http([add, whoami], port=0, on_started=started))
        with anyio.fail_after(20):
            await listening.wait()
        with in_a_span(spans, 'request') as request:
            async with toolweave.McpToolset.http(urls[0]) as remote:
                added = await remote.get('add').call({'a': 20, 'b': 22})
                who = await remote.get('whoami').call({}, {'tenant': 'acme'})
        group.cancel_scope.cancel()
    assert added.output == '42'
    assert who.value == {'tenant': 'acme'}  # no `traceparent` in the served call's context
    trace_id = request.get_span_context().trace_id
    client, server = sorted(spans.named('execute_tool add'), key=lambda span: span.start_time or 0)
    assert spans.parent(client) is spans.one('request')
    assert spans.parent(server) is client  # linked by the `traceparent` in the request's `_meta`, and only by it
    assert {span.context.trace_id for span in spans.all} == {trace_id}


def traceparent(span: ReadableSpan) -> str:
    """The W3C `traceparent` that names `span` as the parent."""
    context = span.context
    return f'00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}'


GLOBAL_PROVIDER_RUN = """
import anyio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import toolweave
from toolweave.mcp import serve_http

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
toolweave.instrument()


@toolweave.tool
def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b


async def main() -> None:
    urls = []
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: serve_http([add], port=0, on_started=urls.append))
        while not urls:
            await anyio.sleep(0.01)
        async with toolweave.McpToolset.http(urls[0]) as remote:
            await remote.get('add').call({'a': 1, 'b': 2})
        group.cancel_scope.cancel()


anyio.run(main)
spans = exporter.get_finished_spans()
ids = {span.context.span_id: span for span in spans}
[root] = [span for span in spans if span.name == 'execute_tool add' and span.parent is None]
for span in spans:
    if span.context.trace_id != root.context.trace_id:  # the connection's own requests: discovery, listing
        continue
    parent = ids.get(span.parent.span_id) if span.parent else None
    print(f'{span.name} ({span.kind.name.lower()}) <- {parent.name if parent else None}')
"""


def test_with_the_global_provider_the_mcp_sdks_spans_sit_between_toolweaves() -> None:
    # A process of its own: the global tracer provider can be set once per process.
    run = subprocess.run([sys.executable, '-c', GLOBAL_PROVIDER_RUN], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert sorted(run.stdout.splitlines()) == [
        'MCP send tools/call add (client) <- execute_tool add',
        'execute_tool add (internal) <- None',
        'execute_tool add (internal) <- tools/call add',
        'tools/call add (server) <- MCP send tools/call add',
    ]


async def test_a_server_in_another_process_receives_the_w3c_traceparent_in_meta(spans: Spans) -> None:
    from mcp_server_fixture import __file__ as fixture

    async with toolweave.McpToolset.stdio(sys.executable, [fixture, 'raw']) as remote:
        with in_a_span(spans, 'request'):
            echoed = await remote.get('meta_echo').call({}, {'tenantId': 'acme'})
    assert json.loads(echoed.output)['meta'] == {
        'tenantId': 'acme', 'traceparent': traceparent(spans.one('execute_tool meta_echo'))}


@pytest.mark.parametrize('mode', ['auto', 'legacy'])
async def test_a_served_call_that_waits_for_the_clients_approval_stays_in_the_trace(mode: str, spans: Spans) -> None:
    import mcp_types as types
    from mcp import Client

    from toolweave.mcp import mcp_server

    @tool(requires_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file."""
        return f'deleted {path}'

    async def elicit(context: Any, params: Any) -> Any:
        return types.ElicitResult(action='accept', content={'approve': True})

    # On 2026-07-28 connections (`auto`) the call runs paused in the server's own task group while the client is
    # asked; on handshake connections (`legacy`) it runs in the request.
    async with Client(mcp_server([delete_file]), mode=mode, elicitation_callback=elicit) as client:
        with in_a_span(spans, 'request'):
            result = await client.call_tool('delete_file', {'path': '/tmp/x'})
    assert not result.is_error
    assert spans.tree() == ['request', '  execute_tool delete_file']


async def test_trace_context_keys_are_protocol_keys_not_call_context() -> None:
    from toolweave.mcp import context_from_meta, is_reserved_meta_key

    meta = {'traceparent': '00-' + '1' * 32 + '-' + '2' * 16 + '-01', 'tracestate': 'a=b', 'baggage': 'k=v',
            'tenant': 'acme'}
    assert [is_reserved_meta_key(key) for key in meta] == [True, True, True, False]
    assert context_from_meta(meta) == ToolCallContext.of(tenant='acme')


async def test_a_gateway_passes_the_trace_on_to_its_upstream_servers(tmp_path: Any, spans: Spans) -> None:
    from mcp import Client

    from gateway_upstream import __file__ as upstream
    from toolweave.mcp import McpGateway

    config = {'mcpServers': {'alpha': {'command': sys.executable, 'args': [upstream, 'sdk']}}}
    async with McpGateway(config, log_dir=tmp_path) as gateway, Client(gateway.server()) as client:
        with in_a_span(spans, 'client') as root:
            direct = await client.call_tool('meta_echo', {})
            planned = await client.call_tool('execute_tool_plan', {'steps': [
                {'id': 'e', 'tool': 'meta_echo', 'arguments': '{}'}]})
    assert direct.structured_content is not None and planned.structured_content is not None
    echoed = [direct.structured_content['meta'], planned.structured_content['results']['e']['meta']]
    gateway_calls = sorted(spans.named('execute_tool meta_echo'), key=lambda span: span.start_time or 0)
    assert len(gateway_calls) == 2
    for meta, call in zip(echoed, gateway_calls, strict=True):
        # the upstream process received the trace of the gateway's call, and nothing else (no context keys)
        assert meta == {'traceparent': traceparent(call)}
        assert call.context.trace_id == root.get_span_context().trace_id
        assert attrs(call)['toolweave.mcp.server'] == 'alpha'
    step = spans.parent(gateway_calls[1])
    assert step is not None and step.name == 'plan_step e'


# --- inside another framework's traced agent ---------------------------------------------------------------------

async def test_a_pydantic_ai_agent_traced_on_the_same_provider_shows_the_plan_inside_its_tool_call(
        spans: Spans) -> None:
    from pydantic_ai import Agent as PydanticAgent
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo
    from pydantic_ai.models.function import FunctionModel as PydanticFunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings as PydanticInstrumentation

    from toolweave.integrations.pydantic_ai import ToolPlanning

    plan = {'steps': [{'id': 'paris', 'tool': 'temperature', 'arguments': '{"city": "Paris"}'},
                      {'id': 'tokyo', 'tool': 'temperature', 'arguments': '{"city": "Tokyo"}'}]}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('execute_tool_plan', plan)])
        return ModelResponse(parts=[TextPart('Tokyo is warmer.')])

    traced = Instrumentation(settings=PydanticInstrumentation(tracer_provider=spans.provider))
    agent = PydanticAgent(PydanticFunctionModel(model), name='weather', capabilities=[ToolPlanning(), traced])

    @agent.tool_plain
    def temperature(city: str) -> float:
        """The temperature in a city, in degrees Celsius."""
        return {'Paris': 18.0, 'Tokyo': 24.0}[city]

    assert (await agent.run('Which is warmer?')).output == 'Tokyo is warmer.'
    tree = spans.tree()
    # pydantic-ai's tool span, then toolweave's call of its plan tool, the plan, and a span per step
    start = tree.index('  execute_tool execute_tool_plan')
    assert tree[0] == 'invoke_agent weather' and tree[start:start + 7] == [
        '  execute_tool execute_tool_plan', '    execute_tool execute_tool_plan', '      execute_plan',
        '        plan_step paris', '          execute_tool temperature',
        '        plan_step tokyo', '          execute_tool temperature']


# --- the attribute names are the OpenTelemetry GenAI conventions' --------------------------------------------------

def test_attribute_names_match_the_semantic_conventions_package() -> None:
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
    from opentelemetry.semconv.attributes import error_attributes

    from toolweave import _tracing

    expected = {
        'OPERATION': gen_ai.GEN_AI_OPERATION_NAME, 'PROVIDER': gen_ai.GEN_AI_PROVIDER_NAME,
        'REQUEST_MODEL': gen_ai.GEN_AI_REQUEST_MODEL, 'RESPONSE_MODEL': gen_ai.GEN_AI_RESPONSE_MODEL,
        'AGENT_NAME': gen_ai.GEN_AI_AGENT_NAME, 'AGENT_DESCRIPTION': gen_ai.GEN_AI_AGENT_DESCRIPTION,
        'TOOL_NAME': gen_ai.GEN_AI_TOOL_NAME, 'TOOL_DESCRIPTION': gen_ai.GEN_AI_TOOL_DESCRIPTION,
        'TOOL_TYPE': gen_ai.GEN_AI_TOOL_TYPE, 'TOOL_CALL_ID': gen_ai.GEN_AI_TOOL_CALL_ID,
        'TOOL_CALL_ARGUMENTS': gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS, 'TOOL_CALL_RESULT': gen_ai.GEN_AI_TOOL_CALL_RESULT,
        'INPUT_TOKENS': gen_ai.GEN_AI_USAGE_INPUT_TOKENS, 'OUTPUT_TOKENS': gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS,
        'FINISH_REASONS': gen_ai.GEN_AI_RESPONSE_FINISH_REASONS, 'REQUEST_MAX_TOKENS': gen_ai.GEN_AI_REQUEST_MAX_TOKENS,
        'REQUEST_TEMPERATURE': gen_ai.GEN_AI_REQUEST_TEMPERATURE, 'REQUEST_STREAM': gen_ai.GEN_AI_REQUEST_STREAM,
        'TIME_TO_FIRST_CHUNK': gen_ai.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
        'INPUT_MESSAGES': gen_ai.GEN_AI_INPUT_MESSAGES, 'OUTPUT_MESSAGES': gen_ai.GEN_AI_OUTPUT_MESSAGES,
        'SYSTEM_INSTRUCTIONS': gen_ai.GEN_AI_SYSTEM_INSTRUCTIONS, 'ERROR_TYPE': error_attributes.ERROR_TYPE,
    }
    assert {name: getattr(_tracing, name) for name in expected} == expected
    operations = {value.value for value in gen_ai.GenAiOperationNameValues}
    assert {'invoke_agent', 'chat', 'execute_tool'} <= operations


# --- the docs' OTLP setup, against a real OTLP/HTTP endpoint ------------------------------------------------------

class _OtlpReceiver(http.server.BaseHTTPRequestHandler):
    """A local OTLP/HTTP endpoint: keeps the body of every `POST /v1/traces` and answers as a collector does."""

    received: list[bytes] = []

    def do_POST(self) -> None:  # the name http.server calls
        body = self.rfile.read(int(self.headers['Content-Length']))
        if self.path == '/v1/traces' and self.headers['Content-Type'] == 'application/x-protobuf':
            self.received.append(body)
            self.send_response(200)
        else:
            self.send_response(404)
        self.send_header('Content-Type', 'application/x-protobuf')
        self.send_header('Content-Length', '0')
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # keep the test output clean
        pass


def test_the_otlp_setup_of_the_docs_sends_spans_to_an_otlp_endpoint() -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    page = (Path(__file__).parent.parent / 'docs' / 'observability.md').read_text()
    section = page[page.index('## Traces in your backend: OTLP'):]
    setup = section.split('```python\n', 1)[1].split('```\n', 1)[0]
    script = setup + textwrap.dedent('''
        @toolweave.tool
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        print(add.call_sync({'a': 1, 'b': 2}).output)
        provider.shutdown()  # flushes the batch
    ''')
    _OtlpReceiver.received = []
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _OtlpReceiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        env = {**os.environ, 'OTEL_EXPORTER_OTLP_ENDPOINT': f'http://127.0.0.1:{server.server_port}'}
        run = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, env=env, timeout=60)
    finally:
        server.shutdown()
    assert (run.returncode, run.stdout, run.stderr) == (0, '3\n', '')
    spans = []
    for body in _OtlpReceiver.received:
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource.resource.attributes}['service.name']
            spans += [(service, span.name, {a.key: a.value.string_value for a in span.attributes})
                      for scope in resource.scope_spans for span in scope.spans]
    assert [(service, name) for service, name, _ in spans] == [('my-agent', 'execute_tool add')]
    assert spans[0][2]['gen_ai.tool.name'] == 'add'
