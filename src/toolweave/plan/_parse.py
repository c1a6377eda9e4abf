"""Reading plans: JSON text or mappings in either dialect, into the id-based `Plan` model.

Parsing is lenient and exhaustive: it records every structural problem (with the step and field it concerns)
instead of stopping at the first, so validation can add tool and reference problems and report them together.

Sizes are checked before the work they would cost: a text's bytes before it is read (`max_bytes`), the number of
steps before any step is built (`max_steps`). `parse_async` keeps the event loop free while a large plan is read:
a text larger than `INLINE_BYTES` is read in a worker thread with the standard library's pure-Python JSON reader,
which lets the event loop's thread run every few milliseconds (the C reader holds the interpreter until it is
done: a megabyte of nested arrays takes it hundreds of milliseconds).
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio

from toolweave.exceptions import PlanValidationError
from toolweave.plan._model import Condition, Dialect, GrowingSteps, Plan, PlanStep, StepForms
from toolweave.plan._shape import SHAPE_FIELDS, compile_shape

__all__ = (
    'DEFAULT_MAX_BYTES',
    'CountingDecoder',
    'EMPTY_PLAN',
    'INLINE_BYTES',
    'MAX_CONTAINERS',
    'MAX_PROBLEMS',
    'Parsed',
    'Problems',
    'TooMany',
    'describe_type',
    'excerpt',
    'loads_async',
    'parse_async',
    'parse_lenient',
    'parse_plan',
    'plan_bytes',
    'step_label',
    'too_large',
    'too_many_steps',
)

DEFAULT_MAX_BYTES = 2_000_000
"""The largest plan text read, in bytes of UTF-8 (about 20,000 typical steps)."""
INLINE_BYTES = 64_000
"""Plan texts up to this size are read on the event loop (a few milliseconds at most); larger ones in a thread."""
INLINE_STEPS = 1_000
"""Plans (as mappings) with up to this many steps are built on the event loop; larger ones in a thread."""

EMPTY_PLAN = 'Tool plan must contain at least one step'
_ID_FIELDS = frozenset({'id', 'tool', 'arguments', 'description'})
_STEP_FIELDS = _ID_FIELDS | {'from', 'select', 'for_each', 'when'} | SHAPE_FIELDS
_WHEN_FIELDS = frozenset({'from', 'select'})
_INDEX_FIELDS = frozenset({'tool', 'args', 'description'})
_ID_TOP = frozenset({'steps', 'output_steps', 'goal'})
_INDEX_TOP = frozenset({'steps', 'goal'})
_STEP_EXAMPLE = '{"id": "weather", "tool": "get_weather", "arguments": {"city": "Tokyo"}}'


MAX_PROBLEMS = 30
"""Problems listed in full; the rest are counted in one last line (a model fixes the first ones and resends)."""


class Problems:
    """Problems keyed by where they belong (-1: the plan as a whole, i: step i, n: the graph), kept in that
    order so every message about one step sits together."""

    __slots__ = ('_items',)

    def __init__(self) -> None:
        self._items: list[tuple[int, str]] = []

    def add(self, key: int, message: str) -> None:
        self._items.append((key, message))

    def extend(self, other: Problems) -> None:
        self._items.extend(other._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def messages(self) -> list[str]:
        """The first `MAX_PROBLEMS` messages in order, then `... and N more problems` if there are more."""
        ordered = [message for _, message in sorted(self._items, key=lambda item: item[0])]
        if len(ordered) <= MAX_PROBLEMS:
            return ordered
        rest = len(ordered) - MAX_PROBLEMS
        return [*ordered[:MAX_PROBLEMS], f'... and {rest} more problem{"s" if rest > 1 else ""} of the same kinds '
                                         'not listed. Fix the ones above and check the rest the same way.']


@dataclass(slots=True)
class Parsed:
    plan: Plan
    problems: Problems
    reported: set[tuple[int, str]] = field(default_factory=set[tuple[int, str]])
    """(step index, field) pairs already reported, so validation does not report them twice."""
    text_size: int | None = None
    """The length of the JSON text the plan was read from (`None`: it was given as a mapping or a `Plan`): it
    bounds how many values the plan holds, so validating it needs no count of them first."""


def describe_type(value: object) -> str:
    names = {dict: 'object', list: 'array', str: 'string', bool: 'boolean', int: 'number', float: 'number'}
    return 'null' if value is None else names.get(type(value), type(value).__name__)


def excerpt(value: object, limit: int = 60) -> str:
    """A short JSON rendering of `value` for a message; never raises (deep, cyclic or huge values included)."""
    try:
        text = json.dumps(value, default=str, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        text = f'<{describe_type(value)}>'
    return text if len(text) <= limit else text[:limit] + '...'


Loads = Callable[[str], Any]
"""A JSON reader: `json.loads`, or a `CountingDecoder`'s `decode` for a large text."""


