"""`ToolServer`: the request handlers of an MCP server in front of toolweave tools.

It lists tools as faithfully as it knows them (an MCP tool's own listing, name aside), calls them through
`Tool.call` with the request's `_meta` as the context, asks the client for approvals (see `_approvals`), turns
results into MCP results (see `_results`), and tells clients when a list changes: a `notifications/.../list_changed`
on connections with the initialize handshake, a `subscriptions/listen` event on 2026-07-28 connections.

Each request that may need its client while it runs (a tool call; a prompt or a resource read that an `Extension`
serves) runs through `interactive`, with an `Exchange` (see `_relay`): on 2026-07-28 connections as paused work
when the client can answer questions, else inline. An `Extension` (the gateway's upstream features) adds its own
handlers and capabilities to the server.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from typing import Any, Literal, Protocol, TypeAlias, TypeVar

from toolweave.approval import ReviewHandler, current_review_handlers, use_review_handler
from toolweave.exceptions import ToolweaveError, UserError
from toolweave.mcp._approvals import ApprovalFallback, ExchangeReviewer, FallbackReviewer, can_elicit
from toolweave.mcp._content import annotations_of
from toolweave.mcp._http import current_client
from toolweave.mcp._meta import context_from_meta
from toolweave.mcp._relay import LOG_LEVELS, NO_LIMIT, Exchange, Patience, PausedCalls, Questions
from toolweave.mcp._results import ContentLog, call_result, collecting_content, strip_reserved_meta
from toolweave.tools._context import ToolCallContext
from toolweave.tools._definition import ToolDefinition
from toolweave.tools._result import ToolResult
from toolweave.tools._tool import Tool
from toolweave.tools._toolset import Toolset

__all__ = ('Admission', 'ChangeKind', 'Extension', 'Limits', 'ToolServer')

T = TypeVar('T')

logger = logging.getLogger('toolweave.mcp')

_MAX_LEGACY_SESSIONS = 256

_PAUSED = 'toolweave.paused_calls'
_Ran = tuple[ToolResult, ContentLog]
"""A call's result and the content blocks its MCP tools returned."""

ChangeKind: TypeAlias = Literal['tools', 'prompts', 'resources']
Admission: TypeAlias = AbstractContextManager[None] | str
"""What `Limits.admit` gives: a context held while the call runs, or why the call is refused."""


class Limits(Protocol):
    """How long a served call waits for its client, and whether it may start now."""

    def patience(self, tool_name: str) -> Patience:
        """How long a call of `tool_name` waits for its client's answers."""
        ...

    def admit(self, tool_name: str) -> Admission:
        """A context to hold while the call runs, or a message saying why it may not run now."""
        ...


class _NoLimits:
    def patience(self, tool_name: str) -> Patience:
        return NO_LIMIT

    def admit(self, tool_name: str) -> Admission:
        return nullcontext()


class Extension(Protocol):
    """More than tools: handlers a server adds (prompts, resources, completions, logging) and the capabilities it
    declares for them."""

    def register(self, server: Any, serving: ToolServer) -> None:
        """Add request handlers to the SDK `server`."""
        ...

    def capabilities(self, capabilities: Any) -> Any:
        """The `ServerCapabilities` to declare, from those the handlers give."""
        ...


