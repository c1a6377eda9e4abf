"""`requires_approval`: put any tool behind the approval gate."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from time import perf_counter
from typing import Any, ParamSpec, TypeVar, overload

from toolweave.approval import APPROVAL_OPTIONS_KEY, OnTimeout, ReviewRequest, approval_options, review_call
from toolweave.tools._context import ToolCallContext
from toolweave.tools._definition import ToolDefinition
from toolweave.tools._function import FunctionTool, function_tool
from toolweave.tools._result import ToolResult
from toolweave.tools._tool import Tool, ToolArguments

__all__ = ('ApprovalRequiredTool', 'requires_approval')

P = ParamSpec('P')
R = TypeVar('R')


class _Unset:
    def __repr__(self) -> str:
        return 'UNSET'


_UNSET: Any = _Unset()


def _options(name: str, timeout: float | None, on_timeout: OnTimeout) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if timeout is not _UNSET:
        options['timeout'] = timeout
    if on_timeout is not _UNSET:
        options['on_timeout'] = on_timeout
    if options:
        # Validate now (a bad timeout is a build-time mistake), with the same rules a request applies.
        ReviewRequest(name, '', None, timeout=options.get('timeout', 1.0),
                      on_timeout=options.get('on_timeout', 'exit_early'))
    return options


def _gated(definition: ToolDefinition, options: Mapping[str, Any]) -> ToolDefinition:
    """`definition` with the approval flag set and `options` merged into its approval options."""
    extra = dict(definition.metadata.extra)
    if options:
        extra[APPROVAL_OPTIONS_KEY] = {**(extra.get(APPROVAL_OPTIONS_KEY) or {}), **options}
    return definition.with_metadata(requires_approval=True, extra=extra)


class ApprovalRequiredTool(Tool):
    """A tool whose every call must be approved by the run's review handler; otherwise the wrapped tool itself.

    It has the wrapped tool's name, description and schema. A call asks the reviewer, then calls the wrapped tool
    (its `call`, so wrappers that add behaviour around a call keep it) with the approved or edited arguments.
    The gate runs once per call and the call is recorded once, under the tool's own name (by the wrapped tool,
    or here when the reviewer rejects it). Wrapping a tool that is already gated adds no second gate: it only sets
    that gate's `timeout` / `on_timeout`.
    """

    def __init__(self, tool: Tool, *, timeout: float | None = _UNSET, on_timeout: OnTimeout = _UNSET) -> None:
        if not isinstance(tool, Tool):
            raise TypeError(f'requires_approval needs a Tool or a function, got {type(tool).__name__}: {tool!r}.')
        self.wrapped = tool
        self._inner_gate = tool.definition.metadata.requires_approval
        self._options = _options(tool.definition.name, timeout, on_timeout)
        self._definition = _gated(tool.definition, self._options)

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def call(self, arguments: ToolArguments = None, context: Mapping[str, Any] | None = None) -> ToolResult:
        ctx = context if isinstance(context, ToolCallContext) else ToolCallContext.of(context)
        if self._inner_gate:
            with approval_options(self.name, self._options):
                return await self.wrapped.call(arguments, ctx)
        start = perf_counter()
        gated = await review_call(self, arguments, ctx)
        if isinstance(gated, ToolResult):
            return self._finish(self.name, arguments, gated, start)
        return await self.wrapped.call(gated, ctx)

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        """The wrapped tool's body, for callers that ran the gate themselves."""
        return await self.wrapped.execute(arguments, context)

    def __repr__(self) -> str:
        return f'requires_approval({self.wrapped!r})'


ToolLike = Tool | Callable[..., Any]


@overload
def requires_approval(tool: FunctionTool[P, R], /, *, timeout: float | None = ...,
                      on_timeout: OnTimeout = ...) -> FunctionTool[P, R]: ...


@overload
def requires_approval(tool: Callable[P, R], /, *, timeout: float | None = ...,
                      on_timeout: OnTimeout = ...) -> FunctionTool[P, R]: ...


@overload
def requires_approval(tool: Tool, /, *, timeout: float | None = ..., on_timeout: OnTimeout = ...) -> Tool: ...


@overload
def requires_approval(*, timeout: float | None = ..., on_timeout: OnTimeout = ...) -> Callable[[ToolLike], Tool]: ...


def requires_approval(
    tool: ToolLike | None = None, /, *, timeout: float | None = _UNSET, on_timeout: OnTimeout = _UNSET,
) -> Tool | Callable[[ToolLike], Tool]:
    """Require the run's reviewer to approve every call of `tool` (a `Tool`, or a function, made a tool first).

    Use it as a wrapper, `requires_approval(delete_file)`, or as a decorator above `@tool` (methods included),
    bare or with the review's own `timeout` (seconds, `None` for none) and `on_timeout` action (`'exit_early'`,
    the default, rejects an unanswered call; `'continue'` runs it). `@tool(requires_approval=True)` sets the same
    flag. A function tool stays a function tool (still callable as the function, still found by `tools_from`);
    any other tool is wrapped in an `ApprovalRequiredTool`.

    ```python
    from toolweave import AutoApproveHandler, requires_approval, tool, use_review_handler

    @requires_approval(timeout=60)
    @tool
    def delete_file(path: str) -> str:
        return f'deleted {path}'

    with use_review_handler(AutoApproveHandler()):
        print(delete_file.call_sync({'path': '/tmp/x'}).output, delete_file('/tmp/y'))
    #> deleted /tmp/x deleted /tmp/y
    ```
    """
    if tool is None:
        return lambda inner: requires_approval(inner, timeout=timeout, on_timeout=on_timeout)
    candidate: object = tool
    if not isinstance(candidate, Tool):
        if not callable(candidate):
            raise TypeError(f'requires_approval needs a Tool or a function, got {type(candidate).__name__}: '
                            f'{candidate!r}.')
        candidate = function_tool(candidate)
    options = _options(candidate.definition.name, timeout, on_timeout)
    if candidate.definition.metadata.requires_approval and not options:
        return candidate
    if isinstance(candidate, FunctionTool):
        # The flag on the definition is all `Tool.call` needs; keeping the FunctionTool keeps method binding.
        return candidate.with_definition(_gated(candidate.definition, options))
    return ApprovalRequiredTool(candidate, timeout=timeout, on_timeout=on_timeout)
