"""A callable's signature and docstring -> the JSON schema a model sees, plus argument validation.

Parameters become fields of a pydantic model (built once, at decoration time), so validation, coercion and the
schema come from one source. Parameters typed `ToolCallContext` are injected at call time and never appear in
the schema.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import threading
import typing
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import griffe
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.errors import PydanticInvalidForJsonSchema, PydanticSchemaGenerationError, PydanticUserError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, SchemaValidator

from toolweave.exceptions import UserError
from toolweave.tools._arguments import ArgumentsError, ToolArguments, load_arguments
from toolweave.tools._callables import annotated_target, is_async_callable, is_context_type
from toolweave.tools._context import ToolCallContext

__all__ = (
    'ArgumentsError',
    'ArgumentsValidator',
    'CallableSchema',
    'DocstringInfo',
    'callable_schema',
    'clean_schema',
    'format_validation_error',
    'object_schema',
    'parse_docstring',
)

_SCHEMA_KEYS_WITH_NAMES = frozenset({'properties', '$defs', 'definitions', 'patternProperties'})
"""Schema keywords whose value maps user-chosen names to subschemas (a property may be called `title`)."""
_MAX_INPUT_SHOWN = 80
MAX_ARGUMENT_PROBLEMS = 20
"""Problems of one call's arguments listed by name; the rest are counted (a list of 50,000 wrong items is one
mistake made 50,000 times, and the message goes to a model)."""


@dataclass(frozen=True, slots=True)
class DocstringInfo:
    """What a docstring tells a model: the description and one text per parameter."""

    description: str
    params: Mapping[str, str]


_GRIFFE_LOCK = threading.Lock()


@contextmanager
def _quiet_griffe() -> Iterator[None]:
    # griffe warns about parameters without types in the docstring; the signature carries them, so the
    # warnings are noise for tool authors. The lock keeps concurrent decorations from restoring a stale level.
    logger = logging.getLogger('griffe')
    with _GRIFFE_LOCK:
        previous = logger.level
        logger.setLevel(logging.ERROR)
        try:
            yield
        finally:
            logger.setLevel(previous)


def parse_docstring(doc: str | None) -> DocstringInfo:
    """Split a Google, NumPy or Sphinx docstring into a description and parameter descriptions.

    The description is the summary plus the body before the first section (parameters, returns, ...).

    ```python
    info = parse_docstring('Add numbers.\\n\\nArgs:\\n    a: The first.\\n    b: The second.')
    print(info.description, dict(info.params))
    #> Add numbers. {'a': 'The first.', 'b': 'The second.'}
    ```
    """
    text = inspect.cleandoc(doc or '')
    if not text:
        return DocstringInfo('', {})
    docstring = griffe.Docstring(text, lineno=1)
    with _quiet_griffe():
        style, _ = griffe.infer_docstring_style(docstring)
        sections = docstring.parse(style or 'google')
    description: list[str] = []
    params: dict[str, str] = {}
    seen_section = False
    for section in sections:
        if section.kind is griffe.DocstringSectionKind.text:
            if not seen_section:
                description.append(str(section.value).strip())
            continue
        seen_section = True
        if section.kind in (griffe.DocstringSectionKind.parameters, griffe.DocstringSectionKind.other_parameters):
            for param in section.value:
                if param.description:
                    params[param.name.lstrip('*')] = inspect.cleandoc(param.description)
    return DocstringInfo('\n\n'.join(part for part in description if part), params)


def clean_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON schema without pydantic's `title` noise; property names called `title` are kept."""
    return _clean(schema, names=False)  # type: ignore[no-any-return]


def _clean(node: Any, *, names: bool) -> Any:
    if isinstance(node, Mapping):
        if names:  # keys are property or definition names, values are schemas
            return {key: _clean(value, names=False) for key, value in node.items()}
        return {
            key: _clean(value, names=key in _SCHEMA_KEYS_WITH_NAMES)
            for key, value in node.items()
            if key != 'title'
        }
    if isinstance(node, list):
        return [_clean(item, names=False) for item in node]
    return node


def _docstring(fn: Callable[..., Any]) -> str | None:
    """The docstring that describes `fn`: a partial's function's; a callable object's class or `__call__`."""
    target: Any = fn
    while isinstance(target, functools.partial):
        target = target.func
    if inspect.isroutine(target) or isinstance(target, type):
        return inspect.getdoc(target)
    # own docstrings only: inspect.getdoc would inherit `object.__call__`'s "Call self as a function."
    return type(target).__doc__ or getattr(type(target).__call__, '__doc__', None)


