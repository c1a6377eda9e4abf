"""`@tool`, `FunctionTool`, `tools_from`: function and method tools, their schemas, context and errors."""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from types import ModuleType
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from pydantic import BaseModel

import toolweave
from toolweave import (
    ExitEarly,
    FunctionTool,
    Tool,
    ToolCallContext,
    ToolConfigurationError,
    ToolNameError,
    ToolResult,
    UserError,
    tool,
    tools_from,
    tools_from_safely,
)
from toolweave.approval import AutoApproveHandler, use_review_handler
from toolweave.tools._function import function_tool, has_tool_methods

pytestmark = pytest.mark.anyio


class Point(BaseModel):
    x: int
    y: int


@dataclasses.dataclass
class Box:
    width: float
    height: float


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


# --- building ---


def test_bare_decorator_builds_definition_and_stays_callable() -> None:
    assert isinstance(add, FunctionTool) and isinstance(add, Tool)
    assert add.name == 'add'
    assert add.description == 'Add two integers.'
    assert add.definition.parameters == {
        'type': 'object',
        'properties': {
            'a': {'description': 'The first number.', 'type': 'integer'},
            'b': {'description': 'The second number.', 'type': 'integer'},
        },
        'required': ['a', 'b'],
        'additionalProperties': False,
    }
    assert add(2, 3) == 5  # still a normal function
    assert add.__name__ == 'add' and add.__doc__ is not None and add.function(1, 1) == 2


def test_configured_decorator_sets_name_description_and_metadata() -> None:
    @tool(name='web-search', description='Search the web.', return_direct=True, requires_approval=True,
          category='web')
    def search(query: str) -> str:
        """Ignored docstring."""
        return query

    meta = search.definition.metadata
    assert (search.name, search.description) == ('web-search', 'Search the web.')
    assert (meta.return_direct, meta.requires_approval, meta.category) == (True, True, 'web')


def test_tool_called_on_a_function_with_options_keeps_them() -> None:
    def search(query: str) -> str:
        """Search."""
        return query

    made = tool(search, name='web-search', requires_approval=True, read_only=True)
    assert made.name == 'web-search'
    assert (made.definition.metadata.requires_approval, made.definition.metadata.read_only) == (True, True)


def test_function_without_docstring_has_empty_description() -> None:
    @tool
    def bare(x: int) -> int:
        return x

    assert bare.description == ''


async def test_sync_tool_call() -> None:
    result = await add.call('{"a": 2, "b": 40}')
    assert (result.ok, result.output, result.value, result.has_value) == (True, '42', 42, True)


async def test_async_tool_call() -> None:
    @tool
    async def slow_double(n: int) -> int:
        await anyio.lowlevel.checkpoint()
        return n * 2

    assert (await slow_double.call({'n': 21})).output == '42'


async def test_sync_functions_run_in_worker_threads() -> None:
    seen: list[int] = []

    @tool
    def where() -> str:
        seen.append(threading.get_ident())
        return 'ok'

    await where.call()
    assert seen and seen[0] != threading.get_ident()


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_blocking_sync_tools_run_concurrently(anyio_backend: str) -> None:
    @tool
    def block(seconds: float) -> str:
        time.sleep(seconds)
        return 'done'

    results: list[ToolResult] = []

    async def one() -> None:
        results.append(await block.call({'seconds': 0.5}))

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(one)
    assert time.perf_counter() - start < 1.0  # 3 x 0.5 s sleeps overlap
    assert [r.output for r in results] == ['done'] * 3


async def test_hanging_async_tool_is_cancellable() -> None:
    @tool
    async def hang() -> str:
        await anyio.sleep_forever()
        return 'never'

    start = time.perf_counter()
    with anyio.move_on_after(0.1) as scope:
        await hang.call()
    assert scope.cancelled_caught and time.perf_counter() - start < 1.0


async def test_hanging_sync_tool_does_not_block_a_timeout() -> None:
    release = threading.Event()

    @tool
    def hang() -> str:
        release.wait(5)
        return 'late'

    start = time.perf_counter()
    with anyio.move_on_after(0.1) as scope:
        await hang.call()
    release.set()
    assert scope.cancelled_caught and time.perf_counter() - start < 1.0


# --- context injection ---


@tool
def ctx_first(context: ToolCallContext, city: str) -> str:
    return f'{city}:{context.get("tenant")}'


