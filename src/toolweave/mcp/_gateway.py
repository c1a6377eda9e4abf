"""`McpGateway`: one MCP server in front of many, serving `execute_tool_plan` over all their tools.

The gateway starts every upstream server (see `_upstream`), offers each upstream tool under a stable name (its
own, or `<prefix>_<name>` when two servers offer the same name or the config says always), and serves them
with `ToolServer`: in `tools` mode the upstream tools as they are plus `execute_tool_plan`; in `search` mode
only `search_tools`, `describe_tools` and `execute_tool_plan`, a list that never changes. Prompts, resources,
templates, completions and logging are served by `UpstreamFeatures`; what upstream servers ask of the client, and
their progress, reach the client through the request's `Exchange` (see `_relay`).

A tool is gated (asks for approval, inside plans too) unless its server marks it read-only or not destructive, as
the MCP specification reads a tool's hints (no annotations: it may be destructive), or the config trusts it; the
config can also gate any tool. A call sends an upstream server only the context keys its config forwards. A plan
may take `planTimeout` seconds, approvals and the upstream servers' questions included; each client may run
`maxPlansPerClient` plans at once.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AsyncExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio

from toolweave._version import __version__
from toolweave.approval import ReviewHandler
from toolweave.exceptions import UserError
from toolweave.mcp._approvals import ApprovalFallback
from toolweave.mcp._config import GatewayConfig, ServerConfig
from toolweave.mcp._content import adapt_names, definition_of
from toolweave.mcp._features import UpstreamFeatures
from toolweave.mcp._http import current_client
from toolweave.mcp._relay import Exchange, Patience, PlanProgress, current_exchange
from toolweave.mcp._results import remember_content
from toolweave.mcp._sdk import require_mcp
from toolweave.mcp._search import DescribeTool, SearchTool, unknown_tool_message
from toolweave.mcp._serving import Admission, ChangeKind, ToolServer
from toolweave.mcp._stdio import stdio_streams
from toolweave.mcp._upstream import DEFAULT_BACKOFF, Backoff, ListKind, Upstream
from toolweave.plan import PlanEvent, PlanTool
from toolweave.tools._context import ToolCallContext
from toolweave.tools._definition import ToolDefinition
from toolweave.tools._result import ToolResult
from toolweave.tools._tool import Tool, ToolArguments, load_arguments
from toolweave.tools._toolset import Toolset

__all__ = ('GatewayTool', 'McpGateway', 'default_log_dir')

logger = logging.getLogger('toolweave.mcp.gateway')

_SEARCH_HELP = ('# Finding tools\nThis server lists only `search_tools`, `describe_tools` and `execute_tool_plan`; '
                'many more tools can be called. Find them with `search_tools` (say what the tool does; it answers '
                "with each match's input schema), then run them with `execute_tool_plan` (a plan of one step is "
                'fine). `describe_tools` gives a full definition.')


def default_log_dir() -> Path:
    """Where upstream servers' stderr goes by default: `$XDG_STATE_HOME/toolweave/gateway` (or
    `~/.local/state/toolweave/gateway`)."""
    state = os.environ.get('XDG_STATE_HOME') or str(Path.home() / '.local' / 'state')
    return Path(state) / 'toolweave' / 'gateway'


class GatewayTool(Tool):
    """An upstream server's tool as the gateway offers it: the server's own definition (it follows
    `tools/list_changed`) under the gateway's name, called through the server's supervised connection."""

    __slots__ = ('_definition', '_gated', '_source', '_trusted', 'mcp_name', 'upstream')

    def __init__(self, name: str, upstream: Upstream, mcp_name: str) -> None:
        self.upstream = upstream
        self.mcp_name = mcp_name
        self._gated = _matches(upstream.config.require_approval, mcp_name)
        self._trusted = _matches(upstream.config.trust_tools, mcp_name)
        self._source: Any = None
        self._definition = self._define(name)

    @property
    def available(self) -> bool:
        """Whether the server still lists the tool (its last listing, if the server is down)."""
        return self.mcp_name in self.upstream.tools

    @property
    def definition(self) -> ToolDefinition:
        source = self.upstream.tools.get(self.mcp_name)
        if source is not None and source is not self._source:
            self._definition = self._define(self._definition.name)
        return self._definition

    def _define(self, name: str) -> ToolDefinition:
        source = self._source = self.upstream.tools[self.mcp_name]
        definition = definition_of(name, source, self.upstream.name)
        metadata = definition.metadata
        # MCP's defaults: readOnlyHint false, destructiveHint true (meaningful when not read-only). So a tool
        # without annotations may be destructive; trusting it in the config says otherwise, an explicit
        # `destructiveHint: true` it cannot.
        if metadata.read_only is True or metadata.destructive is False:
            asks = False
        else:
            asks = metadata.destructive is True or not self._trusted
        if self._gated or asks:
            return definition.with_metadata(requires_approval=True)
        return definition

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        args = load_arguments(arguments, self.name)
        if not self.available:
            return ToolResult.failure(f'Tool {self.name!r} is no longer offered by MCP server {self.upstream.name!r}. '
                                      'Pick another tool.')
        result = await self.upstream.call(self.name, self.mcp_name, args, context)
        remember_content(self.name, args, result)
        return result


class McpGateway:
    """One MCP server in front of the servers of a config, for the life of an `async with` block.

    Entering starts every upstream server and waits until each has started or failed (a server that fails is
    retried in the background; its tools appear when it comes up). Leaving stops them all.

    ```python
    config = {'mcpServers': {'time': {'command': 'mcp-server-time'}}, 'toolweave': {'mode': 'search'}}
    async with McpGateway(config) as gateway:
        await gateway.serve_stdio()  # until the client closes stdin
    ```

    Args:
        config: a `GatewayConfig`, its JSON data (a mapping), or the path of a config file.
        log_dir: where each stdio server's stderr goes, as `<prefix>.log` (default `default_log_dir()`).
        review_handler: decide approvals in the gateway rather than asking the client.
        backoff: the delays between restarts of a server that failed.
        name: the server name clients see.
    """

    def __init__(self, config: GatewayConfig | Mapping[str, Any] | str | os.PathLike[str], *,
                 log_dir: str | os.PathLike[str] | None = None, review_handler: ReviewHandler | None = None,
                 backoff: Backoff = DEFAULT_BACKOFF, name: str = 'toolweave-gateway') -> None:
        require_mcp()
        if isinstance(config, GatewayConfig):
            self.config = config
        elif isinstance(config, Mapping):
            self.config = GatewayConfig.parse(config)
        else:
            self.config = GatewayConfig.load(config)
        self.log_dir = Path(log_dir) if log_dir is not None else default_log_dir()
        self.name = name
        _check_prefixes(self.config.servers)
        self.upstreams = [Upstream(server, log_dir=self.log_dir, backoff=backoff, on_change=self._changed,
                                   on_log=self._unattributed_log, on_resource_updated=self._resource_updated,
                                   on_unplaced=self._unplaced)
                          for server in self.config.servers]
        self.features = UpstreamFeatures(self.upstreams)
        self.tools = Toolset()
        """Every upstream tool the gateway has named so far, as `GatewayTool`s (a tool a server stopped listing
        stays here, and fails when called)."""
        self._by_key: dict[tuple[str, str], str] = {}
        # A plan's gated steps are put to the client whole: one question, one checkbox per gated step.
        self.plan_tool = _GatewayPlanTool(self.tools, timeout=self.config.plan_timeout, review_mode='whole_plan',
                                          on_event=_plan_event)
        self.search_tool = SearchTool(self._catalog)
        self.describe_tool = DescribeTool(self._catalog)
        front: list[Tool] = [self.plan_tool, self.search_tool, self.describe_tool]
        self._reserved = {tool.name for tool in front}
        announces: list[ChangeKind] = ['prompts', 'resources']
        if self.config.mode == 'tools':
            announces.append('tools')
        self._served = ToolServer(self.tools, front=front, listed=self._listed, review_handler=review_handler,
                                  approval_fallback=self._fallback_for, announces=announces, limits=self,
                                  extension=self.features,
                                  unknown_tool=self._unknown_tool if self.config.mode == 'search' else None)
        self._plans: dict[str, int] = {}
        """Plans running now, by client."""
        self._one_client = False
        self._stack: AsyncExitStack | None = None
        self._started = False
        self._server: Any = None

    # --- life cycle ---------------------------------------------------------------------------------------

    async def __aenter__(self) -> McpGateway:
        if self._stack is not None or self._started:
            raise UserError('An McpGateway can be entered once. Create a new McpGateway for each `async with`.')
        stack = AsyncExitStack()
        tasks = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tasks.cancel_scope.cancel)  # leaving stops every upstream (callbacks run before the group)
        try:
            async with anyio.create_task_group() as starting:
                for upstream in self.upstreams:
                    starting.start_soon(tasks.start, upstream.run)
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        self._name_new_tools()
        self.features.name_all()
        self._started = True
        up = sum(1 for u in self.upstreams if u.state == 'up')
        logger.info('Gateway started: %d of %d servers up, %d tools', up, len(self.upstreams), len(self.tools))
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    # --- serving ------------------------------------------------------------------------------------------

    def server(self) -> Any:
        """The SDK low-level `Server` clients talk to (one per gateway, made on first use)."""
        if not self._started:
            raise UserError('Enter the gateway first: `async with McpGateway(config) as gateway:`.')
        if self._server is None:
            self._server = self._served.server(name=self.name, version=__version__, instructions=self.instructions())
        return self._server

    async def serve_stdio(self) -> None:
        """Serve clients over this process's stdin and stdout until stdin closes."""
        server = self.server()
        self._one_client = True  # log messages that belong to no request go to it
        async with stdio_streams() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    async def serve_http(self, *, host: str = '127.0.0.1', port: int = 8000, path: str = '/mcp',
                         on_started: Callable[[str], object] | None = None) -> None:
        """Serve clients over streamable HTTP until cancelled (see `toolweave.mcp.serve_http`). With bearer tokens
        in the config, every request needs one; without, only a loopback `host` is accepted."""
        from toolweave.mcp._http import BearerTokens, http_app, serve_app

        tokens = BearerTokens(self.config.bearer_tokens) if self.config.bearer_tokens else None
        if tokens is None and host not in ('127.0.0.1', 'localhost', '::1'):
            raise UserError(f'Serving on {host} lets other machines call every tool of the gateway: give clients '
                            'bearer tokens ("bearerTokens" in the config, or the TOOLWEAVE_GATEWAY_TOKEN environment '
                            'variable), or serve on 127.0.0.1.')
        await serve_app(http_app(self.server(), path=path, host=host, tokens=tokens), host=host, port=port,
                        on_started=on_started)

    def instructions(self) -> str:
        """What clients are told about the server: how to plan, how to search (search mode), and what each
        upstream server says about its own tools."""
        parts = [self.plan_tool.instructions()]
        if self.config.mode == 'search':
            parts.append(_SEARCH_HELP)
        for upstream in self.upstreams:
            if upstream.instructions:
                parts.append(f'# Server {upstream.name}\n{upstream.instructions.strip()}')
        return '\n\n'.join(parts)

    def listed(self) -> list[Tool]:
        """The tools `tools/list` shows clients now."""
        return list(self._listed())

    def status(self) -> list[dict[str, Any]]:
        """Each upstream server's state, tools (by the gateway's names) and log, as JSON data."""
        report = []
        for upstream in self.upstreams:
            entry = dict(upstream.status())
            entry['tools'] = sorted(self._by_key.get((upstream.name, m), m) for m in upstream.tools)
            report.append(entry)
        return report

    # --- the tools ----------------------------------------------------------------------------------------

    def _listed(self) -> Iterable[Tool]:
        if self.config.mode == 'search':
            return [self.search_tool, self.describe_tool, self.plan_tool]
        return [self.plan_tool, *self._available()]

    def _available(self) -> list[GatewayTool]:
        return [tool for tool in self.tools if isinstance(tool, GatewayTool) and tool.available]

    def _catalog(self) -> list[ToolDefinition]:
        return [tool.definition for tool in self._available()]

    def _unknown_tool(self, name: str) -> str:
        return unknown_tool_message(name, self._catalog())

    def _fallback_for(self, tool_name: str) -> ApprovalFallback:
        tool = self.tools.find(tool_name)
        if isinstance(tool, GatewayTool) and tool.upstream.config.approval_fallback is not None:
            return tool.upstream.config.approval_fallback
        return self.config.approval_fallback

    # --- limits (`Limits`) ----------------------------------------------------------------------------------

    def patience(self, tool_name: str) -> Patience:
        """A plan's questions and calls end at `planTimeout`; a single call's questions wait up to its server's
        `timeout` each."""
        if tool_name == self.plan_tool.name:
            timeout = self.config.plan_timeout
            return Patience(timeout, f'planTimeout ({timeout:g} s)' if timeout is not None else '', whole=True)
        tool = self.tools.find(tool_name)
        if isinstance(tool, GatewayTool):
            return _server_patience(tool.upstream)
        return Patience(None)

    def admit(self, tool_name: str) -> Admission:
        """A plan runs when its client runs fewer than `maxPlansPerClient`; anything else always runs."""
        if tool_name != self.plan_tool.name:
            return nullcontext()
        client = current_client()
        limit = self.config.max_plans_per_client
        if self._plans.get(client, 0) >= limit:
            return (f'Too many plans at once: this client already runs {limit} (maxPlansPerClient). Wait for one '
                    'to finish, or put more steps in one plan.')
        return self._plan_running(client)

    @contextmanager
    def _plan_running(self, client: str) -> Iterator[None]:
        self._plans[client] = self._plans.get(client, 0) + 1
        try:
            yield
        finally:
            self._plans[client] -= 1
            if not self._plans[client]:
                del self._plans[client]

    # --- changes upstream ---------------------------------------------------------------------------------

    async def _changed(self, upstream: Upstream, kind: ListKind) -> None:
        if not self._started:
            return  # named all at once when every server has started, so collisions are settled evenly
        if kind == 'tools':
            self._name_new_tools()
            await self._served.changed('tools')
        else:
            await self.features.changed(upstream, kind)

    async def _resource_updated(self, upstream: Upstream, uri: str) -> None:
        await self.features.resource_updated(upstream, uri)

    async def _unplaced(self, upstream: Upstream, question: Any) -> Any:
        """A server's question outside any client request: over stdio, the one client is asked; else nobody."""
        import mcp_types as types

        session = self._served.only_session() if self._one_client else None
        if session is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f'The gateway cannot tell which of its '
                                   f'clients this {question.method} request is for: no request of a client is in '
                                   'flight on the server.')
        return await Exchange(_Standalone(session), patience=_server_patience(upstream)).ask(question)

    def _unattributed_log(self, upstream: Upstream, params: Any) -> None:
        """A log message that belongs to no client request: over stdio, to the one client; else to the log."""
        logger.info('MCP server %r logged (%s): %s', upstream.name, params.level, params.data)
        if self._one_client:
            self._served.broadcast_log(params)

    def _name_new_tools(self) -> None:
        """Give every tool not named yet its gateway name. A name never changes once given: when two servers
        offer the same name, both are prefixed if they arrive together, and later only the newcomer is."""
        new: list[tuple[Upstream, str, str]] = []
        for upstream in self.upstreams:
            adapted = adapt_names(list(upstream.tools), 'adapt', upstream.config.label)
            new.extend((upstream, mcp_name, adapted[mcp_name]) for mcp_name in upstream.tools
                       if (upstream.name, mcp_name) not in self._by_key)
        arriving = Counter(base for _, _, base in new)
        taken = set(self._by_key.values()) | self._reserved
        for upstream, mcp_name, base in new:
            name = base
            if self.config.prefix_tools == 'always' or base in taken or arriving[base] > 1:
                name = _fit(f'{upstream.config.tool_prefix}_{base}')
            if name in taken:
                name = _fit(name, f'{upstream.name}/{mcp_name}', force=True)
            taken.add(name)
            self._by_key[(upstream.name, mcp_name)] = name
            self.tools.add(GatewayTool(name, upstream, mcp_name))
            if name != mcp_name:
                logger.info('Tool %r of MCP server %r is offered as %r', mcp_name, upstream.name, name)


