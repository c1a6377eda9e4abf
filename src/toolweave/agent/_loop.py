"""The tool loop: ask the model, run the tool calls it asked for (concurrently), repeat until it answers."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Literal, TypeAlias

import anyio

from toolweave._tracing import tool_call_id
from toolweave.agent._events import EmptyAnswer, MessageEvent, ToolCallFinished, ToolCallStarted
from toolweave.agent._planning import EagerPlans, PlanFirst
from toolweave.agent._process import AgentProcess, ToolCallRecord
from toolweave.agent._streaming import ask_model
from toolweave.exceptions import ControlFlowSignal, ToolConfigurationError, UsageLimitExceeded
from toolweave.models import (
    AssistantMessage,
    Message,
    Model,
    ModelResponse,
    ModelSettings,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from toolweave.progressive import UnfoldingSelection, record_unfoldings
from toolweave.tools import Tool, ToolDefinition, ToolResult

__all__ = ('EMPTY_ANSWER_NUDGE', 'CallLimits', 'FinishReason', 'LoopOutcome', 'LoopTools', 'cut', 'run_loop')

logger = logging.getLogger('toolweave.agent')

FinishReason: TypeAlias = Literal['final_answer', 'return_direct', 'empty_answer']
"""`final_answer`: the model replied without tool calls; `return_direct`: a `return_direct` tool ran;
`empty_answer`: the model's last reply had neither text nor tool calls, even after being asked again."""

EMPTY_ANSWER_NUDGE = ('Your last reply was empty. Answer the request above in plain text now, or call a tool if '
                      'you need one.')
"""The message the agent sends after an empty reply, before it gives up."""


@dataclass(frozen=True, slots=True)
class LoopTools:
    """What the loop needs from the agent's tools, read afresh on every iteration (tools added to a toolset
    during a run are offered from the next model call on)."""

    definitions: Callable[[], list[ToolDefinition]]
    find: Callable[[str], Tool | None]
    available: Callable[[], list[str]]
    counts_as_tool_call: Callable[[Tool], bool]
    """Whether a call of this tool counts in `RunUsage.tool_calls` (the plan meta-tool counts its steps)."""
    after_call: Callable[[Tool, str, ToolResult, AgentProcess, tuple[UnfoldingSelection, ...]], None] | None = None
    """Called after each finished call, in call order, with the tool as found, the raw arguments, the result and
    the facades that unfolded during the call: the tool-injection hook, which may change what `definitions` and
    `find` give from the next model call on."""
    eager_plans: Callable[[AgentProcess], AbstractAsyncContextManager[EagerPlans]] | None = None
    """Opens the plan streams of one reply (`eager_plans`): plan steps start while the model writes the plan.
    `None`: a plan starts once it has arrived whole."""
    plan_first: Callable[[AgentProcess], PlanFirst] | None = None
    """Plan-first mode: the run's `PlanFirst`, which decides what each model call offers (a forced plan, then an
    answer) and turns a plan written as JSON text into a plan call."""


@dataclass(frozen=True, slots=True)
class CallLimits:
    tool_timeout: float | None = None
    """Seconds a direct tool call may take; a call that takes longer fails (the model is told)."""
    max_output_chars: int | None = None
    """Longest tool result text sent to the model; longer text is cut with a note (the full result stays in
    the process history)."""


def cut(text: str, limit: int | None) -> str:
    """`text`, cut to `limit` characters with a note saying how much was cut."""
    if limit is None or len(text) <= limit:
        return text
    return f'{text[:limit]}... [cut {len(text) - limit} of {len(text)} characters]'


@dataclass(frozen=True, slots=True)
class LoopOutcome:
    output: str
    finish_reason: FinishReason


async def run_loop(
    model: Model,
    tools: LoopTools,
    process: AgentProcess,
    messages: list[Message],
    *,
    settings: ModelSettings | None,
    max_iterations: int,
    limits: CallLimits | None = None,
    stream: bool = False,
    empty_answer_nudges: int = 1,
) -> LoopOutcome:
    """Run the loop, appending to `messages` in place. Raises `UsageLimitExceeded` on a budget or on
    `max_iterations`; lets `ToolConfigurationError` and control-flow signals from tools propagate. With `stream`,
    each reply is streamed and reported as deltas while it arrives. An empty reply is answered with a nudge, up to
    `empty_answer_nudges` times, before the run ends with it."""
    limits = limits or CallLimits()
    iteration = 0
    nudges = 0
    plan_first = tools.plan_first(process) if tools.plan_first is not None else None
    while True:
        if iteration >= max_iterations:
            process.finish('stopped', f'max_iterations={max_iterations} reached without a final answer')
            exc = UsageLimitExceeded(
                f'Agent {process.agent_name!r} (process {process.id}) reached max_iterations={max_iterations}: '
                f'the model asked for tools in each of its {iteration} replies and gave no final answer. Raise '
                '`max_iterations`, or say in the instructions when the model should stop and answer.'
            )
            exc.process = process
            raise exc
        iteration += 1
        process.reserve_model_call()
        eager = tools.eager_plans(process) if stream and tools.eager_plans is not None else nullcontext(None)
        async with eager as plans:
            definitions, turn_settings = tools.definitions(), settings
            if plan_first is not None:
                definitions, turn_settings = plan_first.request(definitions, settings)
            response = await ask_model(model, list(messages), definitions, turn_settings, process, stream=stream,
                                       on_chunk=None if plans is None else plans.chunk)
            if plan_first is not None:
                response = plan_first.reply(response)
            process.record_model_call(response.usage, response.model_name or model.name)
            reply = AssistantMessage(response.text, response.tool_calls)
            _append(process, messages, reply)
            process.check_after_model_call()
            if not response.tool_calls:
                if (response.text or '').strip():
                    return LoopOutcome(response.text or '', 'final_answer')
                if not _nudge(process, messages, response, give_up=nudges >= empty_answer_nudges):
                    return LoopOutcome('', 'empty_answer')
                nudges += 1
                continue
            resolved = [(call, tools.find(call.name)) for call in response.tool_calls]
            counted = sum(1 for _, tool in resolved if tool is not None and tools.counts_as_tool_call(tool))
            process.reserve_tool_calls(counted)
            unfolded: list[tuple[UnfoldingSelection, ...]] = [()] * len(resolved)
            results = await _run_calls(process, tools, resolved, limits, unfolded, plans)
        for call, result in zip(response.tool_calls, results, strict=True):
            text = cut(result.text, limits.max_output_chars)
            _append(process, messages, ToolMessage(call.id, call.name, text, is_error=not result.ok))
        if tools.after_call is not None:
            for (call, tool), result, selections in zip(resolved, results, unfolded, strict=True):
                if tool is not None:
                    tools.after_call(tool, call.arguments, result, process, selections)
        for (_, tool), result in zip(resolved, results, strict=True):
            if tool is not None and tool.definition.metadata.return_direct:
                return LoopOutcome(result.text, 'return_direct')


