"""Tools built in code: `Tool.create(name, description, handler, parameters=[...])` and typed tools whose
input and output are models."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from pydantic.errors import PydanticInvalidForJsonSchema, PydanticSchemaGenerationError, PydanticUserError

from toolweave.exceptions import ControlFlowSignal, ToolConfigurationError, UserError
from toolweave.tools._arguments import ArgumentsError, CheckedArguments, ToolArguments, load_arguments
from toolweave.tools._callables import handler_call, run_callable, type_hints
from toolweave.tools._context import ToolCallContext
from toolweave.tools._definition import ToolDefinition, ToolMetadata, check_tool_name, empty_object_schema
from toolweave.tools._function import to_result
from toolweave.tools._result import ToolResult
from toolweave.tools._schema import ArgumentsValidator, clean_schema
from toolweave.tools._tool import Tool

__all__ = (
    'Parameter',
    'ParameterType',
    'ProgrammaticTool',
    'TypedTool',
    'create_tool',
    'is_typed_handler',
    'parameters_model',
    'parameters_schema',
)

ParameterType = Literal['string', 'integer', 'number', 'boolean']
_PYTHON_TYPES: dict[ParameterType, type] = {'string': str, 'integer': int, 'number': float, 'boolean': bool}
TYPED_NO_MESSAGE = 'Tool invocation failed'
"""The failure message of a typed tool whose exception has no message."""


@dataclass(frozen=True, slots=True)
class Parameter:
    """One argument of a programmatic tool. Build it with a factory; parameters are required by default.

    ```python
    unit = Parameter.string('unit', 'Temperature unit', required=False, enum=['C', 'F'])
    print(unit.json_schema())
    #> {'type': 'string', 'description': 'Temperature unit', 'enum': ['C', 'F']}
    ```
    """

    name: str
    type: ParameterType
    description: str = ''
    required: bool = True
    enum: tuple[str, ...] | None = None
    """The allowed values of a string parameter."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise UserError(f'Parameter name must be a non-blank string, got {self.name!r}. '
                            "For example `Parameter.string('query', 'What to search for')`.")
        if self.type not in _PYTHON_TYPES:
            raise UserError(f'Parameter {self.name!r} has unknown type {self.type!r}. Use one of: '
                            f'{", ".join(_PYTHON_TYPES)}.')
        if self.enum is not None and not self.enum:
            raise UserError(f'Parameter {self.name!r} has an empty enum. Give at least one allowed value, or '
                            'pass `enum=None`.')

    @classmethod
    def string(cls, name: str, description: str = '', required: bool = True,
               enum: Sequence[str] | None = None) -> Parameter:
        """A string parameter, optionally limited to `enum` values."""
        if isinstance(enum, str):
            raise UserError(f'enum of parameter {name!r} must be a list of strings, got the string {enum!r}. '
                            f'Write `enum=[{enum!r}]`.')
        return cls(name, 'string', description, required, None if enum is None else tuple(enum))

    @classmethod
    def integer(cls, name: str, description: str = '', required: bool = True) -> Parameter:
        return cls(name, 'integer', description, required)

    @classmethod
    def number(cls, name: str, description: str = '', required: bool = True) -> Parameter:
        """A floating-point parameter (JSON `number`)."""
        return cls(name, 'number', description, required)

    @classmethod
    def boolean(cls, name: str, description: str = '', required: bool = True) -> Parameter:
        return cls(name, 'boolean', description, required)

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {'type': self.type}
        if self.description:
            schema['description'] = self.description
        if self.enum is not None:
            schema['enum'] = list(self.enum)
        return schema

    def annotation(self) -> Any:
        if self.enum is not None:
            return Literal[self.enum]  # a Literal over the runtime tuple: validation checks membership
        return _PYTHON_TYPES[self.type]


def _check_handler(handler: object, name: str) -> Callable[..., Any]:
    if not callable(handler):
        raise UserError(f'Handler of tool {name!r} must be callable, got {type(handler).__name__} {handler!r}. '
                        'Pass a function that takes the arguments dict (and optionally the context).')
    return handler


