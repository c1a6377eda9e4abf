"""The agent loop: `Agent`, the state of a run (`AgentProcess`) and its budget, its events and streaming, the
tool-injection hook and the unfolding strategy, sub-agents and the blackboard sink."""

from __future__ import annotations

from toolweave._public import present as _present
from toolweave.agent._agent import MAX_DEPTH, Agent, AgentRunResult
from toolweave.agent._blackboard import Blackboard, BlackboardEntry
from toolweave.agent._events import (
    AgentEvent,
    EmptyAnswer,
    EventHub,
    MessageEvent,
    PlanItemFinished,
    PlanStepFinished,
    PlanStepStarted,
    ProgressEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from toolweave.agent._injection import ToolCallOutcome, ToolInjection, ToolInjectionStrategy
from toolweave.agent._loop import FinishReason
from toolweave.agent._process import AgentProcess, Budget, ProcessStatus, RunUsage, ToolCallRecord, current_process
from toolweave.agent._sink import BlackboardSink, publish_to_blackboard
from toolweave.agent._streaming import AgentStream
from toolweave.agent._subagent import SubAgentTool
from toolweave.agent._unfolding import UnfoldingInjectionStrategy

__all__ = (
    'Agent',
    'AgentEvent',
    'AgentProcess',
    'AgentRunResult',
    'AgentStream',
    'Blackboard',
    'BlackboardEntry',
    'BlackboardSink',
    'Budget',
    'current_process',
    'EmptyAnswer',
    'EventHub',
    'FinishReason',
    'MAX_DEPTH',
    'MessageEvent',
    'PlanItemFinished',
    'PlanStepFinished',
    'PlanStepStarted',
    'ProcessStatus',
    'ProgressEvent',
    'publish_to_blackboard',
    'RunUsage',
    'SubAgentTool',
    'TextDelta',
    'ToolCallDelta',
    'ToolCallFinished',
    'ToolCallOutcome',
    'ToolCallRecord',
    'ToolCallStarted',
    'ToolInjection',
    'ToolInjectionStrategy',
    'UnfoldingInjectionStrategy',
)

_present('toolweave.agent', __all__, globals())
