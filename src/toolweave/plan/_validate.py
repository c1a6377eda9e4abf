"""Validation before anything runs: ids, tools, references, cycles and limits, every problem at once.

A valid plan comes out prepared for the executor: tools looked up, arguments compiled, the dependency graph
(dependencies in order of first appearance, dependents, waves) built in O(steps + references).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from itertools import accumulate
from typing import Any

import anyio

from toolweave.exceptions import UnknownToolError
from toolweave.plan._contracts import Contracts
from toolweave.plan._expr import Expression, ExpressionError, compile_expression
from toolweave.plan._model import Plan, PlanStep
from toolweave.plan._parse import (
    DEFAULT_MAX_BYTES,
    EMPTY_PLAN,
    Parsed,
    Problems,
    describe_type,
    excerpt,
    parse_lenient,
    step_label,
    too_many_steps,
)
from toolweave.plan._refs import ID_PATTERN
from toolweave.plan._scan import RefTable, Rewrite, Scanner
from toolweave.tools import Tool, Toolset, ToolsetItem

__all__ = ('DEFAULT_MAX_ITEMS', 'INLINE_PREPARE_STEPS', 'PLAN_TOOL_NAMES', 'Prepared', 'RunsPlans', 'StepKind',
           'as_toolset', 'prepare', 'prepare_async', 'validate_plan')

DEFAULT_MAX_ITEMS = 100
"""Elements a `for_each` step may run over, unless the run says otherwise."""

INLINE_PREPARE_STEPS = 500
INLINE_PREPARE_VALUES = 20_000
"""Plans with up to `INLINE_PREPARE_STEPS` steps and `INLINE_PREPARE_VALUES` values in their arguments are
validated on the event loop (a few milliseconds); larger ones in a worker thread, which gives the event loop's
thread its turn every few milliseconds."""
MAX_LISTED = 10
"""An unknown tool's error lists every tool name up to this many, else the closest few."""
PLAN_TOOL_NAMES = frozenset({'execute_tool_plan', 'execute_plan'})
"""Meta-tools a plan step may never call: plans do not nest."""
_NO_DEPS: tuple[int, ...] = ()


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
    dependents: list[tuple[int, ...]]
    waves: list[int]
    """Per step: its dependency level (0 for steps without references)."""
    kinds: dict[int, StepKind]
    """The steps that select, loop or have a condition, by position."""
    external: list[Any]
    """Records of earlier plans' steps the plan refers to (see `external_position`)."""
    max_items: int = DEFAULT_MAX_ITEMS
    chains: list[int] = field(default_factory=list[int])
    """Per step: the number of steps on the longest chain of dependents from it to the end of the plan (itself
    included); the scheduler starts the step with the longest chain first."""


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
                        earlier: Mapping[str, Mapping[str, Any]] | None = None) -> tuple[Prepared | None, Problems]:
    """`prepare`, in a worker thread for a plan of more than `INLINE_PREPARE_STEPS` steps, so the event loop is
    never held for long (validating 10,000 steps takes about 100 ms)."""
    work = partial(prepare, parsed, tools, max_steps=max_steps, max_items=max_items, extra_refused=extra_refused,
                   earlier=earlier)
    steps = parsed.plan.steps
    if len(steps) > max_steps or (len(steps) <= INLINE_PREPARE_STEPS and _light(steps)):
        return work()
    return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)


def _light(steps: Iterable[PlanStep]) -> bool:
    """Whether the steps' arguments and forms hold at most `INLINE_PREPARE_VALUES` values (counted until then)."""
    left = INLINE_PREPARE_VALUES
    stack: list[Any] = []
    for step in steps:
        stack.append(step.arguments)
        if step.forms is not None:
            stack.extend((step.source, step.for_each, step.when.source if step.when is not None else None))
        while stack:
            value = stack.pop()
            left -= 1
            if left < 0:
                return False
            if isinstance(value, dict):
                stack.extend(value.values())
            elif isinstance(value, list):
                stack.extend(value)
    return True


