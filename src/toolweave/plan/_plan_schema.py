"""The input schemas `execute_tool_plan` offers a model: compact, string, or typed from the toolset.

- `compact`: one generic step; `arguments` is a JSON object. Small, and the default.
- `string`: `arguments` is a JSON *string*, every object closed: strict mode accepts it, but a model must escape
  JSON inside JSON (and a grammar-constrained decoder cannot check what is inside the string).
- `typed`: each step is a variant per tool whose `arguments` follow that tool's input schema, every value position
  also accepting a reference. Within the limits of strict modes (OpenAI's structured outputs: root object, every
  object closed with all its properties required, optional ones nullable, at most 5,000 object properties and 10
  levels of nesting, 1,000 enum values, 120,000 characters of names and enum values, `anyOf` below the root and no
  `oneOf`/`allOf`/`not`/`if`; Anthropic's strict tool use: no recursive schemas, no numeric or length bounds), so
  strict mode or a local server's grammar-constrained decoding can only produce plans that parse and match the
  tools. A toolset whose schemas do not fit raises `SchemaTooLarge`, which `auto` turns into the compact schema.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeAlias

from toolweave.tools import ToolDefinition
from toolweave.tools._schema_check import resolve_pointer, schema_problem

__all__ = ('PlanSchema', 'SchemaTooLarge', 'compact_schema', 'drop_unset_nulls', 'string_schema', 'typed_schema')

PlanSchema: TypeAlias = Literal['compact', 'string', 'typed', 'auto']
"""Which input schema the plan tool offers (see the module)."""

MAX_PROPERTIES = 5_000
MAX_DEPTH = 10
MAX_ENUM_VALUES = 1_000
MAX_CHARS = 120_000
_DROPPED = frozenset({'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf', 'minLength',
                      'maxLength', 'pattern', 'format', 'minItems', 'maxItems', 'uniqueItems', 'minProperties',
                      'maxProperties', 'title', 'default', 'examples', '$schema'})
"""Keywords strict modes reject or ignore; the plan's validation still checks them against the tool's schema."""
_REF = {'$ref': '#/$defs/ref'}
_REF_PATTERN = '^[$][^"\\\\]*$'
"""A reference: `$` first, and no quote or backslash (a grammar built from `.*` would let the string run past its
closing quote)."""
_NULL = {'type': 'null'}


class SchemaTooLarge(ValueError):
    """The toolset's schemas do not fit in a strict typed plan schema; the message says why."""


def compact_schema() -> dict[str, Any]:
    """The smallest schema: the step shapes are in the tool's description."""
    return {'type': 'object',
            'properties': {'steps': {'type': 'array', 'items': {'type': 'object'}},
                           'output_steps': {'type': 'array', 'items': {'type': 'string'}}},
            'required': ['steps']}


def string_schema() -> dict[str, Any]:
    """Closed objects, `arguments` as a JSON string (strict mode accepts it)."""
    step = {
        'type': 'object',
        'properties': {
            'id': {'type': 'string', 'description': 'Unique step id (letters, digits, _ and -).'},
            'tool': {'type': 'string', 'description': 'Name of the tool to call.'},
            'arguments': {'type': 'string', 'description': 'The tool arguments as a JSON object string; values may '
                          'be "$ref:<step id>" or "$ref:<step id>.<field>".'},
        },
        'required': ['id', 'tool', 'arguments'],
        'additionalProperties': False,
    }
    return {
        'type': 'object',
        'properties': {
            'steps': {'type': 'array', 'items': step, 'description': 'The tool calls of the plan.'},
            'output_steps': {'type': ['array', 'null'], 'items': {'type': 'string'},
                             'description': 'Ids of the steps whose outputs you need back (null: all).'},
        },
        'required': ['steps', 'output_steps'],
        'additionalProperties': False,
    }


class _Budget:
    def __init__(self) -> None:
        self.properties = 0
        self.enums = 0
        self.chars = 0

    def spend(self, properties: int = 0, enums: int = 0, chars: int = 0) -> None:
        self.properties += properties
        self.enums += enums
        self.chars += chars
        if self.properties > MAX_PROPERTIES:
            raise SchemaTooLarge(f'more than {MAX_PROPERTIES} object properties in all')
        if self.enums > MAX_ENUM_VALUES:
            raise SchemaTooLarge(f'more than {MAX_ENUM_VALUES} enum values in all')
        if self.chars > MAX_CHARS:
            raise SchemaTooLarge(f'more than {MAX_CHARS:,} characters of property names and enum values')


