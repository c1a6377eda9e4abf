"""The unfolding strategy of the agent loop, and the two tools it injects next to the revealed ones: the guide
(the facade's name, so a repeated call lists the tools instead of failing) and `<name>_context`."""

from __future__ import annotations

from collections.abc import Sequence

from toolweave.agent._injection import ToolCallOutcome, ToolInjection
from toolweave.progressive._unfolding import (
    UnfoldingSelection,
    UnfoldingTool,
    find_unfolding,
    raw_input,
    shortcut_target,
)
from toolweave.tools._context import ToolCallContext
from toolweave.tools._definition import ToolDefinition
from toolweave.tools._result import ToolResult
from toolweave.tools._tool import Tool, ToolArguments

__all__ = ('UnfoldingContextTool', 'UnfoldingGuideTool', 'UnfoldingInjectionStrategy', 'context_tool_name')

_CONTEXT_SUFFIX = '_context'


def context_tool_name(facade_name: str) -> str:
    """`<facade>_context`, with the facade part shortened if needed to stay within the 64-character name rule."""
    return f'{facade_name[:64 - len(_CONTEXT_SUFFIX)]}{_CONTEXT_SUFFIX}'


def _has_notes(notes: str | None) -> bool:
    return notes is not None and bool(notes.strip())


class UnfoldingGuideTool(Tool):
    """Takes the facade's place after it unfolds. Calling it lists the tools the facade revealed; it never unfolds
    again, so a model that calls the facade twice is pointed at the real tools instead of looping (UF-6, D10).
    An input naming one of those tools (`{"tool_name": {...}}`) calls that tool directly, as the facade would."""

    def __init__(self, name: str, tools: Sequence[Tool]) -> None:
        self.tools = tuple(tools)
        listed = ', '.join(tool.name for tool in self.tools)
        self._definition = ToolDefinition(
            name, f'Already opened: its tools are available now ({listed}). Call one of them directly.'
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    def message(self) -> str:
        names = [tool.name for tool in self.tools]
        return (f'{self.name} is already open. Its tools are available now: {", ".join(names)}. Call one of them '
                f'directly (for example `{names[0]}`); calling {self.name} again does not change the tools.')

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        target = shortcut_target(raw_input(arguments), self.tools)
        if target is not None:
            tool, payload = target
            return await tool.call(payload, context)
        return ToolResult.success(self.message())


class UnfoldingContextTool(Tool):
    """`<facade>_context`: keeps the facade's purpose and usage notes once, next to the revealed tools (UF-7)."""

    def __init__(self, facade_name: str, facade_description: str, tools: Sequence[Tool], notes: str | None) -> None:
        self.tools = tuple(tools)
        self.facade_description = facade_description
        self.notes = notes
        description = f'{facade_description}. Available: {", ".join(tool.name for tool in self.tools)}'
        if _has_notes(notes):
            description = f'{description}. {notes}'
        self._definition = ToolDefinition(context_tool_name(facade_name), description)

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    def message(self) -> str:
        lines = [f'Tools for {self.facade_description}:']
        lines.extend(f'- {tool.name}: {tool.description}' for tool in self.tools)
        text = '\n'.join(lines)
        if _has_notes(self.notes):
            text = f'{text}\n\nUsage notes: {self.notes}'
        return text.strip()

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        return ToolResult.success(self.message())


class UnfoldingInjectionStrategy:
    """Unfolds a facade after it is called: removes it (or, `exclusive`, every tool) and adds the tools it
    revealed, plus the guide and context tools unless exclusive (UF-5..UF-13, D10). Always on in `Agent`.

    A facade that is no longer in the tool set (called twice in one reply) does not unfold again, a failed call
    (refused approval, a selector error) unfolds nothing, and a shortcut call unfolds as a plain call would.
    Facades called as steps of an `execute_tool_plan` plan unfold too, in plan order.
    """

    def evaluate(self, event: ToolCallOutcome) -> ToolInjection | None:
        current = event.current_tools
        facade = find_unfolding(event.tool)
        if facade is not None:
            return self._unfold(event.tool, facade, self._selected(facade, event), current)
        return _merge([self._unfold(wrapper, selection.facade, selection.tools, current)
                       for wrapper, selection in _plan_unfoldings(event.result.value, current)])

    @staticmethod
    def _unfold(wrapper: Tool, facade: UnfoldingTool, selected: Sequence[Tool],
                current: Sequence[Tool]) -> ToolInjection | None:
        if not selected or not any(tool is wrapper for tool in current):
            return None  # UF-9: nothing to reveal; UF-6: already unfolded (the guide has its name now)
        if facade.exclusive:  # UF-12: only the inner tools remain (C2: no guide or context tool)
            return ToolInjection(remove=tuple(tool.name for tool in current), add=tuple(selected))
        taken = {tool.name for tool in selected}
        extras: list[Tool] = []
        if wrapper.name not in taken:
            extras.append(UnfoldingGuideTool(wrapper.name, selected))
        context = UnfoldingContextTool(wrapper.name, wrapper.description, selected, facade.child_tool_usage_notes)
        if context.name not in taken:
            extras.append(context)
        return ToolInjection(remove=(wrapper.name,), add=(*selected, *extras))

    @staticmethod
    def _selected(facade: UnfoldingTool, event: ToolCallOutcome) -> tuple[Tool, ...]:
        value = event.result.value
        if isinstance(value, UnfoldingSelection) and value.facade is facade:
            return value.tools
        if shortcut_target(event.arguments, facade.inner_tools) is None:
            return ()  # the facade call failed before selecting anything
        try:
            return tuple(facade.select_tools(event.arguments))
        except Exception:
            return ()  # the shortcut already ran; a selector that fails here just leaves the tools as they are

    def __repr__(self) -> str:
        return 'UnfoldingInjectionStrategy()'


def _plan_unfoldings(value: object, current: Sequence[Tool]) -> list[tuple[Tool, UnfoldingSelection]]:
    """The facades a plan run called successfully, each with the tool of the run's set it is behind."""
    from toolweave.plan import PlanRun

    if not isinstance(value, PlanRun):
        return []
    by_name = {tool.name: tool for tool in current}
    found: list[tuple[Tool, UnfoldingSelection]] = []
    for step in value.steps:
        selection = step.value
        wrapper = by_name.get(step.tool)
        if (step.status == 'succeeded' and isinstance(selection, UnfoldingSelection) and wrapper is not None
                and find_unfolding(wrapper) is selection.facade
                and all(wrapper is not seen for seen, _ in found)):
            found.append((wrapper, selection))
    return found


def _merge(injections: Sequence[ToolInjection | None]) -> ToolInjection | None:
    present = [injection for injection in injections if injection is not None]
    if not present:
        return None
    remove = tuple(dict.fromkeys(name for injection in present for name in injection.remove))
    return ToolInjection(remove=remove, add=tuple(tool for injection in present for tool in injection.add))
