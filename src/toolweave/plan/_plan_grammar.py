"""A GBNF grammar for constrained plans, for llama.cpp's `llama-server` (its `grammar` request field).

`constrained_schema` is JSON Schema, which every structured-output decoder takes, but each step's schema stands
alone: a reference `"$ref:s2.units"` may name a field that *some* tool returns, since the schema cannot know which
tool step `s2` calls. This grammar knows. It is a trie over what the steps so far give (a tool's declared output,
a list of them for a `for_each` step, a list of the same items for a shaping step, unknown for a JMESPath select),
and each step's references are typed by the step they name: a number argument may take `"$ref:s2.units"` when
`s2` calls `get_stock`, never `"$ref:s2"` (an object), and `"$item.id"` only when the `for_each` list's items
have an `id`. Step ids stay positional (`s1`, `s2`, ...), so what the model reads is the same as under the schema.

Prefixes that lead to the same rules share them (rules are interned by their text), which keeps the grammar to
tens of kilobytes for a handful of tools; a toolset that would make it larger than `MAX_GRAMMAR_CHARS` raises
`SchemaTooLarge`, and callers fall back to `constrained_schema`. What a grammar cannot check is left to
validation: JMESPath expressions, and the keywords `_literal` drops (numeric bounds, string formats, patterns).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from toolweave.plan._plan_schema import (
    _IDENT,
    CONSTRAINED_MAX_STEPS,
    MAX_DEPTH,
    SHAPE_OPERATORS,
    SchemaTooLarge,
    _kind,
    _output_of,
    _resolved,
    step_id,
)
from toolweave.tools import Tool, ToolDefinition
from toolweave.tools._schema_check import schema_problem

__all__ = ('MAX_GRAMMAR_CHARS', 'MAX_PREFIXES', 'constrained_grammar')

MAX_GRAMMAR_CHARS = 1_000_000
"""The largest grammar `constrained_grammar` writes. llama-server parses a grammar of this size in a few
milliseconds; beyond it the trie is not worth its weight, and the JSON schema serves."""

MAX_PREFIXES = 5_000
"""The most sequences of step outputs the trie tells apart (five tools with declared outputs make about 1,500);
beyond it, building the grammar would take seconds."""

_ALL_KINDS = frozenset({'string', 'number', 'integer', 'boolean', 'array', 'object', 'null'})
_PATH_DEPTH = 3
"""Segments of a typed reference path (`.field`, `[i]`): `"$ref:s1[0].price_usd"` is two."""


@dataclass(frozen=True, slots=True)
class _Shape:
    """What a value is known to be: its JSON kinds, an object's fields, a list's items. `kinds` is `None` when
    nothing is known (then validation accepts any path into it, and so does the grammar)."""

    kinds: frozenset[str] | None
    fields: tuple[tuple[str, _Shape], ...] = ()
    items: _Shape | None = None


_UNKNOWN = _Shape(None)


def _list_of(items: _Shape) -> _Shape:
    return _Shape(frozenset({'array'}), items=items)


def _shape(schema: Any, root: Mapping[str, Any], depth: int = 0) -> _Shape:
    schema = _resolved(schema, root)
    kinds = frozenset(_kind(schema, root))
    if depth > _PATH_DEPTH or not kinds or kinds >= _ALL_KINDS - {'null'}:
        return _UNKNOWN
    leaves = list(_leaves(schema, root, 0))
    fields: dict[str, _Shape] = {}
    items: _Shape | None = None
    for leaf in leaves:
        properties = leaf.get('properties')
        if isinstance(properties, Mapping):
            for name, sub in properties.items():
                if isinstance(name, str) and _IDENT.match(name) and name not in fields:
                    fields[name] = _shape(sub, root, depth + 1)
        if items is None and isinstance(leaf.get('items'), Mapping):
            items = _shape(leaf['items'], root, depth + 1)
    if 'array' in kinds and items is None:
        items = _UNKNOWN
    return _Shape(kinds, tuple(fields.items()), items)


def _leaves(schema: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> Iterable[Mapping[str, Any]]:
    branches = schema.get('anyOf', schema.get('oneOf'))
    if isinstance(branches, list) and depth < MAX_DEPTH:
        for branch in branches:
            yield from _leaves(_resolved(branch, root), root, depth + 1)
    else:
        yield schema


def _fits(kinds: frozenset[str] | None, wanted: frozenset[str] | None) -> bool:
    """Whether a value of `kinds` may fill a place that wants `wanted`: stricter than validation (which lets text
    fill a number, since the tool may coerce it), to keep a small model to values of the right type."""
    if kinds is None or wanted is None:
        return True
    return bool(wanted & (kinds | ({'number'} if 'integer' in kinds else set())))


def _wanted(schema: Mapping[str, Any], root: Mapping[str, Any]) -> frozenset[str] | None:
    kinds = frozenset(_kind(schema, root))
    return None if kinds >= _ALL_KINDS - {'null'} else kinds


def _q(text: str) -> str:
    """`text` as a GBNF string literal."""
    return '"' + text.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n') + '"'


def _json(text: str) -> str:
    """The JSON string `text`, as a GBNF literal."""
    return _q(json.dumps(text))


def _alt(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else '(' + ' | '.join(parts) + ')'


_BASE = {
    'ws': '( " " | "\\n" [ \\t]{0,24} )?',
    'idx': '"[" [0-9]{1,3} "]"',
    'ident': '[A-Za-z_] [A-Za-z0-9_]{0,39}',
    'anypath': '( "." ident | idx ){0,4}',
    'text': '"\\"" ( [^$"\\\\\\x00-\\x1f] [^"\\\\\\x00-\\x1f]{0,99} )? "\\""',
    'name': '"\\"" [A-Za-z_] [A-Za-z0-9_ .-]{0,39} "\\""',
    'expr': '"\\"" [^"\\\\\\x00-\\x20] [^"\\\\\\x00-\\x1f]{0,199} "\\""',
    'int': '"-"? ( "0" | [1-9] [0-9]{0,15} )',
    'num': 'int ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?',
    'bool': '"true" | "false"',
    'count': '"0" | [1-9] [0-9]{0,5}',
    'jkey': '"\\"" [A-Za-z_] [A-Za-z0-9_]{0,39} "\\""',
    'jvalue': 'text | num | bool | "null" | jarray | jobject',
    'jarray': '"[" ws ( jvalue ( "," ws jvalue )* )? ws "]"',
    'jobject': '"{" ws ( jkey ws ":" ws jvalue ( "," ws jkey ws ":" ws jvalue )* )? ws "}"',
    'scalar': 'text | num | bool',
}
"""Rules every grammar has. `text` is a literal string argument: not a reference (no leading `$`), no quote,
backslash or control character, at most 100 characters (a small model under a grammar fills a string until
`max_tokens` otherwise). `jvalue` is JSON of any shape, for arguments whose schema says nothing."""


class _Grammar:
    """Rules interned by their text: two prefixes that need the same rule share one."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = dict(_BASE)
        self._named: dict[str, str] = {}
        self.size = sum(len(name) + len(body) + 5 for name, body in _BASE.items())

    def rule(self, hint: str, body: str) -> str:
        name = self._named.get(body)
        if name is None:
            name = f'{hint}-{len(self.rules)}'
            self._named[body] = name
            self.rules[name] = body
            self.size += len(name) + len(body) + 5
            if self.size > MAX_GRAMMAR_CHARS:
                raise SchemaTooLarge(f'the plan grammar for these tools would be larger than {MAX_GRAMMAR_CHARS:,} '
                                     'characters')
        return name

    def text(self, root: str) -> str:
        return '\n'.join([f'root ::= {root}', *(f'{name} ::= {body}' for name, body in self.rules.items())]) + '\n'


