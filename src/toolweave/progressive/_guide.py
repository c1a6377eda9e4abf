"""The two tools the unfolding strategy adds next to the revealed ones: the guide (the facade's name, so a
repeated call lists the tools instead of failing) and `<name>_context` (the facade's purpose and usage notes)."""

from __future__ import annotations

from collections.abc import Sequence

from toolweave.progressive._unfolding import shortcut_target
from toolweave.tools import Tool, ToolArguments, ToolCallContext, ToolDefinition, ToolResult
from toolweave.tools._arguments import arguments_json

__all__ = ('UnfoldingContextTool', 'UnfoldingGuideTool', 'context_tool_name')

_CONTEXT_SUFFIX = '_context'


def context_tool_name(facade_name: str) -> str:
    """`<facade>_context`, with the facade part shortened if needed to stay within the 64-character name rule."""
    return f'{facade_name[:64 - len(_CONTEXT_SUFFIX)]}{_CONTEXT_SUFFIX}'


def _has_notes(notes: str | None) -> bool:
    return notes is not None and bool(notes.strip())


class UnfoldingGuideTool(Tool):
    """Takes the facade's place after it unfolds. Calling it lists the tools the facade revealed; it never unfolds
    again, so a model that calls the facade twice is pointed at the real tools instead of looping. An input naming
    one of those tools (`{"tool_name": {...}}`) calls that tool directly, as the facade would."""

    def __init__(self, name: str, tools: Sequence[Tool]) -> None:
        self.tools = tuple(tools)
        listed = ', '.join(tool.name for tool in self.tools)
        self._definition = ToolDefinition(
            name, f'Already opened: its tools are available now ({listed}). Call one of them directly.'
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    def message(self) -> str:
        names = [tool.name for tool in self.tools]
        return (f'{self.name} is already open. Its tools are available now: {", ".join(names)}. Call one of them '
                f'directly (for example `{names[0]}`); calling {self.name} again does not change the tools.')

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        target = shortcut_target(arguments_json(arguments), self.tools)
        if target is not None:
            tool, payload = target
            return await tool.call(payload, context)
        return ToolResult.success(self.message())


class UnfoldingContextTool(Tool):
    """`<facade>_context`: keeps the facade's purpose and usage notes once, next to the revealed tools, so they are
    not repeated on every inner tool."""

    def __init__(self, facade_name: str, facade_description: str, tools: Sequence[Tool], notes: str | None) -> None:
        self.tools = tuple(tools)
        self.facade_description = facade_description
        self.notes = notes
        description = f'{facade_description}. Available: {", ".join(tool.name for tool in self.tools)}'
        if _has_notes(notes):
            description = f'{description}. {notes}'
        self._definition = ToolDefinition(context_tool_name(facade_name), description)

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    def message(self) -> str:
        lines = [f'Tools for {self.facade_description}:']
        lines.extend(f'- {tool.name}: {tool.description}' for tool in self.tools)
        text = '\n'.join(lines)
        if _has_notes(self.notes):
            text = f'{text}\n\nUsage notes: {self.notes}'
        return text.strip()

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        return ToolResult.success(self.message())
