"""The run record: `StepRecord` per step, `PlanRun` for the whole plan, what the model is shown, and the events a
run reports as its records change (`PlanEvent`).

The summary is a JSON object keyed by step id; a step output that parses as JSON is embedded as JSON,
other text as a JSON string, failures as `"ERROR: <message>"`. Every value is cut at `max_output_chars` with a
note saying how much was cut; the record keeps the full text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple, Protocol, TypeAlias, TypeVar, overload

from pydantic_core import to_jsonable_python

from toolweave.plan._model import Plan, PlanStep, PlanSteps, StepStatus

if TYPE_CHECKING:
    from toolweave.approval import ApprovalRecord
    from toolweave.tools import ToolResult

__all__ = (
    'CALLED',
    'CONDITION_SKIPPED',
    'DEFAULT_MAX_OUTPUT_CHARS',
    'EventHandler',
    'FROM_OUTPUT',
    'ItemRecord',
    'NOTHING_RETURNED',
    'PlanEvent',
    'PlanRun',
    'StepGraph',
    'StepRecord',
    'StepRecords',
    'StepResult',
    'TEXT',
    'cut',
    'jsonable',
    'parse_output',
    'step_result',
)

DEFAULT_MAX_OUTPUT_CHARS = 4000
"""Characters of each step output (and error) shown to the model before it is cut."""
NOTHING_RETURNED = 'Function executed successfully'
"""A step's output when its tool returned `None`, so the model sees that it ran."""
JSON_START = frozenset('{["-0123456789tfn')
"""The characters a JSON text can start with."""
_IMMUTABLE = (str, int, float, bool, type(None))
"""JSON scalars: their own JSON data, and never changed by whoever reads them."""
_ENDED = frozenset({'succeeded', 'failed', 'skipped', 'cancelled'})
T = TypeVar('T')


def _reject_constant(name: str) -> Any:
    raise ValueError(f'{name} is not JSON')


def parse_output(text: str) -> tuple[Any, bool]:
    """A step's value read from its output text: `(JSON data, False)` when the trimmed text is strict JSON
    (no NaN or Infinity) that `jsonable` accepts, else `(text, True)` with the text untouched."""
    if not text or (text[0] not in JSON_START and not text[0].isspace()):
        return text, True  # the common case for plain text, without copying it
    stripped = text.strip()
    if not stripped or stripped[0] not in JSON_START:
        return text, True
    try:
        parsed = json.loads(stripped, parse_constant=_reject_constant)
        return (jsonable(parsed) if isinstance(parsed, (dict, list)) else parsed), False
    except (ValueError, RecursionError):  # not JSON, an integer too long to print, or nested too deeply
        return text, True


def jsonable(value: Any) -> Any:
    """`value` as fresh JSON data (dicts, lists, strings, numbers, booleans, None), never shared with `value`:
    what references read, and what each reading step gets a copy of.

    Raises:
        ValueError: `value` is cyclic, nested deeper than 254 levels, or holds bytes that are not UTF-8
            (`UnicodeDecodeError` is a `ValueError`).
    """
    if isinstance(value, _IMMUTABLE):
        return value
    return to_jsonable_python(value, fallback=str)


def cut(text: str, limit: int | None) -> str:
    """`text`, cut to `limit` characters with a note saying how much was cut."""
    if limit is None or len(text) <= limit:
        return text
    return f'{text[:limit]}... [cut {len(text) - limit} of {len(text)} characters]'


class StepResult(NamedTuple):
    """A successful tool result as a step records it."""

    output: str
    value: Any
    ref_value: Any
    is_text: bool
    from_output: bool
    size: int = 0
    """Bytes of `ref_value`'s JSON when it is an object or an array (what a reference to it copies), else 0."""


