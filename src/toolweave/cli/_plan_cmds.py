"""`toolweave run and validate` command."""

from __future__ import annotations
