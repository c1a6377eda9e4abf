from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, TypeVar

__all__ = ('LOOP_ID_KEY', 'ToolCallContext')

LOOP_ID_KEY = 'toolweave.loop_id'
"""The context key that holds the id of the current tool loop (one agent turn)."""

_T = TypeVar('_T')


class ToolCallContext(Mapping[str, Any]):
    """Out-of-band metadata for a tool call: tenant ids, auth tokens, correlation ids, the loop id.

    Immutable and safe to share across threads and tasks. It never appears in a JSON schema, a prompt or a
    tool output shown to a model.

    ```python
    ctx = ToolCallContext.of(tenant='acme').merge({'locale': 'en-AU'})
    print(ctx.get('tenant'), ctx['locale'])
    #> acme en-AU
    ```
    """

    EMPTY: ClassVar[ToolCallContext]
    __slots__ = ('_entries',)

    def __init__(self, entries: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        merged = dict(entries or {})
        merged.update(kwargs)
        self._entries: dict[str, Any] = merged

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
        return not self._entries

    @property
    def loop_id(self) -> str | None:
        """The id of the current tool loop, if the caller set one."""
        value = self._entries.get(LOOP_ID_KEY)
        return None if value is None else str(value)

    def get_or_default(self, key: str, default: _T) -> Any | _T:
        return self._entries.get(key, default)

    def to_map(self) -> dict[str, Any]:
        """A copy of the entries; changing it does not change the context."""
        return dict(self._entries)

    def merge(self, other: Mapping[str, Any] | None) -> ToolCallContext:
        """The union of both contexts; on a conflict `other` wins. Merging with an empty side returns the
        other side itself."""
        if not other:
            return self
        if self.is_empty:
            return ToolCallContext.of(other)
        return ToolCallContext({**self._entries, **other})

    def __getitem__(self, key: str) -> Any:
        return self._entries[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ToolCallContext):
            return self._entries == other._entries
        return NotImplemented

    def __hash__(self) -> int:
        try:
            return hash(frozenset(self._entries.items()))
        except TypeError:  # unhashable values: fall back to the keys, still consistent with __eq__
            return hash(frozenset(self._entries))

    def __repr__(self) -> str:
        return f'ToolCallContext({self._entries!r})'


ToolCallContext.EMPTY = ToolCallContext()
