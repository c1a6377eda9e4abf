"""What tools promise, checked before a plan runs: literal arguments against each tool's input schema, and
references against the output schema of the step they read (a `@tool` function's return annotation, or an MCP
tool's `outputSchema`).

Only definite problems are reported: a reference whose type is unknown (no output schema, an `$item`, text
spliced into a string) fits anywhere, and a type the tool's own validation may coerce (the text "5" for an
integer) is let through, as the tool would let it through at run time.

A schema that cannot be read within bounded work (`schema_problem`: one that refers to itself, points nowhere, is
too deep or too large, or is not JSON Schema) is not used: the tool's arguments or output are then not checked
before the plan runs (a warning says so, once per schema), and the tool still checks its arguments when called.
"""

from __future__ import annotations

import logging
import typing
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any
from weakref import WeakKeyDictionary

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError
from pydantic import BaseModel, TypeAdapter

from toolweave.plan._model import PlanSteps
from toolweave.plan._refs import ITEM_POSITION, Segment, format_path
from toolweave.tools import ArgumentsError, CheckedArguments, FunctionTool, Tool, ToolDefinition, ToolResult
from toolweave.tools._schema_check import schema_problem

__all__ = ('Contract', 'Contracts', 'Reference', 'fits', 'json_types', 'literal_problems', 'output_schema',
           'schema_at')

logger = logging.getLogger('toolweave.plan')

_SCALARS = {str: 'string', bool: 'boolean', int: 'integer', float: 'number', type(None): 'null', dict: 'object',
            list: 'array'}
_SIMPLE_KEYWORDS = frozenset({'type', 'description', 'title', 'default', 'examples'})
_STRING = frozenset({'string'})
_ALL_TYPES = frozenset({'string', 'integer', 'number', 'boolean', 'null', 'object', 'array'})


class Reference:
    """Stands for a reference in arguments being checked: its value is known only at run time. `types` are the
    JSON types it may have (`None`: unknown)."""

    __slots__ = ('text', 'types')

    def __init__(self, text: str, types: frozenset[str] | None) -> None:
        self.text = text
        self.types = types

    def __repr__(self) -> str:
        return repr(self.text)


# --- reading schemas ----------------------------------------------------------------------------------------------

def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    """`schema` with local `$ref`s (`#/$defs/X`, `#/definitions/X`) followed."""
    seen = 0
    while isinstance(schema, Mapping) and isinstance(schema.get('$ref'), str) and seen < 32:
        target: Any = root
        for part in schema['$ref'].removeprefix('#/').split('/'):
            target = target.get(part) if isinstance(target, Mapping) else None
        if target is None:
            return {}
        schema = target
        seen += 1
    return schema


def _branches(schema: Mapping[str, Any]) -> list[Any] | None:
    for key in ('anyOf', 'oneOf'):
        if isinstance(schema.get(key), list):
            return list(schema[key])
    return None


def json_types(schema: Any, root: Mapping[str, Any]) -> frozenset[str] | None:
    """The JSON types `schema` accepts (`integer` implies nothing more), or `None` when it accepts any."""
    schema = _resolve(schema, root)
    if not isinstance(schema, Mapping):
        return None
    branches = _branches(schema)
    if branches is not None:
        found: set[str] = set()
        for branch in branches:
            types = json_types(branch, root)
            if types is None:
                return None
            found |= types
        return frozenset(found)
    kind = schema.get('type')
    if isinstance(kind, str):
        return frozenset({kind})
    if isinstance(kind, list):
        return frozenset(t for t in kind if isinstance(t, str))
    values = schema['enum'] if isinstance(schema.get('enum'), list) else (
        [schema['const']] if 'const' in schema else None)
    if values is not None:
        return frozenset(_SCALARS.get(type(v), 'string') for v in values)
    if 'properties' in schema:
        return frozenset({'object'})
    if 'items' in schema:
        return frozenset({'array'})
    return None


