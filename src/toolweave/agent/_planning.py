"""Tool planning inside the agent loop: the `execute_tool_plan` meta-tool, wired to the run's process so
plan steps become agent events and every `PlanRun` lands in the run's record."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolweave.agent._events import PlanStepFinished, PlanStepStarted
from toolweave.agent._process import current_process
from toolweave.tools._definition import ToolDefinition
from toolweave.tools._result import ToolResult
from toolweave.tools._tool import Tool, ToolArguments

if TYPE_CHECKING:
    from toolweave.agent._process import AgentProcess
    from toolweave.plan import PlanEvent
    from toolweave.tools._context import ToolCallContext
    from toolweave.tools._toolset import Toolset

__all__ = ('AgentPlanTool', 'forward_plan_event')


def forward_plan_event(event: PlanEvent) -> None:
    """Turn a plan executor event into an agent event of the process the plan runs in."""
    process = current_process()
    if process is None:
        return
    kind = PlanStepStarted if event.kind == 'step_started' else PlanStepFinished
    process.emit(kind(process_id=process.id, time=process.elapsed(), step=event.step))


class AgentPlanTool(Tool):
    """The plan meta-tool of an agent: the plan package's `PlanTool` bound to the agent's toolset, plus the
    bookkeeping of the run (events per step, the `PlanRun` recorded on the process).

    It delegates `call` as a whole, so approval, metrics and logging happen once, in the inner tool.
    """

    def __init__(self, toolset: Toolset, options: Mapping[str, Any] | None = None) -> None:
        from toolweave.plan import PlanTool

        self.options = dict(options or {})
        self.inner = PlanTool(toolset, on_event=forward_plan_event, **self.options)

    @property
    def definition(self) -> ToolDefinition:
        return self.inner.definition

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        return await self.call(arguments, context)

    async def call(self, arguments: ToolArguments = None, context: Mapping[str, Any] | None = None) -> ToolResult:
        from toolweave.plan import PlanRun

        process = current_process()
        result = await self._for_run(process).call(arguments, context)
        if process is not None and isinstance(result.value, PlanRun):
            process.record_plan_run(result.value)
        return result

    def _for_run(self, process: AgentProcess | None) -> Tool:
        """The plan tool over the tools the run offers now, so a plan may call tools that unfolding or another
        injection added during the run (and not those it removed)."""
        if process is None or process.offered_tools is None:
            return self.inner
        from toolweave.plan import PlanTool
        from toolweave.tools._toolset import Toolset

        offered = [tool for tool in process.offered_tools() if tool is not self]
        return PlanTool(Toolset(offered), on_event=forward_plan_event, **self.options)
