"""What every built-in tool shares: a small `Tool` over a handler, schemas, argument reading, formatting."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from toolweave.tools import (
    Tool,
    ToolArguments,
    ToolCallContext,
    ToolDefinition,
    ToolMetadata,
    ToolResult,
    load_arguments,
)

__all__ = ('BuiltinTool', 'format_count', 'format_duration', 'metadata', 'read_string', 'string_schema')

Handler = Callable[[dict[str, Any]], ToolResult]


class BuiltinTool(Tool):
    """A built-in tool: a fixed definition and a cheap synchronous handler that receives the arguments as a
    dict. Malformed JSON arguments fail the call with the parser's message (via `load_arguments`)."""

    def __init__(self, definition: ToolDefinition, handler: Handler) -> None:
        self._definition = definition
        self._handler = handler

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        return self._handler(load_arguments(arguments, self._definition.name))


def string_schema(name: str, description: str) -> dict[str, Any]:
    """The JSON schema of a tool with one required string parameter."""
    return {
        'type': 'object',
        'properties': {name: {'type': 'string', 'description': description}},
        'required': [name],
    }


def read_string(arguments: Mapping[str, Any], key: str, tool_name: str, *aliases: str) -> str | None:
    """The string argument `key` (or the first alias present), or `None` when it is missing, `null` or blank.

    Raises:
        ValueError: The argument is there but is not a string (`Tool.call` turns it into a failure result).
    """
    value = None
    for name in (key, *aliases):
        if arguments.get(name) is not None:
            value = arguments[name]
            break
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f'Parameter {key!r} of tool {tool_name!r} must be a string, got {type(value).__name__}: '
                         f'{value!r}. Send it as JSON text, for example {{"{key}": "..."}}.')
    return value if value.strip() else None


def metadata(category: str, **extra: Any) -> ToolMetadata:
    """Metadata of a built-in tool: its category (for category facades) and integration flags."""
    return ToolMetadata(category=category, extra=extra)


def format_duration(seconds: float) -> str:
    """`850ms`, `3.2s`, `4m 5s`, `1h 2m 3s` (seconds are floored, as a stopwatch shows them)."""
    seconds = max(seconds, 0.0)
    if seconds < 1:
        return f'{int(seconds * 1000)}ms'
    whole = int(seconds)
    hours, minutes, secs = whole // 3600, whole % 3600 // 60, whole % 60
    if hours:
        return f'{hours}h {minutes}m {secs}s'
    if minutes:
        return f'{minutes}m {secs}s'
    return f'{secs}.{int((seconds - whole) * 10)}s'


def format_count(count: int, noun: str) -> str:
    """`1 call`, `3 calls`."""
    return f'{count:,} {noun}' if count == 1 else f'{count:,} {noun}s'
