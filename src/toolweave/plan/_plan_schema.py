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
- `constrained`: for grammar-constrained decoding (llama.cpp, Ollama, vLLM): positional step ids, so references
  can only name earlier steps, `$item` only inside a `for_each` step, tools and argument shapes from the toolset,
  `for_each` and `when` optional (see `constrained_schema`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypeAlias

from toolweave.tools import Tool, ToolDefinition
from toolweave.tools._schema_check import resolve_pointer, schema_problem

__all__ = ('CONSTRAINED_MAX_STEPS', 'SHAPE_OPERATORS', 'PlanSchema', 'SchemaTooLarge', 'compact_schema',
           'constrained_schema', 'drop_unset_nulls', 'step_id', 'string_schema', 'typed_schema')

PlanSchema: TypeAlias = Literal['compact', 'string', 'typed', 'auto', 'constrained']
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


# --- constrained: for grammar-constrained decoding (llama.cpp, Ollama, vLLM) ---------------------------------------

CONSTRAINED_MAX_STEPS = 4
"""Steps a constrained plan may have: each position is its own grammar rule, so the schema grows with it, and a
small model tends to use every step it is allowed (Gemma 3 270M wrote six of six, then repeated output_steps)."""
_FIELD_PATH = '([.][A-Za-z_][A-Za-z0-9_]{0,39}|\\[[0-9]{1,4}\\]){0,4}'
_LITERAL_TEXT = {'type': 'string', 'pattern': '^([^$"\\\\][^"\\\\]{0,99})?$'}
"""A literal string argument: not a reference (no leading `$`), no quote or backslash, at most 100 characters
(a grammar bounds nothing else: a small model under one can fill a string until `max_tokens` cuts it)."""
_NAME = {'type': 'string', 'pattern': '^[A-Za-z_][A-Za-z0-9_ .-]{0,39}$'}
_EXPRESSION = {'type': 'string', 'pattern': '^[^"\\\\]{1,200}$'}
SHAPE_OPERATORS = ('==', '!=', '<', '<=', '>', '>=', 'contains')


def step_id(position: int) -> str:
    """The id of the step at `position` (0-based) in a constrained plan: `s1`, `s2`, ..."""
    return f's{position + 1}'


def constrained_schema(tools: Iterable[ToolDefinition | Tool], max_steps: int = CONSTRAINED_MAX_STEPS,
                       ) -> dict[str, Any]:
    """A plan schema that rules out what validation would reject, for a decoder that follows it exactly
    (llama.cpp's `json_schema`/GBNF, Ollama's `format`, vLLM's structured outputs; not OpenAI strict mode, which
    has no `prefixItems`).

    Steps have positional ids (`s1`, `s2`, ... in order), so each position's schema can enumerate what it may
    refer to: `"$ref:sK..."` only for earlier steps, `"$item"` only inside the arguments of a step with
    `for_each`, tool names and argument shapes only from `tools`, and `output_steps` only the plan's own steps.
    When every tool declares its output (a `@tool` function's return annotation, an MCP `outputSchema`), a
    reference may only name fields those outputs have, of the type the argument wants (`"$ref:s1.temp_c"` for a
    number, `"$item.id"` for a string; a whole result only where some tool returns that type). A plan is 1 to
    `max_steps` steps (one fixed-length alternative per count). `for_each` and `when` are optional (a grammar
    that requires every key makes a small model fill them on every step); a step either calls a tool, selects
    with JMESPath, or shapes an earlier result with `keep` / `sort_by` / `first` / `where`.
    """
    items = list(tools)
    definitions = [t.definition if isinstance(t, Tool) else t for t in items]
    outputs = _Outputs([_output_of(t) for t in items])
    defs: dict[str, Any] = {}
    for position in range(max_steps):
        variants = _position_variants(position, definitions, outputs)
        defs[step_id(position)] = variants[0] if len(variants) == 1 else {'anyOf': variants}
    # One fixed-length alternative per count (a grammar's tuple; the bounds say the same to a JSON Schema
    # validator), each with the output_steps it can name.
    plans = [{'type': 'object',
              'properties': {
                  'steps': {'type': 'array', 'prefixItems': [{'$ref': f'#/$defs/{step_id(p)}'} for p in range(count)],
                            'minItems': count, 'maxItems': count},
                  'output_steps': {'type': 'array', 'items': {'enum': [step_id(p) for p in range(count)]},
                                   'minItems': 1, 'maxItems': count}},
              'required': ['steps'], 'additionalProperties': False} for count in range(1, max_steps + 1)]
    return {'anyOf': plans, '$defs': defs}


def _output_of(tool: ToolDefinition | Tool) -> Mapping[str, Any] | None:
    if not isinstance(tool, Tool):
        return None
    from toolweave.plan._contracts import output_schema  # the contracts module reads return annotations

    return output_schema(tool)


_IDENT = re.compile(r'[A-Za-z_][A-Za-z0-9_]{0,39}\Z')


class _Outputs:
    """What the tools' declared outputs allow a reference to reach, by JSON type: the whole result, a field of
    an object result, a field of a list result's items. `known` is false when a tool declares nothing (then any
    reference path is let through, as validation does)."""

    def __init__(self, schemas: list[Mapping[str, Any] | None]) -> None:
        self.known = bool(schemas) and all(isinstance(schema, Mapping) for schema in schemas)
        self.whole: set[str] = set()
        self.fields: dict[str, set[str]] = {}
        self.item_fields: dict[str, set[str]] = {}
        for schema in schemas if self.known else ():
            assert schema is not None
            root = schema
            kind = _kind(schema, root)
            self.whole |= kind
            if 'object' in kind:
                _collect(_resolved(schema, root), root, self.fields)
            if 'array' in kind:
                item = _resolved(_resolved(schema, root).get('items', {}), root)
                _collect(item, root, self.item_fields)

    def reference(self, ids: str, wanted: str | None, *, item: bool) -> dict[str, Any] | None:
        """A string schema for the references to steps `ids` (a regex alternation) that give `wanted`; `$item`
        ones too when `item`. `None`: no reference can."""
        if not self.known:
            path = _FIELD_PATH
            forms = [f'ref:({ids}){path}'] + ([f'item{path}', 'index'] if item else [])
        else:
            forms = []
            if wanted is None or _fits(self.whole, wanted):
                forms.append(f'ref:({ids})')
            named = [f for f, kinds in self.fields.items() if wanted is None or _fits(kinds, wanted)]
            if named:
                forms.append(f'ref:({ids})[.]({"|".join(named)})')
            each = [f for f, kinds in self.item_fields.items() if wanted is None or _fits(kinds, wanted)]
            if each:
                forms.append(f'ref:({ids})\\[[0-9]{{1,3}}\\][.]({"|".join(each)})')
                if item:
                    forms.append(f'item[.]({"|".join(each)})')
            if item and (wanted is None or _fits({'object'}, wanted)) and self.item_fields:
                forms.append('item')
            if item and (wanted is None or _fits({'integer'}, wanted)):
                forms.append('index')
        if not forms:
            return None
        return {'type': 'string', 'pattern': f'^[$]({"|".join(forms)})$'}

    def for_each(self, ids: str) -> dict[str, Any]:
        """References to earlier steps that give a list."""
        if not self.known:
            return {'type': 'string', 'pattern': f'^[$]ref:({ids}){_FIELD_PATH}$'}
        lists = [f for f, kinds in self.fields.items() if 'array' in kinds]
        forms = ([f'ref:({ids})'] if 'array' in self.whole or not lists else []) + (
            [f'ref:({ids})[.]({"|".join(lists)})'] if lists else [])
        return {'type': 'string', 'pattern': f'^[$]({"|".join(forms)})$'}


def _resolved(schema: Any, root: Mapping[str, Any]) -> Mapping[str, Any]:
    for _ in range(MAX_DEPTH):
        if not isinstance(schema, Mapping) or not isinstance(schema.get('$ref'), str):
            break
        target: Any = root
        for part in schema['$ref'].removeprefix('#/').split('/'):
            target = target.get(part, {}) if isinstance(target, Mapping) else {}
        schema = target
    return schema if isinstance(schema, Mapping) else {}


def _kind(schema: Any, root: Mapping[str, Any]) -> set[str]:
    schema = _resolved(schema, root)
    kind = schema.get('type')
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    branches = schema.get('anyOf', schema.get('oneOf'))
    if isinstance(branches, list):
        return set().union(*(_kind(b, root) for b in branches)) if branches else set()
    return {'object'} if 'properties' in schema else {'string', 'number', 'integer', 'boolean', 'array', 'object'}


def _collect(schema: Mapping[str, Any], root: Mapping[str, Any], into: dict[str, set[str]]) -> None:
    properties = schema.get('properties')
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            if isinstance(name, str) and _IDENT.match(name):
                into.setdefault(name, set()).update(_kind(sub, root))


def _fits(kinds: set[str], wanted: str) -> bool:
    if wanted in kinds:
        return True
    return wanted == 'number' and 'integer' in kinds


def _position_variants(position: int, tools: list[ToolDefinition], outputs: _Outputs) -> list[dict[str, Any]]:
    sid = {'enum': [step_id(position)]}
    if position == 0:
        return [_tool_step(sid, tool, None, None) for tool in tools]
    ids = '|'.join(step_id(p) for p in range(position))
    earlier = {'type': 'string', 'pattern': f'^[$]ref:({ids}){_FIELD_PATH}$'}

    def plain(wanted: str | None) -> dict[str, Any] | None:
        return outputs.reference(ids, wanted, item=False)

    def per_item(wanted: str | None) -> dict[str, Any] | None:
        return outputs.reference(ids, wanted, item=True)

    when = {'type': 'object', 'properties': {'from': earlier, 'select': _EXPRESSION},
            'required': ['from', 'select'], 'additionalProperties': False}
    variants = [_tool_step(sid, tool, plain, when) for tool in tools]
    variants += [_tool_step(sid, tool, per_item, when, for_each=outputs.for_each(ids)) for tool in tools]
    variants.append({'type': 'object',
                     'properties': {'id': sid, 'from': earlier, 'select': _EXPRESSION},
                     'required': ['id', 'from', 'select'], 'additionalProperties': False})
    shape = {'id': sid, 'from': earlier, 'keep': {'type': 'array', 'items': _NAME, 'minItems': 1, 'maxItems': 8},
             'where': {'type': 'object', 'properties': {'field': _NAME,
                                                        'op': {'enum': list(SHAPE_OPERATORS)},
                                                        'value': {'type': ['string', 'number', 'boolean']}},
                       'required': ['field', 'op', 'value'], 'additionalProperties': False},
             'sort_by': _NAME, 'descending': {'type': 'boolean'}, 'first': {'type': 'integer', 'minimum': 0}}
    variants.append({'type': 'object', 'properties': shape, 'required': ['id', 'from'],
                     'additionalProperties': False})
    return variants


_Refs: TypeAlias = 'Callable[[str | None], dict[str, Any] | None] | None'


def _tool_step(sid: dict[str, Any], tool: ToolDefinition, refs: _Refs, when: dict[str, Any] | None,
               *, for_each: dict[str, Any] | None = None) -> dict[str, Any]:
    properties: dict[str, Any] = {'id': sid, 'tool': {'enum': [tool.name]}}
    if for_each is not None:
        properties['for_each'] = for_each
    parameters = tool.parameters
    properties['arguments'] = _value(parameters, refs, parameters, 0, top=True)
    required = list(properties)
    if when is not None:
        properties['when'] = when
    return {'type': 'object', 'properties': properties, 'required': required, 'additionalProperties': False}


def _value(schema: Any, refs: _Refs, root: Mapping[str, Any], depth: int, *,
           top: bool = False) -> dict[str, Any]:
    """A value position of a tool's arguments: what the tool's schema allows, or (below the top) a reference
    that gives the type it wants."""
    schema = _resolved(schema, root)
    literal = _literal(schema, refs, root, depth)
    if top or refs is None:
        return literal
    kind = schema.get('type')
    reference = refs(kind if isinstance(kind, str) else None)
    return literal if reference is None else {'anyOf': [literal, reference]}


def _literal(schema: Any, refs: _Refs, root: Mapping[str, Any], depth: int) -> dict[str, Any]:
    if not isinstance(schema, Mapping) or depth >= MAX_DEPTH:
        return {}
    kept = {k: v for k, v in schema.items() if k in ('enum', 'const', 'description')}
    if 'enum' in kept or 'const' in kept:
        return kept
    branches = schema.get('anyOf', schema.get('oneOf'))
    if isinstance(branches, list):
        return {'anyOf': [_literal(b, refs, root, depth + 1) for b in branches]}
    kind = schema.get('type')
    if isinstance(kind, list):
        return {'anyOf': [_literal({**schema, 'type': t}, refs, root, depth + 1) for t in kind]}
    if kind == 'object' or 'properties' in schema:
        properties = schema.get('properties') or {}
        if not properties:
            return {'type': 'object'}
        required = [name for name in properties if name in set(schema.get('required') or ())]
        return {'type': 'object',
                'properties': {name: _value(sub, refs, root, depth + 1) for name, sub in properties.items()},
                'required': required, 'additionalProperties': False}
    if kind == 'array':
        return {'type': 'array', 'items': _value(schema.get('items', {}), refs, root, depth + 1)}
    if kind == 'string':
        return dict(_LITERAL_TEXT)
    if kind in ('integer', 'number', 'boolean', 'null'):
        return {'type': kind}
    return {}
