"""`Toolset`: tools resolved from a mixed list into unique names, looked up with one dict hit; and its live views
(`filtered`, `prefixed`, `combined`), which read the toolsets they wrap at each access."""

from __future__ import annotations

import functools
import inspect
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeAlias

from toolweave.exceptions import DuplicateToolError, UnknownToolError, UserError
from toolweave.tools._arguments import ToolArguments
from toolweave.tools._context import ToolCallContext
from toolweave.tools._definition import ToolDefinition, check_tool_name
from toolweave.tools._function import function_tool, tools_from_safely
from toolweave.tools._groups import ToolGroup
from toolweave.tools._result import ToolResult
from toolweave.tools._tool import Tool
from toolweave.tools._wrappers import renamed

__all__ = ('ToolPredicate', 'Toolset', 'ToolsetItem', 'describe_origin')

ToolPredicate: TypeAlias = Callable[[Tool], bool]


class Toolset:
    """Named tools, resolved once from a mixed list and looked up by name with one dict hit.

    Items may be `Tool` instances, plain or `@tool`-decorated functions, objects with `@tool` methods, other
    toolsets (copied) and tool groups. Names must be unique: a clash raises `DuplicateToolError` naming both
    origins. Tool groups stay unloaded until a tool of theirs is needed (`get` of a name not found yet, `names`,
    iteration) or `await toolset.load()` runs; `len()` counts the tools loaded so far and never loads.

    `filtered`, `prefixed` and `combined` return live views: they read this toolset at every access, so tools
    added to it later show through them.

    ```python
    from toolweave.testing import FakeTool
    tools = Toolset([FakeTool('search'), FakeTool('fetch')])
    web = tools.prefixed('web')
    tools.add(FakeTool('clock'))
    print(tools.names, 'search' in tools, web.names)
    #> ['search', 'fetch', 'clock'] True ['web_search', 'web_fetch', 'web_clock']
    ```
    """

    __slots__ = ('_source',)

    def __init__(self, items: Iterable[ToolsetItem] | None = None, /) -> None:
        registry = _Registry()
        self._source: _Source = registry
        if items is None:
            return
        if isinstance(items, Toolset):
            registry.add_item(items, 'toolset')
            return
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
            raise UserError(
                f'Toolset items must be a list of tools, got {type(items).__name__} {items!r}. '
                'Wrap a single tool in a list: `Toolset([my_tool])`.'
            )
        for index, item in enumerate(items):
            registry.add_item(item, f'index {index}')

    @classmethod
    def _view(cls, source: _Source) -> Toolset:
        view = object.__new__(cls)
        view._source = source
        return view

    def add(self, item: ToolsetItem, /) -> Toolset:
        """Register one more item (a tool, function, object, toolset or group) after construction; returns
        `self`. Anything already holding this toolset (a plan meta-tool, an agent, a view) sees the new tools."""
        source = self._source
        if not isinstance(source, _Registry):
            raise UserError(f'{self!r} is a view of other toolsets (filtered, prefixed or combined): add the tool to '
                            'the toolset it views instead, and the view shows it.')
        source.add_item(item, f'add() #{source.count()}')
        return self

    async def load(self) -> Toolset:
        """Load every tool group not loaded yet (async loaders included) and register its tools; returns
        `self`. Needed before sync access when a group has an async loader."""
        await self._source.load()
        return self

    # --- lookup --------------------------------------------------------------------------------------------

    def get(self, name: str) -> Tool:
        """The tool named `name`. Raises `UnknownToolError` listing the available names."""
        if not isinstance(name, str):  # an unhashable or non-string "name" from a malformed plan or model reply
            raise UnknownToolError(repr(name), self.names)
        source = self._source
        found = source.find(name)
        if found is None and source.pending:
            source.load_sync()
            found = source.find(name)
        if found is None:
            raise UnknownToolError(name, [tool.name for tool in source.loaded()])
        return found

    def find(self, name: str) -> Tool | None:
        """The tool named `name`, or `None`."""
        try:
            return self.get(name)
        except UnknownToolError:
            return None

    def origin(self, name: str) -> str:
        """Where the tool named `name` came from (for error messages)."""
        self.get(name)
        return self._source.origin(name)

    async def call(self, name: str, arguments: ToolArguments = None,
                   context: Mapping[str, Any] | None = None) -> ToolResult:
        """Dispatch a call by name. An unknown name gives the failure `Unknown tool '<name>'. Available tools: ...`
        instead of raising, so a model's typo becomes a message it can read."""
        source = self._source
        tool = source.find(name) if isinstance(name, str) else None
        if tool is None and source.pending:
            await source.load()
            tool = source.find(name) if isinstance(name, str) else None
        if tool is None:
            available = ', '.join(t.name for t in source.loaded()) or '(none)'
            return ToolResult.failure(f'Unknown tool {name!r}. Available tools: {available}.')
        return await tool.call(arguments, context if context is not None else ToolCallContext.EMPTY)

    @property
    def names(self) -> list[str]:
        """Every tool name, in order (loads pending groups)."""
        return [tool.name for tool in self.tools]

    @property
    def tools(self) -> list[Tool]:
        """Every tool, in order (loads pending groups)."""
        source = self._source
        if source.pending:
            source.load_sync()
        return source.loaded()

    def definitions(self) -> list[ToolDefinition]:
        """The definitions of every tool, in order (what a model is told)."""
        return [tool.definition for tool in self.tools]

    # --- tool groups ---------------------------------------------------------------------------------------

    def group(self, role: str) -> ToolGroup:
        """The tool group with this role. Raises `UserError` listing the roles that exist."""
        groups = self._source.groups()
        found = groups.get(role)
        if found is None:
            roles = ', '.join(repr(r) for r in groups) or '(none)'
            raise UserError(f'Unknown tool group role {role!r} in this toolset. Available roles: {roles}. '
                            'Add the group to the toolset: `Toolset([..., ToolGroup(role, loader)])`.')
        return found

    @property
    def groups(self) -> list[ToolGroup]:
        """The tool groups, loaded or not, in the order they were added."""
        return list(self._source.groups().values())

    # --- views ---------------------------------------------------------------------------------------------

    def filtered(self, keep: ToolPredicate | Iterable[str]) -> Toolset:
        """A live view with only the tools `keep` selects: a predicate over tools, or a collection of names (each
        must name a tool now). Tool groups keep their roles."""
        if callable(keep):
            return Toolset._view(_Filtered(self, keep))
        if isinstance(keep, str):
            raise UserError(f'filtered() needs a list of names or a predicate, got the string {keep!r}. '
                            f'Write `.filtered([{keep!r}])`.')
        wanted = frozenset(keep)
        for name in wanted:
            self.get(name)
        return Toolset._view(_Filtered(self, lambda tool: tool.name in wanted))

    def prefixed(self, prefix: str) -> Toolset:
        """A live view whose tools are renamed `<prefix>_<name>`; behaviour and context are unchanged, and calls
        are reviewed, recorded and logged under the new names."""
        check_tool_name(prefix, where='prefixed()')
        view = Toolset._view(_Prefixed(self, prefix))
        view.tools  # noqa: B018 - a name the prefix makes too long is reported now, not at the first call
        return view

    def combined(self, *others: Toolset | Iterable[ToolsetItem]) -> Toolset:
        """A live view with these tools followed by every other's; a name clash raises `DuplicateToolError` (now,
        and at any later access that meets it)."""
        sources = [self, *(other if isinstance(other, Toolset) else Toolset(other) for other in others)]
        view = Toolset._view(_Combined(sources))
        view._source.loaded()  # report a clash between the tools loaded now at once
        return view

    # --- container protocol --------------------------------------------------------------------------------

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.find(name) is not None

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools)

    def __len__(self) -> int:
        """The number of tools loaded so far (tool groups not loaded yet are not counted, and not loaded)."""
        return len(self._source.loaded())

    def __bool__(self) -> bool:
        """Whether the toolset has a tool or a tool group not loaded yet."""
        return bool(self._source.loaded()) or self._source.pending

    def __repr__(self) -> str:
        source = self._source
        loaded = [tool.name for tool in source.loaded()]
        if not source.pending:
            return f'Toolset({loaded!r})'
        unloaded = [group.role for group in source.groups().values() if not group.loaded]
        return f'Toolset({loaded!r}, unloaded groups={unloaded!r})'


