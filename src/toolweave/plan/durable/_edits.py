"""A decision that edits a parked step's arguments, checked against the step's tool before it is stored: a typo
is refused then, while a person is there to fix it, instead of failing the step for good when the run resumes."""

from __future__ import annotations

import json
from typing import Any

from toolweave.approval import ReviewDecision
from toolweave.exceptions import DecisionError, UserError
from toolweave.plan._contracts import literal_problems
from toolweave.tools import ArgumentsError, Toolset, load_arguments

__all__ = ('check_edit',)


def check_edit(run_id: str, plan: str, step_id: str, decision: ReviewDecision, tools: Toolset) -> None:
    """Raise `DecisionError` when `decision` edits step `step_id` of the stored `plan` with arguments its tool
    refuses (the tool's own validation when it has one, as its call would say it; else its input schema's), per
    field. Arguments given as text that is not a JSON object are a text tool's input, left to the tool."""
    if decision.kind != 'edit':
        return
    step = next((s for s in json.loads(plan)['steps'] if s['id'] == step_id), None)
    if step is None or step.get('tool') is None:
        return  # not in the plan, or a select step: the store's own check says so
    tool = tools.find(step['tool'])
    if tool is None:
        raise UserError(f'The tools given to check the decision for step {step_id!r} of plan run {run_id!r} have no '
                        f'tool {step["tool"]!r} (they have {", ".join(tools.names) or "none"}). Pass the tools the '
                        'plan calls.')
    revised: Any = decision.revised
    try:
        arguments = load_arguments(revised, tool.name)
    except ArgumentsError:
        return
    problems = literal_problems(tool, arguments)
    if problems:
        listed = '\n'.join(f'  - {problem}' for problem in problems)
        raise DecisionError(f'The edited arguments for step {step_id!r} of plan run {run_id!r} do not fit tool '
                            f'{tool.name!r}; nothing was recorded:\n{listed}\nFix them and decide again.')