def schema_at(schema: Any, path: Sequence[Segment], root: Mapping[str, Any]) -> tuple[Any, str | None]:
    """The schema of the value at `path` inside a value of `schema`: `(schema, None)`, `(None, None)` when it
    cannot be known, or `(None, problem)` when the path cannot exist (the problem says what exists instead)."""
    for depth, segment in enumerate(path):
        schema = _resolve(schema, root)
        if not isinstance(schema, Mapping):
            return None, None
        branches = _branches(schema)
        if branches is not None:
            found = [schema_at(branch, path[depth:], root) for branch in branches]
            fits = [sub for sub, problem in found if problem is None]
            if not fits:
                return None, found[0][1]
            return (None if any(sub is None for sub in fits) else {'anyOf': fits}), None
        types = json_types(schema, root)
        where = format_path(path[:depth]) or 'the top level'
        if types is not None and not types & {'object', 'array'}:
            return None, f'the value at {where} is {"/".join(sorted(types))}, which has no fields'
        index = segment if isinstance(segment, int) else int(segment) if segment.lstrip('-').isdigit() else None
        if types is not None and 'object' not in types and index is None:
            return None, f'the value at {where} is an array: use an index like [0], not a field name'
        if index is not None and (types is None or 'array' in types) and 'items' in schema:
            schema = schema['items']
            continue
        properties = schema.get('properties')
        extra = schema.get('additionalProperties')
        key = str(segment)
        if isinstance(properties, Mapping) and key in properties:
            schema = properties[key]
        elif isinstance(extra, Mapping):
            schema = extra
        elif isinstance(properties, Mapping) and extra is not True and types == frozenset({'object'}):
            fields = ', '.join(properties) or '(none)'
            return None, f'there is no field {key!r} at {where}; the fields there are: {fields}'
        else:
            return None, None
    return schema, None


def fits(given: frozenset[str] | None, wanted: frozenset[str] | None) -> bool:
    """Whether a value of types `given` may be accepted where `wanted` is: unknown fits anything; integers are
    numbers; text may be coerced to a number or a boolean by the tool's validation."""
    if given is None or wanted is None:
        return True
    widened = set(given)
    if 'integer' in widened:
        widened.add('number')
    if 'number' in widened:
        widened.add('integer')  # 2.0 is an integer to most validators
    if 'string' in widened:
        widened |= {'number', 'integer', 'boolean'}
    return bool(widened & wanted)


# --- output schemas -----------------------------------------------------------------------------------------------

@lru_cache(maxsize=1024)
def _return_schema(function: Callable[..., Any]) -> Mapping[str, Any] | None:
    try:
        hint = typing.get_type_hints(function).get('return')
    except Exception:
        return None
    if hint is None or hint is Any or hint is type(None) or hint is str or hint is ToolResult:
        return None
    args = typing.get_args(hint)
    if str in args or Any in args or ToolResult in args:  # text may hold JSON the step parses: the shape is unknown
        return None
    if isinstance(hint, type) and issubclass(hint, ToolResult):
        return None
    try:
        schema = TypeAdapter(hint).json_schema(mode='serialization')
    except Exception:  # a type pydantic cannot describe: the output is simply not checked
        return None
    return schema if not (isinstance(hint, type) and issubclass(hint, BaseModel) and not schema) else None


def output_schema(tool: Tool) -> Mapping[str, Any] | None:
    """The JSON schema of a tool's value, when it declares one: `metadata.extra['output_schema']` (MCP tools' own
    `outputSchema`), else a `@tool` function's return annotation (through wrappers that keep its parameters). A
    declared schema that cannot be used (`schema_problem`) counts as none."""
    definition = tool.definition
    declared = definition.metadata.extra.get('output_schema')
    if isinstance(declared, Mapping):
        return declared if usable(declared, definition.name, 'output') else None
    function_tool = tool.layer(FunctionTool)
    if function_tool is None or function_tool.definition.parameters != definition.parameters:
        return None
    return _return_schema(function_tool.function)


_WARNED: dict[int, Any] = {}


def usable(schema: Any, tool: str, kind: str) -> bool:
    """Whether `schema` can be used (see the module); the first time one cannot, a warning says why."""
    problem = schema_problem(schema)
    if problem is None:
        return True
    if _WARNED.get(id(schema)) is not schema:
        if len(_WARNED) >= 1024:
            _WARNED.clear()
        _WARNED[id(schema)] = schema
        logger.warning('Tool %r: its %s schema is not used to check plans before they run: %s. The tool checks its '
                       'own arguments when it is called.', tool, kind, problem)
    return False


# --- checking arguments -------------------------------------------------------------------------------------------

