from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, TypeVar

__all__ = ('LOOP_ID_KEY', 'ToolCallContext')

LOOP_ID_KEY = 'toolweave.loop_id'
"""A context key a caller may set to name the tool loop itself (`ToolCallContext.loop_id` reads it when the
context carries no loop id of an agent run)."""

_T = TypeVar('_T')


class ToolCallContext(Mapping[str, Any]):
    """Out-of-band metadata for a tool call: tenant ids, auth tokens, correlation ids, and the loop id.

    Immutable and safe to share across threads and tasks. It never appears in a JSON schema, a prompt or a
    tool output shown to a model. Its entries are exactly what the caller configured; the id of the agent run's
    tool loop travels beside them (`loop_id`, set by the agent with `with_loop_id`), so a tool, an MCP server or a
    log that reads the entries sees only the caller's.

    ```python
    ctx = ToolCallContext.of(tenant='acme').merge({'locale': 'en-AU'})
    print(ctx.get('tenant'), ctx['locale'])
    #> acme en-AU
    ```
    """

    EMPTY: ClassVar[ToolCallContext]
    __slots__ = ('_entries', '_loop_id')

    def __init__(self, entries: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        merged = dict(entries or {})
        merged.update(kwargs)
        self._entries: dict[str, Any] = merged
        self._loop_id: str | None = entries.loop_id if isinstance(entries, ToolCallContext) else None

    @classmethod
    def of(cls, entries: Mapping[str, Any] | None = None, /, **kwargs: Any) -> ToolCallContext:
        """A context with these entries; the `EMPTY` singleton when there are none."""
        if isinstance(entries, ToolCallContext) and not kwargs:
            return entries
        if not entries and not kwargs:
            return cls.EMPTY
        return cls(entries, **kwargs)

    @property
    def is_empty(self) -> bool:
        """No entries and no loop id."""
        return not self._entries and self._loop_id is None

    @property
    def loop_id(self) -> str | None:
        """The id of the current tool loop: the agent run's (`with_loop_id`), else a `toolweave.loop_id` entry the
        caller set, else `None`."""
        if self._loop_id is not None:
            return self._loop_id
        value = self._entries.get(LOOP_ID_KEY)
        return None if value is None else str(value)

    def with_loop_id(self, loop_id: str) -> ToolCallContext:
        """The same entries, in the tool loop `loop_id` (not an entry: what reads the entries does not see it)."""
        context = ToolCallContext(self._entries)
        context._loop_id = loop_id
        return context

    def get_or_default(self, key: str, default: _T) -> Any | _T:
        return self._entries.get(key, default)

    def to_map(self) -> dict[str, Any]:
        """A copy of the entries; changing it does not change the context."""
        return dict(self._entries)

    def merge(self, other: Mapping[str, Any] | None) -> ToolCallContext:
        """The union of both contexts; on a conflict `other` wins (its loop id too, when it has one). Merging with
        an empty side returns the other side itself."""
        other_loop = other._loop_id if isinstance(other, ToolCallContext) else None
        if other is None or (not other and other_loop is None):
            return self
        if self.is_empty:
            return ToolCallContext.of(other)
        merged = ToolCallContext({**self._entries, **other})
        merged._loop_id = other_loop if other_loop is not None else self._loop_id
        return merged

    def __getitem__(self, key: str) -> Any:
        return self._entries[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ToolCallContext):
            return self._entries == other._entries and self._loop_id == other._loop_id
        return NotImplemented

    def __hash__(self) -> int:
        try:
            return hash((frozenset(self._entries.items()), self._loop_id))
        except TypeError:  # unhashable values: fall back to the keys, still consistent with __eq__
            return hash((frozenset(self._entries), self._loop_id))

    def __repr__(self) -> str:
        loop = '' if self._loop_id is None else f', loop_id={self._loop_id!r}'
        return f'ToolCallContext({self._entries!r}{loop})'


ToolCallContext.EMPTY = ToolCallContext()
