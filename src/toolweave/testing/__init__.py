"""Fakes for tests and benchmarks: fake tools with latency and failure knobs, a recording reviewer, scripted models,
the token estimate they report, and a watch on the event loop (`LoopWatch`). The demo scenarios are in
`toolweave.testing.scenarios`."""

from __future__ import annotations

from toolweave._public import present as _present

# --- fake tools (foundation) ---
from toolweave.testing._fake_tools import (
    FakeCall,
    FakeTool,
    concat_tool,
    echo_tool,
    huge_output,
    non_json_output,
)

# --- the event loop, watched ---
from toolweave.testing._loop import LoopWatch

# --- fake reviewers (approval) ---
from toolweave.testing._reviewers import RecordingReviewHandler

# --- fake models (agent) ---
from toolweave.testing._models import (
    CHARS_PER_TOKEN,
    FunctionModel,
    ModelRequest,
    ScriptedModel,
    estimate_tokens,
    estimate_usage,
    serialize_messages,
    serialize_tools,
)

__all__ = (
    'CHARS_PER_TOKEN',
    'concat_tool',
    'echo_tool',
    'estimate_tokens',
    'estimate_usage',
    'FakeCall',
    'FakeTool',
    'FunctionModel',
    'huge_output',
    'LoopWatch',
    'ModelRequest',
    'non_json_output',
    'RecordingReviewHandler',
    'ScriptedModel',
    'serialize_messages',
    'serialize_tools',
)

_present('toolweave.testing', __all__, globals())