MAX_CONTAINERS = 100_000
"""The most objects and arrays a large plan text may hold (a 10,000-step plan holds about 20,000). Reading more
would allocate tens of megabytes, and the garbage collector's pause over them would hold the event loop."""


_TOO_MANY = (f'The plan text holds more than {MAX_CONTAINERS:,} JSON objects and arrays. Split it into smaller '
             'plans, or leave out data the plan does not need to carry (a step passes an earlier result with '
             '"$ref:STEP").')


class TooMany(ValueError):
    """A plan text holds more than `MAX_CONTAINERS` objects and arrays."""

    def __init__(self) -> None:
        super().__init__(_TOO_MANY)


class CountingDecoder(json.JSONDecoder):
    """The pure-Python JSON reader, counting the objects and arrays it makes: slower than the C reader, but a
    thread running it gives up the interpreter every few milliseconds, so the event loop runs meanwhile."""

    def __init__(self, limit: int, parse_constant: Callable[[str], Any] | None = None) -> None:
        super().__init__(parse_constant=parse_constant)
        self.left = limit
        # The pure-Python parts of `json` (not in typeshed): the functions `py_make_scanner` calls for `[` and `{`.
        parse_array = json.decoder.JSONArray  # type: ignore[attr-defined]
        parse_object = json.decoder.JSONObject  # type: ignore[attr-defined]

        def array(*args: Any) -> Any:
            self.spend()
            return parse_array(*args)

        def object_(*args: Any) -> Any:
            self.spend()
            return parse_object(*args)

        self.parse_array = array
        self.parse_object = object_
        self.scan_once = json.scanner.py_make_scanner(self)  # type: ignore[attr-defined]

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise TooMany


_READER: ContextVar[Loads] = ContextVar('toolweave_plan_reader', default=json.loads)
"""The JSON reader of the plan being parsed (every JSON text inside it is read the same way)."""


def _loads(text: str) -> Any:
    """The plan's JSON reader on `text`, with nesting too deep for it reported as a `JSONDecodeError`-like
    `ValueError`."""
    try:
        return _READER.get()(text)
    except RecursionError:
        raise _TooDeep from None


async def loads_async(text: str) -> Any:
    """`json.loads`, in a worker thread with the pure-Python reader for a text over `INLINE_BYTES` (see the
    module). Raises what `json.loads` raises, and `ValueError` for more than `MAX_CONTAINERS` objects and arrays."""
    if len(text) <= INLINE_BYTES:
        return json.loads(text)
    return await anyio.to_thread.run_sync(CountingDecoder(MAX_CONTAINERS).decode, text, abandon_on_cancel=True)


def plan_bytes(text: str | bytes, limit: int) -> int | None:
    """The size of a plan text in bytes of UTF-8 when it is more than `limit` (at least that size, for a text too
    long to count cheaply), else `None`. Costs at most one encoding of `limit` characters."""
    if isinstance(text, bytes):
        return len(text) if len(text) > limit else None
    if len(text) > limit:
        return len(text)
    if len(text) * 4 <= limit:
        return None
    size = len(text.encode('utf-8', 'surrogatepass'))
    return size if size > limit else None


def too_large(size: int, limit: int) -> str:
    return (f'The plan text is larger than the limit of {limit:,} bytes (`max_bytes`): at least {size:,} bytes. '
            'Split it into smaller plans, or leave out data the plan does not need to carry (a step passes an '
            'earlier result with "$ref:STEP").')


class _TooDeep(ValueError):
    """JSON nested too deeply to read."""


_TOO_DEEP = 'nested too deeply to read'


def step_label(index: int, step_id: object = None) -> str:
    """`steps[2] (id 'fetch')`, or `steps[2]` when the id is unusable."""
    if isinstance(step_id, str) and step_id.strip():
        return f'steps[{index}] (id {step_id!r})'
    return f'steps[{index}]'


