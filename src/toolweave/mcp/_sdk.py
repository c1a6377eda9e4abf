"""The one place that imports the optional `mcp` SDK, so a missing or too old install fails with the fix."""

from __future__ import annotations

import importlib
from importlib import metadata
from types import ModuleType

__all__ = ('require_mcp',)

_INSTALL = 'pip install "toolweave[mcp]"'


def require_mcp() -> ModuleType:
    """The `mcp` package (2.x). Raises `ImportError` saying how to install it when it is missing or too old."""
    try:
        module = importlib.import_module('mcp')
    except ImportError as exc:
        raise ImportError(
            f'Please install `mcp` to use MCP tools and servers: `{_INSTALL}` (or `pip install "mcp>=2.3"`).'
        ) from exc
    if not hasattr(module, 'Client'):
        try:
            version = f'version {metadata.version("mcp")}'
        except metadata.PackageNotFoundError:
            version = 'an older version'
        raise ImportError(
            f'toolweave needs the `mcp` SDK 2.x, found {version}. Upgrade it: `pip install -U "mcp>=2.3"`.'
        )
    return module
