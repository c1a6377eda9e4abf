"""`TextTool`: a tool that takes one string."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeAlias

from toolweave.exceptions import UserError
from toolweave.tools._arguments import ToolArguments, text_input
from toolweave.tools._callables import handler_call, run_callable, snake_case
from toolweave.tools._context import ToolCallContext
from toolweave.tools._definition import ToolDefinition, ToolMetadata, check_tool_name
from toolweave.tools._function import to_result
from toolweave.tools._result import ToolResult
from toolweave.tools._tool import Tool

__all__ = ('INPUT_DESCRIPTION', 'TextTool', 'TextToolFunction', 'text_input')

INPUT_DESCRIPTION = 'The input to pass to the tool'
TextToolFunction: TypeAlias = Callable[..., Any]
"""`fn(text)` or `fn(text, context)`, sync or async, returning a `ToolResult`, a string or `None`."""


class TextTool(Tool):
    """A tool whose whole input is one string: the model sends `{"input": "..."}`.

    Subclass it and implement `run`; it may return a `ToolResult`, a string, or `None` (an empty success).
    The name defaults to the class name in snake case and the description to the class docstring. Exceptions
    become failures (`Error: <message>`) in `call`.

    ```python
    class Shout(TextTool):
        '''Repeat the input in capitals.'''

        async def run(self, text: str) -> str:
            return text.upper()

    shout = Shout()
    print(shout.name, shout.call_sync('{"input": "hi"}').output)
    #> shout HI
    ```

    Or build one from a function: `TextTool.from_function('shout', 'Repeat in capitals', str.upper)`.
    """

    PARAMETERS: ClassVar[Mapping[str, Any]] = {
        'type': 'object',
        'properties': {'input': {'type': 'string', 'description': INPUT_DESCRIPTION}},
        'required': ['input'],
    }

    def __init__(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        return_direct: bool = False,
        requires_approval: bool = False,
        category: str | None = None,
    ) -> None:
        cls = type(self)
        if cls.run is TextTool.run and cls.execute is TextTool.execute:
            raise UserError(f'{cls.__qualname__} must implement `async def run(self, text: str)`, or build the '
                            'tool with `TextTool.from_function(name, description, fn)`.')
        tool_name = name if name is not None else snake_case(cls.__name__)
        check_tool_name(tool_name, where=f'text tool {cls.__qualname__}')
        if description is None:
            description = inspect.cleandoc(cls.__doc__) if cls.__doc__ and cls is not TextTool else ''
        metadata = ToolMetadata(return_direct=return_direct, requires_approval=requires_approval, category=category)
        self._definition = ToolDefinition(tool_name, description, dict(self.PARAMETERS), metadata)
        self._call = handler_call(self.run)

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def run(self, text: str) -> ToolResult | str | None:
        """The tool body. Override it (sync or async; optionally with a second `context` parameter)."""
        raise NotImplementedError  # __init__ rejects subclasses that do not override `run`

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        text = text_input(arguments)
        args, kwargs = self._call.arguments([text], context)
        return to_result(await run_callable(self.run, self._call.is_async, args, kwargs))

    @classmethod
    def from_function(
        cls,
        name: str,
        description: str,
        fn: TextToolFunction,
        *,
        return_direct: bool = False,
        requires_approval: bool = False,
        category: str | None = None,
    ) -> TextTool:
        """A text tool that calls `fn(text)` (or `fn(text, context)`), sync or async.

        ```python
        echo = TextTool.from_function('echo', 'Echo the input', lambda text: f'echo: {text}')
        print(echo.call_sync('{"input": "hi"}').output)
        #> echo: hi
        ```
        """
        return _FunctionTextTool(name, description, fn, return_direct=return_direct,
                                 requires_approval=requires_approval, category=category)


class _FunctionTextTool(TextTool):
    def __init__(self, name: str, description: str, fn: TextToolFunction, *, return_direct: bool,
                 requires_approval: bool, category: str | None) -> None:
        if not callable(fn):
            raise UserError(f'TextTool.from_function needs a callable for tool {name!r}, got '
                            f'{type(fn).__name__} {fn!r}. Pass a function that takes the input text.')
        super().__init__(name, description, return_direct=return_direct, requires_approval=requires_approval,
                         category=category)
        self._fn = fn
        self._call = handler_call(fn)

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        text = text_input(arguments)
        args, kwargs = self._call.arguments([text], context)
        return to_result(await run_callable(self._fn, self._call.is_async, args, kwargs))

    def __repr__(self) -> str:
        return f'TextTool(name={self.name!r}, function={getattr(self._fn, "__qualname__", self._fn)!r})'
