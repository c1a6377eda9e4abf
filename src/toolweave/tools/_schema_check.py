"""Whether a JSON schema a tool lists can be used within bounded work.

An input or output schema comes from wherever the tool came from: an MCP server, a framework, a developer. A
schema that refers to itself without descending (`{"$ref": "#/$defs/a"}` under `a`), points nowhere, nests
thousands of levels, holds millions of parts or puts a number where a keyword takes a schema would send every
walk over it into an endless loop, a `RecursionError`, a crash or seconds of work. `schema_problem` says why a
schema cannot be used, after one walk bounded by `MAX_SCHEMA_PARTS` (a few microseconds a part: JSON Schema's own
meta-schema check costs half a millisecond a property, so it is not used); what reads schemas (the plan's
contract checks, the typed plan schema, dropping unset nulls) then leaves that schema out instead: the tool itself
still checks its arguments when it is called.

Regular expressions (`pattern`) and `uniqueItems` are not run by the contract checks at all (see
`toolweave.plan._contracts`): a pattern can backtrack for ever on a long text, and `uniqueItems` compares every pair
of a long list; a schema matching property names with regular expressions (`patternProperties`) is not used.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal
from urllib.parse import unquote

__all__ = ('MAX_SCHEMA_DEPTH', 'MAX_SCHEMA_PARTS', 'resolve_pointer', 'schema_problem')

MAX_SCHEMA_PARTS = 10_000
"""The most objects, arrays and values a schema may hold to be used."""
MAX_SCHEMA_DEPTH = 64
"""The deepest a schema may nest to be used."""

_MISSING = object()
_TYPES = frozenset({'string', 'number', 'integer', 'boolean', 'object', 'array', 'null'})
_SCHEMA = frozenset({'items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains', 'propertyNames',
                     'unevaluatedItems', 'unevaluatedProperties', 'additionalItems', 'contentSchema'})
"""Keywords whose value is a schema."""
_SCHEMA_MAPS = frozenset({'properties', '$defs', 'definitions', 'dependentSchemas'})
"""Keywords whose value maps names to schemas."""
_SCHEMA_LISTS = frozenset({'allOf', 'anyOf', 'oneOf', 'prefixItems'})
"""Keywords whose value is a non-empty list of schemas."""
_NUMBERS = frozenset({'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'})
_COUNTS = frozenset({'minLength', 'maxLength', 'minItems', 'maxItems', 'minProperties', 'maxProperties',
                     'minContains', 'maxContains'})
_UNUSED = {'$dynamicRef': 'it uses "$dynamicRef", which is not followed here',
           '$recursiveRef': 'it uses "$recursiveRef", which is not followed here',
           'patternProperties': 'it matches property names with regular expressions ("patternProperties"), which '
                                'are not run here'}
_SAME_VALUE = ('allOf', 'anyOf', 'oneOf')
_SAME_VALUE_ONE = ('not', 'if', 'then', 'else')

Kind = Literal['schema', 'map', 'list', 'data']

_KNOWN: dict[int, tuple[Any, str | None]] = {}
_MAX_KNOWN = 1024


def schema_problem(schema: Any) -> str | None:
    """Why `schema` cannot be used to check values within bounded work, as a phrase (`'it refers to itself ...'`),
    or `None` when it can: at most `MAX_SCHEMA_PARTS` parts and `MAX_SCHEMA_DEPTH` levels, every keyword of the
    type JSON Schema gives it, every `$ref` local (`#/...`) and resolvable, no `$id` below the root, and no chain of
    references and `allOf`/`anyOf`/`oneOf`/`not`/`if` that comes back to where it started without descending into
    the value. Remembered per schema object."""
    known = _KNOWN.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    problem = _Walk(schema).problem()
    if len(_KNOWN) >= _MAX_KNOWN:
        _KNOWN.clear()
    _KNOWN[id(schema)] = (schema, problem)  # the schema is kept too, so its id is not reused meanwhile
    return problem


def resolve_pointer(root: Any, ref: str) -> Any:
    """The part of `root` a local `$ref` (`#`, `#/$defs/a`, with `~0`, `~1` and percent escapes) points at, or
    `None`."""
    if ref == '#':
        return root
    if not ref.startswith('#/'):
        return None
    target = root
    for raw in ref[2:].split('/'):
        part = unquote(raw).replace('~1', '/').replace('~0', '~')
        if isinstance(target, Mapping):
            target = target.get(part, _MISSING)
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            return None
        if target is _MISSING:
            return None
    return target


class _Walk:
    """One walk over a schema, knowing at each place whether it holds a schema, names of schemas, a list of
    schemas or plain data (a `default`, an `enum`), without recursion (a schema may be deep)."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.parts = 0
        self.schemas: dict[int, Mapping[str, Any]] = {}
        """The schema objects met, by id (the cycle check follows them)."""

    def problem(self) -> str | None:
        if not isinstance(self.root, Mapping):
            return f'it is a {type(self.root).__name__}, not a JSON object'
        stack: list[tuple[Any, int, Kind, str]] = [(self.root, 1, 'schema', '#')]
        while stack:
            node, depth, kind, where = stack.pop()
            self.parts += 1
            if self.parts > MAX_SCHEMA_PARTS:
                return f'it has more than {MAX_SCHEMA_PARTS:,} parts'
            if depth > MAX_SCHEMA_DEPTH:
                return f'it is nested more than {MAX_SCHEMA_DEPTH} levels deep'
            problem = self.visit(node, depth, kind, where, stack)
            if problem is not None:
                return problem if problem.startswith('it ') else f'it is not valid JSON Schema: {problem}'
        return _cycle(list(self.schemas.values()), self.root)

    def visit(self, node: Any, depth: int, kind: Kind, where: str,
              stack: list[tuple[Any, int, Kind, str]]) -> str | None:
        if kind == 'data':
            children = node.values() if isinstance(node, Mapping) else node if isinstance(node, list) else ()
            stack.extend((child, depth + 1, 'data', where) for child in children)
            return None
        if kind == 'map':
            if not isinstance(node, Mapping):
                return f'{where} is not an object of schemas'
            stack.extend((child, depth + 1, 'schema', f'{where}/{name}') for name, child in node.items())
            return None
        if kind == 'list':
            if not isinstance(node, list) or not node:
                return f'{where} is not a non-empty array of schemas'
            stack.extend((child, depth + 1, 'schema', f'{where}/{i}') for i, child in enumerate(node))
            return None
        if isinstance(node, bool):
            return None
        if not isinstance(node, Mapping):
            return f'{where} is {type(node).__name__} {str(node)[:40]!r}, not a schema'
        if id(node) in self.schemas:
            return None
        self.schemas[id(node)] = node
        problem = self.keywords(node, where)
        if problem is not None:
            return problem
        for key, value in node.items():
            child: Kind = ('schema' if key in _SCHEMA else 'map' if key in _SCHEMA_MAPS else
                           'list' if key in _SCHEMA_LISTS else 'data')
            stack.append((value, depth + 1, child, f'{where}/{key}'))
        ref = node.get('$ref')
        if isinstance(ref, str):
            stack.append((resolve_pointer(self.root, ref), depth + 1, 'schema', ref))  # checked as a schema too
        return None

    def keywords(self, node: Mapping[str, Any], where: str) -> str | None:
        """Why a keyword of this schema is not of the type JSON Schema gives it, or not followed here."""
        for key, why in _UNUSED.items():
            if key in node:
                return why
        if '$id' in node and node is not self.root:
            return f'it sets "$id" below its root ({where}), which changes what its references mean'
        if '$ref' in node:
            problem = _reference_problem(node['$ref'], self.root)
            if problem is not None:
                return problem
        kind = node.get('type', 'string')
        if not (kind in _TYPES if isinstance(kind, str) else isinstance(kind, list) and kind and all(
                isinstance(k, str) and k in _TYPES for k in kind)):
            return f'"type" at {where} is {kind!r}, not a JSON type (or a list of them)'
        required = node.get('required', [])
        if not (isinstance(required, list) and all(isinstance(r, str) for r in required)):
            return f'"required" at {where} is {str(required)[:40]!r}, not a list of names'
        if 'enum' in node and not isinstance(node['enum'], list):
            return f'"enum" at {where} is not a list'
        for key in _NUMBERS.intersection(node):
            if not isinstance(node[key], int | float) or isinstance(node[key], bool):
                return f'"{key}" at {where} is {node[key]!r}, not a number'
        for key in _COUNTS.intersection(node):
            if type(node[key]) is not int or node[key] < 0:
                return f'"{key}" at {where} is {node[key]!r}, not a count'
        if 'pattern' in node and not isinstance(node['pattern'], str):
            return f'"pattern" at {where} is not a text'
        return None


