"""Validation before anything runs: ids, tools, references, cycles and limits, every problem at once.

A valid plan comes out prepared for the executor: tools looked up, arguments compiled, the dependency graph
(dependencies in order of first appearance, dependents, the longest chain of dependents from each step) built in
O(steps + references); dependency levels (waves) are counted only when read.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import accumulate, islice
from typing import Any

import anyio

from toolweave.exceptions import UnknownToolError
from toolweave.plan._contracts import Contracts
from toolweave.plan._expr import Expression, ExpressionError, compile_expression
from toolweave.plan._model import Dialect, GrowingSteps, Plan, PlanStep, PlanSteps, StepForms
from toolweave.plan._parse import (
    DEFAULT_MAX_BYTES,
    EMPTY_PLAN,
    INLINE_BYTES,
    INLINE_STEPS,
    Parsed,
    Problems,
    describe_type,
    excerpt,
    parse_lenient,
    step_label,
    too_many_steps,
)
from toolweave.plan._refs import ID_PATTERN, IDS_PATTERN
from toolweave.plan._scan import Binding, OverBudget, RefTable, Rewrite, Scanner, position_of
from toolweave.tools import CheckedArguments, Tool, Toolset, ToolsetItem

__all__ = ('DEFAULT_MAX_ITEMS', 'INLINE_PREPARE_STEPS', 'PLAN_TOOL_NAMES', 'Prepared', 'RunsPlans', 'StepKind',
           'Validator', 'as_toolset', 'each_tool', 'prepare', 'prepare_async', 'validate_plan')

DEFAULT_MAX_ITEMS = 100
"""Elements a `for_each` step may run over, unless the run says otherwise."""

INLINE_PREPARE_STEPS = INLINE_STEPS
INLINE_PREPARE_VALUES = 20_000
"""Plans with up to `INLINE_PREPARE_STEPS` steps (as many as are read on the event loop) and
`INLINE_PREPARE_VALUES` values in their arguments are validated on the event loop (about 12 ms at most here, with
typed tools checking every literal); larger ones in a worker thread, which gives the event loop's thread its turn
every few milliseconds. Below that, a trip to the thread and back costs more than it saves: about 1.5 ms here, as
much as validating 500 steps."""
MAX_LISTED = 10
"""An unknown tool's error lists every tool name up to this many, else the closest few."""
PLAN_TOOL_NAMES = frozenset({'execute_tool_plan', 'execute_plan'})
"""Meta-tools a plan step may never call: plans do not nest."""
_NO_DEPS: tuple[int, ...] = ()
_SINGLES: list[tuple[int]] = []
_SINGLES_GROWING = threading.Lock()
_MAX_SINGLES = 1 << 16


def _single(index: int) -> tuple[int, ...]:
    """`(index,)`, shared by every plan: most steps depend on one step and have one dependent, and a tuple each that
    lives as long as its plan is work for the garbage collector (with a thousand plans in flight, a large part of
    it). Shared up to `_MAX_SINGLES`; beyond it, a new tuple."""
    if index < len(_SINGLES):
        return _SINGLES[index]
    if index >= _MAX_SINGLES:
        return (index,)
    with _SINGLES_GROWING:  # plans are validated in worker threads too: one grows the list at a time
        start = len(_SINGLES)
        _SINGLES.extend([(i,) for i in range(start, index + 1)])  # one C call: readers see a whole prefix
    return _SINGLES[index]


def each_tool(tools: Sequence[Tool | None]) -> Iterable[Tool]:
    """The tools of `tools` (a plan's, per step) each once, in order, without the `None` of select steps: found in C,
    as a plan calls a few tools many times."""
    distinct = dict(zip(map(id, tools), tools, strict=True))
    distinct.pop(id(None), None)
    return distinct.values()  # type: ignore[return-value]  # the Nones are gone


def _valid_ids(ids: Collection[str]) -> bool:
    """Whether every id in `ids` is valid (`ID_PATTERN`), in one pass of the regex over them all joined by newlines
    (which no valid id holds: an id with a newline in it adds a line, and fails the count)."""
    joined = '\n'.join(ids) + '\n'
    return joined.count('\n') == len(ids) and IDS_PATTERN.fullmatch(joined) is not None


def _distinct(found: list[int]) -> tuple[int, ...]:
    """The steps in `found` (in order of first appearance, with repeats) each once, as a tuple."""
    count = len(found)
    if count == 1:
        return _single(found[0])
    if count == 2:
        first, second = found
        return _single(first) if first == second else (first, second)
    if count == 3:  # (a dict for three ints costs as much as the rest of this function)
        first, second, third = found
        if first != second and first != third and second != third:
            return (first, second, third)
    return tuple(dict.fromkeys(found)) if count else _NO_DEPS


class RunsPlans:
    """Marks a tool that runs plans itself (`PlanTool`): a plan step may not call one, whatever its name, because
    plans do not nest."""


@dataclass(slots=True)
class StepKind:
    """What a step does besides (or instead of) one tool call, compiled: its `from` and `select`, its `for_each`
    list, its `when` condition. Only steps that use one of them have one."""

    source: Any = None
    source_rewrite: Rewrite = False
    select: Expression | None = None
    for_each: Any = None
    for_each_rewrite: Rewrite = False
    when_source: Any = None
    when_rewrite: Rewrite = False
    when: Expression | None = None


