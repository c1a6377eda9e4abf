"""toolweave: a tool runtime for LLM agents. One plan, one round-trip, parallel steps.

The names below are grouped by concept, in the order the layers build on each other: tools, then what wraps
them (decorators, approval), then what runs many of them (pipelines, plans, progressive disclosure), then the
agent and what builds on it (agentic tools, built-in tools), then models, MCP and tracing. `__all__` lists them
all.
"""

from __future__ import annotations

import logging as _logging

from toolweave._public import present as _present
from toolweave._version import __version__ as __version__

# --- errors ---------------------------------------------------------------------------------------------------
from toolweave.exceptions import (
    ApprovalPending,
    ControlFlowSignal,
    DuplicateToolError,
    ExitEarly,
    ModelError,
    PlanStoreError,
    PlanValidationError,
    RunError,
    ToolConfigurationError,
    ToolNameError,
    ToolweaveError,
    UnknownToolError,
    UsageLimitExceeded,
    UserError,
)

# --- tools: the seam, the ways to build one, toolsets, metrics -------------------------------------------------
from toolweave.tools import (
    GLOBAL_METRICS,
    FunctionTool,
    Parameter,
    TextTool,
    Tool,
    ToolArguments,
    ToolCallContext,
    ToolDefinition,
    ToolGroup,
    ToolMetadata,
    ToolMetrics,
    ToolResult,
    Toolset,
    ToolsetItem,
    ToolStats,
    TypedTool,
    tool,
    tools_from,
    tools_from_safely,
    use_metrics,
)

# --- wrapping a tool: decorators and artifact sinks ------------------------------------------------------------
from toolweave.decorators import (
    ArtifactSinkingTool,
    CompositeSink,
    DelegatingTool,
    ListSink,
    LoopMemo,
    OneShotPerLoopTool,
    Sink,
    with_description,
    with_note,
)

# --- approval ---------------------------------------------------------------------------------------------------
from toolweave.approval import (
    ApprovalLog,
    ApprovalRecord,
    ApprovalRequiredTool,
    ApprovalRule,
    AutoApproveHandler,
    CallbackReviewHandler,
    ConsoleReviewHandler,
    PlanReviewDecision,
    PlanReviewRequest,
    ReviewDecision,
    ReviewHandler,
    ReviewRequest,
    RuleBasedReviewHandler,
    record_approvals,
    request_approval,
    requires_approval,
    use_review_handler,
)

# --- pipelines ----------------------------------------------------------------------------------------------------
from toolweave.pipeline import ErrorStrategy, PipelineBuilder, PipelineStep, ToolPipeline

# --- plans --------------------------------------------------------------------------------------------------------
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
from toolweave.plan.durable import resume_plan, resume_plan_sync

# --- progressive disclosure -----------------------------------------------------------------------------------------
from toolweave.progressive import UnfoldingSelection, UnfoldingTool, tools_from_instance, unfolding_tools

# --- the agent: runs, budgets, events, the blackboard, sub-agents, tool injection ------------------------------------
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
    PlanItemFinished,
    PlanStepFinished,
    PlanStepStarted,
    ProgressEvent,
    RunUsage,
    SubAgentTool,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallOutcome,
    ToolCallStarted,
    ToolInjection,
    ToolInjectionStrategy,
    UnfoldingInjectionStrategy,
    current_process,
    publish_to_blackboard,
)

# --- agentic tools and tool chaining ----------------------------------------------------------------------------------
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

# --- built-in tools ---------------------------------------------------------------------------------------------------
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

# --- models ----------------------------------------------------------------------------------------------------------
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

# --- MCP -------------------------------------------------------------------------------------------------------------
from toolweave.mcp import McpGateway, McpMetaConverter, McpToolFactory, McpToolset

# --- tracing --------------------------------------------------------------------------------------------------------
from toolweave.tracing import InstrumentationSettings, instrument, instrumentation

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
    'ApprovalPending',
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
    'instrument',
    'instrumentation',
    'InstrumentationSettings',
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
    'PlanItemFinished',
    'planning_instructions',
    'PlanReviewDecision',
    'PlanReviewRequest',
    'PlanRun',
    'PlanStep',
    'PlanStepFinished',
    'PlanStepStarted',
    'PlanStoreError',
    'PlanTool',
    'PlanValidationError',
    'PlaybookContext',
    'PlaybookTool',
    'process_tools',
    'process_tools_facade',
    'progress_tool',
    'ProgressEvent',
    'publish_to_blackboard',
    'record_approvals',
    'request_approval',
    'requires_approval',
    'resume_plan',
    'resume_plan_sync',
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
    'tool',
    'Tool',
    'ToolArguments',
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
    'ToolsetItem',
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

# A library adds no handlers of its own: an application that wants toolweave's logs configures logging.
_logging.getLogger('toolweave').addHandler(_logging.NullHandler())

_present('toolweave', __all__, globals(), top_level=True)
