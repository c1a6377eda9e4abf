"""Reference syntax: find `$ref` forms in step arguments, compile them once, resolve them against results.

Forms (id-based plans), at any depth of the arguments:

- whole string `"$ref:STEP"` / `"$ref:STEP.PATH"`: the referenced value, JSON type kept;
- object `{"$ref": "STEP.PATH"}` (an object whose only key is `$ref`): the same;
- embedded `"text {{$ref:STEP.PATH}} text"`: spliced in as text (strings raw, the rest as compact JSON);
  `\\{{` writes a literal `{{`.

PATH: `.key`, `.N` and `[N]` (negative N counts from the end), `["any key"]`. Index-based plans write
`{"$ref": "steps[N].result.PATH"}`, spliced as text like the embedded form (seed 001: strings raw, other values
as JSON text).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

__all__ = (
    'ID_PATTERN',
    'Compiled',
    'Compiler',
    'Ref',
    'RefSyntaxError',
    'ResolveError',
    'compile_arguments',
    'format_path',
    'lookup',
    'resolve',
    'splice_text',
)

ID_PATTERN = re.compile(r'[A-Za-z0-9_-]{1,64}')
"""Step ids (D3): the same rule as tool names."""

_PREFIX = '$ref:'
_EMBEDDED = re.compile(r'\\\{\{|\{\{\s*\$ref:(.*?)\s*\}\}')
_INDEX_REF = re.compile(r'steps\[(\d+)\]\.result(.*)', re.DOTALL)
_INT = re.compile(r'-?\d+')
_SYNTAX_HINT = 'Write "$ref:STEP", "$ref:STEP.field", "$ref:STEP.items[0].name" or "$ref:STEP[\\"key with.dots\\"]".'

Segment: TypeAlias = str | int
"""A `str` key (`.name`, `["name"]`, or `.N`, which also indexes arrays) or an `int` index (`[N]`)."""


class RefSyntaxError(ValueError):
    """A malformed reference; the message says what is wrong with it."""


class ResolveError(Exception):
    """A reference could not be resolved at run time; the message is the step's error."""


@dataclass(frozen=True, slots=True)
class Ref:
    """One reference: a step (by id, bound to its index in the plan) and a path inside its value."""

    step: str
    path: tuple[Segment, ...]
    source: str
    """The reference as written, for messages."""
    index: int = -1
    """Position of `step` in the plan, set when the plan is compiled."""


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


_SIMPLE = re.compile(r'([A-Za-z0-9_-]{1,64})((?:\.[A-Za-z0-9_]+)*)')


def parse_ref(body: str) -> Ref:
    """Parse `STEP`, `STEP.PATH` or `STEP[N]...` (the text after `$ref:`)."""
    simple = _SIMPLE.fullmatch(body)
    if simple is not None:
        dotted = simple.group(2)
        return Ref(simple.group(1), tuple(dotted[1:].split('.')) if dotted else (), body)
    end = 0
    while end < len(body) and body[end] not in '.[':
        end += 1
    step = body[:end]
    if not ID_PATTERN.fullmatch(step):
        what = 'a step id is missing' if not step else f'{step!r} is not a valid step id (letters, digits, _ and -)'
        raise RefSyntaxError(what)
    return Ref(step, _parse_path(body, end), body)


def parse_index_ref(text: str) -> tuple[int, tuple[Segment, ...]]:
    """Parse seed 001's `steps[N].result.PATH` into the step position and the path."""
    match = _INDEX_REF.fullmatch(text)
    if match is None:
        raise RefSyntaxError('it must look like "steps[N].result.field" (for example "steps[0].result.items[0].name")')
    rest = match.group(2)
    if not rest:
        raise RefSyntaxError('it needs a field path after ".result" (for example "steps[0].result.items[0].name")')
    return int(match.group(1)), _parse_path(rest, 0)


# --- compiled argument templates ------------------------------------------------------------------------------

_Kind: TypeAlias = Literal['ref', 'text', 'dict', 'list', 'const']


