"""The demo scenarios (what `toolweave demo` and the agent benchmark run): the same tasks solved tool by tool,
with parallel calls, and with one plan, by scripted models over fake tools with latency."""

from __future__ import annotations

from toolweave._public import present as _present
from toolweave.testing._scenarios import (
    DEFAULT_LLM_LATENCY,
    DEFAULT_TOOL_LATENCY,
    MODES,
    SCENARIOS,
    Mode,
    Scenario,
    ScenarioRun,
    Step,
    resolve_refs,
    run_scenario,
    scenario_by_name,
)

__all__ = (
    'DEFAULT_LLM_LATENCY',
    'DEFAULT_TOOL_LATENCY',
    'Mode',
    'MODES',
    'resolve_refs',
    'run_scenario',
    'Scenario',
    'scenario_by_name',
    'ScenarioRun',
    'SCENARIOS',
    'Step',
)

_present('toolweave.testing.scenarios', __all__, globals())
