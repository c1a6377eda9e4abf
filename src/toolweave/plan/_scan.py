"""Finding references in step arguments (at validation) and replacing them (at run time).

Validation walks each step's arguments once: it checks every reference, binds it to the step it names, and
remembers each distinct reference text in a table (`RefTable`). Nothing per step is built beyond the list of
dependencies, so a 100k-step plan does not leave a million small objects for the garbage collector. At run time
the `Resolver` walks the arguments of the steps that hold references again, copying only the objects and arrays
on the way to a reference, and looks each reference text up in the table.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from toolweave.plan._parse import excerpt
from toolweave.plan._record import TEXT, StepRecords, jsonable
from toolweave.plan._refs import (
    EMBEDDED,
    INDEX,
    INDEX_POSITION,
    ITEM,
    ITEM_POSITION,
    PREFIX,
    SIMPLE,
    SYNTAX_HINT,
    Ref,
    RefSyntaxError,
    ResolveError,
    Segment,
    lookup,
    parse_index_ref,
    parse_item_ref,
    parse_ref,
    splice_text,
)

__all__ = ('DEFAULT_INPUT_LIMIT', 'Binding', 'Bound', 'RefTable', 'Resolver', 'Rewrite', 'Scanner', 'position_of')

Bound = tuple[str, tuple[Segment, ...], str, int]
"""A bound reference as an exact tuple `(step, path, source, position)` (the fields of `Ref`): the garbage
collector stops tracking exact tuples of strings and ints, not `Ref` instances, and a plan holds one per
distinct reference with a path or to something other than a step of the plan (see `Binding`). `position` is the
referenced step's index in the plan; below zero it is `ITEM_POSITION`, `INDEX_POSITION`, or
`external_position(k)`: the k-th step of an earlier plan the plan refers to."""


Binding = Bound | int
"""What the table holds for a reference text: its `Bound`, or for the common `"$ref:STEP"` (the whole value of a step of
this plan) that step's position alone, an int: no tuple per reference (the step and the text are at hand where it is
read: the plan's steps, the table's key)."""


def position_of(binding: Binding) -> int:
    """The position of the step (or the special position) a binding refers to."""
    return binding if isinstance(binding, int) else binding[_POSITION]


def external_position(k: int) -> int:
    """The position of the k-th earlier plan's step a plan refers to (and back: it is its own inverse)."""
    return -3 - k
Template = tuple[str | Bound, ...]
Rewrite = tuple[Any, ...] | bool
"""What a step's arguments need at run time: `False` nothing; a tuple of keys: the arguments are an object and only
the values under those keys hold references (an exact tuple of strings, which the garbage collector stops
tracking); `True`: walk the whole value (the arguments are not a plain object, or are an object reference)."""
_PATH: Final = 1
_POSITION: Final = 3
_IMMUTABLE = (str, int, float, bool, type(None))
_NOT_COPIED: Final = object()
DEFAULT_INPUT_LIMIT = 64 * 1024 * 1024
"""Bytes (of JSON) of earlier results one step's references may copy into its arguments."""
_SIMPLE_MATCH = SIMPLE.fullmatch
_AFTER_PREFIX: Final = len(PREFIX)
_UNCLOSED = re.compile(r'\{\{\s*\$(ref:|item|index)')


_KEYS: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_MAX_KEYS = 4096


def _shared_keys(keys: tuple[Any, ...]) -> tuple[Any, ...]:
    """One tuple for each set of argument names that hold references (`('inputs',)`), shared by the steps and
    plans that have it: a tuple per step that lives as long as its plan is work for the garbage collector. At most
    `_MAX_KEYS` are kept (plans choose the names)."""
    shared = _KEYS.get(keys)
    if shared is not None:
        return shared
    if len(_KEYS) < _MAX_KEYS and all(type(key) is str for key in keys):
        _KEYS[keys] = keys
    return keys