class Contract:
    """One tool's input schema, prepared to check literal arguments quickly, and its output schema."""

    __slots__ = ('_types', '_validator', 'closed', 'name', 'output', 'own', 'own_many', 'permissive', 'properties',
                 'required', 'schema', 'simple')

    def __init__(self, tool: Tool) -> None:
        definition = tool.definition
        cls = type(tool)
        method = cls.check_arguments
        self.own: Callable[..., Any] | None = method if method is not Tool.check_arguments else None
        """The tool's own validation (`Tool.check_arguments`, unbound: a kept contract keeps no tool alive), which
        checks arguments without references."""
        many = cls.check_arguments_many
        self.own_many: Callable[..., Any] | None = (
            many if self.own is not None and many is not Tool.check_arguments_many
            and issubclass(_owner(cls, 'check_arguments_many'), _owner(cls, 'check_arguments')) else None)
        """The same for many calls at once (`Tool.check_arguments_many`), where the class that defines it is the
        one whose `check_arguments` is in effect, or below it."""
        self.name = definition.name
        self.schema: Mapping[str, Any] = definition.parameters
        self.output = output_schema(tool)
        schema = self.schema if usable(self.schema, self.name, 'input') else {}
        properties = schema.get('properties')
        self.properties: Mapping[str, Any] = properties if isinstance(properties, Mapping) else {}
        required = schema.get('required')
        self.required = tuple(r for r in required if isinstance(r, str)) if isinstance(required, list) else ()
        self.closed = schema.get('additionalProperties') is False
        checked = set(schema) - {'type', 'properties', 'required', 'additionalProperties', 'description', 'title',
                                 '$schema'}
        self.permissive = not self.properties and not self.required and not self.closed and not checked
        """Any object is accepted: nothing to check."""
        self.simple: dict[str, frozenset[str]] | None = None
        """Per property, its JSON types, when every property is a plain `type` (checked without a validator)."""
        if not checked and all(isinstance(p, Mapping) and p.keys() <= _SIMPLE_KEYWORDS and 'type' in p
                               for p in self.properties.values()):
            self.simple = {name: json_types(p, schema) or _ALL_TYPES for name, p in self.properties.items()}
        self._validator: Draft202012Validator | None = None
        self._types: dict[str, frozenset[str] | None] = {}

    def check_own(self, tool: Tool, arguments: Mapping[str, Any],
                  pending: Collection[str] = ()) -> tuple[list[str], Mapping[str, Any] | None] | None:
        """The tool's own check of `arguments` (`Tool.check_arguments`, `pending` as there): its problems, one per
        field, and the arguments to call it with (`None`: nothing carried, as with `pending`); `None` when it has
        no check to offer here, or its check itself failed (the JSON schema decides, and the call will tell)."""
        own = self.own
        if own is None:
            return None
        try:
            checked = own(tool, arguments, pending=pending) if pending else own(tool, arguments)
        except ArgumentsError as exc:
            return _own_problems(exc, self.name), None
        except Exception:
            return None
        if checked is None:
            return None
        return [], checked if type(checked) is CheckedArguments or isinstance(checked, Mapping) else None

    def types(self, name: str) -> frozenset[str] | None:
        """The JSON types argument `name` takes (`None`: any, or unknown)."""
        if name not in self._types:
            self._types[name] = json_types(self.properties.get(name), self.schema)
        return self._types[name]

    def validator(self) -> Draft202012Validator:
        if self._validator is None:
            self._validator = _validator_for(self.schema)
        return self._validator

    def check(self, arguments: Mapping[str, Any]) -> list[str]:
        """Problems of `arguments` (references replaced by `Reference`s), each starting with its field, found by
        the JSON Schema validator."""
        if self.permissive:
            return []
        return self._check_full(arguments, self.validator())

    def check_flat(self, arguments: Mapping[str, Any], with_refs: tuple[Any, ...], whole: Mapping[str, Any],
                   types: Mapping[str, frozenset[str] | None]) -> list[str] | None:
        """The quick check of a flat schema straight on the plan's arguments (`with_refs`: the keys whose values
        hold references); `None` when a literal looks wrong (the full check then says why)."""
        simple = self.simple
        assert simple is not None
        for name in self.required:
            if name not in arguments:
                return None
        problems: list[str] = []
        for key, value in arguments.items():
            wanted = simple.get(key)
            if wanted is None:
                if self.closed:
                    return None
                continue
            kind = _SCALARS.get(type(value))
            if with_refs and key in with_refs:
                if kind == 'string':
                    if value in whole and not fits(types.get(value), wanted):
                        problems.append(self.mismatch(key, Reference(value, types.get(value)), wanted))
                    continue  # a reference, or text with references spliced in
                if kind not in wanted:
                    return None
                continue
            if kind is None or kind not in wanted and not (kind == 'integer' and 'number' in wanted):
                return None
        return problems

    def _check_full(self, arguments: Mapping[str, Any], validator: Draft202012Validator) -> list[str]:
        try:
            errors = list(validator.iter_errors(arguments))
        except RecursionError:  # arguments nested deeper than the validator can follow: the tool checks them
            return []
        problems: list[str] = []
        seen: set[str] = set()
        for error in errors:
            where = _where(error)
            instance = error.instance
            if isinstance(instance, Reference):
                if where in seen:
                    continue
                seen.add(where)
                wanted = json_types(error.schema, self.schema) if isinstance(error.schema, Mapping) else None
                if not fits(instance.types, wanted):
                    problems.append(self.mismatch(where.removeprefix('arguments.'), instance, wanted))
                continue
            if error.validator == 'type' and _coercible(instance, error.validator_value):
                continue  # the tool's own validation (pydantic's lax mode, for example) may accept it
            if isinstance(instance, str) and instance.startswith('$ref:'):
                continue  # a reference that could not be bound: the reference check has said why
            if _holds_reference(instance) and error.validator in ('anyOf', 'oneOf', 'allOf', 'not', 'if', 'enum',
                                                                   'const', 'uniqueItems', 'contains'):
                continue  # decided only once the references are resolved
            problems.append(f'{where}: {_message(error)}')
        if problems and any('Additional properties' in p or 'is a required property' in p for p in problems):
            accepted = ', '.join(self.properties) or '(none)'
            problems[-1] += f' Tool {self.name!r} takes: {accepted}.'
        return problems

    def mismatch(self, key: str, ref: Reference, wanted: frozenset[str] | None) -> str:
        given = '/'.join(sorted(ref.types or ()))
        expected = '/'.join(sorted(wanted or ()))
        return (f'arguments.{key}: reference {ref.text!r} gives {given}, but {self.name!r} expects {expected} here. '
                'Refer to a field of the right type, or convert it with a select step first.')