class ProgrammaticTool(Tool):
    """A tool from a name, a description, a handler and parameter declarations (`Tool.create`).

    The handler receives the arguments as a dict (declared parameters validated and coerced; undeclared keys
    passed through) and the `ToolCallContext` in a parameter annotated with it, or as a required second parameter
    (see `toolweave.tools._callables`). It may be sync or async.

    ```python
    weather = Tool.create('weather', 'Current weather', lambda args: f"Sunny in {args['city']}",
                          parameters=[Parameter.string('city', 'City name')])
    print(weather.call_sync('{"city": "Paris"}').output, weather.definition.parameters['required'])
    #> Sunny in Paris ['city']
    ```
    """

    def __init__(
        self,
        name: str,
        description: str,
        handler: Callable[..., Any],
        parameters: Sequence[Parameter] = (),
        *,
        metadata: ToolMetadata | None = None,
    ) -> None:
        check_tool_name(name, where='Tool.create')
        self._handler = _check_handler(handler, name)
        self._parameters = tuple(parameters)
        self._definition = ToolDefinition(name, description, parameters_schema(name, self._parameters),
                                          metadata or ToolMetadata())
        model = parameters_model(name, self._parameters)
        self._validator = None if model is None else ArgumentsValidator(model, self._definition.parameters)
        self._call = handler_call(handler)

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    @property
    def parameters(self) -> tuple[Parameter, ...]:
        return self._parameters

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        try:
            values = load_arguments(arguments, self.name)
            if self._validator is not None:
                validated = self._validator.validate_mapping(values, self.name)
                for field in validated.model_fields_set:
                    values[self._parameters[int(field[1:])].name] = getattr(validated, field)
        except ArgumentsError as exc:
            return ToolResult.failure(str(exc))
        args, kwargs = self._call.arguments([values], context)
        return to_result(await run_callable(self._handler, self._call.is_async, args, kwargs))


def parameters_schema(name: str, parameters: Sequence[Parameter]) -> dict[str, Any]:
    if not parameters:
        return empty_object_schema()
    seen: set[str] = set()
    for param in parameters:
        if not isinstance(param, Parameter):
            raise UserError(f'Parameters of tool {name!r} must be Parameter objects, got {param!r}. '
                            "Build them with `Parameter.string('name', 'description')` and friends.")
        if param.name in seen:
            raise UserError(f'Tool {name!r} declares parameter {param.name!r} twice. Give each parameter a '
                            'unique name.')
        seen.add(param.name)
    return {
        'type': 'object',
        'properties': {p.name: p.json_schema() for p in parameters},
        'required': [p.name for p in parameters if p.required],
    }


def parameters_model(name: str, parameters: Sequence[Parameter]) -> type[BaseModel] | None:
    if not parameters:
        return None
    fields: dict[str, Any] = {
        f'p{i}': (p.annotation() if p.required else p.annotation() | None,
                  Field(... if p.required else None, alias=p.name))
        for i, p in enumerate(parameters)
    }
    return create_model(f'{name}_arguments', __config__=ConfigDict(extra='ignore'), **fields)


def _typed_input(fn: Callable[..., Any]) -> Any:
    """The annotation of the one input of a typed handler (besides the call context), or `None`."""
    call = handler_call(fn)
    if len(call.inputs) != 1:
        return None
    hints = type_hints(fn)
    return hints.get(call.inputs[0].name)


def _is_model_type(annotation: Any) -> bool:
    return isinstance(annotation, type) and (
        issubclass(annotation, BaseModel) or dataclasses.is_dataclass(annotation) or typing.is_typeddict(annotation)
    )


def is_typed_handler(fn: object) -> bool:
    """Whether `fn` takes exactly one model-typed input (a pydantic model, dataclass or TypedDict), plus an
    optional `ToolCallContext`: the shape of a typed tool."""
    return callable(fn) and _is_model_type(_typed_input(fn))


