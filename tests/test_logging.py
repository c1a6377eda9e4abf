"""The loggers: every `toolweave.*` logger the package uses is documented in docs/observability.md, and the page
documents no other; the library adds no handler but a `NullHandler`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def loggers_used() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / 'src' / 'toolweave').rglob('*.py'):
        names.update(re.findall(r"getLogger\('(toolweave(?:\.[a-z_]+)*)'\)", path.read_text()))
    return names - {'toolweave'}  # the package's own logger: the parent of them all, configured, never logged to


def loggers_documented() -> set[str]:
    page = (ROOT / 'docs' / 'observability.md').read_text()
    logs = page[page.index('## Logs'):]
    return set(re.findall(r'^\| `(toolweave\.[a-z_.]+)` \|', logs, re.MULTILINE))


def test_every_logger_is_documented_and_only_those() -> None:
    used = loggers_used()
    assert {'toolweave.tools', 'toolweave.plan', 'toolweave.agent', 'toolweave.mcp'} <= used
    assert used == loggers_documented()


def test_importing_the_library_adds_only_a_null_handler() -> None:
    code = ('import logging, toolweave\n'
            'print([type(h).__name__ for h in logging.getLogger("toolweave").handlers], logging.getLogger().handlers)')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['NullHandler'] []"