class Compiled:
    """Arguments with references, compiled once: `resolve` rebuilds only the parts that hold references."""

    __slots__ = ('items', 'kind', 'ref', 'value')

    def __init__(self, kind: _Kind, *, ref: Ref | None = None, items: Any = None, value: Any = None) -> None:
        self.kind = kind
        self.ref = ref
        self.items = items
        self.value = value


class Compiler:
    """Compiles the arguments of each step of one plan in turn (`compile(arguments, step_index)`), caching
    every whole-string reference it has seen: plans repeat the same references a lot."""

    __slots__ = ('cache', 'dialect', 'ids', 'problems', 'refs', 'step_index', 'trail')

    def __init__(self, ids: Mapping[str, int], dialect: str) -> None:
        self.ids = ids
        self.dialect = dialect
        self.step_index = 0
        self.refs: list[Ref] = []
        self.problems: list[str] = []
        self.trail: list[Segment] = []
        self.cache: dict[str, tuple[Compiled, Ref]] = {}

    def compile(self, arguments: Any, step_index: int) -> tuple[Compiled | None, list[Ref], list[str]]:
        """The template (`None` when there is nothing to replace), every reference in order of appearance, and
        the problems found (each starting with the field, e.g. `arguments.data[0]: ...`)."""
        self.step_index = step_index
        self.refs = []
        self.problems = []
        compiled = self.node(arguments)
        return compiled, self.refs, self.problems

    def where(self) -> str:
        return 'arguments' + ('' if not self.trail else ('.' if isinstance(self.trail[0], str) else '')
                              + format_path(self.trail))

    def bind(self, ref: Ref, written: str) -> Ref | None:
        index = self.ids.get(ref.step)
        if index is None:
            known = ', '.join(self.ids) if len(self.ids) <= 50 else ', '.join(list(self.ids)[:50]) + ', ...'
            self.problems.append(
                f'{self.where()}: reference {written!r} names step {ref.step!r}, which is not in the plan. '
                f'Refer to one of the step ids: {known}.'
            )
            return None
        bound = Ref(ref.step, ref.path, written, index)
        self.refs.append(bound)
        return bound

    def bad(self, written: str, reason: str, hint: str = _SYNTAX_HINT) -> None:
        self.problems.append(f'{self.where()}: malformed reference {written!r}: {reason}. {hint}')

    def node(self, value: Any) -> Compiled | None:
        if isinstance(value, str):
            return self.string(value) if self.dialect == 'id' else None
        if isinstance(value, dict):
            if len(value) == 1 and '$ref' in value:
                return self.object_ref(value['$ref'])
            return self.mapping(value)
        if isinstance(value, list):
            return self.sequence(value)
        return None

    def string(self, value: str) -> Compiled | None:
        if value.startswith(_PREFIX):
            hit = self.cache.get(value)
            if hit is not None:
                self.refs.append(hit[1])
                return hit[0]
            try:
                ref = parse_ref(value[len(_PREFIX) :])
            except RefSyntaxError as exc:
                self.bad(value, str(exc))
                return None
            bound = self.bind(ref, value)
            if bound is None:
                return None
            node = Compiled('ref', ref=bound)
            self.cache[value] = (node, bound)
            return node
        if '{{' in value and _PREFIX in value:
            return self.template(value)
        return None

    def template(self, value: str) -> Compiled | None:
        parts: list[str | Ref] = []
        last = 0
        has_ref = False
        for match in _EMBEDDED.finditer(value):
            parts.append(value[last : match.start()])
            last = match.end()
            body = match.group(1)
            if body is None:
                parts.append('{{')
                continue
            written = match.group(0)
            try:
                bound = self.bind(parse_ref(body), written)
            except RefSyntaxError as exc:
                self.bad(written, str(exc))
                continue
            if bound is not None:
                parts.append(bound)
                has_ref = True
        parts.append(value[last:])
        if '{{$ref:' in value[last:] or '{{ $ref:' in value[last:]:
            self.bad(value[last:], "an embedded reference is not closed with '}}'", 'Write "{{$ref:STEP.field}}".')
        if not has_ref:
            text = ''.join(p for p in parts if isinstance(p, str))
            return None if text == value else Compiled('const', value=text)
        merged: list[str | Ref] = []
        for part in parts:
            if isinstance(part, str) and merged and isinstance(merged[-1], str):
                merged[-1] += part
            elif part != '':
                merged.append(part)
        return Compiled('text', items=tuple(merged))

    def object_ref(self, target: Any) -> Compiled | None:
        if not isinstance(target, str):
            self.bad(json.dumps({'$ref': target}, default=str), f'the value of "$ref" must be a string, got '
                     f'{type(target).__name__}')
            return None
        if self.dialect == 'index':
            return self.index_ref(target)
        body = target[len(_PREFIX) :] if target.startswith(_PREFIX) else target
        try:
            ref = parse_ref(body)
        except RefSyntaxError as exc:
            self.bad(target, str(exc), 'Write {"$ref": "STEP"} or {"$ref": "STEP.field"}.')
            return None
        bound = self.bind(ref, target)
        return None if bound is None else Compiled('ref', ref=bound)

    def index_ref(self, target: str) -> Compiled | None:
        try:
            position, path = parse_index_ref(target)
        except RefSyntaxError as exc:
            self.bad(target, str(exc), '')
            return None
        if position >= self.step_index:
            what = 'itself' if position == self.step_index else f'steps[{position}], a later step'
            self.problems.append(
                f'{self.where()}: forward reference {target!r}: a step can only reference earlier steps, and this '
                f'one refers to {what}. Move the referenced step before this one.'
            )
            return None
        ref = Ref(f'step_{position}', path, target, position)
        self.refs.append(ref)
        return Compiled('text', items=(ref,))

    def mapping(self, value: dict[Any, Any]) -> Compiled | None:
        changed: list[tuple[Any, Compiled]] | None = None
        trail = self.trail
        for key, item in value.items():
            if type(item) is str and not item.startswith(_PREFIX) and '{{' not in item:
                continue  # the common case: a plain string argument
            trail.append(key)
            sub = self.node(item)
            trail.pop()
            if sub is not None:
                if changed is None:
                    changed = [(key, sub)]
                else:
                    changed.append((key, sub))
        return None if changed is None else Compiled('dict', items=changed, value=value)

    def sequence(self, value: list[Any]) -> Compiled | None:
        changed: list[tuple[int, Compiled]] | None = None
        trail = self.trail
        for index, item in enumerate(value):
            trail.append(index)
            sub = self.node(item)
            trail.pop()
            if sub is not None:
                if changed is None:
                    changed = [(index, sub)]
                else:
                    changed.append((index, sub))
        return None if changed is None else Compiled('list', items=changed, value=value)


