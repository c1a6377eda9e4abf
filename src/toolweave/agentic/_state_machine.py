"""`StateMachineTool`: an agentic tool whose sub-tools are bound to the states of an enum."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any, Generic, TypeVar

from toolweave.agent import AgentProcess, current_process
from toolweave.agentic._base import (
    DEFAULT_MAX_ITERATIONS,
    NO_PROCESS,
    AgenticTool,
    RunState,
    SystemPrompt,
    TrackingTool,
    check_unique,
    object_tools,
    resolve_tools,
)
from toolweave.exceptions import ToolConfigurationError, UserError
from toolweave.models import Model, ModelSettings
from toolweave.tools import (
    Parameter,
    Tool,
    ToolArguments,
    ToolCallContext,
    ToolDefinition,
    ToolMetadata,
    ToolResult,
    ToolsetItem,
)

__all__ = ('StateBuilder', 'StateMachineTool', 'StateToolRegistration', 'default_state_machine_prompt')

S = TypeVar('S', bound=Enum)

StatePrompt = Callable[[AgentProcess, str, Any], str]
"""`fn(process, input, state)`: a system prompt that also sees the state the invocation starts in."""


def default_state_machine_prompt(description: str, state: Enum) -> str:
    """The default system prompt of a `StateMachineTool`."""
    return ('You are an intelligent agent that can use tools to complete tasks.\n\n'
            f'Current state: {state.name}\n\n'
            f'Task: {description}\n\n'
            'Use the available tools to complete the task. Some tools are only available in certain states. If a '
            'tool says it is not available in the current state, use other tools first to move to the state '
            'it needs.')


class _StateHolder:
    """The current state of one invocation (each call starts in the initial state)."""

    def __init__(self, state: Enum) -> None:
        self.current = state
        self.lock = threading.Lock()


class _StateBoundTool(TrackingTool):
    """A sub-tool that runs only in its state and, after a successful call, moves to its target."""

    def __init__(self, delegate: Tool, state: Enum, target: Enum | None, holder: _StateHolder, run: RunState) -> None:
        super().__init__(delegate, run)
        self.available_in = state
        self.target = target
        self.holder = holder
        note = f'[Available in state: {state.name}]' + ('' if target is None else f' [Transitions to: {target.name}]')
        original = delegate.definition
        self._definition = original.with_description(f'{original.description}\n\n{note}')

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        current = self.holder.current
        if current != self.available_in:
            return ToolResult.success(f'This tool is not available in the current state ({current.name}). '
                                      f'It is only available in state: {self.available_in.name}')
        result = await self.delegate.execute(arguments, context)
        if result.ok and self.target is not None:  # a failure does not move the state
            with self.holder.lock:
                self.holder.current = self.target
        return self.after(result)


class _GlobalStateTool(TrackingTool):
    """A sub-tool available in every state; it never transitions."""

    def __init__(self, delegate: Tool, run: RunState) -> None:
        super().__init__(delegate, run)
        original = delegate.definition
        self._definition = original.with_description(f'{original.description}\n\n[Available in all states]')

    @property
    def definition(self) -> ToolDefinition:
        return self._definition


class StateMachineTool(AgenticTool, Generic[S]):
    """An agentic tool whose sub-tools are available only in given states of an enum and may move the
    invocation to another state when they succeed. Global tools work in every state.

    Each call starts in the initial state; the inner model sees every tool, each description saying where it is
    available. Calling a tool in the wrong state returns a note naming the current and the needed state, without
    running it. The result is always the inner model's text (no artifact packaging). Chained domain tools are
    global. See `AgenticTool` for the model, process, input and context rules.

    ```python
    from enum import Enum
    from toolweave import Agent, StateMachineTool, tool
    from toolweave.testing import ScriptedModel

    class Order(Enum):
        DRAFT = 'draft'
        CONFIRMED = 'confirmed'
        SHIPPED = 'shipped'

    @tool
    def confirm() -> str:
        \'\'\'Confirm the order.\'\'\'
        return 'confirmed'

    @tool
    def ship() -> str:
        \'\'\'Ship the order.\'\'\'
        return 'shipped'

    inner = ScriptedModel([{'tool': 'ship'}, {'tool': 'confirm'}, {'tool': 'ship'}, 'Shipped.'])
    orders = (StateMachineTool('orders', 'Process orders', Order, model=inner)
              .with_initial_state(Order.DRAFT)
              .in_state(Order.DRAFT).with_tool(confirm).transitions_to(Order.CONFIRMED)
              .in_state(Order.CONFIRMED).with_tool(ship).transitions_to(Order.SHIPPED)
              .build())
    Agent(ScriptedModel([{'tool': 'orders'}, 'Done.']), tools=[orders]).run_sync('Ship it')
    for message in inner.last_messages:
        if message.role == 'tool':
            print(message.content)
    #> This tool is not available in the current state (DRAFT). It is only available in state: CONFIRMED
    #> confirmed
    #> shipped
    ```
    """

    kind = 'StateMachineTool'

    def __init__(
        self,
        name: str,
        description: str,
        state_type: type[S],
        *,
        initial_state: S | None = None,
        model: Model | str | None = None,
        system_prompt: SystemPrompt | None = None,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        parameters: Sequence[Parameter] = (),
        metadata: ToolMetadata | None = None,
        settings: ModelSettings | None = None,
    ) -> None:
        super().__init__(name, description, model=model, system_prompt=system_prompt, max_iterations=max_iterations,
                         parameters=parameters, metadata=metadata, settings=settings)
        if not (isinstance(state_type, type) and issubclass(state_type, Enum)) or not list(state_type):
            raise UserError(f'state_type of StateMachineTool {name!r} must be an Enum class with members, got '
                            f'{state_type!r}. Define one: `class Phase(Enum): DRAFT = 1; DONE = 2`.')
        self.state_type: type[S] = state_type
        self.initial_state: S | None = None if initial_state is None else self._check_state(initial_state, 'initial')
        self.state_tools: tuple[tuple[S, Tool, S | None], ...] = ()
        """`(state, tool, target or None)` for each state-bound tool, in registration order."""
        self.global_tools: tuple[Tool, ...] = ()
        self.state_prompt: StatePrompt | None = None

    def _check_state(self, state: object, what: str) -> S:
        if not isinstance(state, self.state_type):
            members = ', '.join(member.name for member in self.state_type)
            raise UserError(f'The {what} state of StateMachineTool {self.name!r} must be a member of '
                            f'{self.state_type.__name__} ({members}), got {state!r}.')
        return state

    # --- building ----------------------------------------------------------------------------------------------

    def with_initial_state(self, state: S) -> StateMachineTool[S]:
        """A copy that starts each call in `state`."""
        return self._copy(initial_state=self._check_state(state, 'initial'))

    def starting_in(self, state: S) -> StateMachineTool[S]:
        """A copy that starts in `state`, for resuming at runtime; the original is unchanged."""
        return self.with_initial_state(state)

    def in_state(self, state: S) -> StateBuilder[S]:
        """Start registering tools available in `state`."""
        return StateBuilder(self._check_state(state, 'registration'), self)

    def with_global_tool(self, tool: ToolsetItem) -> StateMachineTool[S]:
        """A copy with one more tool available in every state."""
        return self.with_global_tools(tool)

    def with_global_tools(self, *tools: ToolsetItem) -> StateMachineTool[S]:
        """A copy with more tools available in every state."""
        added = (*self.global_tools, *resolve_tools(tools, f'with_global_tools of StateMachineTool {self.name!r}'))
        check_unique([*(tool for _, tool, _ in self.state_tools), *added], f'StateMachineTool {self.name!r}')
        return self._copy(global_tools=added)

    def with_tool_object(self, obj: object) -> StateMachineTool[S]:
        """A copy with the tools `obj` stands for as global tools; objects with none are ignored."""
        return self.with_global_tools(*object_tools([obj]))

    def with_tool_objects(self, *objects: object) -> StateMachineTool[S]:
        return self.with_global_tools(*object_tools(objects))

    def with_state_aware_system_prompt(self, prompt: StatePrompt) -> StateMachineTool[S]:
        """A copy whose system prompt is `prompt(process, input, state)`, given the state the call starts in."""
        if not callable(prompt):
            raise UserError(f'with_state_aware_system_prompt of {self.name!r} needs a function '
                            f'(process, input, state) -> str, got {prompt!r}.')
        return self._copy(state_prompt=prompt, system_prompt=None)

    def with_system_prompt(self, prompt: SystemPrompt) -> StateMachineTool[S]:
        return super().with_system_prompt(prompt)._copy(state_prompt=None)

    def _add_state_tool(self, state: S, tool: Tool, target: S | None) -> StateMachineTool[S]:
        if target is not None:
            self._check_state(target, 'target')
        check_unique([*(t for _, t, _ in self.state_tools), *self.global_tools, tool],
                     f'StateMachineTool {self.name!r}')
        return self._copy(state_tools=(*self.state_tools, (state, tool, target)))

    def tools_in(self, state: S) -> tuple[Tool, ...]:
        """The tools registered for `state` (not counting global tools)."""
        return tuple(tool for where, tool, _ in self.state_tools if where == state)

    @property
    def state_tool_counts(self) -> dict[S, int]:
        """How many tools each state has, for the states that have any."""
        counts: dict[S, int] = {}
        for state, _, _ in self.state_tools:
            counts[state] = counts.get(state, 0) + 1
        return counts

    # --- running -----------------------------------------------------------------------------------------------

    def _prompt(self, process: AgentProcess, text: str, state: S) -> str:
        if self.state_prompt is not None:
            built = self.state_prompt(process, text, state)
            if not isinstance(built, str):
                raise ToolConfigurationError(f'The state-aware system prompt of StateMachineTool {self.name!r} '
                                             f'returned {type(built).__name__} {built!r}, not a string.')
            return built
        return self.make_prompt(process, text, default_state_machine_prompt(self.description, state))

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        initial = self.initial_state
        if initial is None:  # checked before the process: a misconfiguration, wherever it is called
            return ToolResult.failure('No initial state configured for StateMachineTool')
        process = current_process()
        if process is None:
            return ToolResult.failure(NO_PROCESS)
        if not self.state_tools and not self.global_tools and not self.has_tool_chaining:
            return ToolResult.failure('No tools registered for StateMachineTool')
        text = self.input_text(arguments)
        if isinstance(text, ToolResult):
            return text
        run = self.new_state(unpack_collections=False)  # the state machine never chains from collections
        holder = _StateHolder(initial)
        tools: list[Tool] = [_StateBoundTool(tool, state, target, holder, run)
                             for state, tool, target in self.state_tools]
        tools.extend(_GlobalStateTool(tool, run) for tool in self.global_tools)
        tools.extend(self.placeholders(run))
        result = await self.run_inner(context, tools, self._prompt(process, text, initial), text, run)
        return ToolResult.success(result.output)


class StateBuilder(Generic[S]):
    """`machine.in_state(S)`: register the tools of one state. `build()` returns the machine."""

    def __init__(self, state: S, machine: StateMachineTool[S]) -> None:
        self.state = state
        self.machine = machine

    def with_tool(self, tool: ToolsetItem) -> StateToolRegistration[S]:
        """Register a tool in this state; chain `.transitions_to(target)` to make it move the state."""
        resolved = resolve_tools([tool], f'with_tool of StateMachineTool {self.machine.name!r}')
        if len(resolved) != 1:
            raise UserError(f'with_tool of StateMachineTool {self.machine.name!r} takes one tool, but {tool!r} gives '
                            f'{len(resolved)}. Register them one by one.')
        return StateToolRegistration(resolved[0], self.state, self.machine)

    def in_state(self, state: S) -> StateBuilder[S]:
        return self.machine.in_state(state)

    def with_global_tool(self, tool: ToolsetItem) -> StateMachineTool[S]:
        return self.machine.with_global_tool(tool)

    def build(self) -> StateMachineTool[S]:
        return self.machine


class StateToolRegistration(Generic[S]):
    """A tool being registered in a state: `transitions_to(target)`, another `with_tool`, `in_state` or `build`
    (the last three register it without a transition)."""

    def __init__(self, tool: Tool, state: S, machine: StateMachineTool[S]) -> None:
        self.tool = tool
        self.state = state
        self.machine = machine

    def transitions_to(self, target: S) -> StateBuilder[S]:
        """After a successful call the state moves to `target` (a failure does not move it)."""
        return StateBuilder(self.state, self.machine._add_state_tool(self.state, self.tool, target))

    def with_tool(self, tool: ToolsetItem) -> StateToolRegistration[S]:
        return StateBuilder(self.state, self.machine._add_state_tool(self.state, self.tool, None)).with_tool(tool)

    def in_state(self, state: S) -> StateBuilder[S]:
        return self.machine._add_state_tool(self.state, self.tool, None).in_state(state)

    def build(self) -> StateMachineTool[S]:
        return self.machine._add_state_tool(self.state, self.tool, None)