@dataclass(frozen=True, slots=True)
class _Scope:
    """What a value position of a step's arguments may refer to: the shapes of the steps before it, and the
    shape of the `for_each` list's items (`None`: not a `for_each` step)."""

    steps: tuple[_Shape, ...]
    item: _Shape | None = None


class _Builder:
    def __init__(self, tools: list[ToolDefinition], outputs: list[_Shape], max_steps: int) -> None:
        self.g = _Grammar()
        self.tools = tools
        self.outputs = outputs
        self.max_steps = max_steps
        self._tails: dict[tuple[_Shape, frozenset[str] | None, int], str | None] = {}
        self._continuations: dict[tuple[_Shape, ...], str] = {}

    # --- references ------------------------------------------------------------------------------------------

    def tail(self, shape: _Shape, wanted: frozenset[str] | None, depth: int = 0) -> str | None:
        """The rule for what may follow a reference to a value of `shape` (`.field`, `[i]`, or nothing) so that it
        gives `wanted`; `''`: only nothing (the whole value); `None`: nothing does."""
        key = (shape, wanted, depth)
        if key in self._tails:
            return self._tails[key]
        if shape.kinds is None:
            found: str | None = 'anypath'
        else:
            whole = _fits(shape.kinds, wanted)
            parts = []
            if depth < _PATH_DEPTH:
                for name, sub in shape.fields:
                    after = self.tail(sub, wanted, depth + 1)
                    if after is not None:
                        parts.append(f'{_q("." + name)} {after}'.rstrip())
                if shape.items is not None:
                    after = self.tail(shape.items, wanted, depth + 1)
                    if after is not None:
                        parts.append(f'idx {after}'.rstrip())
            if parts:
                found = self.g.rule('tail', f'( {" | ".join(parts)} )?' if whole else ' | '.join(parts))
            else:
                found = '' if whole else None
        self._tails[key] = found
        return found

    def reference(self, scope: _Scope, wanted: frozenset[str] | None) -> str | None:
        """The rule for a reference (a JSON string) that gives `wanted` in `scope`; `None`: none can."""
        forms = []
        steps = [f'{_q(step_id(k))} {tail}'.rstrip() for k, shape in enumerate(scope.steps)
                 if (tail := self.tail(shape, wanted)) is not None]
        if steps:
            forms.append(f'"\\"$ref:" {_alt(steps)} "\\""')
        if scope.item is not None:
            tail = self.tail(scope.item, wanted)
            if tail is not None:
                forms.append(f'"\\"$item" {tail} "\\""')
            if _fits(frozenset({'integer'}), wanted):
                forms.append('"\\"$index\\""')
        return self.g.rule('ref', ' | '.join(forms)) if forms else None

    def lists(self, steps: tuple[_Shape, ...]) -> dict[_Shape, list[str]]:
        """The references to lists among `steps` (a step's whole result, or a field of it), by their items."""
        found: dict[_Shape, list[str]] = {}
        for k, shape in enumerate(steps):
            sid = _q(step_id(k))
            if shape.kinds is None:
                found.setdefault(_UNKNOWN, []).append(sid)
                continue
            if 'array' in shape.kinds:
                found.setdefault(shape.items or _UNKNOWN, []).append(sid)
            for name, sub in shape.fields:
                if sub.kinds is None or 'array' in sub.kinds:
                    found.setdefault(sub.items or _UNKNOWN, []).append(f'{sid} {_q("." + name)}')
        return found

    # --- values ----------------------------------------------------------------------------------------------

    def value(self, schema: Any, root: Mapping[str, Any], scope: _Scope, depth: int) -> str | None:
        """A value position of a tool's arguments: a literal the tool's schema allows, or a reference that gives
        the type it wants. `None`: no value can fill it."""
        schema = _resolved(schema, root)
        literal = self.literal(schema, root, scope, depth)
        reference = self.reference(scope, _wanted(schema, root)) if scope.steps or scope.item is not None else None
        parts = [p for p in (literal, reference) if p is not None]
        return _alt(parts) if parts else None

    def literal(self, schema: Mapping[str, Any], root: Mapping[str, Any], scope: _Scope, depth: int) -> str | None:
        if depth >= MAX_DEPTH:
            return 'jvalue'
        if 'enum' in schema or 'const' in schema:
            values = schema['enum'] if isinstance(schema.get('enum'), list) else [schema.get('const')]
            # A string that starts with `$` would be read as a reference.
            kept = [_q(json.dumps(v)) for v in values if not (isinstance(v, str) and v.startswith('$'))]
            return self.g.rule('enum', ' | '.join(kept)) if kept else None
        branches = schema.get('anyOf', schema.get('oneOf'))
        if isinstance(branches, list):
            parts = [p for b in branches if (p := self.literal(_resolved(b, root), root, scope, depth + 1))]
            return _alt(parts) if parts else None
        kind = schema.get('type')
        if isinstance(kind, list):
            parts = [p for t in kind if isinstance(t, str)
                     and (p := self.literal({**schema, 'type': t}, root, scope, depth + 1))]
            return _alt(parts) if parts else None
        if kind == 'object' or (kind is None and 'properties' in schema):
            properties = schema.get('properties')
            if not isinstance(properties, Mapping) or not properties:
                extra = schema.get('additionalProperties')
                if extra is False:
                    return '"{" ws "}"'
                if not isinstance(extra, Mapping) or not extra:
                    return 'jobject'
                value = self.value(extra, root, scope, depth + 1)  # a mapping: `dict[str, float]`
                pair = f'jkey ws ":" ws {value}'
                return self.g.rule('map', f'"{{" ws ( {pair} ( "," ws {pair} )* )? ws "}}"' if value else
                                   '"{" ws "}"')
            return self.object(properties, set(schema.get('required') or ()), root, scope, depth)
        if kind == 'array':
            item = self.value(schema.get('items', {}), root, scope, depth + 1)
            body = f'"[" ws ( {item} ( "," ws {item} )* )? ws "]"' if item else '"[" ws "]"'
            return self.g.rule('array', body)
        return {'string': 'text', 'integer': 'int', 'number': 'num', 'boolean': 'bool', 'null': '"null"'}.get(
            kind if isinstance(kind, str) else '', 'jvalue')

    def object(self, properties: Mapping[str, Any], required: set[str], root: Mapping[str, Any], scope: _Scope,
               depth: int) -> str | None:
        pairs: list[tuple[str, bool]] = []
        for name, sub in properties.items():
            value = self.value(sub, root, scope, depth + 1)
            if value is None:
                if name in required:
                    return None  # nothing can fill a required argument
                continue
            pairs.append((f'{self.key(str(name))} {value}', name in required))
        return self.g.rule('object', self.object_of(pairs))

    def object_of(self, pairs: list[tuple[str, bool]]) -> str:
        """A JSON object of these members (each a rule text and whether it is required)."""
        members = self.members(pairs)
        return f'"{{" ws {members} ws "}}"' if members else '"{" ws "}"'

    def members(self, pairs: list[tuple[str, bool]]) -> str:
        """The members of a JSON object (each a rule text and whether it is required), in order, the optional ones
        each present or not. Linear in the members: a chain of rules, not every choice of them written out."""
        required = [text for text, needed in pairs if needed]
        optional = [text for text, needed in pairs if not needed]
        later = ''  # the optional members from i on, each after a comma
        laters = [later]
        for text in reversed(optional):
            later = self.g.rule('more', f'( "," ws {text} )? {laters[-1]}'.rstrip())
            laters.append(later)
        laters.reverse()  # laters[i]: the members from i on; laters[-1] is ''
        if required:
            return (' "," ws '.join(required) + f' {laters[0]}').rstrip()
        if not optional:
            return ''
        first = ''  # the optional members from i on, the first present one without a comma
        for i in range(len(optional) - 1, -1, -1):
            this = f'{optional[i]} {laters[i + 1]}'.rstrip()
            first = self.g.rule('opt', f'{this} | {first}' if first else this)
        return f'{first}?'

    # --- steps -----------------------------------------------------------------------------------------------

    def variants(self, steps: tuple[_Shape, ...]) -> dict[_Shape, list[str]]:
        """The step rules at the position after `steps`, by the shape of what each step gives."""
        head = self.g.rule('head', f'"{{" ws "\\"id\\"" ws ":" ws {_json(step_id(len(steps)))} "," ws') + ' '
        when = self.when(steps)
        found: dict[_Shape, list[str]] = {}
        lists = self.lists(steps)
        for tool, output in zip(self.tools, self.outputs, strict=True):
            call = self.g.rule('call', f'"\\"tool\\"" ws ":" ws {_json(tool.name)} "," ws') + ' '
            arguments = self.arguments(tool, _Scope(steps))
            if arguments is not None:
                found.setdefault(output, []).append(self.g.rule(
                    'step', f'{head}{call}{self.key("arguments")} {arguments}{when} ws "}}"'))
            each = _list_of(output) if output.kinds is not None else _UNKNOWN
            for items, sources in lists.items():
                arguments = self.arguments(tool, _Scope(steps, items))
                if arguments is None:
                    continue
                over = self.g.rule('over', f'{self.key("for_each")} "\\"$ref:" {_alt(sources)} "\\"" "," ws')
                found.setdefault(each, []).append(self.g.rule(
                    'each', f'{head}{call}{over} {self.key("arguments")} {arguments}{when} ws "}}"'))
        if steps:
            source = self.reference(_Scope(steps), None)
            found.setdefault(_UNKNOWN, []).append(self.g.rule(
                'select', f'{head}"\\"from\\"" ws ":" ws {source} "," ws "\\"select\\"" ws ":" ws expr ws "}}"'))
        for items, sources in lists.items():  # a shaping step gives a list of the same items (maybe fewer fields)
            found.setdefault(_list_of(items), []).append(self.shape_step(head, items, sources))
        return found

    def key(self, name: str) -> str:
        """The rule for a member's key and colon."""
        return self.g.rule('key', f'{_json(name)} ws ":" ws')

    def arguments(self, tool: ToolDefinition, scope: _Scope) -> str | None:
        parameters = tool.parameters
        if schema_problem(parameters) is not None:
            return 'jobject'  # validation does not use this schema either: the tool checks its own arguments
        properties = parameters.get('properties')
        if not isinstance(properties, Mapping) or not properties:
            return '"{" ws "}"'
        return self.object(properties, set(parameters.get('required') or ()), parameters, scope, 0)

    def when(self, steps: tuple[_Shape, ...]) -> str:
        if not steps:
            return ''
        source = self.reference(_Scope(steps), None)
        rule = self.g.rule('when', f'"," ws "\\"when\\"" ws ":" ws "{{" ws "\\"from\\"" ws ":" ws {source} "," ws '
                                   '"\\"select\\"" ws ":" ws expr ws "}"')
        return f' {rule}?'

    def shape_step(self, head: str, items: _Shape, sources: list[str]) -> str:
        """A step that filters, sorts, cuts and keeps fields of a list (`toolweave.plan._shape`), its members in
        the order they apply, its field names those of the list's items when they are known."""
        fields = [name for name, _ in items.fields]
        scalars = [name for name, sub in items.fields if sub.kinds is None
                   or sub.kinds & {'string', 'number', 'integer', 'boolean'}]
        field = self.g.rule('field', ' | '.join(_json(n) for n in fields)) if fields else 'name'
        sortable = self.g.rule('field', ' | '.join(_json(n) for n in scalars)) if scalars else (
            'name' if not fields else None)
        operators = ' | '.join(_json(op) for op in SHAPE_OPERATORS)
        members = [(f'"\\"from\\"" ws ":" ws "\\"$ref:" {_alt(sources)} "\\""', True)]
        if sortable is not None:
            members += [(f'"\\"where\\"" ws ":" ws "{{" ws "\\"field\\"" ws ":" ws {sortable} "," ws "\\"op\\"" ws '
                         f'":" ws ({operators}) "," ws "\\"value\\"" ws ":" ws scalar ws "}}"', False),
                        (f'"\\"sort_by\\"" ws ":" ws {sortable}', False)]
        members += [('"\\"descending\\"" ws ":" ws bool', False), ('"\\"first\\"" ws ":" ws count', False),
                    (f'"\\"keep\\"" ws ":" ws "[" ws {field} ( "," ws {field} ){{0,7}} ws "]"', False)]
        return self.g.rule('shape', f'{head}{self.members(members)} ws "}}"')

    # --- the trie --------------------------------------------------------------------------------------------

    def continuation(self, steps: tuple[_Shape, ...]) -> str:
        """What may follow the steps so far: the end of the plan, or one more step and what may follow it."""
        found = self._continuations.get(steps)
        if found is not None:
            return found
        if len(self._continuations) >= MAX_PREFIXES:
            raise SchemaTooLarge(f'the plan grammar for these tools would tell apart more than {MAX_PREFIXES:,} '
                                 'sequences of steps')
        count = len(steps)
        ids = ' | '.join(_json(step_id(k)) for k in range(count))
        more = f' ( "," ws ({ids}) ){{0,{count - 1}}}' if count > 1 else ''
        end = self.g.rule('end', f'ws "]" ( "," ws "\\"output_steps\\"" ws ":" ws "[" ws ({ids}){more} ws "]" )? '
                                 'ws "}"')
        parts = [end]
        if count < self.max_steps:
            for shape, rules in self.variants(steps).items():
                parts.append(f'"," ws {_alt(rules)} {self.continuation((*steps, shape))}')
        found = self._continuations[steps] = self.g.rule('then', ' | '.join(parts))
        return found

    def root(self) -> str:
        parts = [f'{_alt(rules)} {self.continuation((shape,))}' for shape, rules in self.variants(()).items()]
        return f'"{{" ws "\\"steps\\"" ws ":" ws "[" ws {_alt(parts)}'


def constrained_grammar(tools: Iterable[ToolDefinition | Tool], max_steps: int = CONSTRAINED_MAX_STEPS) -> str:
    """The constrained plan schema as a GBNF grammar, each reference typed by the step it names (see the module).

    Plans it admits have 1 to `max_steps` steps with ids `s1`, `s2`, ...; references only to earlier steps and
    only to fields those steps' outputs have, of the type the argument wants; `$item` only in a `for_each`
    step, typed by the list's items; tools and argument shapes from `tools`. Raises `SchemaTooLarge` when the
    grammar would exceed `MAX_GRAMMAR_CHARS`."""
    items = list(tools)
    definitions = [t.definition if isinstance(t, Tool) else t for t in items]
    outputs = []
    for item in items:
        schema = _output_of(item)
        known = schema is not None and schema_problem(schema) is None
        outputs.append(_shape(schema, schema) if schema is not None and known else _UNKNOWN)
    builder = _Builder(definitions, outputs, max_steps)
    return builder.g.text(builder.root())
