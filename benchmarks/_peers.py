"""Peers: the same plans run by other Python libraries, when they are installed (`pip install -e '.[bench]'`).

LangGraph: each plan step becomes a graph node that resolves its `$ref` arguments from the graph state and calls
the step's tool through `Tool.call`; a step with several dependencies joins them (`add_edge([a, b], c)`, which
waits for all of them). LangGraph runs a graph in supersteps: every node triggered in one superstep runs
concurrently, and the next superstep starts when they have all finished.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, TypedDict

from benchmarks._dags import dependencies
from benchmarks._floor import resolve
from toolweave.tools import Tool

__all__ = ('langgraph_available', 'langgraph_runner')

Runner = Callable[[], Awaitable[dict[str, Any]]]
"""Runs the compiled graph once; returns every step's output."""


def langgraph_available() -> bool:
    return importlib.util.find_spec('langgraph') is not None


def _merge(left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
    return {**left, **right}


class _State(TypedDict):
    outputs: Annotated[dict[str, Any], _merge]
    """Each finished step's output, by step id."""


def langgraph_runner(plan: Mapping[str, Any], tool: Tool) -> Runner:
    """Compile `plan` (an id-based plan dict whose steps all call `tool`) into a LangGraph graph; the returned
    coroutine function runs it once. Raises `ImportError` when LangGraph is not installed."""
    from langgraph.graph import END, START, StateGraph

    graph: Any = StateGraph(_State)
    deps = dependencies(plan)
    for step in plan['steps']:
        graph.add_node(step['id'], _node(step['id'], step['arguments'], tool))
    read = {dep for before in deps.values() for dep in before}
    for step_id, before in deps.items():
        if not before:
            graph.add_edge(START, step_id)
        else:
            graph.add_edge(before[0] if len(before) == 1 else list(before), step_id)
        if step_id not in read:
            graph.add_edge(step_id, END)
    app = graph.compile()
    config = {'recursion_limit': len(deps) + 10}

    async def run() -> dict[str, Any]:
        state = await app.ainvoke({'outputs': {}}, config)
        return dict(state['outputs'])

    return run


def _node(step_id: str, arguments: Any, tool: Tool) -> Callable[[Any], Awaitable[dict[str, Any]]]:
    async def node(state: Any) -> dict[str, Any]:
        result = await tool.call(resolve(arguments, state['outputs']))
        return {'outputs': {step_id: result.value if result.has_value else result.output}}

    return node
