"""Tool planning inside the agent loop: the `execute_tool_plan` meta-tool, wired to the run's process so plan
steps become agent events, count against the run's budget, and every `PlanRun` lands in the run's record."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolweave.agent._events import PlanItemFinished, PlanStepFinished, PlanStepStarted
from toolweave.agent._process import AgentProcess, current_process
from toolweave.plan import PlanEvent, PlanRun, PlanTool
from toolweave.tools import DelegatingTool, ToolArguments, ToolCallContext, ToolResult, Toolset

__all__ = ('AgentPlanTool', 'forward_plan_event')


def forward_plan_event(event: PlanEvent) -> None:
    """Turn a plan executor event into an agent event of the process the plan runs in."""
    process = current_process()
    if process is None:
        return
    if event.item is not None:
        process.emit(PlanItemFinished(process_id=process.id, time=process.elapsed(), step=event.step, item=event.item))
        return
    kind = PlanStepStarted if event.kind == 'step_started' else PlanStepFinished
    process.emit(kind(process_id=process.id, time=process.elapsed(), step=event.step))


class AgentPlanTool(DelegatingTool):
    """The plan meta-tool of an agent: the plan package's `PlanTool` over the tools the run offers now, plus the
    run's bookkeeping (events per step, each step counted against the budget before it runs, the `PlanRun`
    recorded on the process)."""

    def __init__(self, toolset: Toolset, options: Mapping[str, Any] | None = None) -> None:
        self.options = dict(options or {})
        super().__init__(PlanTool(toolset, on_event=forward_plan_event, **self.options))

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        process = current_process()
        tool = self._for_run(process)
        if process is None:
            return await tool.execute(arguments, context)
        # Each plan of the run is named p1, p2, ...: a later plan may refer to any step of an earlier one as
        # "$ref:p1/<step>.path", so a big result is used where it is, never copied back into arguments.
        earlier = {run.name: run for run in process.plan_runs if run.name is not None}
        result = await tool.run_call(arguments, context, earlier=earlier, name=f'p{len(earlier) + 1}')
        if isinstance(result.value, PlanRun):
            process.record_plan_run(result.value)
        return result

    def _for_run(self, process: AgentProcess | None) -> PlanTool:
        """The plan tool over the tools the run offers now, so a plan may call tools that unfolding or another
        injection added during the run (and not those it removed); each step is counted against the budget."""
        if process is None or process.offered_tools is None:
            assert isinstance(self.delegate, PlanTool)
            return self.delegate
        offered = [_Counted(tool) for tool in process.offered_tools() if tool is not self]
        # This one only runs the plan (the model was shown the agent's plan tool): no schema to build.
        return PlanTool(Toolset(offered), on_event=forward_plan_event, **{**self.options, 'plan_schema': 'compact'})


class _Counted(DelegatingTool):
    """A plan step's tool: counted against the run's tool call budget as the step starts; a step past the budget
    fails with the budget's message (the plan goes on, the run stops at its next check)."""

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        process = current_process()
        refused = process.try_tool_calls() if process is not None else None
        if refused is not None:
            return ToolResult.failure(refused)
        return await self.delegate.execute(arguments, context)
