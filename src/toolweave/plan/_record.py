"""The run record: `StepRecord` per step, `PlanRun` for the whole plan, and what the model is shown.

The summary is a JSON object keyed by step id; a step output that parses as JSON is embedded as JSON,
other text as a JSON string, failures as `"ERROR: <message>"`. Every value is cut at `max_output_chars` with a
note saying how much was cut; the record keeps the full text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from toolweave.plan._model import Plan, StepStatus

if TYPE_CHECKING:
    from toolweave.approval import ApprovalRecord

__all__ = ('DEFAULT_MAX_OUTPUT_CHARS', 'JSON_START', 'PlanRun', 'StepRecord', 'cut', 'jsonable', 'parse_output')

DEFAULT_MAX_OUTPUT_CHARS = 4000
"""Characters of each step output (and error) shown to the model before it is cut."""
JSON_START = frozenset('{["-0123456789tfn')
"""The characters a JSON text can start with."""
_SCALARS = (str, int, float, bool, type(None))
_ENDED = frozenset({'succeeded', 'failed', 'skipped', 'cancelled'})


def _reject_constant(name: str) -> Any:
    raise ValueError(f'{name} is not JSON')


def parse_output(text: str) -> tuple[Any, bool]:
    """A step's value read from its output text: `(parsed JSON, False)` when the trimmed text is strict JSON
    (no NaN or Infinity), else `(text, True)` with the text untouched."""
    if not text or (text[0] not in JSON_START and not text[0].isspace()):
        return text, True  # the common case for plain text, without copying it
    stripped = text.strip()
    if not stripped or stripped[0] not in JSON_START:
        return text, True
    try:
        return json.loads(stripped, parse_constant=_reject_constant), False
    except ValueError:
        return text, True


def jsonable(value: Any) -> Any:
    """`value` as JSON data (dicts, lists, strings, numbers, booleans, None): what references read."""
    if isinstance(value, _SCALARS):
        return value
    return to_jsonable_python(value, fallback=str)


def cut(text: str, limit: int | None) -> str:
    """`text`, cut to `limit` characters with a note saying how much was cut."""
    if limit is None or len(text) <= limit:
        return text
    return f'{text[:limit]}... [cut {len(text) - limit} of {len(text)} characters]'


@dataclass(slots=True, eq=False, repr=False)
class StepRecord:
    """What happened to one step. Mutable while the plan runs; final once `PlanRun` is returned."""

    id: str
    tool: str
    index: int
    """Position of the step in the plan."""
    wave: int
    """Dependency level: 0 for steps without references, else 1 + the highest level they refer to."""
    depends_on: tuple[str, ...]
    """Ids of the steps this one refers to, in order of first appearance."""
    status: StepStatus = 'pending'
    given: Any = field(default=None, repr=False)
    """The arguments as the plan wrote them, once the step started (see `arguments`)."""
    output: str | None = None
    """The tool's output text (successful steps)."""
    value: Any = None
    """The tool's value (`ToolResult.value` when set, else the output parsed as JSON, else the text)."""
    error: str | None = None
    started_at: float | None = None
    """Seconds from the start of the run to the start of the step."""
    ended_at: float | None = None
    description: str | None = None
    ref_value: Any = field(default=None, repr=False)
    """`value` as JSON data: what references to this step read."""
    is_text: bool = field(default=False, repr=False)
    """Whether `ref_value` is raw text that did not parse as JSON (a field path on it is an error)."""
    from_output: bool = field(default=False, repr=False)
    """Whether `ref_value` was parsed from `output` (so the summary need not parse it again)."""
    resolver: Any = field(default=None, repr=False)
    """Set when `given` holds references: `arguments` replaces them again on demand."""

    @property
    def arguments(self) -> Any:
        """The resolved arguments the tool was called with (`None` until resolved).

        Rebuilt from the finished steps' values when read rather than kept: a plan of 100k steps then holds
        100k fewer objects for the garbage collector to scan while it runs. The values it reads never change
        once their steps have finished, so every read gives an equal result."""
        if self.resolver is not None:
            return self.resolver.resolve(self.given, self.id)
        return self.given

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
            'arguments': jsonable(self.arguments), 'output': self.output, 'value': jsonable(self.value),
            'error': self.error, 'started_at': self.started_at, 'ended_at': self.ended_at, 'duration': self.duration,
        }


