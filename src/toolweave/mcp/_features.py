"""The gateway's upstream features beyond tools: prompts, resources, resource templates, completions, logging.

`UpstreamFeatures` is the `Extension` the gateway's server gets (see `_serving`). It lists what every upstream
server offers as one list per kind, each item under its own name (a prompt's name, a resource's URI, a template's
URI template), changed only when two servers offer the same one: then the newcomer's prompt becomes
`<prefix>_<name>`, and its resource URI or template gets its prefix in front of the scheme
(`<prefix>+demo://doc`, a URI of its own). A name never changes while the gateway runs.

Requests go to the server that owns the name: `prompts/get` and `completion/complete` by the prompt's name or the
template's URI template; `resources/read` by the URI's owner, found in this order: the resources servers list, the
links and embedded resources a server's tool results carried (so a link a proxied tool returned can be read), the
servers' templates, and the only server that offers resources. Prompts and reads run like tool calls (questions
from the server reach the client, within the server's `timeout`). Resource subscriptions are passed on to servers
with the initialize handshake. The gateway declares each capability that one of its servers has.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from toolweave.mcp._meta import McpMetaConverter, context_from_meta, meta_for_call
from toolweave.mcp._relay import Patience
from toolweave.mcp._upstream import ListKind, Upstream

if TYPE_CHECKING:
    from toolweave.mcp._relay import Exchange
    from toolweave.mcp._serving import ToolServer

__all__ = ('UpstreamFeatures',)

logger = logging.getLogger('toolweave.mcp.gateway')

_MAX_SUBSCRIBERS = 256
"""Sessions kept per subscribed resource (the oldest is forgotten first)."""
_KEYS: dict[ListKind, str] = {'prompts': 'name', 'resources': 'uri', 'resource_templates': 'uri_template'}


class UpstreamFeatures:
    """Prompts, resources, templates, completions and logging of `upstreams`, served as one server's."""

    def __init__(self, upstreams: Iterable[Upstream], *, on_unattributed_log: Callable[[Any], None] | None = None,
                 ) -> None:
        self.upstreams = list(upstreams)
        self._names: dict[ListKind, dict[tuple[str, str], str]] = {kind: {} for kind in _KEYS}
        self._owners: dict[ListKind, dict[str, tuple[Upstream, str]]] = {kind: {} for kind in _KEYS}
        self._serving: ToolServer | None = None
        self._subscribers: dict[str, dict[int, Any]] = {}
        self._on_unattributed_log = on_unattributed_log

    # --- names --------------------------------------------------------------------------------------------

    def name_all(self) -> None:
        """Give every item not named yet its name (see the module docstring)."""
        for kind in _KEYS:
            self._name_new(kind)

    def _name_new(self, kind: ListKind) -> None:
        names, owners = self._names[kind], self._owners[kind]
        arriving: dict[str, int] = {}
        new: list[tuple[Upstream, str]] = []
        for upstream in self.upstreams:
            for key in getattr(upstream.offer, kind):
                if (upstream.name, key) not in names:
                    new.append((upstream, key))
                    arriving[key] = arriving.get(key, 0) + 1
        for upstream, key in new:
            name = key
            if name in owners or arriving[key] > 1:
                name = _prefixed(kind, upstream.config.tool_prefix, key)
            if name in owners:  # a prefixed name taken too: the server's own name disambiguates
                name = _prefixed(kind, f'{upstream.config.tool_prefix}-{len(owners)}', key)
            names[(upstream.name, key)] = name
            owners[name] = (upstream, key)
            if name != key:
                logger.info('%s %r of MCP server %r is offered as %r', kind[:-1].capitalize(), key, upstream.name,
                            name)

    def _listed(self, kind: ListKind) -> list[tuple[str, Any]]:
        """(name, item) of every item the servers offer now, in the servers' order."""
        names = self._names[kind]
        listed = []
        for upstream in self.upstreams:
            for key, item in getattr(upstream.offer, kind).items():
                name = names.get((upstream.name, key))
                if name is not None:
                    listed.append((name, item))
        return listed

    async def changed(self, upstream: Upstream, kind: ListKind) -> None:
        """A server's list changed: name the newcomers and tell the clients."""
        if kind == 'tools':
            return
        self._name_new(kind)
        if self._serving is not None:
            await self._serving.changed('resources' if kind == 'resource_templates' else kind)

    # --- the server ---------------------------------------------------------------------------------------

    def capabilities(self, capabilities: Any) -> Any:
        """The gateway's capabilities: a feature is declared when one of its servers has it."""
        import mcp_types as types

        offered = [u.capabilities for u in self.upstreams if u.capabilities is not None]
        update: dict[str, Any] = {}
        if not any(c.prompts is not None for c in offered):
            update['prompts'] = None
        if not any(c.resources is not None for c in offered):
            update['resources'] = None
        elif capabilities.resources is not None:
            subscribe = any(c.resources is not None and c.resources.subscribe for c in offered)
            update['resources'] = capabilities.resources.model_copy(update={'subscribe': bool(
                subscribe and capabilities.resources.subscribe is not False)})
        if not any(c.completions is not None for c in offered):
            update['completions'] = None
        update['logging'] = types.LoggingCapability() if any(c.logging is not None for c in offered) else None
        return capabilities.model_copy(update=update)

    def register(self, server: Any, serving: ToolServer) -> None:
        import mcp_types as types

        self._serving = serving
        handlers: list[tuple[str, Any, Any]] = [
            ('prompts/list', types.PaginatedRequestParams, self._list_prompts),
            ('prompts/get', types.GetPromptRequestParams, self._get_prompt),
            ('resources/list', types.PaginatedRequestParams, self._list_resources),
            ('resources/templates/list', types.PaginatedRequestParams, self._list_templates),
            ('resources/read', types.ReadResourceRequestParams, self._read_resource),
            ('resources/subscribe', types.SubscribeRequestParams, self._subscribe),
            ('resources/unsubscribe', types.UnsubscribeRequestParams, self._unsubscribe),
            ('completion/complete', types.CompleteRequestParams, self._complete),
            ('logging/setLevel', types.SetLevelRequestParams, self._set_level),
        ]
        for method, params_type, handler in handlers:
            server.add_request_handler(method, params_type, handler)
        server.add_notification_handler('notifications/roots/list_changed', types.NotificationParams,
                                        self._roots_changed)

    async def _roots_changed(self, ctx: Any, params: Any) -> None:
        """The client's roots changed: every server hears it (and may ask for them again)."""
        for upstream in self.upstreams:
            await upstream.roots_changed()

    async def _list_prompts(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        return types.ListPromptsResult(prompts=[prompt.model_copy(update={'name': name})
                                                for name, prompt in self._listed('prompts')])

    async def _list_resources(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        return types.ListResourcesResult(resources=[resource.model_copy(update={'uri': name})
                                                    for name, resource in self._listed('resources')])

    async def _list_templates(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        listed = self._listed('resource_templates')
        return types.ListResourceTemplatesResult(resource_templates=[
            template.model_copy(update={'uri_template': name}) for name, template in listed])

    async def _get_prompt(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types
        from mcp import MCPError

        assert self._serving is not None
        key = f'prompts/get {params.name}'
        if params.request_state is not None:
            return await self._serving.interactive(ctx, key, params, _repeated)
        owner = self._owners['prompts'].get(params.name)
        if owner is None:
            known = ', '.join(name for name, _ in self._listed('prompts')) or '(none)'
            raise MCPError(types.INVALID_PARAMS, f'Unknown prompt {params.name!r}. Prompts: {known}.')
        upstream, mcp_name = owner
        meta = _meta(upstream, params)

        async def work(exchange: Exchange) -> Any:
            return await upstream.request(f'Prompt {params.name!r}', lambda client: client.get_prompt(
                mcp_name, params.arguments, meta=meta))

        return await self._serving.interactive(ctx, key, params, work, patience=_patience(upstream))

    async def _read_resource(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types
        from mcp import MCPError

        assert self._serving is not None
        uri = str(params.uri)
        key = f'resources/read {uri}'
        if params.request_state is not None:
            return await self._serving.interactive(ctx, key, params, _repeated)
        owner = self.owner_of(uri)
        if owner is None:
            raise MCPError(types.INVALID_PARAMS, f'No server of the gateway offers the resource {uri!r}. List them '
                           'with resources/list, or read a link a tool returned.')
        upstream, original = owner
        meta = _meta(upstream, params)

        async def work(exchange: Exchange) -> Any:
            result = await upstream.request(f'Resource {uri!r}', lambda client: client.read_resource(
                original, meta=meta, cache_mode='bypass'))
            if original == uri:
                return result
            return result.model_copy(update={'contents': [content.model_copy(update={'uri': uri})
                                                          if str(content.uri) == original else content
                                                          for content in result.contents]})

        return await self._serving.interactive(ctx, key, params, work, patience=_patience(upstream))

    def owner_of(self, uri: str) -> tuple[Upstream, str] | None:
        """The server a resource URI belongs to, and its URI there (see the module docstring)."""
        from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

        listed = self._owners['resources'].get(uri)
        if listed is not None:
            return listed
        for upstream in self.upstreams:
            if upstream.returned(uri):
                return upstream, uri
        for name, (upstream, template) in self._owners['resource_templates'].items():
            try:
                if UriTemplate.parse(name).match(uri) is not None:
                    return upstream, uri if name == template else _unprefixed(uri)
            except InvalidUriTemplate:
                continue
        offering = [u for u in self.upstreams if u.capabilities is not None and u.capabilities.resources]
        return (offering[0], uri) if len(offering) == 1 else None

    async def _complete(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types
        from mcp import MCPError

        ref = params.ref
        if isinstance(ref, types.PromptReference):
            owner = self._owners['prompts'].get(ref.name)
            if owner is None:
                raise MCPError(types.INVALID_PARAMS, f'Unknown prompt {ref.name!r}.')
            upstream, mcp_name = owner
            their_ref: Any = ref.model_copy(update={'name': mcp_name})
        else:
            found = self._owners['resource_templates'].get(ref.uri)
            if found is None:
                raise MCPError(types.INVALID_PARAMS, f'Unknown resource template {ref.uri!r}.')
            upstream, template = found
            their_ref = ref.model_copy(update={'uri': template})
        context = params.context.arguments if params.context is not None else None
        argument = {'name': params.argument.name, 'value': params.argument.value}
        return await upstream.request('Completion', lambda client: client.complete(their_ref, argument, context))

    async def _subscribe(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types
        from mcp import MCPError

        uri = str(params.uri)
        owner = self.owner_of(uri)
        if owner is None:
            raise MCPError(types.INVALID_PARAMS, f'No server of the gateway offers the resource {uri!r}.')
        upstream, original = owner
        sessions = self._subscribers.setdefault(uri, {})
        if len(sessions) >= _MAX_SUBSCRIBERS:  # clients that left without unsubscribing make room
            sessions.pop(next(iter(sessions)))
        sessions[id(ctx.session.client_params)] = ctx.session
        await upstream.request(f'Subscription to {uri!r}', lambda client: _deprecated(client.subscribe_resource,
                                                                                      original))
        return types.EmptyResult()

    async def _unsubscribe(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        uri = str(params.uri)
        sessions = self._subscribers.get(uri, {})
        sessions.pop(id(ctx.session.client_params), None)
        owner = self.owner_of(uri)
        if not sessions and owner is not None:
            self._subscribers.pop(uri, None)
            upstream, original = owner
            await upstream.request(f'Unsubscription from {uri!r}', lambda client: _deprecated(
                client.unsubscribe_resource, original))
        return types.EmptyResult()

    async def resource_updated(self, upstream: Upstream, uri: str) -> None:
        """A server says a resource changed: tell the clients that subscribed to it."""
        name = self._names['resources'].get((upstream.name, uri), uri)
        if self._serving is not None:
            await self._serving.resource_updated(name, list(self._subscribers.get(name, {}).values()))

    async def _set_level(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        assert self._serving is not None
        self._serving.set_log_level(ctx, params.level)
        return types.EmptyResult()


async def _repeated(exchange: Exchange) -> Any:
    raise AssertionError('a repeated request never starts new work')


def _prefixed(kind: ListKind, prefix: str, key: str) -> str:
    if kind == 'prompts':
        return f'{prefix}_{key}'
    scheme_safe = ''.join(c if c.isalnum() or c in '+-.' else '-' for c in prefix)
    return f'{scheme_safe}+{key}'


def _unprefixed(uri: str) -> str:
    """A URI read through a prefixed template, as its server knows it."""
    head, plus, rest = uri.partition('+')
    return rest if plus and '://' not in head and ':' not in head else uri


def _meta(upstream: Upstream, params: Any) -> Any:
    """The `_meta` a request to `upstream` carries: the context keys its config forwards."""
    return meta_for_call(McpMetaConverter.allow_keys(*upstream.config.forward_context),
                         context_from_meta(params.meta), 'request') or None


def _patience(upstream: Upstream) -> Patience:
    """Each question of a request to `upstream` waits up to its `timeout`."""
    timeout = upstream.config.timeout
    return Patience(timeout, f'the timeout of MCP server {upstream.name!r} ({timeout:g} s)' if timeout else '')


async def _deprecated(method: Any, *args: Any) -> Any:
    from mcp.shared.exceptions import MCPDeprecationWarning

    with warnings.catch_warnings():  # resource subscriptions are deprecated in 2026-07-28, and still how servers do it
        warnings.simplefilter('ignore', MCPDeprecationWarning)
        return await method(*args)
