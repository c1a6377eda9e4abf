"""`search_tools` and `describe_tools`: how a model finds tools it is not shown.

A gateway in search mode lists three tools whatever its servers offer (so the list, and a client's prompt cache,
never change): these two and `execute_tool_plan`. `search_tools` ranks tools by the words of a query found in
their names and descriptions (rarer words weigh more); `describe_tools` gives the full definitions of the tools a
plan will call.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from toolweave.mcp._content import annotations_of
from toolweave.tools._context import ToolCallContext
from toolweave.tools._definition import ToolDefinition, ToolMetadata
from toolweave.tools._result import ToolResult
from toolweave.tools._tool import Tool, ToolArguments, load_arguments

__all__ = ('DescribeTool', 'SearchTool', 'search')

_WORD = re.compile(r'[a-z0-9]+')
_READ_ONLY = ToolMetadata(read_only=True, destructive=False, idempotent=True, open_world=False)
DEFAULT_LIMIT = 8
MAX_LIMIT = 50
MAX_NAMES = 50


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace('_', ' ').replace('-', ' '))


def _summary(description: str, limit: int = 160) -> str:
    first = description.strip().split('\n\n')[0].replace('\n', ' ')
    return first if len(first) <= limit else first[:limit - 3].rstrip() + '...'


def search(query: str, definitions: Sequence[ToolDefinition], limit: int = DEFAULT_LIMIT) -> list[ToolDefinition]:
    """The definitions that best match `query`: each query word found in a tool's name counts three times as much
    as in its description, a word matches the start of a longer word (`commit` finds `commits`), and words that
    many tools share count less. Ties keep the listing order."""
    wanted = set(_words(query))
    if not wanted:
        return []
    documents = [(_words(d.name), _words(d.description)) for d in definitions]
    frequency: Counter[str] = Counter()
    for name_words, text_words in documents:
        frequency.update({word for word in wanted if _matches(word, name_words) or _matches(word, text_words)})
    scored: list[tuple[float, int]] = []
    for index, (name_words, text_words) in enumerate(documents):
        score = 0.0
        for word in wanted:
            weight = math.log(1 + len(definitions) / (1 + frequency[word]))
            score += weight * (3 * _matches(word, name_words) + _matches(word, text_words))
        if score > 0:
            scored.append((-score, index))
    return [definitions[index] for _, index in sorted(scored)[:limit]]


def _matches(word: str, words: Iterable[str]) -> int:
    return sum(1 for candidate in words if candidate.startswith(word))


class SearchTool(Tool):
    """`search_tools(query, limit)`: the best matches as `{"tools": [{name, server, description}]}` (the first
    paragraph of each description)."""

    def __init__(self, catalog: Callable[[], Sequence[ToolDefinition]], *, name: str = 'search_tools') -> None:
        self._catalog = catalog
        self._definition = ToolDefinition(
            name, 'Find tools by words in their names and descriptions. Read one with describe_tools, run it with '
                  'execute_tool_plan.',
            {'type': 'object', 'properties': {'query': {'type': 'string'}, 'limit': {'type': 'integer'}},
             'required': ['query']}, _READ_ONLY)

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        args = load_arguments(arguments, self.name)
        query, limit = args.get('query'), args.get('limit', DEFAULT_LIMIT)
        if not isinstance(query, str) or not query.strip():
            return ToolResult.failure(f'{self.name} needs "query": some words to look for, got {query!r}.')
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            return ToolResult.failure(f'"limit" must be a whole number from 1 to {MAX_LIMIT}, got {limit!r}.')
        catalog = self._catalog()
        found = search(query, catalog, limit)
        if not found:
            return ToolResult.success(f'No tool matches {query!r} (of {len(catalog)} tools). Try other words, such '
                                      'as what the tool acts on or what it does.', {'tools': []})
        rows = [{'name': d.name, 'server': d.metadata.extra.get('mcp_server'), 'description': _summary(d.description)}
                for d in found]
        return ToolResult.success(json.dumps({'tools': rows}, ensure_ascii=False), {'tools': rows})


class DescribeTool(Tool):
    """`describe_tools(names)`: each tool's full description, input and output schemas and behaviour hints."""

    def __init__(self, catalog: Callable[[], Sequence[ToolDefinition]], *, name: str = 'describe_tools') -> None:
        self._catalog = catalog
        self._definition = ToolDefinition(
            name, 'The descriptions, input schemas and output schemas of tools, by name.',
            {'type': 'object', 'properties': {'names': {'type': 'array', 'items': {'type': 'string'}}},
             'required': ['names']}, _READ_ONLY)

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        args = load_arguments(arguments, self.name)
        names = args.get('names')
        if isinstance(names, str):
            names = [names]
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            return ToolResult.failure(f'{self.name} needs "names": a list of tool names, got {names!r}.')
        if len(names) > MAX_NAMES:
            return ToolResult.failure(f'Ask for at most {MAX_NAMES} tools at a time, got {len(names)}.')
        catalog = {d.name: d for d in self._catalog()}
        described: dict[str, Any] = {}
        unknown: list[str] = []
        for name in dict.fromkeys(names):
            definition = catalog.get(name)
            if definition is None:
                unknown.append(name)
            else:
                described[name] = _described(definition)
        if unknown:
            hints = [f'{n!r} (did you mean {close[0]!r}?)' if (close := difflib.get_close_matches(n, catalog, 1))
                     else repr(n) for n in unknown]
            message = f'Unknown tools: {", ".join(hints)}. Find tools with search_tools.'
            if not described:
                return ToolResult.failure(message)
            described['unknown'] = message
        return ToolResult.success(json.dumps(described, ensure_ascii=False, default=str), described)


def _described(definition: ToolDefinition) -> dict[str, Any]:
    extra = definition.metadata.extra
    entry: dict[str, Any] = {'server': extra.get('mcp_server'), 'description': definition.description,
                             'input_schema': dict(definition.parameters)}
    if extra.get('output_schema') is not None:
        entry['output_schema'] = extra['output_schema']
    hints = {key.removesuffix('_hint'): value for key, value in annotations_of(definition.metadata).items()}
    if hints:
        entry['hints'] = hints
    if definition.metadata.requires_approval:
        entry['requires_approval'] = True
    return entry
