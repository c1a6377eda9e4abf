"""The plan model: frozen specs (`Plan`, `PlanStep`) and the names of step states and events."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    from toolweave.plan._record import StepRecord

__all__ = ('Dialect', 'EventHandler', 'MissingField', 'Plan', 'PlanEvent', 'PlanStep', 'ReviewMode', 'StepStatus')

StepStatus: TypeAlias = Literal['pending', 'running', 'parked', 'succeeded', 'failed', 'skipped', 'cancelled']
"""Where a step is: not started, running, parked (waiting for a decision; its dependents wait with it), or one of
the four ends."""

ReviewMode: TypeAlias = Literal['per_step', 'whole_plan']
"""How gated plan steps are reviewed: each when it is ready, with its resolved arguments (`per_step`), or all at
once before anything runs, with the whole plan in view (`whole_plan`)."""

Dialect: TypeAlias = Literal['id', 'index']
"""`id`: steps named by `id`, references `"$ref:STEP.PATH"`; `index`: steps referred to as `steps[N]`."""

MissingField: TypeAlias = Literal['null', 'error']
"""What a reference to a field that does not exist produces: `null`, or a failure of the step."""


@dataclass(frozen=True, slots=True)
class PlanStep:
    """One tool call of a plan."""

    id: str
    """Unique within the plan; other steps refer to it as `"$ref:<id>"`. Index-based plans use `step_<N>`."""
    tool: str
    """The name of the tool to call."""
    arguments: Any
    """The parsed JSON arguments (normally a dict) with references still in place. A JSON text that does not
    parse stays text: the step then fails at run time and independent steps still run."""
    description: str | None = None
    """What the step is for (index-based plans carry one per step)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """A declarative plan: tool calls whose arguments may refer to earlier results.

    ```python
    plan = parse_plan({'steps': [{'id': 'a', 'tool': 'echo', 'arguments': '{"text": "hi"}'}]})
    print(plan.steps[0].arguments)
    #> {'text': 'hi'}
    ```
    """

    steps: tuple[PlanStep, ...]
    output_steps: tuple[str, ...] | None = None
    """Which step outputs the model gets back; `None` (or empty) returns every step."""
    goal: str | None = None
    """What the plan is for (index-based plans)."""
    dialect: Dialect = 'id'
    """How references are written in the arguments."""


@dataclass(frozen=True, slots=True)
class PlanEvent:
    """A step started, parked or finished. `step` is the live record: read it in the handler (it keeps changing).
    A step that never started (skipped, or cancelled before it started) gets only `step_finished`; a parked step
    gets `step_parked` and, in the run that picks up its decision, `step_started` again."""

    kind: Literal['step_started', 'step_parked', 'step_finished']
    step: StepRecord
    run_started_at: float
    """`time.perf_counter()` when the run started; `step.started_at` is relative to it."""


EventHandler: TypeAlias = Callable[[PlanEvent], None]
