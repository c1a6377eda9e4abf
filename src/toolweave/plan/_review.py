"""Reviewing a plan's gated calls: the kernel extension that asks before each one starts, and whole-plan review.

`Review` (a kernel extension) admits each call of a gated tool: under the decision made ahead for it (a whole-plan
review, a decision stored while the step was parked), or by asking the installed reviewers *before* the step
counts as started. The step is `reviewing` meanwhile, and a durable run has that on record before anyone is
asked: a process that dies while a person decides leaves a step that is asked again, never one whose tool may
have run. The decision then answers the gate inside `Tool.call` (`preset_review`), so the call runs without
asking again, while any other gated call reached inside it (a pipeline's step, a chained tool) is asked as usual:
an approval covers exactly the call the reviewer saw, with the arguments shown. An edit is what the call runs
with, and what the step's record shows.

Whole-plan review (`review_ahead`): the request a reviewer sees, and its answer applied to the plan. Edits are
applied to the plan itself (a reviewer edits arguments as written, references allowed), which is then validated
again; the decisions become the `Review` extension's decisions made ahead, so no approved step asks again when it
runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from toolweave.approval import (
    PlannedStep,
    PlanReviewDecision,
    PlanReviewRequest,
    ReviewDecision,
    decide_call,
    describe_arguments,
    preset_review,
    review_options,
    review_plan,
)
from toolweave.exceptions import PlanValidationError
from toolweave.plan._kernel import Call, Extension, Run, StepFailed, StepParked
from toolweave.plan._model import Plan, PlanSteps
from toolweave.plan._options import DEFAULT_MAX_STEPS
from toolweave.plan._parse import Parsed, Problems, parse_lenient
from toolweave.plan._record import ItemRecord, StepRecord
from toolweave.plan._validate import Prepared, as_toolset, each_tool, prepare
from toolweave.tools import Tool, ToolCallContext, Toolset, ToolsetItem

if TYPE_CHECKING:
    from toolweave.tools import ToolResult

__all__ = ('Decided', 'Review', 'apply_review', 'plan_review_request', 'review_ahead', 'review_request', 'reviewing')


@dataclass(slots=True)
class Decided:
    """What a whole-plan review (or a stored run) says about a plan's gated steps before they run."""

    decisions: dict[int, ReviewDecision] = field(default_factory=dict[int, ReviewDecision])
    """Per step position: the decision its calls run under (every element's, for a `for_each` step)."""
    park: dict[int, tuple[str, Mapping[str, Any]]] = field(default_factory=dict[int, tuple[str, Mapping[str, Any]]])
    """Steps to park when they are ready, with why."""
    rejected: str | None = None
    """Why the reviewer rejected the whole plan: then nothing runs."""


