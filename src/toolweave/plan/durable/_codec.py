"""What a durable run writes and reads back: the plan as JSON and its hash, a step's record as a transition, and
the state of every step folded from its transitions."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from toolweave.approval import ReviewDecision
from toolweave.exceptions import UserError
from toolweave.plan._kernel import Prefill
from toolweave.plan._model import Condition, Plan, PlanStep, StepForms, StepStatus
from toolweave.plan._record import ItemRecord, StepRecord, StepResult, parse_output
from toolweave.plan.durable._store import Transition

__all__ = (
    'Folded',
    'ItemState',
    'StepState',
    'decision_data',
    'decision_from',
    'dumps',
    'fold',
    'outcome_transition',
    'plan_data',
    'plan_from_data',
    'plan_hash',
    'transition_of',
)

IS_TEXT = 1
FROM_OUTPUT = 2


def dumps(data: Any) -> str:
    """Compact, key-sorted JSON: the same data always gives the same text."""
    return json.dumps(data, ensure_ascii=False, separators=(',', ':'), sort_keys=True, allow_nan=False)


def plan_data(plan: Plan) -> dict[str, Any]:
    return {
        'steps': [_step_data(step) for step in plan.steps],
        'output_steps': None if plan.output_steps is None else list(plan.output_steps),
        'goal': plan.goal,
        'dialect': plan.dialect,
    }


def _step_data(step: PlanStep) -> dict[str, Any]:
    data = {'id': step.id, 'tool': step.tool, 'arguments': step.arguments, 'description': step.description}
    forms = step.forms
    if forms is not None:  # only then, so that a plain plan keeps the text (and hash) it has always had
        when = forms.when
        data['forms'] = {'from': forms.source, 'select': forms.select, 'for_each': forms.for_each,
                         'when': None if when is None else {'from': when.source, 'select': when.select}}
    return data


def _step_from(data: Mapping[str, Any]) -> PlanStep:
    forms = data.get('forms')
    if forms is not None:
        when = forms['when']
        forms = StepForms(forms['from'], forms['select'], forms['for_each'],
                          None if when is None else Condition(when['from'], when['select']))
    return PlanStep(data['id'], data['tool'], data['arguments'], data.get('description'), forms)


def plan_from_data(data: Mapping[str, Any]) -> Plan:
    steps = tuple(_step_from(step) for step in data['steps'])
    output = data.get('output_steps')
    return Plan(steps, None if output is None else tuple(output), data.get('goal'), data.get('dialect', 'id'))


def plan_text(plan: Plan) -> str:
    """The plan as JSON text, or a `UserError` naming the step whose arguments are not JSON data."""
    try:
        return dumps(plan_data(plan))
    except (TypeError, ValueError) as exc:
        for step in plan.steps:
            try:
                dumps(step.arguments)
            except (TypeError, ValueError):
                raise UserError(f'Step {step.id!r} has arguments that are not JSON data ({exc}): a durable plan is '
                                'stored as JSON. Pass dicts, lists, strings, numbers, booleans and None.') from None
        raise UserError(f'The plan cannot be stored as JSON: {exc}.') from None


def plan_hash(text: str) -> str:
    return hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()


def decision_data(decision: ReviewDecision) -> dict[str, Any]:
    return {'kind': decision.kind, 'revised': decision.revised, 'reason': decision.reason}


def decision_from(data: Mapping[str, Any]) -> ReviewDecision:
    return ReviewDecision(data['kind'], data.get('revised'), data.get('reason'))


def transition_of(record: StepRecord, status: StepStatus, at: float, detail: Mapping[str, Any] | None,
                  item: ItemRecord | None = None) -> Transition:
    """The transition a record's (or its element's) move to `status` is stored as (a successful step keeps its
    output once: its value too only when it is not read from the output)."""
    assert status != 'pending'
    if item is not None:
        if status == 'succeeded':
            return Transition(record.id, status, at, None, item.output, dumps(item.value), 0, None, item.index)
        if status == 'running':
            detail = {**(detail or {}), 'arguments': item.arguments}
        return Transition(record.id, status, at, item.error, None, None, 0, None if not detail else dumps(detail),
                          item.index)
    if status == 'succeeded':
        if record.from_output:
            return Transition(record.id, status, at, None, record.output, None,
                              FROM_OUTPUT | (IS_TEXT if record.is_text else 0))
        return Transition(record.id, status, at, None, record.output, dumps(record.ref_value),
                          IS_TEXT if record.is_text else 0)
    return Transition(record.id, status, at, record.error, None, None, 0, None if not detail else dumps(detail))


def outcome_transition(step_id: str, result: StepResult, at: float, detail: Mapping[str, Any] | None) -> Transition:
    """The `succeeded` transition of a step whose outcome a person records (see `resolve_step`)."""
    flags = (FROM_OUTPUT if result.from_output else 0) | (IS_TEXT if result.is_text else 0)
    return Transition(step_id, 'succeeded', at, None, result.output,
                      None if result.from_output else dumps(result.ref_value), flags, dumps(detail) if detail else None)


def prefill(t: Transition) -> Prefill:
    """The record of a step that ended, rebuilt from its last transition."""
    if t.status != 'succeeded':
        assert t.status == 'failed' or t.status == 'skipped'
        condition = json.loads(t.detail).get('condition') if t.detail else None
        return Prefill(t.status, None, None, False, False, t.error, condition)
    output = t.output or ''
    if t.flags & FROM_OUTPUT:
        value, is_text = (output, True) if t.flags & IS_TEXT else parse_output(output)
        return Prefill('succeeded', output, value, is_text, True, None)
    return Prefill('succeeded', output, json.loads(t.value or 'null'), bool(t.flags & IS_TEXT), False, None)


@dataclass(slots=True)
class ItemState:
    """One element of a `for_each` step as its transitions leave it."""

    last: Transition
    """Its last transition."""
    arguments: Any = None
    """The arguments it was called with (from its last start)."""

    def record(self, index: int) -> ItemRecord:
        """The element's record as the run left it."""
        last = self.last
        if last.status == 'succeeded':
            value = json.loads(last.value) if last.value is not None else None
            return ItemRecord(index, self.arguments, 'succeeded', last.output, value, None, None, None)
        status = last.status
        assert status in ('failed', 'parked', 'running', 'cancelled', 'reviewing')
        return ItemRecord(index, self.arguments, status, None, None, last.error, None, None)


