"""`McpToolFactory`: name lookups and tool selections across the tools of several MCP servers."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any

from toolweave.exceptions import UserError
from toolweave.mcp._client import McpTool, McpToolset, mcp_tool_not_found
from toolweave.progressive import UnfoldingTool
from toolweave.tools import Tool, Toolset

__all__ = ('McpToolFactory',)


class McpToolFactory:
    """Looks up and selects tools across MCP servers (or any toolsets).

    The selections return a `Toolset` built from the servers' tools in order: by exact name
    (`toolset_by_name`), by regular expression *search* on the name (`matching`), or by a predicate
    (`filtered`). The `unfolding...` builders put the same selections behind an `UnfoldingTool` facade that
    the model opens on demand. With no servers every selection is empty (a facade with no inner tools), which
    callers should skip. Used as `async with`, the factory connects every `McpToolset` not connected yet and
    closes them at the end.

    ```python
    async with McpToolFactory([McpToolset.stdio('mcp-server-time')]) as factory:
        time_tools = factory.matching('time')
    ```
    """

    __slots__ = ('_exit_stack', '_sources')

    def __init__(self, clients: Iterable[Toolset] | Toolset = ()) -> None:
        if isinstance(clients, Toolset):  # one toolset iterates over its tools, not over toolsets
            clients = [clients]
        self._sources: list[Toolset] = []
        for index, client in enumerate(clients):
            if not isinstance(client, Toolset):
                raise UserError(f'McpToolFactory client at index {index} must be an McpToolset (or a Toolset), got '
                                f'{type(client).__name__} {client!r}. Build one with `McpToolset.stdio(...)`.')
            self._sources.append(client)
        self._exit_stack: AsyncExitStack | None = None

    async def __aenter__(self) -> McpToolFactory:
        async with AsyncExitStack() as stack:
            for source in self._sources:
                if isinstance(source, McpToolset) and not source.connected:
                    await stack.enter_async_context(source)
            self._exit_stack = stack.pop_all()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        stack, self._exit_stack = self._exit_stack, None
        if stack is not None:
            await stack.__aexit__(exc_type, exc, tb)

    @property
    def tools(self) -> list[Tool]:
        """Every tool of every server, in server order."""
        return [tool for source in self._sources for tool in source.tools]

    @property
    def names(self) -> list[str]:
        return [tool.name for tool in self.tools]

    def tool_by_name(self, name: str) -> Tool | None:
        """The first tool with this name (or, for MCP tools, this server-side name), or `None`."""
        tools = self.tools
        found = next((tool for tool in tools if tool.name == name), None)
        if found is None:
            found = next((tool for tool in tools if isinstance(tool, McpTool) and tool.mcp_name == name), None)
        return found

    def required_tool_by_name(self, name: str) -> Tool:
        """The tool with this name. Raises `UnknownToolError` (a `ValueError`):
        `MCP tool '<name>' not found. Available: ...`."""
        found = self.tool_by_name(name)
        if found is None:
            raise mcp_tool_not_found(name, self.names)
        return found

    def toolset(self) -> Toolset:
        """All tools as one toolset; a name used by two servers raises `DuplicateToolError`."""
        return self.filtered(lambda tool: True)

    def toolset_by_name(self, names: Iterable[str]) -> Toolset:
        """The tools whose name is one of `names` (exact membership; names no server has are skipped)."""
        if isinstance(names, str):
            raise UserError(f'toolset_by_name() needs a collection of names, got the string {names!r}. '
                            f'Write `toolset_by_name([{names!r}])`.')
        wanted = set(names)
        return self.filtered(lambda tool: tool.name in wanted)

    def matching(self, *patterns: str | re.Pattern[str]) -> Toolset:
        """The tools whose name contains a match for any of the regular expressions (search, not full match)."""
        compiled: list[re.Pattern[str]] = []
        for pattern in patterns:
            if isinstance(pattern, re.Pattern):
                compiled.append(pattern)
                continue
            if not isinstance(pattern, str):
                raise UserError(f'matching() patterns must be strings or compiled regular expressions, got '
                                f'{type(pattern).__name__} {pattern!r}.')
            try:
                compiled.append(re.compile(pattern))
            except re.error as exc:
                raise UserError(f'Invalid regular expression in matching(): {pattern!r} ({exc}). Escape special '
                                'characters with `re.escape(name)`.') from None
        return self.filtered(lambda tool: any(p.search(tool.name) for p in compiled))

    def filtered(self, predicate: Callable[[Tool], bool]) -> Toolset:
        """The tools `predicate` accepts, in server order."""
        if not callable(predicate):
            raise UserError(f'filtered() needs a predicate `(Tool) -> bool`, got {type(predicate).__name__} '
                            f'{predicate!r}. Use `toolset_by_name([...])` to select by names.')
        return Toolset([tool for tool in self.tools if predicate(tool)])

    # --- facades ----------------------------------------------------------------------------------------

    def unfolding_by_name(self, name: str, description: str, names: Iterable[str], **options: Any) -> UnfoldingTool:
        """A facade over the tools whose name is one of `names` (exact membership). `options` go to
        `UnfoldingTool.of` (`child_tool_usage_notes`, `exclusive`; `remove_on_invoke` is accepted and ignored)."""
        return _facade(name, description, self.toolset_by_name(names), options)

    def unfolding_matching(self, name: str, description: str,
                           patterns: str | re.Pattern[str] | Iterable[str | re.Pattern[str]],
                           **options: Any) -> UnfoldingTool:
        """A facade over the tools whose name contains a match for any of `patterns` (search, not full match)."""
        if isinstance(patterns, (str, re.Pattern)):
            patterns = [patterns]
        return _facade(name, description, self.matching(*patterns), options)

    def unfolding(self, name: str, description: str, predicate: Callable[[Tool], bool],
                  **options: Any) -> UnfoldingTool:
        """A facade over the tools `predicate` accepts."""
        return _facade(name, description, self.filtered(predicate), options)

    def __repr__(self) -> str:
        return f'McpToolFactory({len(self._sources)} clients, tools={self.names!r})'


def _facade(name: str, description: str, tools: Toolset, options: dict[str, Any]) -> UnfoldingTool:
    return UnfoldingTool.of(name, description, tools.tools, **options)
