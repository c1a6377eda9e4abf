"""Tool decorators: wrappers that change one thing about a tool.

Every decorator is a `DelegatingTool`: it overrides `execute` and delegates to the wrapped tool's `execute`, so a
decorated tool is called, reviewed, recorded and logged once, under its outer name, and behaves like the original
everywhere (a direct call, a plan step, a pipeline step, an MCP server).
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from toolweave._checks import check_number
from toolweave.exceptions import ControlFlowSignal, ToolConfigurationError, UserError
from toolweave.tools import (
    DelegatingTool,
    Tool,
    ToolArguments,
    ToolCallContext,
    ToolResult,
    renamed,
    use_metrics,
    with_description,
    with_note,
)

__all__ = (
    'ArtifactSinkingTool',
    'CompositeSink',
    'DelegatingTool',
    'ListSink',
    'LoopMemo',
    'OneShotPerLoopTool',
    'renamed',
    'Sink',
    'use_metrics',
    'with_description',
    'with_note',
)


# --- one shot per loop -------------------------------------------------------------------------------------


class LoopMemo:
    """Remembers which tool loops have already seen a call. Thread-safe.

    Holds at most `capacity` loop ids; the oldest by first insertion is forgotten first, and checking an id
    again does not refresh it (a long conversation must not keep the memo growing).

    ```python
    memo = LoopMemo()
    print([memo.first_call(i) for i in ['a', 'b', 'a', 'b', None, None]])
    #> [True, True, False, False, True, True]
    ```
    """

    def __init__(self, capacity: int = 1024) -> None:
        check_number(capacity, 'LoopMemo capacity', integer=True, minimum=1)
        self.capacity = capacity
        self._seen: dict[str, None] = {}
        self._lock = threading.Lock()

    def first_call(self, loop_id: str | None) -> bool:
        """True the first time `loop_id` is seen (and remember it); always true, remembering nothing, for
        `None` (no loop: the caller passes through)."""
        if loop_id is None:
            return True
        with self._lock:
            if loop_id in self._seen:
                return False
            self._seen[loop_id] = None
            if len(self._seen) > self.capacity:
                del self._seen[next(iter(self._seen))]
            return True

    def __len__(self) -> int:
        return len(self._seen)


DEFAULT_ONE_SHOT_ADVICE = 'Use the content you already have.'


class OneShotPerLoopTool(DelegatingTool):
    """Runs its delegate at most once per tool loop (one agent turn); later calls in the same loop return a
    short `ALREADY LOADED` note instead of the same long body again.

    The loop id comes from the call context (`ToolCallContext.loop_id`, key `toolweave.loop_id`). Without a
    loop id every call passes through. The loop is marked before the delegate runs, so a failed first call
    still counts (the model saw that call's answer; a retry would repeat it).

    ```python
    from toolweave import ToolCallContext
    from toolweave.testing import FakeTool
    skill = OneShotPerLoopTool(FakeTool('skill', 'long body'), advice='Follow it.')
    ctx = ToolCallContext.of({'toolweave.loop_id': 'turn-1'})
    print(skill.call_sync('{}', ctx).output)
    #> long body
    print(skill.call_sync('{}', ctx).output[:14])
    #> ALREADY LOADED
    ```
    """

    def __init__(self, delegate: Tool, *, advice: str = DEFAULT_ONE_SHOT_ADVICE, memo: LoopMemo | None = None) -> None:
        super().__init__(delegate)
        if not isinstance(advice, str):
            raise UserError(f'advice of OneShotPerLoopTool({delegate.name!r}) must be a string, got {advice!r}.')
        self.advice = advice
        self.memo = memo if memo is not None else LoopMemo()

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        if self.memo.first_call(context.loop_id):
            return await self.delegate.execute(arguments, context)
        return ToolResult.success(self.already_loaded_message())

    def already_loaded_message(self) -> str:
        return (f"ALREADY LOADED. The body of '{self.name}' was returned earlier in this turn \u2014 read it from "
                f'your conversation history above. Do not call this tool again. {self.advice}')


# --- artifact sinking --------------------------------------------------------------------------------------


@runtime_checkable
class Sink(Protocol):
    """Receives artifacts (the values tools mark as artifacts) as tools produce them."""

    def accept(self, item: object) -> None: ...


class ListSink:
    """Collects every artifact it receives, into `target` if given (a list you hold) or a list of its own.
    Thread-safe; `items()` returns a copy.

    ```python
    found: list[object] = []
    sink = ListSink(found)
    sink.accept('a')
    print(found, sink.items())
    #> ['a'] ['a']
    ```
    """

    def __init__(self, target: list[Any] | None = None) -> None:
        if target is not None and not isinstance(target, list):
            raise UserError(f'ListSink fills a list; got {type(target).__name__} {target!r}. Pass a list, or '
                            'nothing for a list of its own.')
        self._items: list[Any] = target if target is not None else []
        self._lock = threading.Lock()

    def accept(self, item: object) -> None:
        with self._lock:
            self._items.append(item)

    def items(self) -> list[object]:
        with self._lock:
            return list(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[object]:
        return iter(self.items())


class CompositeSink:
    """Sends every artifact to each of its sinks, in order: `CompositeSink(a, b)` or `CompositeSink([a, b])`. An
    empty composite drops everything."""

    def __init__(self, *sinks: Sink | Sequence[Sink]) -> None:
        given: tuple[object, ...] = sinks
        if len(sinks) == 1 and isinstance(sinks[0], list | tuple):
            given = tuple(sinks[0])
        self.sinks: tuple[Sink, ...] = tuple(
            _check_sink(sink, f'CompositeSink sink #{position}') for position, sink in enumerate(given))

    def accept(self, item: object) -> None:
        for sink in self.sinks:
            sink.accept(item)


def _check_sink(sink: object, where: str) -> Sink:
    if not isinstance(sink, Sink):
        raise UserError(f'{where} must have an `accept(item)` method, got {type(sink).__name__} {sink!r}. '
                        'Use `ListSink()`, `CompositeSink(...)` or any object with `accept`.')
    return sink


ArtifactFilter = Callable[[Any], bool]
ArtifactTransform = Callable[[Any], object]


class ArtifactSinkingTool(DelegatingTool):
    """Passes calls through unchanged and copies each artifact the delegate returns into a sink.

    An artifact is `ToolResult.artifact`: a value the tool marked as one (see `ToolResult`). Collections (lists,
    tuples, sets) are unwrapped and each item handled alone. An item is sunk when it is an instance of `type`
    (subclasses included) and `filter(item)` is true; it then goes through `transform` (which may change its type)
    into the sink. The filter runs first, so the transform never sees a rejected item. A failing sink, filter or
    transform turns the call into a failure that says so; the delegate's failures are passed on and nothing is
    sunk.

    ```python
    from toolweave.testing import FakeTool
    sink = ListSink()
    tool = ArtifactSinkingTool(FakeTool('find', [{'id': 1}, {'id': 2}]), sink, type=dict,
                               filter=lambda row: row['id'] > 1, transform=lambda row: row['id'])
    print(tool.call_sync('{}').output, sink.items())
    #> [{"id":1},{"id":2}] [2]
    ```
    """

    def __init__(
        self,
        delegate: Tool,
        sink: Sink,
        *,
        type: type[Any] | tuple[type[Any], ...] = object,  # shadows the builtin: `type=` reads best at the call site
        filter: ArtifactFilter | None = None,
        transform: ArtifactTransform | None = None,
    ) -> None:
        super().__init__(delegate)
        self.sink = _check_sink(sink, f'sink of ArtifactSinkingTool({delegate.name!r})')
        classes = type if isinstance(type, tuple) else (type,)
        if not classes or not all(isinstance(c, builtins.type) for c in classes):
            raise UserError(f'type of ArtifactSinkingTool({delegate.name!r}) must be a class or a tuple of classes, '
                            f'got {type!r}.')
        for what, fn in (('filter', filter), ('transform', transform)):
            if fn is not None and not callable(fn):
                raise UserError(f'{what} of ArtifactSinkingTool({delegate.name!r}) must be callable, got {fn!r}.')
        self.artifact_type = type
        self.filter = filter
        self.transform = transform

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        result = await self.delegate.execute(arguments, context)
        artifact = result.artifact
        if artifact is None:
            return result
        try:
            for item in _unwrap(artifact):
                if isinstance(item, self.artifact_type) and (self.filter is None or self.filter(item)):
                    self.sink.accept(item if self.transform is None else self.transform(item))
        except (ToolConfigurationError, ControlFlowSignal):
            raise
        except Exception as exc:
            return ToolResult.failure(
                f'Tool {self.name!r} succeeded but sinking its artifact failed: {builtins.type(exc).__name__}: '
                f'{exc}. Fix the sink, the filter or the transform of this ArtifactSinkingTool.'
            )
        return result


def _unwrap(artifact: object) -> Iterable[object]:
    if isinstance(artifact, (list, tuple, set, frozenset)):
        return list(artifact)
    return (artifact,)
