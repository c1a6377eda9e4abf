"""`progress` and `communicate`: a model talks to the user while the run goes on.

`progress` emits a transient `ProgressEvent` (a live status line); `communicate` emits a persistent
`MessageEvent` carrying an assistant message (a chat bubble that stays). Outside an agent run both log a
warning and answer softly: a model that reports progress must never break because nobody is watching.
"""

from __future__ import annotations

import logging
from typing import Any

from toolweave.agent import current_process
from toolweave.builtins._common import BuiltinTool, metadata, read_string, string_schema
from toolweave.tools import ToolDefinition, ToolResult

__all__ = ('USER_OUTPUT_KEY', 'communicate_tool', 'progress_tool')

logger = logging.getLogger('toolweave.builtins')

USER_OUTPUT_KEY = 'toolweave.user_output'
"""`ToolMetadata.extra` flag set on `progress` and `communicate`: the tool shows its own output to the user, so
a display may skip its raw tool-call lines."""
CATEGORY = 'communication'


def progress_tool() -> BuiltinTool:
    """The `progress` tool: one required string parameter, `status`.

    In a run it calls `AgentProcess.report_progress(status)` (a transient `ProgressEvent`) and returns
    `Progress reported: <status>`. A missing or blank `status` fails with `Missing 'status' parameter`.

    ```python
    from toolweave.builtins import progress_tool

    print(progress_tool().call_sync({'status': 'reading files'}).output)
    #> Progress noted (no active process to display it).
    ```
    """
    definition = ToolDefinition(
        'progress',
        "Report progress to the user. Call this during long-running work to show what you're doing.",
        string_schema('status', "Short progress message describing what you're currently doing"),
        metadata=metadata(CATEGORY, **{USER_OUTPUT_KEY: True}),
    )
    return BuiltinTool(definition, _progress)


def communicate_tool() -> BuiltinTool:
    """The `communicate` tool: one required string parameter, `message`.

    In a run it calls `AgentProcess.send_message(message)` (a persistent `MessageEvent` with an assistant
    message) and returns `Message sent to user.`. A missing or blank `message` fails with
    `Missing 'message' parameter`.
    """
    definition = ToolDefinition(
        'communicate',
        'Send a permanent message to the user. Use this to report results, share links (e.g., PR URLs), or inform '
        'the user of important outcomes. Unlike progress, this creates a visible chat message.',
        string_schema('message', 'The message to send to the user'),
        metadata=metadata(CATEGORY, **{USER_OUTPUT_KEY: True}),
    )
    return BuiltinTool(definition, _communicate)


def _progress(arguments: dict[str, Any]) -> ToolResult:
    status = read_string(arguments, 'status', 'progress')
    if status is None:
        return ToolResult.failure("Missing 'status' parameter")
    process = current_process()
    if process is None:
        logger.warning('Progress tool called outside an agent run; ignoring: %s', status)
        return ToolResult.success('Progress noted (no active process to display it).')
    process.report_progress(status)
    return ToolResult.success(f'Progress reported: {status}')


def _communicate(arguments: dict[str, Any]) -> ToolResult:
    message = read_string(arguments, 'message', 'communicate')
    if message is None:
        return ToolResult.failure("Missing 'message' parameter")
    process = current_process()
    if process is None:
        logger.warning('Communicate tool called outside an agent run; ignoring: %s', message)
        return ToolResult.success('Message noted (no active process to deliver it).')
    process.send_message(message)
    return ToolResult.success('Message sent to user.')
