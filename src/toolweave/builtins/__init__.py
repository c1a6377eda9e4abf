"""Built-in tools a model can use to look at and speak from the agent run it is part of.

- `process_tools()`: `process_status`, `process_budget`, `process_cost`, `process_history`,
  `process_tools_stats`, `process_models`;
- `blackboard_tools()`: `blackboard_list`, `blackboard_get`, `blackboard_last`, `blackboard_describe`,
  `blackboard_count`;
- `progress_tool()` and `communicate_tool()`.

Every tool reads `current_process()` when it is called, so the same tool objects serve every run; outside a
run each answers with a fixed sentence instead of failing.
"""

from __future__ import annotations

from toolweave._public import present as _present
from toolweave.builtins._blackboard_tools import (
    BlackboardEntryFormatter,
    HasContent,
    HasInfoString,
    blackboard_tools,
    format_blackboard_entry,
)
from toolweave.builtins._facades import blackboard_facade, process_tools_facade
from toolweave.builtins._process_tools import ModelPrice, process_tools
from toolweave.builtins._progress import USER_OUTPUT_KEY, communicate_tool, progress_tool

__all__ = (
    'blackboard_facade',
    'blackboard_tools',
    'BlackboardEntryFormatter',
    'communicate_tool',
    'format_blackboard_entry',
    'HasContent',
    'HasInfoString',
    'ModelPrice',
    'process_tools',
    'process_tools_facade',
    'progress_tool',
    'USER_OUTPUT_KEY',
)

_present('toolweave.builtins', __all__, globals())