def step_result(result: ToolResult) -> StepResult:
    """What a step records from its tool's successful result: the output text, the value, and the value as JSON
    data for references and the summary.

    Raises:
        ValueError: the value cannot become JSON data (the message says why and what to return instead).
    """
    output = result.output
    value = result.value
    if not output and value is None and result.has_value:  # the tool returned nothing
        return StepResult(NOTHING_RETURNED, None, None, False, False)
    if result.has_value and type(value) is not str:
        try:
            data = jsonable(value)
            text = json.dumps(data)  # what the summary and `{{$ref:...}}` do: an int too long to print fails here
            return StepResult(output, value, data, False, False, len(text) if isinstance(data, (dict, list)) else 0)
        except Exception as exc:  # a foreign value's own code (its `__str__`) may raise anything
            raise ValueError(f'The tool returned a value that cannot be recorded as JSON ({type(value).__name__}: '
                             f'{_reason(exc)}). Return JSON-like data: dicts, lists, strings, numbers, booleans, '
                             'None, or pydantic models.') from None
    if output and output[0] not in JSON_START and not output[0].isspace():
        return StepResult(output, output, output, True, True)  # plain text (the common case), no parse attempt
    parsed, is_text = parse_output(output)
    return StepResult(output, parsed, parsed, is_text, True, len(output) if isinstance(parsed, (dict, list)) else 0)


def _reason(exc: Exception) -> str:
    text = str(exc)
    if 'Circular reference' in text:
        return 'it contains itself'
    if 'depth' in text:
        return 'nested more than 254 levels deep'
    return cut(text, 200)


@dataclass(slots=True)
class ItemRecord:
    """One element of a `for_each` step: the tool called with it, addressed by (step id, `index`)."""

    index: int
    """Position of the element in the list."""
    arguments: Any = None
    """The arguments the tool was called with, `$item` and `$index` resolved (`None` if they did not resolve)."""
    status: StepStatus = 'pending'
    output: str | None = None
    value: Any = None
    """The call's value as JSON data (what the step's list holds at `index`)."""
    error: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    attempts: int = 0
    """How many times the tool was called with it (more than one when a retry policy tried it again)."""

    def to_dict(self) -> dict[str, Any]:
        return {'index': self.index, 'status': self.status, 'arguments': self.arguments, 'output': self.output,
                'value': self.value, 'error': self.error, 'started_at': self.started_at, 'ended_at': self.ended_at,
                'attempts': self.attempts}


TEXT = 1
"""`StepRecord.flags`: `ref_value` is raw text that did not parse as JSON."""
FROM_OUTPUT = 2
"""`StepRecord.flags`: `ref_value` was parsed from `output`."""
CALLED = 4
"""`StepRecord.flags`: the step's arguments were resolved and its tool called (or its expression evaluated)."""
CONDITION_SKIPPED = 8
"""`StepRecord.flags`: skipped because a `when` condition was false."""


class _Field:
    """A field of `StepRecord`, named after the column (or dict) of `StepRecords` it reads and writes."""

    __slots__ = ('name',)

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name


class _Column(_Field, Generic[T]):
    """A field of `StepRecord`: the step's entry in its run's list of that name (`StepRecords`)."""

    __slots__ = ()

    @overload
    def __get__(self, record: None, owner: type) -> _Column[T]: ...
    @overload
    def __get__(self, record: StepRecord, owner: type) -> T: ...
    def __get__(self, record: StepRecord | None, owner: type) -> T | _Column[T]:
        if record is None:
            return self
        column: list[T] = getattr(record._records, self.name)
        return column[record.index]

    def __set__(self, record: StepRecord, value: T) -> None:
        column: list[T] = getattr(record._records, self.name)
        column[record.index] = value


