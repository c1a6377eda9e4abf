"""Unlock conditions of a `PlaybookTool` and the context they are evaluated against."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolweave.agent._blackboard import type_matches
from toolweave.exceptions import UserError
from toolweave.tools._tool import Tool

if TYPE_CHECKING:
    from toolweave.agent._blackboard import Blackboard
    from toolweave.agent._process import AgentProcess

__all__ = (
    'AfterTools',
    'AllOf',
    'AnyOf',
    'OnArtifact',
    'OnArtifactMatching',
    'OnBlackboard',
    'OnBlackboardMatching',
    'PlaybookContext',
    'UnlockCondition',
    'WhenPredicate',
    'as_condition',
    'evaluate',
    'prerequisite_names',
)

_UNMET = 'Prerequisites have not been met yet.'


@dataclass(frozen=True, slots=True)
class PlaybookContext:
    """What an unlock condition sees: the invocation's calls and artifacts so far, and the inner run.

    ```python
    ctx = PlaybookContext(called_tools=('search',), iteration_count=1)
    print(AfterTools('search', 'fetch').is_satisfied(ctx), AfterTools('search', 'fetch').hint(ctx))
    #> False You must first use: fetch
    ```
    """

    called_tools: tuple[str, ...] = ()
    """Names of the sub-tools run so far, in call order (locked refusals are not calls)."""
    artifacts: tuple[object, ...] = ()
    """Artifacts the sub-tools returned so far, collections element by element, `None`s dropped."""
    iteration_count: int = 0
    """How many sub-tool calls have run."""
    process: AgentProcess | None = None
    """The inner agent run, when there is one."""

    @property
    def blackboard(self) -> Blackboard | None:
        """The inner run's blackboard (it sees the calling run's objects too), or `None`."""
        return None if self.process is None else self.process.blackboard

    def has_called(self, name: str) -> bool:
        return name in self.called_tools


class UnlockCondition(ABC):
    """When a locked playbook tool becomes available. Combine with `&` (`AllOf`) and `|` (`AnyOf`)."""

    @abstractmethod
    def is_satisfied(self, context: PlaybookContext) -> bool: ...

    def hint(self, context: PlaybookContext) -> str:
        """What the model must do first; shown while the condition does not hold."""
        return _UNMET

    def __and__(self, other: UnlockCondition) -> AllOf:
        return AllOf(self, other)

    def __or__(self, other: UnlockCondition) -> AnyOf:
        return AnyOf(self, other)


def _tool_name(tool: object) -> str:
    if isinstance(tool, Tool):
        return tool.name
    if isinstance(tool, str) and tool.strip():
        return tool
    raise UserError(f'A prerequisite must be a Tool or a tool name, got {type(tool).__name__} {tool!r}.')


class AfterTools(UnlockCondition):
    """Holds once every named tool has been called (and then stays true)."""

    def __init__(self, *tools: Tool | str) -> None:
        if not tools:
            raise UserError('AfterTools needs at least one tool or tool name, e.g. `AfterTools(search)`.')
        self.names: tuple[str, ...] = tuple(_tool_name(tool) for tool in tools)

    def is_satisfied(self, context: PlaybookContext) -> bool:
        return all(name in context.called_tools for name in self.names)

    def hint(self, context: PlaybookContext) -> str:
        missing = [name for name in self.names if name not in context.called_tools]
        return f'You must first use: {", ".join(missing)}'

    def __repr__(self) -> str:
        return f'AfterTools{self.names!r}'


def _check_conditions(conditions: tuple[object, ...], where: str) -> tuple[UnlockCondition, ...]:
    if not conditions:
        raise UserError(f'{where} needs at least one condition.')
    for condition in conditions:
        if not isinstance(condition, UnlockCondition):
            raise UserError(f'{where} takes UnlockConditions, got {type(condition).__name__} {condition!r}. Wrap a '
                            'predicate in `WhenPredicate(fn)`.')
    return conditions  # type: ignore[return-value]


class AnyOf(UnlockCondition):
    """Holds when at least one of its conditions holds."""

    def __init__(self, *conditions: UnlockCondition) -> None:
        self.conditions = _check_conditions(conditions, 'AnyOf')

    def is_satisfied(self, context: PlaybookContext) -> bool:
        return any(condition.is_satisfied(context) for condition in self.conditions)

    def hint(self, context: PlaybookContext) -> str:
        return 'At least one prerequisite condition must be met.'

    def __repr__(self) -> str:
        return f'AnyOf{self.conditions!r}'


class AllOf(UnlockCondition):
    """Holds when all of its conditions hold; a partial match is not enough."""

    def __init__(self, *conditions: UnlockCondition) -> None:
        self.conditions = _check_conditions(conditions, 'AllOf')

    def is_satisfied(self, context: PlaybookContext) -> bool:
        return all(condition.is_satisfied(context) for condition in self.conditions)

    def hint(self, context: PlaybookContext) -> str:
        return 'Multiple conditions must be met before this tool is available.'

    def __repr__(self) -> str:
        return f'AllOf{self.conditions!r}'


class OnArtifact(UnlockCondition):
    """Holds once a sub-tool has returned an artifact of this type (subclasses too)."""

    def __init__(self, cls: type[Any]) -> None:
        if not isinstance(cls, type):
            raise UserError(f'OnArtifact needs a class, got {type(cls).__name__} {cls!r}.')
        self.type = cls

    def is_satisfied(self, context: PlaybookContext) -> bool:
        return any(isinstance(artifact, self.type) for artifact in context.artifacts)

    def hint(self, context: PlaybookContext) -> str:
        return f'You must first produce an artifact of type: {self.type.__name__}'

    def __repr__(self) -> str:
        return f'OnArtifact({self.type.__name__})'


def _check_callable(fn: object, where: str, signature: str) -> Callable[..., Any]:
    if not callable(fn):
        raise UserError(f'{where} needs a function `{signature}`, got {type(fn).__name__} {fn!r}.')
    return fn


class OnArtifactMatching(UnlockCondition):
    """Holds once a sub-tool has returned an artifact for which `predicate(artifact)` is true."""

    def __init__(self, predicate: Callable[[Any], bool]) -> None:
        self.predicate = _check_callable(predicate, 'OnArtifactMatching', '(artifact) -> bool')

    def is_satisfied(self, context: PlaybookContext) -> bool:
        return any(bool(self.predicate(artifact)) for artifact in context.artifacts)


class OnBlackboard(UnlockCondition):
    """Holds while the run's blackboard holds an object of this type (a class, or a simple or qualified name)."""

    def __init__(self, cls: type[Any] | str) -> None:
        if not isinstance(cls, type | str):
            raise UserError(f'OnBlackboard needs a class or a type name, got {type(cls).__name__} {cls!r}.')
        self.type = cls

    def is_satisfied(self, context: PlaybookContext) -> bool:
        board = context.blackboard
        return board is not None and any(type_matches(value, self.type) for value in board.objects)


