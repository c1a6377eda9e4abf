"""Review handlers beyond auto-approve and the console: a callback, and rules by tool name and arguments."""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

import anyio.to_thread

from toolweave.approval import ReviewDecision, ReviewHandler, ReviewRequest, ask_handler, check_review_handler
from toolweave.exceptions import ToolConfigurationError

__all__ = ('ApprovalRule', 'CallbackReviewHandler', 'RuleBasedReviewHandler', 'request_arguments')

ReviewCallback = Callable[[ReviewRequest], 'ReviewDecision | bool | Awaitable[ReviewDecision | bool]']
ArgumentPredicate = Callable[[Mapping[str, Any]], bool]


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
            raise TypeError(f'CallbackReviewHandler needs a callable, got {type(callback).__name__}: {callback!r}.')
        self._callback = callback
        self._is_async = inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(
            type(callback).__call__)

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
    try:
        loaded = json.loads(arguments)
    except ValueError:
        loaded = None
    return loaded if isinstance(loaded, dict) else {'input': arguments}


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
            raise ValueError(f'ApprovalRule tool pattern must be a non-empty glob string, got {self.tool!r}.')
        if self.action not in ('approve', 'reject'):
            raise ValueError(f"ApprovalRule action must be 'approve' or 'reject', got {self.action!r}.")
        if self.when is not None and not callable(self.when):
            raise ValueError(f'ApprovalRule `when` must be a function of the arguments, got {self.when!r}.')

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

    A rule whose predicate raises rejects the call, and the reason names the rule and the error.

    ```python
    from toolweave import ApprovalRule, RuleBasedReviewHandler

    handler = RuleBasedReviewHandler([
        ApprovalRule.allow('read_*'),
        ApprovalRule.deny('delete_*', when=lambda args: args.get('path', '').startswith('/etc'), reason='system file'),
        ApprovalRule.allow('delete_*'),
    ])
    ```
    """

    def __init__(self, rules: Iterable[ApprovalRule], *,
                 default: Literal['approve', 'reject'] | ReviewHandler = 'reject') -> None:
        self.rules = tuple(rules)
        for index, rule in enumerate(self.rules):
            if not isinstance(rule, ApprovalRule):
                raise TypeError(f'Rule at index {index} of RuleBasedReviewHandler must be an ApprovalRule, got '
                                f'{type(rule).__name__}: {rule!r}. Use ApprovalRule.allow(...) or '
                                'ApprovalRule.deny(...).')
        self._fallback: ReviewHandler | None = None
        if not isinstance(default, str):
            check_review_handler(default, 'RuleBasedReviewHandler(default=...)')
            self._fallback = default
        elif default not in ('approve', 'reject'):
            raise ValueError(f"RuleBasedReviewHandler default must be 'approve', 'reject' or a ReviewHandler, got "
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
