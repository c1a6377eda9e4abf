"""The class-decorator form: `@unfolding_tools` on a class whose `@tool` methods (and nested decorated classes)
become one facade."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from toolweave.exceptions import UserError
from toolweave.tools._definition import check_tool_name
from toolweave.tools._tool import Tool

if TYPE_CHECKING:
    from toolweave.progressive._unfolding import UnfoldingTool

__all__ = ('UnfoldingSpec', 'facade_from_instance', 'spec_of', 'tools_from_instance', 'unfolding_tools')

ALL_CATEGORY = 'all'
"""The extra category of a class with both categorised and uncategorised tools: every tool, once (UF-18)."""
_SPEC_ATTRIBUTE = '__toolweave_unfolding__'

C = TypeVar('C', bound=type)


@dataclass(frozen=True, slots=True)
class UnfoldingSpec:
    """What `@unfolding_tools` recorded on a class."""

    name: str
    description: str
    child_tool_usage_notes: str | None = None
    category_parameter: str = 'category'
    exclusive: bool = False
    remove_on_invoke: bool = True


def unfolding_tools(
    *,
    name: str,
    description: str,
    child_tool_usage_notes: str | None = None,
    category_parameter: str = 'category',
    exclusive: bool = False,
    remove_on_invoke: bool = True,
) -> Callable[[C], C]:
    """Mark a class whose `@tool` methods form one `UnfoldingTool` (see `UnfoldingTool.from_instance`).

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
        setattr(cls, _SPEC_ATTRIBUTE, spec)
        return cls

    return decorate


def spec_of(cls: type) -> UnfoldingSpec | None:
    """The `@unfolding_tools` spec of a class decorated itself (a subclass must be decorated on its own)."""
    spec = vars(cls).get(_SPEC_ATTRIBUTE)
    return spec if isinstance(spec, UnfoldingSpec) else None


def facade_from_instance(instance: object) -> UnfoldingTool:
    from toolweave.progressive._unfolding import UnfoldingTool
    from toolweave.tools._function import tools_from_safely

    if isinstance(instance, type):
        raise UserError(f'UnfoldingTool.from_instance got the class {instance.__qualname__}, not an instance. '
                        f'Pass an instance: `UnfoldingTool.from_instance({instance.__name__}())`.')
    cls = type(instance)
    spec = spec_of(cls)
    if spec is None:
        raise UserError(
            f'Class {cls.__qualname__} is not annotated with @unfolding_tools. Decorate it with '
            '`@unfolding_tools(name=..., description=...)`, or wrap the object with '
            '`UnfoldingTool.from_tool_object(obj, name, description)`.'
        )
    methods = [] if isinstance(instance, Tool) else tools_from_safely(instance)
    nested = _nested_facades(cls)
    if not methods and not nested:
        raise UserError(
            f'Class {cls.__qualname__} has no methods annotated with @tool and no inner classes annotated with '
            '@unfolding_tools. Decorate its methods with `@tool`, or nest a decorated class in it.'
        )
    by_category: dict[str, list[Tool]] = {}
    uncategorised: list[Tool] = []
    for tool in methods:
        category = tool.definition.metadata.category
        if category is not None and category.strip():
            by_category.setdefault(category, []).append(tool)
        else:
            uncategorised.append(tool)
    uncategorised.extend(nested)
    if not by_category:  # UF-19: no categories, a plain facade
        return UnfoldingTool.of(spec.name, spec.description, uncategorised, remove_on_invoke=spec.remove_on_invoke,
                                child_tool_usage_notes=spec.child_tool_usage_notes, exclusive=spec.exclusive)
    if uncategorised:  # UF-18, UF-20: shared tools join every category, and `all` exists only for them
        every = [tool for tools in by_category.values() for tool in tools] + uncategorised
        for tools in by_category.values():
            tools.extend(uncategorised)
        by_category.setdefault(ALL_CATEGORY, every)
    return UnfoldingTool.by_category(spec.name, spec.description, by_category,
                                     category_parameter=spec.category_parameter,
                                     remove_on_invoke=spec.remove_on_invoke,
                                     child_tool_usage_notes=spec.child_tool_usage_notes, exclusive=spec.exclusive)


def _nested_facades(cls: type) -> list[UnfoldingTool]:
    """Facades of the decorated classes nested in `cls`, in definition order (UF-26)."""
    facades: list[UnfoldingTool] = []
    for attribute, value in vars(cls).items():
        if not isinstance(value, type) or spec_of(value) is None or value is cls:
            continue
        try:
            nested_instance = value()
        except Exception as exc:
            raise UserError(
                f'Nested class {cls.__qualname__}.{attribute} is annotated with @unfolding_tools but could not be '
                f'created with no arguments: {type(exc).__name__}: {exc}. Give it a constructor without required '
                'arguments, or build its facade yourself and add it with `with_tools()`.'
            ) from exc
        facades.append(facade_from_instance(nested_instance))
    return facades


def tools_from_instance(instance: object) -> list[Tool]:
    """The tools of an object: one facade if its class is decorated with `@unfolding_tools`, else its `@tool`
    methods (UF-22).

    Raises:
        UserError: the object is neither decorated nor has `@tool` methods.
    """
    from toolweave.tools._function import tools_from

    if not isinstance(instance, type) and spec_of(type(instance)) is not None:
        return [facade_from_instance(instance)]
    return tools_from(instance)
