"""The blackboard: the objects a run has produced, some of them under a binding name."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from toolweave.exceptions import UserError

__all__ = ('Blackboard', 'BlackboardEntry', 'type_matches')

_T = TypeVar('_T')


@dataclass(frozen=True, slots=True)
class BlackboardEntry:
    """One object on a blackboard and the name it was bound under (`None` when added without one)."""

    value: Any
    name: str | None = None


def type_matches(value: object, type_: type[Any] | str) -> bool:
    """Whether `value` is an instance of `type_`: a class (subclasses match) or a type name, simple
    (`'User'`) or fully qualified (`'myapp.models.User'`), compared along the value's class hierarchy."""
    if isinstance(type_, type):
        return isinstance(value, type_)
    for cls in type(value).__mro__:
        if type_ in (cls.__name__, cls.__qualname__, f'{cls.__module__}.{cls.__qualname__}'):
            return True
    return False


class Blackboard:
    """Objects shared by the tools of a run, in the order they were added. Thread-safe (sync tools run in
    worker threads).

    A child blackboard (`spawn()`, used by sub-agents) sees its parent's objects, parent first, live; what the
    child adds stays private to it until `publish()` copies its own entries to the parent, which a sub-agent
    run does when it ends, whatever its outcome.

    ```python
    board = Blackboard()
    board.add({'id': 7}, name='order')
    print(board.get('order'), board.count(dict))
    #> {'id': 7} 1
    ```
    """

    def __init__(self, *, parent: Blackboard | None = None) -> None:
        self.parent = parent
        self._entries: list[BlackboardEntry] = []
        self._lock = threading.Lock()
        self._published = 0

    def add(self, value: object, name: str | None = None) -> None:
        """Add `value`; with `name`, also bind it under that name (a later binding of the same name wins)."""
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise UserError(f'Blackboard binding name must be a non-blank string, got {name!r}.')
        with self._lock:
            self._entries.append(BlackboardEntry(value, name))

    def __setitem__(self, name: str, value: object) -> None:
        self.add(value, name)

    @property
    def entries(self) -> list[BlackboardEntry]:
        """Every entry visible here: the parent's (recursively) first, then this board's own."""
        inherited = self.parent.entries if self.parent is not None else []
        with self._lock:
            return inherited + self._entries

    @property
    def own_entries(self) -> list[BlackboardEntry]:
        """The entries added to this board itself (not inherited)."""
        with self._lock:
            return list(self._entries)

    @property
    def objects(self) -> list[Any]:
        """Every visible object, oldest first."""
        return [entry.value for entry in self.entries]

    @property
    def names(self) -> list[str]:
        """The binding names in use, each once, in the order first bound."""
        return list(dict.fromkeys(entry.name for entry in self.entries if entry.name is not None))

    @overload
    def get(self, name: str) -> Any: ...
    @overload
    def get(self, name: str, default: _T) -> Any | _T: ...
    def get(self, name: str, default: object = None) -> Any:
        """The object most recently bound to `name`, or `default`."""
        for entry in reversed(self.entries):
            if entry.name == name:
                return entry.value
        return default

    def __getitem__(self, name: str) -> Any:
        for entry in reversed(self.entries):
            if entry.name == name:
                return entry.value
        raise KeyError(f'No object bound to {name!r} on the blackboard. Bound names: {self.names or "(none)"}.')

    def __contains__(self, name: object) -> bool:
        return any(entry.name == name for entry in self.entries)

    @overload
    def last(self, type_: type[_T]) -> _T | None: ...
    @overload
    def last(self, type_: str) -> Any: ...
    def last(self, type_: type[Any] | str) -> Any:
        """The most recently added object of this type (a class, or a simple or qualified type name)."""
        for entry in reversed(self.entries):
            if type_matches(entry.value, type_):
                return entry.value
        return None

    def all(self, type_: type[Any] | str) -> list[Any]:
        """Every object of this type, oldest first."""
        return [entry.value for entry in self.entries if type_matches(entry.value, type_)]

    def count(self, type_: type[Any] | str) -> int:
        """How many objects of this type are visible."""
        return len(self.all(type_))

    def __len__(self) -> int:
        return len(self.entries)

    def __bool__(self) -> bool:
        return True  # an empty blackboard is still a blackboard: `if process.blackboard:` must not lie

    def spawn(self) -> Blackboard:
        """A child board that sees this board's objects; see the class docstring for the sharing rule."""
        return Blackboard(parent=self)

    def publish(self) -> int:
        """Copy this board's own entries that were not published yet to the parent; returns how many."""
        if self.parent is None:
            return 0
        with self._lock:
            fresh = self._entries[self._published :]
            self._published = len(self._entries)
        for entry in fresh:
            self.parent.add(entry.value, entry.name)
        return len(fresh)

    def __repr__(self) -> str:
        return f'Blackboard({len(self)} objects, names={self.names})'
