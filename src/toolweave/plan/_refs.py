"""Reference syntax: find `$ref` forms in step arguments, compile them once, resolve them against results.

Forms (id-based plans), at any depth of the arguments:

- whole string `"$ref:STEP"` / `"$ref:STEP.PATH"`: the referenced value, JSON type kept;
- object `{"$ref": "STEP.PATH"}` (an object whose only key is `$ref`): the same;
- embedded `"text {{$ref:STEP.PATH}} text"`: spliced in as text (strings raw, the rest as compact JSON);
  `\\{{` writes a literal `{{`.

PATH: `.key`, `.N` and `[N]` (negative N counts from the end), `["any key"]`. Index-based plans write
`{"$ref": "steps[N].result.PATH"}`, spliced as text like the embedded form (strings raw, other values
as JSON text).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, NamedTuple, TypeAlias

from toolweave._json import compact

__all__ = (
    'EMBEDDED',
    'ID_PATTERN',
    'IDS_PATTERN',
    'INDEX',
    'INDEX_POSITION',
    'ITEM',
    'ITEM_POSITION',
    'PREFIX',
    'SIMPLE',
    'SYNTAX_HINT',
    'Ref',
    'RefSyntaxError',
    'ResolveError',
    'format_path',
    'lookup',
    'parse_index_ref',
    'parse_item_ref',
    'parse_ref',
    'splice_text',
)

ID_PATTERN = re.compile(r'[A-Za-z0-9_-]{1,64}')
"""Step ids: the same rule as tool names."""
IDS_PATTERN = re.compile(f'(?:{ID_PATTERN.pattern}\n)*')
"""Step ids, each followed by a newline: a plan's ids, joined by newlines, checked in one pass."""

PREFIX = '$ref:'
EMBEDDED = re.compile(r'\\\{\{|\{\{\s*(\$ref:|\$item\b|\$index\b)(.*?)\s*\}\}')
"""`\\{{` (a literal `{{`), or an embedded reference: group 1 its kind (`$ref:`, `$item`, `$index`), group 2
the rest."""
ITEM = '$item'
INDEX = '$index'
ITEM_POSITION = -1
"""Where a bound `$item` reference points: the element a `for_each` step is being called for."""
INDEX_POSITION = -2
"""Where a bound `$index` reference points: the position of that element."""
_INDEX_REF = re.compile(r'steps\[(\d+)\]\.result(.*)', re.DOTALL)
_INT = re.compile(r'-?\d+')
SYNTAX_HINT = 'Write "$ref:STEP", "$ref:STEP.field", "$ref:STEP.items[0].name" or "$ref:STEP[\\"key with.dots\\"]".'

Segment: TypeAlias = str | int
"""A `str` key (`.name`, `["name"]`, or `.N`, which also indexes arrays) or an `int` index (`[N]`)."""


class RefSyntaxError(ValueError):
    """A malformed reference; the message says what is wrong with it."""


class ResolveError(Exception):
    """A reference could not be resolved at run time; the message is the step's error."""


class Ref(NamedTuple):
    """One reference: a step (by id, bound to its index in the plan) and a path inside its value. A tuple, so
    the garbage collector stops tracking it (plans hold many)."""

    step: str
    path: tuple[Segment, ...]
    source: str
    """The reference as written, for messages."""
    position: int = -1
    """Position of `step` in the plan, set when the plan is validated."""


def format_path(path: Sequence[Segment]) -> str:
    """`user.items[0]` for `('user', 'items', 0)`; quoted keys where plain ones would be ambiguous."""
    out: list[str] = []
    for seg in path:
        if isinstance(seg, int):
            out.append(f'[{seg}]')
        elif seg and '.' not in seg and '[' not in seg:
            out.append(f'.{seg}' if out else seg)
        else:
            out.append(f'[{json.dumps(seg)}]')
    return ''.join(out)


def _parse_path(text: str, pos: int) -> tuple[Segment, ...]:
    segs: list[Segment] = []
    n = len(text)
    while pos < n:
        ch = text[pos]
        if ch == '.':
            end = pos + 1
            while end < n and text[end] not in '.[':
                end += 1
            key = text[pos + 1 : end]
            if not key:
                raise RefSyntaxError(f"empty field name at position {pos + 1} (a '.' must be followed by a name)")
            segs.append(key)
            pos = end
        elif ch == '[':
            close, seg = _parse_bracket(text, pos)
            segs.append(seg)
            pos = close + 1
        else:
            raise RefSyntaxError(f"unexpected {ch!r} at position {pos} (expected '.' or '[')")
    return tuple(segs)