class _Sparse(_Field, Generic[T]):
    """A field of `StepRecord` that few steps have: the step's entry in its run's dict of that name, `None` when it
    has none (setting `None` removes it)."""

    __slots__ = ()

    @overload
    def __get__(self, record: None, owner: type) -> _Sparse[T]: ...
    @overload
    def __get__(self, record: StepRecord, owner: type) -> T | None: ...
    def __get__(self, record: StepRecord | None, owner: type) -> T | None | _Sparse[T]:
        if record is None:
            return self
        table: dict[int, T] = getattr(record._records, self.name)
        return table.get(record.index)

    def __set__(self, record: StepRecord, value: T | None) -> None:
        table: dict[int, T] = getattr(record._records, self.name)
        if value is None:
            table.pop(record.index, None)
        else:
            table[record.index] = value


class StepRecord:
    """What happened to one step. Mutable while the plan runs; final once `PlanRun` is returned.

    A record is a view of one step in its run's records (`StepRecords`), which keep each field of every step in a
    list of its own: a run holds no object per step while it runs, so a server running thousands of plans gives the
    garbage collector a few lists a run to walk instead of a record a step. Reading a field reads the run's list;
    setting it sets it there. Two records of the same step are views of the same data."""

    __slots__ = ('_records', 'index')

    def __init__(self, index: int, records: StepRecords) -> None:
        self.index = index
        """Position of the step in the plan."""
        self._records = records

    status: _Column[StepStatus] = _Column()
    output: _Column[str | None] = _Column()
    """The tool's output text (successful steps)."""
    value: _Column[Any] = _Column()
    """The tool's value (`ToolResult.value` when set, else the output parsed as JSON, else the text)."""
    ref_value: _Column[Any] = _Column()
    """`value` as JSON data: what references to this step read (each reading step gets its own copy)."""
    flags: _Column[int] = _Column()
    """`TEXT`, `FROM_OUTPUT`, `CALLED` and `CONDITION_SKIPPED`, or'ed (read them as the properties of those names)."""
    size: _Column[int] = _Column()
    """Bytes of `ref_value`'s JSON when it is an object or an array (what a reference to it copies), else 0."""
    error: _Column[str | None] = _Column()
    attempts: _Column[int] = _Column()
    """How many times the step was started (more than once when a retry policy tried its call again)."""
    items: _Sparse[list[ItemRecord]] = _Sparse()
    """A `for_each` step's elements, in list order, once its list is known."""
    given: _Sparse[Any] = _Sparse()
    """The arguments the tool ran with when a reviewer changed them (`None`: the plan's own)."""

    @property
    def step(self) -> PlanStep:
        """The step as planned."""
        return self._records.graph.steps[self.index]

    @property
    def is_text(self) -> bool:
        """Whether `ref_value` is raw text that did not parse as JSON (a field path on it is an error)."""
        return bool(self.flags & TEXT)

    @property
    def from_output(self) -> bool:
        """Whether `ref_value` was parsed from `output` (so the summary need not parse it again)."""
        return bool(self.flags & FROM_OUTPUT)

    @property
    def called(self) -> bool:
        """Whether the step's arguments were resolved and its tool called (or its expression evaluated)."""
        return bool(self.flags & CALLED)

    @property
    def condition_skipped(self) -> bool:
        """Skipped because a `when` condition was false (its own or a dependency's): an outcome, not an error."""
        return bool(self.flags & CONDITION_SKIPPED)

    @property
    def started_at(self) -> float | None:
        """Seconds from the start of the run to the start of the step."""
        at = self._records.graph.started[self.index]
        return None if at != at else at  # NaN: not started

    @property
    def ended_at(self) -> float | None:
        at = self._records.graph.ended[self.index]
        return None if at != at else at  # NaN: not ended

    @property
    def id(self) -> str:
        return self._records.graph.steps.ids[self.index]

    @property
    def tool(self) -> str:
        return self._records.graph.steps.tools[self.index]

    @property
    def kind(self) -> str:
        """`tool`, `for_each` or `select`."""
        return self.step.kind

    @property
    def description(self) -> str | None:
        return self.step.description

    @property
    def wave(self) -> int:
        """Dependency level: 0 for steps without references, else 1 + the highest level they refer to."""
        return self._records.graph.waves[self.index]

    @property
    def depends_on(self) -> tuple[str, ...]:
        """Ids of the steps this one refers to, in order of first appearance."""
        ids = self._records.graph.steps.ids
        return tuple(ids[d] for d in self._records.graph.deps[self.index])

    @property
    def arguments(self) -> Any:
        """The resolved arguments the tool was called with (`None` if it was not called); for a `for_each` step
        the list of each element's arguments, for a select step the resolved `from` value. A reviewer's edit is
        what the tool ran with, so that is what is shown.

        Rebuilt from the plan and the finished steps' values when read rather than kept: a plan of 100k steps
        then holds 100k fewer objects while it runs. The values it reads never change once their steps have
        finished, so every read gives an equal result."""
        if not self.called:
            return None
        if self.given is not None:
            return self.given
        return self._records.graph.arguments(self.index)

    @property
    def run_started_at(self) -> float:
        """`time.perf_counter()` when the step's run started (`started_at` and `ended_at` count from it)."""
        return self._records.graph.t0

    @property
    def duration(self) -> float | None:
        """Seconds the step ran, or `None` if it never started or has not ended."""
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at

    @property
    def ok(self) -> bool:
        return self.status == 'succeeded'

    @property
    def done(self) -> bool:
        return self.status in _ENDED

    def __repr__(self) -> str:
        return (f'StepRecord(id={self.id!r}, tool={self.tool!r}, status={self.status!r}, wave={self.wave}, '
                f'depends_on={self.depends_on!r}, arguments={self.arguments!r}, output={self.output!r}, '
                f'error={self.error!r}, started_at={self.started_at!r}, ended_at={self.ended_at!r})')

    def to_dict(self) -> dict[str, Any]:
        return {
            'id': self.id, 'index': self.index, 'tool': self.tool, 'description': self.description,
            'wave': self.wave, 'depends_on': list(self.depends_on), 'status': self.status,
            'arguments': self.arguments, 'output': self.output,
            'value': self.ref_value if self.status == 'succeeded' else None, 'error': self.error,
            'started_at': self.started_at, 'ended_at': self.ended_at, 'duration': self.duration,
            'kind': self.kind, 'condition_skipped': self.condition_skipped, 'attempts': self.attempts,
            'items': None if self.items is None else [item.to_dict() for item in self.items],
        }