@dataclass(slots=True)
class Prepared:
    """A validated plan, ready to run."""

    plan: Plan
    tools: list[Tool | None]
    """Per step: its tool (`None` for a select step)."""
    rewrite: list[Rewrite]
    """Per step: what of its arguments holds references to replace at run time (falsy: nothing)."""
    table: RefTable
    deps: list[tuple[int, ...]]
    """Per step: the steps it refers to, each once, in order of first appearance (a skipped step names the
    first that failed)."""
    dependents: Sequence[Sequence[int]]
    """Per step: the steps that refer to it, in plan order."""
    kinds: dict[int, StepKind]
    """The steps that select, loop or have a condition, by position."""
    external: list[Any]
    """Records of earlier plans' steps the plan refers to (see `external_position`)."""
    max_items: int = DEFAULT_MAX_ITEMS
    chains: list[int] = field(default_factory=list[int])
    """Per step: the number of steps on the longest chain of dependents from it to the end of the plan (itself
    included); the scheduler starts the step with the longest chain first."""
    checked: dict[int, Mapping[str, Any]] = field(default_factory=dict[int, Mapping[str, Any]])
    """Per step without references whose tool validated its arguments (`Tool.check_arguments`): the arguments to
    call it with, so that the call does not validate them again (the run takes each once)."""
    counted_waves: list[int] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def waves(self) -> list[int]:
        """Per step: its dependency level (0 for steps without references). Counted when first read (by a display,
        a trace, a record's `wave`), not by every validation: running a plan never needs them. A plan still
        arriving (`Validator.so_far`) has its levels counted again once it has grown."""
        waves = self.counted_waves
        if waves is None or len(waves) != len(self.deps):
            waves = self.counted_waves = _levels(self.deps, _order(self.deps, self.dependents)[0])
        return waves


def as_toolset(tools: Toolset | Iterable[ToolsetItem]) -> Toolset:
    """`tools` as a Toolset (a Toolset is used as is, so tools added to it later are seen)."""
    return tools if isinstance(tools, Toolset) else Toolset(tools)


def validate_plan(plan: Plan | str | bytes | Mapping[str, Any], tools: Toolset | Iterable[ToolsetItem], *,
                  max_steps: int = 10_000, max_items: int = DEFAULT_MAX_ITEMS,
                  max_bytes: int = DEFAULT_MAX_BYTES) -> list[str]:
    """Every problem of `plan` against `tools` (a Toolset or anything `Toolset(...)` accepts); `[]` when it
    can run. Each message names the step (index and id) and the field, and says what to do. `max_steps`,
    `max_items` and `max_bytes` are the limits `run_plan` applies.

    ```python
    print(validate_plan({'steps': [{'id': 'a', 'tool': 'nope', 'arguments': '{}'}]}, [FakeTool('echo')]))
    #> ["steps[0] (id 'a'): Unknown tool 'nope' in step 'a'. Available tools: echo."]
    ```
    """
    parsed = plan if isinstance(plan, Parsed) else Parsed(plan, Problems()) if isinstance(plan, Plan) else (
        parse_lenient(plan, max_bytes=max_bytes, max_steps=max_steps))
    _, problems = prepare(parsed, as_toolset(tools), max_steps=max_steps, max_items=max_items)
    return problems.messages()


async def prepare_async(parsed: Parsed, tools: Toolset, *, max_steps: int, max_items: int = DEFAULT_MAX_ITEMS,
                        extra_refused: frozenset[str] = frozenset(),
                        earlier: Mapping[str, Mapping[str, Any]] | None = None,
                        arrived: Validator | None = None) -> tuple[Prepared | None, Problems]:
    """`prepare`, without holding the event loop for long (validating 10,000 steps takes about 100 ms): a plan of
    at most `INLINE_PREPARE_STEPS` steps, read on the event loop, is validated there until it turns out to hold
    more than `INLINE_PREPARE_VALUES` values; then, or for a larger plan, in a worker thread."""
    work = partial(prepare, parsed, tools, max_steps=max_steps, max_items=max_items, extra_refused=extra_refused,
                   earlier=earlier, arrived=arrived)
    steps = parsed.plan.steps
    if len(steps) > max_steps:
        return work()  # refused before any work
    if len(steps) <= INLINE_PREPARE_STEPS and (parsed.text_size is None or parsed.text_size <= INLINE_BYTES):
        try:
            return work(budget=INLINE_PREPARE_VALUES)
        except OverBudget:  # more to check than the event loop should wait for: all of it again, in a thread
            work = partial(work, arrived=None)  # (what was admitted as it streamed in may be half taken over)
    return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)