def _detect(data: Mapping[str, Any]) -> Dialect:
    """Index-based when the steps are written that way (`args`, no `id`/`arguments`), or when there are no
    steps to tell and the plan has a `goal`."""
    steps = data.get('steps')
    if not isinstance(steps, list) or not steps:
        return 'index' if 'goal' in data else 'id'
    uses_args = False
    for step in steps:
        if isinstance(step, dict):
            if 'id' in step or 'arguments' in step:
                return 'id'
            uses_args = uses_args or 'args' in step
    return 'index' if uses_args else 'id'


def _load(data: str | bytes | Mapping[str, Any], problems: Problems, max_bytes: int | None) -> Mapping[str, Any] | None:
    if isinstance(data, (str, bytes)) and max_bytes is not None:
        size = plan_bytes(data, max_bytes)
        if size is not None:
            problems.add(-1, too_large(size, max_bytes))
            return None
    if isinstance(data, bytes):
        try:
            data = data.decode()
        except UnicodeDecodeError as exc:
            problems.add(-1, f'The plan is not UTF-8 text: {exc.reason} at byte {exc.start}. Send the plan JSON '
                             'encoded as UTF-8.')
            return None
    if isinstance(data, str):
        text = data
        try:
            data = _loads(text)
        except _TooDeep:
            problems.add(-1, f'The plan JSON is {_TOO_DEEP}. Send arguments with fewer levels of nested objects '
                             'and arrays.')
            return None
        except json.JSONDecodeError as exc:
            shown = text[:100] + ('...' if len(text) > 100 else '')
            problems.add(-1, f'The plan is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno} '
                             f'(input: {shown!r}). Send a JSON object like {{"steps": [{_STEP_EXAMPLE}]}}.')
            return None
    if not isinstance(data, Mapping):
        problems.add(-1, f'The plan must be a JSON object with a "steps" array, got {describe_type(data)}. '
                         f'Send {{"steps": [{_STEP_EXAMPLE}]}}.')
        return None
    return data


def parse_lenient(data: str | bytes | Mapping[str, Any], dialect: Dialect | None = None, *,
                  max_bytes: int | None = DEFAULT_MAX_BYTES, max_steps: int | None = None,
                  clean: Callable[[Any], Any] | None = None) -> Parsed:
    """Parse without raising: the plan (broken parts replaced by blanks) and every structural problem.

    A text over `max_bytes` (`None`: no limit) is not read, a text over `INLINE_BYTES` holding more than
    `MAX_CONTAINERS` objects and arrays is not read whole, and a plan with more than `max_steps` steps is not
    built: each is one problem. `clean` is applied to each raw step of an id-based plan first."""
    return _parse(data, dialect, max_bytes, max_steps, clean)


async def parse_async(data: str | bytes | Mapping[str, Any], dialect: Dialect | None = None, *,
                      max_bytes: int | None = DEFAULT_MAX_BYTES, max_steps: int | None = None,
                      clean: Callable[[Any], Any] | None = None) -> Parsed:
    """`parse_lenient` without blocking the event loop for long: a large plan is read and built in a worker thread
    (see the module)."""
    work = partial(_parse, data, dialect, max_bytes, max_steps, clean)
    if isinstance(data, (str, bytes)):
        if len(data) <= INLINE_BYTES or (max_bytes is not None and plan_bytes(data, max_bytes) is not None):
            return work()
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    steps = data.get('steps') if isinstance(data, Mapping) else None
    if isinstance(steps, list) and len(steps) > INLINE_STEPS and (max_steps is None or len(steps) <= max_steps):
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    return work()


def _parse(data: str | bytes | Mapping[str, Any], dialect: Dialect | None, max_bytes: int | None,
           max_steps: int | None, clean: Callable[[Any], Any] | None) -> Parsed:
    # A large text is read with the counting pure-Python reader, wherever it is read: the same plan gets the same
    # problems from `validate_plan` and `run_plan`, and a thread reading it lets the event loop run.
    large = isinstance(data, (str, bytes)) and len(data) > INLINE_BYTES
    token = _READER.set(CountingDecoder(MAX_CONTAINERS).decode if large else json.loads)
    try:
        parsed = _parse_loaded(data, dialect, max_bytes, max_steps, clean)
        if isinstance(data, (str, bytes)):
            parsed.text_size = len(data)
        return parsed
    except TooMany:
        problems = Problems()
        problems.add(-1, _TOO_MANY)
        return Parsed(Plan(()), problems, {(-1, 'steps')})
    finally:
        _READER.reset(token)