@dataclass(slots=True)
class RefTable:
    """Every distinct reference text of a plan, parsed and bound."""

    whole: dict[str, Binding] = field(default_factory=dict[str, Binding])
    """`"$ref:STEP.PATH"` strings."""
    objects: dict[str, Bound] = field(default_factory=dict[str, Bound])
    """The values of `{"$ref": ...}` objects."""
    templates: dict[str, Template] = field(default_factory=dict[str, Template])
    """Strings with embedded `{{$ref:...}}` (or escaped `\\{{`): literal parts and references."""


_SUGGESTIONS = 3
"""Unknown step names per plan that get a "did you mean" from `difflib` (its cost grows with the plan, so a plan
full of bad references must not pay it for each one)."""
_MAX_PATH_SHOWN = 8
"""Levels of a deep argument path shown in a message; the middle is elided."""


class _Suggester:
    """"Did you mean" for unknown step names: exact matches ignoring case always, close matches for the first
    few names only."""

    __slots__ = ('_ids', '_left', '_lowered')

    def __init__(self, ids: Mapping[str, int]) -> None:
        self._ids = ids
        self._lowered: dict[str, str] | None = None
        self._left = _SUGGESTIONS

    def __call__(self, name: str) -> str:
        if self._lowered is None:
            self._lowered = {known.lower(): known for known in self._ids}
        known = self._lowered.get(name.lower())
        if known is not None:
            return f' Step ids are case-sensitive: did you mean {known!r}?'
        if self._left <= 0:
            return ''
        self._left -= 1
        close = difflib.get_close_matches(name, list(self._ids)[:1000], n=1)
        return f' Did you mean {close[0]!r}?' if close else ''


def _short(text: str, limit: int = 100) -> str:
    return repr(text if len(text) <= limit else text[:limit] + '...')


def _path_text(trail: Sequence[Segment]) -> str:
    """`.key[0]...` for a path below `arguments`, with the middle of a very deep one elided."""
    def text(segments: Sequence[Segment]) -> str:
        return ''.join(f'[{seg}]' if isinstance(seg, int) else f'.{seg}' if seg and '.' not in seg and '[' not in seg
                       else f'[{json.dumps(seg)}]' for seg in segments)

    if len(trail) <= _MAX_PATH_SHOWN:
        return text(trail)
    half = _MAX_PATH_SHOWN // 2
    return f'{text(trail[:half])}...{text(trail[-half:])} ({len(trail)} levels deep)'


class OverBudget(Exception):
    """The scanner walked more values than its budget allows (see `Scanner.left`)."""


