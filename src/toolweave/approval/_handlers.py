"""Review handlers: the protocol, and the handlers that decide without a person (auto-approve, a callback, rules).
The console handler, for a person at a terminal, is in `_console.py`."""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import Any, Literal, Protocol, runtime_checkable

import anyio
import anyio.to_thread

from toolweave._json import loads_object
from toolweave.approval._model import PlannedStep, PlanReviewDecision, PlanReviewRequest, ReviewDecision, ReviewRequest
from toolweave.exceptions import ApprovalPending, ControlFlowSignal, ToolConfigurationError, UserError
from toolweave.tools._callables import is_async_callable

__all__ = (
    'ApprovalRule',
    'AutoApproveHandler',
    'CallbackReviewHandler',
    'PlanReviewCallback',
    'PlanReviewHandler',
    'ReviewHandler',
    'RuleBasedReviewHandler',
    'ask_handler',
    'ask_plan',
    'check_review_handler',
    'request_arguments',
)

ReviewCallback = Callable[[ReviewRequest], 'ReviewDecision | bool | Awaitable[ReviewDecision | bool]']
PlanReviewCallback = Callable[[PlanReviewRequest],
                              'PlanReviewDecision | bool | Awaitable[PlanReviewDecision | bool]']
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


@runtime_checkable
class PlanReviewHandler(Protocol):
    """A review handler that can also decide a whole plan at once (`review_mode='whole_plan'`): every step with
    its arguments as written, its dependencies, and which steps need approval. A handler without `review_plan` is
    asked about each gated step in turn instead (`ReviewRequest.timing` is then `'before_execution'`)."""

    async def review(self, request: ReviewRequest) -> ReviewDecision: ...

    async def review_plan(self, request: PlanReviewRequest) -> PlanReviewDecision: ...


class AutoApproveHandler:
    """Approves everything (tests, trusted batch runs). Installed inside another reviewer's block it approves only
    its own share: the stricter decision wins (see `use_review_handler`)."""

    applies_timeout = True  # it answers at once

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        return ReviewDecision.approve()

    async def review_plan(self, request: PlanReviewRequest) -> PlanReviewDecision:
        return PlanReviewDecision.approve_all()

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


async def ask_plan(handler: ReviewHandler, request: PlanReviewRequest) -> PlanReviewDecision:
    """One handler's answer to a whole plan: its `review_plan` under the plan's timeout, or, for a handler without
    one, its `review` of each gated step in turn. A handler that cannot answer now (`ApprovalPending`) parks the
    steps it was asked about; one that raises anything else rejects them (fail closed)."""
    if isinstance(handler, PlanReviewHandler):
        try:
            return await _plan_answer(handler, request)
        except (ApprovalPending, ControlFlowSignal, ToolConfigurationError):
            raise
        except Exception as exc:
            return PlanReviewDecision(otherwise=ReviewDecision.reject(
                f'review handler failed: {type(exc).__name__}: {exc}'))
    steps: dict[str, ReviewDecision] = {}
    parked: dict[str, str] = {}
    for step in request.gated:
        try:
            steps[step.id] = await ask_handler(handler, step.request(request.context))
        except ApprovalPending as exc:
            parked[step.id] = exc.reason
        except (ControlFlowSignal, ToolConfigurationError):
            raise
        except Exception as exc:
            steps[step.id] = ReviewDecision.reject(f'review handler failed: {type(exc).__name__}: {exc}')
    return PlanReviewDecision(steps, parked)


async def _plan_answer(handler: PlanReviewHandler, request: PlanReviewRequest) -> PlanReviewDecision:
    timeout = request.timeout
    if timeout is None or getattr(handler, 'applies_timeout', False) is True:
        answer: object = await handler.review_plan(request)
    else:
        with anyio.move_on_after(timeout) as scope:
            answer = await handler.review_plan(request)
        if scope.cancelled_caught:
            return plan_timed_out(request.gated)
    if not isinstance(answer, PlanReviewDecision):
        raise ToolConfigurationError(
            f'Review handler {type(handler).__name__} returned {answer!r} from `review_plan`. It must return a '
            'PlanReviewDecision: PlanReviewDecision.approve_all(), .decide(...) or .reject(reason).')
    return answer


def plan_timed_out(steps: Iterable[PlannedStep]) -> PlanReviewDecision:
    """The decision for gated steps nobody decided in time: each step's own on-timeout action."""
    decisions = {}
    for step in steps:
        decisions[step.id] = ReviewDecision.on_timeout(step.request())
    return PlanReviewDecision(decisions)