def prepare(parsed: Parsed, tools: Toolset, *, max_steps: int, max_items: int = DEFAULT_MAX_ITEMS,
            extra_refused: frozenset[str] = frozenset(), earlier: Mapping[str, Mapping[str, Any]] | None = None,
            arrived: Validator | None = None, budget: int | None = None) -> tuple[Prepared | None, Problems]:
    """Check everything; return the prepared plan (None if there is any problem) and the problems. `arrived`: the
    validator that checked the plan's steps as they streamed in (`Validator.admit`); the steps it checked, as the
    whole plan holds them, are not checked again (`Validator.resume`). Either way the outcome is the same.
    `budget`: raise `OverBudget` rather than walk more values (elements of objects and arrays) of the steps'
    arguments than this."""
    plan = parsed.plan
    problems = Problems()
    problems.extend(parsed.problems)
    steps = plan.steps
    n = len(steps)
    if n == 0 and plan.dialect == 'id' and (-1, 'steps') not in parsed.reported:
        problems.add(-1, f'{EMPTY_PLAN}: "steps" is missing or empty. Add steps like '
                         '{"id": "s1", "tool": "<tool name>", "arguments": {...}}.')
    if n > max_steps:
        problems.add(-1, too_many_steps(n, max_steps))
        return None, problems
    refused = PLAN_TOOL_NAMES | extra_refused
    validator = None
    if arrived is not None and arrived.fits(tools, plan.dialect, max_items, refused, earlier):
        validator = arrived.resume(plan, parsed.reported, problems)
    if validator is None:
        validator = Validator(tools, dialect=plan.dialect, max_items=max_items, refused=refused, earlier=earlier,
                              reported=parsed.reported, problems=problems)
    if budget is not None:
        validator.scanner.left = budget
    validator.add(steps[len(validator.steps):] if validator.steps else steps)
    return validator.finish(plan)


_PLACEHOLDER = StepForms(source={})
"""What a step held back from a streamed plan stands as meanwhile: a select step of nothing."""


@dataclass(slots=True)
class _Batch:
    """A tool's steps without references, to check in one call of `many` (its `Tool.check_arguments_many`)."""

    tool: Tool
    many: Callable[..., Any]
    indices: list[int] = field(default_factory=list[int])
    arguments: list[Mapping[str, Any]] = field(default_factory=list[Mapping[str, Any]])


