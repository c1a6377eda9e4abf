"""Approvals for served tools, asked of the person at the MCP client through elicitation.

A tool that requires approval (or a plan step whose tool does) asks the run's `ReviewHandler`. When toolweave
serves tools over MCP, that reviewer is the client, asked with a one-field form ("approve: yes/no"):

- on a connection with the initialize handshake (protocol versions up to 2025-11-25) the question is an
  `elicitation/create` request sent while the call runs (`ElicitingReviewer`);
- on a 2026-07-28 connection the server may not send requests of its own, so the call is paused instead: it
  returns an `InputRequiredResult` carrying the questions, the client asks its user and repeats the call with
  the answers and the state token, and the paused call goes on where it stopped (`PausedCalls`);
- a client that declares no elicitation support cannot be asked: `FallbackReviewer` applies the configured
  policy, `'deny'` (the default) or `'allow'`.

A plan reviewed whole (`review_mode='whole_plan'`, as the gateway's plan tool is) is one question: the plan as text
and one yes/no field per gated step, all checked by default; declining the form rejects the plan.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeAlias, TypeVar

import anyio
import anyio.abc

from toolweave.approval import (
    PlanReviewDecision,
    PlanReviewRequest,
    ReviewDecision,
    ReviewRequest,
    use_review_handler,
)

__all__ = ('ApprovalFallback', 'ElicitingReviewer', 'FallbackReviewer', 'PausedCalls', 'Questions', 'can_elicit',
           'decision_of', 'elicitation_form', 'plan_decision_of', 'plan_form')

T = TypeVar('T')

logger = logging.getLogger('toolweave.mcp')

ApprovalFallback: TypeAlias = Literal['deny', 'allow']
"""What happens to a call that needs approval when the MCP client cannot be asked."""

_APPROVE = 'approve'
_SETTLE_SECONDS = 0.05
"""How long a paused call waits for sibling questions (parallel plan steps) before sending what it has."""


def can_elicit(capabilities: Any) -> bool:
    """Whether a client with these `ClientCapabilities` can answer a form elicitation."""
    elicitation = getattr(capabilities, 'elicitation', None)
    if elicitation is None:
        return False
    # `"elicitation": {}` (2025-06-18) means form mode; a client that lists only `url` cannot show a form.
    return elicitation.form is not None or elicitation.url is None


def elicitation_form(request: ReviewRequest) -> dict[str, Any]:
    """The `elicitation/create` params that ask the client's user about `request`."""
    return {
        'mode': 'form',
        'message': f'Allow this tool call?\n\n{request.description}',
        'requested_schema': {
            'type': 'object',
            'properties': {_APPROVE: {'type': 'boolean', 'title': 'Approve',
                                      'description': f'Run {request.tool_name or "the tool"} with these arguments'}},
            'required': [_APPROVE],
        },
    }


def plan_form(request: PlanReviewRequest) -> dict[str, Any]:
    """The `elicitation/create` params that ask about a whole plan: one checkbox per gated step, checked."""
    properties = {step.id: {'type': 'boolean', 'title': f'{step.id}: {step.tool}', 'default': True,
                            'description': step.line()} for step in request.gated}
    return {'mode': 'form', 'message': f'Allow this plan?\n\n{request.describe()}',
            'requested_schema': {'type': 'object', 'properties': properties, 'required': list(properties)}}


def plan_decision_of(request: PlanReviewRequest, result: Any) -> PlanReviewDecision:
    """The decision an `ElicitResult` about a plan stands for: an accepted form approves the steps left checked
    (an unchecked one fails, its dependents are skipped); a declined or dismissed form rejects the plan."""
    if result.action == 'cancel':
        return PlanReviewDecision.reject('dismissed in the MCP client')
    if result.action != 'accept':
        return PlanReviewDecision.reject('declined in the MCP client')
    content = result.content or {}
    return PlanReviewDecision({step.id: ReviewDecision.approve() if content.get(step.id) is True else
                               ReviewDecision.reject('declined in the MCP client') for step in request.gated})


def decision_of(result: Any) -> ReviewDecision:
    """The decision an `ElicitResult` stands for: only an accepted form with `approve: true` approves."""
    if result.action == 'accept' and (result.content or {}).get(_APPROVE) is True:
        return ReviewDecision.approve()
    if result.action == 'cancel':
        return ReviewDecision.reject('dismissed in the MCP client')
    return ReviewDecision.reject('declined in the MCP client')


class ElicitingReviewer:
    """Asks the client of one request with `elicitation/create` (connections with the initialize handshake)."""

    def __init__(self, session: Any, request_id: Any) -> None:
        self._session = session
        self._request_id = request_id

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        return decision_of(await self._ask(elicitation_form(request)))

    async def review_plan(self, request: PlanReviewRequest) -> PlanReviewDecision:
        return plan_decision_of(request, await self._ask(plan_form(request)))

    async def _ask(self, form: dict[str, Any]) -> Any:
        import mcp_types as types

        params = types.ElicitRequestFormParams.model_validate(form)
        return await self._session.elicit_form(params.message, params.requested_schema,
                                               related_request_id=self._request_id)


class FallbackReviewer:
    """The reviewer for clients that cannot be asked: the configured policy decides (one for every tool, or a
    function of the tool's name)."""

    def __init__(self, policy: ApprovalFallback | Callable[[str], ApprovalFallback]) -> None:
        self.policy = policy

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        policy = self.policy if isinstance(self.policy, str) else self.policy(request.tool_name)
        if policy == 'allow':
            return ReviewDecision.approve()
        return ReviewDecision.reject("it needs approval, and this MCP client cannot be asked: it does not support "
                                     "elicitation, and the server's approval fallback is 'deny'")

    async def review_plan(self, request: PlanReviewRequest) -> PlanReviewDecision:
        return PlanReviewDecision({step.id: await self.review(step.request()) for step in request.gated})


