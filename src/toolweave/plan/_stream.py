"""Plans that start while they are written: the model streams the arguments of `execute_tool_plan`, and the steps
that may run early start as soon as they have arrived.

`PlanStream.feed` takes the arguments text as it streams. A step has arrived once something follows it in
`"steps"` (the next step begins), or once a value follows `"steps"` itself. Both the reading and the validation go
step by step, so a plan of n steps costs O(n) however it is cut into pieces:

- **Reading** (`_Reader`): each piece is scanned once for the brackets outside strings (a regular expression skips
  everything else), which tells where each step's object begins and ends; each step's text is then read once
  (jiter). Pieces with no `{` or `[` cannot begin a step and are only kept.
- **Validation** (`Validator`, the validator every plan goes through): an arrived step is checked against the steps
  before it, and only it (`admit`); at close the whole plan is validated as usual, taking the steps checked as they
  arrived as checked (`prepare(..., arrived=...)`; see `benchmarks/bench_eager.py` for what it all costs). A piece
  that brings many steps at once checks at most `_FEED_BYTES` of them before it returns (the rest wait for the
  next piece, or for close), so the event loop is never held for long.

An arrived step starts early only when all of this holds:

- it calls a tool marked read-only (`ToolMetadata.read_only is True`; MCP tools carry `readOnlyHint`) that needs
  no approval, or it is a select step (pure);
- it validates with the steps before it, in which the steps held back stand as placeholders (a select step of
  nothing, with the step's id), so that a reference to a step that has not arrived, an unknown tool, or literal
  arguments its tool's schema rejects keep it back; and its text is at most `_EARLY_BYTES`;
- what it refers to has started early too, and has finished (the usual dependency counting: a step that refers
  to a held step waits with it).

Every other step is held until the whole plan has arrived and validated as usual. `close` then hands the whole
plan to the run: the steps that started early keep their records (nothing runs twice), the held ones are
released, and the run goes on as a run of the whole plan would; its `PlanRun` lists the early ones in `eager`.
Until then the run knows no step's chain of dependents (nothing after it has arrived): ready steps start in plan
order, and from close on longest chain first, as in any run.
A plan that does not validate, a stream that breaks off, or a reply whose plan never runs cancels what started
early (`cancel`, `abandon`), recorded as `cancelled`; nothing gated or side-effecting ever started.

A step id that cannot be used (missing, malformed, a duplicate), a step that is not an object, more steps than
`max_steps`, or text that cannot be a plan's JSON stops early starts for the rest of that plan: such a plan is
settled at `close`, as any plan is. Durable runs, whole-plan review and index-based plans never start a step early.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import jiter

from toolweave.approval import ApprovalLog, record_approvals, use_review_handler
from toolweave.plan._kernel import Extension, Run
from toolweave.plan._model import Plan, PlanStep, StepStatus
from toolweave.plan._observe import Events, observers
from toolweave.plan._options import RunOptions
from toolweave.plan._parse import parse_step
from toolweave.plan._record import EventHandler, ItemRecord, PlanRun, StepRecord
from toolweave.plan._refs import ID_PATTERN
from toolweave.plan._retry import RetryCalls
from toolweave.plan._review import Review
from toolweave.plan._validate import PLAN_TOOL_NAMES, Prepared, Validator
from toolweave.tools import ToolCallContext, Toolset

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

__all__ = ('PlanStream',)

logger = logging.getLogger('toolweave.plan')

_OPENERS = frozenset('{[')
"""A piece of text without these cannot have begun the next step (nor a value after `"steps"`)."""
_FEED_BYTES = 32 * 1024
"""Bytes of step text one piece checks at most before it returns (a few milliseconds of validation); the steps
past them wait for the next piece."""
_EARLY_BYTES = 64 * 1024
"""A step whose text is longer is held for the whole plan (checking it could hold the event loop for long)."""


class PlanStream:
    """A plan whose JSON is still arriving: `feed` it the text piece by piece; the steps that may run early start in
    `task_group` (see the module docstring). Then `close` with the whole plan once it validated (the run goes on
    and its `PlanRun` is returned), or `cancel` / `abandon` it. Made by `PlanTool.stream`."""

    def __init__(self, tools: Toolset, options: RunOptions, task_group: TaskGroup, *, context: ToolCallContext,
                 on_event: EventHandler | None, refused: frozenset[str], earlier: Mapping[str, PlanRun] | None,
                 name: str | None, clean: Callable[[dict[str, Any]], dict[str, Any]], eager: bool) -> None:
        self.tools = tools
        self.options = options
        self.context = context
        self.earlier = earlier
        """The earlier plans of the agent run a reference may name, as the whole plan will see them."""
        self.name = name
        """The plan's name in its agent run."""
        self._task_group = task_group
        self._on_event = on_event
        self._clean = clean
        earlier_steps = {plan: {record.id: record for record in run.steps} for plan, run in (earlier or {}).items()}
        self._validator = Validator(tools, dialect='id', max_items=options.max_items,
                                    refused=PLAN_TOOL_NAMES | refused, earlier=earlier_steps)
        """Checks each arrived step; holds the plan so far (the steps that may start early, and placeholders)."""
        self._reader = _Reader()
        self._backlog = False
        """Whether steps that have arrived wait for the next piece (see `_FEED_BYTES`)."""
        self._held: set[int] = set()
        """The positions of the steps held for the whole plan."""
        self._broken = False
        """Whether checking a step failed unexpectedly (its validator is then not trusted at close)."""
        self._eager = eager
        self._stopped: str | None = None if eager else 'early starts are off for this plan'
        """Why no more steps start early, if none do."""
        self._closed = False
        self._run: Run | None = None
        self._done = anyio.Event()
        self._result: PlanRun | None = None
        self._error: Exception | None = None
        self._log: ApprovalLog | None = None
        self._early = _Early(self._validator)

    @property
    def started(self) -> bool:
        """Whether some step was let start early (it may be waiting for a dependency)."""
        return self._run is not None

    @property
    def stopped(self) -> str | None:
        """Why no more steps start early, if none do (`None`: steps still may)."""
        return self._stopped

    def feed(self, text: str) -> None:
        """The next piece of the plan's JSON text. Never raises: a failure here stops early starts (logged), and
        the plan then runs as a whole."""
        if self._stopped is not None or self._closed or not text:
            return
        self._reader.text += text.encode()
        if not self._backlog and _OPENERS.isdisjoint(text):
            return
        try:
            self._read()
        except Exception:  # a bug here must not break the model's stream: the plan still runs once it has arrived
            logger.exception('Reading the streamed plan failed; its steps start once it has arrived')
            self._broken = True
            self._stop('reading the plan failed')

    def _read(self) -> None:
        budget = _FEED_BYTES
        reader = self._reader
        while budget > 0 and self._stopped is None:
            try:
                found = reader.next_step()
            except _Unreadable as exc:
                self._stop(str(exc))
                return
            if found is None:
                self._backlog = False
                return
            raw, size = found
            budget -= size
            self._arrive(raw, size)
        self._backlog = True

    def _arrive(self, raw: Any, size: int) -> None:
        validator = self._validator
        index = len(validator.steps.ids)
        if index >= self.options.max_steps:
            self._stop(f'the plan has more than {self.options.max_steps} steps (max_steps)')
            return
        step = self._step(raw) if size <= _EARLY_BYTES else None
        step_id = step.id if step is not None else raw.get('id') if isinstance(raw, dict) else None
        if not isinstance(step_id, str) or ID_PATTERN.fullmatch(step_id) is None or step_id in validator.ids:
            self._stop(f'steps[{index}] has no usable id')  # the whole plan will not validate
            return
        if step is not None and self._may_start_early(step):
            try:
                admitted = validator.admit(step)
            except Exception:
                self._broken = True
                raise
            if admitted:
                self._grow()
                return
        self._held.add(index)
        validator.hold(step_id)

    def _step(self, raw: Any) -> PlanStep | None:
        """The step as the whole plan will read it, or `None` when it has problems of its own."""
        if not isinstance(raw, dict):
            return None
        return parse_step(self._clean(raw))

    def _may_start_early(self, step: PlanStep) -> bool:
        if step.is_select:
            return True
        tool = self.tools.find(step.tool)
        return tool is not None and tool.definition.metadata.read_only is True and not tool.requires_approval

    def _grow(self) -> None:
        run = self._run
        if run is None:
            options = self.options
            extensions: list[Extension] = [self._early, Review(), RetryCalls(options.retries),
                                           *observers(self._on_event)]
            for extension in extensions:
                if isinstance(extension, Events):
                    extension.eager = True  # until the plan is closed
            run = self._run = Run.open(concurrency=options.concurrency, step_timeout=options.step_timeout,
                                       missing_field=options.missing_field, context=self.context,
                                       extensions=extensions, max_items=options.max_items)
            self._task_group.start_soon(self._drive, run)
        validator = self._validator
        run.grow(validator.so_far(), validator.steps, self._held)

    def _stop(self, reason: str) -> None:
        if self._stopped is None:
            self._stopped = reason
            logger.debug('No more steps of the streamed plan start early: %s', reason)

    def arrived(self) -> Validator | None:
        """What checked the steps that arrived, for the validation of the whole plan (`prepare(..., arrived=...)`);
        the stream reads nothing more. `None` when nothing is to be taken from it."""
        self._closed = True
        if self._broken or not self._eager or not self._validator.steps:
            return None
        return self._validator

    async def _drive(self, run: Run) -> None:
        try:
            with record_approvals() as log, use_review_handler(self.options.review_handler):
                self._log = log
                self._result = await run.run(timeout=self.options.timeout,
                                             max_output_chars=self.options.max_output_chars)
        except Exception as exc:  # raised where the plan's result is awaited (`close`), as a whole run raises it
            self._error = exc
        finally:
            self._done.set()

    async def close(self, prepared: Prepared) -> PlanRun | None:
        """The whole plan, validated: the run goes on with it, and its record is returned once it ends; `None` when
        no step started early (run the plan as usual then). The steps that started early must be the plan's own
        steps as the whole text reads them; if one is not (jiter and `json` disagree on it), they are cancelled and
        `None` is returned, so the plan runs afresh (they were all read-only)."""
        self._closed = True
        run = self._run
        if run is None:
            return None
        steps = prepared.plan.steps
        if any(record.status != 'pending' and (record.index >= len(steps) or steps[record.index] != record.step)
               for record in run.records):
            logger.warning('A step that started early is not the step the whole plan holds; the plan runs afresh')
            await self.cancel('Cancelled: the whole plan reads differently from the step that started early; the '
                              'plan runs again as a whole')
            return None
        for extension in run.extensions:
            if isinstance(extension, Events):
                extension.eager = False
        run.close(prepared)
        await self._done.wait()
        if self._error is not None:
            raise self._error
        result = self._result
        assert result is not None and self._log is not None
        result.eager = tuple(record.id for record in result.steps if record.index in self._early.started)
        result.approvals = self._log.records
        return result

    async def cancel(self, reason: str) -> PlanRun | None:
        """Give up on the plan (it did not validate): cancel what started early, recorded as `cancelled` with
        `reason`, and wait until it has stopped. Returns the record of the steps that had started early (what
        they did is kept and reported, never hidden), or `None` when none had."""
        self.abandon(reason)
        if self._run is None:
            return None
        await self._done.wait()
        result = self._result
        if result is None or not self._early.started:
            return None
        started = tuple(record for record in result.steps if record.index in self._early.started)
        early = PlanRun(Plan(tuple(record.step for record in started)), started, result.started_at, result.duration,
                        max_output_chars=self.options.max_output_chars, name=self.name,
                        eager=tuple(record.id for record in started))
        if self._log is not None:
            early.approvals = self._log.records
        return early

    def abandon(self, reason: str) -> None:
        """Give up on the plan without waiting (its task group waits): what started early is cancelled."""
        self._closed = True
        self._stop('the plan was given up')
        if self._run is not None and not self._done.is_set():
            self._run.cancel(reason)

    @property
    def done(self) -> bool:
        """Whether the early run has ended (or never started)."""
        return self._run is None or self._done.is_set()


