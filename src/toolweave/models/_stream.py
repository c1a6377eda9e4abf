"""Streaming pieces every model shares: assembling a reply from chunks, and a finished reply replayed as chunks."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

from toolweave.exceptions import UserError
from toolweave.models._base import ModelResponse, ResponseChunk, TextChunk, ToolCall, ToolCallChunk, Usage

__all__ = ('CompletedStream', 'ReplyBuilder', 'new_call_id', 'response_chunks')


def new_call_id() -> str:
    """An id for a tool call the server sent without one (the next request must refer to it)."""
    return f'call_{uuid.uuid4().hex[:24]}'


@dataclass(slots=True)
class _Call:
    index: int
    call_id: str | None = None
    name: str | None = None
    parts: list[str] = field(default_factory=list[str])
    started: bool = False
    """Whether the call's first chunk went out (not before its name is known)."""
    sent: int = 0
    """How many of `parts` went out in chunks."""


class ReplyBuilder:
    """Assembles a reply from a provider's stream events and says which chunks each event produces.

    Tool calls are keyed by the provider's own key (an OpenAI `index`, an Anthropic content block index). A
    call's first chunk goes out once its name is known, with the id the provider sent so far (or a new one);
    arguments that came earlier are held back until then. Names and ids are taken once: servers such as
    llama-cpp-python repeat them on every chunk, and concatenating them would corrupt the name.
    """

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, _Call] = {}

    def text(self, piece: str) -> list[ResponseChunk]:
        if not piece:
            return []
        self._text.append(piece)
        return [TextChunk(piece)]

    def tool_call(self, key: int, *, call_id: str | None = None, name: str | None = None,
                  arguments: str | None = None) -> list[ResponseChunk]:
        call = self._calls.get(key)
        if call is None:
            call = self._calls[key] = _Call(index=len(self._calls))
        if call_id and call.call_id is None:
            call.call_id = call_id
        if name and call.name is None:
            call.name = name
        if arguments:
            call.parts.append(arguments)
        if call.name is None:
            return []
        if call.call_id is None:
            call.call_id = new_call_id()
        if not call.started:
            call.started, call.sent = True, len(call.parts)
            return [ToolCallChunk(call.index, call.call_id, call.name, ''.join(call.parts))]
        fresh, call.sent = call.parts[call.sent:], len(call.parts)
        return [ToolCallChunk(call.index, call.call_id, call.name, part) for part in fresh]

    def arguments(self, key: int) -> str:
        """The arguments of the call with this key received so far."""
        call = self._calls.get(key)
        return '' if call is None else ''.join(call.parts)

    def response(self, *, usage: Usage, model_name: str, truncated: bool = False,
                 empty_arguments: str = '') -> ModelResponse:
        """The whole reply. `empty_arguments` replaces the arguments of a call that streamed none."""
        calls = tuple(
            ToolCall(call.call_id or new_call_id(), call.name or '', ''.join(call.parts) or empty_arguments)
            for call in self._calls.values()
        )
        return ModelResponse(text=''.join(self._text) if self._text else None, tool_calls=calls, usage=usage,
                             model_name=model_name, truncated=truncated)


def response_chunks(response: ModelResponse, *, size: int | None = None) -> Iterator[ResponseChunk]:
    """`response` as the chunks a stream of it would carry: its text, then each tool call. With `size`, text and
    arguments come in pieces of at most `size` characters (each call's first chunk still comes first)."""

    def pieces(text: str) -> list[str]:
        if size is None or len(text) <= size:
            return [text]
        return [text[start:start + size] for start in range(0, len(text), size)]

    if response.text:
        for piece in pieces(response.text):
            yield TextChunk(piece)
    for index, call in enumerate(response.tool_calls):
        yield ToolCallChunk(index, call.id, call.name, '')
        for piece in pieces(call.arguments) if call.arguments else ():
            yield ToolCallChunk(index, call.id, call.name, piece)


class CompletedStream:
    """A reply that arrived whole, iterated as chunks (for models and servers that do not stream)."""

    def __init__(self, response: ModelResponse) -> None:
        self._response = response
        self._consumed = False

    async def __aiter__(self) -> AsyncIterator[ResponseChunk]:
        for chunk in response_chunks(self._response):
            yield chunk
        self._consumed = True

    @property
    def response(self) -> ModelResponse:
        if not self._consumed:
            raise UserError('The reply is not complete yet: iterate the stream to its end before reading `response`.')
        return self._response
