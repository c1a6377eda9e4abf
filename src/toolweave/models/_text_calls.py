"""Tool calls a model wrote as text: a reply with no `tool_calls` whose whole content is a call of an offered tool.

Small open models on servers that do not parse their output into `tool_calls` (llama.cpp's `llama-server` with
a template it cannot match, a model that ignores its template) write the call as text instead. The forms read
here are the ones such models write:

- a JSON object `{"name": ..., "arguments": {...}}` (or `"parameters"`), bare or in a ```` ``` ```` fence, one or
  several (a list, or objects one after the other);
- Hermes / Qwen: `<tool_call>{"name": ..., "arguments": ...}</tool_call>` (the closing tag may be cut off);
- Llama 3: `<|python_tag|>{"name": ..., "parameters": ...}` (several separated by `;`);
- Mistral: `[TOOL_CALLS][{"name": ..., "arguments": ...}]` or `[TOOL_CALLS]name[ARGS]{...}`.

A reply is read as calls only if it *is* calls and nothing else: every call names an offered tool and its
arguments parse to a JSON object. Prose that mentions a tool, a JSON answer the user asked for, a call of a tool
that is not offered, or arguments that do not parse: all stay text, as the model wrote them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

from toolweave.models._base import ModelResponse, ToolCall
from toolweave.models._stream import new_call_id

__all__ = ('MAX_TEXT_CALL_CHARS', 'could_be_text_call', 'read_text_calls', 'with_text_calls')

MAX_TEXT_CALL_CHARS = 100_000
"""Longer replies are not read as calls (nobody writes a 100 kB call; parsing stays cheap)."""

_FENCE = re.compile(r'\A```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?```\Z', re.DOTALL)
_HERMES = re.compile(r'<tool_call>(.*?)(?:</tool_call>|\Z)', re.DOTALL)
_MISTRAL_ARGS = re.compile(r'\[TOOL_CALLS\]\s*([A-Za-z0-9_.:-]+)\s*\[ARGS\]', re.DOTALL)
_MARKERS = ('<tool_call>', '<|python_tag|>', '[TOOL_CALLS]', '```')
_OPENERS = ('{', '[')


def could_be_text_call(text: str) -> bool:
    """Whether a reply that starts with `text` may still turn out to be a call written as text (for streaming:
    text is held back while this is true)."""
    head = text.lstrip()
    if not head:
        return True
    if head[0] == '{':  # a JSON object: its first key follows
        rest = head[1:].lstrip()
        return not rest or rest[0] == '"'
    if head[0] == '[' and not head.startswith('[TOOL_CALLS]'[:len(head)]):  # a list of call objects
        rest = head[1:].lstrip()
        return not rest or could_be_text_call(rest)
    return any(head.startswith(marker) or marker.startswith(head) for marker in _MARKERS)


def read_text_calls(text: str | None, offered: Collection[str]) -> tuple[ToolCall, ...]:
    """The tool calls `text` is, or `()` when it is not entirely calls of `offered` tools with object arguments."""
    if not text or not offered or len(text) > MAX_TEXT_CALL_CHARS:
        return ()
    body = text.strip()
    try:
        specs = _specs(body)
    except (ValueError, RecursionError):
        return ()
    calls: list[ToolCall] = []
    for spec in specs or ():
        call = _call(spec, offered)
        if call is None:
            return ()
        calls.append(call)
    return tuple(calls)


def with_text_calls(response: ModelResponse, offered: Collection[str]) -> ModelResponse:
    """`response` with its text made into tool calls when it has none and its text is calls of `offered` tools."""
    if response.tool_calls:
        return response
    calls = read_text_calls(response.text, offered)
    if not calls:
        return response
    return ModelResponse(text=None, tool_calls=calls, usage=response.usage, model_name=response.model_name,
                         truncated=response.truncated)


def _specs(body: str) -> list[Any] | None:
    """The call objects of each form, or `None` when `body` is none of them."""
    if body.startswith('<tool_call>'):
        parts = _HERMES.findall(body)
        if _HERMES.sub('', body).strip():  # text around or between the calls
            return None
        return [_loads(part.strip()) for part in parts]
    if body.startswith('<|python_tag|>'):
        return [_loads(part) for part in body.removeprefix('<|python_tag|>').split(';') if part.strip()]
    if body.startswith('[TOOL_CALLS]'):
        return _mistral(body)
    fenced = _FENCE.match(body)
    if fenced is not None:
        body = fenced.group(1).strip()
    if body.startswith(_OPENERS):
        return _json_sequence(body)
    return None


def _mistral(body: str) -> list[Any] | None:
    names = _MISTRAL_ARGS.findall(body)
    if not names:  # `[TOOL_CALLS][{"name": ..., "arguments": ...}]`
        return _json_sequence(body.removeprefix('[TOOL_CALLS]').strip())
    specs: list[Any] = []
    pieces = _MISTRAL_ARGS.split(body)
    if pieces[0].strip():
        return None
    for name, arguments in zip(pieces[1::2], pieces[2::2], strict=True):
        specs.append({'name': name, 'arguments': _loads(arguments.strip())})
    return specs


def _json_sequence(body: str) -> list[Any]:
    """One JSON value, or several one after the other (whitespace or commas between); a list is its items."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    position = 0
    while position < len(body):
        value, position = decoder.raw_decode(body, position)
        values.extend(value if isinstance(value, list) else [value])
        while position < len(body) and body[position] in ' \t\r\n,':
            position += 1
    return values


def _loads(text: str) -> Any:
    return json.loads(text)


def _call(spec: Any, offered: Collection[str]) -> ToolCall | None:
    if not isinstance(spec, dict):
        return None
    if isinstance(spec.get('function'), dict):  # {"type": "function", "function": {"name", "arguments"}}
        spec = spec['function']
    name = spec.get('name')
    if not isinstance(name, str) or name not in offered:
        return None
    extra = set(spec) - {'name', 'arguments', 'parameters', 'type', 'id'}
    if extra:
        return None
    arguments = spec.get('arguments', spec.get('parameters', {}))
    if isinstance(arguments, str):  # arguments as a JSON string, OpenAI's own wire form
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return None
    if not isinstance(arguments, dict):
        return None
    return ToolCall(new_call_id(), name, json.dumps(arguments, ensure_ascii=False))
