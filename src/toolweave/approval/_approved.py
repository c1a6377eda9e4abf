"""`ApprovedCalls`: a reviewer standing for a person who approved calls outside toolweave's own reviewers (a
framework's approval flow), bound to exactly what that person saw.

A framework asks its human before a tool call or a plan runs: pydantic-ai's deferred tools, OpenAI Agents'
`needs_approval`, LangGraph's `interrupt`. The human sees one call (a tool and its arguments) or one plan (every
step, arguments as written). Their yes covers that call, once, or that plan's whole-plan review, once (each of its
gated steps then runs under the decision made ahead, as any whole-plan review's steps do). Every other gated call
met while it runs (a gated tool inside a pipeline, a tool that calls another, a sub-agent's tools) was not seen:
`ApprovedCalls` abstains from it, so the other reviewers installed around it decide; with none, the call cannot
run (`ToolConfigurationError`, saying what to configure). A `fallback` reviewer, when given, decides those calls
instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolweave.approval._handlers import ReviewHandler, ask_handler, ask_plan, check_review_handler
from toolweave.approval._model import PlanReviewDecision, PlanReviewRequest, ReviewDecision, ReviewRequest
from toolweave.exceptions import ToolConfigurationError
from toolweave.tools import ToolArguments

__all__ = ('ApprovedCalls',)


def _normal(arguments: ToolArguments | Any) -> Any:
    """Arguments as data, so the same call written as JSON text or as a mapping compares equal."""
    if isinstance(arguments, str | bytes):
        try:
            return json.loads(arguments or '{}')
        except (ValueError, RecursionError):
            return arguments
    if arguments is None:
        return {}
    return dict(arguments) if isinstance(arguments, Mapping) else arguments


def _shown(plan: PlanReviewRequest) -> list[tuple[Any, ...]]:
    """What a person sees of a plan: every step's id, tool, arguments as written, dependencies and list."""
    return [(s.id, s.tool, s.arguments, s.depends_on, s.for_each, s.description) for s in plan.steps]


class ApprovedCalls:
    """A reviewer that approves the one call (`tool`, `arguments`) or the one plan (`plan`) a person approved
    elsewhere, once; it abstains from every other review unless it has a `fallback` to ask (see the module).

    Args:
        tool: the tool the person approved a call of (with `arguments`).
        arguments: the arguments they saw (JSON text or a mapping; compared as data).
        plan: the whole-plan review request they saw: the same plan, steps and arguments, when it runs.
        fallback: decides the calls and plans the person did not see.
        where: what to configure when nothing decides an unseen call: the adapter's name (`'PlanToolset'`).
    """

    applies_timeout = True  # it answers at once

    def __init__(self, *, tool: str | None = None, arguments: ToolArguments = None,
                 plan: PlanReviewRequest | None = None, fallback: ReviewHandler | None = None,
                 where: str = 'the Agent') -> None:
        check_review_handler(fallback, f'{where} (review_handler)')
        self.tool = tool
        self.arguments = _normal(arguments)
        self.plan = plan
        self.fallback = fallback
        self.where = where

    def approves(self, request: ReviewRequest | PlanReviewRequest) -> bool:
        """Whether `request` is what the person approved (and not answered yet)."""
        if isinstance(request, PlanReviewRequest):
            return self.plan is not None and _shown(request) == _shown(self.plan)
        return self.tool is not None and request.tool_name == self.tool and _normal(request.arguments) == (
            self.arguments)

    def abstains(self, request: ReviewRequest | PlanReviewRequest) -> bool:
        """Whether the other reviewers decide `request` without this one: it was not approved here, and there is no
        fallback to ask."""
        return self.fallback is None and not self.approves(request)

    def unreviewed(self, request: ReviewRequest | PlanReviewRequest) -> ToolConfigurationError:
        """The error for a review nothing decides: what was not seen, and what to configure."""
        what = (f'A plan with steps that require approval ({", ".join(s.id for s in request.gated)})'
                if isinstance(request, PlanReviewRequest) else f'Tool {request.tool_name!r}')
        return ToolConfigurationError(
            f'{what} asked for approval while it ran, where the framework could not ask before the call (a gated '
            f'tool inside a pipeline, a tool that calls another, a sub-agent). Pass `review_handler=` to '
            f'`{self.where}`, or gate the outer tool with `requires_approval` so the framework asks first.')

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        if self.approves(request):
            self.tool = None  # once: the same call made again was not approved again
            return ReviewDecision.approve()
        if self.fallback is None:
            raise self.unreviewed(request)
        return await ask_handler(self.fallback, request)

    async def review_plan(self, request: PlanReviewRequest) -> PlanReviewDecision:
        if self.approves(request):
            self.plan = None
            return PlanReviewDecision.approve_all()
        if self.fallback is None:
            raise self.unreviewed(request)
        return await ask_plan(self.fallback, request)

    def __repr__(self) -> str:
        shown = f'tool={self.tool!r}' if self.tool is not None else f'plan={len(self.plan.steps) if self.plan else 0}'
        return f'ApprovedCalls({shown}, where={self.where!r})'
