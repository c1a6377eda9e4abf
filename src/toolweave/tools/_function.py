"""Function tools: `@tool` turns a typed function or method into a `Tool`; `tools_from` collects an object's."""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import partial
from typing import Any, Generic, ParamSpec, Self, TypeVar, overload

import pydantic_core
from pydantic import BaseModel

from toolweave.exceptions import ToolConfigurationError, UserError
from toolweave.tools._arguments import ArgumentsError, CheckedArguments, ToolArguments
from toolweave.tools._callables import callable_names, run_callable
from toolweave.tools._context import ToolCallContext
from toolweave.tools._definition import ToolDefinition, ToolMetadata, check_tool_name
from toolweave.tools._result import ToolResult
from toolweave.tools._schema import CallableSchema, callable_schema
from toolweave.tools._tool import Tool

__all__ = (
    'TOOLS_HOOK',
    'FunctionTool',
    'function_tool',
    'has_tool_methods',
    'method_tools',
    'output_text',
    'to_result',
    'tool',
    'tools_from',
    'tools_from_safely',
)

_CHUNK = 128
"""Argument mappings validated in one call of `check_arguments_many`: the model instances of a call live until it
returns, and thousands alive at once would outlive the collector's young generations, to be walked again by its full
collections (a run of 10k steps with a nested model took 2 µs a step longer validated in one call than in these)."""

P = ParamSpec('P')
R = TypeVar('R')


def output_text(value: object) -> str:
    """The text a model sees for a returned value: `str` as-is, `None` as `""`, everything else compact JSON.

    ```python
    print(output_text({'sum': 8}), output_text([1, 2]), output_text(True), repr(output_text(None)))
    #> {"sum":8} [1,2] true ''
    ```
    """
    if value is None:
        return ''
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return pydantic_core.to_json(value, fallback=str).decode()
    except (TypeError, ValueError, pydantic_core.PydanticSerializationError):
        return str(value)


_PLAIN = (str, int, float, bool, type(None))


def to_result(value: object) -> ToolResult:
    """What a tool function's return value becomes: a returned `ToolResult` unchanged; any other value a success
    that keeps it as `value` (an artifact when it is structured, not plain text, a number or a boolean)."""
    if isinstance(value, ToolResult):
        return value
    return ToolResult.success(output_text(value), value, artifact=not isinstance(value, _PLAIN))


