"""The seam every tool call goes through: `Tool.call`.

A tool is a definition (what a model is told) and a body (`execute`). `call` is the one entry point everything
uses (a direct call, an agent's tool call, a plan step, a pipeline step, an MCP server): it turns the context
into a `ToolCallContext`, asks the reviewer when the tool requires approval, runs `execute`, turns every
exception into a failure result (except `ToolConfigurationError` and control-flow signals, which propagate),
and records the call once (metrics and a log line) under the tool's name.

Wrappers (`DelegatingTool`) change a tool by overriding `execute` and delegating to the wrapped tool's
`execute`: however many layers a tool has, a call passes through `call` once, at the outermost layer, under
the name the model called. `layers()` and `layer(cls)` see through the wrappers; the approval gate, unfolding
and agentic tools use them to find what a wrapped tool is.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from functools import partial
from time import perf_counter
from typing import TYPE_CHECKING, Any, TypeVar, final

import anyio

from toolweave import _tracing
from toolweave._tracing import tool_span
from toolweave.exceptions import ControlFlowSignal, ToolConfigurationError, UserError
from toolweave.tools._arguments import ToolArguments, load_arguments
from toolweave.tools._context import ToolCallContext
from toolweave.tools._definition import ToolDefinition, ToolMetadata
from toolweave.tools._metrics import record_call
from toolweave.tools._result import ToolResult
from toolweave.tools._review import review_call

if TYPE_CHECKING:
    from toolweave.tools._programmatic import Parameter

__all__ = ('Tool', 'ToolArguments', 'load_arguments')

T = TypeVar('T')


class Tool(ABC):
    """A tool a model can call. Subclasses implement `definition` and `execute`; everything calls `call`.

    `call` is final: it is where approval, timing, metrics, logging and the exception rule happen, once per
    call. To change what a tool does, override `execute` (or wrap it in a `DelegatingTool`).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if 'call' in vars(cls):
            raise UserError(
                f'{cls.__qualname__} overrides `Tool.call`. `call` is the one instrumented entry of every tool '
                '(approval, metrics, logging, error handling): override `execute(arguments, context)` instead, and '
                'to wrap a tool subclass `DelegatingTool` and delegate to `self.delegate.execute`.'
            )

    @property
    @abstractmethod
    def definition(self) -> ToolDefinition: ...

    @abstractmethod
    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        """Run the tool body. May raise; `call` turns the exception into a failure result."""

    def check_arguments(self, arguments: Mapping[str, Any], *,
                        pending: Collection[str] = ()) -> Mapping[str, Any] | bool | None:
        """Validate `arguments` ahead of a call, the way the call will. Raises `ArgumentsError` saying what is
        wrong. Returns the arguments to call with (the call then does not validate them again); with `pending`
        (the names of arguments whose values come later: a plan's references), `True` once the rest is checked
        and the pending names are arguments the tool takes. `None`: the tool has no validation of its own to offer
        here (a plan then checks the arguments against `definition.parameters`).

        A plan checks its steps' arguments this way before any step runs, so a tool validates each call without
        references once, in one place. `FunctionTool` implements it; a tool whose `execute` validates with
        something of its own may too (return a `CheckedArguments`)."""
        return None

    def check_arguments_many(self, arguments: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]] | None:
        """`check_arguments` for many calls at once, for a tool that checks them quicker together (a plan's steps
        without references that call it): the arguments to call with, in order; `None` when it cannot, or when any
        of them is wrong (each is then checked with `check_arguments`, which says what is wrong). A plan uses it
        only where the class that defines it also defines the `check_arguments` in effect, so a subclass that
        changes one check is never bypassed by the other."""
        return None

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def description(self) -> str:
        return self.definition.description

    @property
    def requires_approval(self) -> bool:
        """Whether a call of this tool is reviewed first: some layer of it requires approval."""
        return self._reviewed(self.definition)

    @final
    async def call(self, arguments: ToolArguments = None, context: Mapping[str, Any] | None = None) -> ToolResult:
        """Call the tool. Never raises for a tool failure: read `ToolResult.error`."""
        ctx = context if isinstance(context, ToolCallContext) else ToolCallContext.of(context)
        if _tracing.ACTIVE is not None and not _tracing.span_opened_for_call():
            return await _traced_call(_tracing.ACTIVE, self, arguments, ctx)
        definition = self.definition
        start = perf_counter()
        try:
            if self._reviewed(definition):
                reviewed = await review_call(self, arguments, ctx)
                if isinstance(reviewed, ToolResult):
                    return self._record(definition, arguments, reviewed, start)
                arguments = reviewed
            result = await self.execute(arguments, ctx)
        except (ToolConfigurationError, ControlFlowSignal):
            raise
        except Exception as exc:
            result = ToolResult.from_exception(exc)
            _tracing.exception_raised(exc)
        if not isinstance(result, ToolResult):
            raise ToolConfigurationError(
                f'{type(self).__name__}.execute returned {type(result).__name__} {result!r} for tool '
                f'{definition.name!r}. `execute` must return a ToolResult: `ToolResult.success(text)` or '
                '`ToolResult.failure(message)`.'
            )
        return self._record(definition, arguments, result, start)

    def call_sync(self, arguments: ToolArguments = None, context: Mapping[str, Any] | None = None) -> ToolResult:
        """`call` for scripts and notebooks that have no event loop running."""
        return anyio.run(partial(self.call, arguments, context))

    def layers(self) -> Iterator[Tool]:
        """This tool, then the tools it wraps (see `DelegatingTool`), outermost first."""
        yield self

    def layer(self, cls: type[T]) -> T | None:
        """The outermost layer of this tool that is a `cls` (the tool itself included), or `None`."""
        for layer in self.layers():
            if isinstance(layer, cls):
                return layer
        return None

    def _reviewed(self, definition: ToolDefinition) -> bool:
        """Whether a call is reviewed: this layer (`definition` is its definition) or one it wraps requires approval.
        The gate runs once, at the outermost layer; only a tool with layers has others to look at."""
        if definition.metadata.requires_approval:
            return True
        if type(self).layers is Tool.layers:
            return False
        return any(layer.definition.metadata.requires_approval for layer in self.layers())

    @staticmethod
    def _record(definition: ToolDefinition, arguments: ToolArguments, result: ToolResult, start: float) -> ToolResult:
        record_call(definition.name, arguments, result.output, result.error, perf_counter() - start)
        return result

    @classmethod
    def create(
        cls,
        name: str,
        description: str,
        handler: Callable[..., Any],
        parameters: Sequence[Parameter] | None = None,
        *,
        metadata: ToolMetadata | None = None,
    ) -> Tool:
        """A tool built in code: the handler receives the arguments dict (declared `parameters` validated), or,
        when it takes one model-typed input and no `parameters` are given, the validated model (a typed tool).
        See `ProgrammaticTool` and `TypedTool`."""
        from toolweave.tools._programmatic import create_tool  # the factory's products subclass Tool

        return create_tool(name, description, handler, parameters, metadata=metadata)

    def __repr__(self) -> str:
        return f'{type(self).__name__}(name={self.definition.name!r})'


async def _traced_call(tracing: _tracing.Tracing, tool: Tool, arguments: ToolArguments,
                       ctx: ToolCallContext) -> ToolResult:
    """`tool.call` inside its `execute_tool` span (tracing is on): the span is opened here, then `call` runs its
    body inside it, so that while tracing is off `call` does exactly what it did before tracing existed."""
    definition = tool.definition
    with tool_span(tracing, definition.name, definition.description, arguments) as scope:
        result = await tool.call(arguments, ctx)
        scope.result(result.output, result.error)
        return result