class StepGraph(Protocol):
    """What records read from their run: the plan's steps, their times, the dependency graph, and argument
    resolution."""

    t0: float
    """`time.perf_counter()` when the run started."""

    @property
    def started(self) -> Sequence[float]:
        """Per step, seconds from `t0` to its start, NaN while it has not started."""
        ...

    @property
    def ended(self) -> Sequence[float]:
        """Per step, seconds from `t0` to its end, NaN while it has not ended."""
        ...

    @property
    def steps(self) -> PlanSteps: ...

    @property
    def deps(self) -> Sequence[tuple[int, ...]]: ...

    @property
    def waves(self) -> Sequence[int]: ...

    def arguments(self, index: int) -> Any:
        """Step `index`'s arguments with every reference replaced."""
        ...


class StepRecords(Sequence[StepRecord]):
    """The records of a run's steps, kept as columns: per field, one list with an entry per step (the fields few
    steps have, `items` and `given`, in dicts by position). Indexing it gives a `StepRecord`, a view of one step.

    Why columns: a run keeps every step's record for as long as it lives, and with a record object per step a
    server running a thousand plans of a hundred steps holds a hundred thousand more objects, each walked by every
    full collection of the garbage collector; lists of strings and small ints are a few objects a run."""

    __slots__ = ('attempts', 'error', 'flags', 'given', 'graph', 'items', 'output', 'ref_value', 'size', 'status',
                 'value')

    def __init__(self, graph: StepGraph, count: int) -> None:
        self.graph = graph
        """The run the records are of: the steps, their times, the graph, argument resolution."""
        self.status: list[StepStatus] = []
        self.output: list[str | None] = []
        self.value: list[Any] = []
        self.ref_value: list[Any] = []
        self.flags: list[int] = []
        self.size: list[int] = []
        self.error: list[str | None] = []
        self.attempts: list[int] = []
        self.items: dict[int, list[ItemRecord]] = {}
        self.given: dict[int, Any] = {}
        self.grow(count)

    def grow(self, count: int) -> None:
        """Add `count` steps' records, pending (a plan that arrives while it runs)."""
        self.status.extend(['pending'] * count)
        for column in (self.output, self.value, self.ref_value, self.error):
            column.extend([None] * count)
        for numbers in (self.flags, self.size, self.attempts):
            numbers.extend([0] * count)

    def __len__(self) -> int:
        return len(self.status)

    @overload
    def __getitem__(self, index: int) -> StepRecord: ...
    @overload
    def __getitem__(self, index: slice) -> list[StepRecord]: ...
    def __getitem__(self, index: int | slice) -> StepRecord | list[StepRecord]:
        if isinstance(index, slice):
            return [StepRecord(i, self) for i in range(len(self.status))[index]]
        count = len(self.status)
        if not -count <= index < count:
            raise IndexError(f'step index {index} out of range (the plan has {count} steps)')
        return StepRecord(index % count, self)

    def __iter__(self) -> Iterator[StepRecord]:
        return (StepRecord(index, self) for index in range(len(self.status)))