def _server_patience(upstream: Upstream) -> Patience:
    timeout = upstream.config.timeout
    return Patience(timeout, f'the timeout of MCP server {upstream.name!r} ({timeout:g} s)' if timeout else '')


def _matches(patterns: Iterable[str], mcp_name: str) -> bool:
    return any(fnmatchcase(mcp_name, pattern) for pattern in patterns)


@dataclass(frozen=True)
class _Standalone:
    """A request context for questions that belong to no request: asked on the connection's own channel."""

    session: Any
    request_id: None = None
    meta: None = None


class _GatewayPlanTool(PlanTool):
    """The gateway's `execute_tool_plan`: while it runs, the request's progress is the plan's (`PlanProgress`)."""

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        exchange = current_exchange()
        if exchange is not None:
            exchange.plan = PlanProgress(exchange, _step_count(arguments))
        try:
            return await super().execute(arguments, context)
        finally:
            if exchange is not None:
                exchange.plan = None


def _step_count(arguments: ToolArguments) -> int:
    try:
        data = load_arguments(arguments, 'execute_tool_plan')
    except Exception:  # the plan tool says what is wrong with them
        return 1
    steps = data.get('steps')
    return len(steps) if isinstance(steps, list) and steps else 1


def _plan_event(event: PlanEvent) -> None:
    exchange = current_exchange()
    if exchange is not None and exchange.plan is not None and event.kind == 'step_finished':
        exchange.plan.step_finished(event.step.id)


def _fit(name: str, seed: str | None = None, *, force: bool = False) -> str:
    """`name` within 64 characters: a long one (or any, with `force`) is cut and ends with a short hash."""
    if len(name) <= 64 and not force:
        return name
    digest = hashlib.sha1((seed or name).encode()).hexdigest()[:8]
    return f'{name[:55]}_{digest}'


def _check_prefixes(servers: Iterable[ServerConfig]) -> None:
    seen: dict[str, str] = {}
    for server in servers:
        other = seen.setdefault(server.tool_prefix, server.name)
        if other != server.name:
            raise UserError(f'MCP servers {other!r} and {server.name!r} would both prefix their tool names with '
                            f'{server.tool_prefix!r}. Give one of them its own: "toolweave": {{"prefix": "..."}}.')