class FunctionTool(Tool, Generic[P, R]):
    """A tool made from a typed Python function or method. Usually created with [`tool`][toolweave.tool].

    The JSON schema comes from the type hints, the descriptions from the docstring. Arguments are validated
    before the function runs; every problem is reported back to the model at once. A `FunctionTool` is still
    callable as the original function.

    ```python
    @tool
    def add(a: int, b: int) -> int:
        '''Add two integers.'''
        return a + b

    print(add(1, 2), add.call_sync('{"a": 1, "b": 2}').output)
    #> 3 3
    print(add.call_sync('{"a": 1}').error.split('. ')[0])
    #> Invalid arguments for tool 'add': b: Field required
    ```
    """

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        return_direct: bool = False,
        requires_approval: bool = False,
        category: str | None = None,
        read_only: bool | None = None,
        idempotent: bool | None = None,
        metadata: ToolMetadata | None = None,
    ) -> None:
        if isinstance(fn, staticmethod | classmethod):
            raise UserError(
                f'@tool was applied on top of @{type(fn).__name__} for {fn.__func__.__qualname__}. '
                f'Put @tool below it: `@{type(fn).__name__}` then `@tool` then `def ...`.'
            )
        if not callable(fn):
            raise UserError(f'@tool needs a function or method, got {type(fn).__name__} {fn!r}.')
        qualname, default_name = callable_names(fn)
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            raise UserError(
                f'@tool cannot wrap the generator function {qualname}: a tool returns one result. Return a list '
                '(or a string) instead of yielding items.'
            )
        tool_name = name if name is not None else default_name
        check_tool_name(tool_name, where=f'function {qualname}' + ('' if name is None else ' (name=...)'))
        schema = callable_schema(fn, where=qualname)
        if metadata is None:
            metadata = ToolMetadata(return_direct=return_direct, requires_approval=requires_approval,
                                    category=category, read_only=read_only, idempotent=idempotent)
        self._fn = fn
        self._schema: CallableSchema = schema
        self._definition = ToolDefinition(tool_name, schema.description if description is None else description,
                                          schema.parameters, metadata)
        self._instance: object | None = None
        self.__wrapped__ = fn
        self.__doc__ = getattr(fn, '__doc__', None)
        self.__name__ = default_name
        self.__qualname__ = qualname

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    @property
    def function(self) -> Callable[P, R]:
        """The original function (unbound for a method)."""
        return self._fn

    @property
    def is_method(self) -> bool:
        """Whether the function takes `self` and so must be reached through an instance."""
        return self._schema.takes_self

    @property
    def instance(self) -> object | None:
        """The object a method tool is bound to, or `None`."""
        return self._instance

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the original function directly, as if it were not a tool."""
        if self._instance is not None:
            method: Callable[..., R] = self._fn
            return method(self._instance, *args, **kwargs)
        return self._fn(*args, **kwargs)

    @overload
    def __get__(self, instance: None, owner: type[Any] | None = None) -> Self: ...
    @overload
    def __get__(self, instance: object, owner: type[Any] | None = None) -> FunctionTool[..., R]: ...
    def __get__(self, instance: object | None, owner: type[Any] | None = None) -> FunctionTool[..., R]:
        # A method tool reached through an instance is bound to it, like a function becomes a bound method.
        if instance is None or not self._schema.takes_self:
            return self
        return self.bind(instance)

    def bind(self, instance: object) -> FunctionTool[..., R]:
        """This method tool bound to `instance`: calls run against that object's state."""
        if not self._schema.takes_self:
            raise UserError(f'Tool {self.name!r} is not a method (its first parameter is not `self`); '
                            'only method tools can be bound to an object.')
        bound: FunctionTool[..., R] = object.__new__(type(self))
        bound.__dict__.update(self.__dict__)
        bound._instance = instance
        return bound

    def with_definition(self, definition: ToolDefinition) -> FunctionTool[P, R]:
        """A copy with another definition (name, description, metadata); the behaviour is unchanged."""
        copy: FunctionTool[P, R] = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy._definition = definition
        return copy

    @overload
    def check_arguments(self, arguments: Mapping[str, Any]) -> CheckedArguments: ...
    @overload
    def check_arguments(self, arguments: Mapping[str, Any], *,
                        pending: Collection[str] = ...) -> CheckedArguments | bool: ...
    def check_arguments(self, arguments: Mapping[str, Any], *,
                        pending: Collection[str] = ()) -> CheckedArguments | bool:
        """Validate `arguments` with the tool's own validator, as a call would: the arguments, carrying the
        validated values for the call (with `pending`: `True`, see `Tool.check_arguments`). Raises
        `ArgumentsError` with every problem."""
        schema = self._schema
        name = self._definition.name  # not `self.name`: two properties deep, and a plan checks each step here
        if pending:
            schema.validator.check_partial(arguments, pending, name)
            return True
        # The values, not the model instance they sit in: one object fewer held from a plan's check to its call.
        return CheckedArguments.of(arguments, schema, schema.values(schema.validator.validate_mapping(arguments, name)))

    def check_arguments_many(self, arguments: Sequence[Mapping[str, Any]]) -> list[CheckedArguments] | None:
        """`check_arguments` of each of `arguments`, a call of the validator per `_CHUNK` of them; `None` when any
        is wrong."""
        schema = self._schema
        validate_many, values = schema.validator.validate_many, schema.values
        checked: list[CheckedArguments] = []
        for start in range(0, len(arguments), _CHUNK):
            chunk = arguments[start:start + _CHUNK]
            found = validate_many(chunk)
            if found is None:
                return None
            checked.extend(CheckedArguments.of(given, schema, values(value))
                           for given, value in zip(chunk, found, strict=True))
        return checked

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        if self._schema.takes_self and self._instance is None:
            raise ToolConfigurationError(
                f'Method tool {self.__qualname__} was called without an instance. Use the tool through an object, '
                f'for example `tools_from(obj)` or `obj.{self.__name__}`.'
            )
        schema = self._schema
        values = arguments.take(schema) if type(arguments) is CheckedArguments else None
        if values is None:
            try:
                values = schema.validate(arguments, self.name)
            except ArgumentsError as exc:
                return ToolResult.failure(str(exc))
        args, kwargs = self._schema.bind(values, context)
        fn: Callable[..., Any] = self._fn
        if self._instance is not None:
            fn = partial(fn, self._instance)
        return to_result(await run_callable(fn, self._schema.is_async, args, kwargs))

    def __repr__(self) -> str:
        bound = '' if self._instance is None else f', bound to {type(self._instance).__name__}'
        return f'FunctionTool(name={self.name!r}, function={self.__qualname__}{bound})'


