"""`toolweave demo` command."""

from __future__ import annotations