class TypedTool(Tool):
    """A tool from a function that takes one input model and returns an output model.

    The schema is the input model's. The output is compact JSON (a `str` as-is; a returned `ToolResult`
    unchanged). An exception becomes a failure with its message, or `Tool invocation failed`. The function
    receives the call context like any handler (see `toolweave.tools._callables`).

    ```python
    from pydantic import BaseModel

    class AddInput(BaseModel):
        a: int
        b: int

    class AddOutput(BaseModel):
        sum: int

    add = TypedTool('add', 'Add two numbers', lambda i: AddOutput(sum=i.a + i.b), input_type=AddInput)
    print(add.call_sync('{"a":5,"b":3}').output)
    #> {"sum":8}
    ```
    """

    def __init__(
        self,
        name: str,
        description: str,
        fn: Callable[..., Any],
        *,
        input_type: type[Any] | None = None,
        output_type: type[Any] | None = None,
        metadata: ToolMetadata | None = None,
    ) -> None:
        check_tool_name(name, where='typed tool')
        self._fn = _check_handler(fn, name)
        self._call = handler_call(fn)
        self.input_type: type[Any] = input_type or _typed_input(fn)
        if not _is_model_type(self.input_type):
            raise UserError(
                f'Typed tool {name!r} needs an input model type (a pydantic model, dataclass or TypedDict), got '
                f"{self.input_type!r}. Annotate the function's single parameter, e.g. `def fn(input: AddInput)`, "
                'or pass `input_type=AddInput`.'
            )
        self.output_type = output_type
        try:
            schema = clean_schema(TypeAdapter(self.input_type).json_schema())
        except (PydanticUserError, PydanticSchemaGenerationError, PydanticInvalidForJsonSchema) as exc:
            raise UserError(f'Error generating schema for typed tool {name!r} from {self.input_type.__qualname__}: '
                            f'{str(exc).strip().splitlines()[0]}') from None
        schema.setdefault('required', [])
        self._definition = ToolDefinition(name, description, schema, metadata or ToolMetadata())
        self._validator = ArgumentsValidator(self.input_type, schema)

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    def check_arguments(self, arguments: Mapping[str, Any], *,
                        pending: Collection[str] = ()) -> CheckedArguments | None:
        """Validate `arguments` with the tool's input type, as a call would: the arguments, carrying the validated
        value for the call. With `pending` (arguments known later) `None`: the input type may validate across its
        fields, so the JSON schema checks the rest (see `Tool.check_arguments`)."""
        if pending:
            return None
        return CheckedArguments.of(arguments, self._validator, self._validator.validate_mapping(arguments, self.name))

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        value = arguments.take(self._validator) if type(arguments) is CheckedArguments else None
        if value is None:
            try:
                value = self._validator.validate(arguments, self.name)
            except ArgumentsError as exc:
                return ToolResult.failure(str(exc))
        args, kwargs = self._call.arguments([value], context)
        try:
            output = await run_callable(self._fn, self._call.is_async, args, kwargs)
        except (ToolConfigurationError, ControlFlowSignal):
            raise
        except Exception as exc:
            message = str(exc).strip()
            return ToolResult(error=message or TYPED_NO_MESSAGE, raised=True)
        return to_result(output)


def create_tool(
    name: str,
    description: str,
    handler: Callable[..., Any],
    parameters: Sequence[Parameter] | None = None,
    *,
    metadata: ToolMetadata | None = None,
) -> Tool:
    """`Tool.create`: a typed tool when `handler` takes one model-typed input and no `parameters` are given,
    otherwise a programmatic tool whose handler receives the arguments dict."""
    if isinstance(parameters, Mapping):
        raise UserError(f'parameters of tool {name!r} must be a list of Parameter objects, got a mapping. '
                        "Write `parameters=[Parameter.string('city', 'City name')]`.")
    if parameters is None and is_typed_handler(handler):
        return TypedTool(name, description, handler, metadata=metadata)
    return ProgrammaticTool(name, description, handler, parameters or (), metadata=metadata)