@tool
def ctx_middle(city: str, context: ToolCallContext, days: int = 1) -> str:
    return f'{city}:{days}:{context.get("tenant")}'


@tool
def ctx_last(city: str, context: ToolCallContext | None = None) -> str:
    assert context is not None
    return f'{city}:{context.get("tenant")}'


@pytest.mark.parametrize('fn', [ctx_first, ctx_middle, ctx_last], ids=['first', 'middle', 'last'])
async def test_context_at_any_position_is_injected_and_hidden(fn: FunctionTool[..., str]) -> None:
    schema = fn.definition.parameters
    assert 'context' not in schema['properties'] and 'context' not in schema['required']
    assert 'ToolCallContext' not in str(schema)
    result = await fn.call({'city': 'Paris'}, ToolCallContext.of(tenant='acme'))
    assert result.output.startswith('Paris:') and result.output.endswith(':acme')


async def test_context_only_function_has_empty_schema() -> None:
    @tool
    def whoami(ctx: ToolCallContext) -> str:
        return str(ctx.get('user'))

    assert whoami.definition.parameters == {
        'type': 'object', 'properties': {}, 'required': [], 'additionalProperties': False}
    assert (await whoami.call('{}', {'user': 'ada'})).output == 'ada'


async def test_single_argument_call_injects_empty_context() -> None:
    seen: list[ToolCallContext] = []

    @tool
    def probe(ctx: ToolCallContext) -> None:
        seen.append(ctx)

    await probe.call()
    await probe.call('{}')
    assert seen == [ToolCallContext.EMPTY, ToolCallContext.EMPTY] and seen[0] is ToolCallContext.EMPTY


async def test_context_free_tool_called_with_context_ignores_it() -> None:
    assert (await add.call({'a': 1, 'b': 1}, {'tenant': 'acme'})).output == '2'


# --- argument validation ---


async def test_every_problem_is_listed_with_its_path() -> None:
    result = await add.call('{"a": "x"}')
    assert result.error == (
        "Invalid arguments for tool 'add': a: Input should be a valid integer, unable to parse string as an "
        "integer, got \"x\"; b: Field required. Fix the arguments to match the tool's parameter schema and call "
        'it again.'
    )
    assert not result.raised


async def test_nested_paths_and_extra_fields() -> None:
    @tool
    def place(points: list[Point], label: str) -> int:
        return len(points)

    result = await place.call({'points': [{'x': 1, 'y': 2}, {'x': 'a'}], 'label': 'l', 'colour': 'red'})
    assert result.error is not None
    assert 'points[1].x: Input should be a valid integer' in result.error
    assert 'points[1].y: Field required' in result.error
    assert 'colour: Unexpected argument, got "red"' in result.error
    assert 'Accepted arguments: points, label.' in result.error


@pytest.mark.parametrize(
    ('arguments', 'expected'),
    [
        ('not json', "Invalid JSON arguments for tool 'add': Expecting value at line 1 column 1."),
        ('[1, 2]', "Arguments for tool 'add' must be a JSON object, got list"),
        ('"a string"', "Arguments for tool 'add' must be a JSON object, got str"),
        ('{"a": 1, "b": 2', "Invalid JSON arguments for tool 'add'"),
    ],
)
async def test_bad_json_is_a_failure_result(arguments: str, expected: str) -> None:
    result = await add.call(arguments)
    assert not result.ok and result.error is not None and result.error.startswith(expected)


async def test_empty_or_missing_arguments_mean_no_arguments() -> None:
    assert 'b: Field required' in ((await add.call('')).error or '')
    assert 'a: Field required' in ((await add.call(None)).error or '')


async def test_lax_coercion_of_numeric_strings() -> None:
    assert (await add.call({'a': '2', 'b': 3})).output == '5'


async def test_nested_models_reach_the_function_as_models() -> None:
    @tool
    def area(box: Box, origin: Point | None = None) -> float:
        assert isinstance(box, Box) and (origin is None or isinstance(origin, Point))
        return box.width * box.height

    assert (await area.call({'box': {'width': 2, 'height': 3}, 'origin': {'x': 0, 'y': 0}})).output == '6.0'
    assert (await area.call({'box': {'width': 2, 'height': 4}})).output == '8.0'


# --- return values ---