class _Early(Extension):
    """Notes the steps that start while the plan is still arriving; a run that ends before its plan is whole ends
    with the plan so far."""

    def __init__(self, validator: Validator) -> None:
        self.started: set[int] = set()
        self.run: Run | None = None
        self.validator = validator

    def attach(self, run: Run) -> None:
        self.run = run

    def transition(self, record: StepRecord, status: StepStatus, detail: Mapping[str, Any] | None,
                   item: ItemRecord | None) -> None:
        if status == 'running' and item is None and self.run is not None and self.run.arriving:
            self.started.add(record.index)

    def finish(self, run: Run, stopped: BaseException | None, reason: str) -> None:
        if run.arriving:  # given up before it was whole: its record (and its span) show the steps that arrived
            run.adopt(self.validator.whole_so_far())


class _Unreadable(Exception):
    """The text so far cannot be a plan's JSON (the message says why)."""


_SKIP = re.compile(rb'(?:[^"{}\[\]]+|"(?:[^"\\]|\\.)*")*')
"""Text without a bracket outside its strings (each of them complete), read in one go."""
_SPACE = b' \t\n\r'
_OPEN = frozenset(b'{[')


class _Reader:
    """Finds the steps of a plan's JSON text as it grows (`text`), reading each byte about once: the depth of
    brackets outside strings says where `"steps"` opens and where each of its elements begins and ends."""

    __slots__ = ('after', 'depth', 'ended', 'found', 'list_at', 'pos', 'quote', 'started', 'text')

    def __init__(self) -> None:
        self.text = bytearray()
        self.pos = 0
        """Where reading goes on."""
        self.depth = 0
        self.quote: int | None = None
        """Inside a string that has not ended yet: where to look for its end."""
        self.list_at: int | None = None
        """Where the inside of the `"steps"` list begins, once it has."""
        self.after = False
        """Whether the `"steps"` list has ended."""
        self.started: int | None = None
        """Where the step being read begins."""
        self.ended: int | None = None
        """Where the step being read ends, once it has (it arrives once something follows it)."""
        self.found = 0
        """Steps that have arrived."""

    def next_step(self) -> tuple[Any, int] | None:
        """The next step that has arrived (its JSON value, and the length of its text), or `None` until one has.
        Raises `_Unreadable`."""
        text = self.text
        size = len(text)
        pos = self.pos
        try:
            while True:
                if self.quote is not None:
                    end = _string_end(text, self.quote)
                    if end is None:
                        self.quote = size
                        return None
                    self.quote = None
                    pos = end + 1
                pos = _skip(text, pos)
                if pos == size:
                    return None
                char = text[pos]
                if char == 0x22:  # a string that has not ended yet
                    self.quote = pos + 1
                    continue
                pos += 1
                if char not in _OPEN:
                    self.closed(pos - 1)
                    continue
                arrived = self.opened(pos - 1)
                if arrived is not None:
                    return arrived
        finally:
            self.pos = pos

    def opened(self, at: int) -> tuple[Any, int] | None:
        self.depth += 1
        depth = self.depth
        if depth == 1 and self.text[at] != 0x7B:
            raise _Unreadable('the plan is not a JSON object')
        if depth == 2 and self.list_at is None and self.text[at] == 0x5B and self.steps_open(at):
            self.list_at = at + 1
        elif depth == 3 and self.list_at is not None and not self.after:  # a step begins: the one before has arrived
            arrived = self.arrived(at)
            self.started, self.ended = at, None
            return arrived
        elif depth == 2 and self.after and self.ended is not None:  # a value after "steps": the last step has arrived
            arrived = self.arrived(None)
            self.started = self.ended = None
            return arrived
        return None

    def closed(self, at: int) -> None:
        self.depth -= 1
        if self.depth < 0:
            raise _Unreadable(f'an unmatched {chr(self.text[at])!r}')
        if self.list_at is None or self.after:
            return
        if self.depth == 2:
            self.ended = at + 1
        elif self.depth == 1:  # the end of "steps"
            self.after = True
            self.separated(self.ended if self.ended is not None else self.list_at, at, first=True)

    def steps_open(self, at: int) -> bool:
        """Whether the list opening at `at` (in the top-level object) is the value of `"steps"`."""
        try:
            data = jiter.from_json(bytes(self.text[: at + 1]), partial_mode='on')
        except ValueError as exc:
            raise _Unreadable(f'the text so far is not JSON jiter reads ({exc})') from None
        return isinstance(data, dict) and bool(data) and next(reversed(data)) == 'steps'

    def arrived(self, following: int | None) -> tuple[Any, int] | None:
        """The step before the one beginning at `following` (`None`: the last one), read; `None` if none."""
        if self.started is None:  # the first step begins
            if following is not None:
                assert self.list_at is not None
                self.separated(self.list_at, following, first=True)
            return None
        if self.ended is None:
            raise _Unreadable(f'steps[{self.found}] is not a JSON object')
        if following is not None:
            self.separated(self.ended, following, first=False)
        start, end = self.started, self.ended
        try:
            value = jiter.from_json(bytes(memoryview(self.text)[start:end]))
        except ValueError as exc:
            raise _Unreadable(f'steps[{self.found}] is not JSON jiter reads ({exc})') from None
        self.found += 1
        return value, end - start

    def separated(self, start: int, end: int, *, first: bool) -> None:
        """The text between two steps (or a step and an end of the list) holds only a comma and spaces."""
        between = bytes(memoryview(self.text)[start:end]).strip(_SPACE)
        if between != (b'' if first else b','):
            raise _Unreadable(f'steps[{self.found}] is not a JSON object')


def _skip(text: bytearray, pos: int) -> int:
    match = _SKIP.match(text, pos)
    assert match is not None  # it matches the empty string
    return match.end()


def _string_end(text: bytearray, start: int) -> int | None:
    """Where the string whose end is looked for from `start` on ends (its closing quote), or `None` if not yet."""
    while True:
        end = text.find(b'"', start)
        if end < 0:
            return None
        slashes = 0
        while text[end - 1 - slashes] == 0x5C:
            slashes += 1
        if not slashes % 2:
            return end
        start = end + 1
