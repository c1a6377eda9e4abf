"""Tool decorators: tools that wrap another tool and change one thing about it.

Every decorator forwards `call` to its delegate with the arguments and the context unchanged, so approval,
metrics and logging run once, in the innermost tool, and a decorated tool behaves like the original everywhere
(a direct call, a plan step, a pipeline step, an MCP server).
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from toolweave import _runtime
from toolweave.exceptions import ControlFlowSignal, ToolConfigurationError, UserError
from toolweave.tools._context import ToolCallContext
from toolweave.tools._definition import ToolDefinition, check_tool_name
from toolweave.tools._metrics import ToolMetrics
from toolweave.tools._result import ToolResult
from toolweave.tools._tool import Tool, ToolArguments

__all__ = (
    'ArtifactSinkingTool',
    'CompositeSink',
    'DelegatingTool',
    'ListSink',
    'LoopMemo',
    'OneShotPerLoopTool',
    'Sink',
    'renamed',
    'use_metrics',
    'with_description',
    'with_note',
)


def _check_tool(delegate: object, where: str) -> Tool:
    if not isinstance(delegate, Tool):
        raise UserError(f'The delegate of {where} must be a Tool, got {type(delegate).__name__} {delegate!r}. '
                        'Wrap functions first: `toolweave.tool(fn)`.')
    return delegate


class DelegatingTool(Tool):
    """A tool that forwards every call to `delegate`. Subclass it and change one thing.

    ```python
    from toolweave.testing import FakeTool
    wrapped = DelegatingTool(FakeTool('calculator', 42))
    print(wrapped.name, wrapped.delegate.name, wrapped.call_sync('{}').output)
    #> calculator calculator 42
    ```
    """

    def __init__(self, delegate: Tool) -> None:
        self._delegate = _check_tool(delegate, type(self).__name__)

    @property
    def delegate(self) -> Tool:
        return self._delegate

    @property
    def definition(self) -> ToolDefinition:
        return self._delegate.definition

    async def call(self, arguments: ToolArguments = None, context: Mapping[str, Any] | None = None) -> ToolResult:
        return await self._delegate.call(arguments, _context(context))

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        return await self._delegate.execute(arguments, context)

    def with_description(self, description: str) -> DelegatingTool:
        """A new tool with this description; see `with_description`."""
        return with_description(self, description)

    def with_note(self, note: str) -> DelegatingTool:
        """A new tool whose description ends with `. <note>`; see `with_note`."""
        return with_note(self, note)

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self._delegate!r})'


def _context(context: Mapping[str, Any] | None) -> ToolCallContext:
    # A ToolCallContext passes through as the same object (CX-15); a bare call gets EMPTY, never None.
    return context if isinstance(context, ToolCallContext) else ToolCallContext.of(context)


class _RedefinedTool(DelegatingTool):
    """A delegating tool with a different definition (name or description); behaviour is the delegate's."""

    def __init__(self, delegate: Tool, definition: ToolDefinition) -> None:
        super().__init__(delegate)
        self._definition = definition

    @property
    def definition(self) -> ToolDefinition:
        return self._definition


def with_description(tool: Tool, description: str) -> DelegatingTool:
    """A new tool like `tool` with another description; name, schema, metadata and behaviour are kept and the
    original is unchanged (DT-2)."""
    tool = _check_tool(tool, 'with_description()')
    if not isinstance(description, str):
        raise UserError(f'Description for tool {tool.name!r} must be a string, got {description!r}.')
    return _RedefinedTool(tool, tool.definition.with_description(description))


def with_note(tool: Tool, note: str) -> DelegatingTool:
    """A new tool whose description is `<original>. <note>`: a literal join, so a description that already
    ends with `.` gets `..` (DT-3)."""
    tool = _check_tool(tool, 'with_note()')
    if not isinstance(note, str):
        raise UserError(f'Note for tool {tool.name!r} must be a string, got {note!r}.')
    return _RedefinedTool(tool, tool.definition.with_description(f'{tool.definition.description}. {note}'))


def renamed(tool: Tool, name: str) -> DelegatingTool:
    """A new tool like `tool` under another name (used by `Toolset.prefixed`). Metrics and logs keep the
    delegate's name, because the delegate does the instrumented call."""
    tool = _check_tool(tool, 'renamed()')
    check_tool_name(name, where=f'renamed({tool.name!r})')
    return _RedefinedTool(tool, replace(tool.definition, name=name))


# --- one shot per loop -------------------------------------------------------------------------------------


class LoopMemo:
    """Remembers which tool loops have already seen a call. Thread-safe.

    Holds at most `capacity` loop ids; the oldest by first insertion is forgotten first, and checking an id
    again does not refresh it (OL-11).

    ```python
    memo = LoopMemo()
    print([memo.first_call(i) for i in ['a', 'b', 'a', 'b', None, None]])
    #> [True, True, False, False, True, True]
    ```
    """

    def __init__(self, capacity: int = 1024) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise UserError(f'LoopMemo capacity must be a positive integer, got {capacity!r}.')
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
    still counts (OL-8).

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

    async def call(self, arguments: ToolArguments = None, context: Mapping[str, Any] | None = None) -> ToolResult:
        ctx = _context(context)
        if self.memo.first_call(ctx.loop_id):
            return await self.delegate.call(arguments, ctx)
        return ToolResult.success(self.already_loaded_message())

    def already_loaded_message(self) -> str:
        return (f"ALREADY LOADED. The body of '{self.name}' was returned earlier in this turn \u2014 read it from "
                f'your conversation history above. Do not call this tool again. {self.advice}')


