"""Progressive disclosure: `UnfoldingTool` facades that reveal their inner tools in the agent loop when called.

The facades, their guide and context tools and the `@unfolding_tools` class decorator live here; the agent loop's
`UnfoldingInjectionStrategy`, which swaps a facade for what it revealed, is in `toolweave.agent`.
"""

from __future__ import annotations

from toolweave._public import present as _present
from toolweave.progressive._decorator import tools_from_instance, unfolding_tools
from toolweave.progressive._guide import UnfoldingContextTool, UnfoldingGuideTool
from toolweave.progressive._introspect import UnfoldingSpec
from toolweave.progressive._unfolding import Selector, UnfoldingSelection, UnfoldingTool, record_unfoldings

__all__ = (
    'record_unfoldings',
    'Selector',
    'tools_from_instance',
    'unfolding_tools',
    'UnfoldingContextTool',
    'UnfoldingGuideTool',
    'UnfoldingSelection',
    'UnfoldingSpec',
    'UnfoldingTool',
)

_present('toolweave.progressive', __all__, globals())
