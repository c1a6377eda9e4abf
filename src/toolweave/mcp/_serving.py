"""`ToolServer`: the request handlers of an MCP server in front of toolweave tools.

It lists tools as faithfully as it knows them (an MCP tool's own listing, name aside), calls them through
`Tool.call` with the request's `_meta` as the context, asks the client for approvals (see `_approvals`), turns
results into MCP results (see `_results`), and tells clients when the tool list changes: a
`notifications/tools/list_changed` on connections with the initialize handshake, a `subscriptions/listen` event
on 2026-07-28 connections.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from toolweave.approval import ReviewHandler, current_review_handlers, use_review_handler
from toolweave.exceptions import ToolweaveError, UserError
from toolweave.mcp._approvals import (
    ApprovalFallback,
    ElicitingReviewer,
    FallbackReviewer,
    PausedCalls,
    Questions,
    can_elicit,
)
from toolweave.mcp._content import annotations_of
from toolweave.mcp._meta import context_from_meta
from toolweave.mcp._results import ContentLog, call_result, collecting_content, strip_reserved_meta
from toolweave.tools._context import ToolCallContext
from toolweave.tools._definition import ToolDefinition
from toolweave.tools._result import ToolResult
from toolweave.tools._tool import Tool
from toolweave.tools._toolset import Toolset

__all__ = ('ToolServer',)

logger = logging.getLogger('toolweave.mcp')

_MAX_LEGACY_SESSIONS = 256

_PAUSED = 'toolweave.paused_calls'
_Ran = tuple[ToolResult, ContentLog]
"""A call's result and the content blocks its MCP tools returned."""


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
        announces_changes: whether the server tells clients when its tool list changes (`tools_changed`).
        unknown_tool: the error message for a call of a tool it does not have (default: the name and every
            tool's name); a gateway in search mode names the closest few instead of its whole catalogue.
    """

    def __init__(self, tools: Toolset, *, front: Sequence[Tool] = (),
                 listed: Callable[[], Iterable[Tool]] | None = None,
                 review_handler: ReviewHandler | None = None,
                 approval_fallback: ApprovalFallback | Callable[[str], ApprovalFallback] = 'deny',
                 announces_changes: bool = False, unknown_tool: Callable[[str], str] | None = None) -> None:
        if not callable(approval_fallback) and approval_fallback not in ('deny', 'allow'):
            raise UserError(f"approval_fallback must be 'deny' or 'allow', got {approval_fallback!r}.")
        self.tools = tools
        self._front = {tool.name: tool for tool in front}
        self._listed = listed or (lambda: [*front, *tools.tools])
        self._review_handler = review_handler
        self._fallback = FallbackReviewer(approval_fallback)
        self._announces = announces_changes
        self._unknown_tool = unknown_tool
        self._legacy_sessions: dict[int, tuple[Any, Any]] = {}
        self._bus: Any = None

    def server(self, *, name: str, version: str, instructions: str | None) -> Any:
        """A new SDK low-level `Server` with these handlers."""
        from mcp.server.lowlevel import NotificationOptions, Server
        from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler

        announces = self._announces

        class _Server(Server[Any]):
            def create_initialization_options(self, notification_options: Any = None, *args: Any,
                                              **kwargs: Any) -> Any:
                # Every transport builds its handshake answer here; it says whether list changes are announced.
                options = notification_options or NotificationOptions(tools_changed=announces)
                return super().create_initialization_options(options, *args, **kwargs)

        listen = None
        if announces:
            self._bus = InMemorySubscriptionBus()
            listen = ListenHandler(self._bus)
        server = _Server(name, version=version, instructions=instructions, lifespan=self._lifespan,
                         on_list_tools=self._list_tools, on_call_tool=self._call_tool, on_subscriptions_listen=listen)
        if announces:
            server.middleware.append(self._observe)
        return server

    async def _observe(self, ctx: Any, call_next: Any) -> Any:
        """Middleware: note each handshake connection as soon as it is initialized."""
        result = await call_next(ctx)
        self._remember_session(ctx)
        return result

    async def tools_changed(self) -> None:
        """Tell every connected client that the tool list changed (when the server announces changes)."""
        if not self._announces:
            return
        from mcp.shared.subscriptions import ToolsListChanged

        if self._bus is not None:
            await self._bus.publish(ToolsListChanged())
        for _, session in list(self._legacy_sessions.values()):
            try:
                await session.send_tool_list_changed()
            except Exception as exc:  # a client that went away must not stop the others from hearing
                logger.debug('Could not tell an MCP client that the tools changed: %r', exc)

    @asynccontextmanager
    async def _lifespan(self, server: Any) -> AsyncIterator[dict[str, Any]]:
        import anyio

        # Each run of the server (a stdio session, an HTTP app, an in-process client) holds its own paused calls.
        async with anyio.create_task_group() as tasks:
            try:
                yield {_PAUSED: PausedCalls(tasks, failed=lambda message: (ToolResult.failure(message), []))}
            finally:
                tasks.cancel_scope.cancel()

    async def _list_tools(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        return types.ListToolsResult(tools=[mcp_tool(types, tool.definition) for tool in self._listed()])

    async def _call_tool(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types
        from mcp import MCPError
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        lifespan = ctx.lifespan_context
        paused: PausedCalls[_Ran] | None = lifespan.get(_PAUSED) if isinstance(lifespan, dict) else None
        if params.request_state is not None:
            outcome = None if paused is None else await paused.resume(
                params.request_state, params.name, params.input_responses)
            if outcome is None:
                raise MCPError(types.INVALID_PARAMS, f'No call of {params.name!r} is waiting for answers under this '
                               'request state (it finished, expired, or the server restarted). Call the tool again.')
            return self._outcome(types, outcome, modern)
        tool = self._front.get(params.name) or self.tools.find(params.name)
        if tool is None:
            if self._unknown_tool is not None:
                raise MCPError(types.INVALID_PARAMS, self._unknown_tool(params.name))
            available = ', '.join([*self._front, *self.tools.names]) or '(none)'
            raise MCPError(types.INVALID_PARAMS, f'Unknown tool {params.name!r}. Available tools: {available}.')
        context = context_from_meta(params.meta)
        installed = current_review_handlers()  # reviewers installed where the server runs decide, not the client
        handler = self._review_handler or (installed[-1] if installed else None)
        capabilities = ctx.session.client_capabilities
        if handler is None and modern and can_elicit(capabilities) and paused is not None:
            outcome = await paused.start(params.name, lambda: self._run(tool, params.arguments, context))
            return self._outcome(types, outcome, modern)
        if handler is None:
            can_ask = can_elicit(capabilities) and ctx.session.can_send_request
            handler = ElicitingReviewer(ctx.session, ctx.request_id) if can_ask else self._fallback
        with use_review_handler(handler):
            result = await self._run(tool, params.arguments, context)
        return self._outcome(types, result, modern)

    async def _run(self, tool: Tool, arguments: Any, context: ToolCallContext) -> _Ran:
        with collecting_content() as content_log:
            try:
                result = await tool.call(arguments, context)
            except ToolweaveError as exc:  # configuration errors and control-flow signals: tell the client, stay up
                logger.warning('MCP call of %r stopped by %s: %s', tool.name, type(exc).__name__, exc)
                result = ToolResult.failure(f'{type(exc).__name__}: {exc}')
        return result, content_log

    @staticmethod
    def _outcome(types: Any, outcome: _Ran | Questions, modern: bool) -> Any:
        if isinstance(outcome, Questions):
            return types.InputRequiredResult(input_requests=outcome.input_requests,
                                             request_state=outcome.request_state)
        result, content_log = outcome
        return call_result(result, any_json=modern, content_log=content_log)

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


def mcp_tool(types: Any, definition: ToolDefinition) -> Any:
    """The MCP `Tool` for a definition: an MCP tool's own listing (under the definition's name, description and
    schema) when the definition carries one, else one built from the definition and its hints."""
    raw = definition.metadata.extra.get('mcp_tool')
    if isinstance(raw, types.Tool):
        # `execution` asks for task-augmented calls, which a server in front of the tool does not offer.
        return raw.model_copy(update={'name': definition.name, 'description': definition.description or None,
                                      'input_schema': dict(definition.parameters), 'execution': None,
                                      'meta': strip_reserved_meta(raw.meta)})
    hints = annotations_of(definition.metadata)
    return types.Tool(name=definition.name, description=definition.description or None,
                      input_schema=dict(definition.parameters),
                      annotations=types.ToolAnnotations(**hints) if hints else None)
