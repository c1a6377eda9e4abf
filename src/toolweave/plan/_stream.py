"""Plans that start while they are written: the model streams the arguments of `execute_tool_plan`, and the steps
that may run early start as soon as they have arrived.

`PlanStream.feed` takes the arguments text as it streams. jiter reads the text so far (`partial_mode='on'`: the
values it can complete, nothing half-written) whenever a piece may have opened an object or an array, which is
when a step may have been followed by the next one; a step has arrived once something follows it in `"steps"`,
or follows `"steps"` itself. Reading the whole text again costs O(length) each time, so a plan is read about as
many times as it has objects and arrays, not once per piece (see `benchmarks/bench_eager.py` for what it costs).

An arrived step starts early only when all of this holds:

- it calls a tool marked read-only (`ToolMetadata.read_only is True`; MCP tools carry `readOnlyHint`) that needs
  no approval, or it is a select step (pure);
- it validates with the steps before it: the plan validator runs on the plan so far, in which the steps held back
  stand as placeholders (a select step of nothing, with the step's id), so that a reference to a step that has not
  arrived, an unknown tool, or literal arguments its tool's schema rejects keep it back;
- what it refers to has started early too, and has finished (the usual dependency counting: a step that refers
  to a held step waits with it).

Every other step is held until the whole plan has arrived and validated as usual. `close` then hands the whole
plan to the run: the steps that started early keep their records (nothing runs twice), the held ones are
released, and the run goes on as a run of the whole plan would; its `PlanRun` lists the early ones in `eager`.
A plan that does not validate, a stream that breaks off, or a reply whose plan never runs cancels what started
early (`cancel`, `abandon`), recorded as `cancelled`; nothing gated or side-effecting ever started.

A step id that cannot be used (missing, malformed, a duplicate), or text jiter cannot read, stops early starts
for the rest of that plan: such a plan is settled at `close`, as any plan is. Durable runs, whole-plan review and
index-based plans never start a step early.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import jiter

from toolweave.approval import ApprovalLog, record_approvals, use_review_handler
from toolweave.plan._kernel import Extension, Run
from toolweave.plan._model import Plan, PlanStep, StepForms, StepStatus
from toolweave.plan._observe import Events, observers
from toolweave.plan._options import RunOptions
from toolweave.plan._parse import Parsed, Problems, parse_lenient
from toolweave.plan._record import EventHandler, ItemRecord, PlanRun, StepRecord
from toolweave.plan._refs import ID_PATTERN
from toolweave.plan._retry import RetryCalls
from toolweave.plan._review import Review
from toolweave.plan._validate import Prepared, prepare
from toolweave.tools import ToolCallContext, Toolset

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

__all__ = ('PlanStream',)

logger = logging.getLogger('toolweave.plan')

_OPENERS = frozenset('{[')
"""A piece of text without these cannot have started the next step (nor the key after `"steps"`)."""


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
        self._refused = refused
        self._clean = clean
        self._earlier_steps = {plan: {record.id: record for record in run.steps}
                               for plan, run in (earlier or {}).items()}
        self._text = bytearray()
        self._steps: list[PlanStep] = []
        """Each step that has arrived, as it stands in the plan so far: itself when it may start early, else a
        placeholder."""
        self._accepted: set[int] = set()
        self._ids: set[str] = set()
        self._stopped: str | None = None if eager else 'early starts are off for this plan'
        """Why no more steps start early, if none do."""
        self._closed = False
        self._run: Run | None = None
        self._done = anyio.Event()
        self._result: PlanRun | None = None
        self._error: Exception | None = None
        self._log: ApprovalLog | None = None
        self._early = _Early()

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
        self._text += text.encode()
        if _OPENERS.isdisjoint(text):
            return
        try:
            self._read()
        except Exception:  # a bug here must not break the model's stream: the plan still runs once it has arrived
            logger.exception('Reading the streamed plan failed; its steps start once it has arrived')
            self._stop('reading the plan failed')

    def _read(self) -> None:
        try:
            data = jiter.from_json(bytes(self._text), partial_mode='on')
        except ValueError as exc:
            self._stop(f'the text so far is not JSON jiter reads ({exc})')
            return
        steps = data.get('steps') if isinstance(data, dict) else None
        if not isinstance(steps, list):
            return
        # A step has arrived once something follows it: the next step, or a key after "steps".
        arrived = len(steps) if next(reversed(data)) != 'steps' else len(steps) - 1
        for raw in steps[len(self._steps):arrived]:
            if self._stopped is not None:
                return
            self._arrive(raw)

    def _arrive(self, raw: Any) -> None:
        index = len(self._steps)
        step = self._step(raw)
        step_id = step.id if step is not None else raw.get('id') if isinstance(raw, dict) else None
        if not isinstance(step_id, str) or ID_PATTERN.fullmatch(step_id) is None or step_id in self._ids:
            self._stop(f'steps[{index}] has no usable id')  # the whole plan will not validate
            return
        self._ids.add(step_id)
        if step is not None and self._may_start_early(step):
            self._steps.append(step)
            prepared = self._prepare()
            if prepared is not None:
                self._accepted.add(index)
                self._grow(prepared)
                return
            self._steps.pop()
        self._steps.append(PlanStep(step_id, '', {}, None, StepForms(source={})))

    def _step(self, raw: Any) -> PlanStep | None:
        """The step as the whole plan will read it, or `None` when it has problems of its own."""
        if not isinstance(raw, dict):
            return None
        parsed = parse_lenient({'steps': [self._clean(raw)]}, 'id')
        return None if parsed.problems else parsed.plan.steps[0]

    def _may_start_early(self, step: PlanStep) -> bool:
        if step.is_select:
            return True
        tool = self.tools.find(step.tool)
        return tool is not None and tool.definition.metadata.read_only is True and not tool.requires_approval

    def _prepare(self) -> Prepared | None:
        options = self.options
        prepared, _ = prepare(Parsed(Plan(tuple(self._steps)), Problems()), self.tools, max_steps=options.max_steps,
                              max_items=options.max_items, extra_refused=self._refused, earlier=self._earlier_steps)
        return prepared

    def _grow(self, prepared: Prepared) -> None:
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
        run.grow(prepared, [index for index in range(len(self._steps)) if index not in self._accepted])

    def _stop(self, reason: str) -> None:
        if self._stopped is None:
            self._stopped = reason
            logger.debug('No more steps of the streamed plan start early: %s', reason)

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
        early = PlanRun(Plan(tuple(record.step for record in started)), started,
                        (tuple(record.id for record in started),), result.started_at, result.duration,
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
    """Notes the steps that start while the plan is still arriving."""

    def __init__(self) -> None:
        self.started: set[int] = set()
        self.run: Run | None = None

    def attach(self, run: Run) -> None:
        self.run = run

    def transition(self, record: StepRecord, status: StepStatus, detail: Mapping[str, Any] | None,
                   item: ItemRecord | None) -> None:
        if status == 'running' and item is None and self.run is not None and self.run.arriving:
            self.started.add(record.index)