def too_many_steps(count: int, limit: int) -> str:
    return (f'The plan has {count:,} steps, more than the limit of {limit:,}. Split it into smaller plans or raise '
            '`max_steps`.')


def _parse_loaded(data: str | bytes | Mapping[str, Any], dialect: Dialect | None, max_bytes: int | None,
                  max_steps: int | None, clean: Callable[[Any], Any] | None) -> Parsed:
    problems = Problems()
    loaded = _load(data, problems, max_bytes)
    if loaded is None:
        return Parsed(Plan(()), problems, {(-1, 'steps')})
    steps = loaded.get('steps')
    if max_steps is not None and isinstance(steps, list) and len(steps) > max_steps:
        problems.add(-1, too_many_steps(len(steps), max_steps))
        return Parsed(Plan(()), problems, {(-1, 'steps')})
    chosen = dialect or _detect(loaded)
    if chosen == 'index':
        return _parse_index(loaded, problems)
    return _parse_id(loaded, problems, clean)


def parse_plan(data: str | bytes | Mapping[str, Any], *, dialect: Dialect | None = None) -> Plan:
    """Read a plan from JSON text or a mapping, in either dialect (detected unless `dialect` is given).

    Raises:
        PlanValidationError: the plan is malformed; `.problems` lists every problem, each naming the step and
            field. Tool names and references are checked later, by `validate_plan` and `run_plan`.
    """
    parsed = parse_lenient(data, dialect)
    if parsed.problems:
        raise PlanValidationError(parsed.problems.messages())
    return parsed.plan


def _steps_list(data: Mapping[str, Any], problems: Problems, reported: set[tuple[int, str]]) -> list[Any]:
    steps = data.get('steps')
    if steps is None:
        return []
    if isinstance(steps, str):  # some models encode the array a second time; read it if it is one
        try:
            decoded = _loads(steps)
        except _TooDeep:
            problems.add(-1, f'"steps" is a JSON text {_TOO_DEEP}. Send "steps" as an array of step objects with '
                             'fewer levels of nesting.')
            reported.add((-1, 'steps'))
            return []
        except json.JSONDecodeError:
            decoded = None
        steps = decoded if isinstance(decoded, list) else steps
    if not isinstance(steps, list):
        problems.add(-1, f'"steps" must be an array of step objects, got {describe_type(steps)}. '
                         f'Send {{"steps": [{_STEP_EXAMPLE}]}}.')
        reported.add((-1, 'steps'))
        return []
    return steps


def _unknown_keys(where: str, keys: Mapping[str, Any], allowed: frozenset[str], hint: str) -> str | None:
    extra = [k for k in keys if k not in allowed]
    if not extra:
        return None
    listed = ', '.join(repr(k) for k in extra)
    return f'{where}: unknown field{"s" if len(extra) > 1 else ""} {listed}. {hint}'


def _output_steps(data: Mapping[str, Any], problems: Problems) -> tuple[str, ...] | None:
    raw = data.get('output_steps')
    if raw is None:
        return None
    if isinstance(raw, str):  # encoded a second time, like "steps" sometimes is
        try:
            raw = _loads(raw)
        except (_TooDeep, json.JSONDecodeError):
            pass
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        problems.add(-1, f'"output_steps" must be an array of step id strings, got {excerpt(raw, 100)}.'
                         ' Write "output_steps": ["step_id", ...] or leave it out to get every output.')
        return None
    return tuple(dict.fromkeys(raw))


def _parse_id(data: Mapping[str, Any], problems: Problems, clean: Callable[[Any], Any] | None = None) -> Parsed:
    reported: set[tuple[int, str]] = set()
    message = _unknown_keys('The plan', data, _ID_TOP, 'A plan has "steps" and optionally "output_steps".')
    if message:
        problems.add(-1, message)
    # Straight into the plan's columns (`PlanSteps`): no object per step.
    steps = GrowingSteps()
    ids, tools, arguments_of, descriptions = steps.ids, steps.tools, steps.arguments, steps.descriptions
    names: dict[str, str] = {}
    for index, raw in enumerate(_steps_list(data, problems, reported)):
        if clean is not None:
            raw = clean(raw)
        if type(raw) is dict and raw.keys() <= _ID_FIELDS:  # the common, well-formed case, without detours
            step_id = raw.get('id')
            tool = raw.get('tool')
            arguments = raw.get('arguments')
            if type(step_id) is str and type(tool) is str and type(arguments) is dict:
                ids.append(step_id)
                tools.append(names.setdefault(tool, tool))  # one string per tool name (JSON makes one a step)
                arguments_of.append(arguments)
                description = raw.get('description')
                if type(description) is str:
                    descriptions[index] = description
                continue
        steps.append(_id_step(index, raw, problems, reported))
    goal = data.get('goal') if isinstance(data.get('goal'), str) else None
    plan = Plan(steps.frozen(), _output_steps(data, problems), goal, 'id')
    return Parsed(plan, problems, reported)


