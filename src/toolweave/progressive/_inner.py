"""The inner tools of a facade: resolved from what the user listed, each name once."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from toolweave.exceptions import DuplicateToolError, UserError
from toolweave.tools import Tool, function_tool, tools_from_safely

__all__ = ('distinct', 'resolve_tools')


def resolve_tools(items: object, where: str) -> list[Tool]:
    """Inner tools from tools, functions and objects that stand for tools (their `@tool` methods, or the facade of
    an `@unfolding_tools` class); distinct tools must have distinct names (the same tool listed twice is kept
    once)."""
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        raise UserError(f'Inner tools of {where} must be a list of tools, got {type(items).__name__}: {items!r}. '
                        'Wrap a single tool in a list: `[my_tool]`.')
    found: list[Tool] = []
    for index, item in enumerate(items):
        if isinstance(item, type) or item is None:
            raise UserError(f'Inner tool {index} of {where} is {item!r}, not a tool. Pass a Tool, a function, or '
                            'an instance of a class with `@tool` methods.')
        tools = tools_from_safely(item)
        if tools:
            found.extend(tools)
        elif callable(item):
            found.append(function_tool(item))
        else:
            raise UserError(f'Inner tool {index} of {where} is a {type(item).__name__}, not a tool: {item!r}. Pass '
                            'a Tool, a function, or an object with `@tool` methods.')
    return distinct(found, where)


def distinct(tools: Iterable[Tool], where: str) -> list[Tool]:
    unique: dict[str, Tool] = {}
    for tool in tools:
        existing = unique.get(tool.name)
        if existing is None:
            unique[tool.name] = tool
        elif existing is not tool:
            raise DuplicateToolError(f'Duplicate inner tool name {tool.name!r} in {where}: two different tools '
                                     f'({existing!r} and {tool!r}) share it. Rename one of them.')
    return list(unique.values())