def _resolve_hints(fn: Callable[..., Any], params: list[inspect.Parameter], problems: list[str]) -> dict[str, Any]:
    """Type hints by parameter name. One unresolvable annotation does not hide the others' problems."""
    target = annotated_target(fn)
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception:  # fall back to one annotation at a time, to name the bad one
        pass
    namespace = getattr(target, '__globals__', {})
    hints: dict[str, Any] = {}
    for param in params:
        annotation = param.annotation
        if annotation is inspect.Parameter.empty:
            continue
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, namespace)  # the same evaluation get_type_hints does
            except Exception as exc:
                problems.append(
                    f'parameter {param.name!r}: annotation {param.annotation!r} could not be resolved ({exc}). '
                    'Define or import the type at module level.'
                )
                continue
        hints[param.name] = annotation
    return hints


def _validator(adapter: TypeAdapter[Any]) -> Callable[[Any], Any]:
    """pydantic-core's validator itself when the adapter has built one: the adapter's own `validate_python` only
    forwards to it, and the forwarding adds a third to a small model's validation."""
    core = adapter.validator
    return core.validate_python if isinstance(core, SchemaValidator) else adapter.validate_python


class ArgumentsValidator:
    """The one way tools validate their arguments: read as a JSON object (`load_arguments`), then validated by
    pydantic against `model` (a pydantic model, a dataclass, a TypedDict, a model built from parameters), prepared
    once. Every problem is reported at once, in a message written for the model (`format_validation_error`)."""

    __slots__ = ('_many', '_model', '_validate', 'schema')

    def __init__(self, model: Any, schema: Mapping[str, Any] | None = None) -> None:
        self._model = model
        self._validate = _validator(TypeAdapter(model))
        self._many: Callable[[Any], Any] | None = None
        """A validator of a list of `model`s, made when first needed (`validate_many`)."""
        self.schema = schema
        """The JSON schema the model was shown; its property names are listed when an argument is unexpected."""

    def validate_many(self, items: Sequence[Mapping[str, Any]]) -> list[Any] | None:
        """The validated values of many argument mappings, in one call of pydantic (a plan's steps without
        references that call one tool); `None` when any of them is wrong (`validate_mapping` then says what)."""
        if self._many is None:
            self._many = _validator(TypeAdapter(list[self._model]))  # type: ignore[name-defined]
        try:
            values: list[Any] = self._many(items)
        except ValidationError:
            return None
        return values

    def validate(self, arguments: ToolArguments, tool_name: str) -> Any:
        """The validated value. Raises `ArgumentsError` with every problem, for the tool called `tool_name`."""
        return self.validate_mapping(load_arguments(arguments, tool_name), tool_name)

    def validate_mapping(self, data: Mapping[str, Any], tool_name: str) -> Any:
        """`validate` for arguments already read as a mapping."""
        try:
            return self._validate(data)
        except ValidationError as exc:
            problems, accepted = validation_problems(exc.errors(include_url=False), self.schema)
            raise ArgumentsError(format_validation_error(exc, tool_name, self.schema), problems=problems,
                                 accepted=accepted) from None

    def check_partial(self, data: Mapping[str, Any], pending: Collection[str], tool_name: str) -> None:
        """Validate `data` but the arguments named in `pending` (known later): those must be arguments the tool
        takes, their values are not looked at. Raises `ArgumentsError` like `validate_mapping`. Only for a model
        without validators of its own across fields (the model `callable_schema` builds from parameters)."""
        errors: list[ErrorDetails] = []
        try:
            self._validate({k: v for k, v in data.items() if k not in pending})
        except ValidationError as exc:
            errors = [e for e in exc.errors(include_url=False)
                      if not (e['type'] == 'missing' and len(e['loc']) == 1 and e['loc'][0] in pending)]
        schema = self.schema or {}
        properties = schema.get('properties')
        if schema.get('additionalProperties') is False and isinstance(properties, Mapping):
            errors += [ErrorDetails(type='extra_forbidden', loc=(name,), msg='Extra inputs are not permitted',
                                    input=data[name]) for name in pending if name not in properties]
        if errors:
            problems, accepted = validation_problems(errors, self.schema)
            raise ArgumentsError(_invalid(tool_name, problems, accepted), problems=problems, accepted=accepted)