def _owner(cls: type, name: str) -> type:
    """The class in `cls`'s hierarchy whose own body defines `name`."""
    return next(c for c in cls.__mro__ if name in c.__dict__)


def literal_problems(tool: Tool, arguments: Mapping[str, Any]) -> list[str]:
    """Problems of `arguments` (no references in them), as the tool's own validation finds them when it has one
    (`Tool.check_arguments`: the words its call would use), else against its JSON schema."""
    contract = contract_of(tool)
    own = contract.check_own(tool, arguments)
    return own[0] if own is not None else contract.check(arguments)


def _own_problems(exc: ArgumentsError, tool: str) -> list[str]:
    """The problems a tool's own validation found, one message per field, as the plan's other checks say them."""
    if not exc.problems:
        return [f'arguments: {exc}']
    problems = [f'arguments: {p}.' if p.startswith('...') else _field_problem(p) for p in exc.problems]
    if exc.accepted is not None:
        problems[-1] += f' Tool {tool!r} takes: {exc.accepted}.'
    return problems


def _field_problem(problem: str) -> str:
    """`days: Input should be ...` as the plan says it: `arguments.days: Input should be ....`."""
    where = '' if problem.startswith(('(arguments)', '[')) else '.'
    return f'arguments{where}{problem.removeprefix("(arguments)").rstrip(".")}.'


def _not_run(validator: Any, value: Any, instance: Any, schema: Any) -> None:
    """A keyword left to the tool: a `pattern` can backtrack for ever on a long text, `uniqueItems` compares every
    pair of a long list."""
    return None


_Validator = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator, {'pattern': _not_run, 'uniqueItems': _not_run})
"""JSON Schema 2020-12 without the keywords whose cost a plan could make unbounded."""

_VALIDATORS: dict[int, tuple[Mapping[str, Any], Draft202012Validator]] = {}
_MAX_VALIDATORS = 512


def _validator_for(schema: Mapping[str, Any]) -> Draft202012Validator:
    """A validator for a tool's input schema, kept across plans (a definition's schema never changes). The schema
    is usable (`schema_problem`): its keywords have the types JSON Schema gives them."""
    known = _VALIDATORS.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    validator: Draft202012Validator = _Validator(schema)
    if len(_VALIDATORS) >= _MAX_VALIDATORS:
        _VALIDATORS.clear()
    _VALIDATORS[id(schema)] = (schema, validator)  # the schema is kept too, so its id is not reused meanwhile
    return validator