class _Strict:
    """Rewrites one tool's input schema for strict mode, every value position also accepting a reference."""

    def __init__(self, tool: str, root: Mapping[str, Any], budget: _Budget) -> None:
        self.tool = tool
        self.root = root
        self.budget = budget
        self.stack: list[str] = []

    def fail(self, where: str, why: str) -> SchemaTooLarge:
        return SchemaTooLarge(f'tool {self.tool!r}, {where}: {why}')

    def node(self, schema: Any, where: str, depth: int, *, top: bool = False) -> dict[str, Any]:
        if depth > MAX_DEPTH:
            raise self.fail(where, f'nested more than {MAX_DEPTH} levels deep')
        if not isinstance(schema, Mapping) or not schema:
            raise self.fail(where, 'a value of any type (strict mode needs a type)')
        if '$ref' in schema or 'allOf' in schema:
            return self.inline(schema, where, depth, top=top)
        for bad in ('not', 'if', 'then', 'else', 'patternProperties', 'dependentSchemas', 'prefixItems'):
            if bad in schema:
                raise self.fail(where, f'"{bad}" is not allowed in strict mode')
        branches = schema.get('anyOf', schema.get('oneOf'))
        if isinstance(branches, list):
            return {'anyOf': _flatten([self.node(branch, where, depth) for branch in branches])}
        kind = schema.get('type')
        if isinstance(kind, list):  # ["string", "null"] -> anyOf, the form every strict mode accepts
            rest = {k: v for k, v in schema.items() if k != 'type'}
            return {'anyOf': _flatten([self.node({**rest, 'type': t}, where, depth) for t in kind])}
        if kind == 'object' or 'properties' in schema:
            return self.object(schema, where, depth, top=top)
        if kind == 'array':
            items = self.node(schema.get('items', {}), f'{where}[]', depth + 1)
            return {'anyOf': [{'type': 'array', 'items': items, **_described(schema)}, _REF]}
        if kind is None and 'enum' not in schema and 'const' not in schema:
            raise self.fail(where, 'a value of any type (strict mode needs a type)')
        out: dict[str, Any] = {k: v for k, v in schema.items() if k not in _DROPPED}
        values = out.get('enum')
        if isinstance(values, list):
            self.budget.spend(enums=len(values), chars=sum(len(str(v)) for v in values))
        if 'const' in out:  # not every strict mode takes const: a one-value enum says the same
            out['enum'] = [out.pop('const')]
        if kind == 'string' or kind == 'null':
            return out  # a reference is a string too; null stays null
        return {'anyOf': [out, _REF]}

    def inline(self, schema: Mapping[str, Any], where: str, depth: int, *, top: bool) -> dict[str, Any]:
        """A `$ref` (to the tool's own `$defs`) or a one-part `allOf`, inlined: the plan schema is one document."""
        if 'allOf' in schema:
            parts = schema['allOf']
            if not isinstance(parts, list) or len(parts) != 1:
                raise self.fail(where, '"allOf" is not allowed in strict mode')
            return self.node({**parts[0], **{k: v for k, v in schema.items() if k != 'allOf'}}, where, depth, top=top)
        target = schema['$ref']
        if target in self.stack:
            raise self.fail(where, f'a recursive schema ({target})')
        self.stack.append(target)
        resolved: Any = self.root
        for part in str(target).removeprefix('#/').split('/'):
            resolved = resolved.get(part, {}) if isinstance(resolved, Mapping) else {}
        try:
            return self.node({**resolved, **{k: v for k, v in schema.items() if k != '$ref'}}, where, depth, top=top)
        finally:
            self.stack.pop()

    def object(self, schema: Mapping[str, Any], where: str, depth: int, *, top: bool) -> dict[str, Any]:
        properties = schema.get('properties') or {}
        extra = schema.get('additionalProperties')
        if not properties or extra not in (None, False):
            raise self.fail(where, 'an object with free-form keys (strict mode needs every key declared)')
        required = set(schema.get('required') or ())
        self.budget.spend(properties=len(properties), chars=sum(len(name) for name in properties))
        out: dict[str, Any] = {}
        for name, sub in properties.items():
            converted = self.node(sub, f'{where}.{name}', depth + 1)
            if name not in required and not _accepts_null(converted):
                converted = {'anyOf': _flatten([converted, _NULL])}
            out[name] = converted
        node = {'type': 'object', 'properties': out, 'required': list(properties), 'additionalProperties': False,
                **_described(schema)}
        return node if top else {'anyOf': [node, _REF]}


