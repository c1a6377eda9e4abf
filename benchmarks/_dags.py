"""Seeded plan DAGs, heavy-tailed latencies and a fake tool, shared by the benchmarks.

Every generator returns an id-based plan dict (the shape `parse_plan` and `run_plan` accept):

```python
plan = random_dag(50, seed=1, width=8, max_deps=3)
latencies = sample_latencies(plan, seed=1)       # {'step_0': 0.004, ...} seconds, lognormal, clipped
tools = [FakeTool(latencies)]                    # one tool named `work` that sleeps its step's latency
critical_path(plan, latencies)                   # the lower bound on any schedule's makespan
```

Each step calls the tool `work` with `{"step": "<id>", "inputs": ["$ref:<dep>", ...]}`; the references are
what the executor builds its dependency graph from, and the fake tool echoes its own step id (outputs stay
small, so resolution cost does not grow with depth).
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

import anyio

from toolweave.tools import Tool, ToolCallContext, ToolDefinition, ToolResult
from toolweave.tools._tool import ToolArguments, load_arguments

__all__ = (
    'TOOL_NAME',
    'FakeTool',
    'chain',
    'critical_path',
    'dependencies',
    'diamond',
    'fan_out',
    'random_dag',
    'sample_latencies',
    'step_ids',
    'waves',
)

TOOL_NAME = 'work'
_REF = re.compile(r'^\$ref:([A-Za-z0-9_-]+)')


def _step(index: int, deps: Iterable[int], tool: str) -> dict[str, Any]:
    return {
        'id': f'step_{index}',
        'tool': tool,
        'arguments': {'step': f'step_{index}', 'inputs': [f'$ref:step_{d}' for d in deps]},
    }


def random_dag(
    n_steps: int,
    *,
    seed: int,
    width: int | None = None,
    max_deps: int = 3,
    shuffle: bool = False,
    tool: str = TOOL_NAME,
) -> dict[str, Any]:
    """A random layered DAG of `n_steps` steps as an id-based plan dict.

    Steps are grouped into levels whose sizes vary around `width` (between 1 and `2 * width - 1`); every
    step after the first level depends on one step of the level just before it (so the depth is the number
    of levels) and on up to `max_deps - 1` more steps from any earlier level. `width=None` picks a width
    from the seed between 1 and `n_steps`, so a batch of seeds covers chains, fan-outs and everything in
    between. `shuffle=True` lists the steps in a random order (ids keep generation order, so `step_7` may
    come before `step_3`: the executor must order by dependencies, not by position).

    Raises:
        ValueError: `n_steps < 1`, `width < 1` or `max_deps < 1`.
    """
    if n_steps < 1:
        raise ValueError(f'n_steps must be >= 1, got {n_steps}')
    if max_deps < 1:
        raise ValueError(f'max_deps must be >= 1, got {max_deps}')
    rng = random.Random(seed)
    if width is None:
        # Log-uniform, so narrow (deep) and wide (shallow) DAGs are equally likely.
        width = max(1, round(math.exp(rng.uniform(0, math.log(n_steps)))))
    if width < 1:
        raise ValueError(f'width must be >= 1, got {width}')
    levels: list[list[int]] = []
    placed = 0
    while placed < n_steps:
        size = min(n_steps - placed, rng.randint(1, 2 * width - 1))
        levels.append(list(range(placed, placed + size)))
        placed += size
    deps: dict[int, list[int]] = {index: [] for index in levels[0]}
    for depth in range(1, len(levels)):
        before = levels[depth][0]  # ids are contiguous per level: every id below this one is earlier
        for index in levels[depth]:
            chosen = {rng.choice(levels[depth - 1])}
            extra = rng.randint(0, max_deps - 1)
            # Sampling from a range is O(extra), so generating 100k-step plans stays linear.
            chosen.update(rng.sample(range(before), min(extra, before)))
            deps[index] = sorted(chosen)
    order = list(range(n_steps))
    if shuffle:
        rng.shuffle(order)
    return {'steps': [_step(i, deps[i], tool) for i in order]}


def chain(n: int, *, tool: str = TOOL_NAME) -> dict[str, Any]:
    """`step_0 -> step_1 -> ... -> step_{n-1}`: n waves of one step."""
    if n < 1:
        raise ValueError(f'n must be >= 1, got {n}')
    return {'steps': [_step(i, [i - 1] if i else [], tool) for i in range(n)]}


def fan_out(n: int, *, aggregate: bool = True, tool: str = TOOL_NAME) -> dict[str, Any]:
    """`n` independent steps (`step_0` .. `step_{n-1}`), then `step_n` reading all of them (unless
    `aggregate=False`): 2 waves, n + 1 steps."""
    if n < 1:
        raise ValueError(f'n must be >= 1, got {n}')
    steps = [_step(i, [], tool) for i in range(n)]
    if aggregate:
        steps.append(_step(n, range(n), tool))
    return {'steps': steps}


def diamond(*, tool: str = TOOL_NAME) -> dict[str, Any]:
    """`step_0` feeds `step_1` and `step_2`, which both feed `step_3`."""
    return {'steps': [_step(0, [], tool), _step(1, [0], tool), _step(2, [0], tool), _step(3, [1, 2], tool)]}


def step_ids(plan: Mapping[str, Any]) -> list[str]:
    """The plan's step ids in plan order."""
    return [str(step['id']) for step in plan['steps']]


