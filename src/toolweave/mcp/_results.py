"""What a served tool call sends back: a `ToolResult` as an MCP `CallToolResult`.

Three shapes:

- the result of an MCP tool (`McpCallResult`, a gateway's upstream tool) is passed on as the upstream server
  sent it: content blocks (text, images, audio, resources), structured content, `isError`; only the protocol's
  own `_meta` keys of the upstream hop are dropped;
- a plan (`PlanRun`) becomes its summary text, structured content `{"results": {step: value}, "errors":
  {step: message}}`, the images, audio and resources its output steps produced, and `isError` only when no
  output step succeeded;
- any other result: its text, its value as structured content where the protocol allows, `isError` on failure.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeAlias

from pydantic_core import to_jsonable_python

from toolweave.mcp._content import McpCallResult, structured_value
from toolweave.mcp._meta import is_reserved_meta_key
from toolweave.plan import PlanRun
from toolweave.tools._result import ToolResult

__all__ = ('ContentLog', 'call_result', 'collecting_content', 'remember_content', 'strip_reserved_meta')

ContentLog: TypeAlias = list[tuple[str, Mapping[str, Any], list[Any]]]
"""(tool name, arguments, non-text content blocks) of each MCP call made while a plan ran."""
_content_log: ContextVar[ContentLog | None] = ContextVar('toolweave_mcp_content_log', default=None)


@contextmanager
def collecting_content() -> Iterator[ContentLog]:
    """Within the block, MCP tool calls note the non-text content blocks they return (for a plan's result)."""
    log: ContentLog = []
    token = _content_log.set(log)
    try:
        yield log
    finally:
        _content_log.reset(token)


def remember_content(tool_name: str, arguments: Mapping[str, Any], result: ToolResult) -> None:
    """Note the images, audio and resources of an MCP call made inside `collecting_content()`."""
    log = _content_log.get()
    if log is None or not isinstance(result, McpCallResult) or result.mcp is None:
        return
    blocks = [block for block in result.mcp.content if getattr(block, 'type', 'text') != 'text']
    if blocks:
        log.append((tool_name, arguments, blocks))


def strip_reserved_meta(meta: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`_meta` without the protocol's keys (they describe one hop, such as the server that answered)."""
    if not meta:
        return None
    kept = {key: value for key, value in meta.items() if not is_reserved_meta_key(key)}
    return kept or None


def call_result(result: ToolResult, *, any_json: bool, content_log: ContentLog | None = None) -> Any:
    """The `CallToolResult` for `result`. `any_json`: the protocol allows structured content that is not an
    object (2026-07-28). `content_log`: the content blocks noted while the call ran (see `collecting_content`)."""
    import mcp_types as types

    if isinstance(result, McpCallResult) and result.mcp is not None:
        return _passed_on(types, result.mcp, any_json=any_json)
    if result.ok and isinstance(result.value, PlanRun):
        return _plan_result(types, result, result.value, content_log or [])
    text = result.output if result.ok else (result.error or '')
    return types.CallToolResult(
        content=[types.TextContent(text=text)] if text else [],
        structured_content=structured_value(result, any_json=any_json),
        is_error=not result.ok,
    )


def _passed_on(types: Any, upstream: Any, *, any_json: bool) -> Any:
    structured = upstream.structured_content
    if not any_json and structured is not None and not isinstance(structured, dict):
        structured = None  # older protocols only carry an object; the text still says it
    return types.CallToolResult(content=list(upstream.content), structured_content=structured,
                                is_error=upstream.is_error, meta=strip_reserved_meta(upstream.meta))


def _plan_result(types: Any, result: ToolResult, run: PlanRun, content_log: ContentLog) -> Any:
    wanted = set(run.plan.output_steps or ())
    outputs = [record for record in run.steps if not wanted or record.id in wanted]
    results = {record.id: to_jsonable_python(record.value, fallback=str) for record in outputs if record.ok}
    # A step a false `when` skipped is an outcome, not an error: it is in neither.
    errors = {record.id: record.error or f'step {record.status}' for record in run.errors}
    content: list[Any] = [types.TextContent(text=result.output)]
    for record in outputs:
        if record.ok and record.items is not None:  # a for_each step: each element's call has its own blocks
            for item in record.items:
                content.extend(_blocks_of(record.tool, item.arguments, content_log))
        elif record.ok:
            content.extend(_blocks_of(record.tool, record.arguments, content_log))
    return types.CallToolResult(content=content, structured_content={'results': results, 'errors': errors},
                                is_error=bool(outputs) and not results)


def _blocks_of(tool_name: str, arguments: Any, content_log: ContentLog) -> list[Any]:
    for name, called_with, blocks in content_log:
        if name == tool_name and called_with == arguments:
            return blocks
    return []