def parse_step(raw: Any) -> PlanStep | None:
    """One step of an id-based plan, as `parse_lenient` reads it in its plan (a plan still arriving is read a step at
    a time); `None` when the step has problems of its own."""
    problems = Problems()
    step = _id_step(0, raw, problems, set())
    return None if problems else step


def _id_step(index: int, raw: Any, problems: Problems, reported: set[tuple[int, str]]) -> PlanStep:
    if not isinstance(raw, dict):
        problems.add(index, f'steps[{index}]: a step must be an object like {_STEP_EXAMPLE}, got '
                            f'{describe_type(raw)}.')
        reported.update({(index, 'id'), (index, 'tool'), (index, 'arguments')})
        return PlanStep('', '', {})
    label = step_label(index, raw.get('id'))
    if not SHAPE_FIELDS.isdisjoint(raw):  # structured shaping: compiled to the select step it stands for
        select, shaping = compile_shape(raw, label)
        for problem in shaping:
            problems.add(index, problem)
        raw = {key: value for key, value in raw.items() if key not in SHAPE_FIELDS} | {'select': select or '@'}
    message = _unknown_keys(label, raw, _STEP_FIELDS, 'A step has "id", "tool" and "arguments" (and optionally '
                            '"for_each" and "when"), or "id", "from" and "select"'
                            + (' (not "args")' if 'args' in raw else '') + '.')
    if message:
        problems.add(index, message)
    step_id = _string_field(raw, 'id', index, label, problems, reported)
    description = raw.get('description') if isinstance(raw.get('description'), str) else None
    # `null` stands for "not given" (strict schemas list every field, so models send null for the unused ones).
    when = _when(raw, index, label, problems, reported) if raw.get('when') is not None else None
    if raw.get('from') is not None or raw.get('select') is not None:
        return _select_step(raw, step_id, description, when, index, label, problems, reported)
    tool = _string_field(raw, 'tool', index, label, problems, reported)
    arguments = _arguments(raw.get('arguments'), index, label, problems, reported)
    for_each = raw.get('for_each')
    if isinstance(for_each, (bool, int, float)):
        problems.add(index, f'{label}: "for_each" must be a reference to a list (like "$ref:search.items") or an '
                            f'array, got {describe_type(for_each)} {excerpt(for_each)}.')
        reported.add((index, 'for_each'))
        for_each = None
    forms = StepForms(for_each=for_each, when=when) if for_each is not None or when is not None else None
    return PlanStep(step_id, tool, arguments, description, forms)


def _select_step(raw: Mapping[str, Any], step_id: str, description: str | None, when: Condition | None,
                 index: int, label: str, problems: Problems, reported: set[tuple[int, str]]) -> PlanStep:
    """A step with `from` (and usually `select`): it evaluates an expression, it calls no tool."""
    clash = [name for name in ('tool', 'arguments', 'for_each') if raw.get(name) is not None]
    if clash:
        listed = ', '.join(f'"{name}"' for name in clash)
        problems.add(index, f'{label}: a step with "from"/"select" calls no tool, so it cannot have {listed}. Split '
                            'it in two: a tool step, and a select step whose "from" refers to it.')
    source = raw.get('from')
    if source is None:
        problems.add(index, f'{label}: "select" needs "from", the value to select from, for example '
                            '"from": "$ref:search.items".')
        reported.add((index, 'from'))
        source = {}
    select = raw.get('select')
    if select is not None and not isinstance(select, str):
        problems.add(index, f'{label}: "select" must be a JMESPath expression string, got {describe_type(select)} '
                            f'{excerpt(select)}.')
        reported.add((index, 'select'))
        select = None
    return PlanStep(step_id, '', {}, description, StepForms(source, select, None, when))


