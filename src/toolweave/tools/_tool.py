from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from time import perf_counter
from typing import TYPE_CHECKING, Any, TypeAlias

import anyio

from toolweave import _runtime
from toolweave.exceptions import ControlFlowSignal, ToolConfigurationError
from toolweave.tools._context import ToolCallContext
from toolweave.tools._definition import ToolDefinition, ToolMetadata
from toolweave.tools._metrics import log_call
from toolweave.tools._result import ToolResult

if TYPE_CHECKING:
    from toolweave.tools._programmatic import Parameter

__all__ = ('Tool', 'ToolArguments', 'load_arguments')

ToolArguments: TypeAlias = str | Mapping[str, Any] | None
"""Arguments as a model sends them (a JSON text) or as Python code passes them (a mapping)."""


class Tool(ABC):
    """A tool a model can call. Subclasses implement `definition` and `execute`.

    `call` is the one entry point everything uses (an agent, a plan step, a pipeline step, an MCP server):
    it runs the approval gate, times the call, records metrics, logs, and turns every exception into a
    failure result except `ToolConfigurationError` and control-flow signals, which propagate.
    """

    @property
    @abstractmethod
    def definition(self) -> ToolDefinition: ...

    @abstractmethod
    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        """Run the tool body. May raise; `call` turns the exception into a failure result."""

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def description(self) -> str:
        return self.definition.description

    async def call(self, arguments: ToolArguments = None, context: Mapping[str, Any] | None = None) -> ToolResult:
        """Call the tool. Never raises for a tool failure: read `ToolResult.error`."""
        ctx = context if isinstance(context, ToolCallContext) else ToolCallContext.of(context)
        definition = self.definition
        start = perf_counter()
        if definition.metadata.requires_approval:
            from toolweave.approval import review_call

            gated = await review_call(self, arguments, ctx)
            if isinstance(gated, ToolResult):
                return self._finish(definition.name, arguments, gated, start)
            arguments = gated
        try:
            result = await self.execute(arguments, ctx)
        except (ToolConfigurationError, ControlFlowSignal):
            raise
        except Exception as exc:
            result = ToolResult.from_exception(exc)
        return self._finish(definition.name, arguments, result, start)

    def call_sync(self, arguments: ToolArguments = None, context: Mapping[str, Any] | None = None) -> ToolResult:
        """`call` for scripts and notebooks that have no event loop running."""
        return anyio.run(partial(self.call, arguments, context))

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
        """A tool built in code (see `toolweave.tools._programmatic`): the handler receives the arguments dict,
        or, when it takes one model-typed input and no `parameters` are given, the validated model (typed tool).
        """
        from toolweave.tools._programmatic import create_tool

        return create_tool(name, description, handler, parameters, metadata=metadata)

    @staticmethod
    def _finish(name: str, arguments: ToolArguments, result: ToolResult, start: float) -> ToolResult:
        seconds = perf_counter() - start
        _runtime.current_metrics().record(name, ok=result.error is None, seconds=seconds)
        log_call(name, arguments, result.output, result.error, seconds * 1000)
        return result

    def __repr__(self) -> str:
        return f'{type(self).__name__}(name={self.definition.name!r})'


def load_arguments(arguments: ToolArguments, tool_name: str) -> dict[str, Any]:
    """Arguments as a dict. Raises `ValueError` with the fix when they are not a JSON object."""
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if not arguments.strip():
        return {}
    try:
        loaded = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f'Invalid JSON arguments for tool {tool_name!r}: {exc.msg} at line {exc.lineno} column {exc.colno}. '
            'Send a JSON object such as {"name": "value"}.'
        ) from None
    if not isinstance(loaded, dict):
        raise ValueError(
            f'Arguments for tool {tool_name!r} must be a JSON object, got {type(loaded).__name__}: '
            f'{arguments[:100]!r}. Wrap the values in an object such as {{"name": "value"}}.'
        )
    return loaded
