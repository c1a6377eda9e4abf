"""The tool model: definitions, results, call context and the `Tool` base."""

from __future__ import annotations

from toolweave.tools._context import LOOP_ID_KEY, ToolCallContext
from toolweave.tools._definition import ToolDefinition, ToolMetadata, check_tool_name
from toolweave.tools._metrics import GLOBAL_METRICS, ToolMetrics, ToolStats
from toolweave.tools._result import ToolResult
from toolweave.tools._tool import Tool, ToolArguments

__all__ = (
    'GLOBAL_METRICS',
    'LOOP_ID_KEY',
    'Tool',
    'ToolArguments',
    'ToolCallContext',
    'ToolDefinition',
    'ToolMetadata',
    'ToolMetrics',
    'ToolResult',
    'ToolStats',
    'check_tool_name',
)