ToolsetItem: TypeAlias = Tool | Toolset | ToolGroup | Callable[..., Any] | object
"""Anything a `Toolset` resolves: a `Tool`, a function (made a tool with `@tool`'s defaults), an object with
`@tool` methods (or of a class decorated with `@unfolding_tools`), another `Toolset`, a `ToolGroup`. (Any object
may carry `@tool` methods, so the type cannot be narrower than `object`; the members say what is meant.)"""


def describe_origin(tool: Tool, source: object = None) -> str:
    """A short label for where a tool came from: its class and name, or the object or function behind it."""
    if source is None:
        return f'{type(tool).__name__} {tool.name!r}'
    if inspect.isroutine(source):
        return f'function {getattr(source, "__module__", "?")}.{getattr(source, "__qualname__", tool.name)}'
    return f'method {tool.name!r} of {type(source).__name__} object'


# --- sources: where a toolset's tools come from ------------------------------------------------------------------


class _Source(ABC):
    """What a `Toolset` reads its tools from. `find` and `loaded` never load pending groups."""

    @abstractmethod
    def find(self, name: str) -> Tool | None: ...

    @abstractmethod
    def loaded(self) -> list[Tool]: ...

    @property
    @abstractmethod
    def pending(self) -> bool:
        """Whether some tool group is not loaded yet."""

    @abstractmethod
    def load_sync(self) -> None: ...

    @abstractmethod
    async def load(self) -> None: ...

    @abstractmethod
    def origin(self, name: str) -> str: ...

    @abstractmethod
    def groups(self) -> dict[str, ToolGroup]: ...


