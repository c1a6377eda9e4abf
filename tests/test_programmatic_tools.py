"""Programmatic tools (`Tool.create` + `Parameter`) and typed tools."""

from __future__ import annotations

import dataclasses
import sys
import typing
from typing import Any

import anyio
import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from toolweave import (
    ExitEarly,
    Parameter,
    Tool,
    ToolCallContext,
    ToolConfigurationError,
    ToolMetadata,
    ToolNameError,
    ToolResult,
    TypedTool,
    UserError,
    with_description,
    with_note,
)
from toolweave.tools._programmatic import ProgrammaticTool

pytestmark = pytest.mark.anyio


# --- Tool.create with parameter factories ---


async def test_create_without_parameters_has_empty_schema_and_default_metadata() -> None:
    calc = Tool.create('calculator', 'Performs calculations', lambda args: 42)
    assert isinstance(calc, ProgrammaticTool)
    assert calc.definition.parameters == {'type': 'object', 'properties': {}, 'required': []}
    assert calc.definition.metadata == ToolMetadata()
    assert (await calc.call('{}')).output == '42'


def test_metadata_create_return_direct() -> None:
    assert ToolMetadata.create(True).return_direct is True
    tool = Tool.create('final', 'Final answer', lambda args: 'done', metadata=ToolMetadata.create(True))
    assert tool.definition.metadata.return_direct is True


def test_parameter_factories_default_to_required() -> None:
    params = [
        Parameter.string('city', 'City name'),
        Parameter.integer('days', 'Days ahead'),
        Parameter.number('threshold', 'Rain threshold'),
        Parameter.boolean('metric', 'Metric units', required=False),
        Parameter.string('unit', 'Unit', required=False, enum=['C', 'F']),
    ]
    assert [p.required for p in params] == [True, True, True, False, False]
    tool = Tool.create('weather', 'Weather forecast', lambda args: args, parameters=params)
    assert tool.definition.parameters == {
        'type': 'object',
        'properties': {
            'city': {'type': 'string', 'description': 'City name'},
            'days': {'type': 'integer', 'description': 'Days ahead'},
            'threshold': {'type': 'number', 'description': 'Rain threshold'},
            'metric': {'type': 'boolean', 'description': 'Metric units'},
            'unit': {'type': 'string', 'description': 'Unit', 'enum': ['C', 'F']},
        },
        'required': ['city', 'days', 'threshold'],
    }


async def test_handler_receives_validated_arguments_dict() -> None:
    seen: list[dict[str, Any]] = []

    def handler(args: dict[str, Any]) -> str:
        seen.append(args)
        return f"{args['city']} x{args['days']}"

    tool = Tool.create('weather', 'Weather', handler, parameters=[
        Parameter.string('city'), Parameter.integer('days'), Parameter.string('unit', required=False, enum=['C', 'F'])])
    result = await tool.call('{"city": "Paris", "days": "3", "extra": true}')
    assert result.output == 'Paris x3'
    assert seen == [{'city': 'Paris', 'days': 3, 'extra': True}]  # coerced; undeclared keys passed through


async def test_invalid_arguments_list_every_problem() -> None:
    tool = Tool.create('weather', 'Weather', lambda args: 'x', parameters=[
        Parameter.string('city'), Parameter.integer('days'), Parameter.string('unit', required=False, enum=['C', 'F'])])
    result = await tool.call({'days': 'soon', 'unit': 'K'})
    assert result.error is not None and result.error.startswith("Invalid arguments for tool 'weather': ")
    assert 'city: Field required' in result.error
    assert 'days: Input should be a valid integer' in result.error
    assert "unit: Input should be 'C' or 'F', got \"K\"" in result.error
    error = (await tool.call('not json')).error
    assert error is not None
    assert error.startswith("Invalid JSON arguments for tool 'weather'")


async def test_handler_with_context_and_async_handler() -> None:
    async def handler(args: dict[str, Any], context: ToolCallContext) -> str:
        await anyio.lowlevel.checkpoint()
        return f"{args.get('q')}@{context.get('tenant')}"

    tool = Tool.create('search', 'Search', handler, parameters=[Parameter.string('q')])
    assert (await tool.call({'q': 'x'}, {'tenant': 'acme'})).output == 'x@acme'
    assert (await tool.call({'q': 'x'})).output == 'x@None'  # EMPTY context


