"""Validation before anything runs: ids, tools, references, cycles and limits, every problem at once.

A valid plan comes out prepared for the executor: tools looked up, arguments compiled, the dependency graph
(dependencies in order of first appearance, dependents, waves) built in O(steps + references).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from toolweave.exceptions import UnknownToolError
from toolweave.plan._model import Plan
from toolweave.plan._parse import EMPTY_PLAN, Parsed, Problems, parse_lenient, step_label
from toolweave.plan._refs import ID_PATTERN
from toolweave.plan._scan import RefTable, Rewrite, Scanner
from toolweave.tools import Tool, Toolset, ToolsetItem

__all__ = ('PLAN_TOOL_NAMES', 'Prepared', 'as_toolset', 'prepare', 'validate_plan')

PLAN_TOOL_NAMES = frozenset({'execute_tool_plan', 'execute_plan'})
"""Meta-tools a plan step may never call: plans do not nest."""
_NO_DEPS: tuple[int, ...] = ()


@dataclass(slots=True)
class Prepared:
    """A validated plan, ready to run."""

    plan: Plan
    tools: list[Tool]
    rewrite: list[Rewrite]
    """Per step: what of its arguments holds references to replace at run time (falsy: nothing)."""
    table: RefTable
    deps: list[tuple[int, ...]]
    """Per step: the steps it refers to, each once, in order of first appearance (a skipped step names the
    first that failed)."""
    dependents: list[tuple[int, ...]]
    waves: list[int]
    """Per step: its dependency level (0 for steps without references)."""


def as_toolset(tools: Toolset | Iterable[ToolsetItem]) -> Toolset:
    """`tools` as a Toolset (a Toolset is used as is, so tools added to it later are seen)."""
    return tools if isinstance(tools, Toolset) else Toolset(tools)


def validate_plan(plan: Plan | str | bytes | Mapping[str, Any], tools: Toolset | Iterable[ToolsetItem], *,
                  max_steps: int = 10_000) -> list[str]:
    """Every problem of `plan` against `tools` (a Toolset or anything `Toolset(...)` accepts); `[]` when it
    can run. Each message names the step (index and id) and the field, and says what to do.

    ```python
    print(validate_plan({'steps': [{'id': 'a', 'tool': 'nope', 'arguments': '{}'}]}, [FakeTool('echo')]))
    #> ["steps[0] (id 'a'): Unknown tool 'nope' in step 'a'. Available tools: echo."]
    ```
    """
    parsed = plan if isinstance(plan, Parsed) else Parsed(plan, Problems()) if isinstance(plan, Plan) else (
        parse_lenient(plan))
    _, problems = prepare(parsed, as_toolset(tools), max_steps=max_steps)
    return problems.messages()


def prepare(parsed: Parsed, tools: Toolset, *, max_steps: int,
            extra_refused: frozenset[str] = frozenset()) -> tuple[Prepared | None, Problems]:
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
        problems.add(-1, f'The plan has {n} steps, more than the limit of {max_steps}. Split it into smaller plans '
                         f'or raise `max_steps`.')
        return None, problems
    ids = _check_ids(plan, parsed.reported, problems)
    resolved = _check_tools(plan, tools, parsed.reported, problems, PLAN_TOOL_NAMES | extra_refused)
    rewrite: list[Rewrite] = []
    deps: list[tuple[int, ...]] = []
    scanner = Scanner(ids, plan.dialect)
    reported = parsed.reported
    for index, step in enumerate(steps):
        arguments = step.arguments
        if isinstance(arguments, str) or (reported and (index, 'arguments') in reported):
            rewrite.append(False)
            deps.append(_NO_DEPS)
            continue
        try:
            found, changes, messages = scanner.scan(arguments, index)
        except RecursionError:
            found, changes, messages = [], False, ['arguments: nested too deeply to check. Use fewer levels of '
                                                   'nested objects and arrays.']
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
    waves, dependents = _graph(plan, deps, problems)
    if problems:
        return None, problems
    tool_list = [t for t in resolved if t is not None]
    return Prepared(plan, tool_list, rewrite, scanner.table, deps, dependents, waves), problems


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
    from toolweave.plan._meta import PlanTool

    cache: dict[str, Tool] = {}
    if not reported:  # the common case: look each distinct name up once, then one list in one pass
        for name in {step.tool for step in plan.steps}:
            try:
                found = tools.get(name) if name not in refused else None
            except UnknownToolError:
                found = None
            if found is None or isinstance(found, PlanTool):
                break
            cache[name] = found
        else:
            return [cache[step.tool] for step in plan.steps]
        cache.clear()
    out: list[Tool | None] = []
    available: list[str] | None = None
    suggested: dict[str, str] = {}
    for index, step in enumerate(plan.steps):
        name = step.tool
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
        if name in refused or isinstance(tool, PlanTool):
            problems.add(index, f'{label}: Step {step.id!r} cannot call {name!r} (recursive plans are not '
                                'allowed). Call the tools themselves as steps of this plan.')
            tool = None
        elif tool is None:
            if available is None:
                available = [t for t in tools.names if t not in refused]
            in_step = f' in step {step.id!r}' if plan.dialect == 'id' else ''  # index-based ids are not the model's
            if name not in suggested:  # difflib once per unknown name, for the first few names only
                suggested[name] = _did_you_mean(name, available) if len(suggested) < 5 else ''
            shown = ', '.join(available[:50]) + (', ...' if len(available) > 50 else '')
            problems.add(index, f'{label}: Unknown tool {name[:100]!r}{in_step}.{suggested[name]} Available tools: '
                                f'{shown or "(none)"}.')
        else:
            cache[name] = tool
        out.append(tool)
    return out


def _did_you_mean(name: str, available: list[str]) -> str:
    lowered = {n.lower(): n for n in available}
    if name.lower() in lowered:
        return f' Tool names are case-sensitive: did you mean {lowered[name.lower()]!r}?'
    close = difflib.get_close_matches(name, available, n=1)
    return f' Did you mean {close[0]!r}?' if close else ''


def _graph(plan: Plan, deps: list[tuple[int, ...]], problems: Problems) -> tuple[list[int], list[tuple[int, ...]]]:
    """Kahn's algorithm over the steps in plan order: waves, dependents and every cycle (named by path)."""
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
    return waves, dependents


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
