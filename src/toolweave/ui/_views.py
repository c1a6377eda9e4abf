"""What the pages show, as JSON data: a run (its plan as a graph, each step's journal, the critical path) and the
inbox (the decisions waiting, a whole-plan review as one entry).

Everything here is data for the browser, which renders every string as text: a step id, an argument, an output or
an error is never markup.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from toolweave.plan.durable import StoredRun, Transition
from toolweave.ui._reads import InboxEntry

__all__ = ('MAX_TEXT', 'dependencies', 'inbox_view', 'run_view')

MAX_TEXT = 20_000
"""Characters of an output, a value or an error a page shows; the rest is cut (the store keeps it all)."""
_REF = re.compile(r'\$ref:([A-Za-z0-9_-]{1,64})')
_REF_OBJECT = re.compile(r'"\$ref":\s*"([A-Za-z0-9_-]{1,64})')
_ENDED = frozenset({'succeeded', 'failed', 'skipped', 'cancelled'})


def dependencies(step: Mapping[str, Any], ids: Iterable[str]) -> list[str]:
    """The ids of the steps whose results `step` (as stored) reads: its `$ref`s, in arguments and forms."""
    known = set(ids)
    text = json.dumps([step.get('arguments'), step.get('forms')], ensure_ascii=False)
    found = dict.fromkeys(m.group(1) for pattern in (_REF, _REF_OBJECT) for m in pattern.finditer(text))
    return [step_id for step_id in found if step_id in known and step_id != step.get('id')]


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_TEXT:
        return text
    return f'{text[:MAX_TEXT]}… ({len(text) - MAX_TEXT:,} more characters)'


def _json(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _entry(t: Transition) -> dict[str, Any]:
    return {'status': t.status, 'at': t.at, 'error': _cut(t.error), 'detail': _json(t.detail), 'item': t.item}


def run_view(stored: StoredRun, *, schemas: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A run page's data: the header, each step (status, arguments, output, error, attempts, journal, elements),
    the `$ref` edges and the critical path."""
    info = stored.info
    plan = _json(info.plan) or {}
    steps_data: list[Mapping[str, Any]] = [s for s in plan.get('steps') or () if isinstance(s, Mapping)]
    ids = [str(s.get('id')) for s in steps_data]
    journal: dict[str, list[Transition]] = {step_id: [] for step_id in ids}
    for t in stored.transitions:
        journal.setdefault(t.step_id, []).append(t)
    steps = [_step_view(step, journal.get(str(step.get('id')), []), ids, schemas) for step in steps_data]
    edges = [[dep, step['id']] for step in steps for dep in step['depends_on']]
    critical = critical_path(steps)
    for step in steps:
        step['critical'] = step['id'] in critical
    return {
        'run_id': info.run_id, 'status': info.status, 'created_at': info.created_at, 'updated_at': info.updated_at,
        'owner': info.owner, 'heartbeat_at': info.heartbeat_at, 'options': _json(info.options),
        'goal': plan.get('goal'),
        'name': getattr(info, 'name', None), 'review': _json(info.review), 'steps': steps, 'edges': edges,
        'critical_path': [step_id for step_id in ids if step_id in critical],
    }


def _step_view(step: Mapping[str, Any], transitions: Sequence[Transition], ids: Sequence[str],
               schemas: Mapping[str, Any] | None) -> dict[str, Any]:
    own = [t for t in transitions if t.item is None]
    moves = [t for t in own if t.status not in ('ready', 'decided')]
    last = moves[-1] if moves else None
    decisions = [t for t in own if t.status == 'decided']
    decided_last = bool(own) and own[-1].status == 'decided'
    starts = [t for t in own if t.status == 'running']
    given = None
    for t in starts:
        detail = _json(t.detail)
        if isinstance(detail, Mapping) and 'arguments' in detail:
            given = detail['arguments']
    ended = last if last is not None and last.status in _ENDED else None
    items: dict[int, dict[str, Any]] = {}
    for t in transitions:
        if t.item is not None:
            element = items.setdefault(t.item, {'index': t.item, 'status': 'pending', 'error': None, 'output': None,
                                                'started_at': None, 'ended_at': None})
            element['status'] = t.status
            if t.status == 'running':
                element['started_at'] = t.at
            elif t.status in _ENDED:
                element['ended_at'] = t.at
                element['error'] = _cut(t.error)
                element['output'] = _cut(t.output)
    forms = step.get('forms') if isinstance(step.get('forms'), Mapping) else None
    detail = _json(last.detail) if last is not None else None
    tool = step.get('tool')
    return {
        'id': str(step.get('id')),
        'tool': tool,
        'description': step.get('description'),
        'arguments': step.get('arguments'),
        'given': given,
        'forms': forms,
        'for_each': forms.get('for_each') if forms else None,
        'status': 'decided' if decided_last and last is not None and last.status == 'parked' else (
            last.status if last is not None else 'pending'),
        'attempts': len(starts),
        'started_at': starts[-1].at if starts else None,
        'ended_at': ended.at if ended is not None else None,
        'output': _cut(ended.output) if ended is not None else None,
        'value': _cut(ended.value) if ended is not None else None,
        'error': _cut(last.error) if last is not None else None,
        'detail': detail,
        'condition_skipped': bool(isinstance(detail, Mapping) and detail.get('condition')),
        'decision': _decision(decisions[-1]) if decisions else None,
        'depends_on': dependencies(step, ids),
        'items': [items[i] for i in sorted(items)],
        'journal': [_entry(t) for t in transitions],
        'schema': (schemas or {}).get(tool) if isinstance(tool, str) else None,
    }


