"""Whole-plan review for a validated plan: the request a reviewer sees, and its answer applied to the plan.

Edits are applied to the plan itself (a reviewer edits arguments as written, references allowed), which is then
validated again; the decisions are handed to the executor as decisions made ahead (`Ahead.decisions`), so no
approved step asks again when it runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from toolweave.approval import (
    PlannedStep,
    PlanReviewDecision,
    PlanReviewRequest,
    ReviewDecision,
    review_options,
    review_plan,
)
from toolweave.exceptions import PlanValidationError
from toolweave.plan._executor import Ahead
from toolweave.plan._model import Plan
from toolweave.plan._options import DEFAULT_MAX_STEPS
from toolweave.plan._parse import Parsed, Problems, parse_lenient
from toolweave.plan._validate import Prepared, as_toolset, prepare
from toolweave.tools import ToolCallContext, Toolset, ToolsetItem

__all__ = ('apply_review', 'plan_review_request', 'review_ahead', 'review_request')


async def review_ahead(prepared: Prepared, tools: Toolset, context: ToolCallContext, *, max_steps: int,
                       refused: frozenset[str] = frozenset()) -> tuple[Prepared, Ahead | None]:
    """Put the whole plan to the installed reviewers (when it has gated steps): the plan as they left it, and
    their decisions as the executor takes them."""
    request = plan_review_request(prepared, context)
    if not request.gated:
        return prepared, None
    decision = await review_plan(request)
    if decision.rejected is not None:
        return prepared, Ahead(rejected=decision.rejected)
    prepared, decisions, parked = apply_review(prepared, decision, tools, max_steps=max_steps, refused=refused)
    park = {index: (f'Waiting for approval: {reason}', {'tool': prepared.plan.steps[index].tool,
                                                         'review': 'whole_plan'})
            for index, reason in parked.items()}
    return prepared, Ahead(park=park, decisions=decisions)


def review_request(plan: Plan | str | bytes | Mapping[str, Any], tools: Toolset | Iterable[ToolsetItem], *,
                   context: Mapping[str, Any] | None = None) -> PlanReviewRequest:
    """What a whole-plan reviewer would be shown for `plan` (every step, arguments as written, dependencies, the
    gated ones marked), for code that asks its own person before running a plan (a framework's approval flow).

    ```python
    from toolweave import tool
    from toolweave.plan import review_request

    @tool(requires_approval=True)
    def delete(path: str) -> str:
        return 'deleted'

    request = review_request({'steps': [{'id': 'rm', 'tool': 'delete', 'arguments': {'path': '/tmp/x'}}]}, [delete])
    print([step.id for step in request.gated])
    #> ['rm']
    ```

    Raises:
        PlanValidationError: the plan cannot run (nothing to review).
    """
    parsed = Parsed(plan, Problems()) if isinstance(plan, Plan) else parse_lenient(plan)
    prepared, problems = prepare(parsed, as_toolset(tools), max_steps=DEFAULT_MAX_STEPS)
    if prepared is None:
        raise PlanValidationError(problems.messages())
    return plan_review_request(prepared, ToolCallContext.of(context))


def plan_review_request(prepared: Prepared, context: ToolCallContext) -> PlanReviewRequest:
    """Every step of the plan, with its arguments as written, its dependencies and whether it is gated."""
    steps = prepared.plan.steps
    planned = []
    for index, step in enumerate(steps):
        tool = prepared.tools[index]  # None for a select step, which calls nothing
        gated = tool is not None and tool.requires_approval
        timeout, on_timeout = review_options(tool) if tool is not None and gated else (None, 'exit_early')
        planned.append(PlannedStep(step.id, step.tool or 'select', step.arguments,
                                   tuple(steps[d].id for d in prepared.deps[index]), gated, step.description, timeout,
                                   on_timeout, step.for_each))
    return PlanReviewRequest(tuple(planned), prepared.plan.goal, context)


def apply_review(prepared: Prepared, decision: PlanReviewDecision, tools: Toolset, *, max_steps: int,
                 refused: frozenset[str] = frozenset()) -> tuple[Prepared, dict[int, ReviewDecision], dict[int, str]]:
    """The plan with the reviewer's edits (validated again), the decision for each gated step by position (an
    edited step is approved: its arguments are the edit), and the steps to park with why.

    Raises:
        PlanValidationError: an edit broke the plan (a reference to a step that does not exist, a cycle).
    """
    steps = list(prepared.plan.steps)
    decisions: dict[int, ReviewDecision] = {}
    parked: dict[int, str] = {}
    edited = False
    for index, step in enumerate(steps):
        tool = prepared.tools[index]
        if tool is None or not tool.requires_approval:
            continue
        outcome = decision.for_step(step.id)
        if outcome is None:
            parked[index] = decision.parked[step.id]
        elif outcome.kind == 'edit':
            steps[index] = replace(step, arguments=outcome.revised)
            decisions[index] = ReviewDecision('continue', reason='edited in the plan review')
            edited = True
        else:
            decisions[index] = outcome
    if not edited:
        return prepared, decisions, parked
    again, problems = prepare(Parsed(replace(prepared.plan, steps=tuple(steps)), Problems()), tools,
                              max_steps=max_steps, max_items=prepared.max_items, extra_refused=refused)
    if again is None:
        raise PlanValidationError([f"after the reviewer's edits: {problem}" for problem in problems.messages()])
    return again, decisions, parked