@pytest.mark.parametrize(
    ('value', 'output'),
    [
        ('Hi Alice!', 'Hi Alice!'),
        (Point(x=1, y=2), '{"x":1,"y":2}'),
        (Box(1.5, 2), '{"width":1.5,"height":2}'),
        ({'a': [1, 2], 'b': None}, '{"a":[1,2],"b":null}'),
        ([1, 'two'], '[1,"two"]'),
        (42, '42'),
        (2.5, '2.5'),
        (True, 'true'),
        (None, ''),
    ],
)
async def test_return_values_become_text_and_keep_the_value(value: Any, output: str) -> None:
    @tool
    def give() -> Any:
        return value

    result = await give.call()
    assert (result.ok, result.output, result.has_value) == (True, output, True)
    assert result.value is value


async def test_returned_tool_result_passes_through_unchanged() -> None:
    failure = ToolResult.failure('Network timeout')

    @tool
    def give() -> ToolResult:
        return failure

    assert await give.call() is failure


async def test_huge_output_is_returned_whole() -> None:
    @tool
    def big() -> str:
        return 'x' * 1_000_000

    assert len((await big.call()).output) == 1_000_000


async def test_unserialisable_value_falls_back_to_str() -> None:
    class Opaque:
        def __str__(self) -> str:
            return 'opaque!'

    @tool
    def give() -> object:
        return {'thing': Opaque()}

    assert (await give.call()).output == '{"thing":"opaque!"}'


# --- errors ---


@pytest.mark.parametrize('is_async', [False, True])
async def test_exceptions_become_failures(is_async: bool, caplog: pytest.LogCaptureFixture) -> None:
    def body() -> str:
        raise RuntimeError('Service unavailable')

    async def async_body() -> str:
        raise RuntimeError('Service unavailable')

    failing = tool(name='failing')(async_body if is_async else body)
    with caplog.at_level(logging.WARNING, logger='toolweave.tools'):
        result = await failing.call()
    assert (result.text, result.raised) == ('Error: Service unavailable', True)
    assert any(r.levelname == 'WARNING' and "'failing' failed" in r.getMessage() for r in caplog.records)


async def test_exception_without_message() -> None:
    @tool
    def silent() -> str:
        raise ValueError

    assert (await silent.call()).text == 'Error: Tool execution failed with no message'


@pytest.mark.parametrize('signal', [ExitEarly('stop'), ToolConfigurationError('misconfigured')])
@pytest.mark.parametrize('is_async', [False, True])
async def test_signals_and_configuration_errors_propagate(signal: Exception, is_async: bool) -> None:
    def body() -> str:
        raise signal

    async def async_body() -> str:
        raise signal

    raising = tool(name='raising')(async_body if is_async else body)
    with pytest.raises(type(signal)):
        await raising.call()


async def test_requires_approval_goes_through_the_gate() -> None:
    @tool(requires_approval=True)
    def delete(path: str) -> str:
        return f'deleted {path}'

    with use_review_handler(AutoApproveHandler()):
        assert (await delete.call({'path': '/tmp/x'})).output == 'deleted /tmp/x'


def test_call_sync() -> None:
    assert add.call_sync({'a': 1, 'b': 2}).output == '3'


# --- methods and tools_from ---


class Counter:
    def __init__(self, start: int = 0) -> None:
        self.count = start

    @tool
    def increment(self, by: int = 1) -> int:
        """Increase the counter."""
        self.count += by
        return self.count

    @tool(name='current_count')
    async def current(self, context: ToolCallContext) -> str:
        """Read the counter."""
        return f'{self.count}@{context.get("tenant")}'

    def helper(self) -> int:
        return self.count


class LoudCounter(Counter):
    @tool
    def reset(self) -> str:
        """Set the counter to zero."""
        self.count = 0
        return 'reset'


class Overridden(Counter):
    def increment(self, by: int = 1) -> int:  # type: ignore[override]  # a plain override on purpose: no longer a tool
        return 0


async def test_method_tools_keep_instance_state() -> None:
    counter = Counter(10)
    assert counter.increment(5) == 15  # direct call still works, bound
    assert (await counter.increment.call({'by': 2})).output == '17'
    assert counter.count == 17
    assert (await counter.current.call(None, {'tenant': 'acme'})).output == '17@acme'
    assert counter.increment.definition.parameters['properties'] == {'by': {'default': 1, 'type': 'integer'}}
    assert 'self' not in str(counter.increment.definition.parameters)


