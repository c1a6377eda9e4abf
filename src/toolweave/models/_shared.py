"""Pieces both adapters share: settings merging, tool choice and arguments on the wire, tool schemas as plain
JSON, and HTTP client normalisation."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import httpx2

from toolweave.exceptions import UserError
from toolweave.models._base import ModelSettings
from toolweave.tools._definition import ToolDefinition

if TYPE_CHECKING:
    import httpx

__all__ = (
    'HttpClient',
    'arguments_object',
    'as_httpx2_client',
    'merge_settings',
    'plain_json_object',
    'resolve_tool_choice',
)

HttpClient: TypeAlias = 'httpx2.AsyncClient | httpx.AsyncClient'
"""An async HTTP client for an adapter: the SDKs' own `httpx2.AsyncClient`, or an `httpx.AsyncClient`."""


def merge_settings(base: ModelSettings | None, override: ModelSettings | None) -> ModelSettings:
    """`base` with every field that `override` sets (not `None`) replaced."""
    merged = base or ModelSettings()
    if override is None:
        return merged
    changes = {f.name: getattr(override, f.name) for f in fields(override) if getattr(override, f.name) is not None}
    return replace(merged, **changes)


_CHOICE_KINDS: dict[str, Literal['auto', 'required', 'none']] = {'auto': 'auto', 'required': 'required',
                                                                 'none': 'none'}


def resolve_tool_choice(
    settings: ModelSettings, tools: Sequence[ToolDefinition], *, adapter: str
) -> tuple[Literal['auto', 'required', 'none', 'tool'], str] | None:
    """The tool choice to send, as `(kind, tool name or '')`; `None` when no tools are offered (nothing is sent).

    Raises `UserError` for a choice that cannot be honoured: a tool that is not offered, or a required call
    with no tools at all.
    """
    choice = settings.tool_choice or 'auto'
    kind = _CHOICE_KINDS.get(choice)
    if kind is not None:
        if not tools:
            if kind == 'required':
                raise UserError(f"{adapter} got tool_choice='required' but no tools to call. Offer tools, or leave "
                                'tool_choice unset.')
            return None
        return (kind, '')
    names = [tool.name for tool in tools]
    if choice not in names:
        raise UserError(f'{adapter} got tool_choice={choice!r}, which names no offered tool. Offered tools: '
                        f"{', '.join(names) or '(none)'}. Use one of them, or 'auto', 'required' or 'none'.")
    return ('tool', choice)


def arguments_object(arguments: str) -> dict[str, Any]:
    """A tool call's raw arguments as the JSON object a request must carry for it.

    Arguments that are not a JSON object (a model's malformed output) are kept visible under `input`, because
    servers reject the whole request otherwise (Anthropic needs an object; Ollama parses the arguments).
    """
    try:
        loaded = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        loaded = None
    return loaded if isinstance(loaded, dict) else {'input': arguments}


def plain_json_object(value: Mapping[str, Any], *, where: str) -> dict[str, Any]:
    """A deep copy of `value` made of plain dicts and lists, so the SDK can serialise it as JSON."""
    try:
        copied = json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise UserError(f'{where} is not JSON-serialisable: {exc}. Use only JSON types in tool schemas.') from exc
    if not isinstance(copied, dict):
        raise UserError(f'{where} must be a JSON object, got {value!r}.')
    return copied


def as_httpx2_client(client: object, *, adapter: str) -> httpx2.AsyncClient:
    """Return `client` as the `httpx2.AsyncClient` the SDKs require.

    An `httpx.AsyncClient` is wrapped in a transport that forwards each request to it, so tests (and applications)
    can keep using `httpx.MockTransport` or their configured `httpx` client.
    """
    if isinstance(client, httpx2.AsyncClient):
        return client
    try:
        import httpx
    except ImportError:  # pragma: no cover - without httpx no client can be an httpx client
        httpx = None  # type: ignore[assignment]
    if httpx is not None and isinstance(client, httpx.AsyncClient):
        return httpx2.AsyncClient(transport=_HttpxTransport(client))
    raise UserError(
        f'http_client of {adapter} must be an `httpx2.AsyncClient` or `httpx.AsyncClient`, '
        f'got {type(client).__name__}. For tests pass `httpx2.AsyncClient(transport=httpx2.MockTransport(handler))`.'
    )


# Headers describing the wire encoding of the body; the forwarded body is already decoded.
_ENCODING_HEADERS = frozenset({'content-encoding', 'content-length', 'transfer-encoding'})


class _HttpxTransport(httpx2.AsyncBaseTransport):
    """An `httpx2` transport that sends each request through an `httpx.AsyncClient` the caller owns."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        import httpx

        body = await request.aread()
        headers = [(k, v) for k, v in request.headers.multi_items() if k.lower() not in _ENCODING_HEADERS]
        timeout = request.extensions.get('timeout')
        outgoing = self._client.build_request(
            request.method,
            str(request.url),
            headers=headers,
            content=body,
            timeout=httpx.Timeout(**timeout) if isinstance(timeout, dict) else httpx.USE_CLIENT_DEFAULT,
        )
        try:
            # Sent as a stream so that a streamed reply reaches the SDK event by event, not all at the end.
            response = await self._client.send(outgoing, stream=True)
        except httpx.TimeoutException as exc:
            raise httpx2.ReadTimeout(str(exc) or 'Request timed out.', request=request) from exc
        except httpx.TransportError as exc:
            raise httpx2.ConnectError(str(exc) or 'Connection failed.', request=request) from exc
        kept = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _ENCODING_HEADERS]
        return httpx2.Response(response.status_code, headers=kept, stream=_ForwardedBody(response), request=request)

    async def aclose(self) -> None:
        # The wrapped client belongs to the caller, who closes it.
        return None


class _ForwardedBody(httpx2.AsyncByteStream):
    """The decoded body of an `httpx` response, read as the `httpx2` side asks for it."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        import httpx

        try:
            async for chunk in self._response.aiter_bytes():
                yield chunk
        except httpx.TimeoutException as exc:
            raise httpx2.ReadTimeout(str(exc) or 'Read timed out.') from exc
        except httpx.TransportError as exc:
            raise httpx2.RemoteProtocolError(str(exc) or 'Connection broken.') from exc

    async def aclose(self) -> None:
        await self._response.aclose()
