"""`McpToolset`: the tools of one MCP server (stdio, streamable HTTP or in-process) as a `Toolset`."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TextIO

from toolweave._checks import check_number
from toolweave.exceptions import RunError, ToolConfigurationError, UnknownToolError, UserError
from toolweave.mcp._content import InvalidNamePolicy, adapt_names, definition_of
from toolweave.mcp._meta import McpMetaConverter, MetaConverterLike, meta_for_call
from toolweave.mcp._results import remember_content
from toolweave.mcp._sdk import require_mcp
from toolweave.mcp._session import (
    CallFailed,
    HttpTarget,
    StdioTarget,
    call_tool,
    error_message,
    list_all_tools,
    open_client,
)
from toolweave.tools import (
    Tool,
    ToolArguments,
    ToolCallContext,
    ToolDefinition,
    ToolResult,
    Toolset,
    load_arguments,
)

__all__ = ('McpTool', 'McpToolset', 'mcp_tool_not_found')

logger = logging.getLogger('toolweave.mcp')

_State = Literal['new', 'open', 'closed']


def mcp_tool_not_found(name: str, available: Sequence[str]) -> UnknownToolError:
    """The error of `required_tool_by_name` `MCP tool '<name>' not found. Available: ...`."""
    error = UnknownToolError(name, list(available))
    listing = ', '.join(available) if available else '(none)'
    error.args = (f'MCP tool {name!r} not found. Available: {listing}.',)
    return error


class McpTool(Tool):
    """One tool of an MCP server. `execute` sends `tools/call` over the owning toolset's session, with the
    context converted to `_meta` by the toolset's converter; the result text becomes the output, structured
    content the `value`, and `isError` a failure."""

    __slots__ = ('_definition', '_mcp_definition', '_owner')

    def __init__(self, owner: McpToolset, definition: ToolDefinition, mcp_definition: Any) -> None:
        self._owner = owner
        self._definition = definition
        self._mcp_definition = mcp_definition

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    @property
    def mcp_name(self) -> str:
        """The name the server uses (differs from `name` when the server's name broke the name rule)."""
        return str(self._mcp_definition.name)

    @property
    def mcp_definition(self) -> Any:
        """The tool as the server listed it (the SDK's `Tool`: title, schemas, annotations, icons, `_meta`)."""
        return self._mcp_definition

    @property
    def server(self) -> str:
        """A label for the server this tool comes from."""
        return self._owner.label

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        args = load_arguments(arguments, self.name)
        meta = meta_for_call(self._owner.meta_converter, context, self.name)
        client = self._owner._client_for(self.name)
        where = f'MCP tool {self.name!r} on server {self._owner.label}'
        try:
            result = await call_tool(client, self.mcp_name, args, meta=meta, timeout=self._owner.timeout,
                                     server=self._owner.label, where=where)
        except CallFailed as exc:
            return ToolResult.failure(str(exc))
        remember_content(self.name, args, result)
        return result


class McpToolset(Toolset):
    """The tools of one MCP server, as a `Toolset`, for the life of an `async with` block.

    Connect over stdio (`McpToolset.stdio`), streamable HTTP (`McpToolset.http`) or in-process
    (`McpToolset(server)` with an MCP SDK server or a toolweave `Toolset`). Entering lists the server's tools
    and registers one `McpTool` for each; leaving closes the session (and stops a stdio server). Calling a tool
    after that raises `ToolConfigurationError`.

    Server tool names that break the name rule are adapted by default (`invalid_names='adapt'`: characters
    outside `[A-Za-z0-9_-]` become `_`, long names are cut and end with a short hash); `'reject'` raises
    `ToolNameError` instead. `tool_by_name` accepts either name.

    ```python
    async with McpToolset.stdio('mcp-server-time', ['--local-timezone', 'UTC']) as time_tools:
        result = await time_tools.get('get_current_time').call({'timezone': 'Europe/Paris'})
    ```

    Args:
        server: a URL (streamable HTTP), an MCP SDK `StdioServerParameters`, an MCP SDK server object
            (`Server` or `MCPServer`, connected in-process) or a toolweave `Toolset` (served in-process).
        label: a name for the server in error messages (default: derived from `server`).
        meta_converter: which context entries travel as `_meta` (default `McpMetaConverter.pass_through()`).
        timeout: seconds one tool call may take before it fails (`None`: no limit).
        invalid_names: `'adapt'` or `'reject'` server tool names that break the name rule.
        mode: MCP protocol negotiation: `'auto'` (discover, fall back to the handshake) or `'legacy'`.
    """

    __slots__ = ('_client', '_exit_stack', '_instructions', '_label', '_mode', '_policy', '_server', '_state',
                 'meta_converter', 'timeout')

    def __init__(
        self,
        server: Any,
        /,
        *,
        label: str | None = None,
        meta_converter: MetaConverterLike | None = None,
        timeout: float | None = None,
        invalid_names: InvalidNamePolicy = 'adapt',
        mode: Literal['auto', 'legacy'] = 'auto',
    ) -> None:
        super().__init__()
        require_mcp()
        check_number(timeout, 'timeout of McpToolset (None: no limit)', exclusive=True, optional=True, unit='seconds')
        if invalid_names not in ('adapt', 'reject'):
            raise UserError(f"invalid_names of McpToolset must be 'adapt' or 'reject', got {invalid_names!r}.")
        if mode not in ('auto', 'legacy'):
            raise UserError(f"mode of McpToolset must be 'auto' or 'legacy', got {mode!r}.")
        self._server = _client_target(server)
        self._label = label or _describe(server)
        self.meta_converter = McpMetaConverter.of(meta_converter) if meta_converter else McpMetaConverter.pass_through()
        self.timeout = timeout
        self._policy: InvalidNamePolicy = invalid_names
        self._mode = mode
        self._state: _State = 'new'
        self._client: Any = None
        self._exit_stack: AsyncExitStack | None = None
        self._instructions: str | None = None

    @classmethod
    def stdio(
        cls,
        command: str | os.PathLike[str],
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        errlog: TextIO | None = None,
        **options: Any,
    ) -> McpToolset:
        """An MCP server started as a subprocess that talks over its stdin and stdout. `env` is added to a
        small safe default environment (PATH, HOME, ...); the process is stopped when the block ends. Its stderr
        goes to `errlog` (an open file), or to this process's stderr."""
        if isinstance(args, str):
            raise UserError(f'args of McpToolset.stdio must be a list of strings, got the string {args!r}. '
                            f'Write `args=[{args!r}]`.')
        target = StdioTarget(os.fspath(command), [str(a) for a in args], env=env, cwd=cwd, errlog=errlog)
        options.setdefault('label', target.label)
        return cls(target, **options)

    @classmethod
    def http(cls, url: str, *, headers: Mapping[str, str] | None = None, **options: Any) -> McpToolset:
        """An MCP server reached over streamable HTTP at `url` (for example `http://127.0.0.1:8000/mcp`)."""
        if not isinstance(url, str) or not url.startswith(('http://', 'https://')):
            raise UserError(f'URL of McpToolset.http must start with http:// or https://, got {url!r}.')
        if headers:
            return cls(HttpTarget(url, headers), **{'label': url, **options})
        return cls(url, **options)

    @property
    def label(self) -> str:
        """The server's name in error messages."""
        return self._label

    @property
    def connected(self) -> bool:
        return self._state == 'open'

    @property
    def instructions(self) -> str | None:
        """What the server says about using its tools (for a system prompt), once connected."""
        return self._instructions

    async def __aenter__(self) -> McpToolset:
        if self._state != 'new':
            used = 'entered' if self._state == 'open' else 'closed'
            raise UserError(f'McpToolset for {self._label} was already {used}. Create a new McpToolset for each '
                            '`async with` block.')
        self._state = 'open'
        # The SDK's task groups live in this stack. It is always closed without the caller's exception, so an
        # error raised in the block (or here) comes out as itself, not wrapped in the SDK's exception groups.
        stack = AsyncExitStack()
        try:
            client = await open_client(self._server, stack, mode=self._mode)
            listed = await list_all_tools(client)
        except Exception as exc:
            await self._close(stack)
            raise RunError(f'Could not connect to MCP server {self._label}: {error_message(exc)}. Check the '
                           'command or URL, and that the server starts on its own.') from exc
        except BaseException:
            await self._close(stack)
            raise
        try:
            self._register_tools(listed)
        except BaseException:
            await self._close(stack)
            raise
        self._client = client
        self._exit_stack = stack
        self._instructions = client.instructions
        logger.info('Connected to MCP server %s: %d tools', self._label, len(listed))
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        stack, self._exit_stack = self._exit_stack, None
        if stack is not None:
            await self._close(stack)

    async def _close(self, stack: AsyncExitStack) -> None:
        self._state = 'closed'
        self._client = None
        await stack.aclose()

    def _register_tools(self, listed: list[Any]) -> None:
        names = adapt_names([tool.name for tool in listed], self._policy, self._label)
        for tool in listed:
            name = names[tool.name]
            if name != tool.name:
                logger.warning('MCP tool %r from %s renamed to %r to follow the tool name rule', tool.name,
                               self._label, name)
            self.add(McpTool(self, definition_of(name, tool, self._label), tool))

    def _client_for(self, tool_name: str) -> Any:
        if self._state != 'open' or self._client is None:
            raise ToolConfigurationError(
                f'MCP tool {tool_name!r} was called while its server {self._label} is not connected. Call MCP tools '
                'inside `async with McpToolset...(...) as tools:`.'
            )
        return self._client

    # --- lookups -----------------------------------------------------------------------------------------

    def tool_by_name(self, name: str) -> Tool | None:
        """The tool with this name (toolweave's name or the server's original name), or `None`."""
        found = self.find(name)
        if found is not None:
            return found
        return next((t for t in self.tools if isinstance(t, McpTool) and t.mcp_name == name), None)

    def required_tool_by_name(self, name: str) -> Tool:
        """The tool with this name. Raises `UnknownToolError` (a `ValueError`):
        `MCP tool '<name>' not found. Available: ...`."""
        found = self.tool_by_name(name)
        if found is None:
            raise mcp_tool_not_found(name, self.names)
        return found

    def __repr__(self) -> str:
        return f'McpToolset({self._label!r}, state={self._state!r}, tools={self.names!r})'


def _client_target(server: Any) -> Any:
    if isinstance(server, Toolset):
        from toolweave.mcp._server import mcp_server

        return mcp_server(server)
    if isinstance(server, McpToolset):
        raise UserError('McpToolset cannot wrap another McpToolset. Use the toolset itself, or `.combined()`.')
    if server is None or isinstance(server, (bytes, int, float)):
        raise UserError(f'McpToolset needs a server: a URL, StdioServerParameters, an MCP server object or a '
                        f'Toolset; got {server!r}. Use `McpToolset.stdio(command, args)` for a subprocess.')
    return server


def _describe(server: Any) -> str:
    if isinstance(server, (StdioTarget, HttpTarget)):
        return server.label
    if isinstance(server, str):
        return server
    if isinstance(server, Toolset):
        return 'in-process toolset'
    command = getattr(server, 'command', None)
    if isinstance(command, str):
        return Path(command).name
    name = getattr(server, 'name', None)
    return str(name) if isinstance(name, str) else type(server).__name__
