"""Fakes for tests and benchmarks: fake tools with latency and failure knobs, scripted models."""

from __future__ import annotations

# --- fake tools (foundation) ---
from toolweave.testing._fake_tools import (
    FakeCall,
    FakeTool,
    concat_tool,
    echo_tool,
    huge_output,
    non_json_output,
)

# --- fake reviewers (approval) ---
from toolweave.testing._reviewers import RecordingReviewHandler

# --- fake models (agent) ---
from toolweave.testing._models import (
    FunctionModel,
    ModelRequest,
    ScriptedModel,
    estimate_tokens,
    estimate_usage,
)

__all__ = (
    'concat_tool',
    'echo_tool',
    'estimate_tokens',
    'estimate_usage',
    'FakeCall',
    'FakeTool',
    'FunctionModel',
    'huge_output',
    'ModelRequest',
    'non_json_output',
    'RecordingReviewHandler',
    'ScriptedModel',
)
