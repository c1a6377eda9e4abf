"""What a reviewer is asked (`ReviewRequest`) and what it answers (`ReviewDecision`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from toolweave._checks import check_number
from toolweave._json import compact
from toolweave.exceptions import ToolConfigurationError, UserError
from toolweave.tools import ToolArguments, ToolCallContext

__all__ = (
    'DEFAULT_ON_TIMEOUT',
    'DEFAULT_TIMEOUT',
    'DecisionKind',
    'OnTimeout',
    'PlanReviewDecision',
    'PlanReviewRequest',
    'PlannedStep',
    'ReviewDecision',
    'ReviewRequest',
    'ReviewTiming',
    'describe_arguments',
)

ReviewTiming = Literal['before_execution', 'during_execution', 'after_execution']
OnTimeout = Literal['continue', 'exit_early']
DecisionKind = Literal['continue', 'edit', 'exit_early']
DEFAULT_TIMEOUT = 300.0
"""Seconds a reviewer has to answer, unless the tool or the caller says otherwise."""
DEFAULT_ON_TIMEOUT: OnTimeout = 'exit_early'
"""A review nobody answered rejects the call: an unattended gate must not let a dangerous action through."""
_KINDS = ('continue', 'edit', 'exit_early')
_ON_TIMEOUT = ('continue', 'exit_early')


def describe_arguments(arguments: ToolArguments) -> str:
    """Arguments as the one-line text a reviewer reads: text as is, mappings as compact JSON."""
    if arguments is None or isinstance(arguments, str):
        return arguments or ''
    try:
        return compact(arguments)
    except (TypeError, ValueError):  # a circular structure
        return repr(arguments)


def check_options(where: str, timeout: object, on_timeout: object) -> None:
    """Raise `ToolConfigurationError` unless `timeout` is > 0 seconds or None and `on_timeout` is a known action."""
    check_number(timeout, f'Review timeout of {where!r}', exclusive=True, optional=True, unit='seconds',
                 error=ToolConfigurationError)
    if on_timeout not in _ON_TIMEOUT:
        raise ToolConfigurationError(f'on_timeout of {where!r} must be one of {_ON_TIMEOUT}, got {on_timeout!r}.')


@dataclass(frozen=True, slots=True)
class ReviewRequest:
    """What a reviewer is asked to decide."""

    tool_name: str
    """The name of the tool as the model called it (a prefixed or renamed tool's outer name)."""
    description: str
    """`<action>: <input>`, for example `delete_file: {"path":"/tmp/x"}`."""
    arguments: ToolArguments
    """The resolved arguments the tool is about to run with."""
    timing: ReviewTiming = 'during_execution'
    timeout: float | None = DEFAULT_TIMEOUT
    """Seconds to wait for a decision; `None` waits for ever."""
    on_timeout: OnTimeout = DEFAULT_ON_TIMEOUT
    """What happens when the reviewer does not answer in time."""
    context: ToolCallContext = field(default=ToolCallContext.EMPTY)

    def __post_init__(self) -> None:
        check_options(self.tool_name or 'a review', self.timeout, self.on_timeout)


@dataclass(frozen=True, slots=True)
class ReviewDecision:
    """A reviewer's answer: continue, edit (run with revised input) or exit early (reject).

    ```python
    from toolweave import ReviewDecision

    print(ReviewDecision.approve().kind, ReviewDecision.edit('safer input').revised, ReviewDecision.reject('no').kind)
    #> continue safer input exit_early
    ```
    """

    kind: DecisionKind
    revised: str | Mapping[str, Any] | None = None
    """The arguments to run with instead (only for `edit`)."""
    reason: str | None = None
    """Why the reviewer rejected the call; shown in the failure the model sees."""
    timed_out: bool = False
    """Whether this decision is the on-timeout action rather than a reviewer's answer."""

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise UserError(f'ReviewDecision kind must be one of {_KINDS}, got {self.kind!r}.')
        if self.kind == 'edit' and self.revised is None:
            raise UserError('ReviewDecision.edit needs the revised input, got None. Use ReviewDecision.approve() '
                            'to run with the original input.')

    @classmethod
    def approve(cls) -> ReviewDecision:
        """Run the tool with its arguments unchanged."""
        return cls('continue')

    @classmethod
    def edit(cls, revised: str | Mapping[str, Any]) -> ReviewDecision:
        """Run the tool with `revised` instead of its arguments (a mapping, a JSON text, or a tool's text input)."""
        return cls('edit', revised)

    @classmethod
    def reject(cls, reason: str | None = None) -> ReviewDecision:
        """Do not run the tool; the call fails with `Rejected by reviewer: <input>`."""
        return cls('exit_early', reason=reason)

    @classmethod
    def on_timeout(cls, request: ReviewRequest) -> ReviewDecision:
        """The decision a request's on-timeout action stands for."""
        if request.on_timeout == 'continue':
            return cls('continue', timed_out=True)
        waited = 'in time' if request.timeout is None else f'within {request.timeout:g} s'
        return cls('exit_early', reason=f'no decision {waited}', timed_out=True)


@dataclass(frozen=True, slots=True)
class PlannedStep:
    """One step of a plan as a whole-plan reviewer sees it, before anything runs."""

    id: str
    tool: str
    arguments: Any
    """The arguments as the plan wrote them: references shown as written (`"$ref:lookup.email"`), literals as
    given."""
    depends_on: tuple[str, ...] = ()
    """The ids of the steps whose results it reads."""
    gated: bool = False
    """Whether its tool requires approval (the steps to decide on); the others are shown for context."""
    description: str | None = None
    timeout: float | None = DEFAULT_TIMEOUT
    """The review timeout of its tool (see `requires_approval`)."""
    on_timeout: OnTimeout = DEFAULT_ON_TIMEOUT
    for_each: Any = None
    """The list the step runs its tool over, once per element, as the plan wrote it (`None`: one call). Approving
    such a step approves every element's call."""

    def request(self, context: ToolCallContext = ToolCallContext.EMPTY) -> ReviewRequest:
        """This step as a one-call review request (`timing='before_execution'`, arguments as written): what a
        reviewer without `review_plan` is asked, once per gated step."""
        return ReviewRequest(self.tool, f'{self.tool}: {describe_arguments(self.arguments)}', self.arguments,
                             'before_execution', self.timeout, self.on_timeout, context)

    def line(self) -> str:
        """`send (send_email) {"to":"$ref:lookup.email"} after lookup`: one line of a plan view."""
        after = f' after {", ".join(self.depends_on)}' if self.depends_on else ''
        each = f' for each of {describe_arguments(self.for_each)}' if self.for_each is not None else ''
        return f'{self.id} ({self.tool}) {describe_arguments(self.arguments)}{each}{after}'


@dataclass(frozen=True, slots=True)
class PlanReviewRequest:
    """A whole plan put to a reviewer once, after validation and before any step runs: every step, in plan order,
    with the gated ones to decide on.

    ```python
    from toolweave.approval import PlannedStep, PlanReviewRequest

    request = PlanReviewRequest((PlannedStep('who', 'find_user', {'name': 'Ada'}),
                                 PlannedStep('mail', 'send_email', {'to': '$ref:who.email'}, ('who',), gated=True)))
    print(request.describe())
    #> Plan of 2 steps; 1 needs approval (*):
    #>   who (find_user) {"name":"Ada"}
    #> * mail (send_email) {"to":"$ref:who.email"} after who
    ```
    """

    steps: tuple[PlannedStep, ...]
    goal: str | None = None
    context: ToolCallContext = field(default=ToolCallContext.EMPTY)

    @property
    def gated(self) -> tuple[PlannedStep, ...]:
        """The steps to decide on, in plan order."""
        return tuple(step for step in self.steps if step.gated)

    @property
    def timeout(self) -> float | None:
        """Seconds the reviewer has: the longest of the gated steps' review timeouts (`None` if one has none)."""
        timeouts = [step.timeout for step in self.gated]
        return None if not timeouts or None in timeouts else max(t for t in timeouts if t is not None)

    def step(self, step_id: str) -> PlannedStep:
        for step in self.steps:
            if step.id == step_id:
                return step
        raise KeyError(f'No step {step_id!r} in this plan. Steps: {", ".join(s.id for s in self.steps)}.')

    def describe(self) -> str:
        """The plan as text: one line per step, gated steps marked with `*`."""
        gated = len(self.gated)
        head = f'{self.goal}\n' if self.goal else ''
        lines = [f'{head}Plan of {len(self.steps)} step{"s" if len(self.steps) != 1 else ""}; {gated} '
                 f'need{"s" if gated == 1 else ""} approval (*):']
        lines.extend(f'{"*" if step.gated else " "} {step.line()}' for step in self.steps)
        return '\n'.join(lines)


@dataclass(frozen=True, slots=True)
class PlanReviewDecision:
    """A reviewer's answer to a whole plan: a decision per gated step (approve, edit, reject), steps left for
    later (parked until a decision arrives), or the whole plan rejected (nothing runs).

    ```python
    from toolweave.approval import PlanReviewDecision

    decision = PlanReviewDecision.decide(approve=['a'], deny={'b': 'too risky'}, park=['c'])
    for step in 'abcd':
        outcome = decision.for_step(step)
        print(step, 'parked' if outcome is None else (outcome.kind, outcome.reason))
    #> a ('continue', None)
    #> b ('exit_early', 'too risky')
    #> c parked
    #> d ('exit_early', 'not approved in the plan review')
    ```
    """

    steps: Mapping[str, ReviewDecision] = field(default_factory=dict[str, ReviewDecision])
    """Decisions by step id; an edit's `revised` is the step's new arguments, as written (references allowed)."""
    parked: Mapping[str, str] = field(default_factory=dict[str, str])
    """Steps decided later, with why: each parks when it is ready, and the rest of the plan runs on."""
    otherwise: ReviewDecision = field(default_factory=lambda: ReviewDecision.reject('not approved in the plan review'))
    """The decision for a gated step not named in `steps` or `parked`."""
    rejected: str | None = None
    """Why the whole plan was rejected: then no step runs."""

    @classmethod
    def approve_all(cls) -> PlanReviewDecision:
        """Run the plan as it is."""
        return cls(otherwise=ReviewDecision.approve())

    @classmethod
    def reject(cls, reason: str = 'rejected by the reviewer') -> PlanReviewDecision:
        """Run nothing: every step is cancelled."""
        return cls(rejected=reason)

    @classmethod
    def decide(cls, *, approve: Iterable[str] = (), edit: Mapping[str, Mapping[str, Any]] | None = None,
               deny: Iterable[str] | Mapping[str, str] = (), park: Iterable[str] | Mapping[str, str] = (),
               others: Literal['approve', 'reject'] = 'reject') -> PlanReviewDecision:
        """Some steps approved, some edited (new arguments), some denied (they fail and their dependents are
        skipped), some parked; gated steps not named are rejected (`others='reject'`) or approved."""
        steps: dict[str, ReviewDecision] = {step_id: ReviewDecision.approve() for step_id in approve}
        steps.update({step_id: ReviewDecision.edit(revised) for step_id, revised in (edit or {}).items()})
        denied = deny if isinstance(deny, Mapping) else dict.fromkeys(deny, 'denied in the plan review')
        steps.update({step_id: ReviewDecision.reject(reason) for step_id, reason in denied.items()})
        parked = dict(park) if isinstance(park, Mapping) else dict.fromkeys(park, 'left for later in the plan review')
        if others not in ('approve', 'reject'):
            raise UserError(f"PlanReviewDecision.decide(others=...) must be 'approve' or 'reject', got {others!r}.")
        otherwise = ReviewDecision.approve() if others == 'approve' else ReviewDecision.reject(
            'not approved in the plan review')
        return cls(steps, parked, otherwise)

    def for_step(self, step_id: str) -> ReviewDecision | None:
        """The decision for gated step `step_id`; `None` when it is parked."""
        if step_id in self.parked:
            return None
        return self.steps.get(step_id, self.otherwise)
