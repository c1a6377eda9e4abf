"""The agent loop: `Agent`, the state of a run (`AgentProcess`), its events, sub-agents and the blackboard sink."""

from __future__ import annotations

from toolweave.agent._agent import Agent, AgentRunResult
from toolweave.agent._blackboard import Blackboard, BlackboardEntry
from toolweave.agent._events import (
    AgentEvent,
    EventHub,
    MessageEvent,
    PlanStepFinished,
    PlanStepStarted,
    ProgressEvent,
    ToolCallFinished,
    ToolCallStarted,
)
from toolweave.agent._injection import ToolCallOutcome, ToolInjection, ToolInjectionStrategy
from toolweave.agent._loop import FinishReason
from toolweave.agent._process import AgentProcess, Budget, ProcessStatus, RunUsage, ToolCallRecord, current_process
from toolweave.agent._sink import BlackboardSink
from toolweave.agent._subagent import SubAgentTool

__all__ = (
    'Agent',
    'AgentEvent',
    'AgentProcess',
    'AgentRunResult',
    'Blackboard',
    'BlackboardEntry',
    'BlackboardSink',
    'Budget',
    'EventHub',
    'FinishReason',
    'MessageEvent',
    'PlanStepFinished',
    'PlanStepStarted',
    'ProcessStatus',
    'ProgressEvent',
    'RunUsage',
    'SubAgentTool',
    'ToolCallFinished',
    'ToolCallOutcome',
    'ToolCallRecord',
    'ToolCallStarted',
    'ToolInjection',
    'ToolInjectionStrategy',
    'current_process',
)