@dataclass(frozen=True, slots=True)
class CallableSchema:
    """Everything needed to expose a callable as a tool: its schema, its validator and how to call it."""

    parameters: dict[str, Any]
    """The JSON schema of the arguments, as a model sees it."""
    description: str
    """The docstring's summary and body (before the parameter section)."""
    model: type[BaseModel]
    """Validates the arguments; fields are named `p0`, `p1`, ... with the parameter names as aliases."""
    takes_self: bool
    """The first parameter is `self`: the callable is a method and must be bound before it is called."""
    is_async: bool
    plan: tuple[tuple[str, str, bool], ...]
    """How to call: (parameter name, field name or `''` for the context, positional-only?) per parameter."""
    validator: ArgumentsValidator

    def validate(self, arguments: ToolArguments, tool_name: str) -> dict[str, Any]:
        """The validated values by field name. Raises `ArgumentsError` listing every problem."""
        return self.values(self.validator.validate(arguments, tool_name))

    @staticmethod
    def values(instance: BaseModel) -> dict[str, Any]:
        """The values by field name of an instance of `model` (what `validate` returns)."""
        # The instance's own fields (`extra='forbid'`: nothing else is in it), not model_dump: nested models and
        # dataclasses reach the function as themselves. Read, never changed: the instance is the call's alone.
        return instance.__dict__

    def bind(self, values: Mapping[str, Any], context: ToolCallContext) -> tuple[list[Any], dict[str, Any]]:
        """Positional and keyword arguments for the callable, with the context injected."""
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for name, field, positional in self.plan:
            value = context if not field else values[field]
            if positional:
                args.append(value)
            else:
                kwargs[name] = value
        return args, kwargs


def callable_schema(fn: Callable[..., Any], *, where: str | None = None) -> CallableSchema:
    """Inspect `fn` and build its schema. Raises `UserError` listing every problem found, at once.

    ```python
    def add(a: int, b: int = 0) -> int:
        '''Add two numbers.

        Args:
            a: The first number.
        '''
        return a + b

    schema = callable_schema(add).parameters
    print(schema['properties']['a'], schema['required'], schema['additionalProperties'])
    #> {'description': 'The first number.', 'type': 'integer'} ['a'] False
    ```
    """
    label = where or getattr(fn, '__qualname__', None) or repr(fn)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise UserError(f'Cannot read the signature of {label}: {exc}. Pass a Python function or method.') from None
    params = list(signature.parameters.values())
    takes_self = bool(params) and params[0].name == 'self' and inspect.isfunction(inspect.unwrap(fn))
    if takes_self:
        params = params[1:]
    problems: list[str] = []
    hints = _resolve_hints(fn, params, problems)
    doc = parse_docstring(_docstring(fn))
    fields: dict[str, Any] = {}
    plan: list[tuple[str, str, bool]] = []
    for param in params:
        field_name = _add_field(param, hints, doc, fields, problems)
        if field_name is not None:
            plan.append((param.name, field_name, param.kind is inspect.Parameter.POSITIONAL_ONLY))
    model = _build_model(label, fields, problems)
    if problems:
        raise UserError(f'Error generating schema for {label}:\n' + '\n'.join(f'  - {p}' for p in problems))
    assert model is not None  # no problems means the model was built
    parameters = object_schema(model)
    return CallableSchema(
        parameters=parameters,
        description=doc.description,
        model=model,
        takes_self=takes_self,
        is_async=is_async_callable(fn),
        plan=tuple(plan),
        validator=ArgumentsValidator(model, parameters),
    )


def _add_field(
    param: inspect.Parameter, hints: Mapping[str, Any], doc: DocstringInfo, fields: dict[str, Any],
    problems: list[str],
) -> str | None:
    """Add `param` as a model field; `''` for an injected context; `None` when it has a problem."""
    name = param.name
    if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
        star = '*' if param.kind is inspect.Parameter.VAR_POSITIONAL else '**'
        problems.append(f'parameter `{star}{name}`: variadic parameters cannot be described to a model. '
                        'Declare each argument by name with a type.')
        return None
    if name not in hints:
        if param.annotation is inspect.Parameter.empty:
            problems.append(f'parameter {name!r} has no type annotation. Annotate it, for example `{name}: str`.')
        return None
    hint = hints[name]
    if is_context_type(hint):
        return ''
    problem = _unsupported(hint)
    if problem is not None:
        problems.append(f'parameter {name!r} of type {_type_name(hint)}: {problem}')
        return None
    field_name = f'p{len(fields)}'
    default = ... if param.default is inspect.Parameter.empty else param.default
    described = any(isinstance(meta, FieldInfo) and meta.description for meta in getattr(hint, '__metadata__', ()))
    description = None if described else doc.params.get(name)  # an explicit `Field(description=...)` wins
    extra: dict[str, Any] = {} if description is None else {'description': description}
    fields[field_name] = (hint, Field(default, alias=name, **extra))
    return field_name


