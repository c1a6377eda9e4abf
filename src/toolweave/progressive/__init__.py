"""Progressive disclosure: `UnfoldingTool` facades that reveal their inner tools in the agent loop when called."""

from __future__ import annotations

from toolweave.progressive._introspect import UnfoldingSpec, tools_from_instance, unfolding_tools
from toolweave.progressive._strategy import UnfoldingContextTool, UnfoldingGuideTool, UnfoldingInjectionStrategy
from toolweave.progressive._unfolding import Selector, UnfoldingSelection, UnfoldingTool, find_unfolding

__all__ = (
    'Selector',
    'UnfoldingContextTool',
    'UnfoldingGuideTool',
    'UnfoldingInjectionStrategy',
    'UnfoldingSelection',
    'UnfoldingSpec',
    'UnfoldingTool',
    'find_unfolding',
    'tools_from_instance',
    'unfolding_tools',
)

for _cls in (UnfoldingInjectionStrategy, UnfoldingSelection, UnfoldingTool):
    _cls.__module__ = 'toolweave'  # reprs and docs show the public path
del _cls
