"""Conversions between MCP tool results and `ToolResult`, and between MCP tool names and toolweave's name rule."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal, TypeAlias

from pydantic_core import to_jsonable_python

from toolweave._json import compact
from toolweave.exceptions import ToolNameError
from toolweave.tools import ToolResult
from toolweave.tools._definition import NAME_PATTERN

__all__ = ('InvalidNamePolicy', 'adapt_names', 'render_content', 'structured_value', 'to_tool_result')

InvalidNamePolicy: TypeAlias = Literal['adapt', 'reject']
"""What an `McpToolset` does with a server tool whose name breaks the name rule `^[A-Za-z0-9_-]{1,64}$`."""

_BAD_CHARS = re.compile(r'[^A-Za-z0-9_-]')


def render_content(blocks: Sequence[Any]) -> str:
    """The text a model sees for MCP content blocks: text blocks as they are, other blocks as a short
    bracketed description (binary data is never pasted into a prompt). Blocks are joined with newlines."""
    return '\n'.join(_render_block(block) for block in blocks)


def _render_block(block: Any) -> str:
    kind = getattr(block, 'type', None)
    if kind == 'text':
        return str(block.text)
    if kind in ('image', 'audio'):
        return f'[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes]'
    if kind == 'resource_link':
        return f'[resource link {block.name!r}: {block.uri}]'
    if kind == 'resource':
        resource = block.resource
        text = getattr(resource, 'text', None)
        if isinstance(text, str):
            return text
        mime = getattr(resource, 'mime_type', None) or 'application/octet-stream'
        return f'[resource {resource.uri} ({mime}), {len(getattr(resource, "blob", "")) * 3 // 4} bytes]'
    return f'[{kind or type(block).__name__} content]'


def to_tool_result(result: Any) -> ToolResult:
    """A `ToolResult` for an MCP `CallToolResult`: `isError` -> failure with the text; structured content ->
    `value` (the text stays the output, or the compact JSON of the value when the server sent no text)."""
    text = render_content(result.content)
    if result.is_error:
        return ToolResult.failure(text)
    structured = result.structured_content
    if structured is None:
        return ToolResult.success(text)
    if not text:
        text = compact(structured)
    return ToolResult.success(text, structured)


def structured_value(result: ToolResult, *, any_json: bool) -> Any | None:
    """What a served tool sends as `structuredContent`: its value as JSON when it has one. Protocol versions
    before 2026-07-28 only allow an object, so other values are left to the text there (`any_json=False`)."""
    if not result.ok or not result.has_value or isinstance(result.value, str) or result.value is None:
        return None
    try:
        value = to_jsonable_python(result.value)
    except (TypeError, ValueError):
        return None
    if isinstance(value, dict) or (any_json and isinstance(value, (list, int, float, bool))):
        return value
    return None


def adapt_names(names: Iterable[str], policy: InvalidNamePolicy, server: str) -> dict[str, str]:
    """Map each server tool name to the name toolweave uses.

    Valid names are kept. With `'adapt'`, a name that breaks the rule gets every character outside
    `[A-Za-z0-9_-]` replaced by `_`; a name longer than 64 characters (or one that would clash) is cut and
    ends with `_` plus 8 hex digits of its hash, so the same server always gives the same names. With
    `'reject'`, such a name raises `ToolNameError`.
    """
    originals = list(names)
    taken = {name for name in originals if NAME_PATTERN.fullmatch(name)}
    mapping: dict[str, str] = {}
    for name in originals:
        if NAME_PATTERN.fullmatch(name):
            mapping[name] = name
            continue
        if policy == 'reject':
            raise ToolNameError(
                f'MCP server {server} offers a tool named {name!r}, which breaks the tool name rule '
                '^[A-Za-z0-9_-]{1,64}$. Use `invalid_names="adapt"` to rename such tools, or leave the tool out '
                'on the server.'
            )
        adapted = _BAD_CHARS.sub('_', name) or '_'
        if len(adapted) > 64 or adapted in taken:
            digest = hashlib.sha1(name.encode()).hexdigest()[:8]
            adapted = f'{adapted[:55]}_{digest}'
        taken.add(adapted)
        mapping[name] = adapted
    return mapping