def _described(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {'description': schema['description']} if isinstance(schema.get('description'), str) else {}


def _flatten(branches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for branch in branches:
        for item in branch['anyOf'] if list(branch) == ['anyOf'] else [branch]:
            if item not in out:
                out.append(item)
    return out


def _accepts_null(schema: Mapping[str, Any]) -> bool:
    return schema.get('type') == 'null' or any(_accepts_null(b) for b in schema.get('anyOf', ()))


def typed_schema(definitions: Iterable[ToolDefinition]) -> dict[str, Any]:
    """The typed plan schema for these tools. Raises `SchemaTooLarge` saying which tool and where it does not fit."""
    budget = _Budget()
    when = {'anyOf': [{'type': 'object', 'properties': {'from': _REF, 'select': {'type': 'string'}},
                       'required': ['from', 'select'], 'additionalProperties': False}, _NULL]}
    variants: list[dict[str, Any]] = []
    for definition in definitions:
        problem = schema_problem(definition.parameters)
        if problem is not None:
            raise SchemaTooLarge(f'tool {definition.name!r}: its input schema cannot be used ({problem})')
        arguments = _Strict(definition.name, definition.parameters, budget).node(
            dict(definition.parameters) or {'type': 'object', 'properties': {}}, 'arguments', 3, top=True) if (
            definition.parameters.get('properties')) else {'type': 'object', 'properties': {}, 'required': [],
                                                           'additionalProperties': False}
        budget.spend(properties=5, enums=1, chars=len(definition.name) + 30)
        variants.append({
            'type': 'object',
            'properties': {'id': {'type': 'string'}, 'tool': {'type': 'string', 'enum': [definition.name]},
                           'arguments': arguments, 'for_each': {'anyOf': [_REF, _NULL]}, 'when': when},
            'required': ['id', 'tool', 'arguments', 'for_each', 'when'],
            'additionalProperties': False,
        })
    variants.append({
        'type': 'object',
        'properties': {'id': {'type': 'string'}, 'from': {'anyOf': [_REF, {'type': 'array', 'items': _REF}]},
                       'select': {'type': 'string'}, 'when': when},
        'required': ['id', 'from', 'select', 'when'],
        'additionalProperties': False,
    })
    return {
        'type': 'object',
        'properties': {'steps': {'type': 'array', 'items': {'anyOf': variants}},
                       'output_steps': {'anyOf': [{'type': 'array', 'items': {'type': 'string'}}, _NULL]}},
        'required': ['steps', 'output_steps'],
        'additionalProperties': False,
        '$defs': {'ref': {'type': 'string', 'pattern': _REF_PATTERN,
                          'description': '"$ref:STEP.field", or in for_each arguments "$item.field" / "$index"'}},
    }


def drop_unset_nulls(value: Any, schema: Any, root: Mapping[str, Any]) -> Any:
    """`value` without the `null`s a strict schema made a model send for optional properties the tool's own
    schema does not let be null (null there means "not given"). A schema that cannot be used (`schema_problem`)
    changes nothing."""
    if schema_problem(root) is not None:
        return value
    return _without_nulls(value, schema, root, 0)


def _target(schema: Any, root: Mapping[str, Any]) -> Any:
    """`schema` with its `$ref`s followed (a usable schema has no cycle of them; the bound is for safety)."""
    for _ in range(_MAX_HOPS):
        if not (isinstance(schema, Mapping) and isinstance(schema.get('$ref'), str)):
            return schema
        schema = resolve_pointer(root, schema['$ref'])
    return None


def _without_nulls(value: Any, schema: Any, root: Mapping[str, Any], depth: int) -> Any:
    schema = _target(schema, root)
    if not isinstance(schema, Mapping) or depth > _MAX_DESCENT:
        return value
    if isinstance(value, dict) and isinstance(schema.get('properties'), Mapping):
        properties = schema['properties']
        required = schema.get('required')
        required = set(required) if isinstance(required, list) else set()
        return {key: _without_nulls(item, properties.get(key), root, depth + 1) for key, item in value.items()
                if not (item is None and key in properties and key not in required
                        and not _allows_null(properties[key], root))}
    if isinstance(value, list) and isinstance(schema.get('items'), Mapping):
        return [_without_nulls(item, schema['items'], root, depth + 1) for item in value]
    return value


def _allows_null(schema: Any, root: Mapping[str, Any], depth: int = 0) -> bool:
    schema = _target(schema, root)
    if not isinstance(schema, Mapping) or depth > _MAX_DESCENT:
        return True
    kind = schema.get('type')
    if kind == 'null' or isinstance(kind, list) and 'null' in kind:
        return True
    branches = schema.get('anyOf', schema.get('oneOf'))
    if isinstance(branches, list):
        return any(_allows_null(b, root, depth + 1) for b in branches)
    return kind is None and 'enum' not in schema and 'const' not in schema and 'properties' not in schema


_MAX_HOPS = 64
_MAX_DESCENT = 64
"""Levels of a value followed into its schema (a recursive schema could follow a deep value to any depth)."""