class CallbackReviewHandler:
    """Asks a function: an `async def` (awaited) or a plain function (run in a worker thread, so a blocking call
    such as a web request does not stall the event loop). It returns a `ReviewDecision`, or `True` to approve
    and `False` to reject.

    For whole-plan reviews, `on_plan` is asked instead, once per plan, with a `PlanReviewRequest`; it returns a
    `PlanReviewDecision`, or `True` (approve all) / `False` (reject the plan). Without `on_plan`, `callback` is asked
    about each gated step of the plan in turn.

    ```python
    from toolweave import CallbackReviewHandler, ReviewDecision

    async def reviewer(request):
        return ReviewDecision.reject('read-only today') if request.tool_name.startswith('delete') else True

    handler = CallbackReviewHandler(reviewer)
    ```
    """

    def __init__(self, callback: ReviewCallback, *, on_plan: PlanReviewCallback | None = None) -> None:
        if not callable(callback):
            raise UserError(f'CallbackReviewHandler needs a callable, got {type(callback).__name__}: {callback!r}.')
        if on_plan is not None and not callable(on_plan):
            raise UserError(f'CallbackReviewHandler(on_plan=...) needs a callable, got {type(on_plan).__name__}: '
                            f'{on_plan!r}.')
        self._callback = callback
        self._is_async = is_async_callable(callback)
        self._on_plan = on_plan

    async def review_plan(self, request: PlanReviewRequest) -> PlanReviewDecision:
        if self._on_plan is None:
            return await ask_plan(_PerStep(self), request)
        answer = await _call(self._on_plan, request)
        if isinstance(answer, bool):
            return PlanReviewDecision.approve_all() if answer else PlanReviewDecision.reject()
        if isinstance(answer, PlanReviewDecision):
            return answer
        name = getattr(self._on_plan, '__qualname__', repr(self._on_plan))
        raise ToolConfigurationError(
            f'Plan review callback {name} returned {answer!r}. Return a PlanReviewDecision '
            '(PlanReviewDecision.approve_all(), .decide(...), .reject(reason)) or a bool.')

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        answer = await _call(self._callback, request)
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


async def _call(callback: Callable[[Any], Any], request: Any) -> Any:
    """Call a review callback: awaited when async, else in a worker thread (its result awaited if it is one)."""
    if is_async_callable(callback):
        return await callback(request)
    answer = await anyio.to_thread.run_sync(callback, request)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer


class _PerStep:
    """A handler seen without its `review_plan`: asked about each gated step of a plan in turn."""

    def __init__(self, handler: ReviewHandler) -> None:
        self.handler = handler
        self.applies_timeout = getattr(handler, 'applies_timeout', False)

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        return await self.handler.review(request)


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
        decision = self._by_rules(request)
        if decision is not None:
            return decision
        if self._fallback is not None:
            return await ask_handler(self._fallback, request)
        if self.default == 'approve':
            return ReviewDecision.approve()
        return ReviewDecision.reject('no approval rule matched')

    async def review_plan(self, request: PlanReviewRequest) -> PlanReviewDecision:
        """The rules decide each gated step (arguments as written: a reference is the text `"$ref:..."`); the steps
        no rule matches go to the fallback handler together, as one plan, or get the default decision."""
        decided: dict[str, ReviewDecision] = {}
        unmatched: list[PlannedStep] = []
        for step in request.gated:
            decision = self._by_rules(step.request(request.context))
            if decision is None:
                unmatched.append(step)
            else:
                decided[step.id] = decision
        if not unmatched:
            return PlanReviewDecision(decided)
        if self._fallback is None:
            rest = ReviewDecision.approve() if self.default == 'approve' else ReviewDecision.reject(
                'no approval rule matched')
            decided.update(dict.fromkeys((step.id for step in unmatched), rest))
            return PlanReviewDecision(decided)
        ids = {step.id for step in unmatched}
        remaining = PlanReviewRequest(tuple(replace(step, gated=step.id in ids) for step in request.steps),
                                      request.goal, request.context)
        answer = await ask_plan(self._fallback, remaining)
        if answer.rejected is not None:
            return answer
        for step_id in ids:
            outcome = answer.for_step(step_id)
            if outcome is not None:
                decided[step_id] = outcome
        return PlanReviewDecision(decided, {k: v for k, v in answer.parked.items() if k in ids})

    def _by_rules(self, request: ReviewRequest) -> ReviewDecision | None:
        for index, rule in enumerate(self.rules):
            try:
                matched = rule.matches(request)
            except Exception as exc:  # a broken predicate must not let the call through
                return ReviewDecision.reject(f'rule {index} ({rule.describe()}) failed: {type(exc).__name__}: {exc}')
            if matched:
                if rule.action == 'approve':
                    return ReviewDecision.approve()
                return ReviewDecision.reject(rule.reason or f'denied by rule {index} ({rule.describe()})')
        return None

    def __repr__(self) -> str:
        return f'RuleBasedReviewHandler({len(self.rules)} rules, default={self.default!r})'
