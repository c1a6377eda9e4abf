"""`search_tools` and `describe_tools`: how a model finds tools it is not shown.

A gateway in search mode lists three tools whatever its servers offer (so the list, and a client's prompt cache,
never change): these two and `execute_tool_plan`.

`search_tools` ranks tools with BM25 (the `bm25s` library) over each tool's name (split at `_`, `-` and
camelCase), title, description, and the names and descriptions of its arguments. BM25 scores one bag of words
per tool, so fields are weighted by repetition: the name counts three times, the title twice, the rest once;
BM25's length normalisation keeps a long description from outweighing a short one that says the same. Words are
lower-cased, stripped of a few stop words and stemmed (Snowball, `PyStemmer`), so "commits" finds "commit". A
query word that belongs to a group of `_synonyms` ("folder", "mkdir") also looks for the group's other words, at
half weight. A query that is a tool's exact name puts that tool first.

Each found tool comes with its input schema (minus titles and `$schema`), so the model can call it in its next
turn (a plan step) without asking `describe_tools` first; `describe_tools` gives the whole definition (the full
description, output schema, behaviour hints) when the model wants it. `suggest` names the tools closest to an
unknown name, for errors that must not list the whole catalogue.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from toolweave.mcp._content import annotations_of
from toolweave.mcp._synonyms import GROUPS
from toolweave.tools._context import ToolCallContext
from toolweave.tools._definition import ToolDefinition, ToolMetadata
from toolweave.tools._result import ToolResult
from toolweave.tools._tool import Tool, ToolArguments, load_arguments

__all__ = ('DescribeTool', 'SearchTool', 'ToolIndex', 'compact_schema', 'found_row', 'search', 'suggest', 'terms',
           'unknown_tool_message')

_READ_ONLY = ToolMetadata(read_only=True, destructive=False, idempotent=True, open_world=False)
DEFAULT_LIMIT = 5
MAX_LIMIT = 50
MAX_NAMES = 50
MAX_QUERY_CHARS = 1000
"""A longer query is cut here: the words past it would not change the ranking, and the work stays bounded."""
NAME_WEIGHT, TITLE_WEIGHT, TEXT_WEIGHT = 3, 2, 1
RELATED_WEIGHT = 0.5
"""How much a word found through `_synonyms` counts against a word of the query itself."""
SUMMARY_CHARS = 200
_SCHEMA_NOISE = frozenset({'$schema', 'title'})
_SCHEMA_MAPS = frozenset({'properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'})
_SCHEMA_LISTS = frozenset({'anyOf', 'oneOf', 'allOf', 'prefixItems'})
_SCHEMA_ONE = frozenset({'items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains', 'propertyNames',
                         'unevaluatedProperties', 'unevaluatedItems', 'additionalItems'})
_MAX_SCHEMA_DEPTH = 32
_CAMEL = re.compile(r'(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])')
_WORD = re.compile(r'[a-z0-9]+')
_STOP_WORDS = frozenset({'a', 'an', 'and', 'are', 'as', 'at', 'be', 'by', 'can', 'do', 'does', 'for', 'from', 'i',
                         'if', 'in', 'into', 'is', 'it', 'its', 'me', 'my', 'of', 'on', 'or', 'so', 'that', 'the',
                         'their', 'then', 'there', 'these', 'this', 'to', 'was', 'what', 'when', 'which', 'will',
                         'with', 'you', 'your'})


_MISSING = 'search_tools needs `bm25s` and `PyStemmer`: `pip install "toolweave[mcp]"`'


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    try:
        import Stemmer
    except ImportError as exc:  # pragma: no cover - the mcp extra installs it
        raise ImportError(_MISSING) from exc
    return Stemmer.Stemmer('english')


def terms(text: str) -> list[str]:
    """The words of `text` as the index sees them: camelCase, `_` and `-` split, lower case, no stop words,
    stemmed."""
    words = [word for word in _WORD.findall(_CAMEL.sub(' ', text).lower()) if word not in _STOP_WORDS]
    return list(_stemmer().stemWords(words)) if words else []


@lru_cache(maxsize=1)
def _related() -> dict[str, frozenset[str]]:
    """Each stemmed word of a group -> the stemmed words of the group's other entries."""
    related: dict[str, set[str]] = {}
    for group in GROUPS:
        entries = [terms(entry) for entry in group]
        for entry in entries:
            if len(entry) == 1:
                others = {word for other in entries if other != entry for word in other}
                related.setdefault(entry[0], set()).update(others - set(entry))
    return {word: frozenset(others) for word, others in related.items()}