@overload
def tool(
    fn: Callable[P, R],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    return_direct: bool = False,
    requires_approval: bool = False,
    category: str | None = None,
    read_only: bool | None = None,
    idempotent: bool | None = None,
) -> FunctionTool[P, R]: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    return_direct: bool = False,
    requires_approval: bool = False,
    category: str | None = None,
    read_only: bool | None = None,
    idempotent: bool | None = None,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...
def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    return_direct: bool = False,
    requires_approval: bool = False,
    category: str | None = None,
    read_only: bool | None = None,
    idempotent: bool | None = None,
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Turn a typed function or method (sync or async) into a tool; it stays callable as before.

    Args:
        fn: The function, when used bare as `@tool`.
        name: The tool name; defaults to the function name. Must match `^[A-Za-z0-9_-]{1,64}$`.
        description: What the model reads; defaults to the docstring's summary and body.
        return_direct: The tool's output is the agent's final answer.
        requires_approval: A review handler must approve each call.
        category: A grouping label for progressive disclosure.
        read_only: The tool changes nothing outside itself: a plan step calling it may start while the model is
            still writing the plan (`Agent(eager_plans=True)`), and runs again after a crash without asking.
        idempotent: Calling it twice with the same arguments has no further effect: a durable plan runs it again
            after a crash without asking.

    A parameter typed `ToolCallContext` (at any position) receives the call context and is hidden from the
    model. Methods work through an instance (`obj.method` is a tool bound to `obj`; see `tools_from`).

    ```python
    @tool(name='greet', description='Greet someone by name.')
    async def hello(who: str, context: ToolCallContext) -> str:
        return f'Hello {who} from {context.get("tenant")}'

    print(hello.call_sync({'who': 'Ada'}, {'tenant': 'acme'}).output, list(hello.definition.parameters['properties']))
    #> Hello Ada from acme ['who']
    ```
    """
    given: object = fn
    if isinstance(given, str):
        raise UserError(f'@tool got a positional name {given!r}. Pass it by keyword: `@tool(name={given!r})`.')

    def decorate(function: Callable[P, R]) -> FunctionTool[P, R]:
        return FunctionTool(function, name=name, description=description, return_direct=return_direct,
                            requires_approval=requires_approval, category=category, read_only=read_only,
                            idempotent=idempotent)

    return decorate if fn is None else decorate(fn)  # `tool(fn, name=...)` keeps its options too


def function_tool(fn: Callable[..., Any] | Tool) -> Tool:
    """A tool from a plain callable (or the tool itself if `fn` already is one), with the defaults of `@tool`."""
    if isinstance(fn, Tool):
        return fn
    return FunctionTool(fn)


TOOLS_HOOK = '__toolweave_tools__'
"""A class whose own body defines `__toolweave_tools__(self) -> list[Tool]` says which tools its instances stand
for, instead of their `@tool` methods: `@unfolding_tools` defines it so an instance becomes one facade. It is
read from the class itself, not inherited: a subclass stands for its own methods unless it says otherwise."""


def _provided(obj: object) -> list[Tool] | None:
    hook = vars(type(obj)).get(TOOLS_HOOK)
    if hook is None or isinstance(obj, type):
        return None
    tools = list(hook(obj))
    for tool in tools:
        if not isinstance(tool, Tool):
            raise UserError(f'{type(obj).__qualname__}.{TOOLS_HOOK} returned {tool!r}, not a Tool.')
    return tools


def _tool_attributes(cls: type) -> list[str]:
    """Names of the `@tool` attributes of a class, in definition order (base classes first)."""
    names: dict[str, None] = {}
    for klass in reversed(cls.__mro__):
        for attr_name, attr in vars(klass).items():
            if isinstance(attr, FunctionTool) or (
                isinstance(attr, staticmethod) and isinstance(attr.__func__, FunctionTool)
            ):
                names.setdefault(attr_name)
    return list(names)


def method_tools(obj: object) -> list[Tool]:
    """The `@tool` methods of an object (bound to it) or the `@tool` functions of a module, in definition order;
    `[]` when it has none. Unlike `tools_from`, a class-provided set of tools (`@unfolding_tools`) is not used."""
    if isinstance(obj, types.ModuleType):
        return [value for value in vars(obj).values() if isinstance(value, FunctionTool) and not value.is_method]
    if isinstance(obj, type | Tool):
        return []
    tools: list[Tool] = []
    for attr_name in _tool_attributes(type(obj)):
        value = getattr(obj, attr_name, None)
        if isinstance(value, FunctionTool):  # a subclass may have replaced it with a plain method
            tools.append(value)
    return tools


def _tools_of(obj: object) -> list[Tool]:
    provided = _provided(obj)
    return provided if provided is not None else method_tools(obj)


def has_tool_methods(obj: object) -> bool:
    """Whether `obj` is an instance (or module) that stands for tools: `@tool` methods, or a class-provided set."""
    if isinstance(obj, type | Tool):
        return False
    return bool(_tools_of(obj))


def tools_from(obj: object) -> list[Tool]:
    """The tools an object stands for: its `@tool` methods, bound to it (they see and change its state), in
    definition order; or, for an instance of a class decorated with `@unfolding_tools`, the one facade over them.

    Also accepts a module (its `@tool` functions) or a `Tool` (returned as a one-item list).

    ```python
    class Counter:
        def __init__(self) -> None:
            self.count = 0

        @tool
        def increment(self, by: int = 1) -> int:
            '''Increase the counter.'''
            self.count += by
            return self.count

    counter = Counter()
    [increment] = tools_from(counter)
    print(increment.call_sync('{"by": 5}').output, counter.count)
    #> 5 5
    ```

    Raises:
        UserError: `obj` stands for no tools. Use `tools_from_safely` to get `[]` instead.
    """
    if isinstance(obj, Tool):
        return [obj]
    if isinstance(obj, type) and _tool_attributes(obj):
        raise UserError(
            f'tools_from got the class {obj.__qualname__}, not an instance. Its @tool methods need an object: '
            f'`tools_from({obj.__name__}(...))`.'
        )
    found = [] if isinstance(obj, type) else _tools_of(obj)
    if not found:
        raise UserError(
            f"Tool object of type '{type(obj).__name__}' is neither a Tool nor has @tool-decorated methods. "
            'Decorate its methods with `@tool`, or pass a Tool.'
        )
    return found


def tools_from_safely(obj: object) -> list[Tool]:
    """Like `tools_from`, but an object that stands for no tools gives `[]` instead of an error."""
    if isinstance(obj, Tool):
        return [obj]
    if isinstance(obj, type):
        return []
    return _tools_of(obj)
