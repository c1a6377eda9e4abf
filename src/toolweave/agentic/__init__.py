"""Agentic tools (a tool whose call runs its own inner agent loop over sub-tools) and tool chaining.

- `SimpleAgenticTool`: every sub-tool available at once.
- `PlaybookTool`: sub-tools unlock by conditions (`AfterTools`, `AnyOf`, `AllOf`, `OnArtifact`, ...).
- `StateMachineTool`: sub-tools bound to the states of an enum, with transitions.
- Tool chaining: `with_tool_chaining_from(User)` / `with_tool_chaining_from_any()` on each of them, or
  `DomainToolTracker` + `ToolChainingInjectionStrategy` on a plain `Agent`.
"""

from __future__ import annotations

from toolweave._public import present as _present
from toolweave.agentic._base import DEFAULT_MAX_ITERATIONS, AgenticTool, SystemPrompt
from toolweave.agentic._chaining import (
    DomainToolPredicate,
    DomainToolSource,
    DomainToolTracker,
    ToolChainingInjectionStrategy,
)
from toolweave.agentic._conditions import (
    AfterTools,
    AllOf,
    AnyOf,
    OnArtifact,
    OnArtifactMatching,
    OnBlackboard,
    OnBlackboardMatching,
    PlaybookContext,
    UnlockCondition,
    WhenPredicate,
)
from toolweave.agentic._playbook import LockedTool, PlaybookTool, ToolRegistration
from toolweave.agentic._simple import SimpleAgenticTool
from toolweave.agentic._state_machine import StateBuilder, StateMachineTool, StateToolRegistration

__all__ = (
    'AfterTools',
    'AgenticTool',
    'AllOf',
    'AnyOf',
    'DEFAULT_MAX_ITERATIONS',
    'DomainToolPredicate',
    'DomainToolSource',
    'DomainToolTracker',
    'LockedTool',
    'OnArtifact',
    'OnArtifactMatching',
    'OnBlackboard',
    'OnBlackboardMatching',
    'PlaybookContext',
    'PlaybookTool',
    'SimpleAgenticTool',
    'StateBuilder',
    'StateMachineTool',
    'StateToolRegistration',
    'SystemPrompt',
    'ToolChainingInjectionStrategy',
    'ToolRegistration',
    'UnlockCondition',
    'WhenPredicate',
)

_present('toolweave.agentic', __all__, globals())
