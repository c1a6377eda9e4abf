"""A bad option of a plan tool adapter is the developer's mistake: it fails when the adapter is built, never later
as text for a model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic_ai.toolsets import FunctionToolset

from toolweave import ToolNameError, UserError
from toolweave.integrations import langgraph, openai_agents, pydantic_ai


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[], Any]
    error: type[Exception]
    message: str


CASES = [
    Case('capability', lambda: pydantic_ai.ToolPlanning(concurrency=0), UserError,
         'concurrency (None: unlimited) must be an int >= 1 or None, got 0.'),
    Case('toolset', lambda: pydantic_ai.PlanToolset(FunctionToolset(), step_timeout=-1), UserError,
         'step_timeout must be a number of seconds > 0 or None, got -1.'),
    Case('openai-agents', lambda: openai_agents.plan_tool([], timeout=0), UserError,
         'timeout must be a number of seconds > 0 or None, got 0.'),
    Case('langgraph', lambda: langgraph.plan_tool([], name='run plan'), ToolNameError,
         "Invalid tool name 'run plan'"),
]


@pytest.mark.parametrize('case', CASES, ids=lambda case: case.id)
def test_a_bad_option_fails_when_the_adapter_is_built(case: Case) -> None:
    with pytest.raises(case.error) as raised:
        case.build()
    assert str(raised.value).startswith(case.message)