async def test_two_instances_do_not_share_state() -> None:
    one, two = Counter(), Counter(100)
    await tools_from(one)[0].call({'by': 1})
    assert (one.count, two.count) == (1, 100)


def test_tools_from_returns_methods_in_definition_order() -> None:
    counter = Counter()
    names = [t.name for t in tools_from(counter)]
    assert names == ['increment', 'current_count']  # default name = method name; configured name kept
    assert all(isinstance(t, FunctionTool) and t.instance is counter for t in tools_from(counter))


def test_tools_from_includes_inherited_and_skips_plain_overrides() -> None:
    assert [t.name for t in tools_from(LoudCounter())] == ['increment', 'current_count', 'reset']
    assert [t.name for t in tools_from(Overridden())] == ['current_count']


def test_object_without_tool_methods() -> None:
    class Plain:
        def method(self) -> int:
            return 1

    with pytest.raises(UserError, match=r"^Tool object of type 'Plain' is neither a Tool nor has @tool-decorated"):
        tools_from(Plain())
    assert tools_from_safely(Plain()) == []
    assert tools_from_safely(42) == []
    assert not has_tool_methods(Plain()) and has_tool_methods(Counter())


def test_tools_from_a_class_says_to_pass_an_instance() -> None:
    with pytest.raises(UserError, match=r'got the class Counter, not an instance.*tools_from\(Counter\(\.\.\.\)\)'):
        tools_from(Counter)
    assert tools_from_safely(Counter) == []


def test_tools_from_a_tool_or_a_module() -> None:
    assert tools_from(add) == [add]
    module = ModuleType('fake_tools')
    module.add = add  # type: ignore[attr-defined]
    module.other = 3  # type: ignore[attr-defined]
    assert tools_from(module) == [add]


async def test_method_tool_through_the_class_is_unbound() -> None:
    unbound = Counter.increment
    assert isinstance(unbound, FunctionTool) and unbound.is_method and unbound.instance is None
    with pytest.raises(ToolConfigurationError, match='called without an instance'):
        await unbound.call({'by': 1})
    with pytest.raises(UserError, match='is not a method'):
        add.bind(Counter())


def test_static_methods_work_below_staticmethod() -> None:
    class Math:
        @staticmethod
        @tool
        def double(n: int) -> int:
            return n * 2

    assert [t.call_sync({'n': 4}).output for t in tools_from(Math())] == ['8']


def test_bound_method_object_becomes_a_tool() -> None:
    class Greeter:
        def __init__(self) -> None:
            self.greeting = 'Hello'

        def greet(self, name: str) -> str:
            return f'{self.greeting} {name}'

    greet = function_tool(Greeter().greet)
    assert greet.name == 'greet' and greet.call_sync({'name': 'Ada'}).output == 'Hello Ada'
    assert function_tool(add) is add


# --- misuse at decoration time ---


@pytest.mark.parametrize('name', ['', 'web search', 'a.b', '名前', 'x' * 65])
def test_bad_names_are_rejected(name: str) -> None:
    with pytest.raises(ToolNameError, match=r'\^\[A-Za-z0-9_-\]\{1,64\}\$') as info:
        tool(name=name)(add.function)
    assert repr(name) in str(info.value) and 'add' in str(info.value)


def test_lambda_needs_a_name() -> None:
    with pytest.raises(ToolNameError, match='<lambda>'):
        tool(lambda x: x)
    assert tool(name='ident')(lambda: 'x').name == 'ident'


def test_variadics_and_missing_annotations_are_gathered() -> None:
    def bad(a, b: int, *args: int, c, **kwargs: str) -> None:  # type: ignore[no-untyped-def]
        pass

    with pytest.raises(UserError) as info:
        tool(bad)
    message = str(info.value)
    assert message.startswith('Error generating schema for test_variadics_and_missing_annotations_are_gathered.'
                              '<locals>.bad:\n  - ')
    assert "parameter 'a' has no type annotation. Annotate it, for example `a: str`." in message
    assert "parameter 'c' has no type annotation" in message
    assert 'parameter `*args`: variadic parameters cannot be described to a model' in message
    assert 'parameter `**kwargs`' in message
    assert message.count('\n  - ') == 4