def _document(definition: ToolDefinition) -> list[str]:
    """The bag of words BM25 scores a tool by, each field repeated by its weight."""
    tool = definition.metadata.extra.get('mcp_tool')
    title = getattr(tool, 'title', None) or definition.metadata.extra.get('title') or ''
    words = terms(definition.name) * NAME_WEIGHT + terms(str(title)) * TITLE_WEIGHT
    words += terms(definition.description) * TEXT_WEIGHT
    properties = definition.parameters.get('properties')
    if isinstance(properties, Mapping):
        for name, schema in properties.items():
            words += terms(str(name)) * TEXT_WEIGHT
            if isinstance(schema, Mapping) and isinstance(schema.get('description'), str):
                words += terms(schema['description']) * TEXT_WEIGHT
    return words


class ToolIndex:
    """A BM25 index of some tool definitions (built once; make a new one when the definitions change)."""

    __slots__ = ('_retriever', 'definitions')

    def __init__(self, definitions: Sequence[ToolDefinition]) -> None:
        self.definitions = tuple(definitions)
        self._retriever: Any = None
        if self.definitions:
            try:
                import bm25s
            except ImportError as exc:  # pragma: no cover - the mcp extra installs it
                raise ImportError(_MISSING) from exc
            self._retriever = bm25s.BM25()  # Lucene's BM25: k1 1.5, b 0.75
            # A tool without words still gets a document, so positions stay aligned with the definitions.
            self._retriever.index([_document(d) or [''] for d in self.definitions], show_progress=False)

    def covers(self, definitions: Sequence[ToolDefinition]) -> bool:
        """Whether this index was built from exactly these definitions (the same objects, in order)."""
        return len(definitions) == len(self.definitions) and all(
            a is b for a, b in zip(definitions, self.definitions, strict=True))

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> list[ToolDefinition]:
        """The `limit` best matches for `query`, best first (ties keep the listing order)."""
        if self._retriever is None or limit < 1:
            return []
        query = query[:MAX_QUERY_CHARS]
        wanted = terms(query)
        scores = self._scores(wanted)
        related = {word for term in wanted for word in _related().get(term, ())} - set(wanted)
        if related:
            extra = self._scores(sorted(related))
            scores = [score + RELATED_WEIGHT * more for score, more in zip(scores, extra, strict=True)]
        ranked = sorted((index for index, score in enumerate(scores) if score > 0), key=lambda i: (-scores[i], i))
        named = query.strip().lower()
        exact = next((i for i, d in enumerate(self.definitions) if d.name.lower() == named), None)
        if exact is not None:
            ranked = [exact, *(index for index in ranked if index != exact)]
        return [self.definitions[index] for index in ranked[:limit]]

    def _scores(self, words: list[str]) -> list[float]:
        vocabulary = self._retriever.vocab_dict
        known = [word for word in words if word in vocabulary and word]
        if not known:
            return [0.0] * len(self.definitions)
        return [float(score) for score in self._retriever.get_scores(known)]


_last_index: list[ToolIndex] = []


def _index_of(definitions: Sequence[ToolDefinition]) -> ToolIndex:
    """The index of `definitions`, reused while they are the same objects (a catalog rarely changes)."""
    if _last_index and _last_index[0].covers(definitions):
        return _last_index[0]
    index = ToolIndex(definitions)
    _last_index[:] = [index]
    return index


def search(query: str, definitions: Sequence[ToolDefinition], limit: int = DEFAULT_LIMIT) -> list[ToolDefinition]:
    """The definitions that best match `query`, best first (see the module docstring for the ranking)."""
    return _index_of(definitions).search(query, limit)