def compile_arguments(
    arguments: Any, ids: Mapping[str, int], *, dialect: str = 'id', step_index: int = 0
) -> tuple[Compiled | None, list[Ref], list[str]]:
    """Compile one step's `arguments` (see `Compiler.compile`)."""
    return Compiler(ids, dialect).compile(arguments, step_index)


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
            raise ResolveError(
                f"Reference '{ref.source}' in step '{current_step}': field '{format_path(path[depth:depth + 1])}' "
                f"not found in step '{ref.step}' output at {at}. {_describe_keys(current)}"
            )
        current = found
    return current


def splice_text(value: Any) -> str:
    """How a value reads inside a longer string: strings raw, everything else compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(',', ':'), ensure_ascii=False, default=str)


def resolve(compiled: Compiled, records: Sequence[Any], missing: str, step: str) -> Any:
    """Build the resolved arguments. `records[i].ref_value` / `.is_text`: step i's value and whether it is raw
    text."""
    kind = compiled.kind
    if kind == 'ref':
        ref = compiled.ref
        assert ref is not None
        source = records[ref.index]
        if not ref.path:
            return source.ref_value
        return lookup(source.ref_value, source.is_text, ref, missing, step)
    if kind == 'dict' or kind == 'list':
        out = compiled.value.copy()
        for key, item in compiled.items:
            out[key] = resolve(item, records, missing, step)
        return out
    if kind == 'text':
        pieces: list[str] = []
        for part in compiled.items:
            if isinstance(part, Ref):
                source = records[part.index]
                pieces.append(splice_text(lookup(source.ref_value, source.is_text, part, missing, step)))
            else:
                pieces.append(part)
        return ''.join(pieces)
    return compiled.value