def test_unsupported_types_are_gathered() -> None:
    def bad(lock: threading.Lock, callback: Callable[[int], int], ok: int) -> None:
        pass

    with pytest.raises(UserError, match=r'Error generating schema for .*bad:\n  - ') as info:
        tool(bad)
    message = str(info.value)
    assert "parameter 'lock' of type" in message and 'cannot be validated from JSON' in message
    assert "parameter 'callback' of type" in message and 'has no JSON Schema form' in message
    assert "parameter 'ok'" not in message and message.count('\n  - ') == 2


def test_unresolvable_annotation_names_the_parameter() -> None:
    def bad(x: NotDefinedAnywhere, y: int) -> None:  # type: ignore[name-defined]  # noqa: F821
        pass

    with pytest.raises(UserError, match=r"parameter 'x': annotation 'NotDefinedAnywhere' could not be resolved"):
        tool(bad)


def test_decorator_misuse_messages() -> None:
    with pytest.raises(UserError, match=r"Pass it by keyword: `@tool\(name='search'\)`"):
        tool('search')  # type: ignore[call-overload]
    with pytest.raises(UserError, match='Put @tool below it'):
        tool(staticmethod(add.function))
    with pytest.raises(UserError, match='cannot wrap the generator function .*gen: a tool returns one result'):
        def gen() -> Iterator[int]:
            yield 1

        tool(gen)
    with pytest.raises(UserError, match='cannot wrap the generator function'):
        async def agen() -> AsyncIterator[int]:
            yield 1

        tool(agen)
    with pytest.raises(UserError, match='needs a function'):
        FunctionTool(42)  # type: ignore[arg-type]


def test_public_names() -> None:
    assert toolweave.tool is tool and toolweave.tools_from is tools_from
    assert repr(add) == "FunctionTool(name='add', function=add)"
    assert 'bound to Counter' in repr(Counter().increment)


def power(base: int, exp: int, ctx: ToolCallContext) -> int:
    """Raise to a power."""
    result: int = base**exp  # int ** int is typed Any (a negative exponent gives a float)
    return result


class Multiplier:
    """Multiply by a constant."""

    def __init__(self, k: int) -> None:
        self.k = k

    def __call__(self, x: int) -> int:
        return x * self.k


class AsyncIncrement:
    async def __call__(self, x: int) -> int:
        return x + 1


async def test_partials_and_callable_objects() -> None:
    square = function_tool(functools.partial(power, exp=2))
    assert (square.name, square.description) == ('power', 'Raise to a power.')
    assert square.definition.parameters['required'] == ['base']
    assert (await square.call({'base': 3})).output == '9'
    times3 = function_tool(Multiplier(3))
    assert (times3.name, times3.description) == ('multiplier', 'Multiply by a constant.')
    assert (await times3.call({'x': 2})).output == '6'
    inc = function_tool(AsyncIncrement())
    assert (inc.name, inc.description) == ('async_increment', '')
    assert (await inc.call({'x': 2})).output == '3'


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar('request_id', default='unset')


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_context_variables_reach_sync_tools_in_threads(anyio_backend: str) -> None:
    @tool
    def read_request_id() -> str:
        return REQUEST_ID.get()

    token = REQUEST_ID.set('req-7')
    try:
        assert (await read_request_id.call()).output == 'req-7'  # the run's ambient state (metrics, reviewer)
    finally:
        REQUEST_ID.reset(token)


async def test_checked_arguments_carry_the_validation_to_one_call_and_any_change_drops_it() -> None:
    import copy
    import pickle

    from toolweave.tools import ArgumentsError, CheckedArguments

    @tool
    def double(n: int) -> int:
        """Double it."""
        return n * 2

    checked = double.check_arguments({'n': '4'})  # lax validation: the call gets the int
    assert isinstance(checked, CheckedArguments) and checked == {'n': '4'}
    assert (await double.call(checked)).value == 8
    assert (await double.call(checked)).value == 8  # a second call validates anew
    changed = double.check_arguments({'n': 4})
    changed['n'] = 'four'  # what was validated no longer holds: the call validates what it is given
    assert 'valid integer' in str((await double.call(changed)).error)
    for plain in (checked.copy(), copy.copy(checked), pickle.loads(pickle.dumps(checked))):
        assert type(plain) is dict and plain == {'n': '4'}
    with pytest.raises(ArgumentsError) as caught:
        double.check_arguments({'m': 1})
    assert caught.value.problems == ('n: Field required', 'm: Unexpected argument, got 1')
    assert caught.value.accepted == 'n'
