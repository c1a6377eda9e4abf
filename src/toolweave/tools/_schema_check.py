"""Whether a JSON schema a tool lists can be used within bounded work.

An input or output schema comes from wherever the tool came from: an MCP server, a framework, a developer. A
schema that refers to itself without descending (`{"$ref": "#/$defs/a"}` under `a`), points nowhere, nests
thousands of levels or holds millions of parts would send every walk over it into an endless loop, a
`RecursionError` or seconds of work. `schema_problem` says why a schema cannot be used, after one walk bounded
by `MAX_SCHEMA_PARTS`; what reads schemas (the plan's contract checks, the typed plan schema, dropping unset
nulls) then leaves that schema out instead: the tool itself still checks its arguments when it is called.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

__all__ = ('MAX_SCHEMA_DEPTH', 'MAX_SCHEMA_PARTS', 'resolve_pointer', 'schema_problem')

MAX_SCHEMA_PARTS = 10_000
"""The most objects, arrays and values a schema may hold to be used."""
MAX_SCHEMA_DEPTH = 64
"""The deepest a schema may nest to be used."""

_MISSING = object()
_SAME_INSTANCE = ('allOf', 'anyOf', 'oneOf')
_SAME_INSTANCE_ONE = ('not', 'if', 'then', 'else')
_UNFOLLOWED = ('$dynamicRef', '$recursiveRef')

_KNOWN: dict[int, tuple[Any, str | None]] = {}
_MAX_KNOWN = 1024


def schema_problem(schema: Any) -> str | None:
    """Why `schema` cannot be used to check values within bounded work, as a phrase (`'it refers to itself: ...'`),
    or `None` when it can: at most `MAX_SCHEMA_PARTS` parts and `MAX_SCHEMA_DEPTH` levels, every `$ref` local
    (`#/...`) and resolvable, no chain of references and `allOf`/`anyOf`/`oneOf`/`not`/`if` that comes back to
    where it started without descending into the value, and valid JSON Schema. Remembered per schema object."""
    known = _KNOWN.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    problem = _structure(schema)
    if problem is None:
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            where = '/'.join(str(part) for part in exc.path)
            problem = f'it is not valid JSON Schema ({exc.message}' + (f' at {where})' if where else ')')
        except RecursionError:  # pragma: no cover - the depth is bounded above
            problem = 'it is nested too deeply to read'
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


def _structure(schema: Any) -> str | None:
    """The size, depth and reference problems of `schema`, in one walk (no recursion: it may be deep)."""
    if not isinstance(schema, Mapping):
        return f'it is a {type(schema).__name__}, not a JSON object'
    parts = 0
    objects: list[Mapping[str, Any]] = []
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        parts += 1
        if parts > MAX_SCHEMA_PARTS:
            return f'it has more than {MAX_SCHEMA_PARTS:,} parts'
        if depth > MAX_SCHEMA_DEPTH:
            return f'it is nested more than {MAX_SCHEMA_DEPTH} levels deep'
        if isinstance(node, Mapping):
            objects.append(node)
            problem = _reference_problem(node, schema)
            if problem is not None:
                return problem
            stack.extend((value, depth + 1) for value in node.values())
        elif isinstance(node, list):
            stack.extend((value, depth + 1) for value in node)
    return _cycle(objects, schema)


def _reference_problem(node: Mapping[str, Any], root: Mapping[str, Any]) -> str | None:
    for key in _UNFOLLOWED:
        if key in node:
            return f'it uses "{key}", which is not followed here'
    if '$ref' not in node:
        return None
    ref = node['$ref']
    if not isinstance(ref, str):
        return f'a "$ref" is not a string: {ref!r}'
    if not (ref == '#' or ref.startswith('#/')):
        return f'it refers to another document ({ref[:100]!r}), which is not fetched'
    if resolve_pointer(root, ref) is None:
        return f'a "$ref" points nowhere: {ref[:100]!r}'
    return None


def _applied_to_the_same_value(node: Mapping[str, Any], root: Mapping[str, Any]) -> Iterator[Any]:
    """The subschemas that check the same value as `node` does (not a part of it)."""
    if isinstance(node.get('$ref'), str):
        yield resolve_pointer(root, node['$ref'])
    for key in _SAME_INSTANCE:
        branches = node.get(key)
        if isinstance(branches, list):
            yield from branches
    for key in _SAME_INSTANCE_ONE:
        if key in node:
            yield node[key]
    dependent = node.get('dependentSchemas')
    if isinstance(dependent, Mapping):
        yield from dependent.values()


def _cycle(objects: list[Mapping[str, Any]], root: Mapping[str, Any]) -> str | None:
    """A chain of same-value subschemas that comes back to where it started: checking a value would never end."""
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    for start in objects:
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