@dataclass(slots=True)
class StepState:
    """One step as its transitions leave it."""

    last: Transition | None = None
    """The last transition other than `ready` and `decided`."""
    decision: ReviewDecision | None = None
    """The last decision recorded for the step (it stays: a step run again after a crash is not asked again)."""
    decided_last: bool = False
    """Whether that decision came after the last other transition (a parked step with a decision to run under)."""
    arguments: Any = None
    """The arguments its last start ran with when a reviewer's edit changed them (`None`: the plan's own)."""
    started_at: float | None = None
    """When (wall clock) it last started."""
    parked_items: tuple[int, ...] = ()
    """The elements its last parking was about (a `for_each` step): what a decision after it decides."""
    items: dict[int, ItemState] = field(default_factory=dict[int, ItemState])
    """A `for_each` step's elements that the journal has seen, by index."""


@dataclass(slots=True)
class Folded:
    """Every step's state in a stored run, keyed by step id."""

    steps: dict[str, StepState] = field(default_factory=dict[str, StepState])

    def state(self, step_id: str) -> StepState:
        return self.steps.get(step_id) or StepState()


def fold(transitions: Sequence[Transition]) -> Folded:
    """Every step's state from its transitions, in the order they were appended. A decision stays the step's to
    run under after a `parked` transition marked `again` (the step parked once more by a resume that had not seen
    the decision yet); a `retry` makes a failed step one that has not ended."""
    folded = Folded()
    steps = folded.steps
    for t in transitions:
        state = steps.get(t.step_id)
        if state is None:
            state = steps[t.step_id] = StepState()
        if t.status == 'ready':
            continue
        if t.item is not None:
            item = state.items.get(t.item)
            if item is None:
                item = state.items[t.item] = ItemState(t)
            item.last = t
            if t.status == 'running' and t.detail:
                item.arguments = json.loads(t.detail).get('arguments')
            continue
        if t.status == 'decided':
            state.decision = decision_from(json.loads(t.detail or '{}'))
            state.decided_last = True
            continue
        if t.status == 'retry':
            state.last = None
            state.decided_last = False
            continue
        if t.status == 'parked':
            detail = json.loads(t.detail) if t.detail else {}
            if state.decided_last and detail.get('again'):
                continue
            state.parked_items = tuple(detail.get('items') or ())
        if t.status == 'running':
            state.arguments = json.loads(t.detail).get('arguments') if t.detail else None
            state.started_at = t.at
        state.last = t
        state.decided_last = False
    return folded


def when(at: float) -> str:
    """A stored time for people: `2026-05-20 14:03:07 UTC`."""
    return datetime.fromtimestamp(at, UTC).strftime('%Y-%m-%d %H:%M:%S UTC')
