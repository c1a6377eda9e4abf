"""The plan model: frozen specs (`Plan`, `PlanStep`) and the names of step states."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, overload

__all__ = ('Condition', 'Dialect', 'MissingField', 'Plan', 'PlanStep', 'PlanSteps', 'ReviewMode', 'StepForms',
           'StepStatus')

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


class PlanSteps(Sequence[PlanStep]):
    """A plan's steps, kept as columns: their ids, tool names and arguments in a list each, descriptions and the
    other forms (`StepForms`) by position for the steps that have them. A `PlanStep` is made when one is read.

    It reads like a tuple of steps (and equals one that holds the same steps). Kept as columns, a plan of 100,000
    steps is a few lists rather than 100,000 objects for the garbage collector to walk while the plan runs, and to
    count: that many new objects that live on is what sets off the collector's full collections, each of which walks
    the whole process.
    """

    __slots__ = ('arguments', 'descriptions', 'forms', 'ids', 'tools')

    def __init__(self, steps: Iterable[PlanStep] = ()) -> None:
        self.ids: list[str] = []
        self.tools: list[str] = []
        """Per step: the name of its tool (`''` for a select step)."""
        self.arguments: list[Any] = []
        self.descriptions: dict[int, str] = {}
        """The steps' descriptions, by position, for the steps that have one."""
        self.forms: dict[int, StepForms] = {}
        """The steps' `StepForms`, by position, for the steps that have any."""
        for index, step in enumerate(steps):
            if not isinstance(step, PlanStep):
                raise TypeError(f'steps[{index}] is {type(step).__name__}, not a PlanStep. Build a plan from '
                                'PlanStep(...) objects, or read one from JSON with parse_plan(...).')
            _add(self, step)

    @classmethod
    def of(cls, ids: list[str], tools: list[str], arguments: list[Any], descriptions: dict[int, str],
           forms: dict[int, StepForms]) -> PlanSteps:
        """Steps made of these columns (taken, not copied; of one length)."""
        steps = cls()
        steps.ids, steps.tools, steps.arguments, steps.descriptions, steps.forms = (
            ids, tools, arguments, descriptions, forms)
        return steps

    # --- reading ----------------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> PlanStep: ...

    @overload
    def __getitem__(self, index: slice) -> PlanSteps: ...

    def __getitem__(self, index: int | slice) -> PlanStep | PlanSteps:
        if isinstance(index, slice):
            positions = range(len(self.ids))[index]
            if positions.step == 1:
                start, stop = positions.start, positions.stop
                return PlanSteps.of(self.ids[start:stop], self.tools[start:stop], self.arguments[start:stop],
                                    _shifted(self.descriptions, start, stop), _shifted(self.forms, start, stop))
            return PlanSteps(self[position] for position in positions)
        step_id = self.ids[index]  # (an IndexError names the index as a tuple's would)
        if index < 0:
            index += len(self.ids)
        return PlanStep(step_id, self.tools[index], self.arguments[index], self.descriptions.get(index),
                        self.forms.get(index))

    def __iter__(self) -> Iterator[PlanStep]:
        for index in range(len(self.ids)):
            yield self[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PlanSteps):
            return (self.ids == other.ids and self.tools == other.tools and self.arguments == other.arguments
                    and self.descriptions == other.descriptions and self.forms == other.forms)
        if isinstance(other, (tuple, list)):
            return len(other) == len(self) and all(mine == theirs for mine, theirs in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # (steps hold arguments, which are dicts)

    def __repr__(self) -> str:
        return f'PlanSteps({list(self)!r})'


def _add(steps: PlanSteps, step: PlanStep) -> None:
    """`step` written into the columns of `steps`, after the others."""
    if step.description is not None:
        steps.descriptions[len(steps.ids)] = step.description
    if step.forms is not None:
        steps.forms[len(steps.ids)] = step.forms
    steps.ids.append(step.id)
    steps.tools.append(step.tool)
    steps.arguments.append(step.arguments)


class GrowingSteps(PlanSteps):
    """Steps that are still being read: a plan's as its parser reads them, a streamed plan's as they arrive (the
    validator's own). A `Plan` never holds one: `frozen` gives the steps read so far as `PlanSteps` (sharing the
    columns, which the grower then no longer changes), and `Plan` copies any other sequence it is given."""

    __slots__ = ()

    append = _add

    def extend(self, steps: PlanSteps) -> None:
        start = len(self.ids)
        self.ids.extend(steps.ids)
        self.tools.extend(steps.tools)
        self.arguments.extend(steps.arguments)
        self.descriptions.update({start + index: text for index, text in steps.descriptions.items()})
        self.forms.update({start + index: forms for index, forms in steps.forms.items()})

    def truncate(self, length: int) -> None:
        """Keep the first `length` steps only."""
        del self.ids[length:], self.tools[length:], self.arguments[length:]
        for sparse in (self.descriptions, self.forms):
            for index in [index for index in sparse if index >= length]:
                del sparse[index]

    def frozen(self) -> PlanSteps:
        """The steps read so far, as a plan holds them (the same columns: read no more steps into these)."""
        return PlanSteps.of(self.ids, self.tools, self.arguments, self.descriptions, self.forms)


def _shifted(sparse: dict[int, Any], start: int, stop: int) -> dict[int, Any]:
    return {index - start: value for index, value in sparse.items() if start <= index < stop}


@dataclass(frozen=True, slots=True, init=False)
class Plan:
    """A declarative plan: tool calls whose arguments may refer to earlier results.

    ```python
    plan = parse_plan({'steps': [{'id': 'a', 'tool': 'echo', 'arguments': '{"text": "hi"}'}]})
    print(plan.steps[0].arguments)
    #> {'text': 'hi'}
    ```
    """

    steps: PlanSteps
    """The steps, in plan order (given as any sequence of `PlanStep`s; kept as `PlanSteps`)."""
    output_steps: tuple[str, ...] | None = None
    """Which step outputs the model gets back; `None` (or empty) returns every step."""
    goal: str | None = None
    """What the plan is for (index-based plans)."""
    dialect: Dialect = 'id'
    """How references are written in the arguments."""

    def __init__(self, steps: Iterable[PlanStep], output_steps: tuple[str, ...] | None = None,
                 goal: str | None = None, dialect: Dialect = 'id') -> None:
        object.__setattr__(self, 'steps', steps if type(steps) is PlanSteps else PlanSteps(steps))
        object.__setattr__(self, 'output_steps', output_steps)
        object.__setattr__(self, 'goal', goal)
        object.__setattr__(self, 'dialect', dialect)
