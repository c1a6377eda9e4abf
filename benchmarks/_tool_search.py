"""Search quality of the gateway's `search_tools`, offline and deterministic.

The catalog is the 41 tools four real MCP servers offer through the gateway (`mcp-server-time`, `mcp-server-git`,
`@modelcontextprotocol/server-everything`, `@modelcontextprotocol/server-filesystem`), dumped from their
`tools/list` into `fixtures/gateway_catalog.json` by `python -m benchmarks.bench_gateway --dump-catalog`. The
queries (`fixtures/tool_search_queries.json`) are phrased as a user or a model asks, each with the tools that
answer it. Measured per ranking:

- recall@5: of the relevant tools, the share found in the first five results (averaged over queries);
- MRR: the mean of 1 / rank of the first relevant tool (0 when none is in the first 50).

`word_match` is the ranking `search_tools` used before BM25, kept as the reference row.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from toolweave.mcp._content import definition_of
from toolweave.tools import ToolDefinition

__all__ = ('CATALOG', 'QUERIES', 'Query', 'Ranking', 'catalog', 'catalog_entries', 'evaluate', 'queries',
           'word_match', 'word_match_result')

FIXTURES = Path(__file__).parent / 'fixtures'
CATALOG = FIXTURES / 'gateway_catalog.json'
QUERIES = FIXTURES / 'tool_search_queries.json'
K = 5
DEPTH = 50

Ranking = Callable[[str, Sequence[ToolDefinition], int], Sequence[ToolDefinition]]
"""`(query, definitions, limit)` -> the best `limit` definitions, best first."""


@dataclass(frozen=True)
class Query:
    text: str
    relevant: tuple[str, ...]


def catalog_entries() -> list[dict[str, Any]]:
    """The fixture's tools: `{"server": ..., "tool": <tools/list entry>}` each, in listing order."""
    return list(json.loads(CATALOG.read_text(encoding='utf-8'))['tools'])


def catalog() -> list[ToolDefinition]:
    """The fixture's tools as the gateway defines them (the same conversion as a live upstream's listing)."""
    import mcp_types

    return [definition_of(entry['tool']['name'], mcp_types.Tool.model_validate(entry['tool']), entry['server'])
            for entry in catalog_entries()]


def queries(kind: Literal['queries', 'held_out'] = 'queries') -> list[Query]:
    """The fixture's queries: `'queries'` (the set the ranking's word groups were drawn up on) or `'held_out'`
    (written at the same time, never used to tune anything)."""
    data = json.loads(QUERIES.read_text(encoding='utf-8'))
    return [Query(q['query'], tuple(q['relevant'])) for q in data[kind]]


def evaluate(rank: Ranking, definitions: Sequence[ToolDefinition] | None = None,
             cases: Sequence[Query] | None = None, k: int = K) -> dict[str, Any]:
    """recall@k and MRR of `rank` over the fixture, with each query's ranks of its relevant tools."""
    definitions = catalog() if definitions is None else definitions
    cases = queries() if cases is None else cases
    known = {d.name for d in definitions}
    recalls: list[float] = []
    reciprocal: list[float] = []
    rows: list[dict[str, Any]] = []
    for case in cases:
        unknown = set(case.relevant) - known
        if unknown:
            raise ValueError(f'Query {case.text!r} names tools the catalog lacks: {sorted(unknown)}')
        names = [d.name for d in rank(case.text, definitions, DEPTH)]
        ranks = {name: names.index(name) + 1 if name in names else None for name in case.relevant}
        found = [r for r in ranks.values() if r is not None]
        recalls.append(sum(1 for r in found if r <= k) / len(case.relevant))
        reciprocal.append(1 / min(found) if found else 0.0)
        rows.append({'query': case.text, 'ranks': ranks, 'top': names[:k]})
    return {'queries': len(cases), 'tools': len(definitions), f'recall_at_{k}': sum(recalls) / len(recalls),
            'mrr': sum(reciprocal) / len(reciprocal), 'rows': rows}


# --- the reference: word matching, as search_tools ranked before BM25 ------------------------------------------

_WORD = re.compile(r'[a-z0-9]+')


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace('_', ' ').replace('-', ' '))


def word_match(query: str, definitions: Sequence[ToolDefinition], limit: int) -> list[ToolDefinition]:
    """Each query word found in a tool's name counts three times as much as in its description, a word matches
    the start of a longer word, and words that many tools share count less; no length normalisation."""
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


def word_match_result(query: str, definitions: Sequence[ToolDefinition]) -> str:
    """The text `search_tools` answered before BM25: the first 8 word matches as name, server and the first
    paragraph of the description (160 characters at most), no schemas (a `describe_tools` turn gave them)."""
    rows = [{'name': d.name, 'server': d.metadata.extra.get('mcp_server'), 'description': _summary(d.description)}
            for d in word_match(query, definitions, 8)]
    return json.dumps({'tools': rows}, ensure_ascii=False)


def _summary(description: str, limit: int = 160) -> str:
    first = description.strip().split('\n\n')[0].replace('\n', ' ')
    return first if len(first) <= limit else first[:limit - 3].rstrip() + '...'
