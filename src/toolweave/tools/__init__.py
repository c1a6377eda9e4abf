"""Tools: the `Tool` seam, the ways to build one (`@tool`, `TextTool`, `Tool.create`, `TypedTool`), the one way to
wrap one (`DelegatingTool`), and `Toolset`, which resolves many into unique names."""

from __future__ import annotations

from toolweave._public import present as _present
from toolweave.tools._arguments import ArgumentsError, CheckedArguments, ToolArguments, load_arguments, text_input
from toolweave.tools._context import LOOP_ID_KEY, ToolCallContext
from toolweave.tools._definition import ToolDefinition, ToolMetadata, check_tool_name
from toolweave.tools._function import FunctionTool, function_tool, output_text, tool, tools_from, tools_from_safely
from toolweave.tools._groups import ToolGroup, ToolGroupLoader
from toolweave.tools._metrics import GLOBAL_METRICS, ToolMetrics, ToolStats, use_metrics
from toolweave.tools._programmatic import Parameter, ParameterType, ProgrammaticTool, TypedTool
from toolweave.tools._result import ToolResult
from toolweave.tools._text import TextTool
from toolweave.tools._tool import Tool
from toolweave.tools._toolset import ToolPredicate, Toolset, ToolsetItem
from toolweave.tools._wrappers import DelegatingTool, renamed, with_description, with_note

__all__ = (
    'ArgumentsError',
    'check_tool_name',
    'CheckedArguments',
    'DelegatingTool',
    'function_tool',
    'FunctionTool',
    'GLOBAL_METRICS',
    'load_arguments',
    'LOOP_ID_KEY',
    'output_text',
    'Parameter',
    'ParameterType',
    'ProgrammaticTool',
    'renamed',
    'text_input',
    'TextTool',
    'Tool',
    'tool',
    'ToolArguments',
    'ToolCallContext',
    'ToolDefinition',
    'ToolGroup',
    'ToolGroupLoader',
    'ToolMetadata',
    'ToolMetrics',
    'ToolPredicate',
    'ToolResult',
    'tools_from',
    'tools_from_safely',
    'Toolset',
    'ToolsetItem',
    'ToolStats',
    'TypedTool',
    'use_metrics',
    'with_description',
    'with_note',
)

_present('toolweave.tools', __all__, globals())
