"""What the three agentic tools share: configuration, the fluent `with_*` copies, the inner agent run,
artifact tracking and result packaging."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Self, TypeAlias

from toolweave._checks import check_number
from toolweave._json import compact
from toolweave.agent import Agent, AgentProcess, AgentRunResult, current_process
from toolweave.agentic._chaining import (
    DomainToolPredicate,
    DomainToolSource,
    DomainToolTracker,
    ToolChainingInjectionStrategy,
    is_collection,
    unpack_artifact,
)
from toolweave.exceptions import ControlFlowSignal, DuplicateToolError, ToolConfigurationError, UserError
from toolweave.models import Model, ModelSettings, infer_model
from toolweave.tools import (
    ArgumentsError,
    DelegatingTool,
    Parameter,
    Tool,
    ToolArguments,
    ToolCallContext,
    ToolDefinition,
    ToolMetadata,
    ToolResult,
    Toolset,
    check_tool_name,
    load_arguments,
    tools_from_safely,
)
from toolweave.tools._programmatic import parameters_model, parameters_schema
from toolweave.tools._schema import ArgumentsValidator

__all__ = (
    'DEFAULT_MAX_ITERATIONS',
    'NO_PROCESS',
    'AgenticTool',
    'RunState',
    'SystemPrompt',
    'ToolListAgenticTool',
    'TrackingTool',
    'check_unique',
    'default_system_prompt',
    'object_tools',
    'resolve_tools',
)

DEFAULT_MAX_ITERATIONS = 20
"""The most model calls one invocation's inner loop may make."""

NO_PROCESS = 'No AgentProcess context available'
"""The failure of an agentic tool called outside an agent run."""

SystemPrompt: TypeAlias = str | Callable[[AgentProcess, str], str]
"""A fixed system prompt, or `fn(process, input)` building one per call from the calling run's process (its
blackboard, context...) and the input text the inner model receives."""


def default_system_prompt(description: str) -> str:
    """The system prompt of an agentic tool that was not given one."""
    return ('You are an intelligent agent that can use tools to help you complete tasks.\n'
            f'Use the provided tools to perform the following task: {description}')


def resolve_tools(items: Iterable[object], where: str) -> tuple[Tool, ...]:
    """Tools from anything a `Toolset` resolves (tools, functions, objects with `@tool` methods)."""
    if isinstance(items, (str, bytes, Mapping)):
        raise UserError(f'{where} needs tools, got {type(items).__name__} {items!r}.')
    return tuple(Toolset(list(items)).tools)


def _agentic_inside(tool: Tool) -> bool:
    """Whether `tool` is an agentic tool, possibly under wrappers."""
    return any(isinstance(layer, AgenticTool) for layer in tool.layers())


class RunState:
    """What one invocation of an agentic tool has seen so far: artifacts, and the chaining bindings."""

    def __init__(self, tracker: DomainToolTracker | None, *, capture_nested: bool, unpack_collections: bool) -> None:
        self.tracker = tracker
        self.capture_nested = capture_nested
        self.unpack_collections = unpack_collections
        self.lock = threading.Lock()
        self.artifacts: list[object] = []
        """Artifacts the result packages: nested agentic tools' are left out unless `capture_nested`."""
        self.seen_artifacts: list[object] = []
        """Every artifact any tool returned, element by element (what conditions look at)."""

    def observe(self, tool: Tool, result: ToolResult) -> None:
        """Record a finished call's artifact and offer it for tool chaining (collections element by element for
        Simple and Playbook, not at all for the state machine, which chains from single objects only)."""
        artifact = result.artifact
        if artifact is None:
            return
        items = unpack_artifact(artifact)
        with self.lock:
            self.seen_artifacts.extend(items)
            if self.capture_nested or not _agentic_inside(tool):
                self.artifacts.extend(items)
        if self.tracker is None:
            return
        offered = items if self.unpack_collections or not is_collection(artifact) else []
        for item in offered:
            self.tracker.offer(item, current_process())

    def package(self, output: str) -> ToolResult:
        """The invocation's result: the inner model's answer, with no artifact, the one artifact, or the list."""
        if not self.artifacts:
            return ToolResult.success(output)
        if len(self.artifacts) == 1:
            return ToolResult.success(output, self.artifacts[0])
        return ToolResult.success(output, list(self.artifacts))