@dataclass(eq=False)
class _Question:
    form: dict[str, Any]
    """The elicitation form that asks it."""
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: Any = None
    """The client's answer: an `ElicitResult`, or something else that the reviewer turns into a rejection."""


@dataclass(frozen=True, slots=True)
class Questions:
    """What a paused call sends back instead of its result: the `InputRequiredResult` fields."""

    input_requests: dict[str, Any]
    request_state: str


@dataclass(eq=False)
class _Paused(Generic[T]):
    """One call running in the background while its questions travel to the client and back."""

    token: str
    tool_name: str
    unsent: dict[str, _Question] = field(default_factory=dict)
    sent: dict[str, _Question] = field(default_factory=dict)
    changed: anyio.Event = field(default_factory=anyio.Event)
    result: T | None = None
    delivered: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    count: int = 0

    def poke(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()


class _DeferredReviewer:
    """The reviewer inside a paused call: each question waits until the client's answer comes back."""

    def __init__(self, paused: _Paused[Any]) -> None:
        self._paused = paused

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        answer = await self._ask(elicitation_form(request))
        return decision_of(answer) if _is_elicit_result(answer) else _unusable(answer)

    async def review_plan(self, request: PlanReviewRequest) -> PlanReviewDecision:
        answer = await self._ask(plan_form(request))
        if _is_elicit_result(answer):
            return plan_decision_of(request, answer)
        return PlanReviewDecision.reject(_unusable(answer).reason or 'unusable answer')

    async def _ask(self, form: dict[str, Any]) -> Any:
        paused = self._paused
        paused.count += 1
        key = f'approval-{paused.count}'
        question = _Question(form)
        paused.unsent[key] = question
        paused.poke()
        try:
            await question.answered.wait()
        finally:  # answered, or given up on (the review timed out, the call was cancelled)
            paused.unsent.pop(key, None)
            paused.sent.pop(key, None)
        return question.answer


class PausedCalls(Generic[T]):
    """Calls that wait for the client's answers on 2026-07-28 connections.

    `start` runs a call in `tasks` (the server's task group, so it outlives the request that started it) under a
    reviewer that collects questions; `resume` hands a repeated call's answers to the paused call. Both return
    the call's result once it finishes, or the questions to send when it stops at one. The state token is 32
    random bytes that only maps to a call held in this process; a call nobody resumes ends on its own (each
    question's review timeout rejects it) and is forgotten `keep` seconds later.
    """

    def __init__(self, tasks: anyio.abc.TaskGroup, *, failed: Callable[[str], T], keep: float = 600.0) -> None:
        self._tasks = tasks
        self._failed = failed
        self._keep = keep
        self._paused: dict[str, _Paused[T]] = {}

    def __len__(self) -> int:
        return len(self._paused)

    async def start(self, tool_name: str, call: Callable[[], Awaitable[T]]) -> T | Questions:
        """Run `call`; its result, or the questions it stopped at."""
        paused: _Paused[T] = _Paused(secrets.token_urlsafe(32), tool_name)
        self._paused[paused.token] = paused
        self._tasks.start_soon(self._run, paused, call)
        return await self._next(paused)

    async def resume(self, token: str, tool_name: str, answers: dict[str, Any] | None) -> T | Questions | None:
        """The outcome of the paused call `token`, or `None` when no call of `tool_name` is waiting under it."""
        paused = self._paused.get(token)
        if paused is None or paused.tool_name != tool_name:
            return None
        for key, answer in (answers or {}).items():
            question = paused.sent.pop(key, None)
            if question is not None:
                question.answer = answer
                question.answered.set()
        # Questions the client left unanswered are asked again.
        paused.unsent.update(paused.sent)
        paused.sent.clear()
        return await self._next(paused)

    async def _run(self, paused: _Paused[T], call: Callable[[], Awaitable[T]]) -> None:
        try:
            with paused.scope, use_review_handler(_DeferredReviewer(paused)):
                paused.result = await call()
        except Exception as exc:  # nothing must escape into the server's task group
            logger.warning('MCP call of %r stopped by %s: %s', paused.tool_name, type(exc).__name__, exc)
            paused.result = self._failed(f'{type(exc).__name__}: {exc}')
        if paused.result is None:  # the client cancelled the call
            paused.result = self._failed('The call was cancelled.')
        paused.poke()
        with anyio.move_on_after(self._keep):
            await paused.delivered.wait()
        self._paused.pop(paused.token, None)

    async def _next(self, paused: _Paused[T]) -> T | Questions:
        try:
            while paused.result is None:
                if paused.unsent:
                    await anyio.sleep(_SETTLE_SECONDS)  # let parallel steps reach their own questions
                    asking, paused.unsent = paused.unsent, {}
                    if asking and paused.result is None:
                        paused.sent.update(asking)
                        requests = {key: _elicit_request(question.form) for key, question in asking.items()}
                        return Questions(requests, paused.token)
                    continue
                await paused.changed.wait()
        except anyio.get_cancelled_exc_class():
            paused.scope.cancel()  # the client gave up on the call while it ran: stop it too
            raise
        paused.delivered.set()
        return paused.result


def _elicit_request(form: dict[str, Any]) -> Any:
    import mcp_types as types

    return types.ElicitRequest(params=types.ElicitRequestFormParams.model_validate(form))


def _is_elicit_result(answer: Any) -> bool:
    import mcp_types as types

    return isinstance(answer, types.ElicitResult)


def _unusable(answer: Any) -> ReviewDecision:
    return ReviewDecision.reject(f'the MCP client answered with a {type(answer).__name__}, not an elicitation result')