class Validator:
    """Validation of one plan's steps, in plan order: `add` checks steps (ids, tools, references, arguments:
    everything about each step, in O(its size)), `finish` the plan as a whole (`output_steps`, cycles, the graph).
    `prepare` adds every step at once, then finishes.

    A plan that streams in is checked as it arrives, by the same validator: `admit` adds the next step if it
    validates with the steps before it (it can refer to no later step, nor to itself: later steps have not arrived)
    and takes it back if not; `hold` adds a placeholder for a step held back for the whole plan, so that later steps
    may refer to it. Meanwhile `so_far` is the plan so far, prepared to run: its graph grows with each step (waves,
    dependents; every chain counts 1, as nothing is known of what comes after). At close, `prepare(...,
    arrived=validator)` checks the whole plan, taking as checked the steps before the first one held back (those the
    whole text holds unchanged): each step is checked about once, however the plan arrived. When every step arrived
    and was admitted, the graph they grew is the whole plan's too: only the chains are counted at close.
    """

    __slots__ = ('available', 'batches', 'batching', 'chains', 'check_literals', 'checked', 'contracts', 'deps',
                 'dependents', 'dialect', 'earlier', 'found', 'graph_taken', 'growing', 'hints', 'ids', 'kinds',
                 'max_items', 'problems', 'refused', 'reported', 'resolved', 'rewrite', 'scanner', 'seen', 'source',
                 'steps', 'taken', 'tools')

    def __init__(self, tools: Toolset, *, dialect: Dialect, max_items: int, refused: frozenset[str],
                 earlier: Mapping[str, Mapping[str, Any]] | None, reported: set[tuple[int, str]] | None = None,
                 problems: Problems | None = None) -> None:
        self.tools = tools
        self.dialect: Dialect = dialect
        self.max_items = max_items
        self.refused = refused
        self.earlier = earlier
        self.reported = reported if reported is not None else set[tuple[int, str]]()
        """(step index, field) pairs the parser reported, not reported again."""
        self.problems = problems if problems is not None else Problems()
        self.steps = GrowingSteps()
        self.ids: dict[str, int] = {}
        self.resolved: list[Tool | None] = []
        self.rewrite: list[Rewrite] = []
        self.deps: list[tuple[int, ...]] = []
        self.kinds: dict[int, StepKind] = {}
        self.scanner = Scanner(self.ids, self.steps.ids, dialect, earlier)
        self.contracts = Contracts(self.resolved, self.steps)
        self.check_literals = False
        """Whether a tool of the plan restricts its arguments (literal arguments are then checked)."""
        self.checked: dict[int, Mapping[str, Any]] = {}
        """Per step without references whose tool checked its arguments: the arguments to call it with."""
        self.batches: dict[int, _Batch] | None = None
        """While `add` checks steps: per tool (by `id`) that checks many calls at once, its steps without
        references, checked together once they are all known (`_check_batches`)."""
        self.batching: set[int] = set()
        """The tools (by `id`) that check many calls at once (`Tool.check_arguments_many`)."""
        self.seen: set[int] = set()
        """The tools (by `id`) whose contracts were read."""
        self.found: dict[str, Tool] = {}
        """Tools by name, as looked up."""
        self.available: list[str] | None = None
        self.hints: dict[str, str] = {}
        """What the message about an unknown tool adds, by name."""
        # A plan that streams in (`admit`, `hold`).
        self.dependents: list[list[int]] = []
        self.chains: list[int] = []
        self.growing: Prepared | None = None
        # The whole plan of a plan that streamed in (`resume`).
        self.source: Validator | None = None
        """The validator that checked the steps as they arrived."""
        self.taken: frozenset[int] = frozenset()
        """The steps `add` takes as `source` checked them."""
        self.graph_taken = False
        """Whether every step is taken from `source`, and with them the graph they grew (`finish`)."""

    # --- checking steps -------------------------------------------------------------------------------------------

    def add(self, steps: PlanSteps) -> None:
        """Check `steps`, the plan's next ones, against the steps before them and one another."""
        start = len(self.steps)
        self.steps.extend(steps)
        self._check_ids(start)
        self._check_tools(start)
        self._read_contracts(start)
        taken = self.taken
        self.batches = {}
        try:
            for index in range(start, len(self.steps)):
                if index in taken:
                    self._take(index)
                else:
                    self._check_step(index)
            self._check_batches(self.batches)
        finally:
            self.batches = None

    def _check_batches(self, batches: Mapping[int, _Batch]) -> None:
        """Check each tool's steps without references in one call of its validation (`Tool.check_arguments_many`),
        or, when that finds any of them wrong (or cannot), each on its own, which says what is wrong."""
        for batch in batches.values():
            tool, many, indices, arguments = batch.tool, batch.many, batch.indices, batch.arguments
            try:
                checked = many(tool, arguments)
            except Exception:
                checked = None  # each step's own check decides, and says what is wrong
            if checked is not None and len(checked) == len(indices) and all(
                    type(each) is CheckedArguments or isinstance(each, Mapping) for each in checked):
                self.checked.update(zip(indices, checked, strict=True))
                continue
            for index, given in zip(indices, arguments, strict=True):
                problems, one = self.contracts.check_step(tool, given, False, self.scanner.table, True)
                if problems:
                    self._report(index, problems)
                elif one is not None:
                    self.checked[index] = one

    def finish(self, plan: Plan) -> tuple[Prepared | None, Problems]:
        """Check the whole of `plan` (whose steps are the ones added): the steps `output_steps` names, cycles; then
        the prepared plan, or `None` when there is any problem."""
        problems = self.problems
        _check_output_steps(plan, self.ids, problems)
        source = self.source
        dependents: Sequence[Sequence[int]]
        if source is not None and self.graph_taken:  # the graph the steps grew as they arrived: no cycle, in order
            dependents, chains = source.dependents, _chains(self.deps, range(len(self.deps)))
        else:
            dependents, chains = _graph(plan, self.deps, problems)
        if problems:
            return None, problems
        scanner = self.scanner
        return Prepared(plan, self.resolved, self.rewrite, scanner.table, self.deps, dependents, self.kinds,
                        scanner.external, self.max_items, chains, self.checked), problems

    def _take(self, index: int) -> None:
        """Step `index` as `source` checked it when it arrived (see `resume`)."""
        source = self.source
        assert source is not None
        self.rewrite.append(source.rewrite[index])
        self.deps.append(source.deps[index])
        kind = source.kinds.get(index)
        if kind is not None:
            self.kinds[index] = kind
        checked = source.checked.get(index)
        if checked is not None:
            self.checked[index] = checked

    def _label(self, index: int) -> str:
        """`steps[2] (id 'fetch')`; just `steps[2]` in index-based plans, whose ids the model never wrote."""
        return step_label(index, self.steps.ids[index] if self.dialect == 'id' else None)

    def _check_ids(self, start: int) -> None:
        written, ids, reported, problems = self.steps.ids, self.ids, self.reported, self.problems
        fullmatch = ID_PATTERN.fullmatch
        new = {step_id: index for index, step_id in enumerate(islice(written, start, None), start)}
        if (len(new) == len(written) - start and (not ids or ids.keys().isdisjoint(new))
                and _valid_ids(new)):
            ids.update(new)  # the common case: unique, valid ids
            return
        for index in range(start, len(written)):
            step_id = written[index]
            if step_id not in ids and fullmatch(step_id) is not None:
                ids[step_id] = index
                continue
            if reported and (index, 'id') in reported:
                continue
            first = ids.get(step_id)
            if first is not None:
                problems.add(index, f'{self._label(index)}: Duplicate step ID: {step_id!r} (also used by '
                                    f'steps[{first}]). Give each step its own id.')
                continue
            if not step_id.strip():
                problems.add(index, f'steps[{index}]: Step ID cannot be null or blank. Give every step a unique "id" '
                                    'such as "fetch_1".')
                continue
            if ID_PATTERN.fullmatch(step_id) is None:
                why = 'is longer than 64 characters' if len(step_id) > 64 else 'has characters outside [A-Za-z0-9_-]'
                problems.add(index, f'{self._label(index)}: invalid step id {step_id!r}: it {why}. Use letters, '
                                    'digits, "_" and "-" only, for example "weather_tokyo".')
            ids[step_id] = index

    def _check_tools(self, start: int) -> None:
        names, forms, found = self.steps.tools, self.steps.forms, self.found
        selects = {index for index, form in forms.items() if index >= start and form.source is not None}
        if not self.reported:  # the common case: look each new name up once, then one list in one pass
            for name in {names[index] for index in range(start, len(names)) if index not in selects}:
                if name not in found and self._tool_for(name) is None:
                    break
            else:
                if selects:
                    self.resolved.extend([None if index in selects else found[names[index]]
                                          for index in range(start, len(names))])
                else:
                    self.resolved.extend([found[name] for name in islice(names, start, None)])
                return
        for index in range(start, len(names)):
            self.resolved.append(self._tool(index))

    def _tool(self, index: int) -> Tool | None:
        """Step `index`'s tool, or `None` (a select step, or a problem, reported)."""
        step = self.steps[index]
        name = step.tool
        if step.is_select:  # a select step calls no tool
            return None
        hit = self.found.get(name)
        if hit is not None:
            return hit
        if self.reported and (index, 'tool') in self.reported:
            return None
        label = self._label(index)
        if not name.strip():
            self.problems.add(index, f'{label}: Step tool name cannot be null or blank. Set "tool" to one of the '
                                     'available tools.')
            return None
        try:
            tool: Tool | None = self.tools.get(name)
        except UnknownToolError:
            tool = None
        if name in self.refused or (tool is not None and _runs_plans(tool)):
            self.problems.add(index, f'{label}: Step {step.id!r} cannot call {name!r} (recursive plans are not '
                                     'allowed). Call the tools themselves as steps of this plan.')
            return None
        if tool is None:
            if self.available is None:
                self.available = [t for t in self.tools.names if t not in self.refused]
            in_step = f' in step {step.id!r}' if self.dialect == 'id' else ''  # index-based ids are not the model's
            if name not in self.hints:  # difflib once per unknown name, for the first few names only
                self.hints[name] = _hint(name, self.available, close=len(self.hints) < 5)
            self.problems.add(index, f'{label}: Unknown tool {name[:100]!r}{in_step}.{self.hints[name]}')
            return None
        self.found[name] = tool
        return tool

    def _read_contracts(self, start: int) -> None:
        seen = self.seen
        for tool in each_tool(self.resolved[start:]):
            if id(tool) not in seen:
                self._read_contract(tool)

    def _read_contract(self, tool: Tool) -> None:
        """A new tool's contract: references are checked against output schemas once a tool declares one, literals
        against input schemas once a tool's schema restricts anything."""
        self.seen.add(id(tool))
        contract = self.contracts.of(tool)
        if contract.output is not None:
            self.scanner.check = self.contracts.check_reference
        if not contract.permissive:
            self.check_literals = True
        if contract.own_many is not None:
            self.batching.add(id(tool))

    def _check_step(self, index: int) -> bool:
        """Check step `index` and note what it needs; whether it has problems (added to `problems`)."""
        scanner = self.scanner
        steps = self.steps
        arguments = steps.arguments[index]
        forms = steps.forms.get(index) if steps.forms else None
        plain = forms is None
        reported = self.reported
        if isinstance(arguments, str) or (reported and (index, 'arguments') in reported):
            if plain:
                self.rewrite.append(False)
                self.deps.append(_NO_DEPS)
                return False
            arguments = {}
        try:
            found, changes, messages = scanner.scan(arguments, index) if plain else scanner.scan(
                arguments, index, 'arguments', forms is not None and forms.for_each is not None)
        except RecursionError:
            found, changes, messages = [], False, ['arguments: nested too deeply to check. Use fewer levels of '
                                                   'nested objects and arrays.']
        if not plain:
            messages = list(messages)  # a list of this step's own (the scanner reuses an empty one)
            self.kinds[index] = _prepare_kind(steps[index], index, scanner, found, messages, self.max_items,
                                              self.contracts)
        tool = self.resolved[index]
        if self.check_literals and tool is not None and not (
                plain and not changes and not messages and self._defer(index, tool, arguments)):
            more, checked = self.contracts.check_step(tool, arguments, changes, scanner.table,
                                                      not changes and not messages)
            if more:
                messages = [*messages, *more]
            elif checked is not None and plain:
                self.checked[index] = checked
        if messages:
            self._report(index, messages)
        self.rewrite.append(changes)
        self.deps.append(_distinct(found))
        return bool(messages)

    def _defer(self, index: int, tool: Tool, arguments: Any) -> bool:
        """Whether step `index` (no references, no problems so far) is left to be checked with its tool's other
        such steps, once `add` has seen them all (a tool that checks many calls at once)."""
        if self.batches is None or id(tool) not in self.batching or type(arguments) is not dict:
            return False
        batch = self.batches.get(id(tool))
        if batch is None:
            many = self.contracts.of(tool).own_many
            assert many is not None  # `batching` holds only such tools
            batch = self.batches[id(tool)] = _Batch(tool, many)
        batch.indices.append(index)
        batch.arguments.append(arguments)
        return True

    def _report(self, index: int, messages: Iterable[str]) -> None:
        label = self._label(index)
        for message in messages:
            self.problems.add(index, f'{label}: {message}')

    # --- a plan that streams in -------------------------------------------------------------------------------------

    def admit(self, step: PlanStep) -> bool:
        """Add `step`, the next one of a plan still arriving (its id new and valid), if it validates with the steps
        before it; whether it did. A step that does not is taken back (the validator is as it was), to be held
        (`hold`). The checks are `add`'s, for one step (a tool that is not found is not admitted: the whole plan
        reports it)."""
        tool = None
        if step.forms is None or not step.is_select:
            tool = self.found.get(step.tool)
            if tool is None:
                tool = self._tool_for(step.tool)
                if tool is None:
                    return False
            if id(tool) not in self.seen:
                self._read_contract(tool)
        index = len(self.steps.ids)
        table, external = self.scanner.table, self.scanner.external
        marks = len(table.whole), len(table.objects), len(table.templates), len(external)
        self.steps.append(step)
        self.ids[step.id] = index
        self.resolved.append(tool)
        if not self._check_step(index) and index not in self.deps[index]:  # a reference to itself: a cycle
            self._link(index)
            return True
        self.problems = Problems()
        self.steps.truncate(index)
        del self.resolved[index:], self.rewrite[index:], self.deps[index:]
        self.kinds.pop(index, None)
        self.checked.pop(index, None)
        del self.ids[step.id]
        # The references it bound first leave the table (a later step binds and checks them again), and so do the
        # earlier plans' steps it was the first to name.
        for part, size in ((table.whole, marks[0]), (table.objects, marks[1]), (table.templates, marks[2])):
            while len(part) > size:
                part.popitem()
        del external[marks[3]:]
        return False

    def _tool_for(self, name: str) -> Tool | None:
        """The tool a step may call by `name` (found, not a plan tool), remembered; else `None`."""
        try:
            tool = self.tools.get(name) if name not in self.refused else None
        except UnknownToolError:
            return None
        if tool is None or _runs_plans(tool):
            return None
        self.found[name] = tool
        return tool

    def hold(self, step_id: str) -> None:
        """Add a placeholder for the next step, held back until the whole plan has arrived: a select step of nothing
        with the step's id (new and valid), so that later steps may refer to it (and wait for it)."""
        index = len(self.steps.ids)
        placeholder = PlanStep(step_id, '', {}, None, _PLACEHOLDER)
        self.steps.append(placeholder)
        self.ids[step_id] = index
        self.resolved.append(None)
        self._check_step(index)
        self._link(index)

    def _link(self, index: int) -> None:
        """Step `index` joins the graph of the plan so far (it refers only to steps before it)."""
        dependents = self.dependents
        for dep in self.deps[index]:
            dependents[dep].append(index)
        dependents.append([])
        self.chains.append(1)

    def so_far(self) -> Prepared:
        """The plan so far, prepared to run: the validator's own lists, growing with each step (its `plan` holds no
        steps: see `whole_so_far`)."""
        if self.growing is None:
            scanner = self.scanner
            self.growing = Prepared(Plan((), dialect=self.dialect), self.resolved, self.rewrite, scanner.table,
                                    self.deps, self.dependents, self.kinds, scanner.external,
                                    self.max_items, self.chains, self.checked)
        return self.growing

    def whole_so_far(self) -> Prepared:
        """`so_far` with its `plan` holding the steps so far (O(steps): for a plan that ends before it is whole)."""
        return replace(self.so_far(), plan=Plan(self.steps[:], dialect=self.dialect))

    def fits(self, tools: Toolset, dialect: Dialect, max_items: int, refused: frozenset[str],
             earlier: Mapping[str, Mapping[str, Any]] | None) -> bool:
        """Whether this validator checks steps as a validation with these settings does."""
        return (tools is self.tools and dialect == self.dialect and max_items == self.max_items
                and refused == self.refused and (earlier or {}) == (self.earlier or {}))

    def resume(self, plan: Plan, reported: set[tuple[int, str]], problems: Problems) -> Validator | None:
        """A validator of the whole `plan` that takes as checked the steps this one admitted as they arrived, where
        `plan` holds them unchanged and they refer only to such steps (one that refers to a step held back, or read
        differently, is checked again: what it refers to is not what it was checked against). A step taken
        validates in the whole plan as it did then, and what checking it left behind (references bound, earlier
        plans' steps named, contracts read) is what checking it in the whole plan leaves. `None` when nothing can
        be taken: the parser reported problems (the plan does not validate anyway), or `plan`'s steps do not have
        the ids the arrived ones had."""
        mine, theirs = self.steps, plan.steps
        count = min(len(mine), len(theirs))
        if reported or not count:
            return None
        same = bytearray(b'\x01') * count  # per step that arrived: whether `plan` holds it as it was checked
        everything = (theirs == mine if count == len(theirs) == len(mine)  # (no copies of the columns to compare)
                      else theirs[:count] == mine[:count])
        if not everything:
            for index in range(count):
                if theirs[index] != mine[index]:
                    if theirs[index].id != mine[index].id:
                        return None
                    same[index] = 0
        if everything:
            taken: Sequence[int] = range(count)
            prefix = count
        else:
            deps = self.deps
            taken = [index for index in range(count) if same[index] and all(same[dep] for dep in deps[index])]
            if not taken:
                return None
            prefix = next((index for index, step in enumerate(taken) if index != step), len(taken))
        resumed = Validator(self.tools, dialect=self.dialect, max_items=self.max_items, refused=self.refused,
                            earlier=self.earlier, reported=reported, problems=problems)
        # The steps taken up to the first one not taken, whole; those after it, one by one in `add` (`_take`).
        resumed.steps.extend(theirs[:prefix])
        resumed.ids.update(self.ids if prefix == len(self.ids) else islice(self.ids.items(), prefix))  # plan order
        resumed.resolved.extend(self.resolved[:prefix])
        resumed.rewrite.extend(self.rewrite[:prefix])
        resumed.deps.extend(self.deps[:prefix])
        if prefix == len(mine):
            resumed.kinds.update(self.kinds)
            resumed.checked.update(self.checked)
        else:
            resumed.kinds.update((index, kind) for index, kind in self.kinds.items() if index < prefix)
            resumed.checked.update((index, given) for index, given in self.checked.items() if index < prefix)
        resumed.taken = frozenset(taken[prefix:])
        resumed.source = self
        resumed.graph_taken = everything and count == len(theirs) == len(mine)
        resumed.found.update(self.found)  # a name looked up again finds the same tool
        # The references bound so far, but those to a step that is not what it was then (their check and what is
        # known of their types hold no more: the step that uses one first checks it again); every earlier plan's
        # step named, at the same positions.
        table, scanner = self.scanner.table, resumed.scanner
        if everything:
            scanner.table = RefTable(table.whole.copy(), table.objects.copy(), table.templates.copy())
        else:
            def holds(bound: Binding) -> bool:
                position = position_of(bound)
                return position < 0 or (position < count and bool(same[position]))
            scanner.table = RefTable({text: bound for text, bound in table.whole.items() if holds(bound)},
                                     {text: bound for text, bound in table.objects.items() if holds(bound)},
                                     {text: parts for text, parts in table.templates.items()
                                      if all(isinstance(part, str) or holds(part) for part in parts)})
        scanner.external.extend(self.scanner.external)
        # The contracts read so far go on (nothing that runs the plan uses them): what they hold about a reference
        # text is what its binding found, and a text bound again is checked again.
        contracts = resumed.contracts = self.contracts
        contracts.tools, contracts.steps = resumed.resolved, resumed.steps
        resumed.seen.update(self.seen)
        resumed.check_literals = self.check_literals
        if self.scanner.check is not None:
            scanner.check = contracts.check_reference
        return resumed


