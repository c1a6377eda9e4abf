"""Tool planning inside the agent loop: the `execute_tool_plan` meta-tool, wired to the run's process so plan
steps become agent events, count against the run's budget, and every `PlanRun` lands in the run's record.

With eager plans (`Agent(eager_plans=True)`), `eager_plans` opens the plan streams of one reply: each
`execute_tool_plan` call's arguments go to a `PlanStream` as they stream, so the steps that may start early do
while the model still writes the rest; when the loop runs that call, `EagerPlans.handing` hands the stream to the
plan tool, which finishes the plan with it. A stream whose call never runs is cancelled when the reply's tool calls
are over.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import anyio

from toolweave._ambient import using
from toolweave.agent._events import PlanItemFinished, PlanStepFinished, PlanStepStarted
from toolweave.agent._process import AgentProcess, current_process
from toolweave.exceptions import ModelError
from toolweave.models import ModelResponse, ModelSettings, ResponseChunk, ToolCall, ToolCallChunk
from toolweave.plan import PlanEvent, PlanRun, PlanTool
from toolweave.plan._plan_grammar import constrained_grammar
from toolweave.plan._plan_schema import SchemaTooLarge, constrained_schema
from toolweave.plan._stream import PlanStream
from toolweave.tools import DelegatingTool, Tool, ToolArguments, ToolCallContext, ToolDefinition, ToolResult, Toolset

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

__all__ = ('PLAN_FIRST_ATTEMPTS', 'AgentPlanTool', 'EagerPlans', 'PlanFirst', 'PlanFirstMode', 'eager_plans',
           'forward_plan_event')

_streamed: ContextVar[list[tuple[PlanTool, PlanStream]] | None] = ContextVar('toolweave_streamed_plan', default=None)
"""The stream of the plan call the loop is running, in a box the plan tool empties (so no call nested in it sees
the stream)."""

logger = logging.getLogger('toolweave.agent')


def forward_plan_event(event: PlanEvent) -> None:
    """Turn a plan executor event into an agent event of the process the plan runs in."""
    process = current_process()
    if process is None:
        return
    if event.item is not None:
        process.emit(PlanItemFinished(process_id=process.id, time=process.elapsed(), step=event.step, item=event.item))
        return
    if event.kind == 'step_started':
        process.emit(PlanStepStarted(process_id=process.id, time=process.elapsed(), step=event.step,
                                     eager=event.eager))
        return
    process.emit(PlanStepFinished(process_id=process.id, time=process.elapsed(), step=event.step))


class AgentPlanTool(DelegatingTool):
    """The plan meta-tool of an agent: the plan package's `PlanTool` over the tools the run offers now, plus the
    run's bookkeeping (events per step, each step counted against the budget before it runs, the `PlanRun`
    recorded on the process)."""

    def __init__(self, toolset: Toolset, options: Mapping[str, Any] | None = None) -> None:
        self.options = dict(options or {})
        self.toolset = toolset
        super().__init__(PlanTool(toolset, on_event=forward_plan_event, **self.options))

    def toolset_tools(self) -> list[Tool]:
        """The tools a plan may call (not the plan tool itself)."""
        return [tool for tool in self.toolset.tools if tool is not self]

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        process = current_process()
        box = _streamed.get()
        streamed = box.pop() if box else None
        if process is None:
            return await self._for_run(process).execute(arguments, context)
        if streamed is not None:
            tool, stream = streamed
            result = await tool.run_call(arguments, context, streamed=stream)
        else:
            earlier, name = _names(process)
            result = await self._for_run(process).run_call(arguments, context, earlier=earlier, name=name)
        if isinstance(result.value, PlanRun):
            process.record_plan_run(result.value)
        return result

    def stream(self, process: AgentProcess, task_group: TaskGroup) -> tuple[PlanTool, PlanStream]:
        """The plan tool a call of the run uses, and a stream for that call (see `PlanTool.stream`)."""
        tool = self._for_run(process)
        earlier, name = _names(process)
        return tool, tool.stream(task_group, process.context, earlier=earlier, name=name)

    def _for_run(self, process: AgentProcess | None) -> PlanTool:
        """The plan tool over the tools the run offers now, so a plan may call tools that unfolding or another
        injection added during the run (and not those it removed); each step is counted against the budget."""
        if process is None or process.offered_tools is None:
            assert isinstance(self.delegate, PlanTool)
            return self.delegate
        offered = [_Counted(tool) for tool in process.offered_tools() if tool is not self]
        # This one only runs the plan (the model was shown the agent's plan tool): no schema to build.
        return PlanTool(Toolset(offered), on_event=forward_plan_event, **{**self.options, 'plan_schema': 'compact'})


def _names(process: AgentProcess) -> tuple[dict[str, PlanRun], str]:
    """The run's earlier plans by name, and the next plan's name. Each plan of the run is named p1, p2, ...: a later
    plan may refer to any step of an earlier one as "$ref:p1/<step>.path", so a big result is used where it is,
    never copied back into arguments."""
    earlier = {run.name: run for run in process.plan_runs if run.name is not None}
    return earlier, f'p{len(earlier) + 1}'


class EagerPlans:
    """The plan calls of one streamed reply, each fed to its `PlanStream` as its arguments arrive."""

    def __init__(self, tool: AgentPlanTool, process: AgentProcess, task_group: TaskGroup) -> None:
        self.tool = tool
        self.process = process
        self.task_group = task_group
        self.streams: dict[str, tuple[PlanTool, PlanStream]] = {}

    def chunk(self, chunk: ResponseChunk) -> None:
        """A piece of the reply: a piece of a plan call's arguments goes to that call's stream."""
        if not isinstance(chunk, ToolCallChunk) or chunk.tool_name != self.tool.name:
            return
        streamed = self.streams.get(chunk.call_id)
        if streamed is None:
            streamed = self.streams[chunk.call_id] = self.tool.stream(self.process, self.task_group)
        streamed[1].feed(chunk.arguments)

    @contextmanager
    def handing(self, call_id: str) -> Iterator[None]:
        """Run the loop's call `call_id` inside this block: if it is a streamed plan call, the plan tool takes its
        stream."""
        streamed = self.streams.get(call_id)
        if streamed is None:
            yield
            return
        with using(_streamed, [streamed]):
            yield

    def abandon(self, reason: str) -> None:
        for _, stream in self.streams.values():
            stream.abandon(reason)


@asynccontextmanager
async def eager_plans(tool: AgentPlanTool, process: AgentProcess) -> AsyncIterator[EagerPlans]:
    """The plan streams of one reply, for the block that asks the model and runs the reply's calls: a stream
    still running when the block ends (its call never ran, or the block failed) is cancelled, and the block waits
    until it has stopped."""
    raised: Exception | None = None
    async with anyio.create_task_group() as group:
        plans = EagerPlans(tool, process, group)
        try:
            yield plans
        except Exception as exc:  # re-raised below as itself, not wrapped in the task group's ExceptionGroup
            raised = exc
            plans.abandon("Cancelled: the model's reply broke off before the plan was complete"
                          if isinstance(exc, ModelError) else
                          f'Cancelled: the run stopped ({type(exc).__name__}) before the plan ran')
        except BaseException:
            plans.abandon('Cancelled: the run was cancelled before the plan ran')
            raise
        else:
            plans.abandon('Cancelled: the plan call was not run')
    if raised is not None:
        raise raised


class _Counted(DelegatingTool):
    """A plan step's tool: counted against the run's tool call budget as the step starts; a step past the budget
    fails with the budget's message (the plan goes on, the run stops at its next check)."""

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        process = current_process()
        refused = process.try_tool_calls() if process is not None else None
        if refused is not None:
            return ToolResult.failure(refused)
        return await self.delegate.execute(arguments, context)


