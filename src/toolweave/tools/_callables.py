"""The one module that inspects callables: whether one is async, which parameter receives the call context, what
it is called, and how to run it without blocking the event loop.

The rule for the call context is the same for every kind of tool:

- a parameter annotated `ToolCallContext` (also `ToolCallContext | None`, or inside `Annotated`) receives it,
  wherever it is, and is never shown to a model;
- a handler with fixed inputs (`Tool.create`'s arguments dict, a text tool's text, a typed tool's input model)
  that has no such annotation receives it as its next positional parameter if that parameter is required (or is
  `*args`): `def handler(args, context)` gets it, `def handler(args, extra=None)` and `str.strip` do not.
"""

from __future__ import annotations

import functools
import inspect
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Union

from toolweave.tools._context import ToolCallContext
from toolweave.tools._threads import run_blocking

__all__ = (
    'HandlerCall',
    'annotated_target',
    'callable_names',
    'handler_call',
    'is_async_callable',
    'is_context_type',
    'run_callable',
    'snake_case',
    'type_hints',
)


def annotated_target(fn: Callable[..., Any]) -> Any:
    """The function whose signature and annotations describe `fn`: through decorators, partials and callable
    objects (their `__call__`)."""
    target: Any = inspect.unwrap(fn)
    while isinstance(target, functools.partial):
        target = inspect.unwrap(target.func)
    if not inspect.isroutine(target) and callable(target) and not isinstance(target, type):
        target = type(target).__call__
    return target


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """Whether calling `fn` returns a coroutine to await: an `async def`, through decorators and partials, or an
    object whose `__call__` is one."""
    return inspect.iscoroutinefunction(annotated_target(fn))


def is_context_type(hint: Any) -> bool:
    """`ToolCallContext`, an optional one (`ToolCallContext | None`), or either inside `Annotated`."""
    if hint is ToolCallContext:
        return True
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return is_context_type(typing.get_args(hint)[0])
    if origin is Union or origin is types.UnionType:
        members = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return len(members) == 1 and members[0] is ToolCallContext
    return False


def type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The resolved annotations of `fn` by parameter name; `{}` when they cannot be resolved."""
    try:
        return typing.get_type_hints(annotated_target(fn), include_extras=True)
    except Exception:  # an annotation naming something undefined: treat the callable as unannotated
        return {}


@dataclass(frozen=True, slots=True)
class HandlerCall:
    """How to call a handler with fixed inputs: whether it is async and where the call context goes."""

    is_async: bool
    context: str | None
    """`None` (the handler takes no context), `''` (positionally, after the inputs) or a keyword's name."""
    inputs: tuple[inspect.Parameter, ...]
    """The parameters that receive the fixed inputs, in order."""

    def arguments(self, inputs: list[Any], context: ToolCallContext) -> tuple[list[Any], dict[str, Any]]:
        if self.context is None:
            return inputs, {}
        if not self.context:
            return [*inputs, context], {}
        return inputs, {self.context: context}


def handler_call(fn: Callable[..., Any], inputs: int = 1) -> HandlerCall:
    """How `fn` takes `inputs` fixed positional inputs and the call context (see the module docstring)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: it takes the inputs only
        return HandlerCall(is_async_callable(fn), None, ())
    hints = type_hints(fn)
    positional = [p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                  inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotated = [p for p in params if is_context_type(hints.get(p.name, p.annotation))]
    if annotated:
        slot = annotated[0]
        rest = tuple(p for p in positional if p is not slot)[:inputs]
        if slot.kind is inspect.Parameter.POSITIONAL_ONLY:
            return HandlerCall(is_async_callable(fn), '', rest)
        return HandlerCall(is_async_callable(fn), slot.name, rest)
    taken = tuple(positional[:inputs])
    following = positional[inputs] if len(positional) > inputs else None
    variadic = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    required = following is not None and following.default is inspect.Parameter.empty
    return HandlerCall(is_async_callable(fn), '' if required or (following is None and variadic) else None, taken)


async def run_callable(fn: Callable[..., Any], is_async: bool, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """Await an async callable; run a sync one in a worker thread so it cannot block the event loop."""
    if is_async:
        return await fn(*args, **kwargs)
    # A timeout or cancellation returns at once instead of waiting for a blocking function that cannot be
    # interrupted; its daemon thread finishes in the background and its result is dropped (see `_threads`).
    result = await run_blocking(partial(fn, *args, **kwargs), callable_names(fn)[1])
    if inspect.isawaitable(result):  # a sync wrapper that returns a coroutine
        return await result
    return result


def callable_names(fn: Callable[..., Any]) -> tuple[str, str]:
    """The qualified name (for messages) and the default tool name of a function, partial or callable object."""
    target: Any = fn
    while isinstance(target, partial):
        target = target.func
    name = getattr(target, '__name__', None)
    if isinstance(name, str):
        return getattr(target, '__qualname__', name), name
    return type(target).__qualname__, snake_case(type(target).__name__)


def snake_case(name: str) -> str:
    """`FetchURLTool` -> `fetch_url_tool`."""
    return re.sub(r'(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])', '_', name).lower()
