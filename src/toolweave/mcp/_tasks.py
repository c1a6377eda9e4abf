"""Task-augmented tool calls (2025-11-25 tasks, an extension since 2026-07-28) made for a client that calls the
tool like any other.

`call_as_task` sends `tools/call` with a `task`, then `tasks/result`, which waits for the result while the
server's questions (elicitation in `input_required`, naming the task) arrive; meanwhile `tasks/get` is polled and
each new status message is reported as progress. A call that does not finish (it timed out, it was cancelled)
cancels its task, so nothing runs on for nobody.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio

from toolweave.mcp._session import ProgressCallback, send_raw
from toolweave.tools._result import ToolResult

__all__ = ('call_as_task',)

logger = logging.getLogger('toolweave.mcp.gateway')

TASK_TTL_MS = 3_600_000
"""How long the server is asked to keep a task."""
TASK_POLL = (0.2, 5.0)
"""Seconds between `tasks/get` polls of a running task (the server's `pollInterval`, kept within these)."""


async def call_as_task(client: Any, mcp_name: str, arguments: dict[str, Any], meta: dict[str, Any] | None, *,
                       where: str, progress: ProgressCallback | None, server: str,
                       on_task: Callable[[str], None]) -> ToolResult:
    """Call `mcp_name` as a task; `on_task` hears the task's id as soon as it exists. Every failure is a
    `ToolResult` that starts with `where`."""
    import mcp_types as types
    from mcp import MCPError

    from toolweave.mcp._content import to_tool_result

    params: dict[str, Any] = {'name': mcp_name, 'arguments': arguments, 'task': {'ttl': TASK_TTL_MS}}
    if meta:
        params['_meta'] = meta
    try:
        created = types.CreateTaskResult.model_validate(await send_raw(client, 'tools/call', params), by_name=False)
    except MCPError as exc:
        return ToolResult.failure(f'{where} failed: {exc.message} (MCP error {exc.code}).')
    task_id = created.task.task_id
    on_task(task_id)
    finished = False
    try:
        async with anyio.create_task_group() as watch:
            watch.start_soon(_report, client, task_id, created.task, progress, server)
            raw = await send_raw(client, 'tasks/result', {'taskId': task_id})
            finished = True
            watch.cancel_scope.cancel()
        return to_tool_result(types.CallToolResult.model_validate(raw, by_name=False))
    except MCPError as exc:
        return ToolResult.failure(f'{where} failed: {exc.message} (MCP error {exc.code}).')
    finally:
        if not finished:  # timed out or cancelled: the task must not run on for nobody
            await _cancel(client, task_id, server)


async def _report(client: Any, task_id: str, task: Any, progress: ProgressCallback | None, server: str) -> None:
    """Poll the task's status and report each new status message as progress."""
    import mcp_types as types

    said: str | None = None
    count = 0
    while True:
        message = getattr(task, 'status_message', None)
        if message and message != said and progress is not None:
            said, count = message, count + 1
            await progress(float(count), None, message)
        interval = (getattr(task, 'poll_interval', None) or 1000) / 1000
        await anyio.sleep(min(max(interval, TASK_POLL[0]), TASK_POLL[1]))
        try:
            task = types.GetTaskResult.model_validate(await send_raw(client, 'tasks/get', {'taskId': task_id}),
                                                      by_name=False)
        except Exception as exc:
            logger.debug('Polling task %s of MCP server %r failed: %s', task_id, server, exc)
            return


async def _cancel(client: Any, task_id: str, server: str) -> None:
    with anyio.CancelScope(shield=True), anyio.move_on_after(2):
        try:
            await send_raw(client, 'tasks/cancel', {'taskId': task_id})
        except Exception as exc:  # the task had ended: nothing to cancel
            logger.debug('Cancelling task %s of MCP server %r: %s', task_id, server, exc)