# --- artifact sinking --------------------------------------------------------------------------------------


@runtime_checkable
class Sink(Protocol):
    """Receives artifacts (structured tool values) as tools produce them."""

    def accept(self, item: object) -> None: ...


class ListSink:
    """Collects every artifact it receives. Thread-safe; `items()` returns a copy."""

    def __init__(self) -> None:
        self._items: list[object] = []
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
    """Sends every artifact to each of its sinks, in order. An empty composite drops everything."""

    def __init__(self, *sinks: Sink) -> None:
        for position, sink in enumerate(sinks):
            _check_sink(sink, f'CompositeSink sink #{position}')
        self.sinks: tuple[Sink, ...] = sinks

    def accept(self, item: object) -> None:
        for sink in self.sinks:
            sink.accept(item)


def _check_sink(sink: object, where: str) -> Sink:
    if not isinstance(sink, Sink):
        raise UserError(f'{where} must have an `accept(item)` method, got {type(sink).__name__} {sink!r}. '
                        'Use `ListSink()`, `CompositeSink(...)` or any object with `accept`.')
    return sink


class ArtifactSinkingTool(DelegatingTool):
    """Passes calls through unchanged and copies each artifact the delegate returns into a sink.

    An artifact is `ToolResult.artifact` (a successful result's structured value). Iterable artifacts (lists,
    tuples, sets) are unwrapped and each item handled alone. Items that are not instances of `type` are
    dropped; the rest go through `transform` (which may change their type) and into the sink (AS-1..AS-7).
    A failing sink or transform turns the call into a failure that says so.

    ```python
    from toolweave.testing import FakeTool
    sink = ListSink()
    tool = ArtifactSinkingTool(FakeTool('find', [{'id': 1}, {'id': 2}]), sink, type=dict)
    print(tool.call_sync('{}').output, sink.items())
    #> [{"id":1},{"id":2}] [{'id': 1}, {'id': 2}]
    ```
    """

    def __init__(
        self,
        delegate: Tool,
        sink: Sink,
        *,
        type: type[Any] | tuple[type[Any], ...] = object,  # shadows the builtin on purpose: the spec's keyword
        transform: Callable[[Any], object] | None = None,
    ) -> None:
        super().__init__(delegate)
        self.sink = _check_sink(sink, f'sink of ArtifactSinkingTool({delegate.name!r})')
        classes = type if isinstance(type, tuple) else (type,)
        if not classes or not all(isinstance(c, builtins.type) for c in classes):
            raise UserError(f'type of ArtifactSinkingTool({delegate.name!r}) must be a class or a tuple of classes, '
                            f'got {type!r}.')
        if transform is not None and not callable(transform):
            raise UserError(f'transform of ArtifactSinkingTool({delegate.name!r}) must be callable, got {transform!r}.')
        self.artifact_type = type
        self.transform = transform

    async def call(self, arguments: ToolArguments = None, context: Mapping[str, Any] | None = None) -> ToolResult:
        result = await self.delegate.call(arguments, _context(context))
        artifact = result.artifact
        if artifact is None:
            return result
        try:
            for item in _unwrap(artifact):
                if isinstance(item, self.artifact_type):
                    self.sink.accept(item if self.transform is None else self.transform(item))
        except (ToolConfigurationError, ControlFlowSignal):
            raise
        except Exception as exc:
            return ToolResult.failure(
                f'Tool {self.name!r} succeeded but sinking its artifact failed: {type(exc).__name__}: {exc}. '
                'Fix the sink or the transform of this ArtifactSinkingTool.'
            )
        return result


def _unwrap(artifact: object) -> Iterable[object]:
    if isinstance(artifact, (list, tuple, set, frozenset)):
        return list(artifact)
    return (artifact,)


# --- metrics -----------------------------------------------------------------------------------------------


@contextmanager
def use_metrics(metrics: ToolMetrics | None = None) -> Iterator[ToolMetrics]:
    """Record every tool call made inside the block (in this task and the tasks it starts) in `metrics`
    instead of the process-wide `GLOBAL_METRICS`.

    ```python
    from toolweave.testing import FakeTool
    with use_metrics() as metrics:
        FakeTool('ping').call_sync()
    print(metrics.stats('ping').calls)
    #> 1
    ```
    """
    if metrics is not None and not isinstance(metrics, ToolMetrics):
        raise UserError(f'use_metrics() needs a ToolMetrics, got {type(metrics).__name__} {metrics!r}.')
    with _runtime.using(_runtime.metrics_var, metrics if metrics is not None else ToolMetrics()) as installed:
        assert installed is not None
        yield installed
