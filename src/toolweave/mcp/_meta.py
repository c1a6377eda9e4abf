"""Context -> MCP `_meta` converters (client side) and `_meta` -> context (server side).

A `ToolCallContext` carries out-of-band values (tenant, auth token, correlation id). When a tool is an MCP
tool, a converter decides which of those values travel to the server as the request's `_meta` object. An
empty result means the call is made without any metadata.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeAlias

from toolweave.exceptions import ToolConfigurationError, UserError
from toolweave.tools import ToolCallContext

__all__ = ('McpMetaConverter', 'MetaConverterLike', 'context_from_meta', 'is_reserved_meta_key', 'meta_for_call')

_MetaFunction: TypeAlias = Callable[[ToolCallContext], Mapping[str, Any] | None]


class McpMetaConverter:
    """Decides which `ToolCallContext` entries an MCP tool call sends as `_meta`.

    Build one with a named constructor; any plain function `(ToolCallContext) -> Mapping | None` works
    wherever a converter is accepted too (`McpMetaConverter.of` wraps it).

    ```python
    ctx = ToolCallContext.of(tenantId='acme', apiKey='secret')
    print(McpMetaConverter.deny_keys('apiKey')(ctx), McpMetaConverter.no_op()(ctx))
    #> {'tenantId': 'acme'} {}
    ```
    """

    __slots__ = ('_function', '_label')

    def __init__(self, function: _MetaFunction, label: str) -> None:
        if not callable(function):
            raise UserError(f'A meta converter must be callable, got {type(function).__name__} {function!r}. '
                            'Pass a function `(ToolCallContext) -> dict`.')
        self._function = function
        self._label = label

    @classmethod
    def pass_through(cls) -> McpMetaConverter:
        """Every context entry (the default)."""
        return _PASS_THROUGH

    @classmethod
    def no_op(cls) -> McpMetaConverter:
        """No entries: calls never carry metadata."""
        return _NO_OP

    @classmethod
    def allow_keys(cls, *keys: str) -> McpMetaConverter:
        """Only these keys, when present; no match gives `{}`."""
        allowed = _key_set(keys, 'allow_keys')
        return cls(lambda ctx: {k: v for k, v in ctx.items() if k in allowed}, f'allow_keys({sorted(allowed)!r})')

    @classmethod
    def deny_keys(cls, *keys: str) -> McpMetaConverter:
        """Every entry except these keys."""
        denied = _key_set(keys, 'deny_keys')
        return cls(lambda ctx: {k: v for k, v in ctx.items() if k not in denied}, f'deny_keys({sorted(denied)!r})')

    @classmethod
    def of(cls, function: _MetaFunction) -> McpMetaConverter:
        """A custom converter: `function` receives the full context and returns the metadata (or `{}`/`None`)."""
        if isinstance(function, McpMetaConverter):
            return function
        return cls(function, getattr(function, '__qualname__', repr(function)))

    def __call__(self, context: ToolCallContext) -> dict[str, Any]:
        """The metadata for `context`; every converter gives `{}` for an empty context."""
        if context.is_empty:
            return {}
        produced = self._function(context)
        if produced is None:
            return {}
        if not isinstance(produced, Mapping):
            raise ToolConfigurationError(
                f'Meta converter {self._label} returned {type(produced).__name__} {produced!r}, not a mapping. '
                'Return a dict of JSON values (or `{}` to send no metadata).'
            )
        return dict(produced)

    def __repr__(self) -> str:
        return f'McpMetaConverter.{self._label}'


MetaConverterLike: TypeAlias = McpMetaConverter | _MetaFunction
"""A converter, or a plain function that `McpMetaConverter.of` accepts."""

_PASS_THROUGH = McpMetaConverter(lambda ctx: ctx.to_map(), 'pass_through()')
_NO_OP = McpMetaConverter(lambda ctx: {}, 'no_op()')


def _key_set(keys: Iterable[str], where: str) -> frozenset[str]:
    found = frozenset(keys)
    for key in found:
        if not isinstance(key, str):
            raise UserError(f'Keys for McpMetaConverter.{where}() must be strings, got {type(key).__name__} '
                            f'{key!r}. Write `McpMetaConverter.{where}("tenantId", "correlationId")`.')
    return found


def meta_for_call(converter: McpMetaConverter, context: ToolCallContext, tool_name: str) -> dict[str, Any] | None:
    """The `_meta` object for one call, or `None` for a call without metadata. Raises `ToolConfigurationError`
    naming the entry when a value cannot travel as JSON."""
    meta = converter(context)
    if not meta:
        return None
    for key, value in meta.items():
        if not isinstance(key, str):
            raise ToolConfigurationError(
                f'Context key {key!r} for MCP tool {tool_name!r} is a {type(key).__name__}; `_meta` keys must be '
                'strings. Convert the key in a custom meta converter.'
            )
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise ToolConfigurationError(
                f'Context entry {key!r} for MCP tool {tool_name!r} cannot be sent as `_meta`: '
                f'{type(value).__name__} {value!r} is not a JSON value. Leave it out with '
                f'`McpMetaConverter.deny_keys({key!r})` or convert it with `McpMetaConverter.of(function)`.'
            ) from None
    return meta


_TRACE_CONTEXT_KEYS = frozenset({'traceparent', 'tracestate', 'baggage'})
"""The W3C trace context and baggage, which MCP carries unprefixed in `_meta` (the MCP SDK sends and reads them)."""


def is_reserved_meta_key(key: str) -> bool:
    """Whether a `_meta` key belongs to the protocol (`progressToken`, `io.modelcontextprotocol/...`, any
    prefix whose second label is `modelcontextprotocol` or `mcp`) or to tracing (`traceparent`, `tracestate`,
    `baggage`) rather than to the caller."""
    if key == 'progressToken' or key in _TRACE_CONTEXT_KEYS:
        return True
    prefix, slash, _ = key.partition('/')
    if not slash:
        return False
    labels = prefix.split('.')
    return len(labels) >= 2 and labels[1] in ('modelcontextprotocol', 'mcp')


def context_from_meta(meta: Mapping[str, Any] | None) -> ToolCallContext:
    """The `ToolCallContext` a served tool receives: the request's `_meta` without the protocol's own keys."""
    if not meta:
        return ToolCallContext.EMPTY
    return ToolCallContext.of({k: v for k, v in meta.items() if not is_reserved_meta_key(k)})