def prepare(parsed: Parsed, tools: Toolset, *, max_steps: int, max_items: int = DEFAULT_MAX_ITEMS,
            extra_refused: frozenset[str] = frozenset(),
            earlier: Mapping[str, Mapping[str, Any]] | None = None) -> tuple[Prepared | None, Problems]:
    """Check everything; return the prepared plan (None if there is any problem) and the problems."""
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
    ids = _check_ids(plan, parsed.reported, problems)
    resolved = _check_tools(plan, tools, parsed.reported, problems, PLAN_TOOL_NAMES | extra_refused)
    rewrite: list[Rewrite] = []
    deps: list[tuple[int, ...]] = []
    kinds: dict[int, StepKind] = {}
    scanner = Scanner(ids, plan.dialect, earlier)
    contracts, check_literals = _contracts(resolved, plan, scanner)
    reported = parsed.reported
    for index, step in enumerate(steps):
        arguments = step.arguments
        plain = step.forms is None
        if isinstance(arguments, str) or (reported and (index, 'arguments') in reported):
            if plain:
                rewrite.append(False)
                deps.append(_NO_DEPS)
                continue
            arguments = {}
        try:
            found, changes, messages = scanner.scan(arguments, index) if plain else scanner.scan(
                arguments, index, 'arguments', step.for_each is not None)
        except RecursionError:
            found, changes, messages = [], False, ['arguments: nested too deeply to check. Use fewer levels of '
                                                   'nested objects and arrays.']
        if not plain:
            messages = list(messages)  # a list of this step's own (the scanner reuses an empty one)
            kinds[index] = _prepare_kind(step, index, scanner, found, messages, max_items, contracts)
        tool = resolved[index]
        if check_literals and tool is not None:
            more = contracts.check_step(tool, arguments, changes, scanner.table)
            if more:
                messages = [*messages, *more]
        if messages:
            label = _label(plan, index)
            for message in messages:
                problems.add(index, f'{label}: {message}')
        rewrite.append(changes)
        if not found:
            deps.append(_NO_DEPS)
        elif len(found) == 1:
            deps.append((found[0],))
        else:
            deps.append(tuple(dict.fromkeys(found)))
    _check_output_steps(plan, ids, problems)
    waves, dependents, chains = _graph(plan, deps, problems)
    if problems:
        return None, problems
    return Prepared(plan, resolved, rewrite, scanner.table, deps, dependents, waves, kinds, scanner.external,
                    max_items, chains), problems


def _contracts(resolved: list[Tool | None], plan: Plan, scanner: Scanner) -> tuple[Contracts, bool]:
    """The tools' contracts; references are checked against output schemas when a tool declares one, literals
    against input schemas when a tool's schema restricts anything."""
    contracts = Contracts(resolved, plan.steps)
    distinct = {id(tool): tool for tool in resolved if tool is not None}
    if any(contracts.of(tool).output is not None for tool in distinct.values()):
        scanner.check = contracts.check_reference
    return contracts, not all(contracts.of(tool).permissive for tool in distinct.values())


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


def _label(plan: Plan, index: int) -> str:
    """`steps[2] (id 'fetch')`; just `steps[2]` in index-based plans, whose ids the model never wrote."""
    return step_label(index, plan.steps[index].id if plan.dialect == 'id' else None)


def _check_ids(plan: Plan, reported: set[tuple[int, str]], problems: Problems) -> dict[str, int]:
    steps = plan.steps
    fullmatch = ID_PATTERN.fullmatch
    ids = {step.id: index for index, step in enumerate(steps)}
    if len(ids) == len(steps) and all(fullmatch(step_id) for step_id in ids):
        return ids  # the common case: unique, valid ids
    ids = {}
    for index, step in enumerate(plan.steps):
        step_id = step.id
        if step_id not in ids and fullmatch(step_id) is not None:
            ids[step_id] = index
            continue
        if reported and (index, 'id') in reported:
            continue
        first = ids.get(step_id)
        if first is not None:
            problems.add(index, f'{_label(plan, index)}: Duplicate step ID: {step_id!r} (also used by '
                                f'steps[{first}]). Give each step its own id.')
            continue
        if not step_id.strip():
            problems.add(index, f'steps[{index}]: Step ID cannot be null or blank. Give every step a unique "id" '
                                'such as "fetch_1".')
            continue
        if ID_PATTERN.fullmatch(step_id) is None:
            why = 'is longer than 64 characters' if len(step_id) > 64 else 'has characters outside [A-Za-z0-9_-]'
            problems.add(index, f'{_label(plan, index)}: invalid step id {step_id!r}: it {why}. Use letters, '
                                'digits, "_" and "-" only, for example "weather_tokyo".')
        ids[step_id] = index
    return ids


