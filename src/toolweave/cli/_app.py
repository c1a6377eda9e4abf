from __future__ import annotations

import typer

__all__ = ('app',)

app = typer.Typer(
    name='toolweave',
    help='Run tool plans, list tools, and try toolweave without an API key (`toolweave demo`).',
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each command lives in its own module and registers itself on `app` when imported.
import toolweave.cli._chat_cmd  # noqa: E402
import toolweave.cli._demo_cmd  # noqa: E402
import toolweave.cli._gateway_cmd  # noqa: E402
import toolweave.cli._plan_cmds  # noqa: E402
import toolweave.cli._runs_cmd  # noqa: E402
import toolweave.cli._tools_cmd  # noqa: E402
import toolweave.cli._worker_cmd  # noqa: E402, F401