_TRUTH_WORDS = frozenset({'true', 'false', '1', '0', 'yes', 'no', 'on', 'off', 't', 'f', 'y', 'n'})


def _coercible(value: Any, wanted: Any) -> bool:
    """Whether a lax validator turns `value` into one of the `wanted` JSON types: numbers and truth words written
    as text, whole floats as integers, 0 and 1 as booleans."""
    types = {wanted} if isinstance(wanted, str) else set(wanted) if isinstance(wanted, list) else set()
    if isinstance(value, str):
        text = value.strip()
        if types & {'number', 'integer'}:
            try:
                number = float(text)
            except ValueError:
                number = None
            if number is not None and ('number' in types or number.is_integer()):
                return True
        return 'boolean' in types and text.lower() in _TRUTH_WORDS
    if isinstance(value, float) and 'integer' in types:
        return value.is_integer()
    if type(value) is int and 'boolean' in types:
        return value in (0, 1)
    return False


def _item_refs(value: Any, where: str, table: Any) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """`(field, bound reference)` for every `$item` reference in `value` (whole strings and spliced ones)."""
    if isinstance(value, str):
        bound = table.whole.get(value)
        if bound is not None and not isinstance(bound, int) and bound[3] == ITEM_POSITION:
            yield where, bound
        for part in table.templates.get(value, ()):
            if not isinstance(part, str) and part[3] == ITEM_POSITION:
                yield where, part
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _item_refs(item, f'{where}.{key}', table)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _item_refs(item, f'{where}[{index}]', table)


