"""`PlaybookTool`: an agentic tool whose sub-tools unlock progressively, by conditions."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolweave.agent import Blackboard, current_process
from toolweave.agentic._base import (
    NO_PROCESS,
    RunState,
    ToolListAgenticTool,
    TrackingTool,
    check_unique,
    object_tools,
    resolve_tools,
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
    as_condition,
    evaluate,
    prerequisite_names,
)
from toolweave.exceptions import ToolConfigurationError, UserError
from toolweave.progressive import UnfoldingTool
from toolweave.tools import Tool, ToolArguments, ToolCallContext, ToolDefinition, ToolResult, ToolsetItem

__all__ = ('LOCKED_PREFIX', 'LockedTool', 'PlaybookTool', 'ToolRegistration', 'default_playbook_prompt')

LOCKED_PREFIX = 'This tool is not yet available.'


def default_playbook_prompt(description: str) -> str:
    """The default system prompt of a `PlaybookTool`."""
    return ('You are an intelligent agent that can use tools to help you complete tasks.\n'
            f'Use the provided tools to perform the following task:\n{description}\n\n'
            'Note: Some tools may require certain prerequisites before they become available.\n'
            'If a tool indicates it is not yet available, use the required prerequisite tools first.')


@dataclass(frozen=True, slots=True)
class LockedTool:
    """A sub-tool and the condition that unlocks it."""

    tool: Tool
    condition: UnlockCondition


@dataclass
class _PlaybookState:
    """The calls and artifacts of one invocation."""

    run: RunState
    called: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def context(self) -> PlaybookContext:
        with self.lock:
            called = tuple(self.called)
        with self.run.lock:
            artifacts = tuple(self.run.seen_artifacts)
        return PlaybookContext(called, artifacts, len(called), current_process())

    def record(self, name: str) -> None:
        with self.lock:
            self.called.append(name)


class _RecordingTool(TrackingTool):
    """An always-available sub-tool: runs, then records the call whatever its result (a prerequisite that failed
    was still used), even when it raised."""

    def __init__(self, delegate: Tool, state: _PlaybookState) -> None:
        super().__init__(delegate, state.run)
        self.playbook = state

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        try:
            return await super().execute(arguments, context)
        finally:
            self.playbook.record(self.delegate.name)


class _ConditionalTool(_RecordingTool):
    """A locked sub-tool: refuses (without running or recording the call) until its condition holds, checked on
    every call; while locked its description says why."""

    def __init__(self, delegate: Tool, condition: UnlockCondition, state: _PlaybookState) -> None:
        super().__init__(delegate, state)
        self.condition = condition

    def _locked_message(self) -> str | None:
        satisfied, hint = evaluate(self.condition, self.playbook.context())
        return None if satisfied else f'{LOCKED_PREFIX} {hint}'

    @property
    def definition(self) -> ToolDefinition:
        original = self.delegate.definition
        message = self._locked_message()
        if message is None:
            return original
        return original.with_description(f'{original.description}\n\n{message}')

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        message = self._locked_message()
        if message is not None:
            return ToolResult.success(message)
        return await super().execute(arguments, context)


class ToolRegistration:
    """`playbook.with_tool(tool)`: say what unlocks the tool; each form returns the new `PlaybookTool`.

    Calling the registration itself is the curried form: `playbook.with_tool(analyze)(search)` unlocks `analyze`
    once `search` has been called, and `playbook.with_tool(report)(Analysis)` once a sub-tool has returned an
    `Analysis` artifact.
    """

    def __init__(self, tool: Tool, playbook: PlaybookTool) -> None:
        self.tool = tool
        self.playbook = playbook

    def _lock(self, condition: UnlockCondition) -> PlaybookTool:
        return self.playbook._add_locked(LockedTool(self.tool, condition))

    def unlocked_by(self, *tools: Tool | str) -> PlaybookTool:
        """Unlocked once every one of `tools` has been called."""
        return self._lock(AfterTools(*tools))

    def __call__(self, *prerequisites: Tool | str | type[Any]) -> PlaybookTool:
        """Unlocked once every prerequisite is met: a tool (or tool name) called, a class produced as an artifact."""
        classes = [item for item in prerequisites if isinstance(item, type)]
        tools = [item for item in prerequisites if not isinstance(item, type)]
        conditions: list[UnlockCondition] = [OnArtifact(cls) for cls in classes]
        if tools or not classes:
            conditions.insert(0, AfterTools(*tools))
        return self._lock(conditions[0] if len(conditions) == 1 else AllOf(*conditions))

    def unlocked_by_all(self, *tools: Tool | str) -> PlaybookTool:
        """Unlocked once every one of `tools` has been called: `AfterTools(*tools)`."""
        return self._lock(AfterTools(*tools))

    def unlocked_by_any(self, *tools: Tool | str) -> PlaybookTool:
        """Unlocked once any one of `tools` has been called: `AnyOf(AfterTools(t) for each t)`."""
        if not tools:
            raise UserError(f'unlocked_by_any for tool {self.tool.name!r} needs at least one tool.')
        return self._lock(AnyOf(*(AfterTools(tool) for tool in tools)))

    def unlocked_by_artifact(self, cls: type[Any]) -> PlaybookTool:
        """Unlocked once a sub-tool has returned an artifact of type `cls` (or a subclass)."""
        return self._lock(OnArtifact(cls))

    def unlocked_by_artifact_matching(self, predicate: Callable[[Any], bool]) -> PlaybookTool:
        """Unlocked once a sub-tool has returned an artifact for which `predicate(artifact)` is true."""
        return self._lock(OnArtifactMatching(predicate))

    def unlocked_by_blackboard(self, cls: type[Any] | str) -> PlaybookTool:
        """Unlocked while the run's blackboard holds an object of type `cls`."""
        return self._lock(OnBlackboard(cls))

    def unlocked_by_blackboard_matching(self, predicate: Callable[[Blackboard], bool]) -> PlaybookTool:
        """Unlocked while `predicate(blackboard)` is true."""
        return self._lock(OnBlackboardMatching(predicate))

    def unlocked_when(self, condition: UnlockCondition | Callable[[PlaybookContext], bool]) -> PlaybookTool:
        """Unlocked while `condition` holds: an `UnlockCondition` or a predicate over the `PlaybookContext`."""
        return self._lock(as_condition(condition))