@dataclass(eq=False)
class PlanRun:
    """The full record of one plan run: every step (in plan order) with its resolved arguments, output,
    value, error and timing; the totals; and the text the model is shown (`summary`, or `digest()` for
    index-based plans)."""

    plan: Plan
    records: Sequence[StepRecord] = field(repr=False)
    """One record per step, in plan order, as the run keeps them (read `steps`)."""
    started_at: float
    """`time.perf_counter()` when the run started."""
    duration: float
    """Seconds from start to the end of the last step."""
    max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS
    """Where each value shown to the model is cut."""
    name: str | None = None
    """The plan's handle in its agent run (`p1`, `p2`, ...): a later plan of the run refers to this run's steps as
    `"$ref:<name>/<step>..."`. `None` outside an agent run."""
    approvals: tuple[ApprovalRecord, ...] = ()
    """Every review decision made during the run (gated steps, and gated tools inside them), in order."""
    run_id: str | None = None
    """The id the run is stored under when it is durable (`run_plan(..., store=...)`), else `None`."""
    eager: tuple[str, ...] = ()
    """Ids of the steps that started while the model was still writing the plan (see `PlanTool.stream`), in plan
    order; the run is otherwise the one the whole plan would have given."""
    succeeded: int = field(init=False)
    failed: int = field(init=False)
    _benign: int = field(init=False, repr=False)
    skipped: int = field(init=False)
    cancelled: int = field(init=False)
    parked: int = field(init=False)
    """Steps waiting for a decision (see `ApprovalPending`); their dependents are `waiting`."""
    waiting: int = field(init=False)
    """Steps that did not start because a step they depend on is parked."""

    @cached_property
    def steps(self) -> tuple[StepRecord, ...]:
        """One record per step, in plan order. Made when first read: a run whose records nobody reads (a server's
        plan whose model is shown only the summary of its output steps) makes no object per step."""
        return tuple(self.records)

    @cached_property
    def waves(self) -> tuple[tuple[str, ...], ...]:
        """Step ids by dependency level, in plan order within a level (for display; scheduling is eager, not wave
        by wave). Built when first read: a run keeps no tuple per level that nobody asks for."""
        levels: dict[int, list[str]] = {}
        for record in self.steps:
            levels.setdefault(record.wave, []).append(record.id)
        return tuple(tuple(levels[wave]) for wave in sorted(levels))

    def __post_init__(self) -> None:
        counts = {'succeeded': 0, 'failed': 0, 'skipped': 0, 'cancelled': 0, 'pending': 0, 'running': 0, 'parked': 0,
                  'reviewing': 0}
        records = self.records
        if isinstance(records, StepRecords):  # the run's columns, read without a record per step
            statuses, flags = records.status, records.flags
        else:
            statuses, flags = [record.status for record in records], [record.flags for record in records]
        for status in statuses:
            counts[status] += 1
        self._benign = sum(1 for each in flags if each & CONDITION_SKIPPED)
        self.succeeded = counts['succeeded']
        self.failed = counts['failed']
        self.skipped = counts['skipped']
        self.cancelled = counts['cancelled'] + counts['running'] + counts['reviewing']
        self.parked = counts['parked']
        self.waiting = counts['pending']

    @property
    def total(self) -> int:
        return len(self.records)

    @property
    def ok(self) -> bool:
        """Whether every step succeeded, or was skipped because a `when` condition was false."""
        return self.succeeded + self._benign == len(self.records)

    @cached_property
    def _by_id(self) -> dict[str, StepRecord]:
        return {record.id: record for record in self.steps}

    def step(self, step_id: str) -> StepRecord:
        """The record of step `step_id`. Raises `KeyError` listing the ids that exist."""
        try:
            return self._by_id[step_id]
        except KeyError:
            shown = ', '.join(list(self._by_id)[:50])
            raise KeyError(f'No step {step_id!r} in this plan run. Steps: {shown}.') from None

    @property
    def suspended(self) -> bool:
        """Whether some steps are parked, waiting for a decision: the run is not over (see `resume_plan`)."""
        return self.parked > 0

    @property
    def errors(self) -> list[StepRecord]:
        """The records of steps that did not succeed (parked and waiting ones included; steps skipped by a false
        condition left out), in plan order."""
        return [record for record in self.steps if record.status != 'succeeded' and not record.condition_skipped]

    def _shown(self, record: StepRecord) -> Any:
        limit = self.max_output_chars
        status, flags = record.status, record.flags  # each field read once: a record's fields are its run's columns
        if status != 'succeeded':
            if flags & CONDITION_SKIPPED:
                return record.error or 'Skipped because its condition is false'
            if status == 'parked':
                return 'PARKED: ' + cut(record.error or 'waiting for a decision', limit)
            if status == 'pending':
                return 'WAITING: a step it depends on is parked'
            return 'ERROR: ' + cut(record.error or 'not run', limit)
        text = record.output or ''
        if limit is not None and len(text) > limit:
            return self._preview(record, text, limit)
        if flags & FROM_OUTPUT:
            return text if flags & TEXT else record.ref_value
        value, is_text = parse_output(text)
        return text if is_text else value

    def _preview(self, record: StepRecord, text: str, limit: int) -> str:
        """The first `limit` characters, and how to use the whole value without copying it."""
        if self.name is not None:
            handle = f'$ref:{self.name}/{record.id}'  # no quotes: the note sits inside a JSON string
            how = (f'the whole value stays available: refer to it as {handle} (or {handle}.field) in your next '
                   'plan, with a select step to keep only what you need')
        else:
            how = 'a select step in the plan can keep only the part you need'
        return f'{text[:limit]}... [cut {len(text) - limit} of {len(text)} characters; {how}]'

    @cached_property
    def summary(self) -> str:
        """What the model is shown: `{"<id>": <output>, ...}` for the output steps (all steps, in plan
        order, when the plan names none), preceded by `Plan completed with errors.` and followed by an
        `Errors:` line when any step did not succeed."""
        wanted = self.plan.output_steps
        if wanted:
            chosen = [self._by_id[i] for i in wanted if i in self._by_id]
        else:
            chosen = list(self.steps)
        body = json.dumps({record.id: self._shown(record) for record in chosen}, ensure_ascii=False, default=str)
        if self.succeeded == len(self.records):
            return body
        errors = [r for r in self.errors if r.status in _ENDED]
        parked = [r for r in self.steps if r.status == 'parked']
        if not errors and not parked:
            return body
        lines = [f'Plan completed with errors.\nResults: {body}' if not parked else
                 f'Plan suspended: {len(parked)} step{"s wait" if len(parked) > 1 else " waits"} for a decision'
                 f'{f" (run {self.run_id})" if self.run_id else ""}; {self.waiting} more wait behind them.\n'
                 f'Results so far: {body}']
        if parked:
            lines.append('Parked: ' + '; '.join(f'{r.id}: {cut(r.error or "waiting", self.max_output_chars)}'
                                                for r in parked))
        if errors:
            lines.append('Errors: ' + '; '.join(f'{r.id}: {cut(r.error or "not run", self.max_output_chars)}'
                                                for r in errors))
        return '\n'.join(lines)

    def digest(self) -> str:
        """One line per step for index-based plans: `Plan executed: X/Y succeeded.` then
        `Step <i+1> (<tool>): <summary>`."""
        lines = [f'Plan executed: {self.succeeded}/{self.total} succeeded.']
        for record in self.steps:
            lines.append(f'Step {record.index + 1} ({record.tool}): {_one_line(record)}')
        return '\n'.join(lines) if self.steps else lines[0] + '\n'

    def to_dict(self) -> dict[str, Any]:
        """The whole record as JSON data."""
        return {
            'goal': self.plan.goal, 'dialect': self.plan.dialect,
            'output_steps': None if self.plan.output_steps is None else list(self.plan.output_steps),
            'name': self.name,
            'duration': self.duration, 'total': self.total, 'succeeded': self.succeeded, 'failed': self.failed,
            'skipped': self.skipped, 'cancelled': self.cancelled, 'parked': self.parked, 'waiting': self.waiting,
            'ok': self.ok, 'run_id': self.run_id, 'eager': list(self.eager),
            'waves': [list(w) for w in self.waves], 'steps': [record.to_dict() for record in self.steps],
            'summary': self.summary, 'approvals': [record.to_dict() for record in self.approvals],
        }

    def __repr__(self) -> str:
        parked = f', parked={self.parked}, waiting={self.waiting}' if self.parked else ''
        return (f'PlanRun(total={self.total}, succeeded={self.succeeded}, failed={self.failed}, '
                f'skipped={self.skipped}, cancelled={self.cancelled}{parked}, duration={self.duration:.3f})')