def _when(raw: Mapping[str, Any], index: int, label: str, problems: Problems,
          reported: set[tuple[int, str]]) -> Condition | None:
    value = raw['when']
    example = '"when": {"from": "$ref:cheap", "select": "length(@) > `0`"}'
    if not isinstance(value, dict) or value.get('from') is None:
        problems.add(index, f'{label}: "when" must be an object with "from" (a reference) and "select" (a JMESPath '
                            f'condition), got {excerpt(value)}. Write {example}.')
        reported.add((index, 'when'))
        return None
    message = _unknown_keys(f'{label}: "when"', value, _WHEN_FIELDS, f'Write {example}.')
    if message:
        problems.add(index, message)
    select = value.get('select', '@')
    if not isinstance(select, str):
        problems.add(index, f'{label}: "when.select" must be a JMESPath expression string, got '
                            f'{describe_type(select)}. Write {example}.')
        reported.add((index, 'when'))
        return None
    return Condition(value['from'], select)


def _string_field(raw: Mapping[str, Any], name: str, index: int, label: str, problems: Problems,
                  reported: set[tuple[int, str]]) -> str:
    value = raw.get(name)
    if isinstance(value, str):
        return value
    if value is not None:
        problems.add(index, f'{label}: "{name}" must be a string, got {describe_type(value)} {excerpt(value)}.')
        reported.add((index, name))
    return ''


def _arguments(value: Any, index: int, label: str, problems: Problems, reported: set[tuple[int, str]]) -> Any:
    if value is None:
        return {}
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            loaded = _loads(value)
        except _TooDeep:
            problems.add(index, f'{label}: "arguments" is a JSON text {_TOO_DEEP}. Use fewer levels of nested '
                                'objects and arrays.')
            reported.add((index, 'arguments'))
            return {}
        except json.JSONDecodeError:
            return value  # fails at run time with the parser's detail; independent steps still run
        value = loaded
    if isinstance(value, dict):
        return value
    problems.add(index, f'{label}: "arguments" must be a JSON object (or a string holding one), got '
                        f'{describe_type(value)} {excerpt(value)}. Write '
                        '"arguments": {"name": "value"}.')
    reported.add((index, 'arguments'))
    return {}


def _parse_index(data: Mapping[str, Any], problems: Problems) -> Parsed:
    reported: set[tuple[int, str]] = set()
    message = _unknown_keys('The plan', data, _INDEX_TOP, 'An index-based plan has "goal" and "steps".')
    if message:
        problems.add(-1, message)
    goal = data.get('goal')
    if not isinstance(goal, str):
        problems.add(-1, f'"goal" must be a string saying what the plan is for, got {describe_type(goal)}.')
        goal = None
    if 'steps' not in data:
        problems.add(-1, '"steps" is missing. Add "steps": [{"tool": ..., "args": {...}, "description": ...}].')
    steps = GrowingSteps()
    for index, raw in enumerate(_steps_list(data, problems, reported)):
        steps.append(_index_step(index, raw, problems, reported))  # (each step object lives only this long)
    return Parsed(Plan(steps.frozen(), None, goal, 'index'), problems, reported)


def _index_step(index: int, raw: Any, problems: Problems, reported: set[tuple[int, str]]) -> PlanStep:
    step_id = f'step_{index}'
    label = f'steps[{index}]'
    if not isinstance(raw, dict):
        problems.add(index, f'{label}: a step must be an object with "tool", "args" and "description", got '
                            f'{describe_type(raw)}.')
        reported.update({(index, 'tool'), (index, 'arguments')})
        return PlanStep(step_id, '', {})
    message = _unknown_keys(label, raw, _INDEX_FIELDS, 'A step has "tool", "args" and "description".')
    if message:
        problems.add(index, message)
    tool = _string_field(raw, 'tool', index, label, problems, reported)
    description = raw.get('description')
    if not isinstance(description, str):
        problems.add(index, f'{label}: "description" must be a string saying what the step does, got '
                            f'{describe_type(description)}.')
        description = None
    args = raw.get('args', {})
    if not isinstance(args, dict):
        problems.add(index, f'{label}: "args" must be an object, got {describe_type(args)}. Write '
                            '"args": {"name": "value"}.')
        reported.add((index, 'arguments'))
        args = {}
    return PlanStep(step_id, tool, args, description)
