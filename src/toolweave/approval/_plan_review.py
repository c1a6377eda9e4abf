"""Whole-plan review: every reviewer installed around a plan decides its gated steps once, before any step runs.

Reviewers combine as they do for one call: the innermost first, the stricter decision wins. A reviewer that
rejects the plan ends the review (nothing runs); a step rejected or parked by one reviewer is not put to the
next; an edit is what the next reviewer sees. Each step's decision is logged and recorded in the run's
`ApprovalLog` like a decision on one call.
"""

from __future__ import annotations

from dataclasses import replace
from time import perf_counter

from toolweave.approval._gate import current_review_handlers, deciding, record_decision
from toolweave.approval._handlers import ReviewHandler, ask_plan
from toolweave.approval._model import PlanReviewDecision, PlanReviewRequest, ReviewDecision
from toolweave.exceptions import ApprovalPending, ToolConfigurationError

__all__ = ('review_plan',)


async def review_plan(request: PlanReviewRequest) -> PlanReviewDecision:
    """Ask the reviewers installed around the caller about `request`. The answer names every gated step: in
    `steps` (approve, reject, or edit with the final arguments) or in `parked`; or it rejects the plan.

    Raises:
        ToolConfigurationError: the plan has gated steps and no reviewer is installed.
    """
    if not request.gated:
        return PlanReviewDecision.approve_all()
    handlers = deciding(current_review_handlers(), request)
    if not handlers:
        names = ', '.join(sorted({step.tool for step in request.gated}))
        raise ToolConfigurationError(
            f'The plan has steps that require approval ({names}) but no ReviewHandler is configured. Pass '
            '`review_handler=` to the Agent, `run_plan` or plan tool, or wrap the call in `with '
            'use_review_handler(handler):`.')
    decided: dict[str, ReviewDecision] = {}
    parked: dict[str, str] = {}
    for handler in reversed(handlers):
        open_steps = {step.id for step in request.gated if step.id not in parked and (
            step.id not in decided or decided[step.id].kind != 'exit_early')}
        if not open_steps:
            break
        asked = replace(request, steps=tuple(replace(step, gated=step.gated and step.id in open_steps)
                                             for step in request.steps))
        start = perf_counter()
        try:
            answer = await ask_plan(handler, asked)
        except ApprovalPending as exc:
            answer = PlanReviewDecision(parked=dict.fromkeys((step.id for step in asked.gated), exc.reason))
        seconds = perf_counter() - start
        if answer.rejected is not None:
            for step in asked.gated:
                record_decision(_name(handler), step.request(request.context), ReviewDecision.reject(answer.rejected),
                                seconds)
            return PlanReviewDecision.reject(answer.rejected)
        request = _merge(handler, asked, answer, decided, parked, seconds)
    return PlanReviewDecision({step_id: decided[step_id] for step_id in decided if step_id not in parked}, parked)


def _merge(handler: ReviewHandler, request: PlanReviewRequest, answer: PlanReviewDecision,
           decided: dict[str, ReviewDecision], parked: dict[str, str], seconds: float) -> PlanReviewRequest:
    """Fold one reviewer's answer into the decisions so far; the request the next reviewer sees (edits applied)."""
    steps = list(request.steps)
    for position, step in enumerate(steps):
        if not step.gated:
            continue
        outcome = answer.for_step(step.id)
        if outcome is None:
            parked[step.id] = answer.parked[step.id]
            continue
        record_decision(_name(handler), step.request(request.context), outcome, seconds)
        if outcome.kind == 'exit_early':
            decided[step.id] = outcome
        elif outcome.kind == 'edit':
            decided[step.id] = outcome
            steps[position] = replace(step, arguments=outcome.revised)
        else:
            decided.setdefault(step.id, outcome)
    return replace(request, steps=tuple(steps))


def _name(handler: ReviewHandler) -> str:
    return type(handler).__name__
