"""The plan model: frozen specs (`Plan`, `PlanStep`) and the names of step states."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

__all__ = ('Condition', 'Dialect', 'MissingField', 'Plan', 'PlanStep', 'ReviewMode', 'StepForms', 'StepStatus')

StepStatus: TypeAlias = Literal['pending', 'reviewing', 'running', 'parked', 'succeeded', 'failed', 'skipped',
                                'cancelled']
"""Where a step is: not started, waiting for its reviewer's answer before its tool is called, running, parked
(waiting for a decision that is not coming now; its dependents wait with it), or one of the four ends."""

ReviewMode: TypeAlias = Literal['per_step', 'whole_plan']
"""How gated plan steps are reviewed: each when it is ready, with its resolved arguments (`per_step`), or all at
once before anything runs, with the whole plan in view (`whole_plan`)."""

Dialect: TypeAlias = Literal['id', 'index']
"""`id`: steps named by `id`, references `"$ref:STEP.PATH"`; `index`: steps referred to as `steps[N]`."""

MissingField: TypeAlias = Literal['null', 'error']
"""What a reference to a field that does not exist produces: `null`, or a failure of the step."""


@dataclass(frozen=True, slots=True)
class Condition:
    """A step's `when`: the step runs only if `select` (a JMESPath expression) over `source` is truthy."""

    source: Any
    """The `from` value: a reference, or JSON holding references."""
    select: str = '@'
    """The expression; JMESPath truthiness (`false`, `null`, `""`, `[]` and `{}` are false)."""


@dataclass(frozen=True, slots=True)
class StepForms:
    """What a step does besides one tool call (kept apart so that the common step stays small and quick to
    build): its `from`/`select`, its `for_each` list, its `when` condition."""

    source: Any = None
    select: str | None = None
    for_each: Any = None
    when: Condition | None = None


@dataclass(frozen=True, slots=True, init=False)
class PlanStep:
    """One step of a plan: a tool call (once, or once per element of `for_each`), or, with no tool, a `select`
    over earlier results."""

    id: str
    """Unique within the plan; other steps refer to it as `"$ref:<id>"`. Index-based plans use `step_<N>`."""
    tool: str
    """The name of the tool to call; `''` for a select step."""
    arguments: Any
    """The parsed JSON arguments (normally a dict) with references still in place. A JSON text that does not
    parse stays text: the step then fails at run time and independent steps still run."""
    description: str | None = None
    """What the step is for (index-based plans carry one per step)."""
    forms: StepForms | None = None
    """`from`/`select`, `for_each` and `when`, when the step has any (read them through the properties)."""

    def __init__(self, id: str, tool: str, arguments: Any, description: str | None = None,
                 forms: StepForms | None = None) -> None:
        # A frozen dataclass's own `__init__` sets each field through `object.__setattr__`; the slots' own
        # descriptors do the same at about 60 % of the cost, and reading a plan makes one step per step.
        _SET_ID(self, id)
        _SET_TOOL(self, tool)
        _SET_ARGUMENTS(self, arguments)
        _SET_DESCRIPTION(self, description)
        _SET_FORMS(self, forms)

    @property
    def source(self) -> Any:
        """A select step's `from`: a reference, or JSON holding references (`None`: not a select step)."""
        return None if self.forms is None else self.forms.source

    @property
    def select(self) -> str | None:
        """A select step's JMESPath expression over `source` (`None`: the value of `source` as it is)."""
        return None if self.forms is None else self.forms.select

    @property
    def for_each(self) -> Any:
        """A reference to a list (or a literal list): the tool is called once per element, `"$item"` and
        `"$index"` in the arguments standing for the element and its position (`None`: one call)."""
        return None if self.forms is None else self.forms.for_each

    @property
    def when(self) -> Condition | None:
        """Run the step only if this condition holds; otherwise it is skipped, and so are its dependents."""
        return None if self.forms is None else self.forms.when

    @property
    def is_select(self) -> bool:
        """Whether the step evaluates an expression instead of calling a tool."""
        return self.forms is not None and self.forms.source is not None

    @property
    def kind(self) -> str:
        """`tool`, `for_each` or `select`."""
        forms = self.forms
        if forms is None:
            return 'tool'
        return 'select' if forms.source is not None else 'for_each' if forms.for_each is not None else 'tool'


_SET_ID, _SET_TOOL, _SET_ARGUMENTS, _SET_DESCRIPTION, _SET_FORMS = (
    vars(PlanStep)[name].__set__ for name in ('id', 'tool', 'arguments', 'description', 'forms'))


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