def _scan_field(scanner: Scanner, value: Any, index: int, field: str, found: list[int],
                messages: list[str]) -> Rewrite:
    try:
        more, changes, problems = scanner.scan(value, index, field)
    except RecursionError:
        messages.append(f'{field}: nested too deeply to check. Use fewer levels of nested objects and arrays.')
        return False
    found.extend(more)
    messages.extend(problems)
    return changes


def _compile(text: str, field: str, messages: list[str]) -> Expression | None:
    try:
        return compile_expression(text)
    except ExpressionError as exc:
        messages.append(f'{field}: {exc}')
        return None


def _prepare_kind(step: PlanStep, index: int, scanner: Scanner, found: list[int], messages: list[str],
                  max_items: int, contracts: Contracts) -> StepKind:
    """Scan and compile a step's `from`/`select`, `for_each` and `when`; their references join `found`."""
    kind = StepKind()
    if step.source is not None:
        kind.source = step.source
        kind.source_rewrite = _scan_field(scanner, step.source, index, 'from', found, messages)
        if step.select is not None:
            kind.select = _compile(step.select, 'select', messages)
    if step.for_each is not None:
        kind.for_each = step.for_each
        kind.for_each_rewrite = _scan_field(scanner, step.for_each, index, 'for_each', found, messages)
        if isinstance(step.for_each, str) and kind.for_each_rewrite:
            messages.extend(contracts.item_problems(step.for_each, step.arguments, scanner.table))
            types = contracts.reference(step.for_each).types
            if types is not None and 'array' not in types:
                messages.append(f'for_each: {step.for_each!r} gives {"/".join(sorted(types))}, not a list. Refer to '
                                'a list (for example a field holding one), or make one with a select step first.')
        if not kind.for_each_rewrite:
            if not isinstance(step.for_each, list):
                messages.append(f'for_each: must be a reference to a list (like "$ref:search.items") or an array, '
                                f'got {describe_type(step.for_each)} {excerpt(step.for_each)}.')
            elif len(step.for_each) > max_items:
                messages.append(f'for_each: {len(step.for_each)} elements, more than the limit of {max_items}. '
                                'Narrow the list with a select step first, or raise `max_items`.')
    if step.when is not None:
        kind.when_source = step.when.source
        kind.when_rewrite = _scan_field(scanner, step.when.source, index, 'when.from', found, messages)
        kind.when = _compile(step.when.select, 'when.select', messages)
    return kind


