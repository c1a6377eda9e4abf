"""The unfolding strategy of the agent loop: after a call in which facades unfolded, each is replaced by the tools
it revealed, its guide and its context tool."""

from __future__ import annotations

from collections.abc import Sequence

from toolweave.agent._injection import ToolCallOutcome, ToolInjection
from toolweave.progressive import UnfoldingContextTool, UnfoldingGuideTool, UnfoldingSelection, UnfoldingTool
from toolweave.tools import Tool

__all__ = ('UnfoldingInjectionStrategy',)


class UnfoldingInjectionStrategy:
    """Unfolds the facades a call unfolded: removes each (or, `exclusive`, every tool) and adds the tools it revealed,
    plus a guide with the facade's name and a `<name>_context` tool, unless exclusive. Always on in `Agent`.

    It reads `ToolCallOutcome.unfolded`, what the facades reported while the call ran: a direct call of a facade
    (however it is wrapped), a shortcut call (`{"inner_tool": {...}}`), and facades called as steps of a plan,
    unfolded in the order of the run's tool set. A facade that is no longer in the tool set (called twice in one
    reply) does not unfold again; a call refused before the facade ran (approval, a selector error) reported
    nothing and unfolds nothing.
    """

    def evaluate(self, event: ToolCallOutcome) -> ToolInjection | None:
        current = event.current_tools
        position = {id(tool): index for index, tool in enumerate(current)}
        found: dict[int, tuple[Tool, UnfoldingSelection]] = {}
        for selection in event.unfolded:
            wrapper = next((tool for tool in current if tool.layer(UnfoldingTool) is selection.facade), None)
            if wrapper is not None and id(wrapper) not in found:  # a facade unfolds once, at its first selection
                found[id(wrapper)] = (wrapper, selection)
        ordered = sorted(found.values(), key=lambda pair: position[id(pair[0])])
        return _merge([self._unfold(wrapper, selection, current) for wrapper, selection in ordered])

    @staticmethod
    def _unfold(wrapper: Tool, selection: UnfoldingSelection, current: Sequence[Tool]) -> ToolInjection | None:
        selected = selection.tools
        if not selected:
            return None
        if selection.facade.exclusive:  # only the inner tools remain: no guide or context tool either
            return ToolInjection(remove=tuple(tool.name for tool in current), add=tuple(selected))
        taken = {tool.name for tool in selected}
        extras: list[Tool] = []
        if wrapper.name not in taken:
            extras.append(UnfoldingGuideTool(wrapper.name, selected))
        context = UnfoldingContextTool(wrapper.name, wrapper.description, selected,
                                       selection.facade.child_tool_usage_notes)
        if context.name not in taken:
            extras.append(context)
        return ToolInjection(remove=(wrapper.name,), add=(*selected, *extras))

    def __repr__(self) -> str:
        return 'UnfoldingInjectionStrategy()'


def _merge(injections: Sequence[ToolInjection | None]) -> ToolInjection | None:
    present = [injection for injection in injections if injection is not None]
    if not present:
        return None
    remove = tuple(dict.fromkeys(name for injection in present for name in injection.remove))
    return ToolInjection(remove=remove, add=tuple(tool for injection in present for tool in injection.add))