def _reference_problem(ref: Any, root: Mapping[str, Any]) -> str | None:
    if not isinstance(ref, str):
        return f'it has a "$ref" that is not a string: {ref!r}'
    if not (ref == '#' or ref.startswith('#/')):
        return f'it refers to another document ({ref[:100]!r}), which is not fetched'
    target = resolve_pointer(root, ref)
    if target is None:
        return f'it has a "$ref" that points nowhere: {ref[:100]!r}'
    if not isinstance(target, Mapping | bool):
        return f'it has a "$ref" that points at something that is not a schema: {ref[:100]!r}'
    return None


def _applied_to_the_same_value(node: Mapping[str, Any], root: Mapping[str, Any]) -> Iterator[Any]:
    """The subschemas that check the same value as `node` does (not a part of it)."""
    if isinstance(node.get('$ref'), str):
        yield resolve_pointer(root, node['$ref'])
    for key in _SAME_VALUE:
        branches = node.get(key)
        if isinstance(branches, list):
            yield from branches
    for key in _SAME_VALUE_ONE:
        if key in node:
            yield node[key]
    dependent = node.get('dependentSchemas')
    if isinstance(dependent, Mapping):
        yield from dependent.values()


def _cycle(schemas: list[Mapping[str, Any]], root: Mapping[str, Any]) -> str | None:
    """A chain of same-value subschemas that comes back to where it started: checking a value would never end."""
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    for start in schemas:
        if id(start) in state:
            continue
        path: list[tuple[Mapping[str, Any], Iterator[Any]]] = [(start, _applied_to_the_same_value(start, root))]
        state[id(start)] = 1
        while path:
            node, following = path[-1]
            for child in following:
                if not isinstance(child, Mapping):
                    continue
                seen = state.get(id(child))
                if seen == 1:
                    return f'it refers to itself without descending into the value ({_name(child, root)})'
                if seen is None:
                    state[id(child)] = 1
                    path.append((child, _applied_to_the_same_value(child, root)))
                    break
            else:
                state[id(node)] = 2
                path.pop()
    return None


def _name(node: Mapping[str, Any], root: Mapping[str, Any]) -> str:
    """Where `node` is defined, for a message: `#/$defs/a`, or its `$ref`."""
    for key in ('$defs', 'definitions'):
        defs = root.get(key)
        if isinstance(defs, Mapping):
            for name, value in defs.items():
                if value is node:
                    return f'#/{key}/{name}'
    ref = node.get('$ref')
    return str(ref) if isinstance(ref, str) else 'a subschema'
