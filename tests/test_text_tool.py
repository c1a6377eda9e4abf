"""`TextTool`: the single-string tool, its argument rules and its context."""

from __future__ import annotations

import json
import logging
import threading

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolweave import (
    GLOBAL_METRICS,
    ExitEarly,
    ReviewDecision,
    ReviewRequest,
    TextTool,
    ToolCallContext,
    ToolConfigurationError,
    ToolNameError,
    ToolResult,
    UserError,
    use_review_handler,
)
from toolweave.tools._text import text_input

pytestmark = pytest.mark.anyio


class Recorder(TextTool):
    """Record every input and answer with a fixed result."""

    def __init__(self, answer: ToolResult | str | None = 'ok', **kwargs: bool) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.answer = answer
        self.inputs: list[str] = []

    async def run(self, text: str) -> ToolResult | str | None:
        self.inputs.append(text)
        return self.answer


class Raising(TextTool):
    def __init__(self, exc: BaseException) -> None:
        super().__init__('raising', 'Raise')
        self.exc = exc

    async def run(self, text: str) -> str:
        raise self.exc


def test_result_factories() -> None:
    assert (ToolResult.success(None).output, ToolResult.success(None).ok, ToolResult.success(None).error) == (
        '', True, None)
    assert ToolResult.success('out', {'k': 1}).value == {'k': 1}
    assert (ToolResult.failure('msg').output, ToolResult.failure('msg').ok, ToolResult.failure('msg').error) == (
        '', False, 'msg')
    assert ToolResult.failure(None).error == 'Tool execution failed with no message'


def test_definition() -> None:
    tool = Recorder()
    assert (tool.name, tool.description) == ('recorder', 'Record every input and answer with a fixed result.')
    assert tool.definition.parameters == {
        'type': 'object',
        'properties': {'input': {'type': 'string', 'description': 'The input to pass to the tool'}},
        'required': ['input'],
    }
    named = TextTool.from_function('web_search', 'Search the web', lambda text: text)
    assert (named.name, named.description) == ('web_search', 'Search the web')


async def test_unwraps_input() -> None:
    tool = Recorder('results')
    result = await tool.call('{"input": "AI trends"}')
    assert tool.inputs == ['AI trends'] and result.output == 'results'


async def test_success_and_failure_text() -> None:
    assert (await Recorder(ToolResult.success('42')).call('{"input": "x"}')).text == '42'
    assert (await Recorder(ToolResult.failure('Network timeout')).call('{"input": "x"}')).text == \
        'Error: Network timeout'


async def test_exception_is_failure_logged_at_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger='toolweave.tools'):
        result = await Raising(RuntimeError('Service unavailable')).call('{"input": "x"}')
    assert result.text == 'Error: Service unavailable'
    assert [r.levelname for r in caplog.records] == ['WARNING']
    stats = GLOBAL_METRICS.stats('raising')
    assert (stats.calls, stats.failures, stats.successes) == (1, 1, 0) and stats.total_seconds >= 0


async def test_none_is_empty_success() -> None:
    result = await Recorder(None).call('{"input": "x"}')
    assert (result.ok, result.output, result.text) == (True, '', '')
    assert GLOBAL_METRICS.stats('recorder').successes == 1


@pytest.mark.parametrize(
    ('arguments', 'received'),
    [
        ('not valid json', 'not valid json'),
        ('{"query": "x"}', '{"query": "x"}'),  # no input key -> the whole raw JSON
        ('{"input": null}', '{"input": null}'),  # null input -> the whole raw JSON
        ('{"input": 42}', '42'),
        ('{"input": {"a": 1}}', '{"a":1}'),  # recommended: objects as JSON, not a map's toString
        ('{"input": [1, "b"]}', '[1,"b"]'),
        ('{"input": true}', 'true'),
        ('[1, 2]', '[1, 2]'),
        ('"quoted"', '"quoted"'),
        ('', ''),
        (None, ''),
        ({'input': 'from a mapping'}, 'from a mapping'),
        ({'other': 1}, '{"other":1}'),
        ('{"input": "ünïcode ✓"}', 'ünïcode ✓'),
    ],
)
async def test_argument_unwrapping(arguments: str | dict[str, object] | None, received: str) -> None:
    tool = Recorder()
    await tool.call(arguments)
    assert tool.inputs == [received] and text_input(arguments) == received


async def test_huge_input_and_output() -> None:
    big = 'x' * 1_000_000
    tool = TextTool.from_function('echo', 'Echo', lambda text: text)
    assert (await tool.call(json.dumps({'input': big}))).output == big


@pytest.mark.parametrize('signal', [ExitEarly('stop'), ToolConfigurationError('bad config')])
async def test_signals_propagate(signal: Exception) -> None:
    with pytest.raises(type(signal)):
        await Raising(signal).call('{"input": "x"}')


