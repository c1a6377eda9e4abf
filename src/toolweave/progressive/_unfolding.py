"""`UnfoldingTool`: a facade the model sees first; calling it reveals its inner tools in the agent loop.

A facade reports what it reveals as it runs: each call that selects tools records an `UnfoldingSelection` in the
ambient record the agent loop opens around each of its tool calls (`record_unfoldings`). Wrappers around the
facade (approval, notes, sinks, output transforms) and plans that call it as a step cannot hide the selection,
because it never travels in the result a wrapper may replace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeAlias

from toolweave._ambient import using
from toolweave._json import compact, loads_object
from toolweave.exceptions import ToolConfigurationError, UserError
from toolweave.progressive._categories import category_facade
from toolweave.progressive._inner import distinct, resolve_tools
from toolweave.progressive._introspect import facade_from_instance
from toolweave.tools import Parameter, Tool, ToolArguments, ToolCallContext, ToolDefinition, ToolResult, tools_from
from toolweave.tools._arguments import arguments_json
from toolweave.tools._definition import empty_object_schema
from toolweave.tools._function import method_tools
from toolweave.tools._programmatic import parameters_schema

__all__ = (
    'Selector',
    'UnfoldingSelection',
    'UnfoldingTool',
    'record_unfoldings',
    'shortcut_target',
    'unfold_message',
)

Selector: TypeAlias = Callable[[str], Sequence[Tool]]
"""`selector(raw_json_input)` returning the tools to reveal for that input."""
InnerTools: TypeAlias = Iterable[object]
"""Tools, `@tool` functions or objects with `@tool` methods (or of a class decorated with `@unfolding_tools`)."""

_UNFOLD_PREAMBLE = ("Tools now available: {names}. You MUST call one of these tools to complete the user's request. "
                    'Do NOT respond with text \u2014 call a tool.')


def unfold_message(names: Sequence[str], notes: str | None) -> str:
    """What the facade answers when it unfolds: the preamble naming the tools, then the usage notes if any."""
    preamble = _UNFOLD_PREAMBLE.format(names=', '.join(names))
    return f'{preamble}\n\n{notes}' if notes is not None and notes.strip() else preamble


def shortcut_target(raw: str, tools: Sequence[Tool]) -> tuple[Tool, str] | None:
    """The tool a facade input names directly, with its JSON-encoded arguments: the first key of a JSON object
    that is the name of one of `tools`. Facades are never shortcut targets (their unfolding would be lost), so
    `{"nested_facade": {}}` unfolds normally."""
    loaded = loads_object(raw) if tools else None
    if loaded is None:
        return None
    by_name = {tool.name: tool for tool in tools}
    for key, value in loaded.items():
        target = by_name.get(key)
        if target is not None and target.layer(UnfoldingTool) is None:
            return target, compact(value)
    return None


_unfolded: ContextVar[list[UnfoldingSelection] | None] = ContextVar('toolweave_unfolded', default=None)


@contextmanager
def record_unfoldings() -> Iterator[list[UnfoldingSelection]]:
    """Collect the selections of every facade that unfolds inside the block (plan steps and other nested calls
    included), in the order they were made. The agent loop opens one around each tool call."""
    found: list[UnfoldingSelection] = []
    with using(_unfolded, found):
        yield found


def _report(selection: UnfoldingSelection) -> None:
    found = _unfolded.get()
    if found is not None:
        found.append(selection)


class UnfoldingSelection(str):
    """What a facade call revealed: the unfold message itself (it is also the call's value, so plan references and
    summaries read plain text), carrying the facade and the tools it selected. The loop's unfolding strategy
    injects exactly these tools (a selector that builds tools runs once per call, so they share that call's
    state)."""

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


def _schema(parameters: Mapping[str, Any] | Sequence[Parameter] | None, name: str) -> dict[str, Any]:
    if parameters is None:
        return empty_object_schema()
    if isinstance(parameters, Mapping):
        if parameters.get('type') != 'object':
            raise UserError(f'Input schema of unfolding tool {name!r} must be a JSON schema object with '
                            f'"type": "object", got {dict(parameters)!r}.')
        return dict(parameters)
    return parameters_schema(name, list(parameters))


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
        """A facade with no parameters that reveals all its inner tools."""
        return cls(name, description, inner_tools, child_tool_usage_notes=child_tool_usage_notes,
                   exclusive=exclusive, remove_on_invoke=remove_on_invoke)

    @classmethod
    def selectable(cls, name: str, description: str, inner_tools: InnerTools,
                   parameters: Mapping[str, Any] | Sequence[Parameter] | None, selector: Selector, *,
                   remove_on_invoke: bool = True, child_tool_usage_notes: str | None = None,
                   exclusive: bool = False) -> UnfoldingTool:
        """A facade whose `selector` picks, from the raw JSON input, the tools to reveal. The selector may also
        build new tools from the input; it runs once per call, so the tools it builds share that call's state."""
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
        it reveals that category's tools, or every tool (each once) for an unknown or missing category."""
        return category_facade(cls, name, description, tools_by_category, category_parameter=category_parameter,
                               remove_on_invoke=remove_on_invoke, child_tool_usage_notes=child_tool_usage_notes,
                               exclusive=exclusive)

    @classmethod
    def from_instance(cls, instance: object) -> UnfoldingTool:
        """The facade of an instance of a class decorated with `@unfolding_tools`: its `@tool` methods (grouped by
        `category` when any has one) and its nested `@unfolding_tools` classes as nested facades.

        Raises:
            UserError: the class is not decorated, or has neither `@tool` methods nor nested facades.
        """
        return facade_from_instance(cls, instance)

    @classmethod
    def safely_from_instance(cls, instance: object) -> UnfoldingTool | None:
        """Like `from_instance`, but `None` instead of an error."""
        try:
            return cls.from_instance(instance)
        except UserError:
            return None

    @classmethod
    def from_tool_object(cls, instance: object, name: str, description: str, *, remove_on_invoke: bool = True,
                         child_tool_usage_notes: str | None = None, exclusive: bool = False) -> UnfoldingTool:
        """A facade over any object's `@tool` methods, no class decorator needed.

        Raises:
            UserError: the object has no `@tool` methods.
        """
        methods = method_tools(instance)
        if not methods:
            raise UserError(f'UnfoldingTool.from_tool_object({name!r}) got a {type(instance).__name__} with no `@tool` '
                            'methods. Decorate its methods with `@toolweave.tool`.')
        return cls.of(name, description, methods, remove_on_invoke=remove_on_invoke,
                      child_tool_usage_notes=child_tool_usage_notes, exclusive=exclusive)

    # --- builders ------------------------------------------------------------------------------------------

    def with_tools(self, *tools: object) -> UnfoldingTool:
        """A new facade with `tools` appended; name, description, schema, notes and exclusive are kept
        and this one is unchanged. With a selector (or categories), the added tools are revealed for every input."""
        added = resolve_tools(tools, f'with_tools() of unfolding tool {self.name!r}')
        selector = self._selector
        if selector is not None:
            def extended(raw: str) -> Sequence[Tool]:
                picked = list(selector(raw))
                return [*picked, *(tool for tool in added if all(tool is not p for p in picked))]
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone._inner = tuple(distinct([*self._inner, *added], f'unfolding tool {self.name!r}'))
        clone._selector = extended if selector is not None else None
        if self._categories is not None:
            clone._categories = {category: (*tools, *(t for t in added if t not in tools))
                                 for category, tools in self._categories.items()}
        return clone

    def with_tool_object(self, instance: object) -> UnfoldingTool:
        """A new facade with the tools `instance` stands for appended: its `@tool` methods, or, for an instance of
        an `@unfolding_tools` class, its facade (nested under this one)."""
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
        """The configured value. Deprecated and ignored: the facade is always replaced by its guide tool."""
        return self._remove_on_invoke

    def select_tools(self, input: str) -> list[Tool]:
        """The tools to reveal for this raw JSON input: all inner tools unless a selector says otherwise.

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
        return distinct(tools, f'the selection of unfolding tool {self.name!r}')

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        raw = arguments_json(arguments)
        target = shortcut_target(raw, self._inner)
        if target is not None:
            self._shortcut_unfolds(raw)
            tool, payload = target
            return await tool.call(payload, context)
        selected = self.select_tools(raw)
        if not selected:
            text = (f'{self.name} has no tools for this input ({raw[:200]!r}). Call it with other arguments, or use '
                    'another tool.')
            return ToolResult.success(text)
        text = unfold_message([tool.name for tool in selected], self._notes)
        selection = UnfoldingSelection(text, self, selected)
        _report(selection)
        # The value is the message (a plan reference reads text), not an artifact: sinks see nothing to keep.
        return ToolResult.success(text, selection, artifact=False)

    def _shortcut_unfolds(self, raw: str) -> None:
        """A shortcut call unfolds as a plain call would; a selector that fails here leaves the tools as they are
        (the shortcut still runs)."""
        try:
            selected = self.select_tools(raw)
        except Exception:
            return
        if selected:
            _report(UnfoldingSelection(unfold_message([tool.name for tool in selected], self._notes), self, selected))

    def __repr__(self) -> str:
        return f'UnfoldingTool(name={self.name!r}, inner_tools={[tool.name for tool in self._inner]})'
