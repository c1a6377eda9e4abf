"""The class-decorator form: `@unfolding_tools` on a class whose `@tool` methods (and nested decorated classes)
become one facade wherever an instance is given as tools."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from toolweave.exceptions import UserError
from toolweave.progressive._introspect import SPEC_ATTRIBUTE, UnfoldingSpec
from toolweave.progressive._unfolding import UnfoldingTool
from toolweave.tools import Tool, check_tool_name, tools_from
from toolweave.tools._function import TOOLS_HOOK

__all__ = ('tools_from_instance', 'unfolding_tools')

C = TypeVar('C', bound=type)


def _as_facade(instance: object) -> list[Tool]:
    return [UnfoldingTool.from_instance(instance)]


def unfolding_tools(
    *,
    name: str,
    description: str,
    child_tool_usage_notes: str | None = None,
    category_parameter: str = 'category',
    exclusive: bool = False,
    remove_on_invoke: bool = True,
) -> Callable[[C], C]:
    """Mark a class whose `@tool` methods form one `UnfoldingTool` (see `UnfoldingTool.from_instance`): an
    instance given as tools (to a `Toolset`, an `Agent`, `tools_from`, an unfolding or agentic tool) is that facade.

    Methods with `@tool(category=...)` make a category facade: uncategorised methods (and nested facades) join
    every category and an extra `all` category. Nested classes decorated with `@unfolding_tools` become nested
    facades (they are created with no arguments).

    ```python
    from toolweave import UnfoldingTool, tool, unfolding_tools

    @unfolding_tools(name='files', description='File operations. Pass category: read or write.')
    class FileTools:
        @tool(category='read')
        def read_file(self, path: str) -> str:
            '''Read a file.'''
            return 'contents'

        @tool(category='write')
        def write_file(self, path: str, text: str) -> str:
            '''Write a file.'''
            return 'written'

    files = UnfoldingTool.from_instance(FileTools())
    print(files.name, list(files.categories or {}))
    #> files ['read', 'write']
    ```
    """
    check_tool_name(name, where='@unfolding_tools')
    if not isinstance(description, str):
        raise UserError(f'@unfolding_tools(name={name!r}) description must be a string, got {description!r}.')
    if child_tool_usage_notes is not None and not isinstance(child_tool_usage_notes, str):
        raise UserError(f'@unfolding_tools(name={name!r}) child_tool_usage_notes must be a string or None, got '
                        f'{child_tool_usage_notes!r}.')
    spec = UnfoldingSpec(name, description, child_tool_usage_notes or None, category_parameter, exclusive,
                         remove_on_invoke)

    def decorate(cls: C) -> C:
        if not isinstance(cls, type):
            raise UserError(f'@unfolding_tools(name={name!r}) decorates classes, got {type(cls).__name__} {cls!r}. '
                            'For functions, use `UnfoldingTool.of(name, description, [tools])`.')
        setattr(cls, SPEC_ATTRIBUTE, spec)
        setattr(cls, TOOLS_HOOK, _as_facade)
        return cls

    return decorate


def tools_from_instance(instance: object) -> list[Tool]:
    """The tools an object stands for: one facade if its class is decorated with `@unfolding_tools`, else its
    `@tool` methods. The same as `tools_from`.

    Raises:
        UserError: the object is neither decorated nor has `@tool` methods.
    """
    return tools_from(instance)
