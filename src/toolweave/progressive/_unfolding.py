"""`UnfoldingTool`: a facade the model sees first; calling it reveals its inner tools in the agent loop."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias

from toolweave.decorators import DelegatingTool
from toolweave.exceptions import DuplicateToolError, ToolConfigurationError, UserError
from toolweave.tools._context import ToolCallContext
from toolweave.tools._definition import ToolDefinition, empty_object_schema
from toolweave.tools._programmatic import Parameter
from toolweave.tools._result import ToolResult
from toolweave.tools._tool import Tool, ToolArguments

__all__ = (
    'Selector',
    'UnfoldingSelection',
    'UnfoldingTool',
    'find_unfolding',
    'json_object',
    'raw_input',
    'resolve_tools',
    'shortcut_target',
    'unfold_message',
)

Selector: TypeAlias = Callable[[str], Sequence[Tool]]
"""`selector(raw_json_input)` returning the tools to reveal for that input."""
InnerTools: TypeAlias = Iterable[object]
"""Tools, `@tool` functions or objects with `@tool` methods."""

_UNFOLD_PREAMBLE = ("Tools now available: {names}. You MUST call one of these tools to complete the user's request. "
                    'Do NOT respond with text \u2014 call a tool.')


def unfold_message(names: Sequence[str], notes: str | None) -> str:
    """What the facade answers when it unfolds (UF-2, UF-3): the preamble, then the usage notes if any."""
    preamble = _UNFOLD_PREAMBLE.format(names=', '.join(names))
    return f'{preamble}\n\n{notes}' if notes is not None and notes.strip() else preamble


def raw_input(arguments: ToolArguments) -> str:
    """The facade's input as the raw JSON text a selector receives (a mapping from Python code is encoded)."""
    if arguments is None:
        return ''
    if isinstance(arguments, str):
        return arguments
    return json.dumps(dict(arguments), ensure_ascii=False, default=str)


def find_unfolding(tool: Tool) -> UnfoldingTool | None:
    """The `UnfoldingTool` behind `tool`, looking through any chain of `DelegatingTool` wrappers (UF-11)."""
    current: Tool = tool
    seen: set[int] = set()
    while True:
        if isinstance(current, UnfoldingTool):
            return current
        if not isinstance(current, DelegatingTool) or id(current) in seen:
            return None
        seen.add(id(current))
        current = current.delegate


def json_object(raw: str) -> dict[str, Any] | None:
    """`raw` parsed as a JSON object, or `None` for blank or invalid JSON or any other JSON value."""
    if not raw.strip():
        return None
    try:
        loaded = json.loads(raw)
    except json.JSONDecodeError:
        return None
    return loaded if isinstance(loaded, dict) else None


def shortcut_target(raw: str, tools: Sequence[Tool]) -> tuple[Tool, str] | None:
    """The tool a facade input names directly, with its JSON-encoded arguments (UF-27..UF-29): the first key of a
    JSON object that is the name of one of `tools`. Facades are never shortcut targets (their unfolding would be
    lost), so `{"nested_facade": {}}` unfolds normally."""
    loaded = json_object(raw) if tools else None
    if loaded is None:
        return None
    by_name = {tool.name: tool for tool in tools}
    for key, value in loaded.items():
        target = by_name.get(key)
        if target is not None and find_unfolding(target) is None:
            return target, json.dumps(value, ensure_ascii=False)
    return None


class UnfoldingSelection(str):
    """The value of a facade call that unfolded: the unfold message itself (so plan references, summaries and
    sinks see plain text), carrying the tools it revealed. The loop's unfolding strategy injects exactly these
    (a selector that builds tools runs once per call, so the tools share that call's state, UF-30)."""

    facade: UnfoldingTool
    tools: tuple[Tool, ...]

    def __new__(cls, text: str, facade: UnfoldingTool, tools: Iterable[Tool]) -> UnfoldingSelection:
        selection = super().__new__(cls, text)
        selection.facade = facade
        selection.tools = tuple(tools)
        return selection

    @property
    def names(self) -> list[str]:
        return [tool.name for tool in self.tools]

    def __copy__(self) -> UnfoldingSelection:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> UnfoldingSelection:
        return self  # it carries live tools, which are shared, never copied

    def __reduce__(self) -> tuple[type[str], tuple[str]]:
        return str, (str(self),)  # pickles as its text: live tools do not travel