async def test_handler_results_and_errors() -> None:
    passthrough = ToolResult.failure('nope')
    assert await Tool.create('a', 'a', lambda args: passthrough).call() is passthrough
    assert (await Tool.create('b', 'b', lambda args: {'k': 1}).call()).output == '{"k":1}'
    assert (await Tool.create('c', 'c', lambda args: None).call()).output == ''

    def boom(args: dict[str, Any]) -> str:
        raise RuntimeError('Something went wrong')

    assert (await Tool.create('d', 'd', boom).call()).text == 'Error: Something went wrong'


def test_create_misuse_is_rejected() -> None:
    with pytest.raises(ToolNameError):
        Tool.create('bad name', 'x', lambda args: 1)
    with pytest.raises(UserError, match='must be callable'):
        Tool.create('x', 'x', 'not callable')  # type: ignore[arg-type]
    with pytest.raises(UserError, match="declares parameter 'a' twice"):
        Tool.create('x', 'x', lambda args: 1, parameters=[Parameter.string('a'), Parameter.integer('a')])
    with pytest.raises(UserError, match='must be Parameter objects'):
        Tool.create('x', 'x', lambda args: 1, parameters=[{'name': 'a'}])  # type: ignore[list-item]
    with pytest.raises(UserError, match='got a mapping'):
        Tool.create('x', 'x', lambda args: 1, parameters={'a': 'string'})  # type: ignore[arg-type]
    with pytest.raises(UserError, match='non-blank'):
        Parameter.string(' ')
    with pytest.raises(UserError, match=r"Write `enum=\['C'\]`"):
        Parameter.string('u', enum='C')
    with pytest.raises(UserError, match='empty enum'):
        Parameter.string('u', enum=[])
    with pytest.raises(UserError, match='unknown type'):
        Parameter('u', 'date')  # type: ignore[arg-type]


# --- typed tools ---


class AddInput(BaseModel):
    a: int
    b: int


class AddOutput(BaseModel):
    sum: int


class GreetInput(BaseModel):
    name: str
    greeting: str = 'Hi'


@dataclasses.dataclass
class Pair:
    left: str
    right: str


class Query(TypedDict):
    text: str


def add(input: AddInput) -> AddOutput:
    return AddOutput(sum=input.a + input.b)


async def test_typed_tool_compact_json() -> None:
    tool = Tool.create('add', 'Add two numbers', add)
    assert isinstance(tool, TypedTool)
    result = await tool.call('{"a":5,"b":3}')
    assert result.output == '{"sum":8}'
    assert result.value == AddOutput(sum=8) and result.artifact == AddOutput(sum=8)


def test_typed_tool_schema_comes_from_input_type() -> None:
    tool = Tool.create('add', 'Add two numbers', add)
    assert tool.definition.parameters == {
        'properties': {'a': {'type': 'integer'}, 'b': {'type': 'integer'}},
        'required': ['a', 'b'],
        'type': 'object',
    }


async def test_string_output_as_is_and_defaults_apply() -> None:
    async def greet(input: GreetInput) -> str:
        return f'{input.greeting} {input.name}!'

    tool = Tool.create('greet', 'Greet someone', greet)
    assert (await tool.call('{"name":"Alice"}')).output == 'Hi Alice!'
    assert (await tool.call('{"name":"Bob","greeting":"Hello"}')).output == 'Hello Bob!'


async def test_returned_result_passes_through() -> None:
    marker = ToolResult.success('custom', {'x': 1})

    def fn(input: AddInput) -> ToolResult:
        return marker

    assert await Tool.create('fn', 'fn', fn).call('{"a":1,"b":2}') is marker


@pytest.mark.parametrize(('exc', 'message'), [(RuntimeError('Something went wrong'), 'Something went wrong'),
                                              (RuntimeError(), 'Tool invocation failed'),
                                              (ValueError('   '), 'Tool invocation failed')])
async def test_exception_becomes_error_result(exc: Exception, message: str) -> None:
    def fn(input: AddInput) -> AddOutput:
        raise exc

    result = await Tool.create('fn', 'fn', fn).call('{"a":1,"b":2}')
    assert (result.ok, result.error, result.raised) == (False, message, True)