class Scanner:
    """Checks the references in each step's arguments (`scan(arguments, step_index)`), in one plan."""

    __slots__ = ('check', 'deps', 'earlier', 'external', 'field', 'ids', 'index_dialect', 'items', 'known', 'left',
                 'problems', 'step_ids', 'step_index', 'suggest', 'table', 'trail')

    def __init__(self, ids: Mapping[str, int], step_ids: Sequence[str], dialect: str,
                 earlier: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.ids = ids
        self.left = sys.maxsize
        """Values (elements of the objects and arrays walked) the scanner may still walk before it raises
        `OverBudget` (a budget `prepare` may set)."""
        self.step_ids = step_ids
        """The ids of the plan's steps so far, by position (`ids` gives positions): a bound reference names its step
        with the step's own id string rather than a copy cut from the reference (a string fewer per reference)."""
        self.earlier = earlier or {}
        """Earlier plans of the same agent run, by name: their step records by step id."""
        self.external: list[Any] = []
        """The records of earlier plans' steps this plan refers to, in order of first reference."""
        self.check: Callable[[int, tuple[Segment, ...], str], str | None] | None = None
        """Checks a newly bound reference to a step of this plan (position, path, text): a problem, or `None`."""
        self.field = 'arguments'
        self.items = False
        """Whether `$item` and `$index` may be used (in the arguments of a `for_each` step)."""
        self.suggest = _Suggester(ids)
        self.known: str | None = None
        self.index_dialect = dialect == 'index'
        self.table = RefTable()
        self.step_index = 0
        self.deps: list[int] = []
        self.problems: list[str] = []
        self.trail: list[Segment] = []

    def scan(self, arguments: Any, step_index: int, field: str = 'arguments',
             items: bool = False) -> tuple[list[int], Rewrite, list[str]]:
        """The steps referred to (in order of first appearance, with repeats), what must be rewritten at run time
        (see `Rewrite`), and the problems (each starting with the field, e.g. `arguments.data[0]: ...`). `field`
        names the part of the step (`arguments`, `from`, `for_each`, `when.from`); `items` allows `$item`."""
        self.step_index = step_index
        self.field = field
        self.items = items
        deps = self.deps = []
        rewrite: Rewrite
        if type(arguments) is dict and '$ref' not in arguments:
            keys: list[Any] = []
            rewrite = _shared_keys(tuple(keys)) if self.mapping(arguments, keys) else False
        else:
            rewrite = self.node(arguments)
        problems = self.problems
        if problems:  # a fresh list only after a step with problems (the caller reads the one it got)
            self.problems = []
        return deps, rewrite, problems

    # --- messages ---------------------------------------------------------------------------------------------

    def where(self) -> str:
        return self.field + _path_text(self.trail)

    def bad(self, written: str, reason: str, hint: str = SYNTAX_HINT) -> None:
        self.problems.append(f'{self.where()}: malformed reference {_short(written)}: {reason}. {hint}')

    def bind(self, ref: Ref, written: str) -> Bound | None:
        index = self.ids.get(ref.step)
        if index is None and '/' in ref.step:
            return self.bind_external(ref, written)
        if index is None:
            if self.known is None:
                self.known = ', '.join(list(self.ids)[:20]) + (', ...' if len(self.ids) > 20 else '')
            self.problems.append(
                f'{self.where()}: reference {_short(written)} names step {ref.step!r}, which is not in the plan.'
                f'{self.item_hint(ref, written) or self.suggest(ref.step)} Refer to one of the step ids: {self.known}.'
            )
            return None
        self.deps.append(index)
        if self.check is not None:
            self.checked(index, ref.path, written)
        return (self.step_ids[index], ref.path, written, index)

    def item_hint(self, ref: Ref, written: str) -> str:
        """`$ref:item` written for `$item` (the element of a `for_each` step) or `$ref:index` for `$index`: show the
        reference as it should be written."""
        if ref.step not in ('item', 'index'):
            return ''
        meant = written.replace(PREFIX, '$', 1) if PREFIX in written else '$' + written
        what = 'element' if ref.step == 'item' else 'position of the element'
        if self.items:
            return f' The {what} a "for_each" step is called with is written without "$ref:": {_short(meant)}.'
        return (f' Did you mean {_short(meant)}? It stands for the {what} of a step with "for_each", and only in '
                "that step's arguments.")

    def checked(self, position: int, path: tuple[Segment, ...], written: str) -> None:
        assert self.check is not None
        problem = self.check(position, path, written)
        if problem is not None:
            step = [sid for sid, i in self.ids.items() if i == position][:1]
            self.problems.append(f'{self.where()}: reference {_short(written)} cannot resolve: {problem} (in the '
                                 f'output schema of step {step[0] if step else position!r}). Refer to a field it has.')

    def bind_external(self, ref: Ref, written: str) -> Bound | None:
        """A reference to a step of an earlier plan of the agent run: a constant, not a dependency."""
        plan, step = ref.step.split('/', 1)
        records = self.earlier.get(plan)
        if records is None:
            known = ', '.join(self.earlier) or 'none: this is the first plan of the run'
            self.problems.append(f'{self.where()}: reference {_short(written)} names plan {plan!r}, which is not an '
                                 f'earlier plan of this run (earlier plans: {known}).')
            return None
        record = records.get(step)
        if record is None or record.status != 'succeeded':
            listed = ', '.join(sid for sid, r in records.items() if r.status == 'succeeded')
            what = (f'plan {plan!r} has no step {step!r}' if record is None
                    else f'step {step!r} of plan {plan!r} {record.status}, so it has no value')
            self.problems.append(f'{self.where()}: reference {_short(written)}: {what}. Its steps with a value: '
                                 f'{listed or "(none)"}.')
            return None
        try:
            k = self.external.index(record)
        except ValueError:
            k = len(self.external)
            self.external.append(record)
        return (ref.step, ref.path, written, external_position(k))

    def special(self, bound: Bound) -> None:
        """A reference that is not a dependency: `$item`/`$index` (allowed only in `for_each` arguments), or a step
        of an earlier plan."""
        if bound[_POSITION] in (ITEM_POSITION, INDEX_POSITION) and not self.items:
            self.problems.append(f'{self.where()}: {bound[2]!r} is only defined in the arguments of a step with '
                                 '"for_each" (it stands for the element the tool is called with). Add "for_each": '
                                 '"$ref:STEP.list" to this step, or refer to a step with "$ref:STEP".')

    def item(self, value: str) -> bool:
        """A whole-string `$item...` / `$index`."""
        try:
            ref = parse_item_ref(value)
        except RefSyntaxError as exc:
            self.bad(value, str(exc), '')
            return False
        bound = (ref.step, ref.path, value, ref.position)
        self.table.whole[value] = bound
        self.special(bound)
        return True

    # --- the walk ---------------------------------------------------------------------------------------------

    def node(self, value: Any) -> bool:
        kind = type(value)
        if kind is str:
            return False if self.index_dialect else self.string(value)
        if kind is dict:
            if len(value) == 1 and '$ref' in value:
                return self.object_ref(value['$ref'])
            return self.mapping(value)
        if kind is list:
            return self.sequence(value)
        return False

    def mapping(self, value: dict[Any, Any], keys: list[Any] | None = None) -> bool:
        """Whether `value` holds references; `keys` (the top level only) collects the keys whose values do.

        The common shapes are read inline: a string that is a reference already bound (`whole`), a new
        `"$ref:STEP"`, and a list of such strings. Anything else (paths, templates, nesting, problems) goes
        the general way (`node`, `sequence`, `string`), which has the path at hand for its messages; what the
        inline reading noted before it gave up (dependencies, bound references) is noted again, to the same
        effect (dependencies are deduplicated, bindings are the same)."""
        left = self.left = self.left - len(value)  # the budget (`left`)
        if left < 0:
            raise OverBudget
        rewrite = False
        trail = self.trail
        whole = self.table.whole
        strings = not self.index_dialect
        quick = strings and self.check is None  # checked references take the general way
        changed: bool | None
        for key, item in value.items():
            kind = type(item)
            if kind is str:
                # Every text `whole` holds starts with "$": a plain string costs no hash and no probe of it.
                if not strings or (not item.startswith('$') and '{{' not in item):
                    continue
                ref = whole.get(item)
                if ref is None:
                    changed = True if item.startswith(PREFIX) and self.simple(item) else None
                else:
                    if isinstance(ref, int):
                        self.deps.append(ref)
                    elif ref[_POSITION] >= 0:
                        self.deps.append(ref[_POSITION])
                    else:
                        trail.append(key)
                        self.special(ref)
                        trail.pop()
                    changed = True
            elif kind is list:
                changed = self.references(item) if quick else None
            elif kind is dict:
                changed = None
            else:
                continue
            if changed is None:  # the general way
                trail.append(key)
                changed = self.node(item)
                trail.pop()
            if changed:
                rewrite = True
                if keys is not None:
                    keys.append(key)
        return rewrite

    def references(self, value: list[Any]) -> bool | None:
        """A list of strings read quickly: whether it holds references, each bound already or one `simple` binds;
        `None` when it holds anything else (the general way then reads it, and counts it)."""
        left = self.left = self.left - len(value)  # the budget (`left`)
        if left < 0:
            raise OverBudget
        whole = self.table.whole
        deps = self.deps
        found = False
        for item in value:
            if type(item) is not str:
                break
            if not item.startswith('$'):
                if '{{' in item:
                    break
                continue
            ref = whole.get(item)
            if ref is not None:
                if not isinstance(ref, int):
                    if ref[_POSITION] < 0:
                        break
                    ref = ref[_POSITION]
                deps.append(ref)
                found = True
            elif not item.startswith(PREFIX) or not self.simple(item):
                break
            else:
                found = True
        else:
            return found
        self.left += len(value)  # counted again by the general way
        return None

    def sequence(self, value: list[Any]) -> bool:
        left = self.left = self.left - len(value)  # the budget (`left`)
        if left < 0:
            raise OverBudget
        rewrite = False
        trail = self.trail
        whole = self.table.whole
        strings = not self.index_dialect
        for index, item in enumerate(value):
            kind = type(item)
            if kind is str:
                if not strings:
                    continue
                if not item.startswith('$'):
                    if '{{' not in item:
                        continue
                elif (ref := whole.get(item)) is not None:
                    if isinstance(ref, int):
                        self.deps.append(ref)
                    elif ref[_POSITION] >= 0:
                        self.deps.append(ref[_POSITION])
                    else:
                        trail.append(index)
                        self.special(ref)
                        trail.pop()
                    rewrite = True
                    continue
                elif item.startswith(PREFIX) and self.simple(item):
                    rewrite = True
                    continue
            elif kind is not dict and kind is not list:
                continue
            trail.append(index)
            rewrite = (self.string(item) if kind is str else self.node(item)) or rewrite
            trail.pop()
        return rewrite

    def simple(self, value: str) -> bool:
        """A `"$ref:STEP"` or `"$ref:STEP.a.b"` naming a step of this plan, bound with no questions (the common
        case, without the general parser or the path for messages); `False` for anything else (`string` then
        takes it, with the path at hand for its messages)."""
        if self.check is not None:
            return False
        step = value[_AFTER_PREFIX:]
        position = self.ids.get(step)
        path: tuple[Segment, ...] = ()
        if position is None:  # "$ref:STEP.a.b"
            simple = _SIMPLE_MATCH(value, _AFTER_PREFIX)
            if simple is None:
                return False
            step, dotted = simple.groups()
            position = self.ids.get(step)
            if position is None:
                return False
            if dotted:
                path = tuple(dotted[1:].split('.'))
        self.deps.append(position)
        self.table.whole[value] = (self.step_ids[position], path, value, position) if path else position
        return True

    def string(self, value: str) -> bool:
        if value.startswith(PREFIX):
            known = self.table.whole.get(value)
            if known is not None:
                if isinstance(known, int):
                    self.deps.append(known)
                elif known[_POSITION] >= 0:
                    self.deps.append(known[_POSITION])
                else:
                    self.special(known)
                return True
            if self.simple(value):  # the common case, without the general parser
                return True
            simple = SIMPLE.fullmatch(value, len(PREFIX))
            if simple is not None:  # a step this plan has not (reported by `bind`), or a checked reference
                step, dotted = simple.groups()
                ref = Ref(step, tuple(dotted[1:].split('.')) if dotted else (), value)
            else:
                try:
                    ref = parse_ref(value[len(PREFIX) :])
                except RefSyntaxError as exc:
                    self.bad(value, str(exc))
                    return False
            bound = self.bind(ref, value)
            if bound is None:
                return False
            self.table.whole[value] = bound if bound[_PATH] or bound[_POSITION] < 0 else bound[_POSITION]
            return True
        if value.startswith(ITEM) or value == INDEX:
            known = self.table.whole.get(value)
            if known is not None:
                assert not isinstance(known, int)  # `$item` and `$index` are kept whole (their positions are below 0)
                self.special(known)
                return True
            return self.item(value)
        if '{{' in value and '$' in value:
            return self.template(value)
        return False

    def template(self, value: str) -> bool:
        known = self.table.templates.get(value)
        if known is not None:
            for part in known:
                if not isinstance(part, str):
                    if part[_POSITION] >= 0:
                        self.deps.append(part[_POSITION])
                    else:
                        self.special(part)
            return True
        parts: list[str | Bound] = []
        last = 0
        for match in EMBEDDED.finditer(value):
            parts.append(value[last : match.start()])
            last = match.end()
            kind, body = match.group(1, 2)
            if kind is None:
                parts.append('{{')
                continue
            written = match.group(0)
            try:
                if kind == PREFIX:
                    bound = self.bind(parse_ref(body), written)
                else:
                    ref = parse_item_ref(kind + body)
                    bound = (ref.step, ref.path, written, ref.position)
                    self.special(bound)
            except RefSyntaxError as exc:
                self.bad(written, str(exc))
                continue
            if bound is not None:
                parts.append(bound)
        rest = value[last:]
        parts.append(rest)
        if _UNCLOSED.search(rest) is not None:
            self.bad(rest, "an embedded reference is not closed with '}}'", 'Write "{{$ref:STEP.field}}".')
        merged: list[str | Bound] = []
        for part in parts:
            if isinstance(part, str) and merged and isinstance(merged[-1], str):
                merged[-1] += part
            elif part != '':
                merged.append(part)
        if len(merged) == 1 and merged[0] == value or not merged:
            return False
        self.table.templates[value] = tuple(merged)
        return True

    def object_ref(self, target: Any) -> bool:
        if not isinstance(target, str):
            self.bad(excerpt({'$ref': target}),
                     f'the value of "$ref" must be a string, got {type(target).__name__}')
            return False
        known = self.table.objects.get(target)
        if known is not None:
            if known[_POSITION] >= 0:
                self.deps.append(known[_POSITION])
            return True
        if self.index_dialect:
            ref = self.index_ref(target)
        else:
            body = target[len(PREFIX) :] if target.startswith(PREFIX) else target
            try:
                ref = self.bind(parse_ref(body), target)
            except RefSyntaxError as exc:
                self.bad(target, str(exc), 'Write {"$ref": "STEP"} or {"$ref": "STEP.field"}.')
                return False
        if ref is None:
            return False
        self.table.objects[target] = ref
        return True

    def index_ref(self, target: str) -> Bound | None:
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
        self.deps.append(position)
        return (f'step_{position}', path, target, position)


class Resolver:
    """Rewrites a step's arguments at run time: each reference replaced by the value it points at.

    A step gets its own copy of each object or array it reads, once however often its arguments name it, so a
    tool that changes its input changes nothing that another step, or the record, sees, and a plan cannot make the
    process copy a value once per reference (`["$ref:big"] * 1000` is one copy, shared by the thousand places in
    that one step's arguments). What one step's references may copy is bounded (`limit`, in bytes of the
    referenced values' JSON): past it, the step fails before anything is copied.
    """

    __slots__ = ('copied', 'copies', 'external', 'index', 'index_dialect', 'item', 'limit', 'missing', 'records',
                 'step', 'table')

    def __init__(self, table: RefTable, records: StepRecords, missing: str, dialect: str,
                 external: Sequence[Any] = (), limit: int = DEFAULT_INPUT_LIMIT) -> None:
        self.table = table
        self.records = records
        self.external = external
        """Records of earlier plans' steps that references point at (see `external_position`)."""
        self.index_dialect = dialect == 'index'
        # Index-based plans splice values into text, where a missing field would reach the tool as "null".
        self.missing = 'error' if self.index_dialect else missing
        self.limit = limit
        self.step = ''
        self.item: Any = None
        """The element `$item` stands for while a `for_each` step's arguments are resolved for it."""
        self.index = 0
        """Its position (`$index`)."""
        self.copies: dict[tuple[int, tuple[Segment, ...]], Any] | None = None
        """The copies made for the arguments being resolved, by what they copy (made on the first copy)."""
        self.copied = 0
        """Bytes (of JSON) of the referenced values copied for the arguments being resolved."""

    def resolve(self, arguments: Any, rewrite: Rewrite, step: str) -> Any:
        """`arguments` with every reference replaced: under the keys `rewrite` names, or everywhere when it is
        `True` (raises `ResolveError` with the step's error)."""
        self.step = step
        self.copies = None
        self.copied = 0
        if not isinstance(rewrite, tuple):
            return self.value(arguments)
        out = dict(arguments)
        for key in rewrite:
            given = arguments[key]
            out[key] = self.sequence(given) if type(given) is list else self.value(given)
        return out

    def sequence(self, value: list[Any]) -> list[Any]:
        """A list with its references replaced (the common shape: a list of references)."""
        if self.index_dialect:
            return [self.value(item) for item in value]
        whole = self.table.whole
        out = []
        for item in value:
            kind = type(item)
            if kind is str:
                ref = whole.get(item)
                if ref is not None:
                    item = self.read(ref)
                elif '{{' in item:
                    item = self.string(item)
            elif kind is dict or kind is list:
                item = self.value(item)
            out.append(item)
        return out

    def read(self, ref: Binding) -> Any:
        """The value `ref` points at: the referenced step's value (or the part its path selects), copied once
        for the arguments being resolved."""
        records = self.records
        if isinstance(ref, int):  # the whole value of a step of the plan
            found = records.ref_value[ref]
            return found if isinstance(found, _IMMUTABLE) else self.copy(ref, (), found, records.size[ref])
        position = ref[_POSITION]
        if position >= 0:
            found, is_text, size = records.ref_value[position], bool(records.flags[position] & TEXT), records.size[
                position]
        elif position == ITEM_POSITION:
            found = self.item
            if ref[_PATH]:
                found = lookup(found, False, Ref(*ref), self.missing, self.step)
            return found if isinstance(found, _IMMUTABLE) else self.copy(position, ref[_PATH], found, 0)
        elif position == INDEX_POSITION:
            return self.index
        else:
            source = self.external[external_position(position)]
            found, is_text, size = source.ref_value, source.is_text, source.size
        if ref[_PATH]:
            found = lookup(found, is_text, Ref(*ref), self.missing, self.step)
        return found if isinstance(found, _IMMUTABLE) else self.copy(position, ref[_PATH], found, size)

    def copy(self, position: int, path: tuple[Segment, ...], found: Any, size: int) -> Any:
        """`found` copied, or the copy these arguments already made of it; `size` is what its step's whole value
        weighs (an upper bound for a part of it)."""
        copies = self.copies
        key = (position, path)
        if copies is None:
            copies = self.copies = {}
        else:
            made = copies.get(key, _NOT_COPIED)
            if made is not _NOT_COPIED:
                return made
        self.copied += size
        if self.copied > self.limit:
            raise ResolveError(f'Step {self.step!r} refers to more data than one step may take: its references copy '
                               f'{self.copied:,} bytes of earlier results into its arguments, more than the limit of '
                               f'{self.limit:,}. Refer to the fields it needs ("$ref:STEP.field"), or select them '
                               'with a select step first.')
        made = copies[key] = jsonable(found)
        return made

    def value(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:
            return value if self.index_dialect else self.string(value)
        if kind is dict:
            if len(value) == 1 and '$ref' in value:
                ref = self.table.objects.get(value['$ref'])
                if ref is not None:
                    return self.index_splice(value['$ref'], self.read(ref)) if self.index_dialect else self.read(ref)
            return {key: self.value(item) for key, item in value.items()}
        if kind is list:
            return self.sequence(value)
        return value

    def index_splice(self, written: str, found: Any) -> str:
        """An index-based plan's reference as the text it splices in; `null` fails the step (it would reach the
        tool as the word "null")."""
        if found is None:
            raise ResolveError(f"Reference '{written}' in step '{self.step}' resolved to null: the field exists but "
                               'holds no value. Refer to a field that has one.')
        return splice_text(found)

    def string(self, value: str) -> Any:
        ref = self.table.whole.get(value)
        if ref is not None:
            return self.read(ref)
        template = self.table.templates.get(value)
        if template is not None:
            return ''.join(part if isinstance(part, str) else splice_text(self.read(part)) for part in template)
        return value