def _decision(t: Transition) -> dict[str, Any]:
    data = _json(t.detail)
    data = data if isinstance(data, Mapping) else {}
    return {'kind': data.get('kind'), 'reason': data.get('reason'), 'revised': data.get('revised'),
            'by': data.get('by'), 'via': data.get('via'), 'at': t.at}


def critical_path(steps: Sequence[Mapping[str, Any]]) -> set[str]:
    """The chain of steps that decided when the run ended: from the step that ended last, back through the
    dependency that ended last, to a step with none (steps that never ran are not on it)."""
    by_id = {step['id']: step for step in steps}
    ended = [step for step in steps if step['ended_at'] is not None and step['started_at'] is not None]
    if not ended:
        return set()
    current: Mapping[str, Any] | None = max(ended, key=lambda step: step['ended_at'])
    path: set[str] = set()
    while current is not None and current['id'] not in path:
        path.add(current['id'])
        before = [by_id[d] for d in current['depends_on'] if d in by_id and by_id[d]['ended_at'] is not None]
        current = max(before, key=lambda step: step['ended_at']) if before else None
    return path


def inbox_view(entries: Sequence[InboxEntry], plans: Mapping[str, str], total: int, *,
               schemas: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The inbox: one entry per parked step, except that the steps a whole-plan review parked in one run are one
    entry (the whole plan, one choice per gated step)."""
    items: list[dict[str, Any]] = []
    reviews: dict[str, dict[str, Any]] = {}
    parsed: dict[str, Mapping[str, Any]] = {}
    for entry in entries:
        plan = parsed.get(entry.run_id)
        if plan is None:
            data = _json(plans.get(entry.run_id))
            plan = parsed[entry.run_id] = data if isinstance(data, Mapping) else {}
        steps: list[Mapping[str, Any]] = [s for s in plan.get('steps') or () if isinstance(s, Mapping)]
        ids = [str(s.get('id')) for s in steps]
        if entry.detail.get('review') == 'whole_plan':
            review = reviews.get(entry.run_id)
            if review is None:
                review = reviews[entry.run_id] = {
                    'kind': 'plan', 'run_id': entry.run_id, 'run_status': entry.run_status, 'goal': plan.get('goal'),
                    'parked_at': entry.parked_at, 'gated': [],
                    'steps': [{'id': str(s.get('id')), 'tool': s.get('tool'), 'arguments': s.get('arguments'),
                               'description': s.get('description'), 'depends_on': dependencies(s, ids),
                               'for_each': (s.get('forms') or {}).get('for_each') if isinstance(
                                   s.get('forms'), Mapping) else None,
                               'schema': (schemas or {}).get(str(s.get('tool')))} for s in steps]}
                items.append(review)
            review['gated'].append(entry.step_id)
            continue
        items.append(_parked_step(entry, steps, ids, schemas))
    return {'items': items, 'total': total, 'shown': len(entries)}


def _parked_step(entry: InboxEntry, steps: Sequence[Mapping[str, Any]], ids: Sequence[str],
                 schemas: Mapping[str, Any] | None) -> dict[str, Any]:
    position = ids.index(entry.step_id) if entry.step_id in ids else -1
    step = steps[position] if position >= 0 else {}
    detail = entry.detail
    tool = detail.get('tool') or step.get('tool')
    sent = 'arguments' in detail and detail['arguments'] is not None
    return {
        'kind': 'step', 'run_id': entry.run_id, 'run_status': entry.run_status, 'step_id': entry.step_id,
        'tool': tool, 'arguments': detail['arguments'] if sent else step.get('arguments'),
        'arguments_as': 'sent' if sent else 'written',
        'description': step.get('description'), 'reason': entry.reason, 'parked_at': entry.parked_at,
        'deadline': detail.get('deadline_at'), 'unknown_after_crash': bool(detail.get('unknown_after_crash')),
        'position': position + 1, 'of': len(ids), 'depends_on': dependencies(step, ids) if step else [],
        'dependents': [s_id for s, s_id in zip(steps, ids, strict=True) if entry.step_id in dependencies(s, ids)],
        'schema': (schemas or {}).get(tool) if isinstance(tool, str) else None,
    }