async def test_invalid_json_and_missing_field() -> None:
    tool = Tool.create('add', 'Add', add)
    bad_json = await tool.call('{"a": 5,')
    assert not bad_json.ok and 'Invalid JSON' in (bad_json.error or '')
    missing = await tool.call('{"a": 5}')
    assert not missing.ok and 'required' in (missing.error or '') and 'b: Field required' in (missing.error or '')


@pytest.mark.parametrize('signal', [ExitEarly('replan'), ToolConfigurationError('bad')])
async def test_control_flow_signals_propagate(signal: Exception) -> None:
    def fn(input: AddInput) -> AddOutput:
        raise signal

    with pytest.raises(type(signal)):
        await Tool.create('fn', 'fn', fn).call('{"a":1,"b":2}')


async def test_typed_tool_with_context_dataclass_and_typeddict() -> None:
    def join(pair: Pair, ctx: ToolCallContext) -> str:
        return f"{pair.left}{ctx.get('sep', '-')}{pair.right}"

    def echo(query: Query) -> Query:
        return query

    joined = Tool.create('join', 'Join', join)
    assert (await joined.call({'left': 'a', 'right': 'b'}, {'sep': '+'})).output == 'a+b'
    assert 'ctx' not in str(joined.definition.parameters)
    assert (await Tool.create('echo', 'Echo', echo).call({'text': 'hi'})).output == '{"text":"hi"}'


async def test_explicit_input_type_for_an_untyped_function() -> None:
    tool = TypedTool('add', 'Add', lambda i: AddOutput(sum=i.a + i.b), input_type=AddInput, output_type=AddOutput)
    assert (await tool.call({'a': 2, 'b': 2})).output == '{"sum":4}'
    with_ctx = TypedTool('ctx', 'Ctx', lambda i, c: c.get('k'), input_type=AddInput)
    assert (await with_ctx.call({'a': 1, 'b': 1}, {'k': 'v'})).output == 'v'


def test_typed_tool_needs_a_model_type() -> None:
    def untyped(x: int) -> int:
        return x

    with pytest.raises(UserError, match=r"Typed tool 'x' needs an input model type"):
        TypedTool('x', 'x', untyped)

    class OldTypedDict(typing.TypedDict):  # rejected by pydantic on Python < 3.12
        a: int

    if sys.version_info < (3, 12):
        with pytest.raises(UserError, match=r"Error generating schema for typed tool 'y' from .*OldTypedDict"):
            TypedTool('y', 'y', lambda i: i, input_type=OldTypedDict)
    # Tool.create falls back to a programmatic tool when the handler is not typed
    assert isinstance(Tool.create('x', 'x', untyped), ProgrammaticTool)


async def test_redescribed_programmatic_tool_keeps_everything_else() -> None:
    calc = Tool.create('calculator', 'Performs calculations', lambda args: 42,
                       parameters=[Parameter.number('x', required=False)])
    renamed = with_description(calc, 'Specialized math tool').with_note('Optimized for financial calculations')
    assert renamed.description == 'Specialized math tool. Optimized for financial calculations'
    assert (renamed.name, renamed.definition.parameters) == ('calculator', calc.definition.parameters)
    assert calc.description == 'Performs calculations'  # the original is unchanged
    assert (await renamed.call('{}')).output == '42'
    assert with_note(Tool.create('t', 'Ends with a dot.', lambda args: 1), 'More').description == \
        'Ends with a dot.. More'


async def test_a_typed_tool_in_a_plan_validates_a_literal_step_once_before_the_plan_runs() -> None:
    from pydantic import field_validator

    from toolweave import PlanValidationError, run_plan

    checks: list[int] = []

    class Order(BaseModel):
        quantity: int

        @field_validator('quantity')
        @classmethod
        def _positive(cls, value: int) -> int:
            checks.append(value)
            if value <= 0:
                raise ValueError('must be positive')
            return value

    order = TypedTool('order', 'Order.', lambda o: f'{o.quantity} ordered', input_type=Order)
    run = await run_plan({'steps': [{'id': 'o', 'tool': 'order', 'arguments': {'quantity': 3}}]}, [order])
    assert run.step('o').output == '3 ordered' and checks == [3]  # checked before the run; the call used that
    with pytest.raises(PlanValidationError) as caught:
        await run_plan({'steps': [{'id': 'o', 'tool': 'order', 'arguments': {'quantity': 0}}]}, [order])
    assert caught.value.problems == [
        "steps[0] (id 'o'): arguments.quantity: Value error, must be positive, got 0."]
