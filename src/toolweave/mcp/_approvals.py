"""Approvals for served tools, asked of the person at the MCP client through elicitation.

A tool that requires approval (or a plan step whose tool does) asks the run's `ReviewHandler`. When toolweave
serves tools over MCP, that reviewer is the client, asked with a one-field form ("approve: yes/no"):

- `ExchangeReviewer` asks through the request's `Exchange` (see `_relay`): an `elicitation/create` request sent
  while the call runs on connections with the initialize handshake, a question in an `InputRequiredResult` on
  2026-07-28 connections; a question left unanswered until the exchange's deadline is a rejection;
- a client that declares no elicitation support cannot be asked: `FallbackReviewer` applies the configured
  policy, `'deny'` (the default) or `'allow'`.

A plan reviewed whole (`review_mode='whole_plan'`, as the gateway's plan tool is) is one question: the plan as text
and one yes/no field per gated step, all checked by default; declining the form rejects the plan.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from toolweave.approval import PlanReviewDecision, PlanReviewRequest, ReviewDecision, ReviewRequest

if TYPE_CHECKING:
    from toolweave.mcp._relay import Exchange

__all__ = ('ApprovalFallback', 'ExchangeReviewer', 'FallbackReviewer', 'can_elicit', 'decision_of',
           'elicitation_form', 'plan_decision_of', 'plan_form')

ApprovalFallback: TypeAlias = Literal['deny', 'allow']
"""What happens to a call that needs approval when the MCP client cannot be asked."""

_APPROVE = 'approve'


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


class ExchangeReviewer:
    """Asks the client of one request, through its `Exchange`."""

    def __init__(self, exchange: Exchange) -> None:
        self._exchange = exchange

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        answer = await self._exchange.ask(_elicit_request(elicitation_form(request)))
        return decision_of(answer) if _is_elicit_result(answer) else _unusable(answer)

    async def review_plan(self, request: PlanReviewRequest) -> PlanReviewDecision:
        answer = await self._exchange.ask(_elicit_request(plan_form(request)))
        if _is_elicit_result(answer):
            return plan_decision_of(request, answer)
        return PlanReviewDecision.reject(_unusable(answer).reason or 'unusable answer')


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


def _elicit_request(form: dict[str, Any]) -> Any:
    import mcp_types as types

    return types.ElicitRequest(params=types.ElicitRequestFormParams.model_validate(form))


def _is_elicit_result(answer: Any) -> bool:
    import mcp_types as types

    return isinstance(answer, types.ElicitResult)


def _unusable(answer: Any) -> ReviewDecision:
    message = getattr(answer, 'message', None)
    if isinstance(message, str):  # an `ErrorData`: the client could not be asked, or did not answer in time
        return ReviewDecision.reject(message.rstrip('.'))
    return ReviewDecision.reject(f'the MCP client answered with a {type(answer).__name__}, not an elicitation result')