def _one_line(record: StepRecord, limit: int = 120) -> str:
    if record.status == 'succeeded':
        text = ' '.join((record.output or '').split())
        return text if len(text) <= limit else text[:limit] + '...'
    prefix = {'failed': 'FAILED', 'skipped': 'SKIPPED', 'cancelled': 'CANCELLED', 'parked': 'PARKED',
              'pending': 'WAITING'}.get(record.status, 'NOT RUN')
    return f'{prefix}: {record.error}'


@dataclass(frozen=True, slots=True)
class PlanEvent:
    """A step started, parked or finished, or one element of a `for_each` step finished. `step` is the live
    record: read it in the handler (it keeps changing). A step that never started (skipped, or cancelled before it
    started) gets only `step_finished`; a parked step gets `step_parked` and, in the run that picks up its
    decision, `step_started` again."""

    kind: Literal['step_started', 'step_parked', 'step_finished', 'item_finished']
    step: StepRecord
    run_started_at: float
    """`time.perf_counter()` when the run started; `step.started_at` is relative to it."""
    item: ItemRecord | None = None
    """For `item_finished`: the element's record (`step.items[item.index]`)."""
    eager: bool = False
    """For `step_started`: the step started while the model was still writing the plan (see `PlanTool.stream`)."""


EventHandler: TypeAlias = Callable[[PlanEvent], None]
