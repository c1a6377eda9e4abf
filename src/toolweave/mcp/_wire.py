"""The wire guard: a JSON-RPC request that reaches a served MCP server gets an answer, however malformed it is.

The SDK drops a message it cannot parse (stdio) or answers it with `"id": null` (HTTP), so a client that sent a
batch, `"jsonrpc": "1.0"`, non-object `params`, invalid UTF-8 or JSON nested deeper than the parser goes would
wait for an answer that never comes, or could not tell which request failed. `rejection` is called with a
message the SDK refused: it reads the `id`s at the message's top level (a scan of tokens that keeps no stack,
so no depth or size can make it recurse) and builds the JSON-RPC error answer, one per request for a batch
(MCP has not allowed batches since 2025-06-18). A message without an `id` (a notification, a response) gets
none, as JSON-RPC says.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ('MAX_MESSAGE_BYTES', 'PARSE_ERROR', 'Rejection', 'error_answer', 'misread', 'oversized', 'rejection')

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""The largest message accepted on stdio (a line) and over HTTP (a request body), as the SDK's HTTP default."""

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:,]|[^\s\[\]{}:,"]+')
_SCAN_LIMIT = MAX_MESSAGE_BYTES + 1024
"""The scan for `id`s reads at most this many characters of a message (a longer one is refused anyway)."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """The answer to a refused message: `body` is the JSON text to send (an object, or an array for a batch)."""

    body: bytes
    code: int
    message: str


def error_answer(request_id: Any, code: int, message: str) -> dict[str, Any]:
    """One JSON-RPC error response."""
    return {'jsonrpc': '2.0', 'id': request_id, 'error': {'code': code, 'message': message}}


def rejection(raw: bytes, problem: str = '') -> Rejection | None:
    """The answer to `raw`, a message the SDK could not read (`problem`: what its parser said), or `None` when the
    message carries no request `id` to answer."""
    try:
        text = raw.decode('utf-8')
    except UnicodeDecodeError as exc:
        ids = _top_level_ids(raw.decode('utf-8', errors='replace'))
        return _answer(ids, PARSE_ERROR, f'Parse error: the message is not valid UTF-8 (byte {exc.start}). '
                                         'Send JSON encoded as UTF-8.')
    if len(raw) > MAX_MESSAGE_BYTES:
        return oversized(raw, len(raw))
    try:
        value = json.loads(text)
    except RecursionError:
        return _answer(_top_level_ids(text), PARSE_ERROR, _TOO_DEEP)
    except ValueError as exc:
        return _answer(_top_level_ids(text), PARSE_ERROR, f'Parse error: the message is not JSON ({exc}).')
    if isinstance(value, list):
        return _batch(value)
    if not isinstance(value, dict):
        return _answer([None], INVALID_REQUEST, 'Invalid Request: a message must be a JSON object, got '
                                                f'{type(value).__name__}.')
    if 'id' not in value or 'method' not in value:
        return None  # a notification or a response: nothing to answer
    request_id = value['id'] if _valid_id(value['id']) else None
    code, message = _envelope_problem(value) or (INVALID_REQUEST, _short(problem))
    if 'recursion limit' in problem:
        code, message = PARSE_ERROR, _TOO_DEEP
    return _answer([request_id], code, message)


_TOO_DEEP = 'Parse error: the message is nested too deeply (the limit is about 200 levels of arrays and objects).'


def misread(raw: bytes, message: Any) -> Rejection | None:
    """The answer to a message the SDK read as a notification although it carries an `id` (of a type JSON-RPC
    does not allow, which the SDK drops), or `None` for any other message."""
    import mcp_types as types

    if not isinstance(message, types.JSONRPCNotification) or b'"id"' not in raw:
        return None
    if not _top_level_ids(raw.decode('utf-8', errors='replace')):
        return None
    return _answer([None], INVALID_REQUEST, 'Invalid Request: "id" must be a string or a number.')


def oversized(head: bytes, size: int) -> Rejection:
    """The answer to a message of `size` bytes, over `MAX_MESSAGE_BYTES`, whose start is `head`."""
    ids = _top_level_ids(head.decode('utf-8', errors='replace'))
    return _answer(ids, INVALID_REQUEST, f'Invalid Request: the message has {size:,} bytes; the limit is '
                                         f'{MAX_MESSAGE_BYTES:,}. Send less at once.')


def _envelope_problem(message: dict[str, Any]) -> tuple[int, str] | None:
    if message.get('jsonrpc') != '2.0':
        return INVALID_REQUEST, f'Invalid Request: "jsonrpc" must be "2.0", got {json.dumps(message.get("jsonrpc"))}.'
    if not _valid_id(message['id']) or message['id'] is None:
        return INVALID_REQUEST, 'Invalid Request: "id" must be a string or a number.'
    if not isinstance(message['method'], str):
        return INVALID_REQUEST, 'Invalid Request: "method" must be a string.'
    if 'params' in message and not isinstance(message['params'], dict):
        kind = 'an array' if isinstance(message['params'], list) else json.dumps(message['params'])[:40]
        return INVALID_PARAMS, f'Invalid params: MCP params must be a JSON object, got {kind}.'
    return None


def _batch(items: list[Any]) -> Rejection | None:
    message = ('Invalid Request: batches are not supported (MCP removed them in 2025-06-18). Send each request '
               'as its own message.')
    answers = [error_answer(item['id'], INVALID_REQUEST, message) for item in items
               if isinstance(item, dict) and 'method' in item and 'id' in item and _valid_id(item['id'])]
    if not items:
        answers = [error_answer(None, INVALID_REQUEST, 'Invalid Request: an empty array.')]
    if not answers:
        return None
    return Rejection(json.dumps(answers, separators=(',', ':')).encode(), INVALID_REQUEST, message)


def _answer(ids: list[Any], code: int, message: str) -> Rejection:
    """One error per id; an id that could not be read is answered as `null`, as JSON-RPC says."""
    answers = [error_answer(request_id, code, message) for request_id in ids or [None]]
    body = answers[0] if len(answers) == 1 else answers
    return Rejection(json.dumps(body, separators=(',', ':')).encode(), code, message)


def _valid_id(value: Any) -> bool:
    return value is None or isinstance(value, str) or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _short(problem: str) -> str:
    first = problem.strip().splitlines()[0] if problem.strip() else 'the message is not a JSON-RPC request'
    return f'Invalid Request: {first[:200]}'


def _top_level_ids(text: str) -> list[Any]:
    """The `id` of a message that may not parse (an object), or of each request of a batch (an array), read by a
    flat scan of its tokens: a depth counter, no stack, no recursion. An id that cannot be read is `None`."""
    tokens = _TOKEN.finditer(text, 0, _SCAN_LIMIT)
    depth = 0
    batch = False
    ids: list[Any] = []
    expect_key = False
    key: str | None = None
    for match in tokens:
        token = match.group()
        if token in '{[':
            if depth == 0:
                batch = token == '['
            elif depth == (2 if batch else 1) and key == 'id' and not expect_key:  # an id that is a container
                if batch and ids:
                    ids[-1] = None
                elif not batch:
                    ids = [None]
                key = None
            depth += 1
            expect_key = token == '{'
            if batch and depth == 2 and token == '{':
                ids.append(None)
            continue
        if token in '}]':
            depth -= 1
            expect_key = False
            continue
        if token == ',':
            expect_key = _in_object_level(depth, batch)
            continue
        if token == ':':
            expect_key = False
            continue
        if expect_key:
            key = _string(token)
            continue
        owner_depth = 2 if batch else 1
        if depth == owner_depth and key == 'id':
            value = _literal(token)
            if batch and ids:
                ids[-1] = value
            elif not batch:
                ids = [value]
        key = None
    return ids


def _in_object_level(depth: int, batch: bool) -> bool:
    # A comma at the level of the object that owns the `id` is followed by a key; elsewhere it does not matter.
    return depth == (2 if batch else 1)


def _string(token: str) -> str | None:
    try:
        value = json.loads(token)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _literal(token: str) -> Any:
    try:
        value = json.loads(token)
    except ValueError:
        return None
    return value if _valid_id(value) else None
