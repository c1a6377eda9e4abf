"""The installed version of toolweave, read from the package metadata (`pyproject.toml` is its one source)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ('__version__',)

try:
    __version__ = version('toolweave')
except PackageNotFoundError:  # pragma: no cover - running from a source tree that was never installed
    __version__ = '0+unknown'
