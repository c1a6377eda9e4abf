"""How an instance of a class decorated with `@unfolding_tools` becomes one facade: its `@tool` methods (grouped
by category when any has one) and its nested decorated classes as nested facades."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolweave.exceptions import UserError
from toolweave.tools import Tool
from toolweave.tools._function import method_tools

if TYPE_CHECKING:
    from toolweave.progressive._unfolding import UnfoldingTool

__all__ = ('ALL_CATEGORY', 'SPEC_ATTRIBUTE', 'UnfoldingSpec', 'facade_from_instance', 'spec_of')

ALL_CATEGORY = 'all'
"""The extra category of a class with both categorised and uncategorised tools: every tool, once."""
SPEC_ATTRIBUTE = '__toolweave_unfolding__'


@dataclass(frozen=True, slots=True)
class UnfoldingSpec:
    """What `@unfolding_tools` recorded on a class."""

    name: str
    description: str
    child_tool_usage_notes: str | None = None
    category_parameter: str = 'category'
    exclusive: bool = False
    remove_on_invoke: bool = True


def spec_of(cls: type) -> UnfoldingSpec | None:
    """The `@unfolding_tools` spec of a class decorated itself (a subclass must be decorated on its own)."""
    spec = vars(cls).get(SPEC_ATTRIBUTE)
    return spec if isinstance(spec, UnfoldingSpec) else None


def facade_from_instance(facade: type[UnfoldingTool], instance: object) -> UnfoldingTool:
    """The facade (of class `facade`) an instance of an `@unfolding_tools` class stands for."""
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
    methods = [] if isinstance(instance, Tool) else method_tools(instance)
    nested = _nested_facades(facade, cls)
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
    if not by_category:  # no categories: a plain facade
        return facade.of(spec.name, spec.description, uncategorised, remove_on_invoke=spec.remove_on_invoke,
                         child_tool_usage_notes=spec.child_tool_usage_notes, exclusive=spec.exclusive)
    if uncategorised:  # shared tools join every category, and `all` exists only for them
        every = [tool for tools in by_category.values() for tool in tools] + uncategorised
        for tools in by_category.values():
            tools.extend(uncategorised)
        by_category.setdefault(ALL_CATEGORY, every)
    return facade.by_category(spec.name, spec.description, by_category, category_parameter=spec.category_parameter,
                              remove_on_invoke=spec.remove_on_invoke,
                              child_tool_usage_notes=spec.child_tool_usage_notes, exclusive=spec.exclusive)


def _nested_facades(facade: type[UnfoldingTool], cls: type) -> list[UnfoldingTool]:
    """Facades of the decorated classes nested in `cls`, in definition order."""
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
        facades.append(facade_from_instance(facade, nested_instance))
    return facades