class OnBlackboardMatching(UnlockCondition):
    """Holds while `predicate(blackboard)` is true (false when there is no run)."""

    def __init__(self, predicate: Callable[[Blackboard], bool]) -> None:
        self.predicate = _check_callable(predicate, 'OnBlackboardMatching', '(blackboard) -> bool')

    def is_satisfied(self, context: PlaybookContext) -> bool:
        board = context.blackboard
        return board is not None and bool(self.predicate(board))


class WhenPredicate(UnlockCondition):
    """Holds while `predicate(context)` is true; unlike `AfterTools` it may lock again."""

    def __init__(self, predicate: Callable[[PlaybookContext], bool]) -> None:
        self.predicate = _check_callable(predicate, 'WhenPredicate', '(PlaybookContext) -> bool')

    def is_satisfied(self, context: PlaybookContext) -> bool:
        return bool(self.predicate(context))


def as_condition(condition: object) -> UnlockCondition:
    """An `UnlockCondition` as is; a predicate over `PlaybookContext` wrapped in `WhenPredicate`."""
    if isinstance(condition, UnlockCondition):
        return condition
    if callable(condition):
        return WhenPredicate(condition)
    raise UserError(f'unlocked_when needs an UnlockCondition or a predicate `(PlaybookContext) -> bool`, got '
                    f'{type(condition).__name__} {condition!r}.')


def evaluate(condition: UnlockCondition, context: PlaybookContext) -> tuple[bool, str]:
    """`(satisfied, hint)`. A condition that raises keeps its tool locked, and the hint says what failed."""
    try:
        if condition.is_satisfied(context):
            return True, ''
        return False, condition.hint(context)
    except Exception as exc:
        return False, (f'Its unlock condition {condition!r} failed: {type(exc).__name__}: {exc}. '
                       'Use other tools.')


def prerequisite_names(condition: UnlockCondition) -> list[str]:
    """Every tool name an `AfterTools` inside `condition` waits for (through `AnyOf` and `AllOf`)."""
    if isinstance(condition, AfterTools):
        return list(condition.names)
    if isinstance(condition, AnyOf | AllOf):
        return [name for inner in condition.conditions for name in prerequisite_names(inner)]
    return []
