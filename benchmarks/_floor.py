"""The floor: a minimal eager DAG runner written by hand on bare asyncio, the reference the benchmarks compare
toolweave's executor against.

It is what a careful engineer would write instead of using a plan executor: one counter per step of the
dependencies not yet finished, one asyncio task started the moment a step's last dependency finishes, `$ref`
strings replaced by the referenced step's output, each tool called through `Tool.call`. It does none of what
toolweave adds around that: no validation (an unknown reference is a `KeyError`, a cycle never finishes), no
failure policy (a failed step's dependents run with whatever it returned), no records, no timeouts, no
concurrency limit, no summary. So no Python executor of the same plans can be much cheaper than this one.

```python
outputs = await run_floor(plan, {'work': tool})   # {'step_0': <value or text>, ...}
```
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Mapping
from typing import Any

from toolweave.tools import Tool, ToolCallContext

__all__ = ('gather', 'resolve', 'run_floor')

_PREFIX = '$ref:'


def _refs(value: Any, found: list[str]) -> None:
    if type(value) is str:
        if value.startswith(_PREFIX):
            found.append(value[len(_PREFIX):])
    elif type(value) is dict:
        for item in value.values():
            _refs(item, found)
    elif type(value) is list:
        for item in value:
            _refs(item, found)


def resolve(value: Any, outputs: Mapping[str, Any]) -> Any:
    """`value` with every `"$ref:STEP"` string replaced by that step's output (new dicts and lists)."""
    if type(value) is str:
        return outputs[value[len(_PREFIX):]] if value.startswith(_PREFIX) else value
    if type(value) is dict:
        return {key: resolve(item, outputs) for key, item in value.items()}
    if type(value) is list:
        return [resolve(item, outputs) for item in value]
    return value


async def run_floor(plan: Mapping[str, Any], tools: Mapping[str, Tool]) -> dict[str, Any]:
    """Run an id-based plan dict whose references are whole `"$ref:STEP"` strings; return every step's output
    (its value when the tool set one, else its text)."""
    steps = plan['steps']
    position = {step['id']: index for index, step in enumerate(steps)}
    dependents: list[list[int]] = [[] for _ in steps]
    waiting = [0] * len(steps)
    for index, step in enumerate(steps):
        found: list[str] = []
        _refs(step['arguments'], found)
        for dep in dict.fromkeys(found):
            dependents[position[dep]].append(index)
            waiting[index] += 1
    outputs: dict[str, Any] = {}
    loop = asyncio.get_running_loop()
    finished = loop.create_future()
    running: set[asyncio.Task[None]] = set()  # the loop keeps only weak references to tasks
    context = ToolCallContext.EMPTY

    async def run(index: int) -> None:
        step = steps[index]
        result = await tools[step['tool']].call(resolve(step['arguments'], outputs), context)
        outputs[step['id']] = result.value if result.has_value else result.output
        for child in dependents[index]:
            waiting[child] -= 1
            if not waiting[child]:
                start(child)
        if len(outputs) == len(steps):
            finished.set_result(None)

    def start(index: int) -> None:
        task = loop.create_task(run(index))
        running.add(task)
        task.add_done_callback(running.discard)

    for index, count in enumerate(waiting):
        if not count:
            start(index)
    await finished
    return outputs


async def gather(coroutines: list[Coroutine[Any, Any, Any]]) -> None:
    """Run the coroutines concurrently, one asyncio task each, and wait for all: how the benchmarks start many
    plans at once, for the floor and for toolweave alike."""
    loop = asyncio.get_running_loop()
    tasks: list[Awaitable[Any]] = [loop.create_task(coroutine) for coroutine in coroutines]
    for task in tasks:
        await task