def _parse_bracket(text: str, pos: int) -> tuple[int, Segment]:
    quote = text[pos + 1 : pos + 2]
    if quote in ('"', "'"):
        end = pos + 2
        while end < len(text) and text[end] != quote:
            end += 2 if text[end] == '\\' else 1
        if end >= len(text) or text[end + 1 : end + 2] != ']':
            raise RefSyntaxError(f'unterminated quoted key at position {pos}')
        raw = text[pos + 2 : end]
        try:
            key = json.loads(f'"{raw}"') if quote == '"' else raw.replace("\\'", "'")
        except json.JSONDecodeError:
            raise RefSyntaxError(f'bad escape in quoted key {raw!r}') from None
        return end + 1, key
    close = text.find(']', pos)
    if close < 0:
        raise RefSyntaxError(f"unclosed '[' at position {pos}")
    inner = text[pos + 1 : close].strip()
    if not _INT.fullmatch(inner):
        raise RefSyntaxError(f'[{inner}] is not an index; use [0], [-1] or a quoted key like ["{inner}"]')
    return close, int(inner)


SIMPLE = re.compile(r'([A-Za-z0-9_-]{1,64})((?:\.[A-Za-z0-9_]+)*)')


def parse_ref(body: str) -> Ref:
    """Parse `STEP`, `STEP.PATH` or `STEP[N]...` (the text after `$ref:`); `PLAN/STEP...` names a step of an
    earlier plan of the same agent run."""
    simple = SIMPLE.fullmatch(body)
    if simple is not None:
        dotted = simple.group(2)
        return Ref(simple.group(1), tuple(dotted[1:].split('.')) if dotted else (), body)
    end = 0
    while end < len(body) and body[end] not in '.[':
        end += 1
    step = body[:end]
    if not all(ID_PATTERN.fullmatch(part) for part in step.split('/', 1)):
        what = 'a step id is missing' if not step else f'{step!r} is not a valid step id (letters, digits, _ and -)'
        raise RefSyntaxError(what)
    return Ref(step, _parse_path(body, end), body)


def parse_item_ref(text: str) -> Ref:
    """Parse `$item`, `$item.PATH` or `$index` (a `for_each` step's element, or its position)."""
    if text == INDEX:
        return Ref(INDEX, (), text, INDEX_POSITION)
    if not text.startswith(ITEM) or text[len(ITEM):len(ITEM) + 1] not in ('', '.', '['):
        raise RefSyntaxError('write "$item", "$item.field" or "$index"')
    return Ref(ITEM, _parse_path(text, len(ITEM)), text, ITEM_POSITION)


def parse_index_ref(text: str) -> tuple[int, tuple[Segment, ...]]:
    """Parse an index-based reference, `steps[N].result.PATH`, into the step position and the path."""
    match = _INDEX_REF.fullmatch(text)
    if match is None:
        raise RefSyntaxError('it must look like "steps[N].result.field" (for example "steps[0].result.items[0].name")')
    rest = match.group(2)
    if not rest:
        raise RefSyntaxError('it needs a field path after ".result" (for example "steps[0].result.items[0].name")')
    return int(match.group(1)), _parse_path(rest, 0)


# --- resolution ----------------------------------------------------------------------------------------------

_MISSING = object()


def _describe_keys(value: Any) -> str:
    if isinstance(value, dict):
        keys = [str(k) for k in value]
        shown = ', '.join(keys[:30]) + (', ...' if len(keys) > 30 else '')
        return f'Available keys: {shown or "(none, the object is empty)"}.'
    if isinstance(value, list):
        return f'The array has {len(value)} items (valid indexes 0..{len(value) - 1} or -{len(value)}..-1).'
    return f'The value there is {json.dumps(value, default=str)[:80]}, which has no fields.'


def lookup(value: Any, is_text: bool, ref: Ref, missing: str, current_step: str) -> Any:
    """The value `ref.path` points at inside `value` (the referenced step's value)."""
    path = ref.path
    if not path:
        return value
    if is_text:
        raise ResolveError(
            f"Cannot extract field '{format_path(path)}' from step '{ref.step}' output: not valid JSON"
        )
    current = value
    for depth, seg in enumerate(path):
        found: Any = _MISSING
        if isinstance(current, dict):
            found = current.get(seg if isinstance(seg, str) else str(seg), _MISSING)
        elif isinstance(current, list):
            if isinstance(seg, int) or _INT.fullmatch(seg):
                index = int(seg)
                if -len(current) <= index < len(current):
                    found = current[index]
        if found is _MISSING:
            if missing == 'null':
                return None
            at = format_path(path[:depth]) or 'the top level'
            of = 'the for_each element' if ref.step == ITEM else f"step '{ref.step}' output"
            raise ResolveError(
                f"Reference '{ref.source}' in step '{current_step}': field '{format_path(path[depth:depth + 1])}' "
                f"not found in {of} at {at}. {_describe_keys(current)}"
            )
        current = found
    return current


def splice_text(value: Any) -> str:
    """How a value reads inside a longer string: strings raw, everything else compact JSON."""
    if isinstance(value, str):
        return value
    return compact(value)
