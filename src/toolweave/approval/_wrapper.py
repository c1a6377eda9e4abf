"""`requires_approval`: put any tool behind the approval gate."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar, overload

from toolweave.approval._gate import APPROVAL_OPTIONS_KEY
from toolweave.approval._model import OnTimeout, check_options
from toolweave.exceptions import UserError
from toolweave.tools import DelegatingTool, FunctionTool, Tool, ToolDefinition, function_tool

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
    # Checked now: a bad timeout is a build-time mistake, caught with the rules a request applies.
    check_options(name, options.get('timeout', 1.0), options.get('on_timeout', 'exit_early'))
    return options


def _gated(definition: ToolDefinition, options: Mapping[str, Any]) -> ToolDefinition:
    """`definition` with the approval flag set and `options` as its own review options."""
    extra = dict(definition.metadata.extra)
    if options:
        extra[APPROVAL_OPTIONS_KEY] = {**(extra.get(APPROVAL_OPTIONS_KEY) or {}), **options}
    return definition.with_metadata(requires_approval=True, extra=extra)


class ApprovalRequiredTool(DelegatingTool):
    """A tool whose every call must be approved by the run's reviewers; otherwise the wrapped tool itself.

    It has the wrapped tool's name, description and schema, with `requires_approval` set (and its own `timeout`
    and `on_timeout`, when given): `Tool.call` reviews each call once, under the name the model called, before
    any layer runs. Wrapping a tool that is already gated adds no second review; it only sets the options.
    """

    def __init__(self, tool: Tool, *, timeout: float | None = _UNSET, on_timeout: OnTimeout = _UNSET) -> None:
        if not isinstance(tool, Tool):
            raise UserError(f'requires_approval needs a Tool or a function, got {type(tool).__name__}: {tool!r}.')
        super().__init__(tool)
        self._definition = _gated(tool.definition, _options(tool.definition.name, timeout, on_timeout))

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    def __repr__(self) -> str:
        return f'requires_approval({self.delegate!r})'


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
    """Require the run's reviewers to approve every call of `tool` (a `Tool`, or a function, made a tool first).

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
            raise UserError(f'requires_approval needs a Tool or a function, got {type(candidate).__name__}: '
                            f'{candidate!r}.')
        candidate = function_tool(candidate)
    options = _options(candidate.definition.name, timeout, on_timeout)
    if not options and any(layer.definition.metadata.requires_approval for layer in candidate.layers()):
        return candidate  # already reviewed at every call
    if isinstance(candidate, FunctionTool):
        # The flag on the definition is all `Tool.call` needs; keeping the FunctionTool keeps method binding.
        return candidate.with_definition(_gated(candidate.definition, options))
    return ApprovalRequiredTool(candidate, timeout=timeout, on_timeout=on_timeout)
