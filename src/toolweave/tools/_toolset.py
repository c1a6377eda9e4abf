"""`Toolset`: a list of tools, functions, objects with `@tool` methods, toolsets and tool groups, resolved into
uniquely named tools with a dict lookup."""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from toolweave.exceptions import DuplicateToolError, UnknownToolError, UserError
from toolweave.tools._context import ToolCallContext
from toolweave.tools._definition import ToolDefinition, check_tool_name
from toolweave.tools._result import ToolResult
from toolweave.tools._tool import Tool, ToolArguments

if TYPE_CHECKING:
    from toolweave.tools._groups import ToolGroup

__all__ = ('Toolset', 'ToolsetItem', 'describe_origin')

ToolsetItem: TypeAlias = Any
"""Anything `Toolset` resolves: a `Tool`, a function, an object with `@tool` methods, a `Toolset`, a `ToolGroup`."""

ToolPredicate: TypeAlias = Callable[[Tool], bool]


class Toolset:
    """Named tools, resolved once from a mixed list and looked up by name with one dict hit.

    Items may be `Tool` instances, plain or `@tool`-decorated functions, objects with `@tool` methods, other
    toolsets and tool groups. Names must be unique: a clash raises `DuplicateToolError` naming both origins.
    Tool groups stay unloaded until a tool of theirs is needed (`get` of a name not found yet, `names`,
    iteration) or `await toolset.load()` runs.

    ```python
    from toolweave.testing import FakeTool
    tools = Toolset([FakeTool('search'), FakeTool('fetch')])
    print(tools.names, 'search' in tools)
    #> ['search', 'fetch'] True
    ```
    """

    __slots__ = ('_groups', '_lock', '_origins', '_pending', '_tools')

    def __init__(self, items: Iterable[ToolsetItem] | None = None, /) -> None:
        self._tools: dict[str, Tool] = {}
        self._origins: dict[str, str] = {}
        self._groups: dict[str, ToolGroup] = {}
        self._pending: list[ToolGroup] = []
        self._lock = threading.Lock()  # guards loading pending groups from several threads
        if items is None:
            return
        if isinstance(items, Toolset):  # a copy that keeps its unloaded groups unloaded
            self._add_item(items, 'toolset')
            return
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
            raise UserError(
                f'Toolset items must be a list of tools, got {type(items).__name__} {items!r}. '
                'Wrap a single tool in a list: `Toolset([my_tool])`.'
            )
        for index, item in enumerate(items):
            self._add_item(item, f'index {index}')

    # --- building -----------------------------------------------------------------------------------------

    def add(self, item: ToolsetItem, /) -> Toolset:
        """Register one more item (a tool, function, object, toolset or group) after construction; returns
        `self`. Anything already holding this toolset (a plan meta-tool, an agent) sees the new tools."""
        self._add_item(item, f'add() #{len(self._tools) + len(self._pending)}')
        return self

    def _add_item(self, item: ToolsetItem, where: str) -> None:
        from toolweave.tools._groups import ToolGroup

        if item is None:
            raise UserError(f'Tool at {where} must not be null. Remove the `None` entry from the tool list.')
        if isinstance(item, Tool):
            self._register(item, f'{where} ({describe_origin(item)})')
        elif isinstance(item, Toolset):
            # Copy what is loaded; groups the other toolset has not loaded yet stay unloaded here too.
            for name, tool in list(item._tools.items()):
                self._register(tool, f'{where} (toolset: {item._origins[name]})')
            for group in list(item._groups.values()):
                if any(group is pending for pending in item._pending):
                    self._add_group(group, f'{where} (toolset)')
                else:
                    self._groups.setdefault(group.role, group)
        elif isinstance(item, ToolGroup):
            self._add_group(item, where)
        else:
            for tool in _resolve_other(item, where):
                self._register(tool, f'{where} ({describe_origin(tool, item)})')

    def _add_group(self, group: ToolGroup, where: str) -> None:
        if group.role in self._groups:
            same = 'is added twice' if self._groups[group.role] is group else 'clashes with an earlier group'
            raise DuplicateToolError(
                f'Duplicate tool group role: {group.role!r} at {where} {same}. Add each group once, and give '
                'each group a distinct role.'
            )
        self._groups[group.role] = group
        if group.loaded:
            for tool in group.tools_now():
                self._register(tool, f'{where} (group {group.role!r}: {describe_origin(tool)})')
        else:
            self._pending.append(group)

    def _register(self, tool: Tool, origin: str) -> None:
        definition = tool.definition
        if not isinstance(definition, ToolDefinition):
            raise UserError(
                f'Tool at {origin} has a definition of type {type(definition).__name__}, not ToolDefinition. '
                'Return a `ToolDefinition` from the `definition` property.'
            )
        name = check_tool_name(definition.name, where=origin)
        existing = self._origins.get(name)
        if existing is not None:
            raise DuplicateToolError(
                f'Duplicate tool name: {name!r} comes from both {existing} and {origin}. Tool names must be '
                "unique: rename one of them, or add one side through a prefixed toolset (`.prefixed('x')`)."
            )
        self._tools[name] = tool
        self._origins[name] = origin

    # --- tool groups ---------------------------------------------------------------------------------------

    def _load_pending_sync(self) -> None:
        with self._lock:
            while self._pending:
                group = self._pending[0]
                self._settle(group, group.load_sync())

    async def load(self) -> Toolset:
        """Load every tool group not loaded yet (async loaders included) and register its tools; returns
        `self`. Needed before sync access when a group has an async loader."""
        while self._pending:
            group = self._pending[0]
            tools = await group.load()
            with self._lock:
                if self._pending and self._pending[0] is group:  # another task may have settled it meanwhile
                    self._settle(group, tools)
        return self

    def _settle(self, group: ToolGroup, tools: list[Tool]) -> None:
        added: list[str] = []
        try:
            for tool in tools:
                self._register(tool, f'group {group.role!r} ({describe_origin(tool)})')
                added.append(tool.name)
        except BaseException:
            # All or nothing: a clash leaves the group pending, so every later access reports it again.
            for name in added:
                del self._tools[name], self._origins[name]
            raise
        self._pending.pop(0)

    def group(self, role: str) -> ToolGroup:
        """The tool group with this role. Raises `UserError` listing the roles that exist."""
        found = self._groups.get(role)
        if found is None:
            roles = ', '.join(repr(r) for r in self._groups) or '(none)'
            raise UserError(f'Unknown tool group role {role!r} in this toolset. Available roles: {roles}. '
                            'Add the group to the toolset: `Toolset([..., ToolGroup(role, loader)])`.')
        return found

    @property
    def groups(self) -> list[ToolGroup]:
        """The tool groups, loaded or not, in the order they were added."""
        return list(self._groups.values())

    # --- lookup --------------------------------------------------------------------------------------------

    def get(self, name: str) -> Tool:
        """The tool named `name`. Raises `UnknownToolError` listing the available names."""
        try:
            return self._tools[name]
        except KeyError:
            pass
        except TypeError:  # an unhashable "name" from a malformed plan or model reply
            raise UnknownToolError(repr(name), self.names) from None
        if self._pending:
            self._load_pending_sync()
            found = self._tools.get(name)
            if found is not None:
                return found
        raise UnknownToolError(name, list(self._tools))

    def find(self, name: str) -> Tool | None:
        """The tool named `name`, or `None`."""
        try:
            return self.get(name)
        except UnknownToolError:
            return None

    def origin(self, name: str) -> str:
        """Where the tool named `name` came from (for error messages)."""
        self.get(name)
        return self._origins[name]

    async def call(self, name: str, arguments: ToolArguments = None,
                   context: Mapping[str, Any] | None = None) -> ToolResult:
        """Dispatch a call by name. An unknown name gives the failure `Unknown tool '<name>'` instead of
        raising (AD-20), so a model's typo becomes a message it can read."""
        tool = self._tools.get(name) if isinstance(name, str) else None
        if tool is None:
            if self._pending:
                await self.load()
                tool = self._tools.get(name) if isinstance(name, str) else None
            if tool is None:
                available = ', '.join(self._tools) or '(none)'
                return ToolResult.failure(f'Unknown tool {name!r}. Available tools: {available}.')
        return await tool.call(arguments, context if context is not None else ToolCallContext.EMPTY)

    @property
    def names(self) -> list[str]:
        """Every tool name, in order (loads pending groups)."""
        if self._pending:
            self._load_pending_sync()
        return list(self._tools)

    @property
    def tools(self) -> list[Tool]:
        """Every tool, in order (loads pending groups)."""
        if self._pending:
            self._load_pending_sync()
        return list(self._tools.values())

    def definitions(self) -> list[ToolDefinition]:
        """The definitions of every tool, in order (what a model is told)."""
        return [tool.definition for tool in self.tools]

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if name in self._tools:
            return True
        if self._pending:
            self._load_pending_sync()
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.names)

    def __bool__(self) -> bool:
        return bool(self._tools) or bool(self._pending)

    def __repr__(self) -> str:
        pending = f', unloaded groups={[g.role for g in self._pending]!r}' if self._pending else ''
        return f'Toolset({list(self._tools)!r}{pending})'

    # --- derived toolsets ----------------------------------------------------------------------------------

    def filtered(self, keep: ToolPredicate | Iterable[str]) -> Toolset:
        """A new toolset with only the tools `keep` selects: a predicate over tools, or a collection of names
        (every name must exist)."""
        if callable(keep):
            predicate = keep
            chosen = [tool for tool in self.tools if predicate(tool)]
        else:
            if isinstance(keep, str):
                raise UserError(f'filtered() needs a list of names or a predicate, got the string {keep!r}. '
                                f'Write `.filtered([{keep!r}])`.')
            wanted = list(keep)
            for name in wanted:
                self.get(name)
            chosen = [tool for tool in self.tools if tool.name in set(wanted)]
        derived = self._derived(chosen)
        derived._groups = dict(self._groups)  # a filtered view keeps the roles (their tools keep their names)
        return derived

    def prefixed(self, prefix: str) -> Toolset:
        """A new toolset whose tools are renamed `<prefix>_<name>`; behaviour and context are unchanged."""
        from toolweave.decorators import renamed

        check_tool_name(prefix, where='prefixed()')
        return self._derived([renamed(tool, f'{prefix}_{tool.name}') for tool in self.tools])

    def combined(self, *others: Toolset | Iterable[ToolsetItem]) -> Toolset:
        """A new toolset with these tools followed by every other's; a name clash raises
        `DuplicateToolError`."""
        result = Toolset()
        result._add_item(self, 'combined() self')
        for position, other in enumerate(others, start=1):
            result._add_item(other if isinstance(other, Toolset) else Toolset(other), f'combined() #{position}')
        return result

    def _derived(self, tools: list[Tool]) -> Toolset:
        result = Toolset()
        for tool in tools:
            result._tools[tool.name] = tool
            result._origins[tool.name] = self._origins.get(tool.name, describe_origin(tool))
        return result


