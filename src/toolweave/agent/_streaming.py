"""Streaming an agent run: model replies as deltas, and `AgentStream`, the async iterator `Agent.run_stream` gives.

The shape follows the OpenAI Agents SDK's `Runner.run_streamed` (one stream of events for the whole run, every
tool round included, then the result) rather than pydantic-ai's `run_stream` (which ends at the first final
output), with structured concurrency on top: the run is a task inside the `async with` block, so leaving the block
ends it, and nothing outlives it. The events are the ones `Agent.run(on_event=...)` reports, plus the deltas.
"""

from __future__ import annotations

import math
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectSendStream

from toolweave import _tracing
from toolweave.agent._events import AgentEvent, EventListener, TextDelta, ToolCallDelta
from toolweave.agent._process import AgentProcess
from toolweave.agent._tracing import chat_trace
from toolweave.exceptions import UserError
from toolweave.models._base import (
    Message,
    Model,
    ModelResponse,
    ModelSettings,
    ResponseChunk,
    StreamingModel,
    TextChunk,
)
from toolweave.models._stream import response_chunks
from toolweave.tools._definition import ToolDefinition

if TYPE_CHECKING:
    from toolweave.agent._agent import AgentRunResult

__all__ = ('AgentStream', 'ask_model', 'open_run_stream')


async def ask_model(
    model: Model,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    settings: ModelSettings | None,
    process: AgentProcess,
    *,
    stream: bool,
    on_chunk: Callable[[ResponseChunk], None] | None = None,
) -> ModelResponse:
    """One model call of the loop. Streamed, each chunk becomes a `TextDelta` or `ToolCallDelta` of `process` as
    it arrives, and goes to `on_chunk` (the eager plans of the reply); a model that cannot stream answers whole,
    and its reply is reported as the same deltas."""
    tracing = _tracing.ACTIVE
    if tracing is None:
        return await _ask(model, messages, tools, settings, process, stream=stream, on_chunk=on_chunk)
    with chat_trace(tracing, model.name, messages, settings, stream=stream) as trace:
        response = await _ask(model, messages, tools, settings, process, stream=stream, on_chunk=on_chunk,
                              first_chunk=trace.first_chunk)
        trace.response(response)
        return response


async def _ask(model: Model, messages: Sequence[Message], tools: Sequence[ToolDefinition],
               settings: ModelSettings | None, process: AgentProcess, *, stream: bool,
               on_chunk: Callable[[ResponseChunk], None] | None, first_chunk: Callable[[], None] | None = None
               ) -> ModelResponse:
    if not stream:
        return await model.respond(messages, tools, settings)
    if isinstance(model, StreamingModel):
        async with model.stream(messages, tools, settings) as reply:
            async for chunk in reply:
                if first_chunk is not None:
                    first_chunk()
                    first_chunk = None
                process.emit(_delta(process, chunk))
                if on_chunk is not None:
                    on_chunk(chunk)
        return reply.response
    response = await model.respond(messages, tools, settings)
    for chunk in response_chunks(response):
        process.emit(_delta(process, chunk))
        if on_chunk is not None:
            on_chunk(chunk)
    return response


def _delta(process: AgentProcess, chunk: ResponseChunk) -> AgentEvent:
    if isinstance(chunk, TextChunk):
        return TextDelta(process_id=process.id, time=process.elapsed(), text=chunk.text)
    return ToolCallDelta(process_id=process.id, time=process.elapsed(), index=chunk.index, call_id=chunk.call_id,
                         tool_name=chunk.tool_name, arguments=chunk.arguments)


class AgentStream:
    """A running agent run, as `Agent.run_stream` gives it: iterate it for the run's events as they happen,
    then read `result`.

    Iterating ends when the run does; if the run failed, its exception is raised there (at the end of the
    iteration, after every event it reported). Events wait in an unbounded buffer, so a slow reader never slows
    the run down.
    """

    def __init__(self) -> None:
        self._send: MemoryObjectSendStream[AgentEvent]
        self._send, self._receive = anyio.create_memory_object_stream[AgentEvent](math.inf)
        self._result: AgentRunResult | None = None
        self._error: Exception | None = None
        self._error_seen = False
        self._iterated = False

    def __aiter__(self) -> AsyncIterator[AgentEvent]:
        if self._iterated:
            raise UserError('An AgentStream can be iterated once; read `stream.result` for the outcome.')
        self._iterated = True
        return self._events()

    async def _events(self) -> AsyncIterator[AgentEvent]:
        async for event in self._receive:
            yield event
        if self._error is not None:
            self._error_seen = True
            raise self._error

    @property
    def result(self) -> AgentRunResult:
        """The run's result, once the run has finished (after iterating to the end)."""
        if self._result is None:
            if self._error is not None:
                raise UserError(f'The run failed ({type(self._error).__name__}: {self._error}); it has no result.')
            raise UserError('The run has not finished: iterate the stream to its end before reading `result`.')
        return self._result

    async def _drive(self, run: Callable[[EventListener], Awaitable[AgentRunResult]]) -> None:
        token = anyio.lowlevel.current_token()
        home = threading.get_ident()
        send = self._send

        def listener(event: AgentEvent) -> None:
            # Sync tools report progress from worker threads; the memory stream belongs to the event loop.
            if threading.get_ident() == home:
                send.send_nowait(event)
            else:
                anyio.from_thread.run_sync(send.send_nowait, event, token=token)

        with send:
            try:
                self._result = await run(listener)
            except Exception as exc:
                self._error = exc


@asynccontextmanager
async def open_run_stream(run: Callable[[EventListener], Awaitable[AgentRunResult]]) -> AsyncIterator[AgentStream]:
    """Start `run(listener)` in a task and yield the `AgentStream` its events go to. Leaving the block cancels the
    run if it is still going; a failure nobody iterated up to is raised when the block ends."""
    stream = AgentStream()
    raised: Exception | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(stream._drive, run)
        try:
            yield stream
        except Exception as exc:  # re-raised below as itself, not wrapped in the task group's ExceptionGroup
            raised = exc
        finally:
            group.cancel_scope.cancel()
    stream._receive.close()
    if raised is not None:
        raise raised
    if stream._error is not None and not stream._error_seen:
        raise stream._error
