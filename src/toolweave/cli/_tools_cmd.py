"""`toolweave tools` command."""

from __future__ import annotations
