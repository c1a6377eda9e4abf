"""`toolweave tools`: owned by the foundation work (lists resolved tools and their schemas)."""

from __future__ import annotations
