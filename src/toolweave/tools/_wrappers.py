"""`DelegatingTool`: the one way to wrap a tool, and the wrappers that only change its definition."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from toolweave.exceptions import UserError
from toolweave.tools._arguments import ToolArguments
from toolweave.tools._context import ToolCallContext
from toolweave.tools._definition import ToolDefinition, check_tool_name
from toolweave.tools._result import ToolResult
from toolweave.tools._tool import Tool

__all__ = ('DelegatingTool', 'renamed', 'with_description', 'with_note')


def check_tool(delegate: object, where: str) -> Tool:
    if not isinstance(delegate, Tool):
        raise UserError(f'The delegate of {where} must be a Tool, got {type(delegate).__name__} {delegate!r}. '
                        'Wrap functions first: `toolweave.tool(fn)`.')
    return delegate


class DelegatingTool(Tool):
    """A tool that wraps `delegate`: same definition, same body. Subclass it and change one thing.

    Override `execute` and delegate to `self.delegate.execute(arguments, context)`; override `definition` to
    change what the model is told. The wrapped tool's own `call` never runs: the call passes through `call` once,
    at the outermost layer, so approval, metrics and logging happen once, under the outer name. A layer under a
    wrapper that requires approval is still reviewed (see `Tool.layers`).

    ```python
    from toolweave import ToolResult
    from toolweave.testing import FakeTool

    class Shout(DelegatingTool):
        async def execute(self, arguments, context):
            result = await self.delegate.execute(arguments, context)
            return ToolResult.success(result.output.upper(), result.value)

    loud = Shout(FakeTool('greet', 'hello'))
    print(loud.name, loud.delegate.name, loud.call_sync('{}').output)
    #> greet greet HELLO
    ```
    """

    def __init__(self, delegate: Tool) -> None:
        self._delegate = check_tool(delegate, type(self).__name__)

    @property
    def delegate(self) -> Tool:
        """The wrapped tool."""
        return self._delegate

    @property
    def definition(self) -> ToolDefinition:
        return self._delegate.definition

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        return await self._delegate.execute(arguments, context)

    def layers(self) -> Iterator[Tool]:
        yield self
        yield from self._delegate.layers()

    def with_description(self, description: str) -> DelegatingTool:
        """A new tool with this description; see `with_description`."""
        return with_description(self, description)

    def with_note(self, note: str) -> DelegatingTool:
        """A new tool whose description ends with `. <note>`; see `with_note`."""
        return with_note(self, note)

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self._delegate!r})'


class _RedefinedTool(DelegatingTool):
    """A delegating tool with a different definition (name or description); behaviour is the delegate's."""

    def __init__(self, delegate: Tool, definition: ToolDefinition) -> None:
        super().__init__(delegate)
        self._definition = definition

    @property
    def definition(self) -> ToolDefinition:
        return self._definition


def with_description(tool: Tool, description: str) -> DelegatingTool:
    """A new tool like `tool` with another description; name, schema, metadata and behaviour are kept and the
    original is unchanged."""
    tool = check_tool(tool, 'with_description()')
    if not isinstance(description, str):
        raise UserError(f'Description for tool {tool.name!r} must be a string, got {description!r}.')
    return _RedefinedTool(tool, tool.definition.with_description(description))


def with_note(tool: Tool, note: str) -> DelegatingTool:
    """A new tool whose description is `<original>. <note>`: a literal join, so a description that already ends
    with `.` gets `..` (the note is appended as written, never rephrased)."""
    tool = check_tool(tool, 'with_note()')
    if not isinstance(note, str):
        raise UserError(f'Note for tool {tool.name!r} must be a string, got {note!r}.')
    return _RedefinedTool(tool, tool.definition.with_description(f'{tool.definition.description}. {note}'))


def renamed(tool: Tool, name: str) -> DelegatingTool:
    """A new tool like `tool` under another name (used by `Toolset.prefixed`): calls are recorded, logged and
    reviewed under the new name."""
    tool = check_tool(tool, 'renamed()')
    check_tool_name(name, where=f'renamed({tool.name!r})')
    return _RedefinedTool(tool, replace(tool.definition, name=name))