async def test_approval_without_handler_is_a_configuration_error() -> None:
    tool = Recorder(requires_approval=True)
    with pytest.raises(ToolConfigurationError, match="Tool 'recorder' requires approval but no ReviewHandler"):
        await tool.call('{"input": "x"}')
    assert tool.inputs == []


class EditingReviewer:
    async def review(self, request: ReviewRequest) -> ReviewDecision:
        return ReviewDecision.edit('revised content')


async def test_reviewer_edit_reaches_the_text_tool() -> None:  # through the seam
    tool = TextTool.from_function('editor', 'Edit', lambda text: f'edited: {text}', requires_approval=True)
    with use_review_handler(EditingReviewer()):
        assert (await tool.call('{"input": "original"}')).output == 'edited: revised content'


async def test_exception_without_message() -> None:
    assert (await Raising(RuntimeError()).call('{"input": "x"}')).text == \
        'Error: Tool execution failed with no message'


# --- function form, sync bodies, context ---


async def test_from_function_sync_runs_in_a_thread_async_does_not() -> None:
    threads: list[int] = []

    def sync_fn(text: str) -> str:
        threads.append(threading.get_ident())
        return text.upper()

    async def async_fn(text: str) -> str:
        await anyio.lowlevel.checkpoint()
        return text[::-1]

    assert (await TextTool.from_function('up', 'Up', sync_fn).call('{"input": "abc"}')).output == 'ABC'
    assert threads[0] != threading.get_ident()
    assert (await TextTool.from_function('rev', 'Rev', async_fn).call('{"input": "abc"}')).output == 'cba'
    assert (await TextTool.from_function('up2', 'Up', str.upper).call('{"input": "q"}')).output == 'Q'


async def test_context_aware_function_and_subclass() -> None:
    aware = TextTool.from_function('aware', 'Aware', lambda text, ctx: f'{text}@{ctx.get("tenant")}')
    assert (await aware.call('{"input": "x"}', {'tenant': 'acme'})).output == 'x@acme'
    assert (await aware.call('{"input": "x"}')).output == 'x@None'  # single-argument form: EMPTY
    legacy = TextTool.from_function('legacy', 'Legacy', lambda text: text)
    assert (await legacy.call('{"input": "x"}', {'tenant': 'acme'})).output == 'x'  # context dropped

    class Aware(TextTool):
        def run(self, text: str, context: ToolCallContext) -> str:  # type: ignore[override]  # sync + context
            return f'{text}/{context.get("k")}'

    assert (await Aware().call({'input': 'y'}, {'k': 'v'})).output == 'y/v'


async def test_non_string_returns_become_json() -> None:
    tool = TextTool.from_function('data', 'Data', lambda text: {'echo': text, 'n': 1})
    result = await tool.call('{"input": "x"}')
    assert result.output == '{"echo":"x","n":1}' and result.artifact == {'echo': 'x', 'n': 1}


def test_misuse() -> None:
    class NoRun(TextTool):
        pass

    with pytest.raises(UserError, match=r'NoRun must implement `async def run\(self, text: str\)`'):
        NoRun()
    with pytest.raises(UserError, match='needs a callable'):
        TextTool.from_function('x', 'x', 'nope')  # type: ignore[arg-type]
    with pytest.raises(ToolNameError, match='web search'):
        TextTool.from_function('web search', 'x', lambda text: text)

    class HTTPFetch(TextTool):
        async def run(self, text: str) -> str:
            return text

    assert (HTTPFetch().name, HTTPFetch().description, HTTPFetch('f', 'd').name) == ('http_fetch', '', 'f')


def test_metadata_flags() -> None:
    meta = TextTool.from_function('f', 'd', lambda t: t, return_direct=True, category='x').definition.metadata
    assert (meta.return_direct, meta.category, meta.requires_approval) == (True, 'x', False)


@given(st.text())
def test_any_string_input_is_unwrapped_exactly(value: str) -> None:
    assert text_input(json.dumps({'input': value})) == value
    assert text_input({'input': value}) == value


@given(st.text().filter(lambda s: not _is_json(s)))
def test_any_non_json_text_is_passed_raw(value: str) -> None:
    assert text_input(value) == value


@given(st.dictionaries(st.text().filter(lambda k: k != 'input'), st.integers() | st.text() | st.none()))
def test_json_without_input_is_passed_whole(value: dict[str, object]) -> None:
    raw = json.dumps(value)
    assert text_input(raw) == raw


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def test_from_function_leaves_an_optional_second_parameter_to_its_default() -> None:
    strip = TextTool.from_function('strip', 'Strip whitespace', str.strip)
    assert strip.call_sync('{"input": "  padded  "}').output == 'padded'

    def shout(text: str, suffix: str = '!') -> str:
        return text.upper() + suffix

    assert TextTool.from_function('shout', 'Shout', shout).call_sync('{"input": "hi"}').output == 'HI!'
