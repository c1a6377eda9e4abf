"""`McpToolset`: the tools of one MCP server (stdio, streamable HTTP or in-process) as a `Toolset`."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import anyio

from toolweave._checks import check_number
from toolweave._version import __version__
from toolweave.exceptions import RunError, ToolConfigurationError, UnknownToolError, UserError
from toolweave.mcp._content import InvalidNamePolicy, adapt_names, to_tool_result
from toolweave.mcp._meta import McpMetaConverter, MetaConverterLike, meta_for_call
from toolweave.mcp._sdk import require_mcp
from toolweave.tools import (
    Tool,
    ToolArguments,
    ToolCallContext,
    ToolDefinition,
    ToolMetadata,
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

    __slots__ = ('_definition', '_mcp_name', '_owner')

    def __init__(self, owner: McpToolset, definition: ToolDefinition, mcp_name: str) -> None:
        self._owner = owner
        self._definition = definition
        self._mcp_name = mcp_name

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    @property
    def mcp_name(self) -> str:
        """The name the server uses (differs from `name` when the server's name broke the name rule)."""
        return self._mcp_name

    @property
    def server(self) -> str:
        """A label for the server this tool comes from."""
        return self._owner.label

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        args = load_arguments(arguments, self.name)
        meta = meta_for_call(self._owner.meta_converter, context, self.name)
        client = self._owner._client_for(self.name)
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        try:
            result = await client.call_tool(
                self._mcp_name, args, read_timeout_seconds=self._owner.timeout, meta=meta
            )
        except MCPError as exc:
            where = f'MCP tool {self.name!r} on server {self._owner.label}'
            if exc.code == REQUEST_TIMEOUT:
                return ToolResult.failure(f'{where} timed out after {self._owner.timeout} s.')
            if exc.code == CONNECTION_CLOSED:
                return ToolResult.failure(f'{where} failed: the connection to the server is closed.')
            return ToolResult.failure(f'{where} failed: {exc.message} (MCP error {exc.code}).')
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
            return ToolResult.failure(
                f'MCP tool {self.name!r} on server {self._owner.label} failed: the connection to the server is closed.'
            )
        return to_tool_result(result)


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
        **options: Any,
    ) -> McpToolset:
        """An MCP server started as a subprocess that talks over its stdin and stdout. `env` is added to a
        small safe default environment (PATH, HOME, ...); the process is stopped when the block ends."""
        if isinstance(args, str):
            raise UserError(f'args of McpToolset.stdio must be a list of strings, got the string {args!r}. '
                            f'Write `args=[{args!r}]`.')
        parameters = require_mcp().StdioServerParameters(
            command=os.fspath(command), args=[str(a) for a in args], env=dict(env) if env else None,
            cwd=os.fspath(cwd) if cwd is not None else None,
        )
        options.setdefault('label', ' '.join([Path(os.fspath(command)).name, *(Path(a).name for a in args[:1])]))
        return cls(parameters, **options)

    @classmethod
    def http(cls, url: str, *, headers: Mapping[str, str] | None = None, **options: Any) -> McpToolset:
        """An MCP server reached over streamable HTTP at `url` (for example `http://127.0.0.1:8000/mcp`)."""
        if not isinstance(url, str) or not url.startswith(('http://', 'https://')):
            raise UserError(f'URL of McpToolset.http must start with http:// or https://, got {url!r}.')
        if headers:
            return cls(_HttpTarget(url, dict(headers)), **{'label': url, **options})
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
        mcp = require_mcp()
        self._state = 'open'
        # The SDK's task groups live in this stack. It is always closed without the caller's exception, so an
        # error raised in the block (or here) comes out as itself, not wrapped in the SDK's exception groups.
        stack = AsyncExitStack()
        try:
            target = self._server
            if isinstance(target, _HttpTarget):
                target = await target.transport(stack)
            client = mcp.Client(target, mode=self._mode, client_info=_client_info())
            await stack.enter_async_context(client)
            listed = await _list_all_tools(client)
        except Exception as exc:
            await self._close(stack)
            raise RunError(f'Could not connect to MCP server {self._label}: {_message(exc)}. Check the command '
                           'or URL, and that the server starts on its own.') from exc
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
            extra: dict[str, Any] = {'mcp_name': tool.name, 'mcp_server': self._label}
            if tool.output_schema is not None:
                extra['output_schema'] = tool.output_schema
            if tool.annotations is not None:  # read-only / destructive hints, for a review policy to read
                extra['annotations'] = tool.annotations.model_dump(exclude_none=True)
            definition = ToolDefinition(name, tool.description or '', dict(tool.input_schema),
                                        ToolMetadata(extra=extra))
            self.add(McpTool(self, definition, tool.name))

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


class _HttpTarget:
    """A URL plus headers: the transport needs its own HTTP client, which lives as long as the session."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url = url
        self.headers = headers

    async def transport(self, stack: AsyncExitStack) -> Any:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=self.headers, timeout=httpx2.Timeout(30.0, read=300.0))
        )
        return streamable_http_client(self.url, http_client=http)


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
    if isinstance(server, str):
        return server
    if isinstance(server, Toolset):
        return 'in-process toolset'
    command = getattr(server, 'command', None)
    if isinstance(command, str):
        return Path(command).name
    name = getattr(server, 'name', None)
    return str(name) if isinstance(name, str) else type(server).__name__


def _client_info() -> Any:
    from mcp_types import Implementation

    return Implementation(name='toolweave', version=__version__)


async def _list_all_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(1000):  # a server whose pagination never ends cannot hang the connect
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _message(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _message(exc.exceptions[0])
    return str(exc) or type(exc).__name__
