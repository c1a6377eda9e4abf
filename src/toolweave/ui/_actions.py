"""What a person can do from the UI: decide a parked step (approve, edit, reject, resolve as done), resume a run,
cancel it, retry a failed step.

A decision goes through the store's atomic `decide` (the step must still be parked: two tabs cannot both decide
it) and records who made it and from where (`by`, `via` in the decision's stored detail, beside its time). An
edit is checked first by the tool, when the UI knows the tools (`--tools`): its own validation when it has one
(what its call would say), else its input schema.

Resolve as done, retry and cancel are the library's own operations (`resolve_step`, `retry_step`, `cancel_run`);
resume needs the tools (`--tools`), and `capabilities` tells the page whether it has them.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from toolweave.approval import PlanReviewDecision, PlanReviewRequest, ReviewDecision, ReviewRequest
from toolweave.exceptions import ApprovalPending, UserError
from toolweave.plan.durable import PlanStore, Transition, cancel_run, resolve_step, resume_plan, retry_step
from toolweave.plan.durable._codec import decision_data, dumps
from toolweave.tools import ArgumentsError, Toolset

__all__ = ('ACTIONS', 'Actions', 'ActionError', 'BrowserReviewHandler', 'decision_of')

logger = logging.getLogger('toolweave.ui')

ACTIONS = ('approve', 'edit', 'reject', 'resolve')
MAX_REASON = 2_000
MAX_NAME = 64
MAX_ARGUMENTS = 1_000_000
"""Characters of JSON an edit may send."""


class ActionError(Exception):
    """An action the UI refuses, with the HTTP status that says why and a message for the person."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


class BrowserReviewHandler:
    """A reviewer that leaves every decision to a person in `toolweave ui`: a gated step (or, in a whole-plan
    review, every gated step) parks in the run's store and shows in the UI's inbox; the run goes on when the
    decision is recorded (the UI resumes it when it was started with the tools, else `toolweave runs resume`).

    Give it to anything that runs durable plans: `run_plan(..., store=URL, review_handler=BrowserReviewHandler())`,
    `Agent(..., plan_store=URL, review_handler=...)`.
    """

    def __init__(self, where: str = 'toolweave ui') -> None:
        self.where = where

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        raise ApprovalPending(f'waiting for a decision in {self.where}')

    async def review_plan(self, request: PlanReviewRequest) -> PlanReviewDecision:
        raise ApprovalPending(f'waiting for a decision in {self.where}')


def decision_of(body: Mapping[str, Any], problems_of: Callable[[Any], list[str]]) -> ReviewDecision:
    """The decision a request's body stands for (`action`, `arguments`, `reason`); `problems_of` checks edited
    arguments (`Actions.problems`).

    Raises:
        ActionError: an unknown action, arguments that are not a JSON object or that the tool refuses.
    """
    action = body.get('action')
    if action == 'approve':
        return ReviewDecision.approve()
    if action == 'reject':
        return ReviewDecision.reject(_reason(body.get('reason')))
    if action == 'edit':
        arguments = body.get('arguments')
        if not isinstance(arguments, dict):
            raise ActionError(422, f'An edit sends the new arguments as a JSON object, got '
                                   f'{type(arguments).__name__}.')
        problems = problems_of(arguments)
        if problems:
            raise ActionError(422, 'The tool refuses these arguments:\n- ' + '\n- '.join(problems))
        return ReviewDecision.edit(arguments)
    raise ActionError(400, f'Unknown action {action!r}: use one of {", ".join(ACTIONS)}.')


def _reason(value: object) -> str | None:
    if value is None or value == '':
        return None
    if not isinstance(value, str) or len(value) > MAX_REASON:
        raise ActionError(422, f'A reason is text of at most {MAX_REASON} characters.')
    return value


def schema_problems(arguments: Any, schema: Mapping[str, Any] | None, tool: str | None) -> list[str]:
    """Every way `arguments` break `schema` (none when the schema is unknown), each with where: `to: 3 is not of
    type 'string'`."""
    if not isinstance(arguments, dict):
        return [f'the arguments must be a JSON object, got {type(arguments).__name__}']
    if len(json.dumps(arguments)) > MAX_ARGUMENTS:
        return [f'the arguments are over {MAX_ARGUMENTS:,} characters of JSON']
    if not schema:
        return []
    import jsonschema

    try:
        validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        errors = sorted(validator_class(schema).iter_errors(arguments), key=lambda e: list(e.absolute_path))
    except jsonschema.SchemaError as exc:
        logger.warning('The input schema of tool %r is not a valid JSON schema (%s): edits are not checked.', tool,
                       exc.message)
        return []
    return [f'{"/".join(str(p) for p in error.absolute_path) or "(the arguments)"}: {error.message}'
            for error in errors[:50]]


def who(label: str | None, body: Mapping[str, Any]) -> str:
    """Who decides: the access token's label, else the name the page sends.

    Raises:
        ActionError: neither (a decision is always someone's).
    """
    if label:
        return label
    name = body.get('by')
    if not isinstance(name, str) or not name.strip():
        raise ActionError(422, 'Say who decides: give your name at the top of the page.')
    name = name.strip()
    if len(name) > MAX_NAME or not name.isprintable():
        raise ActionError(422, f'A name is 1 to {MAX_NAME} printable characters.')
    return name