class PlaybookTool(ToolListAgenticTool):
    """An agentic tool whose sub-tools unlock progressively: some are available from the start, others once
    their condition holds (other tools called, an artifact produced, the blackboard's content, a predicate).

    A locked tool is still offered, its description ending with why it is locked; calling it returns
    `This tool is not yet available. <hint>` without running it or counting the call. Conditions are checked
    on every call and every time the description is read. Chained domain tools are never locked. The result is
    packaged like `SimpleAgenticTool`'s.

    ```python
    from toolweave import Agent, PlaybookTool, tool
    from toolweave.testing import ScriptedModel

    @tool
    def search(topic: str) -> str:
        \'\'\'Search the web.\'\'\'
        return f'3 pages about {topic}'

    @tool
    def analyze() -> str:
        \'\'\'Analyze what was found.\'\'\'
        return 'analysis done'

    inner = ScriptedModel([{'tool': 'analyze', 'arguments': {}},  # locked: nothing searched yet
                           {'tool': 'search', 'arguments': {'topic': 'tides'}},
                           {'tool': 'analyze', 'arguments': {}}, 'Tides follow the moon.'])
    researcher = (PlaybookTool('researcher', 'Research and analyze topics', model=inner)
                  .with_tools(search)                      # always available
                  .with_tool(analyze).unlocked_by(search))  # once `search` has run
    outer = ScriptedModel([{'tool': 'researcher', 'arguments': {}}, 'Done.'])
    Agent(outer, tools=[researcher]).run_sync('Research tides')
    print([m.content for m in inner.requests[1].messages if m.role == 'tool'][0][:31])
    #> This tool is not yet available.
    ```
    """

    kind = 'PlaybookTool'

    locked_tools: tuple[LockedTool, ...] = ()
    """The sub-tools with an unlock condition."""

    @property
    def unlocked_tool_count(self) -> int:
        return len(self.tools)

    @property
    def locked_tool_count(self) -> int:
        return len(self.locked_tools)

    def _all_static(self) -> list[Tool]:
        return [*self.tools, *(locked.tool for locked in self.locked_tools)]

    def with_tools(self, *tools: ToolsetItem) -> PlaybookTool:
        """A copy with more always-available sub-tools."""
        added = (*self.tools, *resolve_tools(tools, f'with_tools of PlaybookTool {self.name!r}'))
        check_unique([*added, *(locked.tool for locked in self.locked_tools)], f'PlaybookTool {self.name!r}')
        return self._copy(tools=added)

    def with_tool_object(self, obj: object) -> PlaybookTool:
        """A copy with the `@tool` methods of `obj` as always-available sub-tools (objects without any: ignored)."""
        return self.with_tools(*object_tools([obj]))

    def with_tool_objects(self, *objects: object) -> PlaybookTool:
        return self.with_tools(*object_tools(objects))

    def with_tool(self, tool: ToolsetItem) -> ToolRegistration:
        """Start registering a locked sub-tool; finish with one of the `ToolRegistration` forms."""
        resolved = resolve_tools([tool], f'with_tool of PlaybookTool {self.name!r}')
        if len(resolved) != 1:
            raise UserError(f'with_tool of PlaybookTool {self.name!r} takes one tool, but {tool!r} gives '
                            f'{len(resolved)}: {[t.name for t in resolved]}. Register them one by one.')
        return ToolRegistration(resolved[0], self)

    def _add_locked(self, locked: LockedTool) -> PlaybookTool:
        check_unique([*self._all_static(), locked.tool], f'PlaybookTool {self.name!r}')
        return self._copy(locked_tools=(*self.locked_tools, locked))

    def _check_prerequisites(self) -> None:
        """A prerequisite naming no tool of this playbook could never be met: a developer mistake (a typo, or a
        tool not added). Auto-discovery and unfolding sub-tools may bring other names, so then it is not checked."""
        if self.auto_discovery or any(tool.layer(UnfoldingTool) is not None for tool in self._all_static()):
            return
        known = {tool.name for tool in self._all_static()}
        known.update(name for source in self.domain_tool_sources for name in source.tool_names)
        for locked in self.locked_tools:
            unknown = [name for name in prerequisite_names(locked.condition) if name not in known]
            if unknown:
                raise ToolConfigurationError(
                    f'Tool {locked.tool.name!r} of PlaybookTool {self.name!r} is unlocked by {unknown!r}, which '
                    f'is not a tool of this playbook (tools: {sorted(known)}). Add the tool with `.with_tools(...)` '
                    'or fix the name.'
                )

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        if not self._all_static() and not self.has_tool_chaining:  # chaining alone is enough to go on
            return ToolResult.failure('No tools available for PlaybookTool')
        process = current_process()
        if process is None:
            return ToolResult.failure(NO_PROCESS)
        self._check_prerequisites()
        text = self.input_text(arguments)
        if isinstance(text, ToolResult):
            return text
        state = _PlaybookState(self.new_state(unpack_collections=True))
        tools: list[Tool] = [_RecordingTool(tool, state) for tool in self.tools]
        tools.extend(_ConditionalTool(locked.tool, locked.condition, state) for locked in self.locked_tools)
        tools.extend(self.placeholders(state.run))
        instructions = self.make_prompt(process, text, default_playbook_prompt(self.description))
        result = await self.run_inner(context, tools, instructions, text, state.run,
                                      lambda tool: _RecordingTool(tool, state))
        return state.run.package(result.output)
