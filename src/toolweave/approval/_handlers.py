"""Review handlers: the protocol, and the handlers that decide without a person (auto-approve, a callback, rules).
The console handler, for a person at a terminal, is in `_console.py`."""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal, Protocol, runtime_checkable

import anyio
import anyio.to_thread

from toolweave._json import loads_object
from toolweave.approval._model import ReviewDecision, ReviewRequest
from toolweave.exceptions import ToolConfigurationError, UserError
from toolweave.tools._callables import is_async_callable

__all__ = (
    'ApprovalRule',
    'AutoApproveHandler',
    'CallbackReviewHandler',
    'ReviewHandler',
    'RuleBasedReviewHandler',
    'ask_handler',
    'check_review_handler',
    'request_arguments',
)

ReviewCallback = Callable[[ReviewRequest], 'ReviewDecision | bool | Awaitable[ReviewDecision | bool]']
ArgumentPredicate = Callable[[Mapping[str, Any]], bool]


@runtime_checkable
class ReviewHandler(Protocol):
    """Decides whether a gated tool call may run.

    Any object with an `async review(request) -> ReviewDecision` method is a handler (a plain `def review` works
    too). The gate gives it `request.timeout` seconds and applies `request.on_timeout` when it does not answer in
    time. A handler that times its reviews itself (the console handler starts the clock once its prompt is on
    screen) says so with a class attribute `applies_timeout = True`, and returns `ReviewDecision.on_timeout(request)`
    when its time runs out.

    Built-in handlers: `AutoApproveHandler`, `ConsoleReviewHandler`, `CallbackReviewHandler`,
    `RuleBasedReviewHandler`.
    """

    async def review(self, request: ReviewRequest) -> ReviewDecision: ...


class AutoApproveHandler:
    """Approves everything (tests, trusted batch runs). Installed inside another reviewer's block it approves only
    its own share: the stricter decision wins (see `use_review_handler`)."""

    applies_timeout = True  # it answers at once

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        return ReviewDecision.approve()

    def __repr__(self) -> str:
        return 'AutoApproveHandler()'


_handler_types: weakref.WeakSet[type] = weakref.WeakSet()


def is_review_handler(handler: object) -> bool:
    """`isinstance(handler, ReviewHandler)`, remembered per class: a protocol check walks the protocol's members
    on every call, and the gate runs this on every gated call."""
    cls = type(handler)
    if cls in _handler_types:
        return True
    if isinstance(handler, ReviewHandler):
        _handler_types.add(cls)
        return True
    return False


def check_review_handler(handler: object, where: str) -> None:
    """Raise `ToolConfigurationError` unless `handler` is `None` or a `ReviewHandler`."""
    if handler is not None and not is_review_handler(handler):
        raise ToolConfigurationError(
            f'{where} is misconfigured: review_handler must be an instance of ReviewHandler (an object with '
            f'`async def review(self, request) -> ReviewDecision`), got {type(handler).__name__}: {handler!r}.'
        )


async def ask_handler(handler: ReviewHandler, request: ReviewRequest) -> ReviewDecision:
    """`handler.review(request)` under the request's timeout; the on-timeout decision when it runs out."""
    if request.timeout is None or getattr(handler, 'applies_timeout', False) is True:
        return await _answer(handler, request)
    with anyio.move_on_after(request.timeout):
        return await _answer(handler, request)
    return ReviewDecision.on_timeout(request)


async def _answer(handler: ReviewHandler, request: ReviewRequest) -> ReviewDecision:
    answer: object = handler.review(request)
    if inspect.isawaitable(answer):  # the protocol is async; a plain `def review` is accepted too
        answer = await answer
    if not isinstance(answer, ReviewDecision):
        raise ToolConfigurationError(
            f'Review handler {type(handler).__name__} returned {answer!r} for {request.tool_name!r}. `review` must '
            'return a ReviewDecision: ReviewDecision.approve(), .edit(revised) or .reject(reason).'
        )
    return answer


class CallbackReviewHandler:
    """Asks a function: an `async def` (awaited) or a plain function (run in a worker thread, so a blocking call
    such as a web request does not stall the event loop). It returns a `ReviewDecision`, or `True` to approve
    and `False` to reject.

    ```python
    from toolweave import CallbackReviewHandler, ReviewDecision

    async def reviewer(request):
        return ReviewDecision.reject('read-only today') if request.tool_name.startswith('delete') else True

    handler = CallbackReviewHandler(reviewer)
    ```
    """

    def __init__(self, callback: ReviewCallback) -> None:
        if not callable(callback):
            raise UserError(f'CallbackReviewHandler needs a callable, got {type(callback).__name__}: {callback!r}.')
        self._callback = callback
        self._is_async = is_async_callable(callback)

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        if self._is_async:
            answer: Any = await self._callback(request)  # type: ignore[misc]
        else:
            answer = await anyio.to_thread.run_sync(self._callback, request)
            if inspect.isawaitable(answer):
                answer = await answer
        if isinstance(answer, bool):
            return ReviewDecision.approve() if answer else ReviewDecision.reject()
        if isinstance(answer, ReviewDecision):
            return answer
        name = getattr(self._callback, '__qualname__', repr(self._callback))
        raise ToolConfigurationError(
            f'Review callback {name} returned {answer!r} for {request.tool_name!r}. Return a ReviewDecision '
            '(ReviewDecision.approve(), .edit(revised), .reject(reason)) or a bool.')

    def __repr__(self) -> str:
        return f'CallbackReviewHandler({getattr(self._callback, "__qualname__", self._callback)!r})'