def _check_output_steps(plan: Plan, ids: Mapping[str, int], problems: Problems) -> None:
    unknown = [step_id for step_id in plan.output_steps or () if step_id not in ids]
    if unknown:
        listed = ', '.join(repr(i) for i in unknown)
        known = ', '.join(list(ids)[:30]) + (', ...' if len(ids) > 30 else '')
        problems.add(-1, f'"output_steps" names {listed}, not {"a step" if len(unknown) == 1 else "steps"} of '
                         f'this plan. Name step ids of this plan ({known}), or leave "output_steps" out to get '
                         'every output.')


def _hint(name: str, available: list[str], *, close: bool) -> str:
    """A "did you mean" (when `close`), then every tool name up to `MAX_LISTED`, past that the closest few (a long
    list costs the model tokens, and a gateway in search mode hides its catalogue on purpose)."""
    mean = _did_you_mean(name, available) if close else ''
    if len(available) <= MAX_LISTED:
        return f'{mean} Available tools: {", ".join(available) or "(none)"}.'
    nearest = difflib.get_close_matches(name, available, n=3, cutoff=0.4) if close else []
    if not nearest:
        return f'{mean} It is not one of the {len(available)} tools.'
    return f'{mean} Closest of the {len(available)} tools: {", ".join(nearest)}.'


