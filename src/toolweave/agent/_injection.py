"""The loop's tool-injection hook: after each tool call, strategies may take tools out of the run's tool set
and add others, offered from the next model call on (progressive disclosure)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from toolweave.agent._process import AgentProcess
from toolweave.exceptions import UserError
from toolweave.progressive import UnfoldingSelection
from toolweave.tools import Tool, ToolResult

__all__ = ('RunToolSet', 'ToolCallOutcome', 'ToolInjection', 'ToolInjectionStrategy', 'check_strategies')


@dataclass(frozen=True, slots=True)
class ToolInjection:
    """A change to the run's tool set: take out the tools named in `remove`, then offer the tools in `add`."""

    remove: tuple[str, ...] = ()
    """Names of the loop's current tools to take out (names not in the set are ignored)."""
    add: tuple[Tool, ...] = ()
    """Tools to offer from the next model call on (a tool whose name is already offered replaces it)."""

    @property
    def empty(self) -> bool:
        """Whether this injection changes nothing."""
        return not self.remove and not self.add


@dataclass(frozen=True, slots=True)
class ToolCallOutcome:
    """One finished tool call, as a `ToolInjectionStrategy` sees it."""

    tool: Tool
    """The tool that ran: the outermost wrapper, as it is in the loop's tool set."""
    arguments: str
    """The raw JSON text the model sent."""
    result: ToolResult
    current_tools: tuple[Tool, ...]
    """The loop's tool set when the call finished (after the injections of earlier calls)."""
    process: AgentProcess
    unfolded: tuple[UnfoldingSelection, ...] = ()
    """What the facades that ran during the call selected (a direct facade call, a shortcut, plan steps), in the
    order they ran."""


@runtime_checkable
class ToolInjectionStrategy(Protocol):
    """Decides, after each tool call of a run, whether the run's tool set changes."""

    def evaluate(self, event: ToolCallOutcome) -> ToolInjection | None:
        """The change to make after this call, or `None` for none."""
        ...


def check_strategies(strategies: object) -> tuple[ToolInjectionStrategy, ...]:
    """`strategies` as a tuple, or a `UserError` naming the entry that has no `evaluate` method."""
    if isinstance(strategies, str | bytes) or not isinstance(strategies, Sequence):
        raise UserError(f'Agent injection_strategies must be a list of strategies, got {type(strategies).__name__}: '
                        f'{strategies!r}. Pass a list of objects with `evaluate(outcome)`.')
    for index, strategy in enumerate(strategies):
        if not callable(getattr(strategy, 'evaluate', None)):
            raise UserError(f'Agent injection_strategies[{index}] has no `evaluate` method: {strategy!r}. Give it '
                            '`def evaluate(self, event: ToolCallOutcome) -> ToolInjection | None`.')
    return tuple(strategies)


class RunToolSet:
    """The tools of one run: the agent's tools (read live, so tools added to its toolset during a run are offered
    too), minus the names injections removed, plus the tools they added. The agent's toolset is never changed.

    Args:
        base: The agent's current tools, in the order they are offered.
        find_base: Looks a name up among the agent's tools (one dict hit).
        strategies: Asked after each tool call, in order; each sees the changes of the ones before it.
        decorator: Applied to every injected tool, at every level (an unfolded facade's inner facade's tools too).
    """

    __slots__ = ('_added', '_base', '_decorator', '_find_base', '_removed', '_strategies')

    def __init__(
        self,
        base: Callable[[], list[Tool]],
        find_base: Callable[[str], Tool | None],
        strategies: Sequence[ToolInjectionStrategy] = (),
        decorator: Callable[[Tool], Tool] | None = None,
    ) -> None:
        self._base = base
        self._find_base = find_base
        self._strategies = tuple(strategies)
        self._decorator = decorator
        self._removed: set[str] = set()
        self._added: dict[str, Tool] = {}

    def tools(self) -> list[Tool]:
        """The tools offered now: the agent's tools still in the set, then the injected ones in injection order."""
        kept = [t for t in self._base() if t.name not in self._removed and t.name not in self._added]
        return [*kept, *self._added.values()]

    def find(self, name: object) -> Tool | None:
        """The tool offered under `name` now, or `None`."""
        if not isinstance(name, str):
            return None
        added = self._added.get(name)
        if added is not None:
            return added
        return None if name in self._removed else self._find_base(name)

    def apply(self, injection: ToolInjection) -> None:
        """Take out `injection.remove`, then add `injection.add` (each passed through the decorator)."""
        for name in injection.remove:
            self._added.pop(name, None)
            self._removed.add(name)
        for tool in injection.add:
            injected = self._decorate(tool)
            self._added.pop(injected.name, None)  # re-adding moves the tool to the end of the set
            self._added[injected.name] = injected

    def after_call(self, tool: Tool, arguments: str, result: ToolResult, process: AgentProcess,
                   unfolded: tuple[UnfoldingSelection, ...] = ()) -> None:
        """Run every strategy on one finished call and apply what each returns."""
        for strategy in self._strategies:
            outcome = ToolCallOutcome(tool, arguments, result, tuple(self.tools()), process, unfolded)
            injection: object = strategy.evaluate(outcome)
            if injection is None:
                continue
            if not isinstance(injection, ToolInjection):
                raise UserError(f'Tool injection strategy {strategy!r} returned {type(injection).__name__} '
                                f'{injection!r} after a call of tool {tool.name!r}. Return a ToolInjection or None.')
            self.apply(injection)

    def _decorate(self, tool: Tool) -> Tool:
        if not isinstance(tool, Tool):
            raise UserError(f'A tool injection added {type(tool).__name__} {tool!r}, not a Tool. Put Tool objects '
                            'in `ToolInjection.add` (wrap functions with `toolweave.tool`).')
        if self._decorator is None:
            return tool
        decorated = self._decorator(tool)
        if not isinstance(decorated, Tool):
            raise UserError(f'Agent tool_decorator returned {type(decorated).__name__} {decorated!r} for tool '
                            f'{tool.name!r}, not a Tool. Return the tool, or a wrapper such as a DelegatingTool.')
        return decorated