def resolve_tools(items: object, where: str) -> list[Tool]:
    """Inner tools from tools, `@tool` functions and objects with `@tool` methods; distinct tools must have
    distinct names (the same tool listed twice is kept once)."""
    from toolweave.tools._function import function_tool, has_tool_methods, tools_from

    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        raise UserError(f'Inner tools of {where} must be a list of tools, got {type(items).__name__}: {items!r}. '
                        'Wrap a single tool in a list: `[my_tool]`.')
    found: list[Tool] = []
    for index, item in enumerate(items):
        if isinstance(item, Tool):
            found.append(item)
        elif isinstance(item, type) or item is None:
            raise UserError(f'Inner tool {index} of {where} is {item!r}, not a tool. Pass a Tool, a function, or '
                            'an instance of a class with `@tool` methods.')
        elif has_tool_methods(item):
            found.extend(tools_from(item))
        elif callable(item):
            found.append(function_tool(item))
        else:
            raise UserError(f'Inner tool {index} of {where} is a {type(item).__name__}, not a tool: {item!r}. Pass '
                            'a Tool, a function, or an object with `@tool` methods.')
    return _distinct(found, where)


def _distinct(tools: Iterable[Tool], where: str) -> list[Tool]:
    unique: dict[str, Tool] = {}
    for tool in tools:
        existing = unique.get(tool.name)
        if existing is None:
            unique[tool.name] = tool
        elif existing is not tool:
            raise DuplicateToolError(f'Duplicate inner tool name {tool.name!r} in {where}: two different tools '
                                     f'({existing!r} and {tool!r}) share it. Rename one of them.')
    return list(unique.values())


def _schema(parameters: Mapping[str, Any] | Sequence[Parameter] | None, name: str) -> dict[str, Any]:
    if parameters is None:
        return empty_object_schema()
    if isinstance(parameters, Mapping):
        if parameters.get('type') != 'object':
            raise UserError(f'Input schema of unfolding tool {name!r} must be a JSON schema object with '
                            f'"type": "object", got {dict(parameters)!r}.')
        return dict(parameters)
    from toolweave.tools._programmatic import _parameters_schema

    return _parameters_schema(name, list(parameters))


def _notes(notes: object, name: str) -> str | None:
    if notes is not None and not isinstance(notes, str):
        raise UserError(f'child_tool_usage_notes of unfolding tool {name!r} must be a string or None, got '
                        f'{type(notes).__name__}: {notes!r}.')
    return notes


