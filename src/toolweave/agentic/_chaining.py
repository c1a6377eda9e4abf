"""Tool chaining: the `@tool` methods of an object a tool returned become tools themselves.

Two modes, which may be combined:

- **Registered types** (`DomainToolSource`): registering `User` declares one placeholder tool per `@tool`
  method of `User` at once. Until a tool returns a single `User`, a placeholder answers that a `User` must be
  retrieved first; afterwards it runs the method on the most recently returned `User` (last wins), if the
  source's predicate accepts it. A subclass that overrides the method runs its override, reviewed if the
  override requires approval.
- **Auto-discovery**: any returned object with `@tool` methods becomes the current object and its methods
  are offered as new tools; every registered binding is cleared. The new tools are buffered by the tracker
  (objects discovered before the next injection add up) and injected into the running loop by
  `ToolChainingInjectionStrategy` (through the agent loop's injection hook).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeAlias, TypeVar

from toolweave.agent import AgentProcess, ToolCallOutcome, ToolInjection
from toolweave.exceptions import UserError
from toolweave.tools import FunctionTool, Tool, ToolArguments, ToolCallContext, ToolDefinition, ToolResult
from toolweave.tools._function import has_tool_methods, tools_from
from toolweave.tools._review import review_call

__all__ = (
    'DomainToolPredicate',
    'DomainToolSource',
    'DomainToolTracker',
    'ToolChainingInjectionStrategy',
    'is_collection',
    'unpack_artifact',
)

T = TypeVar('T')

DomainToolPredicate: TypeAlias = Callable[[Any, 'AgentProcess | None'], bool]
"""`predicate(instance, process)`: whether a returned instance may contribute its tools."""

_COLLECTIONS = (list, tuple, set, frozenset)


def is_collection(value: object) -> bool:
    """Whether an artifact is a collection the tracker never binds as a whole (an agentic tool may offer its
    elements one by one)."""
    return isinstance(value, _COLLECTIONS)


def unpack_artifact(artifact: object) -> list[object]:
    """The items of an artifact: a collection's elements (`None`s dropped), else the artifact alone."""
    if artifact is None:
        return []
    if isinstance(artifact, _COLLECTIONS):
        return [item for item in artifact if item is not None]
    return [artifact]


def _method_tools(cls: type) -> dict[str, FunctionTool[..., Any]]:
    """The `@tool` methods a class declares (base classes first), by attribute name."""
    found: dict[str, FunctionTool[..., Any]] = {}
    for klass in reversed(cls.__mro__):
        for attr_name, attr in vars(klass).items():
            if isinstance(attr, FunctionTool) and attr.is_method:
                found[attr_name] = attr
    return found