def _holds_reference(value: Any) -> bool:
    if isinstance(value, Reference):
        return True
    if isinstance(value, dict):
        return any(_holds_reference(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_reference(v) for v in value)
    return False


def _where(error: ValidationError) -> str:
    path = list(error.absolute_path)
    return 'arguments' + (('.' + format_path(path)) if path and not isinstance(path[0], int) else format_path(path))


def _message(error: ValidationError) -> str:
    if error.validator == 'additionalProperties':
        return str(error.message).replace('were unexpected', 'are not arguments of this tool').replace(
            'was unexpected', 'is not an argument of this tool') + '.'
    if error.validator == 'required':
        return f'{error.message}: it is missing.'
    text = str(error.message)
    return (text if len(text) <= 200 else text[:200] + '...') + '.'


_CONTRACTS: WeakKeyDictionary[Tool, tuple[ToolDefinition, Contract]] = WeakKeyDictionary()


def contract_of(tool: Tool) -> Contract:
    """`tool`'s contract, prepared once for as long as the tool lives with the same definition (a server's plans
    call the same tools again and again; preparing one costs more than checking a step)."""
    definition = tool.definition
    try:
        held = _CONTRACTS.get(tool)
    except TypeError:  # a tool that cannot be referenced weakly or hashed is prepared each time
        return Contract(tool)
    if held is not None and held[0] is definition:
        return held[1]
    contract = Contract(tool)
    _CONTRACTS[tool] = (definition, contract)
    return contract


class Contracts:
    """The contracts of one plan's tools, each prepared once, and what its references are known to give."""

    __slots__ = ('_by_tool', '_schemas', '_types', 'steps', 'tools')

    def __init__(self, tools: Sequence[Tool | None], steps: PlanSteps) -> None:
        self.tools = tools
        self.steps = steps
        self._by_tool: dict[int, Contract] = {}
        self._types: dict[str, frozenset[str] | None] = {}
        self._schemas: dict[str, tuple[Any, Mapping[str, Any]]] = {}
        """Per reference text: the schema of what it points at, and the output schema it is part of."""

    def of(self, tool: Tool) -> Contract:
        found = self._by_tool.get(id(tool))
        if found is None:
            found = self._by_tool[id(tool)] = contract_of(tool)
        return found

    def produced(self, position: int) -> Mapping[str, Any] | None:
        """The schema of step `position`'s value, when its tool declares one."""
        tool = self.tools[position] if 0 <= position < len(self.tools) else None
        if tool is None:
            return None
        output = self.of(tool).output
        forms = self.steps.forms.get(position)
        if output is None or forms is None or forms.for_each is None:
            return output
        return {'type': 'array', 'items': output, **({'$defs': output['$defs']} if '$defs' in output else {})}

    def check_reference(self, position: int, path: Sequence[Segment], text: str) -> str | None:
        """A problem with a reference to step `position` at `path`, when its output schema rules the path out."""
        schema = self.produced(position)
        found, problem = (schema, None) if schema is None or not path else schema_at(schema, path, schema)
        # Set or cleared each time: a text bound again (its first binding was taken back) says what it points at now.
        if found is None or schema is None:
            self._types[text] = None
            self._schemas.pop(text, None)
        else:
            self._types[text] = json_types(found, schema)
            self._schemas[text] = (found, schema)
        return problem

    def item_problems(self, for_each: Any, arguments: Any, table: Any) -> list[str]:
        """Problems of the `$item.field` references in a `for_each` step's arguments, when the output schema of
        the list they run over says what its elements hold."""
        known = self._schemas.get(for_each) if isinstance(for_each, str) else None
        if known is None:
            return []
        found, root = known
        resolved = _resolve(found, root)
        if not isinstance(resolved, Mapping) or not isinstance(resolved.get('items'), Mapping):
            return []
        element = resolved['items']
        problems: list[str] = []
        for where, ref in _item_refs(arguments, 'arguments', table):
            if ref[1]:
                _, problem = schema_at(element, ref[1], root)
                if problem is not None:
                    problems.append(f'{where}: reference {ref[2]!r} cannot resolve: {problem} (in the elements of '
                                    f'{for_each}). Refer to a field the elements have.')
        return problems

    def reference(self, text: str) -> Reference:
        return Reference(text, self._types.get(text))

    def check_step(self, tool: Tool, arguments: Any, rewrite: Any, table: Any,
                   literal: bool) -> tuple[Sequence[str], Mapping[str, Any] | None]:
        """Problems of a step's literal arguments against its tool's input schema (references stand for values
        of the types their steps declare), and the arguments the tool checked, to call it with (`None`: not
        checked by the tool).

        Arguments that hold no reference (`literal`) are checked by the tool itself when it can
        (`Tool.check_arguments`): the same validation as its call, done once; the others against its JSON
        schema."""
        if type(arguments) is not dict:
            return (), None
        contract = self.of(tool)
        if literal and contract.own is not None:
            own = contract.check_own(tool, arguments)
            if own is not None:
                return own
        elif contract.own is not None and contract.simple is None and type(rewrite) is tuple and all(
                type(value := arguments[key]) is str and (value in table.whole or value in table.templates)
                for key in rewrite):
            # Every reference stands for a whole argument: the tool checks the rest, and the references' types are
            # checked against the arguments they fill. (A schema of plain types is checked quicker on its own.)
            own = contract.check_own(tool, arguments, rewrite)
            if own is not None:
                return [*own[0], *self._reference_types(contract, arguments, rewrite, table)], None
        return self._check_schema(contract, arguments, rewrite, table), None

    def _reference_types(self, contract: Contract, arguments: Mapping[str, Any], keys: tuple[Any, ...],
                         table: Any) -> list[str]:
        """Problems of the references filling whole arguments (`keys`) whose types cannot fit those arguments."""
        problems = []
        for key in keys:
            wanted_schema = contract.properties.get(key)
            if wanted_schema is None:
                continue
            text = arguments[key]
            given = self._types.get(text) if text in table.whole else _STRING
            if given is None:
                continue
            wanted = contract.types(key)
            if not fits(given, wanted):
                problems.append(contract.mismatch(key, Reference(text, given), wanted))
        return problems

    def _check_schema(self, contract: Contract, arguments: dict[str, Any], rewrite: Any, table: Any) -> list[str]:
        if contract.permissive:
            return []
        if contract.simple is not None and (not rewrite or type(rewrite) is tuple):
            found = contract.check_flat(arguments, rewrite or (), table.whole, self._types)
            if found is not None:
                return found
        if rewrite:
            if isinstance(rewrite, tuple):
                arguments = dict(arguments)
                for key in rewrite:
                    arguments[key] = self._substitute(arguments[key], table)
            else:
                arguments = self._substitute(arguments, table)
        return contract.check(arguments)

    def _substitute(self, value: Any, table: Any) -> Any:
        if isinstance(value, str):
            if value in table.whole:
                return self.reference(value)
            if value in table.templates:
                return Reference(value, frozenset({'string'}))
            return value
        if isinstance(value, dict):
            if len(value) == 1 and '$ref' in value and value['$ref'] in table.objects:
                return self.reference(value['$ref'])
            return {key: self._substitute(item, table) for key, item in value.items()}
        if isinstance(value, list):
            return [self._substitute(item, table) for item in value]
        return value
