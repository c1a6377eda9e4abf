"""ToolPipeline: steps, naming, error strategies, adapters, failures, signals, nesting, approval, metrics, and the
structured-value rules of `toolweave.pipeline`."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from toolweave import (
    GLOBAL_METRICS,
    AutoApproveHandler,
    ErrorStrategy,
    ExitEarly,
    PipelineStep,
    ReviewDecision,
    ReviewRequest,
    TextTool,
    Tool,
    ToolCallContext,
    ToolConfigurationError,
    ToolDefinition,
    ToolNameError,
    ToolPipeline,
    ToolResult,
    Toolset,
    UserError,
    requires_approval,
    tool,
    use_review_handler,
)
from toolweave.tools import ToolArguments

pytestmark = pytest.mark.anyio

Behaviour = str | ToolResult | BaseException | Callable[[str], Any] | None


class Step(TextTool):
    """A text step that records every input it receives."""

    def __init__(self, name: str, behaviour: Behaviour = None) -> None:
        super().__init__(name, f'test step {name}')
        self.behaviour = behaviour
        self.inputs: list[str] = []
        self.contexts: list[ToolCallContext] = []

    async def run(self, text: str, context: ToolCallContext) -> Any:  # type: ignore[override]
        self.inputs.append(text)
        self.contexts.append(context)
        if isinstance(self.behaviour, BaseException):
            raise self.behaviour
        if callable(self.behaviour):
            return self.behaviour(text)
        return self.behaviour


def prefix(p: str, name: str | None = None) -> Step:
    return Step(name or f'prefix_{p.strip(":").lower()}', lambda text: p + text)


def suffix(s: str, name: str) -> Step:
    return Step(name, lambda text: text + s)


async def test_single_step() -> None:
    result = await ToolPipeline.of('single', 'Single step', prefix('A:')).call('hello')
    assert (result.ok, result.output) == (True, 'A:hello')


async def test_each_output_is_next_input() -> None:
    step_a, step_b = suffix('_processed', 'step_a'), suffix('_done', 'step_b')
    result = await ToolPipeline.of(step_a, step_b).call('start')
    assert step_a.inputs == ['start'] and step_b.inputs == ['start_processed']
    assert result.output == 'start_processed_done'


async def test_three_steps() -> None:
    result = await ToolPipeline.of(prefix('A:'), prefix('B:'), prefix('C:')).call('x')
    assert result.output == 'C:B:A:x'


def test_auto_name_and_description() -> None:
    pipeline = ToolPipeline.of(Step('step_a'), Step('step_b'))
    assert (pipeline.name, pipeline.description) == ('step_a_then_step_b', 'Pipeline: step_a -> step_b')


def test_auto_names_for_one_and_three_steps() -> None:
    solo = ToolPipeline.of(Step('solo'))
    assert (solo.name, solo.description) == ('solo', 'Pipeline: solo')
    three = ToolPipeline.of(Step('a'), Step('b'), Step('c'))
    assert (three.name, three.description) == ('a_then_b_then_c', 'Pipeline: a -> b -> c')


def test_explicit_name_and_description_verbatim() -> None:
    pipeline = ToolPipeline.of('search_and_save', 'Search, then save it.', Step('a'), Step('b'))
    assert (pipeline.name, pipeline.description) == ('search_and_save', 'Search, then save it.')
    built = ToolPipeline.builder().name('my_pipeline').description('What it does').step(Step('a')).build()
    assert (built.name, built.description) == ('my_pipeline', 'What it does')


def test_auto_name_longer_than_64_chars_asks_for_a_name() -> None:
    steps = [Step(f'step_number_{i}') for i in range(5)]
    with pytest.raises(ToolNameError, match='longer than 64 characters. Name the pipeline'):
        ToolPipeline.of(*steps)
    assert ToolPipeline.of('short', 'desc', *steps).name == 'short'


async def test_no_steps_passes_through() -> None:
    pipeline = ToolPipeline.builder().name('empty').description('nothing').build()
    assert (await pipeline.call('pass-through')).output == 'pass-through'
    empty = await pipeline.call(None)
    assert (empty.ok, empty.output) == (True, '')
    assert (await pipeline.call('{"input": "wrapped"}')).output == 'wrapped'
    assert ToolPipeline([], name='bare', description='d').steps == ()


async def test_none_input_reaches_first_step_as_empty_text() -> None:
    first = Step('first', 'ok')
    await ToolPipeline.of(first, Step('second', 'x')).call(None)
    assert first.inputs == ['']


async def test_fail_fast_is_default_and_returns_the_exact_failure() -> None:
    failure = ToolResult.failure('step1 error')
    step2 = Step('step2', 'never')
    pipeline = ToolPipeline.of(Step('step1', failure), step2)
    assert pipeline.error_strategy is ErrorStrategy.FAIL_FAST
    result = await pipeline.call('x')
    assert result == failure and result.text == 'Error: step1 error'
    assert step2.inputs == []


async def test_middle_step_fails() -> None:
    step3 = Step('c', 'never')
    result = await ToolPipeline.of(Step('a', 'ok'), Step('b', ToolResult.failure('B failed')), step3).call('x')
    assert result.error == 'B failed' and step3.inputs == []


async def test_last_step_fails() -> None:
    result = await ToolPipeline.of(Step('a', 'ok'), Step('b', ToolResult.failure('last failed'))).call('x')
    assert result.error == 'last failed'


def recording(calls: list[ToolResult]) -> Callable[[ToolResult], str]:
    def adapter(result: ToolResult) -> str:
        calls.append(result)
        return 'adapted'

    return adapter


def continuing(*steps: Tool) -> ToolPipeline:
    builder = ToolPipeline.builder().name('resilient').description('keeps going')
    for step in steps:
        builder.step(step)
    return builder.error_strategy(ErrorStrategy.CONTINUE_ON_FAILURE).build()


async def test_continue_forwards_the_error_message() -> None:
    step_b = suffix('_done', 'step_b')
    result = await continuing(Step('step_a', ToolResult.failure('step_a_error')), step_b).call('x')
    assert step_b.inputs == ['step_a_error']
    assert (result.ok, result.output) == (True, 'step_a_error_done')


async def test_continue_runs_every_step() -> None:
    a, b, c = Step('a', 'a_out'), Step('b', ToolResult.failure('b_error')), Step('c', 'c_out')
    await continuing(a, b, c).call('x')
    assert (a.inputs, b.inputs, c.inputs) == (['x'], ['a_out'], ['b_error'])


async def test_continue_normalises_a_missing_message() -> None:
    b = Step('b', 'ok')
    await continuing(Step('a', ToolResult.failure(None)), b).call('x')
    assert b.inputs == ['Tool execution failed with no message']


async def test_continue_result_is_the_last_steps_result() -> None:
    final = await continuing(Step('a', 'ok'), Step('b', ToolResult.failure('final_error'))).call('x')
    assert final.error == 'final_error'
    recovered = await continuing(Step('a', ToolResult.failure('oops')), Step('b', 'fine')).call('x')
    assert (recovered.ok, recovered.output) == (True, 'fine')


async def test_adapter_transforms_output() -> None:
    b = Step('b', 'ok')
    pipeline = (ToolPipeline.builder().name('p').description('d').step(Step('a', 'raw_output'))
                .adapter(lambda result: result.output.upper()).step(b).build())
    await pipeline.call('x')
    assert b.inputs == ['RAW_OUTPUT']


async def test_adapter_on_last_step_is_never_called() -> None:
    calls: list[ToolResult] = []
    pipeline = (ToolPipeline.builder().name('p').description('d').step(Step('a', 'raw'))
                .adapter(recording(calls)).build())
    assert (await pipeline.call('x')).output == 'raw' and calls == []


async def test_adapter_applies_only_to_the_step_it_follows() -> None:
    c = Step('c', lambda text: text)
    pipeline = (ToolPipeline.builder().name('p').description('d')
                .step(Step('a', 'original')).adapter(lambda result: f'adapted:{result.output}')
                .step(Step('b', lambda text: text)).step(c).build())
    result = await pipeline.call('x')
    assert c.inputs == ['adapted:original'] and result.output == 'adapted:original'


@dataclass
class Payload:
    value: int


class PayloadTool(Tool):
    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition('payload', 'returns a payload')

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        return ToolResult.success('42', Payload(42))


async def test_adapter_sees_the_structured_payload() -> None:
    b = Step('b', 'ok')
    pipeline = (ToolPipeline.builder().name('p').description('d').step(PayloadTool())
                .adapter(lambda result: f'value={result.value.value}').step(b).build())
    await pipeline.call('x')
    assert b.inputs == ['value=42']


async def test_adapter_not_called_after_a_failure() -> None:
    calls: list[ToolResult] = []
    b = Step('b', 'ok')
    pipeline = (ToolPipeline.builder().name('p').description('d')
                .step(Step('a', ToolResult.failure('error_from_a'))).adapter(recording(calls))
                .step(b).error_strategy(ErrorStrategy.CONTINUE_ON_FAILURE).build())
    await pipeline.call('x')
    assert b.inputs == ['error_from_a'] and calls == []


async def test_adapter_returning_none_gives_empty_text() -> None:
    b = Step('b', 'ok')
    pipeline = (ToolPipeline.builder().name('p').description('d').step(Step('a', 'out')).adapter(lambda r: None)
                .step(b).build())
    await pipeline.call('x')
    assert b.inputs == ['']


async def test_adapter_that_raises_fails_the_pipeline_even_under_continue() -> None:
    def broken(result: ToolResult) -> str:
        raise ValueError('adapter exploded')

    b = Step('b', 'never')
    pipeline = (ToolPipeline.builder().name('p').description('d').step(Step('a', 'out')).adapter(broken)
                .step(b).error_strategy(ErrorStrategy.CONTINUE_ON_FAILURE).build())
    result = await pipeline.call('x')
    assert (result.ok, result.error) == (False, 'adapter exploded') and b.inputs == []


async def test_a_raising_step_under_fail_fast_names_the_step(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger='toolweave.tools')
    step2 = Step('step2', 'never')
    result = await ToolPipeline.of(Step('throwing_step', RuntimeError('boom from plain tool')), step2).call('x')
    assert (result.error, result.raised) == ("Step 'throwing_step' threw: boom from plain tool", True)
    assert step2.inputs == []
    assert any("'throwing_step' failed" in r.getMessage() and 'boom from plain tool' in r.getMessage()
               for r in caplog.records)


async def test_a_raising_step_under_continue_hands_on_the_named_failure() -> None:
    step2 = Step('step2', lambda text: f'handled: {text}')
    result = await continuing(Step('throwing_step', RuntimeError('boom')), step2).call('x')
    assert step2.inputs == ["Step 'throwing_step' threw: boom"]
    assert (result.ok, result.output) == (True, "handled: Step 'throwing_step' threw: boom")


async def test_exception_without_message() -> None:
    result = await ToolPipeline.of(Step('silent', RuntimeError())).call('x')
    assert result.error == 'Tool execution failed with no message'


class RaisingTool(Tool):
    """A bare `Tool` subclass (no TextTool) whose body raises."""

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition('raiser', 'raises')

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        raise RuntimeError('boom')


async def test_any_raising_tool_as_a_step_is_named_and_a_returned_failure_is_not() -> None:
    result = await ToolPipeline.of(RaisingTool(), Step('after', 'x')).call('x')
    assert result.error == "Step 'raiser' threw: boom"
    returned = await ToolPipeline.of(TextTool.from_function('refuser', 'r', lambda text: ToolResult.failure('no')),
                                     Step('after', 'x')).call('x')
    assert returned.error == 'no'


async def test_step_returning_none_is_empty_success() -> None:
    b = Step('b', lambda text: f'[{text}]')
    result = await ToolPipeline.of(Step('a', None), b).call('x')
    assert b.inputs == [''] and result.output == '[]'


@pytest.mark.parametrize('strategy', list(ErrorStrategy))
@pytest.mark.parametrize('signal', [ExitEarly('reviewer stopped'), ToolConfigurationError('misconfigured')])
async def test_signals_and_configuration_errors_propagate(strategy: ErrorStrategy, signal: Exception) -> None:
    after = Step('after', 'never')
    pipeline = ToolPipeline([Step('a', 'ok'), Step('b', signal), after], name='p', error_strategy=strategy)
    with pytest.raises(type(signal), match=str(signal)):
        await pipeline.call('x')
    assert after.inputs == []


@pytest.mark.parametrize(('build', 'message'), [
    (lambda: ToolPipeline.builder().description('d').build(), 'name'),
    (lambda: ToolPipeline.builder().name('  '), 'name'),
    (lambda: ToolPipeline.builder().name('p').description(' ').build(), 'description'),
    (lambda: ToolPipeline.builder().name('p').build(), 'description'),
    (lambda: ToolPipeline.builder().step(None), 'step tool'),  # type: ignore[arg-type]
    (lambda: ToolPipeline.builder().step(len), 'step tool'),  # type: ignore[arg-type]
    (lambda: ToolPipeline.builder().adapter(str), r'adapter\(\) must be called after a step\(\)'),
    (lambda: ToolPipeline.builder().step(Step('a')).adapter(None), 'adapter'),  # type: ignore[arg-type]
    (lambda: ToolPipeline.builder().error_strategy(None), 'error_strategy'),  # type: ignore[arg-type]
    (lambda: ToolPipeline.builder().error_strategy('fail_fast'), 'error_strategy'),  # type: ignore[arg-type]
    (lambda: ToolPipeline.of(None), 'first step'),  # type: ignore[arg-type]
    (lambda: ToolPipeline.of(), 'first step'),
    (lambda: ToolPipeline.of(Step('a'), None), 'None elements'),  # type: ignore[arg-type] # "null elements"
    (lambda: ToolPipeline.of('name_only'), 'description'),
    (lambda: ToolPipeline.of('p', '', Step('a')), 'description'),
    (lambda: ToolPipeline.of(Step('a'), 'not a tool'), 'step tool'),
    (lambda: ToolPipeline([Step('a')], name='p', error_strategy='continue'), 'error_strategy'),  # type: ignore[arg-type]
])
def test_builder_validation(build: Callable[[], object], message: str) -> None:
    with pytest.raises(UserError, match=message):
        build()


def test_bad_pipeline_name_follows_the_tool_name_rule() -> None:
    with pytest.raises(ToolNameError, match='web search'):
        ToolPipeline.of('web search', 'd', Step('a'))


async def test_second_adapter_replaces_the_first() -> None:
    b = Step('b', 'ok')
    pipeline = (ToolPipeline.builder().name('p').description('d').step(Step('a', 'out'))
                .adapter(lambda r: 'first').adapter(lambda r: 'second').step(b).build())
    await pipeline.call('x')
    assert b.inputs == ['second']
    assert pipeline.stages[0].adapter is not None and pipeline.stages[1].adapter is None


def test_steps_and_error_strategy_accessors() -> None:
    a, b = Step('a'), Step('b')
    pipeline = ToolPipeline.of(a, b)
    assert pipeline.steps == (a, b) and isinstance(pipeline.steps, tuple)
    with pytest.raises(AttributeError):
        pipeline.steps.append(Step('c'))  # type: ignore[attr-defined]
    assert pipeline.error_strategy is ErrorStrategy.FAIL_FAST
    assert continuing(a).error_strategy is ErrorStrategy.CONTINUE_ON_FAILURE


async def test_nesting() -> None:
    inner = ToolPipeline.of('inner', 'desc', prefix('A:'), prefix('B:'))
    tool_c = Step('tool_c', lambda text: f'C({text})')
    outer = ToolPipeline.of('outer', 'desc', inner, tool_c)
    assert (await outer.call('x')).output == 'C(B:A:x)' and tool_c.inputs == ['B:A:x']

    failing_inner = ToolPipeline.of('inner_fails', 'desc', Step('boom', ToolResult.failure('inner failed')))
    after = Step('after', 'never')
    result = await ToolPipeline.of('outer2', 'desc', failing_inner, after).call('x')
    assert result.error == 'inner failed' and after.inputs == []

    assert ToolPipeline.of(inner, tool_c).name == 'inner_then_tool_c'


async def test_one_tool_with_one_input_string_and_each_step_runs_once() -> None:
    a, b = Step('a', lambda t: t + '1'), Step('b', lambda t: t + '2')
    pipeline = ToolPipeline.of(a, b)
    assert pipeline.definition.parameters == {
        'type': 'object',
        'properties': {'input': {'type': 'string', 'description': 'The input to pass to the tool'}},
        'required': ['input'],
    }
    toolset = Toolset([pipeline])
    assert toolset.names == ['a_then_b']
    result = await toolset.get('a_then_b').call('{"input": "go"}')
    assert result.output == 'go12' and (a.inputs, b.inputs) == (['go'], ['go1'])


class ContextProbe(Tool):
    def __init__(self, name: str) -> None:
        self._definition = ToolDefinition(name, 'records its context')
        self.contexts: list[ToolCallContext] = []

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        self.contexts.append(context)
        return ToolResult.success('seen')


class RecordingHandler:
    def __init__(self, decision: ReviewDecision | None = None) -> None:
        self.requests: list[ReviewRequest] = []
        self.decision = decision or ReviewDecision.approve()

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        self.requests.append(request)
        return self.decision


async def test_context_and_review_handler_reach_nested_steps() -> None:
    outer_probe, inner_probe = ContextProbe('outer_probe'), ContextProbe('inner_probe')
    gated = requires_approval(Step('gated', 'approved run'))
    inner = ToolPipeline.of('inner', 'desc', inner_probe, gated)
    handler = RecordingHandler()
    pipeline = ToolPipeline.of('outer', 'desc', outer_probe, inner)
    with use_review_handler(handler):
        result = await pipeline.call('x', {'tenant': 'acme'})
    assert result.output == 'approved run'
    assert outer_probe.contexts == inner_probe.contexts == [ToolCallContext.of(tenant='acme')]
    assert [r.tool_name for r in handler.requests] == ['gated']
    assert handler.requests[0].context == ToolCallContext.of(tenant='acme')

    own = RecordingHandler(ReviewDecision.edit('edited'))
    local = ToolPipeline([inner_probe, gated], name='local', review_handler=own)
    assert local.review_handler is own
    assert (await local.call('x')).output == 'approved run'  # the handler installed by the pipeline answered
    assert len(own.requests) == 1


async def test_metrics_for_the_pipeline_and_each_step() -> None:
    ok = ToolPipeline.of('metered', 'd', Step('m_a', 'a'), Step('m_b', 'b'))
    await ok.call('x')
    await ok.call('y')
    failing = ToolPipeline.of('metered_fail', 'd', Step('m_c', ToolResult.failure('no')), Step('m_d', 'd'))
    await failing.call('x')
    stats = GLOBAL_METRICS.snapshot()
    assert (stats['metered'].calls, stats['metered'].successes) == (2, 2)
    assert (stats['m_a'].calls, stats['m_b'].calls) == (2, 2)
    assert (stats['metered_fail'].failures, stats['m_c'].failures) == (1, 1)
    assert 'm_d' not in stats


# --- structured values between typed steps ---

@tool
def parse_pair(text: str) -> dict[str, int]:
    """Parse `a,b` into two numbers."""
    a, b = text.split(',')
    return {'a': int(a), 'b': int(b)}


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def double(n: int) -> int:
    """Double a number."""
    return n * 2


class Report(BaseModel):
    title: str
    words: int


@tool
def summarise(text: str) -> Report:
    """Summarise a text."""
    return Report(title=text.split()[0], words=len(text.split()))


@tool
def render(report: Report) -> str:
    """Render a report."""
    return f'{report.title} ({report.words} words)'


@tool
def ping() -> str:
    """Takes nothing."""
    return 'pong'


async def test_dict_value_becomes_the_next_steps_arguments() -> None:
    result = await ToolPipeline.of(parse_pair, add, double).call({'text': '3,4'})
    assert (result.ok, result.output, result.value) == (True, '14', 14)


async def test_first_typed_step_exposes_its_schema() -> None:
    pipeline = ToolPipeline.of(add, double)
    assert pipeline.definition.parameters == add.definition.parameters
    assert (await pipeline.call('{"a": 2, "b": 5}')).output == '14'
    invalid = await pipeline.call('{"a": "x"}')
    assert not invalid.ok and 'b' in (invalid.error or '') and 'add' in (invalid.error or '')


async def test_model_value_flows_into_a_model_parameter() -> None:
    result = await ToolPipeline.of(summarise, render).call({'text': 'toolweave makes agents fast'})
    assert result.output == 'toolweave (4 words)'


async def test_text_into_single_typed_parameter_is_parsed_as_json() -> None:
    result = await ToolPipeline.of(Step('emit', '21'), double).call('x')
    assert result.output == '42'
    wrong = await ToolPipeline.of(Step('emit_text', 'twenty'), double).call('x')
    assert not wrong.ok and 'n' in (wrong.error or '')


async def test_value_into_text_step_is_json_text() -> None:
    sink = Step('sink', lambda text: text)
    await ToolPipeline.of(parse_pair, sink).call({'text': '1,2'})
    assert json.loads(sink.inputs[0]) == {'a': 1, 'b': 2}


async def test_adapter_may_return_a_mapping_or_be_async() -> None:
    async def to_args(result: ToolResult) -> dict[str, int]:
        await anyio.lowlevel.checkpoint()
        return {'a': len(result.output), 'b': 1}

    pipeline = ToolPipeline([PipelineStep(Step('word', 'four'), to_args), add], name='adapted')
    assert (await pipeline.call('x')).output == '5'


async def test_step_without_parameters_is_called_with_none() -> None:
    result = await ToolPipeline.of(Step('first', 'ignored'), ping).call('x')
    assert result.output == 'pong'


async def test_text_into_multi_parameter_step_is_raw_json_arguments() -> None:
    result = await ToolPipeline.of(Step('json_out', '{"a": 1, "b": 2}'), add).call('x')
    assert result.output == '3'
    bad = await ToolPipeline.of(Step('not_json', 'plain words'), add).call('x')
    assert not bad.ok and 'Invalid JSON' in (bad.error or '')


async def test_huge_output_flows_unchanged() -> None:
    big = 'x' * 1_000_000
    result = await ToolPipeline.of(Step('big', big), Step('length', lambda t: str(len(t)))).call('go')
    assert result.output == '1000000'


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_cancellation_stops_the_pipeline(anyio_backend: str) -> None:
    started = anyio.Event()

    async def hang(text: str) -> str:
        started.set()
        await anyio.sleep_forever()
        return text  # pragma: no cover

    after = Step('after', 'never')
    pipeline = ToolPipeline.of(Step('before', 'ok'), TextTool.from_function('hang', 'hangs', hang), after)
    with anyio.move_on_after(0.2) as scope:
        await pipeline.call('x')
    assert scope.cancelled_caught and started.is_set() and after.inputs == []


def test_wrong_review_handler_type_is_a_configuration_error() -> None:
    # through the pipeline: the handler is checked when the pipeline is built.
    with pytest.raises(ToolConfigurationError, match="Tool 'p' is misconfigured: review_handler must be an instance"):
        ToolPipeline([Step('a')], name='p', review_handler=object())  # type: ignore[arg-type]
    ok = ToolPipeline.builder().name('p').description('d').review_handler(AutoApproveHandler()).build()
    assert isinstance(ok.review_handler, AutoApproveHandler)


def test_repr_and_call_sync() -> None:
    pipeline = ToolPipeline.of(prefix('A:'), prefix('B:'))
    assert repr(pipeline) == "ToolPipeline(name='prefix_a_then_prefix_b', steps=['prefix_a', 'prefix_b'])"
    assert pipeline.call_sync('z').output == 'B:A:z'


def test_steps_must_be_a_list() -> None:
    with pytest.raises(UserError, match=r'steps of ToolPipeline must be a list of tools'):
        ToolPipeline(Step('a'))  # type: ignore[arg-type]


async def test_one_model_tool_call_runs_every_step_once() -> None:
    from toolweave import Agent
    from toolweave.testing import ScriptedModel

    a, b = Step('clean', lambda t: t.strip()), Step('shout', lambda t: t.upper())
    model = ScriptedModel([{'tool': 'clean_then_shout', 'arguments': {'input': '  hi '}}, 'done'])
    result = await Agent(model, tools=[ToolPipeline.of(a, b)]).run('go')
    assert 'done' in str(result.output)
    assert (a.inputs, b.inputs) == (['  hi '], ['hi'])
    assert [t.name for t in model.requests[0].tools] == ['clean_then_shout']


@settings(max_examples=60, deadline=None)
@given(prefixes=st.lists(st.text(max_size=12), min_size=1, max_size=4), text=st.text(max_size=30))
def test_text_flows_unchanged_whatever_it_looks_like(prefixes: list[str], text: str) -> None:
    # Intermediate outputs that look like JSON (even `{"input": ...}`) reach the next text step verbatim.
    steps = [prefix(p, f'p{i}') for i, p in enumerate(prefixes)]
    result = ToolPipeline.of(*steps).call_sync({'input': text})
    assert result.output == ''.join(reversed(prefixes)) + text


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.integers(), st.text(max_size=20), st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
                 st.lists(st.booleans(), max_size=3)))
def test_any_value_reaches_a_text_step_as_its_json_or_text(value: object) -> None:
    class Emit(Tool):
        @property
        def definition(self) -> ToolDefinition:
            return ToolDefinition('emit', 'emits a value')

        async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
            return ToolResult.success('ignored', value)

    sink = Step('sink', lambda t: t)
    ToolPipeline.of(Emit(), sink).call_sync('x')
    expected = value if isinstance(value, str) else json.dumps(value, separators=(',', ':'), ensure_ascii=False)
    assert sink.inputs == ['ignored' if isinstance(value, str) else expected]


async def test_metrics_installed_for_a_run_reach_nested_steps() -> None:
    from toolweave import use_metrics

    inner = ToolPipeline.of('inner_m', 'd', Step('deep', 'x'))
    with use_metrics() as metrics:
        await ToolPipeline.of('outer_m', 'd', Step('top', 'y'), inner).call('go')
    assert {name: s.calls for name, s in metrics.snapshot().items()} == {
        'top': 1, 'deep': 1, 'inner_m': 1, 'outer_m': 1}
    assert 'deep' not in GLOBAL_METRICS.snapshot()


@pytest.mark.parametrize(('arguments', 'fragment'), [
    ('not valid json', 'Invalid JSON arguments for tool'),
    ('[1, 2]', 'must be a JSON object'),
    ({'a': 'one', 'b': 2}, 'a'),
    ({'a': 1, 'b': 2, 'c': 3}, 'c'),
])
async def test_bad_input_to_a_typed_pipeline_fails_at_its_first_step(arguments: Any, fragment: str) -> None:
    after = Step('after', 'never')
    result = await ToolPipeline.of(add, after).call(arguments)
    assert not result.ok and fragment in (result.error or '') and after.inputs == []


async def hang_forever(text: str) -> str:
    await anyio.sleep_forever()
    return text  # pragma: no cover


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_step_timeout_fails_a_hanging_step(anyio_backend: str) -> None:
    after = Step('after', lambda text: f'after: {text}')
    hanging = TextTool.from_function('hanging', 'hangs', hang_forever)
    fail_fast = ToolPipeline([Step('before', 'ok'), hanging, after], name='guarded', step_timeout=0.1)
    result = await fail_fast.call('x')
    assert (result.error, result.raised, after.inputs) == ("Step 'hanging' timed out after 0.1 s", True, [])
    assert (GLOBAL_METRICS.stats('hanging').failures, GLOBAL_METRICS.stats('guarded').failures) == (1, 1)

    resilient = (ToolPipeline.builder().name('resilient_t').description('d').step(hanging).step(after)
                 .error_strategy(ErrorStrategy.CONTINUE_ON_FAILURE).step_timeout(0.1).build())
    assert resilient.step_timeout == 0.1
    assert (await resilient.call('x')).output == "after: Step 'hanging' timed out after 0.1 s"


@pytest.mark.parametrize('bad', [0, -1, 'soon', True])
def test_step_timeout_must_be_positive_seconds(bad: Any) -> None:
    with pytest.raises(UserError, match="step_timeout of pipeline 'p' must be a number of seconds > 0 or None"):
        ToolPipeline([Step('a')], name='p', step_timeout=bad)
