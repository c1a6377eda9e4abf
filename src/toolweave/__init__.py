"""toolweave: a tool runtime for LLM agents. One plan, one round-trip, parallel steps.

Each block below belongs to one part of the package; `__all__` at the end lists the public API.
"""

from __future__ import annotations

import logging as _logging

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
from toolweave.tools._function import FunctionTool, tool, tools_from, tools_from_safely
from toolweave.tools._programmatic import Parameter, TypedTool
from toolweave.tools._text import TextTool
from toolweave.decorators import (
    ArtifactSinkingTool,
    CompositeSink,
    DelegatingTool,
    ListSink,
    LoopMemo,
    OneShotPerLoopTool,
    Sink,
    use_metrics,
    with_description,
    with_note,
)
from toolweave.tools._groups import ToolGroup
from toolweave.tools._toolset import Toolset

# --- plan (helper B) ---
from toolweave.plan import (
    Plan,
    PlanEvent,
    PlanRun,
    PlanStep,
    PlanTool,
    StepRecord,
    parse_plan,
    planning_instructions,
    run_plan,
    run_plan_sync,
    validate_plan,
)

# --- pipeline and approval handlers (helper C) ---
from toolweave._console_review import ConsoleReviewHandler
from toolweave._gated import ApprovalRequiredTool, requires_approval
from toolweave._review_handlers import ApprovalRule, CallbackReviewHandler, RuleBasedReviewHandler
from toolweave.approval import ApprovalLog, ApprovalRecord, AutoApproveHandler, record_approvals, request_approval
from toolweave.pipeline import ErrorStrategy, PipelineBuilder, PipelineStep, ToolPipeline

# --- models and agent (helper D) ---
from toolweave.agent import (
    Agent,
    AgentEvent,
    AgentProcess,
    AgentRunResult,
    AgentStream,
    Blackboard,
    BlackboardSink,
    Budget,
    EmptyAnswer,
    MessageEvent,
    PlanStepFinished,
    PlanStepStarted,
    ProgressEvent,
    RunUsage,
    SubAgentTool,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    current_process,
)
from toolweave.models import (
    AssistantMessage,
    Message,
    Model,
    ModelResponse,
    ModelSettings,
    RetryPolicy,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
    infer_model,
)

# --- mcp (helper E1) ---
from toolweave.mcp import McpGateway, McpMetaConverter, McpToolFactory, McpToolset

# --- builtins (helper E3) ---
from toolweave.builtins import (
    ModelPrice,
    blackboard_facade,
    blackboard_tools,
    communicate_tool,
    format_blackboard_entry,
    process_tools,
    process_tools_facade,
    progress_tool,
)

# --- progressive (helper E2) ---
from toolweave.agent import ToolCallOutcome, ToolInjection, ToolInjectionStrategy
from toolweave.progressive import (
    UnfoldingInjectionStrategy,
    UnfoldingSelection,
    UnfoldingTool,
    tools_from_instance,
    unfolding_tools,
)

# --- agentic (helper E4) ---
from toolweave.agentic import (
    AfterTools,
    AgenticTool,
    AllOf,
    AnyOf,
    DomainToolSource,
    DomainToolTracker,
    OnArtifact,
    OnArtifactMatching,
    OnBlackboard,
    OnBlackboardMatching,
    PlaybookContext,
    PlaybookTool,
    SimpleAgenticTool,
    StateMachineTool,
    ToolChainingInjectionStrategy,
    UnlockCondition,
    WhenPredicate,
)

__all__ = (
    'AfterTools',
    'Agent',
    'AgentEvent',
    'AgenticTool',
    'AgentProcess',
    'AgentRunResult',
    'AgentStream',
    'AllOf',
    'AnyOf',
    'ApprovalLog',
    'ApprovalRecord',
    'ApprovalRequiredTool',
    'ApprovalRule',
    'ArtifactSinkingTool',
    'AssistantMessage',
    'AutoApproveHandler',
    'Blackboard',
    'blackboard_facade',
    'blackboard_tools',
    'BlackboardSink',
    'Budget',
    'CallbackReviewHandler',
    'communicate_tool',
    'CompositeSink',
    'ConsoleReviewHandler',
    'ControlFlowSignal',
    'current_process',
    'DelegatingTool',
    'DomainToolSource',
    'DomainToolTracker',
    'DuplicateToolError',
    'EmptyAnswer',
    'ErrorStrategy',
    'ExitEarly',
    'format_blackboard_entry',
    'FunctionTool',
    'GLOBAL_METRICS',
    'infer_model',
    'ListSink',
    'LoopMemo',
    'McpGateway',
    'McpMetaConverter',
    'McpToolFactory',
    'McpToolset',
    'Message',
    'MessageEvent',
    'Model',
    'ModelError',
    'ModelPrice',
    'ModelResponse',
    'ModelSettings',
    'OnArtifact',
    'OnArtifactMatching',
    'OnBlackboard',
    'OnBlackboardMatching',
    'OneShotPerLoopTool',
    'Parameter',
    'parse_plan',
    'PipelineBuilder',
    'PipelineStep',
    'Plan',
    'PlanEvent',
    'planning_instructions',
    'PlanRun',
    'PlanStep',
    'PlanStepFinished',
    'PlanStepStarted',
    'PlanTool',
    'PlanValidationError',
    'PlaybookContext',
    'PlaybookTool',
    'process_tools',
    'process_tools_facade',
    'progress_tool',
    'ProgressEvent',
    'record_approvals',
    'request_approval',
    'requires_approval',
    'RetryPolicy',
    'ReviewDecision',
    'ReviewHandler',
    'ReviewRequest',
    'RuleBasedReviewHandler',
    'run_plan',
    'run_plan_sync',
    'RunError',
    'RunUsage',
    'SimpleAgenticTool',
    'Sink',
    'StateMachineTool',
    'StepRecord',
    'SubAgentTool',
    'SystemMessage',
    'TextDelta',
    'TextTool',
    'Tool',
    'tool',
    'ToolCall',
    'ToolCallContext',
    'ToolCallDelta',
    'ToolCallFinished',
    'ToolCallOutcome',
    'ToolCallStarted',
    'ToolChainingInjectionStrategy',
    'ToolConfigurationError',
    'ToolDefinition',
    'ToolGroup',
    'ToolInjection',
    'ToolInjectionStrategy',
    'ToolMessage',
    'ToolMetadata',
    'ToolMetrics',
    'ToolNameError',
    'ToolPipeline',
    'ToolResult',
    'tools_from',
    'tools_from_instance',
    'tools_from_safely',
    'Toolset',
    'ToolStats',
    'ToolweaveError',
    'TypedTool',
    'unfolding_tools',
    'UnfoldingInjectionStrategy',
    'UnfoldingSelection',
    'UnfoldingTool',
    'UnknownToolError',
    'UnlockCondition',
    'Usage',
    'UsageLimitExceeded',
    'use_metrics',
    'use_review_handler',
    'UserError',
    'UserMessage',
    'validate_plan',
    'WhenPredicate',
    'with_description',
    'with_note',
)

__version__ = '0.1.0'

# A library adds no handlers of its own: an application that wants toolweave's logs configures logging.
_logging.getLogger('toolweave').addHandler(_logging.NullHandler())


def _present_public_names() -> None:
    """Make reprs and tracebacks say `toolweave.Tool`, not the private module that defines it."""
    for name in __all__:
        obj = globals()[name]
        module = getattr(obj, '__module__', '')
        if isinstance(obj, type) and module.startswith('toolweave.') and module != 'toolweave.exceptions':
            obj.__module__ = 'toolweave'


_present_public_names()