def _nudge(process: AgentProcess, messages: list[Message], response: ModelResponse, *, give_up: bool) -> bool:
    """Report an empty reply; unless giving up, ask the model again. Returns whether it did."""
    process.emit(EmptyAnswer(process_id=process.id, time=process.elapsed(), truncated=response.truncated,
                             nudged=not give_up))
    if give_up:
        logger.warning('Agent %r (process %s): the model gave an empty final answer%s; the run ends without one',
                       process.agent_name, process.id, ' (cut at max_tokens)' if response.truncated else '')
        return False
    _append(process, messages, UserMessage(EMPTY_ANSWER_NUDGE))
    return True


def _append(process: AgentProcess, messages: list[Message], message: Message) -> None:
    messages.append(message)
    process.emit(MessageEvent(process_id=process.id, time=process.elapsed(), message=message))


async def _run_calls(
    process: AgentProcess, tools: LoopTools, calls: Sequence[tuple[ToolCall, Tool | None]], limits: CallLimits,
    unfolded: list[tuple[UnfoldingSelection, ...]], plans: EagerPlans | None = None,
) -> list[ToolResult]:
    """Run every call of one reply concurrently; results in the order of the calls, and in `unfolded` the facades
    that unfolded during each. A configuration error or control-flow signal from one call cancels the others and
    is re-raised as itself (not as a group). A plan call that streamed takes its stream from `plans`."""
    results: list[ToolResult | None] = [None] * len(calls)
    escaped: list[BaseException] = []

    async def call_one(index: int, call: ToolCall, tool: Tool | None, scope: anyio.CancelScope) -> None:
        try:
            with record_unfoldings() as selections, _handing(plans, call):
                results[index] = await _call_tool(process, tools, call, tool, limits)
            unfolded[index] = tuple(selections)
        except (ToolConfigurationError, ControlFlowSignal) as exc:
            escaped.append(exc)
            scope.cancel()

    if len(calls) == 1:
        call, tool = calls[0]
        with record_unfoldings() as selections, _handing(plans, call):
            result = await _call_tool(process, tools, call, tool, limits)
        unfolded[0] = tuple(selections)
        return [result]
    async with anyio.create_task_group() as group:
        for index, (call, tool) in enumerate(calls):
            group.start_soon(call_one, index, call, tool, group.cancel_scope)
    if escaped:
        raise escaped[0]
    return [result if result is not None else ToolResult.failure('Tool call was cancelled') for result in results]


def _handing(plans: EagerPlans | None, call: ToolCall) -> AbstractContextManager[None]:
    return nullcontext() if plans is None else plans.handing(call.id)


async def _call_tool(
    process: AgentProcess, tools: LoopTools, call: ToolCall, tool: Tool | None, limits: CallLimits
) -> ToolResult:
    started = process.elapsed()
    process.emit(ToolCallStarted(process_id=process.id, time=started, call_id=call.id, tool_name=call.name,
                                 arguments=call.arguments))
    if tool is None:
        available = ', '.join(tools.available()) or '(none)'
        result = ToolResult.failure(f'Unknown tool {call.name!r}. Available tools: {available}.')
    else:
        # the plan meta-tool is bounded by its own step and plan timeouts, not by the per-call one
        seconds = limits.tool_timeout if tools.counts_as_tool_call(tool) else None
        result = await _timed_call(tool, call, process, seconds)
    ended = process.elapsed()
    process.record_call(ToolCallRecord(call.id, call.name, call.arguments, result, started, ended))
    process.emit(ToolCallFinished(process_id=process.id, time=ended, call_id=call.id, tool_name=call.name,
                                  result=result, duration=ended - started))
    return result


async def _timed_call(tool: Tool, call: ToolCall, process: AgentProcess, seconds: float | None) -> ToolResult:
    with tool_call_id(call.id):
        if seconds is None:
            return await tool.call(call.arguments, process.context)
        with anyio.move_on_after(seconds):
            return await tool.call(call.arguments, process.context)
    return ToolResult.failure(f'Tool {call.name!r} timed out after {seconds:g} s and was cancelled. Try simpler '
                              'arguments, or a different tool.')
