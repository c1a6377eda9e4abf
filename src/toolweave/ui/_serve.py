"""`serve`: the UI under uvicorn, bound to the loopback interface unless told otherwise (then with a token)."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Mapping

from toolweave.plan.durable import StoreLike
from toolweave.tools import Toolset, ToolsetItem
from toolweave.ui._access import check_bind
from toolweave.ui._app import create_app

__all__ = ('DEFAULT_PORT', 'serve')

DEFAULT_PORT = 8765


def new_token() -> str:
    """A fresh access token (32 URL-safe characters)."""
    return secrets.token_urlsafe(24)


def serve(store: StoreLike, *, host: str = '127.0.0.1', port: int = DEFAULT_PORT,
          tokens: Mapping[str, str | None] | None = None, tools: Toolset | Iterable[ToolsetItem] | None = None,
          allow_hosts: Iterable[str] = (), on_ready: Callable[[str], None] | None = None,
          interval: float = 0.1) -> None:
    """Serve the UI for `store` until interrupted (Ctrl-C): `http://127.0.0.1:8765` by default.

    Args:
        store: the plan store (or its URL).
        host: the address to bind; anything but a loopback address needs `tokens`.
        port: the port (`0`: any free port; `on_ready` is told which).
        tokens: access tokens, secret -> label (`None`: the page asks for a name).
        tools: the tools the plans call, to resume runs and check edits against the tools' input schemas.
        allow_hosts: more host names the server answers to (a name it is reached by through a proxy).
        on_ready: called with the address once the server listens.
        interval: seconds between two looks at a SQLite store for changes.

    Raises:
        UserError: a non-loopback `host` without tokens.
    """
    check_bind(host, tokens)
    try:
        import uvicorn
    except ImportError as e:
        raise ImportError('The UI needs Starlette and uvicorn: `pip install "toolweave[ui]"`.') from e
    hosts = {'127.0.0.1', 'localhost', '::1', host.strip('[]'), *allow_hosts}
    app = create_app(store, tools=tools, tokens=tokens, hosts=hosts, interval=interval)
    config = uvicorn.Config(app, host=host, port=port, log_level='warning', lifespan='on', access_log=False)
    server = uvicorn.Server(config)
    if on_ready is not None:
        notify = on_ready
        original = server.startup

        async def startup(sockets: object = None) -> None:
            await original(sockets)  # type: ignore[arg-type]
            bound = server.servers[0].sockets[0].getsockname() if server.servers else (host, port)
            shown = f'[{bound[0]}]' if ':' in str(bound[0]) else bound[0]
            notify(f'http://{shown}:{bound[1]}')

        server.startup = startup  # type: ignore[method-assign]
    server.run()
