"""Library warnings on the command line: one plain line each on stderr (`warning: No live worker serves ...`).

A program that configured logging itself (a root handler) keeps its own setup. Failed tool calls are left out:
every command that runs tools already shows each failure where it happened.
"""

from __future__ import annotations

import logging
import sys

__all__ = ('show_library_warnings',)

_TOOL_FAILED = 'Tool %r failed'
"""The start of the WARNING that `toolweave.tools` logs for every failed tool call."""


class _OneLine(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name == 'toolweave.tools' and str(record.msg).startswith(_TOOL_FAILED))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = ' '.join(record.getMessage().split())
            if record.exc_info and record.exc_info[1] is not None:
                error = record.exc_info[1]
                text += f' ({type(error).__name__}: {" ".join(str(error).split())})'
            # sys.stderr looked up now, not kept: a live view (rich.live) swaps it to print above its table.
            print(f'{record.levelname.lower()}: {text}', file=sys.stderr, flush=True)
        except Exception:  # a broken stderr must not break the command
            self.handleError(record)


def show_library_warnings() -> None:
    """Print the `toolweave` loggers' warnings and errors on stderr, once per process, unless logging is set up."""
    library = logging.getLogger('toolweave')
    if logging.getLogger().handlers or any(isinstance(h, _OneLine) for h in library.handlers):
        return
    library.addHandler(_OneLine())
    if library.getEffectiveLevel() > logging.WARNING:
        library.setLevel(logging.WARNING)