class Review(Extension):
    """Admits each call of a gated tool (see the module docstring): `decisions` are made ahead per step,
    `item_decisions` per element of a `for_each` step (a decision stored for the element that parked). A decision
    made ahead applies to any step it is for, gated or not: a person may decide a step that parked for another
    reason (unknown after a crash)."""

    def __init__(self, decisions: Mapping[int, ReviewDecision] | None = None,
                 item_decisions: Mapping[tuple[int, int], ReviewDecision] | None = None,
                 item_parks: Mapping[tuple[int, int], tuple[str, Mapping[str, Any]]] | None = None) -> None:
        self.decisions = decisions or {}
        self.item_decisions = item_decisions or {}
        self.item_parks = item_parks or {}
        """Elements to park when reached (unknown after a crash), with why."""
        self.admitted: dict[tuple[int, int], tuple[ReviewDecision, bool]] = {}
        """Calls admitted and not yet made: their decision, and whether it was made ahead (then it is recorded
        as it answers the call)."""
        self.gated: dict[int, bool] = {}
        """Per tool (by id), whether its calls are reviewed."""
        self.run: Run | None = None

    def attach(self, run: Run) -> None:
        self.run = run

    def is_gated(self, tool: Tool) -> bool:
        gated = self.gated.get(id(tool))
        if gated is None:
            gated = self.gated[id(tool)] = tool.requires_approval
        return gated

    async def admit(self, record: StepRecord, item: ItemRecord | None, arguments: Any) -> Any:
        run = self.run
        assert run is not None
        tool = run.tools[record.index]
        assert tool is not None  # only select steps have none, and they call nothing
        key = (record.index, -1 if item is None else item.index)
        if self.item_parks and key in self.item_parks:
            reason, detail = self.item_parks[key]
            raise StepParked(reason, detail)
        decision = self.item_decisions.get(key) if item is not None and self.item_decisions else None
        if decision is None and self.decisions:
            decision = self.decisions.get(record.index)
        ahead = decision is not None
        if decision is None:
            if not self.is_gated(tool):
                return arguments
            run.transition(record.index, 'reviewing', item=item)
            await run.sync()  # on record before anyone is asked: a crash now leaves a step to ask again
            decision = await decide_call(tool, arguments, run.context)
        if decision.kind == 'exit_early':
            reason = f' ({decision.reason})' if decision.reason else ''
            raise StepFailed(f'Rejected by reviewer: {describe_arguments(arguments)}{reason}')
        if decision.kind == 'edit':
            arguments = decision.revised
            run.edited(record, item, arguments)
        self.admitted[key] = (decision, ahead)
        return arguments

    async def call(self, record: StepRecord, item: ItemRecord | None, arguments: Any, proceed: Call) -> ToolResult:
        admitted = self.admitted.pop((record.index, -1 if item is None else item.index), None)
        if admitted is None:
            return await proceed(arguments)
        decision, ahead = admitted
        assert self.run is not None
        tool = self.run.tools[record.index]
        assert tool is not None
        with preset_review(tool.name, decision, record=ahead, arguments=arguments):
            return await proceed(arguments)


def reviewing(prepared: Prepared, decided: Decided | None = None,
              item_decisions: Mapping[tuple[int, int], ReviewDecision] | None = None,
              item_parks: Mapping[tuple[int, int], tuple[str, Mapping[str, Any]]] | None = None) -> list[Extension]:
    """The `Review` extension a run of `prepared` needs: when it calls a gated tool or has decisions made ahead
    (none otherwise: a plan with no gated step pays nothing)."""
    decisions = decided.decisions if decided is not None else {}
    if decisions or item_decisions or item_parks:
        return [Review(decisions, item_decisions, item_parks)]
    if any(tool.requires_approval for tool in each_tool(prepared.tools)):
        return [Review()]
    return []


async def review_ahead(prepared: Prepared, tools: Toolset, context: ToolCallContext, *, max_steps: int,
                       refused: frozenset[str] = frozenset()) -> tuple[Prepared, Decided | None]:
    """Put the whole plan to the installed reviewers (when it has gated steps): the plan as they left it, and
    their decisions (`None` when it has no gated step)."""
    request = plan_review_request(prepared, context)
    if not request.gated:
        return prepared, None
    decision = await review_plan(request)
    if decision.rejected is not None:
        return prepared, Decided(rejected=decision.rejected)
    prepared, decisions, parked = apply_review(prepared, decision, tools, max_steps=max_steps, refused=refused)
    park: dict[int, tuple[str, Mapping[str, Any]]] = {
        index: (f'Waiting for approval: {reason}', {'tool': prepared.plan.steps[index].tool, 'review': 'whole_plan'})
        for index, reason in parked.items()}
    return prepared, Decided(decisions, park)


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
    again, problems = prepare(Parsed(replace(prepared.plan, steps=PlanSteps(steps)), Problems()), tools,
                              max_steps=max_steps, max_items=prepared.max_items, extra_refused=refused)
    if again is None:
        raise PlanValidationError([f"after the reviewer's edits: {problem}" for problem in problems.messages()])
    return again, decisions, parked