def describe_origin(tool: Tool, source: object = None) -> str:
    """A short label for where a tool came from: its class and name, or the object or function behind it."""
    if source is None:
        return f'{type(tool).__name__} {tool.name!r}'
    if inspect.isroutine(source):
        return f'function {getattr(source, "__module__", "?")}.{getattr(source, "__qualname__", tool.name)}'
    return f'method {tool.name!r} of {type(source).__name__} object'


def _resolve_other(item: object, where: str) -> list[Tool]:
    """Tools from a function or an object with `@tool` methods, or AD-17's error."""
    from toolweave.tools import _function

    if isinstance(item, type):
        raise UserError(
            f'Tool object at {where} is the class {item.__name__}, not an instance. '
            f'Pass an instance instead: `{item.__name__}()`.'
        )
    from toolweave.progressive import _introspect

    if _introspect.spec_of(type(item)) is not None:  # an `@unfolding_tools` object is one facade, not its methods
        return [_introspect.facade_from_instance(item)]
    if _function.has_tool_methods(item):
        return list(_function.tools_from(item))
    if inspect.isroutine(item) or isinstance(item, functools.partial):
        return [_function.function_tool(item)]
    raise UserError(
        f"Tool object of type '{type(item).__name__}' is neither a Tool nor has @tool-decorated methods "
        f'(at {where}: {item!r}). Pass a Tool, a function, or an object with methods decorated with '
        '`@toolweave.tool`.'
    )