PlanFirstMode: TypeAlias = Literal['tool_choice', 'response_format']
"""How plan-first mode makes the first reply a plan: `tool_choice` forces the plan tool by name (for servers that
honour a named tool choice); `response_format` asks for the plan as the reply's JSON text under the constrained
plan schema (`constrained_schema`), which a local server compiles to a grammar, or under the plan grammar
(`constrained_grammar`) for a model that `takes_grammar` (llama.cpp's `llama-server`)."""


@functools.lru_cache(maxsize=16)
def _plan_grammar(tools: tuple[Tool, ...]) -> str | None:
    """The plan grammar for these tools, built once per toolset (tens of milliseconds); `None` when it would be
    too large, and the constrained JSON schema serves."""
    try:
        return constrained_grammar(tools)
    except SchemaTooLarge as exc:
        logger.info('plan-first sends the constrained JSON schema, not the plan grammar: %s', exc)
        return None


PLAN_FIRST_ATTEMPTS = 2
"""Plans a plan-first run asks for before it falls back to calling tools one by one: the first, and one more
after the problems of an invalid one went back."""


class PlanFirst:
    """One plan-first run: the first replies must be one plan (at most `PLAN_FIRST_ATTEMPTS`, until one is valid),
    then the model may only answer from the results. If no plan was valid, the run goes on tool by tool."""

    def __init__(self, tool: AgentPlanTool, process: AgentProcess, mode: PlanFirstMode, *,
                 grammar_body: Mapping[str, Any] | None = None) -> None:
        self.tool = tool
        self.process = process
        self.mode = mode
        self.written = mode == 'response_format'
        """Whether the plan comes as the reply's text (under the plan grammar or the constrained schema)."""
        tools = tuple(tool.toolset_tools())
        self.grammar = _plan_grammar(tools) if self.written and grammar_body is not None else None
        self.schema = constrained_schema(tools) if self.written and self.grammar is None else None
        self._grammar_body = grammar_body or {}
        """The model's own `extra_body`, which a request's `extra_body` replaces as a whole."""
        self.attempts = 0
        self._planning = False
        """Whether the reply being asked for is to be a plan."""

    @property
    def phase(self) -> Literal['plan', 'answer', 'tools']:
        if self.process.plan_runs:
            return 'answer'
        return 'plan' if self.attempts < PLAN_FIRST_ATTEMPTS else 'tools'

    def request(self, definitions: list[ToolDefinition],
                settings: ModelSettings | None) -> tuple[list[ToolDefinition], ModelSettings | None]:
        """What the next model call offers and with which settings."""
        self._planning = False
        phase = self.phase
        if phase == 'tools':
            return definitions, settings
        if phase == 'answer':
            if self.written:  # a local server: no tool definitions in the prompt at all
                return [], settings
            # Hosted APIs want the tools of the calls in the history defined (Anthropic does): offer, forbid.
            return definitions, replace(settings or ModelSettings(), tool_choice='none')
        self.attempts += 1
        self._planning = True
        if self.grammar is not None:
            base = settings or ModelSettings()
            body = {**self._grammar_body, **(base.extra_body or {}), 'grammar': self.grammar}
            return [], replace(base, response_format=None, extra_body=body, text_tool_calls=False)
        if self.schema is not None:
            return [], replace(settings or ModelSettings(), response_format=self.schema, text_tool_calls=False)
        forced = [d for d in definitions if d.name != self.tool.name] + [self.tool.definition]
        return forced, replace(settings or ModelSettings(), tool_choice=self.tool.name)

    def reply(self, response: ModelResponse) -> ModelResponse:
        """The reply as the loop handles it: a plan written as JSON text becomes a call of the plan tool."""
        if not self._planning or not self.written or response.tool_calls or not (response.text or '').strip():
            return response
        call = ToolCall(f'call_{uuid.uuid4().hex[:24]}', self.tool.name, response.text or '')
        return ModelResponse(None, (call,), response.usage, response.model_name, response.truncated)
