"""`toolweave chat` command."""

from __future__ import annotations
