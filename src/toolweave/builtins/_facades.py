"""The built-in tool sets as unfolding facades: one tool the model sees until it asks for more."""

from __future__ import annotations

from collections.abc import Mapping

from toolweave.builtins._blackboard_tools import (
    BLACKBOARD_FACADE_DESCRIPTION,
    BLACKBOARD_FACADE_NOTES,
    BlackboardEntryFormatter,
    blackboard_tools,
)
from toolweave.builtins._process_tools import (
    PROCESS_FACADE_DESCRIPTION,
    PROCESS_FACADE_NOTES,
    ModelPrice,
    process_tools,
)
from toolweave.progressive import UnfoldingTool

__all__ = ('blackboard_facade', 'process_tools_facade')


def process_tools_facade(*, prices: Mapping[str, ModelPrice] | None = None) -> UnfoldingTool:
    """The process tools behind one facade named `agent_process`: calling it unfolds the six
    `process_*` tools (see `process_tools`)."""
    return UnfoldingTool.of('agent_process', PROCESS_FACADE_DESCRIPTION, process_tools(prices=prices),
                            child_tool_usage_notes=PROCESS_FACADE_NOTES)


def blackboard_facade(formatter: BlackboardEntryFormatter | None = None) -> UnfoldingTool:
    """The blackboard tools behind one facade named `blackboard`: calling it unfolds the five
    `blackboard_*` tools (see `blackboard_tools`)."""
    return UnfoldingTool.of('blackboard', BLACKBOARD_FACADE_DESCRIPTION, blackboard_tools(formatter),
                            child_tool_usage_notes=BLACKBOARD_FACADE_NOTES)