def _runs_plans(tool: Tool) -> bool:
    """Whether `tool` runs plans itself (a plan tool, under any name): a step may not call one."""
    return tool.layer(RunsPlans) is not None


def _did_you_mean(name: str, available: list[str]) -> str:
    lowered = {n.lower(): n for n in available}
    if name.lower() in lowered:
        return f' Tool names are case-sensitive: did you mean {lowered[name.lower()]!r}?'
    close = difflib.get_close_matches(name, available, n=1)
    return f' Did you mean {close[0]!r}?' if close else ''


def _graph(plan: Plan, deps: list[tuple[int, ...]],
           problems: Problems) -> tuple[list[tuple[int, ...]], list[int]]:
    """The dependents of each step and the longest chain of dependents from it; every cycle is reported (named by
    path), and then the chains are empty."""
    n = len(deps)
    # Dependents in one flat list (a counting sort by dependency), then one tuple of ints per step (shared when it
    # holds one step, `_single`): no list per step, not even for a while. Tuples of ints are soon untracked by the
    # garbage collector; 100k lists living through this function would be counted as new long-lived objects, and
    # that many set off a full collection, which walks the whole process.
    counts = [0] * n
    for ds in deps:
        for d in ds:
            counts[d] += 1
    starts = list(accumulate(counts, initial=0))
    fill = starts[:-1]
    flat = [0] * starts[-1]
    for index, ds in enumerate(deps):
        for d in ds:
            flat[fill[d]] = index
            fill[d] += 1
    del fill
    dependents = [_NO_DEPS if not count else _single(flat[starts[i]]) if count == 1 else
                  tuple(flat[starts[i] : starts[i + 1]]) for i, count in enumerate(counts)]
    order, remaining = _order(deps, dependents)
    if len(order) < n:
        _report_cycles(plan, deps, remaining, problems)
        return dependents, []
    return dependents, _chains(deps, order)