@dataclass(eq=False)
class PlanRun:
    """The full record of one plan run: every step (in plan order) with its resolved arguments, output,
    value, error and timing; the totals; and the text the model is shown (`summary`, or `digest()` for
    index-based plans)."""

    plan: Plan
    steps: tuple[StepRecord, ...]
    """One record per step, in plan order."""
    waves: tuple[tuple[str, ...], ...]
    """Step ids by dependency level (for display; scheduling is eager, not wave by wave)."""
    started_at: float
    """`time.perf_counter()` when the run started."""
    duration: float
    """Seconds from start to the end of the last step."""
    max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS
    """Where each value shown to the model is cut."""
    approvals: tuple[ApprovalRecord, ...] = ()
    """Every review decision made during the run (gated steps, and gated tools inside them), in order."""
    succeeded: int = field(init=False)
    failed: int = field(init=False)
    skipped: int = field(init=False)
    cancelled: int = field(init=False)

    def __post_init__(self) -> None:
        counts = {'succeeded': 0, 'failed': 0, 'skipped': 0, 'cancelled': 0, 'pending': 0, 'running': 0}
        for record in self.steps:
            counts[record.status] += 1
        self.succeeded = counts['succeeded']
        self.failed = counts['failed']
        self.skipped = counts['skipped']
        self.cancelled = counts['cancelled'] + counts['pending'] + counts['running']

    @property
    def total(self) -> int:
        return len(self.steps)

    @property
    def ok(self) -> bool:
        """Whether every step succeeded."""
        return self.succeeded == len(self.steps)

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
    def errors(self) -> list[StepRecord]:
        """The records of steps that did not succeed, in plan order."""
        return [record for record in self.steps if record.status != 'succeeded']

    def _shown(self, record: StepRecord) -> Any:
        limit = self.max_output_chars
        if record.status != 'succeeded':
            return 'ERROR: ' + cut(record.error or 'not run', limit)
        text = record.output or ''
        if limit is not None and len(text) > limit:
            return cut(text, limit)
        if record.from_output:
            return text if record.is_text else record.ref_value
        value, is_text = parse_output(text)
        return text if is_text else value

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
        errors = self.errors
        if not errors:
            return body
        listed = '; '.join(f'{r.id}: {cut(r.error or "not run", self.max_output_chars)}' for r in errors)
        return f'Plan completed with errors.\nResults: {body}\nErrors: {listed}'

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
            'duration': self.duration, 'total': self.total, 'succeeded': self.succeeded, 'failed': self.failed,
            'skipped': self.skipped, 'cancelled': self.cancelled, 'ok': self.ok,
            'waves': [list(w) for w in self.waves], 'steps': [record.to_dict() for record in self.steps],
            'summary': self.summary, 'approvals': [record.to_dict() for record in self.approvals],
        }

    def __repr__(self) -> str:
        return (f'PlanRun(total={self.total}, succeeded={self.succeeded}, failed={self.failed}, '
                f'skipped={self.skipped}, cancelled={self.cancelled}, duration={self.duration:.3f})')


def _one_line(record: StepRecord, limit: int = 120) -> str:
    if record.status == 'succeeded':
        text = ' '.join((record.output or '').split())
        return text if len(text) <= limit else text[:limit] + '...'
    prefix = {'failed': 'FAILED', 'skipped': 'SKIPPED', 'cancelled': 'CANCELLED'}.get(record.status, 'NOT RUN')
    return f'{prefix}: {record.error}'
