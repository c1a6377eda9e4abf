"""Category facades: one required `category` parameter picks which group of inner tools to reveal."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from toolweave._json import loads_object
from toolweave.exceptions import UserError
from toolweave.progressive._inner import resolve_tools
from toolweave.tools import Parameter, Tool

if TYPE_CHECKING:
    from toolweave.progressive._unfolding import UnfoldingTool

__all__ = ('category_description', 'category_facade', 'extract_category')


def category_description(categories: Iterable[str]) -> str:
    """The description of the category parameter: it lists the categories."""
    return f'Category to access. Available: {", ".join(categories)}'


def extract_category(raw: str, parameter: str) -> str | None:
    """The category named in a raw JSON input, or `None` for blank or invalid JSON, a non-object, a missing key
    or a non-string value."""
    loaded = loads_object(raw)
    if loaded is None:
        return None
    value = loaded.get(parameter)
    return value if isinstance(value, str) else None


def category_facade(
    cls: type[UnfoldingTool],
    name: str,
    description: str,
    tools_by_category: Mapping[str, Iterable[object]],
    *,
    category_parameter: str,
    remove_on_invoke: bool,
    child_tool_usage_notes: str | None,
    exclusive: bool,
) -> UnfoldingTool:
    where = f'unfolding tool {name!r}'
    if not isinstance(tools_by_category, Mapping) or not tools_by_category:
        raise UserError(f'tools_by_category of {where} must be a non-empty dict of category name -> tools, got '
                        f'{tools_by_category!r}. For example `{{"read": [query], "write": [insert]}}`.')
    if not isinstance(category_parameter, str) or not category_parameter.strip():
        raise UserError(f'category_parameter of {where} must be a non-blank string, got {category_parameter!r}.')
    groups: dict[str, tuple[Tool, ...]] = {}
    for category, tools in tools_by_category.items():
        if not isinstance(category, str) or not category.strip():
            raise UserError(f'Category names of {where} must be non-blank strings, got {category!r}.')
        groups[category] = tuple(resolve_tools(tools, f'category {category!r} of {where}'))
    # every tool once, in first-seen order: the unknown-category fallback repeats no shared tool
    every = resolve_tools([tool for tools in groups.values() for tool in tools], where)

    def select(raw: str) -> list[Tool]:
        category = extract_category(raw, category_parameter)
        picked = groups.get(category) if category is not None else None
        return list(picked) if picked is not None else list(every)

    parameter = Parameter.string(category_parameter, category_description(groups), required=True, enum=list(groups))
    facade = cls(name, description, every, parameters=[parameter], selector=select,
                 child_tool_usage_notes=child_tool_usage_notes, exclusive=exclusive,
                 remove_on_invoke=remove_on_invoke)
    facade._categories = dict(groups)
    return facade