def _unsupported(hint: Any) -> str | None:
    """Why `hint` cannot be validated or described to a model, or `None` if it can."""
    fix = 'Use JSON-friendly types: str, int, float, bool, lists, dicts, enums, Literal, pydantic models, dataclasses.'
    try:
        TypeAdapter(hint).json_schema()
    except PydanticSchemaGenerationError:
        return f'arguments of this type cannot be validated from JSON. {fix}'
    except PydanticInvalidForJsonSchema:
        return f'this type has no JSON Schema form. {fix}'
    except PydanticUserError as exc:
        return str(exc).strip().splitlines()[0]
    return None


def _type_name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else repr(hint)


def _build_model(label: str, fields: dict[str, Any], problems: list[str]) -> type[BaseModel] | None:
    if problems:
        return None
    try:
        model: type[BaseModel] = create_model(
            f'{label.replace(".", "_").replace("<", "").replace(">", "")}_arguments',
            __config__=ConfigDict(extra='forbid', populate_by_name=False, arbitrary_types_allowed=False),
            **fields,
        )
        model.model_json_schema()
    except (PydanticUserError, TypeError, ValueError) as exc:
        problems.append(str(exc).strip().splitlines()[0])
        return None
    return model


def object_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The cleaned JSON schema of `model`, with `required` and `additionalProperties` always present."""
    raw = clean_schema(model.model_json_schema())
    schema: dict[str, Any] = {
        'type': 'object',
        'properties': raw.pop('properties', {}),
        'required': raw.pop('required', []),
    }
    if model.model_config.get('extra') == 'forbid':
        schema['additionalProperties'] = False
    raw.pop('type', None)
    raw.pop('additionalProperties', None)
    schema.update(raw)  # `$defs` for nested models, `description` from a model docstring
    return schema


def _render_input(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _MAX_INPUT_SHOWN else f'{text[:_MAX_INPUT_SHOWN]}...'


def _path(loc: tuple[int | str, ...]) -> str:
    out = ''
    for part in loc:
        out += f'[{part}]' if isinstance(part, int) else (f'.{part}' if out else str(part))
    return out or '(arguments)'


def format_validation_error(exc: ValidationError, tool_name: str, schema: Mapping[str, Any] | None = None) -> str:
    """One line listing every problem with its field path, then how to fix it.

    For example: `Invalid arguments for tool 'add': a: Input should be a valid integer, got "x"; b: Field
    required. Fix the arguments to match the tool's parameter schema and call it again.`
    """
    return _invalid(tool_name, *validation_problems(exc.errors(include_url=False), schema))


def _invalid(tool_name: str, problems: list[str], accepted: str | None) -> str:
    hint = "Fix the arguments to match the tool's parameter schema and call it again."
    if accepted is not None:
        hint = f'Accepted arguments: {accepted}. {hint}'
    return f'Invalid arguments for tool {tool_name!r}: {"; ".join(problems)}. {hint}'


def validation_problems(errors: Iterable[ErrorDetails],
                        schema: Mapping[str, Any] | None = None) -> tuple[list[str], str | None]:
    """Each problem of pydantic's `errors` with its field path (`days: Input should be a valid integer, got "x"`),
    the first `MAX_ARGUMENT_PROBLEMS` of them and then how many more (`... and 12 more problems of the same
    kinds`), and the accepted argument names when an argument was unexpected (`None` otherwise)."""
    problems: list[str] = []
    unexpected = False
    errors = list(errors)
    for error in errors[:MAX_ARGUMENT_PROBLEMS]:
        message = str(error['msg'])
        if error['type'] == 'missing':
            problems.append(f'{_path(error["loc"])}: {message}')
            continue
        if error['type'] == 'extra_forbidden':
            unexpected = True
            message = 'Unexpected argument'
        problems.append(f'{_path(error["loc"])}: {message}, got {_render_input(error["input"])}')
    if len(errors) > MAX_ARGUMENT_PROBLEMS:
        rest = len(errors) - MAX_ARGUMENT_PROBLEMS
        unexpected = unexpected or any(e['type'] == 'extra_forbidden' for e in errors[MAX_ARGUMENT_PROBLEMS:])
        problems.append(f'... and {rest} more problem{"s" if rest > 1 else ""} of the same kinds')
    properties = (schema or {}).get('properties')
    if unexpected and isinstance(properties, Mapping):
        return problems, ', '.join(properties) or '(none)'
    return problems, None
