"""SimpleAgenticTool and what every agentic tool shares: configuration, input, model and process rules, the inner
run (context, blackboard, usage), result packaging and nested artifacts."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from toolweave import (
    Agent,
    AgentProcess,
    AgentRunResult,
    Budget,
    DuplicateToolError,
    ExitEarly,
    ModelSettings,
    Parameter,
    SimpleAgenticTool,
    ToolCallContext,
    ToolConfigurationError,
    ToolNameError,
    ToolResult,
    UsageLimitExceeded,
    UserError,
    current_process,
    tool,
)
from toolweave.testing import FunctionModel, ScriptedModel

pytestmark = pytest.mark.anyio

DEFAULT_PROMPT = ('You are an intelligent agent that can use tools to help you complete tasks.\n'
                  'Use the provided tools to perform the following task: Orchestrates math operations')


def call(name: str, arguments: Any = None) -> dict[str, Any]:
    return {'tool': name, 'arguments': arguments or {}}


async def run_inside(agentic: Any, arguments: Any, **agent_options: Any) -> tuple[ToolResult, AgentRunResult]:
    """Call `agentic` from an outer agent run; returns the call's result and the outer run."""
    outer = ScriptedModel([call(agentic.name, arguments), 'outer done'])
    run = await Agent(outer, tools=[agentic], **agent_options).run('go')
    return run.process.history[0].result, run


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two numbers."""
    return a * b


class Doc:
    def __init__(self, title: str) -> None:
        self.title = title

    def __repr__(self) -> str:
        return f'Doc({self.title!r})'


@tool
def write_doc(title: str) -> Doc:
    """Write a document."""
    return Doc(title)


@tool
def write_docs(count: int) -> list[Doc | None]:
    """Write several documents (and a gap)."""
    return [Doc(f'd{i}') for i in range(count)] + [None]


# --- construction ----------------------------------------------------------------------------------------------


def test_construction_defaults_and_definition() -> None:
    math = SimpleAgenticTool('math-orchestrator', 'Orchestrates math operations')
    assert math.name == 'math-orchestrator' and math.description == 'Orchestrates math operations'
    assert math.tools == () and math.max_iterations == 20  # default
    assert math.definition.parameters == {'type': 'object', 'properties': {}, 'required': []}
    assert math.model is None and math.system_prompt is None


def test_with_methods_return_copies() -> None:
    base = SimpleAgenticTool('base', 'Base orchestrator').with_tools(add).with_system_prompt('Original prompt')
    more = base.with_tools(multiply)
    prompt = base.with_system_prompt('Updated prompt')
    params = base.with_parameter(Parameter.string('query', 'Search query'))
    limited = base.with_max_iterations(3)
    model = ScriptedModel([])
    modelled = base.with_model(model)
    assert [t.name for t in base.tools] == ['add'] and [t.name for t in more.tools] == ['add', 'multiply']
    assert base.system_prompt == 'Original prompt' and prompt.system_prompt == 'Updated prompt'
    assert base.definition.parameters['properties'] == {}
    assert params.definition.parameters == {'type': 'object', 'properties': {
        'query': {'type': 'string', 'description': 'Search query'}}, 'required': ['query']}
    assert base.max_iterations == 20 and limited.max_iterations == 3
    assert base.model is None and modelled.model is model
    assert base.with_capture_nested_artifacts().capture_nested_artifacts and not base.capture_nested_artifacts
    warm = base.with_settings(ModelSettings(temperature=0.2))
    assert base.settings is None and warm.settings == ModelSettings(temperature=0.2)


def test_tool_objects_add_their_methods_and_others_are_ignored() -> None:
    class MathTools:
        @tool
        def square(self, x: int) -> int:
            """Square a number."""
            return x * x

    class Nothing:
        pass

    agentic = SimpleAgenticTool('a', 'd').with_tool_objects(MathTools(), Nothing())
    assert [t.name for t in agentic.tools] == ['square']
    assert SimpleAgenticTool('a', 'd').with_tool_object(Nothing()).tools == ()


def test_bad_configuration_fails_at_build_time() -> None:
    with pytest.raises(ToolNameError):
        SimpleAgenticTool('bad name', 'd')
    with pytest.raises(UserError, match='Description'):
        SimpleAgenticTool('ok', 42)  # type: ignore[arg-type]
    with pytest.raises(UserError, match='model'):
        SimpleAgenticTool('ok', 'd', model=42)  # type: ignore[arg-type]
    with pytest.raises(UserError, match='system_prompt'):
        SimpleAgenticTool('ok', 'd', system_prompt=3)  # type: ignore[arg-type]
    for bad in (0, -1, True, 2.5):
        with pytest.raises(UserError, match='max_iterations'):
            SimpleAgenticTool('ok', 'd', max_iterations=bad)  # type: ignore[arg-type]
    with pytest.raises(UserError, match='ModelSettings'):
        SimpleAgenticTool('ok', 'd', settings={'temperature': 0})  # type: ignore[arg-type]
    with pytest.raises(UserError, match='Parameter'):
        SimpleAgenticTool('ok', 'd').with_parameter('topic')  # type: ignore[arg-type]
    with pytest.raises(UserError, match='twice'):
        SimpleAgenticTool('ok', 'd').with_parameter(Parameter.string('q')).with_parameter(Parameter.integer('q'))
    with pytest.raises(DuplicateToolError, match="'add'"):
        SimpleAgenticTool('ok', 'd', tools=[add]).with_tools(add)
    with pytest.raises(UserError):
        SimpleAgenticTool('ok', 'd').with_tools('add')


# --- checks at call time ---------------------------------------------------------------------------------------


async def test_no_tools_then_no_process() -> None:
    assert (await SimpleAgenticTool('a', 'd').call('{}')).error == 'No tools available for SimpleAgenticTool'
    result = await SimpleAgenticTool('a', 'd', tools=[add], model=ScriptedModel([])).call('{}')
    assert result.error == 'No AgentProcess context available'


async def test_missing_model_is_a_configuration_error_that_propagates() -> None:
    agentic = SimpleAgenticTool('math', 'd', tools=[add])
    with pytest.raises(ToolConfigurationError, match="SimpleAgenticTool 'math' has no model"):
        await run_inside(agentic, {})


async def test_bad_arguments_are_reported_without_running_the_inner_loop() -> None:
    inner = ScriptedModel(['never'])
    agentic = (SimpleAgenticTool('math', 'd', tools=[add], model=inner)
               .with_parameter(Parameter.string('expression', 'What to compute'))
               .with_parameter(Parameter.integer('precision', 'Decimals', required=False)))
    outer = ScriptedModel([
        {'tool': 'math', 'arguments': '{not json'},
        call('math', {}),
        call('math', {'expression': 'x', 'precision': 'many'}),
        {'tool': 'math', 'arguments': '[1, 2]'},
        'done',
    ])
    run = await Agent(outer, tools=[agentic]).run('go')
    errors = [record.result.error or '' for record in run.process.history]
    assert 'Invalid JSON arguments' in errors[0]
    assert 'expression' in errors[1] and 'Field required' in errors[1]
    assert 'precision' in errors[2]
    assert 'must be a JSON object' in errors[3]
    assert inner.call_count == 0


# --- the inner run ---------------------------------------------------------------------------------------------


async def test_inner_model_orchestrates_the_sub_tools() -> None:
    inner = ScriptedModel([[call('add', {'a': 5, 'b': 3}), call('multiply', {'a': 3, 'b': 2})], 'It is 11.'])
    math = (SimpleAgenticTool('math-orchestrator', 'Orchestrates math operations', model=inner)
            .with_tools(add, multiply).with_parameter(Parameter.string('expression', 'Math expression')))
    result, run = await run_inside(math, {'expression': '5 + 3 * 2'})
    assert result.ok and result.output == 'It is 11.' and not result.has_value  # no artifact, text
    first = inner.requests[0]
    assert [m.content for m in first.messages] == [DEFAULT_PROMPT, '{"expression":"5 + 3 * 2"}']
    assert [t.name for t in first.tools] == ['add', 'multiply']
    tool_outputs = [m.content for m in inner.last_messages if m.role == 'tool']
    assert tool_outputs == ['8', '6']
    # the inner run is a child of the outer one: its usage is added to the outer usage
    assert run.usage.llm_calls == 4 and run.usage.tool_calls == 3


async def test_fixed_and_dynamic_system_prompts() -> None:
    inner = ScriptedModel(['a', 'b'])
    fixed = SimpleAgenticTool('math', 'd', tools=[add], model=inner, system_prompt='Use the tools.',
                              settings=ModelSettings(max_tokens=50))
    await run_inside(fixed, {})
    assert inner.requests[0].messages[0].content == 'Use the tools.'
    assert inner.requests[0].settings == ModelSettings(max_tokens=50)
    seen: list[tuple[object, str]] = []

    def prompt(process: AgentProcess, text: str) -> str:
        seen.append((process, text))
        return f'Process {process.agent_name}. Task: {text}'

    dynamic = fixed.with_system_prompt(prompt).with_parameter(Parameter.string('q'))
    _, run = await run_inside(dynamic, {'q': 'hi'})
    assert inner.requests[1].messages[0].content == 'Process agent. Task: {"q":"hi"}'
    assert seen == [(run.process, '{"q":"hi"}')]
    broken = fixed.with_system_prompt(lambda process, text: 42)  # type: ignore[arg-type,return-value]
    with pytest.raises(ToolConfigurationError, match='not a string'):
        await run_inside(broken, {})


async def test_context_blackboard_and_process_reach_inner_tools() -> None:
    seen: dict[str, Any] = {}

    @tool
    def remember(ctx: ToolCallContext) -> str:
        """Remember something."""
        process = current_process()
        assert process is not None
        seen['tenant'] = ctx.get('tenant')
        seen['depth'] = process.depth
        seen['parent_note'] = process.blackboard.get('note')
        process.add('inner fact', name='fact')
        return 'ok'

    @tool
    def leave_note() -> str:
        """Leave a note on the blackboard."""
        process = current_process()
        assert process is not None
        process.add('from outer', name='note')
        return 'noted'

    inner = ScriptedModel([call('remember'), 'done'])
    agentic = SimpleAgenticTool('helper', 'Helps', tools=[remember], model=inner)
    outer = ScriptedModel([call('leave_note'), call('helper'), 'finished'])
    run = await Agent(outer, tools=[leave_note, agentic], context={'tenant': 'acme'}).run('go')
    assert seen == {'tenant': 'acme', 'depth': 1, 'parent_note': 'from outer'}
    assert run.process.blackboard.get('fact') == 'inner fact'  # published to the caller when the inner run ends


async def test_max_iterations_stops_the_inner_loop_with_a_readable_failure() -> None:
    inner = FunctionModel(lambda messages, tools: call('add', {'a': 1, 'b': 1}))
    agentic = SimpleAgenticTool('looper', 'Loops', tools=[add], model=inner, max_iterations=3)
    result, run = await run_inside(agentic, {})
    assert not result.ok and 'max_iterations=3' in (result.error or '')
    assert inner.call_count == 3
    assert run.output == 'outer done'


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_a_hanging_sub_tool_is_cancelled_by_the_outer_timeout(anyio_backend: str) -> None:
    @tool
    async def hang() -> str:
        """Never returns."""
        await anyio.sleep(30)
        return 'late'

    agentic = SimpleAgenticTool('slow', 'Slow', tools=[hang], model=ScriptedModel([call('hang'), 'never']))
    started = time.perf_counter()
    result, _ = await run_inside(agentic, {}, tool_timeout=0.3)
    assert time.perf_counter() - started < 5
    assert not result.ok and 'timed out' in (result.error or '')


async def test_huge_sub_tool_output_is_cut_for_the_inner_model() -> None:
    @tool
    def dump() -> str:
        """Dump a lot."""
        return 'x' * 50_000

    inner = ScriptedModel([call('dump'), 'summarised'])
    result, _ = await run_inside(SimpleAgenticTool('d', 'd', tools=[dump], model=inner), {})
    assert result.output == 'summarised'
    sent = inner.last_messages[-1].content
    assert sent is not None
    assert len(sent) < 21_000 and 'cut' in sent


# --- result packaging ----------------------------------------------------------------------------------


async def test_one_artifact_is_the_result_value() -> None:
    inner = ScriptedModel([call('write_doc', {'title': 'A'}), 'wrote it'])
    result, _ = await run_inside(SimpleAgenticTool('w', 'd', tools=[write_doc], model=inner), {})
    assert result.output == 'wrote it' and isinstance(result.value, Doc) and result.value.title == 'A'
    assert result.artifact is result.value


async def test_several_artifacts_are_a_list_and_collections_are_unpacked() -> None:
    inner = ScriptedModel([call('write_doc', {'title': 'A'}), call('write_docs', {'count': 2}), 'wrote them'])
    result, _ = await run_inside(SimpleAgenticTool('w', 'd', tools=[write_doc, write_docs], model=inner), {})
    assert [d.title for d in result.value] == ['A', 'd0', 'd1']  # the None was dropped


async def test_failed_sub_tool_results_carry_no_artifact() -> None:
    @tool
    def broken() -> Doc:
        """Fails."""
        raise RuntimeError('disk full')

    inner = ScriptedModel([call('broken'), 'could not'])
    result, _ = await run_inside(SimpleAgenticTool('w', 'd', tools=[broken], model=inner), {})
    assert result.ok and not result.has_value
    assert inner.last_messages[-1].content == 'Error: disk full'


async def test_nested_agentic_artifacts_are_left_out_unless_captured() -> None:
    def build(capture: bool) -> tuple[SimpleAgenticTool, ScriptedModel]:
        finder_model = ScriptedModel([call('write_doc', {'title': 'performance'}), 'found'])
        finder = SimpleAgenticTool('find_performances', 'Finds', tools=[write_doc], model=finder_model)

        @tool
        def create_concert() -> Doc:
            """Create the concert."""
            return Doc('concert')

        outer_model = ScriptedModel([call('find_performances'), call('create_concert'), 'assembled'])
        assembler = SimpleAgenticTool('assembleConcert', 'Assemble', tools=[finder, create_concert],
                                      model=outer_model).with_capture_nested_artifacts(capture)
        return assembler, outer_model

    default, _ = build(False)
    result, _ = await run_inside(default, {})
    assert isinstance(result.value, Doc) and result.value.title == 'concert'
    captured, _ = build(True)
    result, _ = await run_inside(captured, {})
    assert [d.title for d in result.value] == ['performance', 'concert']


async def test_agentic_tool_runs_from_a_plan_step_too() -> None:
    inner = ScriptedModel(['planned answer'])
    agentic = SimpleAgenticTool('helper', 'Helps', tools=[add], model=inner)
    plan = {'steps': [{'id': 'h', 'tool': 'helper', 'arguments': {}}]}
    outer = ScriptedModel([call('execute_tool_plan', plan), 'done'])
    run = await Agent(outer, tools=[agentic], tool_planning=True).run('go')
    assert run.plan_runs and run.plan_runs[0].steps[0].output == 'planned answer'


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_cancelling_the_outer_run_cancels_the_inner_loop(anyio_backend: str) -> None:
    finished: list[str] = []

    @tool
    async def hang() -> str:
        """Never returns."""
        await anyio.sleep(30)
        finished.append('hang')
        return 'late'

    agentic = SimpleAgenticTool('slow', 'Slow', tools=[hang], model=ScriptedModel([call('hang'), 'never']))
    outer = ScriptedModel([call('slow'), 'never'])
    started = time.perf_counter()
    with anyio.move_on_after(0.3) as scope:
        await Agent(outer, tools=[agentic]).run('go')
    assert scope.cancelled_caught and time.perf_counter() - started < 5
    assert finished == []


async def test_unfolding_sub_tools_unfold_and_their_tools_are_tracked() -> None:
    from toolweave import UnfoldingTool

    docs = UnfoldingTool.of('documents', 'Document operations. Invoke to see them.', [write_doc, write_docs])
    inner = ScriptedModel([call('documents'), call('write_doc', {'title': 'unfolded'}), 'wrote'])
    result, _ = await run_inside(SimpleAgenticTool('w', 'd', tools=[docs], model=inner), {})
    assert [t.name for t in inner.requests[0].tools] == ['documents']
    assert 'write_doc' in [t.name for t in inner.requests[1].tools]
    assert isinstance(result.value, Doc) and result.value.title == 'unfolded'


async def test_inner_run_gets_only_what_is_left_of_the_outer_budget() -> None:
    inner = ScriptedModel([call('add', {'a': 1, 'b': 2}), call('add', {'a': 3, 'b': 4}), 'never reached'])
    agentic = SimpleAgenticTool('math', 'd', tools=[add], model=inner)
    outer = ScriptedModel([call('math'), 'never reached'])
    with pytest.raises(UsageLimitExceeded, match='max_llm_calls=3') as caught:
        await Agent(outer, tools=[agentic], budget=Budget(max_llm_calls=3)).run('go')
    assert inner.call_count == 2
    process = caught.value.process
    assert isinstance(process, AgentProcess) and process.usage.llm_calls == 3
    failure = process.history[0].result
    assert not failure.ok and 'LLM call budget exhausted' in (failure.error or '')


async def test_exit_early_from_a_sub_tool_stops_the_whole_run() -> None:
    @tool
    def stop() -> str:
        """Stop everything."""
        raise ExitEarly('the task is over')

    agentic = SimpleAgenticTool('s', 'd', tools=[stop], model=ScriptedModel([call('stop'), 'never']))
    outer = ScriptedModel([call('s'), 'never'])
    with pytest.raises(ExitEarly, match='the task is over'):
        await Agent(outer, tools=[agentic]).run('go')
    assert outer.call_count == 1


async def test_the_callers_review_handler_gates_sub_tools() -> None:
    from toolweave import CallbackReviewHandler

    @tool(requires_approval=True)
    def delete_all() -> str:
        """Delete everything."""
        return 'deleted'

    reviewed: list[str] = []

    async def reviewer(request: Any) -> bool:
        reviewed.append(request.tool_name)
        return False

    inner = ScriptedModel([call('delete_all'), 'refused'])
    agentic = SimpleAgenticTool('admin', 'd', tools=[delete_all], model=inner)
    outer = ScriptedModel([call('admin'), 'done'])
    await Agent(outer, tools=[agentic], review_handler=CallbackReviewHandler(reviewer)).run('go')
    assert reviewed == ['delete_all']
    last = inner.last_messages[-1].content
    assert last is not None
    assert not last.endswith('deleted')


async def test_model_strings_are_resolved_at_the_first_call() -> None:
    bad = SimpleAgenticTool('s', 'd', tools=[add], model='nope')
    with pytest.raises(ToolConfigurationError, match="Model of SimpleAgenticTool 's'.*no provider prefix"):
        await run_inside(bad, {})
    local = SimpleAgenticTool('s', 'd', tools=[add], model='ollama:qwen2.5')
    result, _ = await run_inside(local, {})  # the test suite blocks real requests: a readable failure
    assert not result.ok and result.error
    assert local.model is not None and not isinstance(local.model, str) and local.model.name == 'ollama:qwen2.5'
