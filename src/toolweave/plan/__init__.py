"""Declarative tool plans: one model call describes many tool calls; toolweave validates the plan, runs
independent steps in parallel (each as soon as the steps it refers to are done), pipes results into later
steps through `$ref` references, and returns only the outputs the model asked for. Gated steps are reviewed one by
one as they are ready, or all at once before anything runs (`review_mode='whole_plan'`); with a `store` a run is
durable (`toolweave.plan.durable`)."""

from __future__ import annotations

from toolweave._public import present as _present
from toolweave.plan._meta import PlanTool, planning_instructions
from toolweave.plan._model import (
    Condition,
    Dialect,
    MissingField,
    Plan,
    PlanStep,
    PlanSteps,
    ReviewMode,
    StepForms,
    StepStatus,
)
from toolweave.plan._parse import parse_plan
from toolweave.plan._plan_grammar import constrained_grammar
from toolweave.plan._plan_schema import PlanSchema, SchemaTooLarge, constrained_schema
from toolweave.plan._record import ItemRecord, PlanEvent, PlanRun, StepRecord
from toolweave.plan._retry import Retries, with_retries
from toolweave.plan._review import review_request
from toolweave.plan._run import run_plan, run_plan_sync
from toolweave.plan._validate import validate_plan

__all__ = (
    'Condition',
    'constrained_grammar',
    'constrained_schema',
    'Dialect',
    'ItemRecord',
    'MissingField',
    'parse_plan',
    'Plan',
    'PlanEvent',
    'planning_instructions',
    'PlanRun',
    'PlanSchema',
    'PlanStep',
    'PlanSteps',
    'PlanTool',
    'Retries',
    'review_request',
    'ReviewMode',
    'run_plan',
    'run_plan_sync',
    'SchemaTooLarge',
    'StepForms',
    'StepRecord',
    'StepStatus',
    'validate_plan',
    'with_retries',
)

_present('toolweave.plan', __all__, globals())
