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
from toolweave.cli import _tools_cmd  # noqa: E402, F401
