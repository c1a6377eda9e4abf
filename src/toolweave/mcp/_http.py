"""Serving an MCP server over streamable HTTP: the ASGI app, and uvicorn running it until cancelled.

`http_app(server, ...)` is the SDK's session manager (both protocol eras, DNS-rebinding protection for local
hosts) behind two checks of toolweave's own, in this order:

- **bearer tokens** (`BearerTokens`, optional): a request without `Authorization: Bearer <token>` naming one of
  the configured tokens gets `401` and a `WWW-Authenticate: Bearer` challenge. Tokens are compared in constant
  time, every configured token each time, so the time taken says nothing about a token. The token's name is the
  client's name (`current_client()`) for the gateway's per-client limits; without tokens a client is named by
  its address;
- **the wire guard** (`_wire`): a POST body the SDK cannot read (not UTF-8, not JSON, too deep, a batch, the
  wrong `jsonrpc`, non-object params, over `MAX_MESSAGE_BYTES`) is answered here with a JSON-RPC error that
  carries the request's `id` (the SDK's own answer has `"id": null`).

`serve_app` runs the app with uvicorn until it is cancelled, then stops cleanly: the MCP sessions end first (so
their open event streams close), uvicorn lets the connections drain for up to `SHUTDOWN_GRACE` seconds, and no
task is left for the event loop to cancel at exit (which is what printed a traceback). uvicorn's own signal
handlers are not installed: whoever runs the server decides what a signal does.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import anyio

from toolweave.exceptions import UserError
from toolweave.mcp._wire import MAX_MESSAGE_BYTES, misread, oversized, rejection

__all__ = ('SHUTDOWN_GRACE', 'BearerTokens', 'HttpApp', 'current_client', 'http_app', 'serve_app')

logger = logging.getLogger('toolweave.mcp')

SHUTDOWN_GRACE = 5
"""Seconds open HTTP connections get to finish once the server stops."""

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_client: ContextVar[str] = ContextVar('toolweave_mcp_client', default='local')


def current_client() -> str:
    """The name of the client whose request is being served: its token's name, its address over HTTP without
    tokens, or `'local'` (stdio, in-process)."""
    return _client.get()


@contextmanager
def serving_client(name: str) -> Any:
    token = _client.set(name)
    try:
        yield
    finally:
        _client.reset(token)


class BearerTokens:
    """The tokens that may use the server, by client name: `{"alice": "<token>", ...}`.

    ```python
    tokens = BearerTokens({'alice': 's3cret-token-of-alice'})
    print(tokens.client('Bearer s3cret-token-of-alice'), tokens.client('Bearer guess'), tokens.client(None))
    #> alice None None
    ```
    """

    def __init__(self, tokens: Mapping[str, str]) -> None:
        if not tokens:
            raise UserError('BearerTokens needs at least one token, as {"client name": "token"}.')
        for name, token in tokens.items():
            if not isinstance(token, str) or len(token) < 16:
                raise UserError(f'The bearer token of client {name!r} must be a string of at least 16 characters '
                                '(use a random one, such as `python -c "import secrets; print(secrets.token_urlsafe'
                                '(32))"`).')
        self._tokens = [(name, token.encode()) for name, token in tokens.items()]

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self._tokens]

    def client(self, authorization: str | None) -> str | None:
        """The client an `Authorization` header value names, or `None`."""
        scheme, _, presented = (authorization or '').partition(' ')
        candidate = presented.strip().encode() if scheme.lower() == 'bearer' else b''
        found: str | None = None
        for name, token in self._tokens:  # every token, every time: the time taken depends on none of them
            if hmac.compare_digest(candidate, token) and candidate:
                found = name
        return found


class HttpApp:
    """The ASGI app `http_app` builds; `manager` is the SDK's session manager, run by `serve_app`."""

    def __init__(self, manager: Any, path: str, tokens: BearerTokens | None) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPASGIApp

        self.manager = manager
        self.path = path
        self.tokens = tokens
        self._inner = StreamableHTTPASGIApp(manager)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope['type'] == 'lifespan':  # under another ASGI server; `serve_app` runs the sessions itself
            await self._lifespan(receive, send)
            return
        if scope['type'] != 'http':
            return
        if scope['path'].rstrip('/') != self.path.rstrip('/'):
            await _plain(send, 404, b'Not Found')
            return
        client = self._client_of(scope)
        if client is None:
            await _plain(send, 401, b'Unauthorized: send "Authorization: Bearer <token>".', (
                (b'www-authenticate', b'Bearer realm="toolweave-gateway", error="invalid_token"'),))
            return
        with serving_client(client):
            if scope['method'] == 'POST':
                await self._guarded(scope, receive, send)
            else:
                await self._inner(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        async with self.manager.run():
            await send({'type': 'lifespan.startup.complete'})
            await receive()  # lifespan.shutdown
        await send({'type': 'lifespan.shutdown.complete'})

    def _client_of(self, scope: Scope) -> str | None:
        if self.tokens is None:
            peer = scope.get('client')
            return f'{peer[0]}' if peer else 'unknown'
        headers = dict(scope.get('headers') or ())
        value = headers.get(b'authorization')
        return self.tokens.client(value.decode('latin-1') if value is not None else None)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = bytearray()
        while True:
            message = await receive()
            if message['type'] != 'http.request':
                return  # the client went away
            body += message.get('body', b'')
            if len(body) > MAX_MESSAGE_BYTES:
                await _json(send, 413, oversized(bytes(body[:65536]), len(body)).body)
                return
            if not message.get('more_body', False):
                break
        raw = bytes(body)
        problem = _problem(raw)
        if problem is not None:
            answer = rejection(raw, problem)
            if answer is not None:
                await _json(send, 400, answer.body)
                return
        sent = False

        async def replay() -> MutableMapping[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {'type': 'http.request', 'body': raw, 'more_body': False}
            return await receive()

        await self._inner(scope, replay, send)


def _problem(raw: bytes) -> str | None:
    """What the SDK's parser says about `raw`, or `None` when it reads."""
    import mcp_types as types

    try:
        message = types.jsonrpc_message_adapter.validate_json(raw, by_name=False)
    except ValueError as exc:
        return str(exc)
    return None if misread(raw, message) is None else 'the id is not a string or a number'


async def _plain(send: Send, status: int, text: bytes, headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    await send({'type': 'http.response.start', 'status': status,
                'headers': [(b'content-type', b'text/plain; charset=utf-8'), *headers]})
    await send({'type': 'http.response.body', 'body': text})


async def _json(send: Send, status: int, body: bytes) -> None:
    await send({'type': 'http.response.start', 'status': status, 'headers': [(b'content-type', b'application/json')]})
    await send({'type': 'http.response.body', 'body': body})


def http_app(server: Any, *, path: str = '/mcp', host: str = '127.0.0.1', stateless: bool = False,
             json_response: bool = False, tokens: BearerTokens | None = None) -> HttpApp:
    """The ASGI app serving the SDK `server` at `path` (see the module docstring)."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    security = None
    if host in ('127.0.0.1', 'localhost', '::1'):  # as the SDK does: DNS-rebinding protection for local hosts
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=['127.0.0.1:*', 'localhost:*', '[::1]:*'],
            allowed_origins=['http://127.0.0.1:*', 'http://localhost:*', 'http://[::1]:*'],
        )
    manager = StreamableHTTPSessionManager(app=server, json_response=json_response, stateless=stateless,
                                           security_settings=security, max_request_body_size=MAX_MESSAGE_BYTES)
    return HttpApp(manager, path, tokens)


async def serve_app(app: HttpApp, *, host: str, port: int,
                    on_started: Callable[[str], object] | None = None) -> None:
    """Run `app` with uvicorn until cancelled (asyncio only); `on_started` receives the endpoint URL once the
    socket listens (with `port=0` the system picks a free port, and the URL says which)."""
    import uvicorn

    class _Server(uvicorn.Server):
        @contextmanager
        def capture_signals(self) -> Any:  # the caller handles signals (see the module docstring)
            yield

    server = _Server(uvicorn.Config(app, host=host, port=port, log_level='warning', lifespan='off',
                                   timeout_graceful_shutdown=SHUTDOWN_GRACE))
    done = anyio.Event()

    async def serve() -> None:
        with anyio.CancelScope(shield=True):  # stopped by `should_exit` below, never cancelled halfway
            try:
                await server.serve()
            finally:
                done.set()

    async def run_sessions(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with app.manager.run():
            task_status.started()
            await anyio.sleep_forever()

    try:
        async with anyio.create_task_group() as group:
            await group.start(run_sessions)  # cancelled first when the server stops: open streams end
            group.start_soon(serve)
            try:
                while not server.started:
                    if done.is_set() or server.should_exit:  # startup failed (port in use, ...): uvicorn said why
                        raise OSError(f'MCP HTTP server could not listen on {host}:{port}. Pick another port, or 0.')
                    await anyio.sleep(0.01)
                url = f'http://{host}:{server.servers[0].sockets[0].getsockname()[1]}{app.path}'
                logger.info('Serving MCP at %s', url)
                if on_started is not None:
                    on_started(url)
                await anyio.sleep_forever()
            finally:
                server.should_exit = True
                with anyio.CancelScope(shield=True):
                    group.cancel_scope.cancel()
                    with anyio.move_on_after(SHUTDOWN_GRACE + 2):
                        await done.wait()
                    if not done.is_set():
                        server.force_exit = True
                        await done.wait()
    except BaseExceptionGroup as group_error:  # a lone error from the group comes out as itself
        if len(group_error.exceptions) == 1:
            raise group_error.exceptions[0] from None
        raise