def _check_tools(plan: Plan, tools: Toolset, reported: set[tuple[int, str]], problems: Problems,
                 refused: frozenset[str]) -> list[Tool | None]:
    cache: dict[str, Tool] = {}
    if not reported:  # the common case: look each distinct name up once, then one list in one pass
        for name in {step.tool for step in plan.steps if step.forms is None or not step.is_select}:
            try:
                found = tools.get(name) if name not in refused else None
            except UnknownToolError:
                found = None
            if found is None or _runs_plans(found):
                break
            cache[name] = found
        else:
            return [cache[step.tool] if step.forms is None or not step.is_select else None for step in plan.steps]
        cache.clear()
    out: list[Tool | None] = []
    available: list[str] | None = None
    suggested: dict[str, str] = {}
    for index, step in enumerate(plan.steps):
        name = step.tool
        if step.is_select:  # a select step calls no tool
            out.append(None)
            continue
        hit = cache.get(name)
        if hit is not None:
            out.append(hit)
            continue
        if reported and (index, 'tool') in reported:
            out.append(None)
            continue
        label = _label(plan, index)
        if not name.strip():
            problems.add(index, f'{label}: Step tool name cannot be null or blank. Set "tool" to one of the '
                                'available tools.')
            out.append(None)
            continue
        try:
            tool: Tool | None = tools.get(name)
        except UnknownToolError:
            tool = None
        if name in refused or (tool is not None and _runs_plans(tool)):
            problems.add(index, f'{label}: Step {step.id!r} cannot call {name!r} (recursive plans are not '
                                'allowed). Call the tools themselves as steps of this plan.')
            tool = None
        elif tool is None:
            if available is None:
                available = [t for t in tools.names if t not in refused]
            in_step = f' in step {step.id!r}' if plan.dialect == 'id' else ''  # index-based ids are not the model's
            if name not in suggested:  # difflib once per unknown name, for the first few names only
                suggested[name] = _hint(name, available, close=len(suggested) < 5)
            problems.add(index, f'{label}: Unknown tool {name[:100]!r}{in_step}.{suggested[name]}')
        else:
            cache[name] = tool
        out.append(tool)
    return out


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
           problems: Problems) -> tuple[list[int], list[tuple[int, ...]], list[int]]:
    """Kahn's algorithm over the steps in plan order: waves, dependents, the longest chain of dependents from each
    step (walking the same order backwards), and every cycle (named by path)."""
    n = len(deps)
    # Dependents in one flat list (a counting sort by dependency), then one tuple of ints per step: no list per
    # step that outlives this function, so building the graph adds next to nothing for the garbage collector.
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
    dependents = [tuple(flat[starts[i] : starts[i + 1]]) if counts[i] else _NO_DEPS for i in range(n)]
    remaining = [len(d) for d in deps]
    waves = [0] * n
    queue = [i for i in range(n) if not remaining[i]]
    for node in queue:  # the list grows while we walk it (a FIFO without popping)
        level = waves[node] + 1
        for child in dependents[node]:
            if waves[child] < level:
                waves[child] = level
            remaining[child] -= 1
            if not remaining[child]:
                queue.append(child)
    if len(queue) < n:
        _report_cycles(plan, deps, remaining, problems)
        return waves, dependents, []
    chains = [1] * n
    for node in reversed(queue):  # every dependent comes after its dependencies in `queue`
        here = chains[node] + 1
        for parent in deps[node]:
            if chains[parent] < here:
                chains[parent] = here
    return waves, dependents, chains


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
            problems.add(len(deps), f'{_label(plan, first)}: Cycle detected in tool plan dependencies: '
                                    f'{shown} (step {ids[first]!r} {what}). Remove one of these references so the '
                                    'steps can run in order.')