def request_arguments(request: ReviewRequest) -> dict[str, Any]:
    """A request's arguments as a dict for predicates: a mapping as is, a JSON object text parsed, any other text
    as `{"input": text}`, nothing as `{}`."""
    arguments = request.arguments
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    loaded = loads_object(arguments)
    return loaded if loaded is not None else {'input': arguments}


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    """Approve or reject calls of the tools whose names match `tool` (a glob: `*`, `?`, `[abc]`), optionally only
    when `when(arguments)` is true. Build them with `ApprovalRule.allow(...)` and `ApprovalRule.deny(...)`."""

    tool: str = '*'
    when: ArgumentPredicate | None = None
    action: Literal['approve', 'reject'] = 'approve'
    reason: str | None = None
    """Shown in the rejection the model sees (deny rules)."""

    def __post_init__(self) -> None:
        if not isinstance(self.tool, str) or not self.tool:
            raise UserError(f'ApprovalRule tool pattern must be a non-empty glob string, got {self.tool!r}.')
        if self.action not in ('approve', 'reject'):
            raise UserError(f"ApprovalRule action must be 'approve' or 'reject', got {self.action!r}.")
        if self.when is not None and not callable(self.when):
            raise UserError(f'ApprovalRule `when` must be a function of the arguments, got {self.when!r}.')

    @classmethod
    def allow(cls, tool: str = '*', when: ArgumentPredicate | None = None) -> ApprovalRule:
        """Approve the matching calls."""
        return cls(tool, when, 'approve')

    @classmethod
    def deny(cls, tool: str = '*', when: ArgumentPredicate | None = None, reason: str | None = None) -> ApprovalRule:
        """Reject the matching calls."""
        return cls(tool, when, 'reject', reason)

    def matches(self, request: ReviewRequest) -> bool:
        """Whether the rule applies. A predicate that raises propagates (the handler turns that into a rejection)."""
        if not fnmatchcase(request.tool_name, self.tool):
            return False
        return self.when is None or bool(self.when(request_arguments(request)))

    def describe(self) -> str:
        condition = '' if self.when is None else f' when {getattr(self.when, "__qualname__", "predicate")}'
        return f'{self.action} {self.tool!r}{condition}'


class RuleBasedReviewHandler:
    """Decides by rules: the first rule that matches the tool name (and arguments) wins; when none matches the
    `default` decides: `'approve'`, `'reject'` (the default: fail closed) or another handler (for example a
    `ConsoleReviewHandler` for the calls the rules do not cover).

    A rule whose predicate raises rejects the call, and the reason names the rule and the error. The request's
    timeout applies to the fallback handler only (rules answer at once).

    ```python
    from toolweave import ApprovalRule, RuleBasedReviewHandler

    handler = RuleBasedReviewHandler([
        ApprovalRule.allow('read_*'),
        ApprovalRule.deny('delete_*', when=lambda args: args.get('path', '').startswith('/etc'), reason='system file'),
        ApprovalRule.allow('delete_*'),
    ])
    ```
    """

    applies_timeout = True  # rules answer at once; `ask_handler` times the fallback

    def __init__(self, rules: Iterable[ApprovalRule], *,
                 default: Literal['approve', 'reject'] | ReviewHandler = 'reject') -> None:
        self.rules = tuple(rules)
        for index, rule in enumerate(self.rules):
            if not isinstance(rule, ApprovalRule):
                raise UserError(f'Rule at index {index} of RuleBasedReviewHandler must be an ApprovalRule, got '
                                f'{type(rule).__name__}: {rule!r}. Use ApprovalRule.allow(...) or '
                                'ApprovalRule.deny(...).')
        self._fallback: ReviewHandler | None = None
        if not isinstance(default, str):
            check_review_handler(default, 'RuleBasedReviewHandler(default=...)')
            self._fallback = default
        elif default not in ('approve', 'reject'):
            raise UserError(f"RuleBasedReviewHandler default must be 'approve', 'reject' or a ReviewHandler, got "
                             f'{default!r}.')
        self.default = default

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        for index, rule in enumerate(self.rules):
            try:
                matched = rule.matches(request)
            except Exception as exc:  # a broken predicate must not let the call through
                return ReviewDecision.reject(f'rule {index} ({rule.describe()}) failed: {type(exc).__name__}: {exc}')
            if matched:
                if rule.action == 'approve':
                    return ReviewDecision.approve()
                return ReviewDecision.reject(rule.reason or f'denied by rule {index} ({rule.describe()})')
        if self._fallback is not None:
            return await ask_handler(self._fallback, request)
        if self.default == 'approve':
            return ReviewDecision.approve()
        return ReviewDecision.reject('no approval rule matched')

    def __repr__(self) -> str:
        return f'RuleBasedReviewHandler({len(self.rules)} rules, default={self.default!r})'
