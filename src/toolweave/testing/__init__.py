"""Fakes for tests and benchmarks: fake tools with latency and failure knobs, scripted models."""

from __future__ import annotations

# --- fake tools (foundation) ---

# --- fake models (agent) ---
