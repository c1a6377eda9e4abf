"""The `toolweave` command. Thin: it parses arguments, calls the library and renders with rich."""

from __future__ import annotations

__all__ = ('main',)


def main() -> None:
    try:
        from toolweave.cli._app import app
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise SystemExit(f'The toolweave command needs the `cli` extra: pip install "toolweave[cli]" ({exc})') from exc
    app()