class TrackingTool(DelegatingTool):
    """Runs its delegate and shows the result to the invocation's `RunState`."""

    def __init__(self, delegate: Tool, state: RunState) -> None:
        super().__init__(delegate)
        self.state = state

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        return self.after(await self.delegate.execute(arguments, context))

    def after(self, result: ToolResult) -> ToolResult:
        try:
            self.state.observe(self.delegate, result)
        except (ToolConfigurationError, ControlFlowSignal):
            raise
        except Exception as exc:  # a tool chaining predicate raised
            return ToolResult.failure(f'Tool {self.name!r} succeeded but tool chaining failed on its result: '
                                      f'{type(exc).__name__}: {exc}. Fix the predicate given to '
                                      '`with_tool_chaining_from`.')
        return result


class AgenticTool(Tool):
    """A tool whose call runs an inner agent loop: a model orchestrates the tool's own sub-tools.

    Shared by `SimpleAgenticTool`, `PlaybookTool` and `StateMachineTool`. Every `with_*` method returns a
    modified copy; the original is unchanged.

    - **Model**: the inner loop uses the tool's own `model` (`model=` or `with_model`). A running agent does not
      expose its model to tools, so there is no fallback: calling an agentic tool without a model raises
      `ToolConfigurationError` (a developer mistake that must not be hidden from the caller).
    - **Process**: an agentic tool runs inside the calling agent's run. Called outside one it fails with
      `No AgentProcess context available`. The inner run is a child of the calling process: its blackboard
      sees the caller's objects and publishes its own when it ends, its usage is added to the caller's, and
      its events bubble up.
    - **Input**: declare parameters with `with_parameter`; the validated arguments, as compact JSON, are the
      inner model's user message.
    - **Context**: the call's context reaches every inner tool call (with the inner loop's own loop id).
    - **Budget**: the inner run is part of the calling run, so the calling run's `Budget` bounds it as it goes;
      past a limit the inner run stops and the call fails with the budget message (the calling run then stops
      at its next check).
    """

    kind: ClassVar[str] = 'AgenticTool'
    """The class name used in the tool's fixed messages (`No tools available for <kind>`)."""

    def __init__(
        self,
        name: str,
        description: str,
        *,
        model: Model | str | None = None,
        system_prompt: SystemPrompt | None = None,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        parameters: Sequence[Parameter] = (),
        metadata: ToolMetadata | None = None,
        settings: ModelSettings | None = None,
    ) -> None:
        check_tool_name(name, where=f'{type(self).__name__}')
        if not isinstance(description, str):
            raise UserError(f'Description of {type(self).__name__} {name!r} must be a string, got {description!r}.')
        self._name = name
        self._description = description
        self.model: Model | str | None = _check_model(model, name)
        self.system_prompt: SystemPrompt | None = _check_prompt(system_prompt, name)
        self.max_iterations = _check_iterations(max_iterations, name)
        self.settings: ModelSettings | None = _check_settings(settings, name)
        """Model settings (temperature, max tokens...) of every inner model call."""
        self.parameters: tuple[Parameter, ...] = tuple(parameters)
        self.metadata = metadata or ToolMetadata()
        self.domain_tool_sources: tuple[DomainToolSource[Any], ...] = ()
        self.auto_discovery = False
        """Whether tools are discovered from any returned object with `@tool` methods."""
        self.capture_nested_artifacts = False
        """Whether artifacts returned by nested agentic tools are packaged in the result too."""
        self._definition = self._build_definition()

    # --- definition ------------------------------------------------------------------------------------------

    def _build_definition(self) -> ToolDefinition:
        definition = ToolDefinition(self._name, self._description, parameters_schema(self._name, self.parameters),
                                    self.metadata)
        model = parameters_model(self._name, self.parameters)
        self._validator = None if model is None else ArgumentsValidator(model, definition.parameters)
        return definition

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    @property
    def has_tool_chaining(self) -> bool:
        return bool(self.domain_tool_sources) or self.auto_discovery

    # --- fluent copies ---------------------------------------------------------------------------------------

    def _copy(self, **changes: Any) -> Self:
        clone = copy.copy(self)
        for key, value in changes.items():
            setattr(clone, key, value)
        clone._definition = clone._build_definition()
        return clone

    def with_model(self, model: Model | str) -> Self:
        """A copy whose inner loop uses `model` (a `Model` or a model string such as `'openai:gpt-4o-mini'`)."""
        return self._copy(model=_check_model(model, self._name))

    def with_settings(self, settings: ModelSettings) -> Self:
        """A copy whose inner model calls use these model settings."""
        return self._copy(settings=_check_settings(settings, self._name))

    def with_system_prompt(self, prompt: SystemPrompt) -> Self:
        """A copy with a fixed system prompt, or a function `fn(process, input) -> str` called per call."""
        return self._copy(system_prompt=_check_prompt(prompt, self._name))

    def with_max_iterations(self, max_iterations: int) -> Self:
        """A copy whose inner loop makes at most `max_iterations` model calls (default 20)."""
        return self._copy(max_iterations=_check_iterations(max_iterations, self._name))

    def with_parameter(self, parameter: Parameter) -> Self:
        """A copy with one more input parameter (`Parameter.string(...)`, `.integer`, `.number`, `.boolean`)."""
        if not isinstance(parameter, Parameter):
            raise UserError(f'with_parameter of {self.kind} {self._name!r} needs a Parameter, got {parameter!r}. '
                            "Build one with `Parameter.string('topic', 'The topic to research')`.")
        added = (*self.parameters, parameter)
        parameters_schema(self._name, added)  # rejects a duplicate parameter name now
        return self._copy(parameters=added)

    def with_tool_chaining_from(self, cls: type[Any], predicate: DomainToolPredicate | None = None) -> Self:
        """A copy where the `@tool` methods of `cls` become tools once a tool returns a single instance
        (placeholders are declared at once; last wins). `predicate(instance, process)` filters instances."""
        source = DomainToolSource(cls, predicate)
        return self._copy(domain_tool_sources=(*self.domain_tool_sources, source))

    def with_tool_chaining_from_any(self) -> Self:
        """A copy that discovers tools from any returned object with `@tool` methods; a new object replaces
        the tools of the previous one."""
        return self._copy(auto_discovery=True)

    def with_capture_nested_artifacts(self, capture: bool = True) -> Self:
        """A copy that also packages the artifacts of nested agentic tools (default: only regular tools')."""
        return self._copy(capture_nested_artifacts=bool(capture))

    # --- running ---------------------------------------------------------------------------------------------

    def input_text(self, arguments: ToolArguments) -> str | ToolResult:
        """The inner model's user message: the validated arguments as compact JSON, or the failure."""
        try:
            values = load_arguments(arguments, self._name)
            if self._validator is not None:
                self._validator.validate_mapping(values, self._name)
        except ArgumentsError as exc:
            return ToolResult.failure(str(exc))
        return compact(values)

    def make_prompt(self, process: AgentProcess, text: str, default: str) -> str:
        prompt = self.system_prompt
        if prompt is None:
            return default
        if isinstance(prompt, str):
            return prompt
        built = prompt(process, text)
        if not isinstance(built, str):
            raise ToolConfigurationError(f'The system prompt function of {self.kind} {self._name!r} returned '
                                         f'{type(built).__name__} {built!r}, not a string. Return the prompt text.')
        return built

    def new_state(self, *, unpack_collections: bool) -> RunState:
        tracker = None
        if self.has_tool_chaining:
            tracker = DomainToolTracker(self.domain_tool_sources, auto_discovery=self.auto_discovery)
        return RunState(tracker, capture_nested=self.capture_nested_artifacts, unpack_collections=unpack_collections)

    async def run_inner(
        self,
        context: ToolCallContext,
        tools: Sequence[Tool],
        instructions: str,
        text: str,
        state: RunState,
        decorate: Callable[[Tool], Tool] | None = None,
    ) -> AgentRunResult:
        """Run the inner agent loop, as a run inside the calling one (see `Agent.run`). Tools injected during the
        run (an unfolding sub-tool's inner tools, auto-discovered chained tools) are wrapped by `decorate`
        (default: tracked like the static sub-tools)."""
        if self.model is None:
            raise ToolConfigurationError(
                f'{self.kind} {self._name!r} has no model for its inner loop. Give it one: '
                f"`{self.kind}(..., model='openai:gpt-4o-mini')` or `.with_model(model)`."
            )
        if isinstance(self.model, str):  # resolved once: a provider model string builds a client
            try:
                self.model = infer_model(self.model)
            except UserError as exc:
                raise ToolConfigurationError(f'Model of {self.kind} {self._name!r}: {exc}') from exc
        # auto-discovered tools enter the inner loop through the loop's injection hook
        strategies = [] if state.tracker is None or not state.tracker.auto_discovery else [
            ToolChainingInjectionStrategy(state.tracker)]
        try:
            agent = Agent(self.model, instructions=instructions, tools=list(tools), max_iterations=self.max_iterations,
                          settings=self.settings, name=self._name, injection_strategies=strategies,
                          tool_decorator=decorate or (lambda tool: TrackingTool(tool, state)))
        except DuplicateToolError as exc:  # a sub-tool clashes with a chained tool: only the developer can fix it
            raise ToolConfigurationError(f'{self.kind} {self._name!r}: {exc}') from exc
        return await agent.run(text, context=context)

    def placeholders(self, state: RunState) -> list[Tool]:
        """The chaining placeholders of this invocation, tracked (chained tools are never locked: they are not
        the agentic tool's own sub-tools, and their objects appear only as the run goes)."""
        if state.tracker is None:
            return []
        return [TrackingTool(tool, state) for tool in state.tracker.placeholders()]

    def __repr__(self) -> str:
        return f'{type(self).__name__}(name={self._name!r})'