@dataclass(frozen=True, slots=True)
class DomainToolSource(Generic[T]):
    """A registered domain type whose `@tool` methods become tools once a tool returns a single instance.

    ```python
    from toolweave import tool

    class User:
        def __init__(self, name: str) -> None:
            self.name = name

        @tool
        def profile(self) -> str:
            '''Get the user's profile.'''
            return f'Profile for {self.name}'

    source = DomainToolSource(User)
    print(source.tool_names)
    #> ('profile',)
    ```
    """

    type: type[T]
    """The registered class; instances of subclasses bind under it too."""
    predicate: DomainToolPredicate | None = None
    """Which instances may contribute tools; a rejected instance leaves the current binding alone."""

    def __post_init__(self) -> None:
        if not isinstance(self.type, type):
            raise UserError(f'Tool chaining needs a class, got {type(self.type).__name__} {self.type!r}. '
                            'Pass the class itself: `.with_tool_chaining_from(User)`.')
        if self.predicate is not None and not callable(self.predicate):
            raise UserError(f'Tool chaining predicate for {self.type.__qualname__} must be callable '
                            f'`(instance, process) -> bool`, got {self.predicate!r}.')

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The names of the tools the type contributes, in declaration order (none for a class without `@tool`
        methods: it declares no placeholders)."""
        return tuple(tool.name for tool in _method_tools(self.type).values())

    def accepts(self, instance: object, process: AgentProcess | None) -> bool:
        """Whether `instance` binds: it is an instance of the type and the predicate (if any) says yes."""
        if not isinstance(instance, self.type):
            return False
        return self.predicate is None or bool(self.predicate(instance, process))


class DomainToolTracker:
    """The bindings of one run: which instance each registered type is bound to, and the auto-discovered
    object. Thread-safe. Agentic tools create one per invocation; see the module docstring for the rules.

    ```python
    tracker = DomainToolTracker([DomainToolSource(User)])
    [placeholder] = tracker.placeholders()
    print(placeholder.call_sync('{}').output)
    #> This tool is not yet available. You must first retrieve a single User instance.
    tracker.offer(User('Alice'))
    print(placeholder.call_sync('{}').output)
    #> Profile for Alice
    ```
    """

    def __init__(self, sources: Sequence[DomainToolSource[Any]] = (), *, auto_discovery: bool = False) -> None:
        for position, source in enumerate(sources):
            if not isinstance(source, DomainToolSource):
                raise UserError(f'Tool chaining source #{position} must be a DomainToolSource, got {source!r}.')
        self.sources: tuple[DomainToolSource[Any], ...] = tuple(sources)
        self.auto_discovery = auto_discovery
        self._bound: dict[type, object] = {}
        self._current: object | None = None
        self._pending: list[Tool] | None = None
        self._lock = threading.Lock()

    def offer(self, artifact: object, process: AgentProcess | None = None) -> bool:
        """Offer one returned object; returns whether it was bound. Collections are never bound (the agentic tools
        unpack them and offer the elements themselves)."""
        if artifact is None or is_collection(artifact):
            return False
        for source in self.sources:
            if isinstance(artifact, source.type):
                if not source.accepts(artifact, process):
                    return False  # the existing binding stays
                with self._lock:
                    self._bound[source.type] = artifact
                return True
        if self.auto_discovery and has_tool_methods(artifact):
            tools = tools_from(artifact)
            with self._lock:  # the new object replaces every registered binding; pending tools add up
                self._bound.clear()
                self._current = artifact
                pending = {tool.name: tool for tool in self._pending or ()}
                pending.update((tool.name, tool) for tool in tools)
                self._pending = list(pending.values())
            return True
        return False

    def bound(self, cls: type[T]) -> T | None:
        """The instance a registered type is bound to, or `None`."""
        with self._lock:
            found = self._bound.get(cls)
        return found if isinstance(found, cls) else None

    @property
    def current(self) -> object | None:
        """The auto-discovered object whose tools are offered, or `None`."""
        return self._current

    def placeholders(self) -> list[Tool]:
        """One placeholder tool per `@tool` method of every registered type, declared at once."""
        return [_PlaceholderTool(source.type, attr, method, self)
                for source in self.sources for attr, method in _method_tools(source.type).items()]

    def drain(self) -> list[Tool] | None:
        """The auto-discovered tools not injected yet, emptying the buffer; `None` when nothing is pending (so a
        second drain after one discovery changes nothing)."""
        with self._lock:
            pending, self._pending = self._pending, None
        return pending

    def __repr__(self) -> str:
        bound = {cls.__name__: type(value).__name__ for cls, value in self._bound.items()}
        return (f'DomainToolTracker(sources={[s.type.__name__ for s in self.sources]}, bound={bound}, '
                f'auto_discovery={self.auto_discovery})')


class _PlaceholderTool(Tool):
    """A registered type's method as a tool: declared at once, runnable once an instance is bound."""

    def __init__(self, cls: type, attr: str, method: FunctionTool[..., Any], tracker: DomainToolTracker) -> None:
        self._cls = cls
        self._attr = attr
        self._method = method
        self._tracker = tracker
        original = method.definition
        note = f'Note: This tool requires a {cls.__name__} instance to be retrieved first.'
        self._definition = replace(original, description=f'{original.description}\n\n{note}')

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        instance: object | None = self._tracker.bound(self._cls)
        if instance is None:
            return ToolResult.success(
                f'This tool is not yet available. You must first retrieve a single {self._cls.__name__} instance.')
        # The instance's own attribute, so a subclass that overrides the method runs its override.
        method = getattr(instance, self._attr, None)
        bound = method if isinstance(method, FunctionTool) else self._method.bind(instance)
        if bound.requires_approval and not self.requires_approval:
            # This call's review (in `call`) saw the registered method, which needs none; the override does.
            reviewed = await review_call(bound, arguments, context)
            if isinstance(reviewed, ToolResult):
                return reviewed
            arguments = reviewed
        # `execute`, not `call`: this tool's own `call` records the call, once, under the same name.
        return await bound.execute(arguments, context)


class ToolChainingInjectionStrategy:
    """Injects auto-discovered tools into a running agent loop: after each tool call it drains the
    tracker's buffer; the tools of the previous discovery are taken out and the new ones added.

    Agentic tools offer returned objects to the tracker themselves. For a plain `Agent`, pass
    `offer_results=True` so the strategy offers every tool result's artifact (collections element by element)
    before draining:

    ```python
    from toolweave import Agent
    from toolweave.testing import ScriptedModel

    @tool
    def get_user(name: str) -> User:
        \'\'\'Find a user.\'\'\'
        return User(name)

    tracker = DomainToolTracker([DomainToolSource(User)])
    model = ScriptedModel([{'tool': 'get_user', 'arguments': {'name': 'Ada'}}, {'tool': 'profile'}, 'Done.'])
    agent = Agent(model, tools=[get_user, *tracker.placeholders()],
                  injection_strategies=[ToolChainingInjectionStrategy(tracker, offer_results=True)])
    print(agent.run_sync('Show Ada').messages[-2].content)
    #> Profile for Ada
    ```
    """

    def __init__(self, tracker: DomainToolTracker, *, offer_results: bool = False) -> None:
        given: object = tracker
        if not isinstance(given, DomainToolTracker):
            raise UserError(f'ToolChainingInjectionStrategy needs a DomainToolTracker, got {tracker!r}.')
        self.tracker = tracker
        self.offer_results = offer_results
        self._injected: tuple[str, ...] = ()

    def evaluate(self, event: ToolCallOutcome) -> ToolInjection | None:
        if self.offer_results:
            for item in unpack_artifact(event.result.artifact):
                self.tracker.offer(item, event.process)
        added = self.tracker.drain()
        if added is None:
            return None
        removed, self._injected = self._injected, tuple(tool.name for tool in added)
        return ToolInjection(remove=removed, add=tuple(added))
