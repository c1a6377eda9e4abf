from __future__ import annotations

from importlib.metadata import version as installed_version
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

__all__ = ('CommandGroup', 'app')


class CommandGroup(TyperGroup):
    """A command group whose list of commands wraps each summary instead of cutting it with `...`."""

    # typer ships its own copy of click: its Context and HelpFormatter types are private, hence `Any`.
    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [(name, command.get_short_help_str(limit=1_000)) for name in self.list_commands(ctx)
                if (command := self.get_command(ctx, name)) is not None and not command.hidden]
        if rows:
            with formatter.section('Commands'):
                formatter.write_dl(rows)

app = typer.Typer(
    name='toolweave',
    cls=CommandGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help, as other command-line tools print it: it wraps to the terminal's width (rich's panels cut long
    # words and option values at 80 columns) and errors are one `Error: ...` line under the usage.
    rich_markup_mode=None,
    context_settings={'help_option_names': ['-h', '--help'], 'max_content_width': 120},
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"toolweave {installed_version('toolweave')}")  # as toolweave.__version__ reads it
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[bool, typer.Option('--version', '-V', callback=_print_version, is_eager=True,
                                          help='Print the installed version and exit.')] = False,
) -> None:
    """Run tool plans, list tools, and try toolweave without an API key (`toolweave demo`).

    `toolweave COMMAND -h` explains a command. Exit codes: 0 done, 1 a step or the run failed, 2 bad input,
    3 steps wait for approval (`toolweave runs approve`), 130 interrupted. Stores: `--store URL`, else the
    TOOLWEAVE_STORE environment variable, for every command that takes a store.
    """


# Each command lives in its own module and registers itself on `app` when imported.
import toolweave.cli._chat_cmd  # noqa: E402
import toolweave.cli._demo_cmd  # noqa: E402
import toolweave.cli._gateway_cmd  # noqa: E402
import toolweave.cli._plan_cmds  # noqa: E402
import toolweave.cli._runs_cmd  # noqa: E402
import toolweave.cli._tools_cmd  # noqa: E402
import toolweave.cli._ui_cmd  # noqa: E402
import toolweave.cli._worker_cmd  # noqa: E402, F401