class ToolListAgenticTool(AgenticTool):
    """An agentic tool built on a list of always-available sub-tools (`tools=`): `SimpleAgenticTool`,
    `PlaybookTool`."""

    def __init__(
        self,
        name: str,
        description: str,
        *,
        tools: Iterable[object] = (),
        model: Model | str | None = None,
        system_prompt: SystemPrompt | None = None,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        parameters: Sequence[Parameter] = (),
        metadata: ToolMetadata | None = None,
        settings: ModelSettings | None = None,
    ) -> None:
        super().__init__(name, description, model=model, system_prompt=system_prompt, max_iterations=max_iterations,
                         parameters=parameters, metadata=metadata, settings=settings)
        self.tools: tuple[Tool, ...] = resolve_tools(tools, f'{self.kind} {name!r} tools')
        """The always-available sub-tools."""
        check_unique(self.tools, f'{self.kind} {name!r}')


def check_unique(tools: Iterable[Tool], owner: str) -> None:
    """Raise `DuplicateToolError` when two sub-tools share a name (the inner loop could not offer both)."""
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise DuplicateToolError(f'Duplicate tool name {tool.name!r} in {owner}. Sub-tool names must be unique: '
                                     'register each tool once, or rename one with `toolweave.with_description`/'
                                     '`Toolset.prefixed`.')
        seen.add(tool.name)