class _Registry(_Source):
    """The tools of a `Toolset(items)`: registered once, checked for clashes, plus the groups not loaded yet."""

    def __init__(self) -> None:
        self.tools: dict[str, Tool] = {}
        self.origins: dict[str, str] = {}
        self.group_roles: dict[str, ToolGroup] = {}
        self.unloaded: list[ToolGroup] = []
        self.lock = threading.Lock()  # guards loading pending groups from several threads

    def count(self) -> int:
        return len(self.tools) + len(self.unloaded)

    def add_item(self, item: object, where: str) -> None:
        if item is None:
            raise UserError(f'Tool at {where} must not be null. Remove the `None` entry from the tool list.')
        if isinstance(item, Tool):
            self.register(item, f'{where} ({describe_origin(item)})')
        elif isinstance(item, Toolset):
            self.add_toolset(item, where)
        elif isinstance(item, ToolGroup):
            self.add_group(item, where)
        else:
            for tool in _resolve_other(item, where):
                self.register(tool, f'{where} ({describe_origin(tool, item)})')

    def add_toolset(self, other: Toolset, where: str) -> None:
        """Copy what `other` has loaded; groups it has not loaded yet stay unloaded here too."""
        source = other._source
        if not isinstance(source, _Registry):  # a view: copy its tools as they are now
            for tool in other.tools:
                self.register(tool, f'{where} (toolset: {source.origin(tool.name)})')
            for group in source.groups().values():
                self.group_roles.setdefault(group.role, group)
            return
        for name, tool in list(source.tools.items()):
            self.register(tool, f'{where} (toolset: {source.origins[name]})')
        for group in list(source.group_roles.values()):
            if any(group is pending for pending in source.unloaded):
                self.add_group(group, f'{where} (toolset)')
            else:
                self.group_roles.setdefault(group.role, group)

    def add_group(self, group: ToolGroup, where: str) -> None:
        if group.role in self.group_roles:
            same = 'is added twice' if self.group_roles[group.role] is group else 'clashes with an earlier group'
            raise DuplicateToolError(
                f'Duplicate tool group role: {group.role!r} at {where} {same}. Add each group once, and give '
                'each group a distinct role.'
            )
        self.group_roles[group.role] = group
        if group.loaded:
            for tool in group.tools_now():
                self.register(tool, f'{where} (group {group.role!r}: {describe_origin(tool)})')
        else:
            self.unloaded.append(group)

    def register(self, tool: Tool, origin: str) -> None:
        definition = tool.definition
        if not isinstance(definition, ToolDefinition):
            raise UserError(
                f'Tool at {origin} has a definition of type {type(definition).__name__}, not ToolDefinition. '
                'Return a `ToolDefinition` from the `definition` property.'
            )
        name = check_tool_name(definition.name, where=origin)
        existing = self.origins.get(name)
        if existing is not None:
            raise DuplicateToolError(
                f'Duplicate tool name: {name!r} comes from both {existing} and {origin}. Tool names must be '
                "unique: rename one of them, or add one side through a prefixed toolset (`.prefixed('x')`)."
            )
        self.tools[name] = tool
        self.origins[name] = origin

    def find(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def loaded(self) -> list[Tool]:
        return list(self.tools.values())

    @property
    def pending(self) -> bool:
        return bool(self.unloaded)

    def load_sync(self) -> None:
        with self.lock:
            while self.unloaded:
                group = self.unloaded[0]
                self.settle(group, group.load_sync())

    async def load(self) -> None:
        while self.unloaded:
            group = self.unloaded[0]
            tools = await group.load()
            with self.lock:
                if self.unloaded and self.unloaded[0] is group:  # another task may have settled it meanwhile
                    self.settle(group, tools)

    def settle(self, group: ToolGroup, tools: list[Tool]) -> None:
        added: list[str] = []
        try:
            for tool in tools:
                self.register(tool, f'group {group.role!r} ({describe_origin(tool)})')
                added.append(tool.name)
        except BaseException:
            # All or nothing: a clash leaves the group pending, so every later access reports it again.
            for name in added:
                del self.tools[name], self.origins[name]
            raise
        self.unloaded.pop(0)

    def origin(self, name: str) -> str:
        return self.origins[name]

    def groups(self) -> dict[str, ToolGroup]:
        return self.group_roles


class _View(_Source):
    """A source that reads other toolsets at every access."""

    def __init__(self, sources: list[Toolset]) -> None:
        self.sources = sources

    @property
    def pending(self) -> bool:
        return any(toolset._source.pending for toolset in self.sources)

    def load_sync(self) -> None:
        for toolset in self.sources:
            if toolset._source.pending:
                toolset._source.load_sync()

    async def load(self) -> None:
        for toolset in self.sources:
            await toolset._source.load()

    def groups(self) -> dict[str, ToolGroup]:
        found: dict[str, ToolGroup] = {}
        for toolset in self.sources:
            found.update(toolset._source.groups())
        return found


class _Filtered(_View):
    def __init__(self, source: Toolset, keep: ToolPredicate) -> None:
        super().__init__([source])
        self.keep = keep

    def find(self, name: str) -> Tool | None:
        tool = self.sources[0]._source.find(name)
        return tool if tool is not None and self.keep(tool) else None

    def loaded(self) -> list[Tool]:
        return [tool for tool in self.sources[0]._source.loaded() if self.keep(tool)]

    def origin(self, name: str) -> str:
        return self.sources[0]._source.origin(name)


class _Prefixed(_View):
    def __init__(self, source: Toolset, prefix: str) -> None:
        super().__init__([source])
        self.prefix = f'{prefix}_'
        self.renamed: dict[str, tuple[Tool, Tool]] = {}
        """Inner name -> (inner tool, its renamed wrapper): each tool is wrapped once, so lookups return the same
        object every time."""

    def wrap(self, tool: Tool) -> Tool:
        cached = self.renamed.get(tool.name)
        if cached is not None and cached[0] is tool:
            return cached[1]
        wrapper = renamed(tool, f'{self.prefix}{tool.name}')
        self.renamed[tool.name] = (tool, wrapper)
        return wrapper

    def find(self, name: str) -> Tool | None:
        if not name.startswith(self.prefix):
            return None
        tool = self.sources[0]._source.find(name[len(self.prefix):])
        return None if tool is None else self.wrap(tool)

    def loaded(self) -> list[Tool]:
        return [self.wrap(tool) for tool in self.sources[0]._source.loaded()]

    def origin(self, name: str) -> str:
        inner = name[len(self.prefix):]
        return f'{self.sources[0]._source.origin(inner)}, prefixed {self.prefix[:-1]!r}'


class _Combined(_View):
    def find(self, name: str) -> Tool | None:
        found: Tool | None = None
        where = -1
        for index, toolset in enumerate(self.sources):
            tool = toolset._source.find(name)
            if tool is None:
                continue
            if found is not None:
                self.clash(name, where, index)
            found, where = tool, index
        return found

    def loaded(self) -> list[Tool]:
        tools: dict[str, tuple[Tool, int]] = {}
        for index, toolset in enumerate(self.sources):
            for tool in toolset._source.loaded():
                seen = tools.get(tool.name)
                if seen is not None:
                    self.clash(tool.name, seen[1], index)
                tools[tool.name] = (tool, index)
        return [tool for tool, _ in tools.values()]

    def clash(self, name: str, first: int, second: int) -> None:
        one, other = (self.sources[index]._source.origin(name) for index in (first, second))
        raise DuplicateToolError(
            f'Duplicate tool name: {name!r} comes from both combined() #{first} ({one}) and #{second} ({other}). '
            "Tool names must be unique: rename one of them, or combine one side through a prefixed toolset "
            "(`.prefixed('x')`)."
        )

    def origin(self, name: str) -> str:
        for index, toolset in enumerate(self.sources):
            if toolset._source.find(name) is not None:
                return f'combined() #{index} ({toolset._source.origin(name)})'
        raise KeyError(name)


def _resolve_other(item: object, where: str) -> list[Tool]:
    """Tools from a function or an object with `@tool` methods (or a class-provided set of tools)."""
    if isinstance(item, type):
        raise UserError(
            f'Tool object at {where} is the class {item.__name__}, not an instance. '
            f'Pass an instance instead: `{item.__name__}()`.'
        )
    if inspect.isroutine(item) or isinstance(item, functools.partial):
        return [function_tool(item)]
    found = tools_from_safely(item)
    if found:
        return found
    raise UserError(
        f"Tool object of type '{type(item).__name__}' is neither a Tool nor has @tool-decorated methods "
        f'(at {where}: {item!r}). Pass a Tool, a function, or an object with methods decorated with '
        '`@toolweave.tool`.'
    )