def _refs(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        match = _REF.match(value)
        if match:
            yield match.group(1)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item)


def dependencies(plan: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Each step's dependencies (whole-string `$ref:` references in its arguments), in plan order."""
    return {str(s['id']): tuple(dict.fromkeys(_refs(s['arguments']))) for s in plan['steps']}


def waves(plan: Mapping[str, Any]) -> list[list[str]]:
    """Dependency levels (wave k = steps whose deepest dependency is in wave k - 1), plan order inside."""
    deps = dependencies(plan)
    dependents: dict[str, list[str]] = {step: [] for step in deps}
    missing = {step: 0 for step in deps}
    for step, before in deps.items():
        for dep in before:
            if dep in deps:
                dependents[dep].append(step)
                missing[step] += 1
    level: dict[str, int] = {}
    ready = [step for step, count in missing.items() if count == 0]
    while ready:  # Kahn's algorithm: linear in steps + edges
        step = ready.pop()
        level[step] = 1 + max((level[d] for d in deps[step] if d in deps), default=-1)
        for after in dependents[step]:
            missing[after] -= 1
            if missing[after] == 0:
                ready.append(after)
    if len(level) < len(deps):
        raise ValueError(f'Cycle detected among steps {[s for s in deps if s not in level][:10]}')
    result: list[list[str]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
    for step in deps:
        result[level[step]].append(step)
    return result


def critical_path(plan: Mapping[str, Any], latencies: Mapping[str, float]) -> float:
    """The longest latency-weighted path through the DAG: no schedule can finish sooner."""
    deps = dependencies(plan)
    finish: dict[str, float] = {}
    for wave in waves(plan):
        for step in wave:
            finish[step] = latencies.get(step, 0.0) + max((finish[d] for d in deps[step]), default=0.0)
    return max(finish.values(), default=0.0)


def sample_latencies(
    plan: Mapping[str, Any] | Iterable[str],
    *,
    seed: int,
    median: float = 0.008,
    sigma: float = 0.9,
    low: float = 0.001,
    high: float = 0.060,
) -> dict[str, float]:
    """Heavy-tailed (lognormal) latencies in seconds, one per step id, clipped to `[low, high]`.

    With the defaults the median is 8 ms, about 1 call in 10 takes over 25 ms and the slowest take 60 ms:
    the long tail of real tool calls (a cache hit next to a slow API), scaled down so benchmarks stay short.
    """
    ids = step_ids(plan) if isinstance(plan, Mapping) else list(plan)
    rng = random.Random(seed)
    mu = math.log(median)
    return {step: min(high, max(low, rng.lognormvariate(mu, sigma))) for step in ids}


class FakeTool(Tool):
    """The tool every generated step calls: sleeps its step's latency, then returns the step id.

    `slept` maps each step id to the seconds its sleep actually took (the sleep's own lateness, apart from
    whatever the executor adds around the call); clear it between runs.
    """

    def __init__(self, latencies: Mapping[str, float] | None = None, *, name: str = TOOL_NAME) -> None:
        self._latencies = dict(latencies or {})
        self.slept: dict[str, float] = {}
        self._definition = ToolDefinition(
            name,
            'Benchmark tool: sleeps the latency sampled for `step`, then returns the step id.',
            {
                'type': 'object',
                'properties': {'step': {'type': 'string'}, 'inputs': {'type': 'array'}},
                'required': ['step'],
            },
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        step = str(load_arguments(arguments, self._definition.name).get('step', ''))
        delay = self._latencies.get(step, 0.0)
        if delay > 0:
            began = time.perf_counter()
            await anyio.sleep(delay)
            self.slept[step] = time.perf_counter() - began
        return ToolResult.success(step)
