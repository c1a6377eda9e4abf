"""toolweave: a tool runtime for LLM agents. One plan, one round-trip, parallel steps.

Each block below belongs to one part of the package; `__all__` at the end lists the public API.
"""

from __future__ import annotations

# --- core (tools) ---
from toolweave.approval import ReviewDecision, ReviewHandler, ReviewRequest, use_review_handler
from toolweave.exceptions import (
    ControlFlowSignal,
    DuplicateToolError,
    ExitEarly,
    ModelError,
    PlanValidationError,
    RunError,
    ToolConfigurationError,
    ToolNameError,
    ToolweaveError,
    UnknownToolError,
    UsageLimitExceeded,
    UserError,
)
from toolweave.tools import (
    GLOBAL_METRICS,
    Tool,
    ToolCallContext,
    ToolDefinition,
    ToolMetadata,
    ToolMetrics,
    ToolResult,
    ToolStats,
)

# --- foundation: function tools, TextTool, Toolset, decorators (helper A) ---

# --- plan (helper B) ---

# --- pipeline and approval handlers (helper C) ---

# --- models and agent (helper D) ---

__version__ = '0.1.0'