@dataclass(slots=True)
class Actions:
    """The actions on one store (see the module docstring); `tools`, when given, let the UI resume runs and check
    edits with each tool's validation."""

    store: PlanStore
    tools: Toolset | None = None
    resumes: dict[str, dict[str, Any]] = field(default_factory=dict[str, dict[str, Any]])
    """Per run, the last resume this UI started: `{'state': 'running' | 'done' | 'failed', 'error': ...}`."""
    group: TaskGroup | None = None

    @property
    def schemas(self) -> dict[str, Any]:
        if self.tools is None:
            return {}
        return {definition.name: definition.parameters for definition in self.tools.definitions()}

    def problems(self, tool: str | None, arguments: Any) -> tuple[list[str], bool]:
        """Every way `arguments` break the tool's validation, each with where (`to: Input should be a valid string,
        got 3`), and whether the tool was there to check them (this UI has the tools). A tool's own validation is
        used when it has one (what its call would say, custom validators included), else its input schema."""
        found = self.tools.find(tool) if self.tools is not None and tool is not None else None
        basic = schema_problems(arguments, None, tool)  # a JSON object, not too large
        if found is None or basic:
            return basic, found is not None
        try:
            if found.check_arguments(arguments) is not None:
                return [], True
        except ArgumentsError as exc:
            listed = list(exc.problems) or [str(exc)]
            if exc.accepted is not None:
                listed[-1] += f' ({tool!r} takes: {exc.accepted})'
            return listed, True
        except Exception:  # a validation that itself fails: the schema decides, and the call will tell
            pass
        return schema_problems(arguments, found.definition.parameters, tool), True

    def capabilities(self) -> dict[str, bool]:
        """Which actions this UI can take: resuming a run, and checking an edit against its tool's schema, need the
        tools."""
        return {'decide': True, 'resume': self.tools is not None, 'cancel': True, 'retry': True, 'resolve': True,
                'schemas': self.tools is not None}

    async def decide(self, run_id: str, step_id: str, body: Mapping[str, Any], by: str, tool: str | None) -> str:
        """Record a person's decision for a parked step. Returns what happened, for the page."""
        if body.get('action') == 'resolve':
            return await self._resolve(run_id, step_id, body)
        decision = decision_of(body, lambda arguments: self.problems(tool, arguments)[0])
        detail = dumps({**decision_data(decision), 'by': by, 'via': 'browser'})
        await anyio.to_thread.run_sync(self.store.decide, run_id,
                                       Transition(step_id, 'decided', time.time(), decision.reason, detail=detail))
        verb = {'continue': 'approved', 'edit': 'approved with new arguments', 'exit_early': 'rejected'}[decision.kind]
        return f'{step_id} {verb} by {by}.'

    async def _resolve(self, run_id: str, step_id: str, body: Mapping[str, Any]) -> str:
        output = body.get('output')
        if not isinstance(output, str):
            raise ActionError(422, 'Resolve as done sends what the step did, as text (output).')
        await resolve_step(run_id, step_id, output, store=self.store)
        return f'{step_id} resolved as done.'

    async def retry(self, run_id: str, step_id: str) -> str:
        await retry_step(run_id, step_id, store=self.store)
        return f'{step_id} will run again when the run is resumed.'

    async def cancel(self, run_id: str, reason: str | None) -> str:
        done = await cancel_run(run_id, store=self.store, reason=reason or None)
        outcome = done.outcome
        return {'cancelled': f'Run {run_id} cancelled.', 'requested': f'Run {run_id}: the process running it was '
                'asked to stop; it stops at its next journal write.'}.get(outcome, f'Run {run_id}: {outcome}.')

    def resume(self, run_id: str) -> str:
        """Resume the run in this process, in the background (the page follows it live)."""
        if self.tools is None or self.group is None:
            raise ActionError(501, f'This UI was started without the tools: run `toolweave runs resume {run_id} '
                                   '--tools MODULE:ATTRIBUTE`, or start `toolweave ui` with --tools.')
        if self.resumes.get(run_id, {}).get('state') == 'running':
            return f'Run {run_id} is being resumed already.'
        self.resumes[run_id] = {'state': 'running', 'error': None, 'at': time.time()}
        self.group.start_soon(self._resume, run_id, self.tools)
        return f'Resuming run {run_id}.'

    async def _resume(self, run_id: str, tools: Toolset) -> None:
        try:
            run = await resume_plan(run_id, tools, store=self.store, review_handler=BrowserReviewHandler())
        except (UserError, Exception) as exc:  # reported on the run's page, not raised into the server
            logger.warning('Resuming run %r from the UI failed: %s', run_id, exc)
            self.resumes[run_id] = {'state': 'failed', 'error': f'{type(exc).__name__}: {exc}', 'at': time.time()}
            return
        self.resumes[run_id] = {'state': 'done', 'error': None, 'at': time.time(),
                                'parked': run.parked, 'failed': run.failed}