class ToolServer:
    """Serves `tools` over MCP.

    Args:
        tools: the tools clients may call, looked up by name at call time (tools added later are served too).
        front: tools served before `tools` (the plan tool, a gateway's search tools); their names win.
        listed: the tools `tools/list` shows (default: `front`, then every tool of `tools`); a gateway in search
            mode lists a few while more can be called.
        review_handler: decides approvals on the server side; `None` asks the client (see `_approvals`).
        approval_fallback: what a call that needs approval gets when the client cannot be asked (`'deny'` or
            `'allow'`, or a function of the tool's name giving one).
        announces: the lists whose changes the server tells clients about (`changed`).
        limits: per call, how long it may wait for its client and whether it may start.
        extension: handlers and capabilities beyond tools.
        unknown_tool: the error message for a call of a tool it does not have (default: the name and every
            tool's name); a gateway in search mode names the closest few instead of its whole catalogue.
    """

    def __init__(self, tools: Toolset, *, front: Sequence[Tool] = (),
                 listed: Callable[[], Iterable[Tool]] | None = None,
                 review_handler: ReviewHandler | None = None,
                 approval_fallback: ApprovalFallback | Callable[[str], ApprovalFallback] = 'deny',
                 announces: Iterable[ChangeKind] = (), limits: Limits | None = None,
                 extension: Extension | None = None, unknown_tool: Callable[[str], str] | None = None) -> None:
        if not callable(approval_fallback) and approval_fallback not in ('deny', 'allow'):
            raise UserError(f"approval_fallback must be 'deny' or 'allow', got {approval_fallback!r}.")
        self.tools = tools
        self._front = {tool.name: tool for tool in front}
        self._listed = listed or (lambda: [*front, *tools.tools])
        self._review_handler = review_handler
        self._fallback = FallbackReviewer(approval_fallback)
        self._announces = frozenset(announces)
        self._limits: Limits = limits or _NoLimits()
        self._extension = extension
        self._unknown_tool = unknown_tool
        self._legacy_sessions: dict[int, tuple[Any, Any]] = {}
        self._log_levels: dict[int, int] = {}
        self._bus: Any = None
        self._tasks: Any = None

    def server(self, *, name: str, version: str, instructions: str | None) -> Any:
        """A new SDK low-level `Server` with these handlers."""
        from mcp.server.lowlevel import NotificationOptions, Server
        from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler

        announces = self._announces
        extension = self._extension

        class _Server(Server[Any]):
            def create_initialization_options(self, notification_options: Any = None, *args: Any,
                                              **kwargs: Any) -> Any:
                # Every transport builds its handshake answer here; it says whether list changes are announced.
                options = notification_options or NotificationOptions(
                    tools_changed='tools' in announces, prompts_changed='prompts' in announces,
                    resources_changed='resources' in announces)
                return super().create_initialization_options(options, *args, **kwargs)

            def get_capabilities(self, *args: Any, **kwargs: Any) -> Any:
                capabilities = super().get_capabilities(*args, **kwargs)
                return capabilities if extension is None else extension.capabilities(capabilities)

        listen = None
        if announces:
            self._bus = InMemorySubscriptionBus()
            listen = ListenHandler(self._bus)
        server = _Server(name, version=version, instructions=instructions, lifespan=self._lifespan,
                         on_list_tools=self._list_tools, on_call_tool=self._call_tool, on_subscriptions_listen=listen)
        server.middleware.append(self._observe)
        if extension is not None:
            extension.register(server, self)
        return server

    async def _observe(self, ctx: Any, call_next: Any) -> Any:
        """Middleware: note each handshake connection as soon as it is initialized."""
        result = await call_next(ctx)
        self._remember_session(ctx)
        return result

    async def changed(self, kind: ChangeKind) -> None:
        """Tell every connected client that a list changed (when the server announces changes of that list)."""
        if kind not in self._announces:
            return
        from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged

        event = {'tools': ToolsListChanged, 'prompts': PromptsListChanged, 'resources': ResourcesListChanged}[kind]
        if self._bus is not None:
            await self._bus.publish(event())
        for _, session in list(self._legacy_sessions.values()):
            try:
                await getattr(session, f'send_{kind[:-1]}_list_changed')()
            except Exception as exc:  # a client that went away must not stop the others from hearing
                logger.debug('Could not tell an MCP client that the %s changed: %r', kind, exc)

    async def tools_changed(self) -> None:
        await self.changed('tools')

    async def resource_updated(self, uri: str, sessions: Iterable[Any]) -> None:
        """Tell the clients subscribed to `uri` that it changed: 2026-07-28 listeners, and `sessions` (the
        handshake connections that subscribed)."""
        from mcp.shared.subscriptions import ResourceUpdated

        if self._bus is not None:
            await self._bus.publish(ResourceUpdated(uri))
        for session in sessions:
            try:
                await session.send_resource_updated(uri)
            except Exception as exc:
                logger.debug('Could not tell an MCP client that %s changed: %r', uri, exc)

    @asynccontextmanager
    async def _lifespan(self, server: Any) -> AsyncIterator[dict[str, Any]]:
        import anyio

        # Each run of the server (a stdio session, an HTTP app, an in-process client) holds its own paused calls.
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            try:
                yield {_PAUSED: PausedCalls[Any](tasks)}
            finally:
                tasks.cancel_scope.cancel()

    async def _list_tools(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        return types.ListToolsResult(tools=[mcp_tool(types, tool.definition) for tool in self._listed()])

    # --- requests that may need their client --------------------------------------------------------------

    async def interactive(self, ctx: Any, key: str, params: Any, work: Callable[[Exchange], Awaitable[T]], *,
                          patience: Patience = NO_LIMIT) -> T | Any:
        """Run `work` for the request `ctx` with its `Exchange`: its result, or an `InputRequiredResult` when it
        stopped at questions (2026-07-28). `key` binds a paused request to its repetitions (method and name);
        `params` may carry a repetition's `request_state` and `input_responses`."""
        import mcp_types as types
        from mcp import MCPError
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        lifespan = ctx.lifespan_context
        paused: PausedCalls[T] | None = lifespan.get(_PAUSED) if isinstance(lifespan, dict) else None
        state = getattr(params, 'request_state', None)
        if state is not None:
            outcome = None if paused is None else await paused.resume(
                state, key, getattr(params, 'input_responses', None), ctx)
            if outcome is None:
                raise MCPError(types.INVALID_PARAMS, f'No request {key!r} is waiting for answers under this request '
                               'state (it finished, expired, or the server restarted). Send the request again.')
            return _answer(types, outcome)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        client = (current_client(), None if modern else _session_key(ctx))
        exchange = Exchange(ctx, patience=patience, client=client)
        exchange.log_level = self._log_levels.get(_session_key(ctx), 0)
        if modern and paused is not None and _can_be_asked(ctx.session.client_capabilities):
            if paused.full:
                raise MCPError(types.INTERNAL_ERROR, f'The server holds {paused.limit} requests waiting for their '
                               'clients already. Try again when some have been answered.')
            return _answer(types, await paused.start(key, exchange, lambda: work(exchange)))
        async with exchange.serving():
            return await work(exchange)

    async def _call_tool(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types
        from mcp import MCPError
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        key = f'tools/call {params.name}'
        if params.request_state is not None:
            return self._outcome(types, await self.interactive(ctx, key, params, _repeated), modern)
        tool = self._front.get(params.name) or self.tools.find(params.name)
        if tool is None:
            if self._unknown_tool is not None:
                raise MCPError(types.INVALID_PARAMS, self._unknown_tool(params.name))
            available = ', '.join([*self._front, *self.tools.names]) or '(none)'
            raise MCPError(types.INVALID_PARAMS, f'Unknown tool {params.name!r}. Available tools: {available}.')
        admission = self._limits.admit(tool.name)
        if isinstance(admission, str):
            return types.CallToolResult(content=[types.TextContent(text=admission)], is_error=True)
        context = context_from_meta(params.meta)
        installed = current_review_handlers()  # reviewers installed where the server runs decide, not the client
        handler = self._review_handler or (installed[-1] if installed else None)

        async def work(exchange: Exchange) -> _Ran:
            reviewer = handler or (ExchangeReviewer(exchange) if can_elicit(exchange.capabilities) else
                                   self._fallback)
            with use_review_handler(reviewer):
                return await self._run(tool, params.arguments, context)

        with admission:
            outcome = await self.interactive(ctx, key, params, work, patience=self._limits.patience(tool.name))
        return self._outcome(types, outcome, modern)

    async def _run(self, tool: Tool, arguments: Any, context: ToolCallContext) -> _Ran:
        with collecting_content() as content_log:
            try:
                result = await tool.call(arguments, context)
            except ToolweaveError as exc:  # configuration errors and control-flow signals: tell the client, stay up
                logger.warning('MCP call of %r stopped by %s: %s', tool.name, type(exc).__name__, exc)
                result = ToolResult.failure(f'{type(exc).__name__}: {exc}')
        return result, content_log

    @staticmethod
    def _outcome(types: Any, outcome: Any, modern: bool) -> Any:
        if isinstance(outcome, types.InputRequiredResult):
            return outcome
        result, content_log = outcome
        return call_result(result, any_json=modern, content_log=content_log)

    # --- connections --------------------------------------------------------------------------------------

    def broadcast_log(self, params: Any) -> None:
        """Send a log message to every handshake connection whose level allows it (a gateway over stdio: its one
        client), without waiting."""
        level = LOG_LEVELS.index(params.level)
        for key, (_, session) in list(self._legacy_sessions.items()):
            if level >= self._log_levels.get(key, 0) and self._tasks is not None:
                try:
                    self._tasks.start_soon(_send_log, session, params)
                except RuntimeError:  # that run of the server has ended
                    return

    def only_session(self) -> Any:
        """The session of the one handshake connection, when there is exactly one (else `None`)."""
        sessions = list(self._legacy_sessions.values())
        return sessions[0][1] if len(sessions) == 1 else None

    def set_log_level(self, ctx: Any, level: str) -> None:
        """Remember the lowest log level a handshake connection wants (`logging/setLevel`)."""
        key = _session_key(ctx)
        if len(self._log_levels) >= _MAX_LEGACY_SESSIONS and key not in self._log_levels:
            self._log_levels.pop(next(iter(self._log_levels)))
        self._log_levels[key] = LOG_LEVELS.index(level)

    def _remember_session(self, ctx: Any) -> None:
        """Keep one session per connection with the initialize handshake, to announce list changes on it."""
        if not self._announces:
            return
        params = ctx.session.client_params
        if params is None or id(params) in self._legacy_sessions:
            return
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        if len(self._legacy_sessions) >= _MAX_LEGACY_SESSIONS:
            self._legacy_sessions.pop(next(iter(self._legacy_sessions)))
        # The client's initialize params are one object per connection: their identity tells connections apart.
        self._legacy_sessions[id(params)] = (params, ctx.session)


async def _repeated(exchange: Exchange) -> Any:
    raise AssertionError('a repeated request never starts new work')


async def _send_log(session: Any, params: Any) -> None:
    import warnings

    from mcp.shared.exceptions import MCPDeprecationWarning

    with warnings.catch_warnings():  # logging is deprecated in 2026-07-28, and still how servers log
        warnings.simplefilter('ignore', MCPDeprecationWarning)
        try:
            await session.send_log_message(params.level, params.data, params.logger)
        except Exception as exc:  # a client that went away
            logger.debug('Could not pass a log message to an MCP client: %r', exc)


def _answer(types: Any, outcome: Any) -> Any:
    if isinstance(outcome, Questions):
        return types.InputRequiredResult(input_requests=outcome.input_requests, request_state=outcome.request_state)
    return outcome


def _session_key(ctx: Any) -> int:
    """Which handshake connection a request came on (the identity of its initialize params)."""
    return id(ctx.session.client_params)


def _can_be_asked(capabilities: Any) -> bool:
    """Whether a 2026-07-28 client can answer any question (elicitation, sampling, roots)."""
    return capabilities is not None and any(getattr(capabilities, name, None) is not None
                                            for name in ('elicitation', 'sampling', 'roots'))


def mcp_tool(types: Any, definition: ToolDefinition) -> Any:
    """The MCP `Tool` for a definition: an MCP tool's own listing (under the definition's name, description and
    schema) when the definition carries one, else one built from the definition and its hints."""
    raw = definition.metadata.extra.get('mcp_tool')
    if isinstance(raw, types.Tool):
        # `execution` asks for task-augmented calls: a server in front of the tool makes those calls itself.
        return raw.model_copy(update={'name': definition.name, 'description': definition.description or None,
                                      'input_schema': dict(definition.parameters), 'execution': None,
                                      'meta': strip_reserved_meta(raw.meta)})
    hints = annotations_of(definition.metadata)
    return types.Tool(name=definition.name, description=definition.description or None,
                      input_schema=dict(definition.parameters),
                      annotations=types.ToolAnnotations(**hints) if hints else None)