class UnfoldingTool(Tool):
    """A facade for a group of tools: the model sees one tool; when it calls it, the agent loop replaces it with
    its inner tools, a guide tool of the same name (which lists them if the model calls the facade again, and
    never unfolds twice) and a `<name>_context` tool that keeps the facade's description and usage notes.

    ```python
    from toolweave import UnfoldingTool
    from toolweave.testing import FakeTool

    database = UnfoldingTool.of('database', 'Database operations. Invoke to see them.',
                                [FakeTool('query_table'), FakeTool('insert_record')])
    print(database.call_sync('{}').output.split('.')[0])
    #> Tools now available: query_table, insert_record
    ```

    Build one with `of`, `selectable`, `by_category`, `from_instance` (a class decorated with `@unfolding_tools`)
    or `from_tool_object`. Calling the facade with `{"<inner tool>": <arguments>}` calls that inner tool
    directly (a shortcut for models that skip the unfolding step).

    Args:
        name: The facade's tool name.
        description: What the group is for; the model reads it to decide whether to open the group.
        inner_tools: Every tool the facade may reveal.
        parameters: The facade's input schema (a JSON schema object or `Parameter`s); empty by default.
        selector: Picks the tools to reveal from the raw JSON input; all inner tools when `None`.
        child_tool_usage_notes: Guidance on using the inner tools, shown once (in the unfold message and the
            context tool) rather than on every inner tool.
        exclusive: Unfolding removes every other tool of the run, so the model sees only the inner tools.
        remove_on_invoke: Deprecated and ignored: the facade is always replaced by its guide tool.
    """

    def __init__(
        self,
        name: str,
        description: str,
        inner_tools: InnerTools = (),
        *,
        parameters: Mapping[str, Any] | Sequence[Parameter] | None = None,
        selector: Selector | None = None,
        child_tool_usage_notes: str | None = None,
        exclusive: bool = False,
        remove_on_invoke: bool = True,
    ) -> None:
        self._definition = ToolDefinition(name, description, _schema(parameters, name))
        self._inner = tuple(resolve_tools(inner_tools, f'unfolding tool {name!r}'))
        if selector is not None and not callable(selector):
            raise UserError(f'selector of unfolding tool {name!r} must be a function `(input: str) -> list[Tool]`, '
                            f'got {type(selector).__name__}: {selector!r}.')
        self._selector = selector
        self._notes = _notes(child_tool_usage_notes, name)
        self._exclusive = bool(exclusive)
        self._remove_on_invoke = bool(remove_on_invoke)
        self._categories: dict[str, tuple[Tool, ...]] | None = None

    # --- factories -----------------------------------------------------------------------------------------

    @classmethod
    def of(cls, name: str, description: str, inner_tools: InnerTools, *, remove_on_invoke: bool = True,
           child_tool_usage_notes: str | None = None, exclusive: bool = False) -> UnfoldingTool:
        """A facade with no parameters that reveals all its inner tools (UF-1)."""
        return cls(name, description, inner_tools, child_tool_usage_notes=child_tool_usage_notes,
                   exclusive=exclusive, remove_on_invoke=remove_on_invoke)

    @classmethod
    def selectable(cls, name: str, description: str, inner_tools: InnerTools,
                   parameters: Mapping[str, Any] | Sequence[Parameter] | None, selector: Selector, *,
                   remove_on_invoke: bool = True, child_tool_usage_notes: str | None = None,
                   exclusive: bool = False) -> UnfoldingTool:
        """A facade whose `selector` picks, from the raw JSON input, the tools to reveal (UF-14). The selector may
        also build new tools from the input (UF-30); it runs once per call."""
        if not callable(selector):
            raise UserError(f'selector of unfolding tool {name!r} must be a function `(input: str) -> list[Tool]`, '
                            f'got {type(selector).__name__}: {selector!r}.')
        return cls(name, description, inner_tools, parameters=parameters, selector=selector,
                   child_tool_usage_notes=child_tool_usage_notes, exclusive=exclusive,
                   remove_on_invoke=remove_on_invoke)

    @classmethod
    def by_category(cls, name: str, description: str, tools_by_category: Mapping[str, InnerTools], *,
                    category_parameter: str = 'category', remove_on_invoke: bool = True,
                    child_tool_usage_notes: str | None = None, exclusive: bool = False) -> UnfoldingTool:
        """A facade with one required string parameter (`category_parameter`) whose enum is the category names;
        it reveals that category's tools, or all tools for an unknown or missing category (UF-15..UF-17)."""
        from toolweave.progressive._categories import category_facade

        return category_facade(cls, name, description, tools_by_category, category_parameter=category_parameter,
                               remove_on_invoke=remove_on_invoke, child_tool_usage_notes=child_tool_usage_notes,
                               exclusive=exclusive)

    @classmethod
    def from_instance(cls, instance: object) -> UnfoldingTool:
        """The facade of an instance of a class decorated with `@unfolding_tools`: its `@tool` methods (grouped by
        `category` when any has one) and its nested `@unfolding_tools` classes as nested facades (UF-18..UF-26).

        Raises:
            UserError: the class is not decorated, or has neither `@tool` methods nor nested facades (UF-21).
        """
        from toolweave.progressive._introspect import facade_from_instance

        return facade_from_instance(instance)

    @classmethod
    def safely_from_instance(cls, instance: object) -> UnfoldingTool | None:
        """Like `from_instance`, but `None` instead of an error (UF-21)."""
        try:
            return cls.from_instance(instance)
        except UserError:
            return None

    @classmethod
    def from_tool_object(cls, instance: object, name: str, description: str, *, remove_on_invoke: bool = True,
                         child_tool_usage_notes: str | None = None, exclusive: bool = False) -> UnfoldingTool:
        """A facade over any object's `@tool` methods, no class decorator needed (UF-23).

        Raises:
            UserError: the object has no `@tool` methods.
        """
        from toolweave.tools._function import tools_from

        return cls.of(name, description, tools_from(instance), remove_on_invoke=remove_on_invoke,
                      child_tool_usage_notes=child_tool_usage_notes, exclusive=exclusive)

    # --- builders ------------------------------------------------------------------------------------------

    def with_tools(self, *tools: object) -> UnfoldingTool:
        """A new facade with `tools` appended (UF-24); name, description, schema, notes and exclusive are kept
        and this one is unchanged. With a selector (or categories), the added tools are revealed for every input."""
        added = resolve_tools(tools, f'with_tools() of unfolding tool {self.name!r}')
        selector = self._selector
        if selector is not None:
            def extended(raw: str) -> Sequence[Tool]:
                picked = list(selector(raw))
                return [*picked, *(tool for tool in added if all(tool is not p for p in picked))]
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone._inner = tuple(_distinct([*self._inner, *added], f'unfolding tool {self.name!r}'))
        clone._selector = extended if selector is not None else None
        if self._categories is not None:
            clone._categories = {category: (*tools, *(t for t in added if t not in tools))
                                 for category, tools in self._categories.items()}
        return clone

    def with_tool_object(self, instance: object) -> UnfoldingTool:
        """A new facade with the `@tool` methods of `instance` appended (UF-24)."""
        from toolweave.tools._function import tools_from

        return self.with_tools(*tools_from(instance))

    # --- behaviour -----------------------------------------------------------------------------------------

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    @property
    def inner_tools(self) -> tuple[Tool, ...]:
        """Every tool this facade may reveal (a selector may build others)."""
        return self._inner

    @property
    def categories(self) -> dict[str, tuple[Tool, ...]] | None:
        """The tools of each category of a category facade (`by_category`, `from_instance`); else `None`."""
        return dict(self._categories) if self._categories is not None else None

    @property
    def child_tool_usage_notes(self) -> str | None:
        return self._notes

    @property
    def exclusive(self) -> bool:
        return self._exclusive

    @property
    def remove_on_invoke(self) -> bool:
        """The configured value. Deprecated and ignored: the facade is always replaced (UF-8)."""
        return self._remove_on_invoke

    def select_tools(self, input: str) -> list[Tool]:
        """The tools to reveal for this raw JSON input: all inner tools unless a selector says otherwise (UF-4).

        Raises:
            ToolConfigurationError: the selector returned something other than a list of tools.
        """
        if self._selector is None:
            return list(self._inner)
        picked = self._selector(input)
        if isinstance(picked, str | bytes | Mapping) or not isinstance(picked, Iterable):
            raise ToolConfigurationError(
                f'Selector of unfolding tool {self.name!r} returned {type(picked).__name__} {picked!r} for input '
                f'{input[:200]!r}. Return a list of Tool objects.'
            )
        tools = list(picked)
        for tool in tools:
            if not isinstance(tool, Tool):
                raise ToolConfigurationError(
                    f'Selector of unfolding tool {self.name!r} returned {type(tool).__name__} {tool!r} among its '
                    'tools. Return Tool objects only (wrap functions with `toolweave.tool`).'
                )
        return _distinct(tools, f'the selection of unfolding tool {self.name!r}')

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        raw = raw_input(arguments)
        target = shortcut_target(raw, self._inner)
        if target is not None:
            tool, payload = target
            return await tool.call(payload, context)
        selected = self.select_tools(raw)
        if not selected:
            text = (f'{self.name} has no tools for this input ({raw[:200]!r}). Call it with other arguments, or use '
                    'another tool.')
        else:
            text = unfold_message([tool.name for tool in selected], self._notes)
        return ToolResult.success(text, UnfoldingSelection(text, self, selected))

    def __repr__(self) -> str:
        return f'UnfoldingTool(name={self.name!r}, inner_tools={[tool.name for tool in self._inner]})'