def object_tools(objects: Iterable[object]) -> tuple[Tool, ...]:
    """The tools each object stands for (its `@tool` methods, or its facade); objects with none are skipped."""
    found: list[Tool] = []
    for obj in objects:
        found.extend(tools_from_safely(obj))
    return tuple(found)


def _check_model(model: object, name: str) -> Model | str | None:
    if model is None or isinstance(model, str | Model):
        return model
    raise UserError(f'model of agentic tool {name!r} must be a Model or a model string such as '
                    f"'openai:gpt-4o-mini', got {type(model).__name__} {model!r}.")


def _check_settings(settings: object, name: str) -> ModelSettings | None:
    if settings is None or isinstance(settings, ModelSettings):
        return settings
    raise UserError(f'settings of agentic tool {name!r} must be a ModelSettings, got {type(settings).__name__} '
                    f'{settings!r}.')


def _check_prompt(prompt: object, name: str) -> SystemPrompt | None:
    if prompt is None or isinstance(prompt, str) or callable(prompt):
        return prompt
    raise UserError(f'system_prompt of agentic tool {name!r} must be a string or a function (process, input) -> '
                    f'str, got {type(prompt).__name__} {prompt!r}.')


def _check_iterations(value: int, name: str) -> int:
    check_number(value, f'max_iterations of agentic tool {name!r}', integer=True, minimum=1)
    return value
