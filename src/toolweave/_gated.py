"""`requires_approval`: put any tool behind the approval gate."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, overload

from toolweave.approval import APPROVAL_OPTIONS_KEY, OnTimeout, ReviewRequest
from toolweave.tools._context import ToolCallContext
from toolweave.tools._definition import ToolDefinition
from toolweave.tools._result import ToolResult
from toolweave.tools._tool import Tool, ToolArguments

__all__ = ('ApprovalRequiredTool', 'requires_approval')


class _Unset:
    def __repr__(self) -> str:
        return 'UNSET'


_UNSET: Any = _Unset()


class ApprovalRequiredTool(Tool):
    """A tool whose every call must be approved by the run's review handler; otherwise the wrapped tool itself.

    It has the wrapped tool's name, description and schema, and runs the wrapped tool's body (`execute`), so the
    gate runs once per call and the call is recorded once, under the tool's own name.
    """

    def __init__(self, tool: Tool, *, timeout: float | None = _UNSET, on_timeout: OnTimeout = _UNSET) -> None:
        if not isinstance(tool, Tool):
            raise TypeError(f'requires_approval needs a Tool or a function, got {type(tool).__name__}: {tool!r}.')
        self.wrapped = tool
        definition = tool.definition
        extra = dict(definition.metadata.extra)
        options = dict(extra.get(APPROVAL_OPTIONS_KEY) or {})
        if timeout is not _UNSET:
            options['timeout'] = timeout
        if on_timeout is not _UNSET:
            options['on_timeout'] = on_timeout
        if options:
            # Validate now (a bad timeout is a build-time mistake), with the same rules a request applies.
            ReviewRequest(definition.name, '', None, timeout=options.get('timeout', 1.0),
                          on_timeout=options.get('on_timeout', 'exit_early'))
            extra[APPROVAL_OPTIONS_KEY] = options
        self._definition = definition.with_metadata(requires_approval=True, extra=extra)

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        return await self.wrapped.execute(arguments, context)

    def __repr__(self) -> str:
        return f'requires_approval({self.wrapped!r})'


ToolLike = Tool | Callable[..., Any]


@overload
def requires_approval(tool: ToolLike, /, *, timeout: float | None = ..., on_timeout: OnTimeout = ...) -> Tool: ...


@overload
def requires_approval(*, timeout: float | None = ..., on_timeout: OnTimeout = ...) -> Callable[[ToolLike], Tool]: ...


def requires_approval(
    tool: ToolLike | None = None, /, *, timeout: float | None = _UNSET, on_timeout: OnTimeout = _UNSET,
) -> Tool | Callable[[ToolLike], Tool]:
    """Require the run's reviewer to approve every call of `tool` (a `Tool`, or a function, made a tool first).

    Use it as a wrapper, `requires_approval(delete_file)`, or as a decorator above `@tool`, bare or with the
    review's own `timeout` (seconds, `None` for none) and `on_timeout` action (`'exit_early'`, the default,
    rejects an unanswered call; `'continue'` runs it). `@tool(requires_approval=True)` sets the same flag.

    ```python
    from toolweave import AutoApproveHandler, ToolResult, requires_approval, tool, use_review_handler

    @requires_approval(timeout=60)
    @tool
    def delete_file(path: str) -> str:
        return f'deleted {path}'

    with use_review_handler(AutoApproveHandler()):
        print(delete_file.call_sync({'path': '/tmp/x'}).output)
    #> deleted /tmp/x
    ```
    """
    if tool is None:
        return lambda inner: requires_approval(inner, timeout=timeout, on_timeout=on_timeout)
    candidate: object = tool
    if not isinstance(candidate, Tool):
        if not callable(candidate):
            raise TypeError(f'requires_approval needs a Tool or a function, got {type(candidate).__name__}: '
                            f'{candidate!r}.')
        from toolweave.tools._function import function_tool

        candidate = function_tool(candidate)
    options_given = any(option is not _UNSET for option in (timeout, on_timeout))
    if candidate.definition.metadata.requires_approval and not options_given:
        return candidate
    return ApprovalRequiredTool(candidate, timeout=timeout, on_timeout=on_timeout)
