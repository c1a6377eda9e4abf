"""The agent loop: `Agent`, the state of a run (`AgentProcess`), its events and streaming, sub-agents and the
blackboard sink."""

from __future__ import annotations

from toolweave.agent._agent import Agent, AgentRunResult
from toolweave.agent._blackboard import Blackboard, BlackboardEntry
from toolweave.agent._events import (
    AgentEvent,
    EmptyAnswer,
    EventHub,
    MessageEvent,
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
from toolweave.agent._sink import BlackboardSink
from toolweave.agent._streaming import AgentStream
from toolweave.agent._subagent import SubAgentTool

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
    'EmptyAnswer',
    'EventHub',
    'FinishReason',
    'MessageEvent',
    'PlanStepFinished',
    'PlanStepStarted',
    'ProcessStatus',
    'ProgressEvent',
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
    'current_process',
)