def _order(deps: Sequence[Sequence[int]], dependents: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    """Kahn's algorithm: the steps in an order that puts each after the steps it refers to, plan order among those
    ready together; with the count of dependencies left unordered per step (steps on or behind a cycle are left
    out of the order, their counts above zero)."""
    remaining = [len(d) for d in deps]
    order = [i for i, count in enumerate(remaining) if not count]
    append = order.append
    for node in order:  # the list grows while we walk it (a FIFO without popping)
        for child in dependents[node]:
            remaining[child] -= 1
            if not remaining[child]:
                append(child)
    return order, remaining


def _levels(deps: Sequence[Sequence[int]], order: Sequence[int]) -> list[int]:
    """Per step, its dependency level: 0 without references, else one more than the highest level it refers to;
    `order` puts every step after the steps it refers to."""
    levels = [0] * len(deps)
    for node in order:
        level = 0
        for parent in deps[node]:
            if levels[parent] >= level:
                level = levels[parent] + 1
        levels[node] = level
    return levels


def _chains(deps: list[tuple[int, ...]], order: Sequence[int]) -> list[int]:
    """Per step, the longest chain of dependents from it (itself included); `order` puts every step after the steps
    it refers to."""
    chains = [1] * len(deps)
    for node in reversed(order):
        here = chains[node] + 1
        for parent in deps[node]:
            if chains[parent] < here:
                chains[parent] = here
    return chains


def _report_cycles(plan: Plan, deps: list[tuple[int, ...]], remaining: list[int], problems: Problems) -> None:
    blocked = {i for i in range(len(deps)) if remaining[i]}
    done: set[int] = set()
    ids = [step.id for step in plan.steps]
    for start in sorted(blocked):
        if start in done:
            continue
        path: list[int] = []
        position: dict[int, int] = {}
        node = start
        while node not in position and node not in done:
            position[node] = len(path)
            path.append(node)
            node = next(d for d in deps[node] if d in blocked)
        done.update(path)
        if node in position:
            ring = path[position[node] :]
            first = min(ring)
            at = ring.index(first)
            ring = ring[at:] + ring[:at]
            shown = ' -> '.join(ids[i] for i in [*ring, first])
            what = 'refers to itself' if len(ring) == 1 else 'is part of a reference cycle'
            label = step_label(first, ids[first] if plan.dialect == 'id' else None)
            problems.add(len(deps), f'{label}: Cycle detected in tool plan dependencies: '
                                    f'{shown} (step {ids[first]!r} {what}). Remove one of these references so the '
                                    'steps can run in order.')
