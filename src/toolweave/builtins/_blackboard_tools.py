"""Blackboard tools: a model lists, reads and counts the objects of the run it is part of.

Each tool reads `current_process().blackboard` when called (a sub-agent sees its own board, which includes its
parent's objects). Messages are fixed sentences (a model and a test can rely on them); they are plain text
results, not errors, so a model reads "nothing there" as an answer rather than as a broken tool.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeAlias, runtime_checkable

from pydantic import BaseModel

from toolweave.agent import Blackboard, current_process
from toolweave.agent._blackboard import type_matches
from toolweave.builtins._common import BuiltinTool, metadata, read_string, string_schema
from toolweave.exceptions import UserError
from toolweave.tools import ToolDefinition, ToolResult

__all__ = (
    'BLACKBOARD_FACADE_DESCRIPTION',
    'BLACKBOARD_FACADE_NOTES',
    'MAX_LISTED_OBJECTS',
    'BlackboardEntryFormatter',
    'HasContent',
    'HasInfoString',
    'blackboard_tools',
    'format_blackboard_entry',
)

BlackboardEntryFormatter: TypeAlias = Callable[[Any], str]
"""Turns one blackboard object into the text a model reads (`blackboard_get`, `_last`, `_describe`)."""

NO_PROCESS = 'No agent process available. Blackboard tools require an active agent context.'
EMPTY = 'Blackboard is empty - no objects available.'
MAX_LISTED_OBJECTS = 200
"""`blackboard_list` shows at most this many of the newest objects (with their real indices)."""
CATEGORY = 'blackboard'
BLACKBOARD_FACADE_DESCRIPTION = ('Access objects in the current process context. Invoke to see available '
                                 'operations for listing, getting, and describing objects.')
BLACKBOARD_FACADE_NOTES = ("Use blackboard_list to see what's available. Use blackboard_get for named bindings, "
                           'blackboard_last for the most recent of a type.')
_TYPE_NAME = "The type name (e.g., 'User' or 'myapp.models.User')"


@runtime_checkable
class HasInfoString(Protocol):
    """An object that describes itself for a model: `info_string(verbose=True, indent=0)` is used."""

    def info_string(self, verbose: bool | None = None, indent: int = 0) -> str: ...


@runtime_checkable
class HasContent(Protocol):
    """An object whose `content` text is what a model should read, when it has no `info_string`."""

    @property
    def content(self) -> str: ...


def format_blackboard_entry(value: object) -> str:
    """The default formatting of a blackboard object: its `info_string(verbose=True, indent=0)` if it
    has one, else its `content` if that is a string, else `str(value)`.

    ```python
    from dataclasses import dataclass

    @dataclass
    class Note:
        content: str

    print(format_blackboard_entry(Note('call Bob')), format_blackboard_entry(42))
    #> call Bob 42
    ```
    """
    if not isinstance(value, type):  # a class on the board has the methods unbound: use its string form
        if isinstance(value, HasInfoString) and callable(value.info_string):
            text = value.info_string(verbose=True, indent=0)
            return text if isinstance(text, str) else str(text)
        if isinstance(value, HasContent) and isinstance(value.content, str):
            return value.content
    return str(value)


def blackboard_tools(formatter: BlackboardEntryFormatter | None = None) -> list[BuiltinTool]:
    """The five blackboard tools: `blackboard_list`, `blackboard_get` (`name`), `blackboard_last`
    (`typeName`), `blackboard_describe` (`name`) and `blackboard_count` (`typeName`).

    Args:
        formatter: How an object is shown to the model; `format_blackboard_entry` by default.

    ```python
    from toolweave import Agent, tool
    from toolweave.agent import current_process
    from toolweave.builtins import blackboard_tools
    from toolweave.testing import ScriptedModel

    @tool
    def remember(city: str) -> str:
        \"\"\"Remember a city.\"\"\"
        current_process().blackboard.add(city, name='city')
        return 'ok'

    model = ScriptedModel([{'tool': 'remember', 'arguments': {'city': 'Oslo'}},
                           {'tool': 'blackboard_get', 'arguments': {'name': 'city'}}, 'done'])
    result = Agent(model, tools=[remember, *blackboard_tools()]).run_sync('Where?')
    print(result.messages[-2].content)
    #> str bound to 'city':
    #> Oslo
    ```
    """
    fmt = _check_formatter(formatter)
    name_schema = string_schema('name', 'The binding name to look up')
    type_schema = string_schema('typeName', _TYPE_NAME)
    specs: list[tuple[str, str, dict[str, Any] | None, Callable[[Blackboard, dict[str, Any]], str]]] = [
        ('blackboard_list', 'List all objects currently in the blackboard with their types and indices', None,
         _list),
        ('blackboard_get', 'Get an object by its binding name', name_schema,
         lambda board, args: _get(board, args, fmt)),
        ('blackboard_last', 'Get the most recent object of a given type. Matches by simple class name or fully '
         'qualified name.', type_schema, lambda board, args: _last(board, args, fmt)),
        ('blackboard_describe', 'Get a detailed description/formatting of an object by its binding name',
         string_schema('name', 'The binding name of the object to describe'),
         lambda board, args: _describe(board, args, fmt)),
        ('blackboard_count', 'Count the number of objects of a given type in the blackboard',
         string_schema('typeName', "The type name to count (e.g., 'User' or 'myapp.models.User')"), _count),
    ]
    tools = []
    for name, description, schema, body in specs:
        definition = (ToolDefinition(name, description, metadata=metadata(CATEGORY)) if schema is None else
                      ToolDefinition(name, description, schema, metadata=metadata(CATEGORY)))
        tools.append(BuiltinTool(definition, _with_board(body)))
    return tools


def _check_formatter(formatter: BlackboardEntryFormatter | None) -> BlackboardEntryFormatter:
    if formatter is None:
        return format_blackboard_entry
    if not callable(formatter):
        raise UserError(f'blackboard_tools(formatter=...) must be a callable formatter(value) -> str, got '
                        f'{type(formatter).__name__}: {formatter!r}. Pass None for the default formatting.')
    return formatter


def _with_board(body: Callable[[Blackboard, dict[str, Any]], str]) -> Callable[[dict[str, Any]], ToolResult]:
    def handler(arguments: dict[str, Any]) -> ToolResult:
        process = current_process()  # the process check comes before the parameter checks
        return ToolResult.success(NO_PROCESS if process is None else body(process.blackboard, arguments))

    return handler


def _type_name(value: object) -> str:
    return type(value).__name__


def _qualified_name(value: object) -> str:
    cls = type(value)
    return cls.__qualname__ if cls.__module__ == 'builtins' else f'{cls.__module__}.{cls.__qualname__}'


def _format(fmt: BlackboardEntryFormatter, value: object, where: str) -> str:
    try:
        text = fmt(value)
    except Exception as exc:
        # `Tool.call` would report the bare exception text; say which object and which formatter failed
        raise ValueError(f'Formatting the {_type_name(value)} {where} failed: {type(exc).__name__}: {exc}. The '
                         f"blackboard entry formatter {fmt!r} (or the object's info_string) must return text for "
                         'every object.') from exc
    return text if isinstance(text, str) else str(text)


def _list(board: Blackboard, arguments: dict[str, Any]) -> str:
    entries = board.entries
    if not entries:
        return EMPTY
    first = max(len(entries) - MAX_LISTED_OBJECTS, 0)
    lines = [f'Blackboard contains {len(entries)} object(s):']
    lines += [f'[{index}] {_type_name(entry.value)}' for index, entry in enumerate(entries) if index >= first]
    if first:
        lines.append(f'({first} older object(s) not listed)')
    names = list(dict.fromkeys(entry.name for entry in entries if entry.name is not None))
    if names:  # blackboard_get needs a name, and the listing alone does not show them
        lines.append('Binding names: ' + ', '.join(repr(name) for name in names))
    return '\n'.join(lines)


def _bound(board: Blackboard, arguments: dict[str, Any], tool_name: str) -> tuple[str, object] | str:
    """The name asked for and the object bound to it (the latest binding wins), or the sentence to return."""
    name = read_string(arguments, 'name', tool_name)
    if name is None:
        return 'Missing required parameter: name'
    for entry in reversed(board.entries):
        if entry.name == name:
            return name, entry.value
    return f"No object found with binding name '{name}'"


def _get(board: Blackboard, arguments: dict[str, Any], fmt: BlackboardEntryFormatter) -> str:
    found = _bound(board, arguments, 'blackboard_get')
    if isinstance(found, str):
        return found
    name, value = found
    return f"{_type_name(value)} bound to '{name}':\n{_format(fmt, value, f'bound to {name!r}')}"


def _describe(board: Blackboard, arguments: dict[str, Any], fmt: BlackboardEntryFormatter) -> str:
    found = _bound(board, arguments, 'blackboard_describe')
    if isinstance(found, str):
        return found
    name, value = found
    lines = [f"Description of {_type_name(value)} '{name}':", f'Type: {_qualified_name(value)}']
    fields = _field_names(value)
    if fields:
        lines.append(f'Fields: {", ".join(fields)}')
    lines.append(_format(fmt, value, f'bound to {name!r}'))
    return '\n'.join(lines)


def _field_names(value: object) -> list[str]:
    if isinstance(value, BaseModel):
        return list(type(value).model_fields)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [field.name for field in dataclasses.fields(value)]
    if isinstance(value, Mapping):
        return [str(key) for key in list(value)[:50]]
    return []


def _type_argument(arguments: dict[str, Any], tool_name: str) -> str | None:
    return read_string(arguments, 'typeName', tool_name, 'type_name')


def _last(board: Blackboard, arguments: dict[str, Any], fmt: BlackboardEntryFormatter) -> str:
    type_name = _type_argument(arguments, 'blackboard_last')
    if type_name is None:
        return 'Missing required parameter: typeName'
    for entry in reversed(board.entries):  # the most recent match
        if type_matches(entry.value, type_name):
            text = _format(fmt, entry.value, f'matching {type_name!r}')
            return f'Last {_type_name(entry.value)}:\n{text}'
    return f"No object of type '{type_name}' found in blackboard"


def _count(board: Blackboard, arguments: dict[str, Any]) -> str:
    type_name = _type_argument(arguments, 'blackboard_count')
    if type_name is None:
        return 'Missing required parameter: typeName'
    count = sum(1 for entry in board.entries if type_matches(entry.value, type_name))
    return f"Found {count} object(s) of type '{type_name}' in blackboard"
