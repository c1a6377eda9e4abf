"""Structured shaping: a step that keeps fields, filters, sorts and cuts an earlier result without writing JMESPath.

    {"id": "cheap", "from": "$ref:s1", "where": {"field": "price", "op": "<", "value": 100},
     "sort_by": "price", "descending": false, "first": 3, "keep": ["name", "price"]}

compiles to the select step `{"id": "cheap", "from": "$ref:s1", "select": "[?price < `100`] | sort_by(@, &price)
| [:3] | [*].{name: name, price: price}"}`, checked and run like any other select step. The parts apply in that
order (filter, sort, first N, keep) and each is optional. A small model fills these fields far more reliably than
it writes JMESPath, and a grammar can hold it to them (`constrained_schema`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from toolweave.plan._plan_schema import SHAPE_OPERATORS

__all__ = ('SHAPE_FIELDS', 'compile_shape')

SHAPE_FIELDS = frozenset({'keep', 'sort_by', 'descending', 'first', 'where'})
"""The step fields of structured shaping."""

_IDENTIFIER = re.compile(r'[A-Za-z_][A-Za-z0-9_]*\Z')
_EXAMPLE = '{"where": {"field": "price", "op": "<", "value": 100}, "sort_by": "price", "first": 3, "keep": ["name"]}'


def compile_shape(raw: Mapping[str, Any], label: str) -> tuple[str | None, list[str]]:
    """The JMESPath expression the shaping fields of step `raw` say, and the problems with them (each naming
    `label` and the field). With problems, the expression is `None`."""
    problems: list[str] = []
    parts: list[str] = []
    where = raw.get('where')
    if where is not None:
        parts.append(_where(where, label, problems))
    sort_by = raw.get('sort_by')
    if sort_by is not None:
        field = _field(sort_by, f'{label}: "sort_by"', problems)
        parts.append(f'reverse(sort_by(@, &{field}))' if raw.get('descending') is True else f'sort_by(@, &{field})')
    if raw.get('descending') not in (None, True, False):
        problems.append(f'{label}: "descending" must be true or false, got {raw["descending"]!r}.')
    first = raw.get('first')
    if first is not None:
        if isinstance(first, bool) or not isinstance(first, int) or first < 0:
            problems.append(f'{label}: "first" must be a whole number >= 0 (how many items to keep), got {first!r}.')
        else:
            parts.append(f'[:{first}]')
    keep = raw.get('keep')
    if keep is not None:
        if not isinstance(keep, list) or not keep:
            problems.append(f'{label}: "keep" must be a non-empty list of field names, like ["name", "price"], '
                            f'got {keep!r}.')
        else:
            fields = [_field(name, f'{label}: "keep"', problems) for name in keep]
            parts.append('[*].{' + ', '.join(f'{f}: {f}' for f in fields) + '}')
    if raw.get('select') is not None:
        problems.append(f'{label}: a step has either "select" (JMESPath) or the shaping fields ("where", '
                        '"sort_by", "first", "keep"), not both.')
    if problems:
        return None, problems
    return ' | '.join(parts) if parts else '@', []


def _field(name: object, where: str, problems: list[str]) -> str:
    if not isinstance(name, str) or not name.strip():
        problems.append(f'{where} must name a field of the items (a string), got {name!r}.')
        return '@'
    return name if _IDENTIFIER.match(name) else json.dumps(name)


def _where(where: object, label: str, problems: list[str]) -> str:
    if not isinstance(where, Mapping) or set(where) != {'field', 'op', 'value'}:
        problems.append(f'{label}: "where" must be {{"field", "op", "value"}}, as in {_EXAMPLE}; got {where!r}.')
        return '@'
    field = _field(where['field'], f'{label}: "where.field"', problems)
    op = where['op']
    if op not in SHAPE_OPERATORS:
        problems.append(f'{label}: "where.op" must be one of {", ".join(SHAPE_OPERATORS)}, got {op!r}.')
        return '@'
    value = where['value']
    if not isinstance(value, str | int | float | bool):
        problems.append(f'{label}: "where.value" must be a string, number or true/false, got {value!r}.')
        return '@'
    literal = '`' + json.dumps(value).replace('`', '\\`') + '`'
    if op == 'contains':  # an item without the field (null) counts as not containing it, rather than failing
        return f'[?contains({field} || `""`, {literal})]'
    return f'[?{field} {op} {literal}]'
