"""`toolweave ui`: the browser inbox and live view of a plan store's runs (see `toolweave.ui`).

Exit codes: 0 stopped (Ctrl-C); 2 bad input (a store that cannot be opened, bad `--tools`, a non-loopback
`--host` without a token, the `ui` extra missing).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from toolweave.cli._app import app
from toolweave.cli._common import DEFAULT_STORE, ExitCode, StoreOption, load_tools
from toolweave.exceptions import PlanStoreError, UserError
from toolweave.tools import Toolset

__all__ = ('ui_command',)

TOKEN_ENV = 'TOOLWEAVE_UI_TOKEN'


@app.command('ui')
def ui_command(
    store: StoreOption = DEFAULT_STORE,
    host: Annotated[str, typer.Option('--host', metavar='ADDRESS', help='The address to serve on. Anything but a '
                                      'loopback address (127.0.0.1, ::1, localhost) needs --token.')] = '127.0.0.1',
    port: Annotated[int, typer.Option('--port', min=0, max=65535, metavar='PORT',
                                      help='The port (0: any free port).')] = 8765,
    token: Annotated[list[str] | None, typer.Option(
        '--token', metavar='[LABEL=]SECRET', show_default=False,
        help=f'An access token (16+ characters; repeat for several people; else {TOKEN_ENV}). With a LABEL, '
             "decisions made with it are recorded as LABEL's.")] = None,
    tools: Annotated[str | None, typer.Option(
        '--tools', '-t', metavar='MODULE:ATTRIBUTE', show_default=False,
        help='The tools the plans call: the UI then resumes runs once their decisions are made, and checks '
             "edited arguments against each tool's input schema.")] = None,
    allow_host: Annotated[list[str] | None, typer.Option(
        '--allow-host', metavar='NAME', show_default=False,
        help='Another host name the UI answers to (a name it is reached by, e.g. through a proxy).')] = None,
) -> None:
    """Serve a browser inbox for the decisions runs wait on, and a live view of every run, until Ctrl-C."""
    try:
        from toolweave.ui import check_bind, parse_tokens, serve
    except ImportError as exc:
        typer.echo(f'toolweave ui: {exc}', err=True)
        raise typer.Exit(ExitCode.USAGE) from None
    given = list(token or ()) or ([os.environ[TOKEN_ENV]] if os.environ.get(TOKEN_ENV) else [])
    try:
        tokens = parse_tokens(given)
        check_bind(host, tokens)
    except UserError as exc:
        typer.echo(f'toolweave ui: {exc}', err=True)
        raise typer.Exit(ExitCode.USAGE) from None
    toolset: Toolset | None = load_tools(tools) if tools else None
    secret = next(iter(tokens), None)

    def ready(address: str) -> None:
        opened = f'{address}/?token={secret}' if secret else address
        typer.echo(f'toolweave ui: serving {store} at {opened}  (Ctrl-C to stop)', err=True)
        sys.stderr.flush()

    try:
        serve(store, host=host, port=port, tokens=tokens, tools=toolset, allow_hosts=allow_host or (),
              on_ready=ready)
    except (PlanStoreError, UserError) as exc:
        typer.echo(f'toolweave ui: {exc}', err=True)
        raise typer.Exit(ExitCode.USAGE) from None
    except KeyboardInterrupt:
        pass