def suggest(name: str, definitions: Sequence[ToolDefinition], limit: int = 3) -> list[str]:
    """The names of the few tools closest to the unknown `name`: the same name in another case, names spelled
    alike, then the best search matches for its words."""
    names = [d.name for d in definitions]
    lowered = {n.lower(): n for n in names}
    found: list[str] = [lowered[name.lower()]] if name.lower() in lowered else []
    found += difflib.get_close_matches(name[:200], names, n=limit, cutoff=0.75)
    found += [d.name for d in search(name[:200], definitions, limit)]
    return list(dict.fromkeys(found))[:limit]


def unknown_tool_message(name: str, definitions: Sequence[ToolDefinition]) -> str:
    """The error for a call of a tool the gateway does not have: the closest few tools, never the catalogue."""
    close = suggest(name, definitions)
    hint = f' Closest: {", ".join(close)}.' if close else ''
    return (f'Unknown tool {name[:100]!r} (of {len(definitions)} tools).{hint} Find tools with search_tools, '
            'run them with execute_tool_plan.')


def compact_schema(schema: Any, depth: int = 0) -> Any:
    """`schema` without what a model does not need to call the tool: titles (the property names say them) and
    `$schema`. Only keywords that hold schemas are walked (a `default` or `enum` value stays whole); past 32
    levels the rest is kept as it is."""
    if not isinstance(schema, Mapping) or depth > _MAX_SCHEMA_DEPTH:
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SCHEMA_NOISE:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {name: compact_schema(sub, depth + 1) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [compact_schema(sub, depth + 1) for sub in value]
        elif key in _SCHEMA_ONE:
            out[key] = compact_schema(value, depth + 1)
        else:
            out[key] = value
    return out


def _summary(description: str, limit: int = SUMMARY_CHARS) -> str:
    first = description.strip().split('\n\n')[0].replace('\n', ' ')
    return first if len(first) <= limit else first[:limit - 3].rstrip() + '...'


class SearchTool(Tool):
    """`search_tools(query, limit)`: the best matches as `{"tools": [{name, server, description, input_schema}]}`
    (the first paragraph of each description), enough to call them in the next plan."""

    def __init__(self, catalog: Callable[[], Sequence[ToolDefinition]], *, name: str = 'search_tools') -> None:
        self._catalog = catalog
        self._index = ToolIndex(())
        self._definition = ToolDefinition(
            name, 'Find tools by what they do (e.g. "read a file", "convert time zones"). Returns each match\'s '
                  'input schema: call it with execute_tool_plan. describe_tools gives a full definition.',
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
        if not self._index.covers(catalog):
            self._index = ToolIndex(catalog)
        found = self._index.search(query, limit)
        if not found:
            return ToolResult.success(f'No tool matches {query[:200]!r} (of {len(catalog)} tools). Try other '
                                      'words, such as what the tool acts on or what it does.', {'tools': []})
        rows = [found_row(d) for d in found]
        return ToolResult.success(json.dumps({'tools': rows}, ensure_ascii=False, separators=(',', ':')),
                                  {'tools': rows})


def found_row(definition: ToolDefinition) -> dict[str, Any]:
    """What `search_tools` says about one tool: its name, server, first paragraph and compact input schema."""
    return {'name': definition.name, 'server': definition.metadata.extra.get('mcp_server'),
            'description': _summary(definition.description),
            'input_schema': compact_schema(dict(definition.parameters))}


class DescribeTool(Tool):
    """`describe_tools(names)`: each tool's full description, input and output schemas and behaviour hints."""

    def __init__(self, catalog: Callable[[], Sequence[ToolDefinition]], *, name: str = 'describe_tools') -> None:
        self._catalog = catalog
        self._definition = ToolDefinition(
            name, 'The full descriptions, input schemas and output schemas of tools, by name.',
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
        definitions = list(self._catalog())
        catalog = {d.name: d for d in definitions}
        described: dict[str, Any] = {}
        unknown: list[str] = []
        for name in dict.fromkeys(names):
            definition = catalog.get(name)
            if definition is None:
                unknown.append(name)
            else:
                described[name] = _described(definition)
        if unknown:
            hints = [f'{n[:100]!r} (closest: {", ".join(close)})' if (close := suggest(n, definitions))
                     else repr(n[:100]) for n in unknown]
            message = f'Unknown tools: {"; ".join(hints)}. Find tools with search_tools.'
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
