"""An agent run's spans, while tracing is on: `invoke_agent {agent}` around the run, `chat {model}` around each
model call (retries included), both with the attributes of the OpenTelemetry GenAI semantic conventions. The tool
calls of the run nest under the run's span as `execute_tool` spans (`Tool.call`), each naming the agent and the
model's call id.

Token usage is recorded on each `chat` span (`gen_ai.usage.*`). The run's span carries the run's totals as
`toolweave.usage.*` instead: a backend that adds up `gen_ai.usage.*` over a trace would otherwise count every
token twice (and a sub-agent's three times).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import ExitStack
from time import perf_counter
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from toolweave import _tracing
from toolweave._tracing import (
    AGENT_DESCRIPTION,
    AGENT_NAME,
    FINISH_REASONS,
    INPUT_MESSAGES,
    INPUT_TOKENS,
    OPERATION,
    OUTPUT_MESSAGES,
    OUTPUT_TOKENS,
    PROVIDER,
    REQUEST_MAX_TOKENS,
    REQUEST_MODEL,
    REQUEST_STREAM,
    REQUEST_TEMPERATURE,
    RESPONSE_MODEL,
    SYSTEM_INSTRUCTIONS,
    TIME_TO_FIRST_CHUNK,
    SpanScope,
    Tracing,
)
from toolweave.models import AssistantMessage, Message, ModelResponse, ModelSettings, SystemMessage, ToolMessage

if TYPE_CHECKING:
    from toolweave.agent._process import AgentProcess

__all__ = ('ChatTrace', 'RunTrace', 'chat_trace', 'run_trace')


def provider_and_model(name: str) -> tuple[str, str]:
    """`('openai', 'gpt-4o')` for the model string `openai:gpt-4o`; a model named without a provider (a fake, a
    custom model) is its own provider."""
    provider, colon, model = name.partition(':')
    return (provider, model) if colon and model else (name, name)


class RunTrace:
    """The `invoke_agent` span of one run; does nothing while tracing is off."""

    __slots__ = ('_agent', '_process', '_scope', '_stack')

    def __init__(self, scope: SpanScope | None, process: AgentProcess, agent: str) -> None:
        self._scope = scope
        self._process = process
        self._agent = agent
        self._stack = ExitStack()

    def __enter__(self) -> Self:
        if self._scope is not None:
            self._stack.enter_context(self._scope)
            self._stack.enter_context(_tracing.agent_calling(self._agent))
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._scope is not None:
            usage = self._process.usage
            self._scope.span.set_attributes({
                'toolweave.usage.llm_calls': usage.llm_calls, 'toolweave.usage.input_tokens': usage.input_tokens,
                'toolweave.usage.output_tokens': usage.output_tokens, 'toolweave.usage.tool_calls': usage.tool_calls,
            })
        self._stack.__exit__(exc_type, exc, tb)

    def finished(self, output: str, finish_reason: str) -> None:
        """The run ended with `output`."""
        if self._scope is None:
            return
        span = self._scope.span
        span.set_attribute('toolweave.agent.finish_reason', finish_reason)
        tracing = _tracing.ACTIVE
        if tracing is not None and tracing.include_content:
            span.set_attribute(OUTPUT_MESSAGES, _json([_output_message(tracing, output, (), finish_reason)]))


def run_trace(agent: str, description: str | None, model: str, instructions: str, prompt: str,
              process: AgentProcess) -> RunTrace:
    """The trace of the run `process` of the agent `agent` (a span only while tracing is on)."""
    tracing = _tracing.ACTIVE
    if tracing is None:
        return RunTrace(None, process, agent)
    provider, model_name = provider_and_model(model)
    attributes: dict[str, Any] = {OPERATION: 'invoke_agent', AGENT_NAME: agent, PROVIDER: provider,
                                  REQUEST_MODEL: model_name, 'toolweave.agent.process_id': process.id}
    if description:
        attributes[AGENT_DESCRIPTION] = tracing.cut(description)
    if process.parent is not None:
        attributes['toolweave.agent.parent_process_id'] = process.parent.id
    if tracing.include_content:
        if instructions:
            attributes[SYSTEM_INSTRUCTIONS] = _json([_text(tracing, instructions)])
        attributes[INPUT_MESSAGES] = _json([{'role': 'user', 'parts': [_text(tracing, prompt)]}])
    return RunTrace(SpanScope(tracing, tracing.start(f'invoke_agent {agent}', attributes)), process, agent)


class ChatTrace(SpanScope):
    """The `chat` span of one model call."""

    __slots__ = ('_started',)

    def __enter__(self) -> Self:
        self._started = perf_counter()
        return super().__enter__()

    def first_chunk(self) -> None:
        """The first piece of a streamed reply arrived."""
        self.span.set_attribute(TIME_TO_FIRST_CHUNK, perf_counter() - self._started)

    def response(self, response: ModelResponse) -> None:
        reason = 'length' if response.truncated else 'tool_calls' if response.tool_calls else 'stop'
        attributes: dict[str, Any] = {FINISH_REASONS: [reason], INPUT_TOKENS: response.usage.input_tokens,
                                      OUTPUT_TOKENS: response.usage.output_tokens}
        if response.model_name:
            attributes[RESPONSE_MODEL] = provider_and_model(response.model_name)[1]
        if self._tracing.include_content:
            attributes[OUTPUT_MESSAGES] = _json([_output_message(self._tracing, response.text, response.tool_calls,
                                                                 reason)])
        self.span.set_attributes(attributes)


def chat_trace(tracing: Tracing, model: str, messages: Sequence[Message], settings: ModelSettings | None, *,
               stream: bool) -> ChatTrace:
    """The span of one call of `model` with `messages` (call it only while tracing is on)."""
    provider, model_name = provider_and_model(model)
    attributes: dict[str, Any] = {OPERATION: 'chat', PROVIDER: provider, REQUEST_MODEL: model_name,
                                  REQUEST_STREAM: stream}
    if settings is not None:
        if settings.max_tokens is not None:
            attributes[REQUEST_MAX_TOKENS] = settings.max_tokens
        if settings.temperature is not None:
            attributes[REQUEST_TEMPERATURE] = float(settings.temperature)
    if tracing.include_content:
        system = [_text(tracing, m.content) for m in messages if isinstance(m, SystemMessage)]
        if system:
            attributes[SYSTEM_INSTRUCTIONS] = _json(system)
        attributes[INPUT_MESSAGES] = _json([_input_message(tracing, m) for m in messages
                                            if not isinstance(m, SystemMessage)])
    return ChatTrace(tracing, tracing.start(f'chat {model_name}', attributes, kind='client'))


# --- messages in the shape of the GenAI conventions (gen_ai.input.messages / gen_ai.output.messages) -----------

def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _text(tracing: Tracing, text: str) -> dict[str, Any]:
    return {'type': 'text', 'content': tracing.cut(text)}


def _arguments(tracing: Tracing, text: str) -> Any:
    """A call's arguments: the JSON value when the text is short enough to keep whole, else the cut text."""
    if len(text) <= tracing.limit:
        try:
            return json.loads(text)
        except ValueError:
            pass
    return tracing.cut(text)


def _call_parts(tracing: Tracing, text: str | None, calls: Sequence[Any]) -> list[dict[str, Any]]:
    parts = [_text(tracing, text)] if text else []
    parts += [{'type': 'tool_call', 'id': call.id, 'name': call.name, 'arguments': _arguments(tracing, call.arguments)}
              for call in calls]
    return parts


def _input_message(tracing: Tracing, message: Message) -> dict[str, Any]:
    if isinstance(message, AssistantMessage):
        return {'role': 'assistant', 'parts': _call_parts(tracing, message.content, message.tool_calls)}
    if isinstance(message, ToolMessage):
        return {'role': 'tool', 'parts': [{'type': 'tool_call_response', 'id': message.tool_call_id,
                                           'response': tracing.cut(message.content)}]}
    return {'role': message.role, 'parts': [_text(tracing, message.content)]}


def _output_message(tracing: Tracing, text: str | None, calls: Sequence[Any], reason: str) -> dict[str, Any]:
    return {'role': 'assistant', 'parts': _call_parts(tracing, text, calls), 'finish_reason': reason}

