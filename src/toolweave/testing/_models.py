"""Fake chat models for tests, demos and benchmarks: replies from a script or from a function.

Both fakes record every request they receive and report usage with a documented estimate (see
`estimate_usage`), so token comparisons between two agent configurations count what was really sent. Both can
stream (`stream`): the reply comes as chunks of about one token (four characters), optionally at a set rate.
"""

from __future__ import annotations

import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

import anyio

from toolweave._json import compact
from toolweave.exceptions import UserError
from toolweave.models import (
    AssistantMessage,
    Message,
    ModelResponse,
    ModelSettings,
    ResponseChunk,
    ResponseStream,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from toolweave.models._stream import response_chunks
from toolweave.tools import ToolDefinition

__all__ = (
    'FunctionModel',
    'ModelRequest',
    'Reply',
    'ScriptedModel',
    'estimate_tokens',
    'estimate_usage',
    'serialize_messages',
    'serialize_tools',
    'to_response',
)

CHARS_PER_TOKEN = 4
"""The estimator's ratio: about four characters of English or JSON per token."""

Reply: TypeAlias = str | ModelResponse | ToolCall | Mapping[str, Any] | Sequence[ToolCall | Mapping[str, Any]]
"""What a script entry or a `FunctionModel` function may give for one reply:

- `str`: a text reply (the final answer when the agent loop sees no tool calls);
- `ModelResponse`: used as is (its usage too, unless it is all zeros: then the estimate fills it in);
- `ToolCall`, or a mapping `{'tool': name, 'arguments': {...} | 'json text', 'id': optional}`: one tool call;
- a list of those: parallel tool calls in one reply.
"""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One request a fake model received."""

    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...]
    settings: ModelSettings | None
    usage: Usage
    """The usage reported for the reply to this request."""


def _message_dict(message: Message) -> dict[str, Any]:
    if isinstance(message, AssistantMessage):
        data: dict[str, Any] = {'role': 'assistant', 'content': message.content}
        if message.tool_calls:
            data['tool_calls'] = [{'id': c.id, 'name': c.name, 'arguments': c.arguments} for c in message.tool_calls]
        return data
    if isinstance(message, ToolMessage):
        return {'role': 'tool', 'tool_call_id': message.tool_call_id, 'name': message.name, 'content': message.content}
    return {'role': message.role, 'content': message.content}


def serialize_messages(messages: Iterable[Message]) -> str:
    """The messages as compact JSON, close to what a chat-completions request carries."""
    return compact([_message_dict(m) for m in messages])


def serialize_tools(tools: Iterable[ToolDefinition]) -> str:
    """The tool definitions as compact JSON (name, description, parameters), as a request carries them."""
    data = [{'name': t.name, 'description': t.description, 'parameters': dict(t.parameters)} for t in tools]
    return compact(data)


def estimate_tokens(text: str) -> int:
    """`ceil(len(text) / 4)`: the documented estimate of how many tokens a text costs."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimate_usage(messages: Sequence[Message], tools: Sequence[ToolDefinition], response: ModelResponse) -> Usage:
    """The usage a fake model reports for one request.

    - input tokens = `ceil(chars / 4)` of the messages serialised as compact JSON (`serialize_messages`) plus
      the tool definitions actually sent, serialised the same way (`serialize_tools`);
    - output tokens = `ceil(chars / 4)` of the reply: its text plus its tool calls serialised as compact JSON.

    Real tokenizers differ by model; the estimate is the same for every configuration compared, so ratios
    between configurations are meaningful even where absolute numbers are not.
    """
    sent = serialize_messages(messages) + (serialize_tools(tools) if tools else '')
    reply = AssistantMessage(response.text, response.tool_calls)
    return Usage(1, estimate_tokens(sent), estimate_tokens(serialize_messages([reply])))


def _tool_call(spec: ToolCall | Mapping[str, Any], default_id: str) -> ToolCall:
    if isinstance(spec, ToolCall):
        return spec
    name = spec.get('tool', spec.get('name'))
    if not isinstance(name, str):
        raise UserError(
            f'Tool call spec in a scripted reply: {dict(spec)!r} has no tool name. '
            "Write it as {'tool': 'name', 'arguments': {...}}."
        )
    arguments = spec.get('arguments', spec.get('args', {}))
    text = arguments if isinstance(arguments, str) else compact(arguments)
    call_id = spec.get('id') or default_id
    return ToolCall(str(call_id), name, text)


def to_response(reply: object, *, next_id: Callable[[], str]) -> ModelResponse:
    """Turn a `Reply` into a `ModelResponse`; `next_id` names tool calls that have no id."""
    if isinstance(reply, ModelResponse):
        return reply
    if isinstance(reply, str):
        return ModelResponse(text=reply)
    if isinstance(reply, ToolCall | Mapping):
        return ModelResponse(tool_calls=(_tool_call(reply, next_id()),))
    if isinstance(reply, Sequence) and reply and all(isinstance(r, ToolCall | Mapping) for r in reply):
        return ModelResponse(tool_calls=tuple(_tool_call(r, next_id()) for r in reply))
    raise UserError(
        f'Unsupported reply for a fake model: {reply!r}. Give a str (text), a ModelResponse, a ToolCall, '
        "a mapping {'tool': name, 'arguments': {...}}, or a non-empty list of tool calls."
    )


class _FakeModel(ABC):
    """What both fakes share: request recording, usage estimate, simulated latency and streaming, call ids."""

    def __init__(self, *, name: str, latency: float, tokens_per_second: float | None = None) -> None:
        if latency < 0:
            raise UserError(f'latency of fake model {name!r} must be >= 0 seconds, got {latency!r}.')
        if tokens_per_second is not None and not tokens_per_second > 0:
            raise UserError(f'tokens_per_second of fake model {name!r} must be > 0 or None, '
                            f'got {tokens_per_second!r}.')
        self._name = name
        self.latency = latency
        """Seconds each reply takes (simulated with `anyio.sleep`); when streamed, the wait before the first chunk."""
        self.tokens_per_second = tokens_per_second
        """How fast a streamed reply arrives, a chunk of `CHARS_PER_TOKEN` characters at a time; `None`: at once."""
        self.requests: list[ModelRequest] = []
        """Every request received, in order."""
        self._ids = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def call_count(self) -> int:
        return len(self.requests)

    @property
    def last_messages(self) -> tuple[Message, ...]:
        """The messages of the last request (empty before the first)."""
        return self.requests[-1].messages if self.requests else ()

    def _next_id(self) -> str:
        self._ids += 1
        return f'call_{self._ids}'

    async def _finish(
        self,
        reply: object,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings | None,
    ) -> ModelResponse:
        response = to_response(reply, next_id=self._next_id)
        if response.usage == Usage():
            response = replace(response, usage=estimate_usage(messages, tools, response))
        if not response.model_name:
            response = replace(response, model_name=self._name)
        self.requests.append(ModelRequest(tuple(messages), tuple(tools), settings, response.usage))
        if self.latency:
            await anyio.sleep(self.latency)
        return response

    @abstractmethod
    async def respond(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """The next reply, recorded."""

    @asynccontextmanager
    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ResponseStream]:
        """The reply `respond` would give, as chunks of `CHARS_PER_TOKEN` characters (at `tokens_per_second`)."""
        yield _FakeStream(await self.respond(messages, tools, settings), self.tokens_per_second)


class _FakeStream:
    def __init__(self, response: ModelResponse, tokens_per_second: float | None) -> None:
        self._response = response
        self._pause = 0.0 if tokens_per_second is None else 1 / tokens_per_second
        self._done = False

    async def __aiter__(self) -> AsyncIterator[ResponseChunk]:
        for chunk in response_chunks(self._response, size=CHARS_PER_TOKEN):
            if self._pause:
                await anyio.sleep(self._pause)
            yield chunk
        self._done = True

    @property
    def response(self) -> ModelResponse:
        if not self._done:
            raise UserError('The reply is not complete yet: iterate the stream to its end before reading `response`.')
        return self._response


class ScriptedModel(_FakeModel):
    """A model that replies from a script, one entry per request, and records what it was sent.

    Usage is estimated as documented in `estimate_usage` (input tokens = `ceil(chars / 4)` of the serialised
    messages and tool definitions sent; output tokens likewise for the reply).

    ```python
    from toolweave.testing import ScriptedModel

    model = ScriptedModel([{'tool': 'add', 'arguments': {'a': 1, 'b': 2}}, 'The sum is 3.'])
    ```

    Args:
        responses: The replies, in order (see `Reply` for the accepted forms).
        name: The model name reported in responses.
        latency: Seconds each reply takes, simulated with `anyio.sleep` (for demos and benchmarks).
        tokens_per_second: How fast a streamed reply arrives (four characters a token); `None`: at once.
    """

    def __init__(self, responses: Iterable[Reply], *, name: str = 'scripted', latency: float = 0.0,
                 tokens_per_second: float | None = None) -> None:
        super().__init__(name=name, latency=latency, tokens_per_second=tokens_per_second)
        self._script: list[Reply] = list(responses)
        for index, reply in enumerate(self._script):  # fail at construction, not in the middle of a run
            try:
                to_response(reply, next_id=lambda: 'check')
            except UserError as exc:
                raise UserError(f'Script entry {index} of ScriptedModel {name!r}: {exc}') from None

    @property
    def remaining(self) -> int:
        """How many scripted replies have not been used yet."""
        return len(self._script) - len(self.requests)

    async def respond(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        index = len(self.requests)
        if index >= len(self._script):
            raise UserError(
                f'ScriptedModel {self._name!r} ran out of replies: it was scripted with {len(self._script)} '
                f'repl{"y" if len(self._script) == 1 else "ies"} and received request #{index + 1} '
                f'(last message: {_describe_last(messages)}). Add replies to the script, or check why the agent '
                'made more model calls than expected.'
            )
        return await self._finish(self._script[index], messages, tools, settings)


ReplyFunction: TypeAlias = Callable[[list[Message], list[ToolDefinition]], object]
"""`fn(messages, tools)` returning a `Reply`, or an awaitable of one."""


class FunctionModel(_FakeModel):
    """A model whose every reply is decided by a function `fn(messages, tools)` (sync or async).

    The function receives copies of the messages and tool definitions of the request and returns a `Reply`
    (a str, a `ModelResponse`, a tool call or a list of tool calls). Usage is estimated as in
    `estimate_usage` unless the function returns a `ModelResponse` with non-zero usage.

    ```python
    from toolweave.testing import FunctionModel

    def reply(messages, tools):
        return 'done' if messages[-1].role == 'tool' else {'tool': 'clock', 'arguments': {}}

    model = FunctionModel(reply)
    ```
    """

    def __init__(self, fn: ReplyFunction, *, name: str = 'function', latency: float = 0.0,
                 tokens_per_second: float | None = None) -> None:
        if not callable(fn):
            raise UserError(f'FunctionModel needs a callable fn(messages, tools), got {fn!r}.')
        super().__init__(name=name, latency=latency, tokens_per_second=tokens_per_second)
        self.fn = fn

    async def respond(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        reply = self.fn(list(messages), list(tools))
        if inspect.isawaitable(reply):
            reply = await _await(reply)
        return await self._finish(reply, messages, tools, settings)


async def _await(value: Awaitable[object]) -> object:
    return await value


def _describe_last(messages: Sequence[Message]) -> str:
    if not messages:
        return '(no messages)'
    last = messages[-1]
    if isinstance(last, SystemMessage | UserMessage | ToolMessage):
        text = last.content
    else:
        text = last.content or ', '.join(c.name for c in last.tool_calls)
    shown = text if len(text) <= 80 else text[:77] + '...'
    return f'{last.role} {shown!r}'
