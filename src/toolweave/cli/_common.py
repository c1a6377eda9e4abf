from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import typer

__all__ = ('load_object',)


def load_object(spec: str, *, option: str = '--tools') -> Any:
    """Import `module:attribute` (or `path/to/file.py:attribute`) or exit with what could not be imported."""
    module_name, sep, attribute = spec.partition(':')
    if not sep or not module_name or not attribute:
        raise typer.BadParameter(f'expected module:attribute, got {spec!r} (for example examples.tools:TOOLS)',
                                 param_hint=option)
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        if module_name.endswith('.py'):
            module_name = module_name[:-3].replace('/', '.').replace('\\', '.')
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise typer.BadParameter(f'could not import module {module_name!r}: {exc}', param_hint=option) from exc
    try:
        obj = module
        for part in attribute.split('.'):
            obj = getattr(obj, part)
    except AttributeError as exc:
        raise typer.BadParameter(f'module {module_name!r} has no attribute {attribute!r}', param_hint=option) from exc
    return obj
