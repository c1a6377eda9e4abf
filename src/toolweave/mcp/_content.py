"""Conversions between MCP and toolweave: tool results (`McpCallResult`), behaviour hints (annotations), and MCP
tool names under toolweave's name rule."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from pydantic_core import to_jsonable_python

from toolweave._json import compact
from toolweave.exceptions import ToolNameError
from toolweave.tools import ToolResult
from toolweave.tools._definition import NAME_PATTERN, ToolDefinition, ToolMetadata
from toolweave.tools._result import NO_MESSAGE

__all__ = ('HINT_FIELDS', 'InvalidNamePolicy', 'McpCallResult', 'adapt_names', 'annotations_of', 'definition_of',
           'describes_text', 'hints_of', 'json_in_text', 'render_content', 'structured_value', 'to_tool_result')

HINT_FIELDS = (('read_only', 'read_only_hint'), ('destructive', 'destructive_hint'),
               ('idempotent', 'idempotent_hint'), ('open_world', 'open_world_hint'))
"""`ToolMetadata` hint fields and the MCP `ToolAnnotations` fields they stand for."""

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
        return f'[{kind} {block.mime_type}, {_decoded_size(block.data)} bytes]'
    if kind == 'resource_link':
        return f'[resource link {block.name!r}: {block.uri}]'
    if kind == 'resource':
        resource = block.resource
        text = getattr(resource, 'text', None)
        if isinstance(text, str):
            return text
        mime = getattr(resource, 'mime_type', None) or 'application/octet-stream'
        return f'[resource {resource.uri} ({mime}), {_decoded_size(getattr(resource, "blob", ""))} bytes]'
    return f'[{kind or type(block).__name__} content]'


@dataclass(frozen=True, slots=True)
class McpCallResult(ToolResult):
    """The `ToolResult` of an MCP tool call, which also keeps the `CallToolResult` the server sent: a server in
    front of the tool (a gateway) passes that on unchanged, images, audio, resources and all."""

    mcp: Any = field(default=None, compare=False, repr=False)
    """The SDK's `CallToolResult`, as received."""


def _decoded_size(data: str) -> int:
    """How many bytes a base64 text decodes to (without decoding it)."""
    return len(data) * 3 // 4 - len(data[-2:]) + len(data[-2:].rstrip('='))


def to_tool_result(result: Any) -> McpCallResult:
    """A `ToolResult` for an MCP `CallToolResult`: `isError` -> a failure with the text. Otherwise the text is the
    output and `value` is the data the result carries, the same data a model reading the text sees:

    - the structured content, unless it only wraps the text (an object of one string equal to the text, such as
      server-filesystem's `{"content": "<the text>"}`): then, as without structured content,
    - the text's JSON when the text is a JSON object or array (strict JSON), so `$ref:step[0].name` reads what
      the model was shown;
    - otherwise no value: the text is the result (plans parse a JSON number or string in it themselves).

    When the server sent structured content and no text, the text is its compact JSON."""
    text = render_content(result.content)
    if result.is_error:
        return McpCallResult('', text if text.strip() else NO_MESSAGE, mcp=result)
    structured = result.structured_content
    if structured is not None and not _wraps_text(structured, text):
        return McpCallResult(text or compact(structured), None, structured, True, mcp=result)
    data = json_in_text(text)
    if data is not None:
        return McpCallResult(text, None, data, True, mcp=result)
    return McpCallResult(text, mcp=result)


def _wraps_text(structured: Any, text: str) -> bool:
    """Whether `structured` is an object whose one entry is `text` itself (it says nothing the text does not)."""
    return isinstance(structured, dict) and len(structured) == 1 and bool(text) and next(
        iter(structured.values())) == text


def json_in_text(text: str) -> dict[str, Any] | list[Any] | None:
    """The JSON object or array `text` holds (surrounding whitespace aside), or `None`: not JSON, NaN or Infinity
    in it, nested too deeply for the parser, or a number too long to convert."""
    stripped = text.strip()
    if not stripped or (stripped[0], stripped[-1]) not in (('{', '}'), ('[', ']')):
        return None
    try:
        data = json.loads(stripped, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, (dict, list)) else None


def _reject_constant(name: str) -> Any:
    raise ValueError(f'{name} is not JSON')


def describes_text(output_schema: Any) -> bool:
    """Whether an output schema is an object of one string property: the shape of structured content that only
    wraps the text (see `to_tool_result`), so the value a plan refers to follows the text, not this schema."""
    if not isinstance(output_schema, Mapping):
        return False
    properties = output_schema.get('properties')
    if not isinstance(properties, Mapping) or len(properties) != 1:
        return False
    only = next(iter(properties.values()))
    return isinstance(only, Mapping) and only.get('type') == 'string'


def hints_of(annotations: Any) -> dict[str, bool]:
    """The `ToolMetadata` hint fields an MCP `ToolAnnotations` sets (only the hints it states)."""
    if annotations is None:
        return {}
    hints: dict[str, bool] = {}
    for ours, theirs in HINT_FIELDS:
        value = getattr(annotations, theirs, None)
        if isinstance(value, bool):
            hints[ours] = value
    return hints


def definition_of(name: str, tool: Any, server: str, **metadata: Any) -> ToolDefinition:
    """The `ToolDefinition` of an MCP server's tool (the SDK's `Tool`) under `name`: its description and input
    schema, its hints as metadata fields, and in `metadata.extra` the tool as listed (`mcp_tool`, which a server
    in front of it lists unchanged), its server name, output schema (unless it only wraps the text, see
    `describes_text`) and annotations. `metadata` adds fields."""
    extra: dict[str, Any] = {'mcp_name': tool.name, 'mcp_server': server, 'mcp_tool': tool}
    if tool.output_schema is not None and not describes_text(tool.output_schema):
        # `output_schema` is the contract of the value plans refer to; a schema that only wraps the text is not.
        extra['output_schema'] = tool.output_schema
    if tool.annotations is not None:
        extra['annotations'] = tool.annotations.model_dump(exclude_none=True)
    fields: dict[str, Any] = {**hints_of(tool.annotations), **metadata}
    return ToolDefinition(name, tool.description or '', dict(tool.input_schema), ToolMetadata(**fields, extra=extra))


def annotations_of(metadata: ToolMetadata) -> dict[str, bool]:
    """The MCP `ToolAnnotations` fields (SDK names) for the hints `metadata` states; `{}` when it states none."""
    return {theirs: value for ours, theirs in HINT_FIELDS if (value := getattr(metadata, ours)) is not None}


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
