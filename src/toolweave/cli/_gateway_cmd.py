"""`toolweave gateway`: one MCP server in front of the servers of an `mcpServers` config.

stdout is the MCP wire in stdio mode, so nothing else is printed there: the gateway's log goes to
`<log dir>/gateway.log` (warnings also to stderr, which MCP clients keep in their own logs), and each upstream
server's stderr to `<log dir>/<server>.log`. EOF on stdin, SIGINT and SIGTERM stop every upstream server and
exit with status 0.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from toolweave.cli._app import app
from toolweave.exceptions import UserError

__all__ = ('gateway_command', 'parse_address')

LOOPBACK = ('127.0.0.1', 'localhost', '::1')

logger = logging.getLogger('toolweave.mcp.gateway')


@app.command('gateway')
def gateway_command(
    config: Annotated[Path, typer.Option('--config', '-c', help='The MCP servers: a JSON file with an "mcpServers" '
                                         'object, as Claude Desktop and VS Code use, plus optional "toolweave" '
                                         'keys.')],
    mode: Annotated[str | None, typer.Option('--mode', help='"tools": every upstream tool plus execute_tool_plan; '
                                             '"search": only search_tools, describe_tools and execute_tool_plan. '
                                             'Overrides the config.')] = None,
    http: Annotated[str | None, typer.Option('--http', metavar='HOST:PORT', help='Serve streamable HTTP at '
                                             'http://HOST:PORT/mcp instead of stdio (a host other than 127.0.0.1 '
                                             'needs bearer tokens).')] = None,
    log_dir: Annotated[Path | None, typer.Option('--log-dir', help='Where the logs go (default: '
                                                 '~/.local/state/toolweave/gateway).')] = None,
    check: Annotated[bool, typer.Option('--check', help='Start every server, print what each offers, and '
                                        'exit (status 1 if a server is down).')] = False,
    verbose: Annotated[bool, typer.Option('--verbose', '-v', help='Also log every tool call to gateway.log.')] = False,
) -> None:
    """Serve one MCP server in front of many: execute_tool_plan over all their tools."""
    from toolweave.mcp import GatewayConfig, default_log_dir

    try:
        settings = GatewayConfig.load(config)
        if mode is not None:
            if mode not in ('tools', 'search'):
                raise UserError(f'--mode must be "tools" or "search", got {mode!r}.')
            settings = dataclasses.replace(settings, mode=mode)  # type: ignore[arg-type]
        address = parse_address(http) if http is not None else None
        if address is not None and address[0] not in LOOPBACK and not settings.bearer_tokens:
            raise UserError(f'--http {http} lets other machines call every tool of the gateway: give clients bearer '
                            'tokens ("bearerTokens" in the config\'s "toolweave" object, or the '
                            'TOOLWEAVE_GATEWAY_TOKEN environment variable), or serve on 127.0.0.1.')
    except UserError as exc:
        typer.echo(f'toolweave gateway: {exc}', err=True)
        raise typer.Exit(2) from None
    logs = log_dir or default_log_dir()
    _configure_logging(logs, verbose)
    try:
        code = anyio.run(_run, settings, logs, address, check)
    except KeyboardInterrupt:  # a second Ctrl-C while shutting down
        code = 130
    raise typer.Exit(code)


def parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` (or `:PORT`, meaning 127.0.0.1) as a pair. Raises `UserError` with the expected form."""
    host, sep, port = text.rpartition(':')
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UserError(f'--http must be HOST:PORT, such as 127.0.0.1:8765, got {text!r}.')
    return host.strip('[]') or '127.0.0.1', int(port)


async def _run(settings: Any, logs: Path, address: tuple[str, int] | None, check: bool) -> int:
    from toolweave.mcp import McpGateway

    code = 0
    async with anyio.create_task_group() as group:
        group.start_soon(_stop_on_signals, group.cancel_scope)
        async with McpGateway(settings, log_dir=logs) as gateway:
            if check:
                report = gateway.status()
                gated = sorted(tool.name for tool in gateway.tools if tool.definition.metadata.requires_approval)
                _print_status(report, len(gateway.listed()), gated, logs)
                code = 0 if all(entry['state'] == 'up' for entry in report) else 1
            elif address is None:
                await gateway.serve_stdio()
            else:
                host, port = address
                await gateway.serve_http(host=host, port=port, on_started=_announce)
        group.cancel_scope.cancel()  # the signal watcher
    logger.info('Gateway stopped')
    return code


async def _stop_on_signals(scope: anyio.CancelScope) -> None:
    if sys.platform == 'win32':  # no signal receiver there: Ctrl-C arrives as KeyboardInterrupt
        return
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for received in signals:
            logger.info('Gateway stopping on %s', signal.Signals(received).name)
            scope.cancel()
            return


def _announce(url: str) -> None:
    print(f'toolweave gateway: serving MCP at {url}', file=sys.stderr, flush=True)


def _configure_logging(logs: Path, verbose: bool) -> None:
    logs.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger('toolweave')
    # The servers' life (starts, restarts, renames) always; each tool call (about 0.2 ms of formatting and
    # writing) only when asked.
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    logging.getLogger('toolweave.mcp').setLevel(logging.INFO)
    file_handler = logging.FileHandler(logs / 'gateway.log', encoding='utf-8')
    file_handler.setFormatter(logging.Formatter('%(asctime)s %(levelname)s %(name)s: %(message)s'))
    errors = logging.StreamHandler(sys.stderr)
    errors.setLevel(logging.WARNING)
    errors.addFilter(logging.Filter('toolweave.mcp'))  # the servers' state, not every failed tool call
    errors.setFormatter(logging.Formatter('toolweave gateway: %(message)s'))
    root.addHandler(file_handler)
    root.addHandler(errors)
    root.propagate = False


def _print_status(report: list[dict[str, Any]], listed: int, gated: list[str], logs: Path) -> None:
    console = Console()
    if not report:
        console.print('The config starts no server: none is listed, or every one is "disabled".')
    table = Table('server', 'state', 'tools', 'prompts', 'resources', 'why down')
    for entry in report:
        names = ', '.join(entry['tools'])
        templates = entry['resource_templates']
        table.add_row(escape(entry['server']), entry['state'],
                      escape(f'{len(entry["tools"])}: {names}' if names else '0'),
                      escape(', '.join(entry['prompts']) or '-'),
                      f'{entry["resources"]}' + (f' + {templates} templates' if templates else ''),
                      escape(entry['reason'] or '') if entry['state'] != 'up' else '')
    if report:
        console.print(table)
    if gated:
        console.print(f'Asked for approval before each call: {escape(", ".join(gated))}.')
    console.print(f'Clients see {listed} tool{"" if listed == 1 else "s"}. Logs: {escape(str(logs))}')
