from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from toolweave.exceptions import UserError
from toolweave.tools._definition import ToolDefinition

__all__ = (
    'DEFAULT_MAX_TOKENS',
    'DEFAULT_TIMEOUT',
    'AssistantMessage',
    'Message',
    'Model',
    'ModelResponse',
    'ModelSettings',
    'ResponseChunk',
    'ResponseStream',
    'StreamingModel',
    'SystemMessage',
    'TextChunk',
    'ToolCall',
    'ToolCallChunk',
    'ToolChoice',
    'ToolMessage',
    'Usage',
    'UserMessage',
)

DEFAULT_MAX_TOKENS = 4096
"""The reply limit an adapter sends when `ModelSettings.max_tokens` is not set, so that a local server never
generates for minutes on end."""
DEFAULT_TIMEOUT = 300.0
"""Seconds one request may take, from sending it to the last byte of the reply, when `ModelSettings.timeout` is
not set."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call a model asked for. `arguments` is the raw JSON text the model sent."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Provider-reported usage (or, for scripted models, the documented estimate)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.requests + other.requests,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class SystemMessage:
    content: str
    role: Literal['system'] = 'system'


@dataclass(frozen=True, slots=True)
class UserMessage:
    content: str
    role: Literal['user'] = 'user'


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    role: Literal['assistant'] = 'assistant'


@dataclass(frozen=True, slots=True)
class ToolMessage:
    tool_call_id: str
    name: str
    content: str
    is_error: bool = False
    role: Literal['tool'] = 'tool'


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage


ToolChoice: TypeAlias = Literal['auto', 'required', 'none'] | str
"""Which tool calls a reply may make: `'auto'` (the model decides), `'required'` (at least one tool call),
`'none'` (text only), or the name of one offered tool (a call of exactly that tool)."""


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Provider-neutral request settings. `None` leaves the field to the adapter (see each field).

    Settings merge field by field: the settings of a call override the model's own, field by field
    (`extra_body` as a whole).
    """

    temperature: float | None = None
    max_tokens: int | None = None
    """The most tokens one reply may have; `None`: `DEFAULT_MAX_TOKENS` (4096)."""
    parallel_tool_calls: bool | None = None
    """Whether a reply may hold several tool calls; `None`: the provider's default (yes)."""
    timeout: float | None = None
    """Seconds one request may take, from sending it to the last byte of the reply (each retry gets its own);
    `None`: `DEFAULT_TIMEOUT` (300)."""
    tool_choice: ToolChoice | None = None
    """`'auto'`, `'required'`, `'none'` or a tool name; `None`: `'auto'`, which is sent explicitly whenever
    tools are offered (servers such as llama.cpp's read a missing `tool_choice` as "answer in text")."""
    extra_body: Mapping[str, Any] | None = None
    """Provider-specific fields added to the JSON body as they are (for example `{'top_k': 20}` for a local
    server); they win over the fields toolweave sets."""
    text_tool_calls: bool | None = None
    """Read a reply whose whole text is a call of an offered tool, written as text (JSON, `<tool_call>`,
    `<|python_tag|>`, `[TOOL_CALLS]`; see `toolweave.models` docs), as that tool call. `None`: on for local
    servers (Ollama, llama.cpp, vLLM, any server on localhost), off for hosted providers."""
    response_format: Mapping[str, Any] | None = None
    """A JSON schema the reply's text must follow (Chat Completions `response_format` of type `json_schema`:
    llama.cpp and Ollama compile it to a grammar, vLLM to structured outputs, OpenAI with `strict`)."""

    def __post_init__(self) -> None:
        if self.temperature is not None and (isinstance(self.temperature, bool)
                                             or not isinstance(self.temperature, int | float)):
            raise UserError(f'ModelSettings.temperature must be a number or None, got {self.temperature!r}.')
        if self.max_tokens is not None and (isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int)
                                            or self.max_tokens < 1):
            raise UserError(f'ModelSettings.max_tokens must be an int >= 1 or None, got {self.max_tokens!r}.')
        if self.parallel_tool_calls is not None and not isinstance(self.parallel_tool_calls, bool):
            raise UserError(f'ModelSettings.parallel_tool_calls must be a bool or None, '
                            f'got {self.parallel_tool_calls!r}.')
        if self.timeout is not None and (isinstance(self.timeout, bool) or not isinstance(self.timeout, int | float)
                                         or self.timeout <= 0):
            raise UserError(f'ModelSettings.timeout must be a number of seconds > 0 or None, got {self.timeout!r}.')
        if self.tool_choice is not None and (not isinstance(self.tool_choice, str) or not self.tool_choice.strip()):
            raise UserError(f"ModelSettings.tool_choice must be 'auto', 'required', 'none' or a tool name, "
                            f'got {self.tool_choice!r}.')
        if self.text_tool_calls is not None and not isinstance(self.text_tool_calls, bool):
            raise UserError(f'ModelSettings.text_tool_calls must be a bool or None, got {self.text_tool_calls!r}.')
        if self.response_format is not None and not isinstance(self.response_format, Mapping):
            raise UserError(f'ModelSettings.response_format must be a JSON schema (a mapping) or None, '
                            f'got {self.response_format!r}.')
        if self.extra_body is not None and (not isinstance(self.extra_body, Mapping)
                                            or not all(isinstance(key, str) for key in self.extra_body)):
            raise UserError(f'ModelSettings.extra_body must be a mapping with string keys or None, '
                            f'got {self.extra_body!r}.')


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One reply: text, tool calls, or both."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    model_name: str = ''
    truncated: bool = False
    """Whether the reply stopped at the token limit (`max_tokens`) rather than where the model ended it."""


@dataclass(frozen=True, slots=True)
class TextChunk:
    """A piece of a streamed reply's text."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallChunk:
    """A piece of a streamed tool call. The first chunk of each call comes as soon as its id and tool name are
    known (its `arguments` is often `''`); the following ones carry the next pieces of the arguments JSON."""

    index: int
    """The call's position among the reply's tool calls (0, 1, ...)."""
    call_id: str
    tool_name: str
    arguments: str
    """The next piece of the raw arguments JSON text; all pieces of a call joined are its `ToolCall.arguments`."""


ResponseChunk: TypeAlias = TextChunk | ToolCallChunk


class ResponseStream(Protocol):
    """One reply as it arrives: iterate it for chunks; once iteration ends, `response` is the whole reply."""

    def __aiter__(self) -> AsyncIterator[ResponseChunk]: ...

    @property
    def response(self) -> ModelResponse:
        """The complete reply (text, tool calls, usage); raises `UserError` before the stream is consumed."""
        ...


@runtime_checkable
class Model(Protocol):
    """A chat model that can call tools. Adapters wrap the providers' official SDKs."""

    @property
    def name(self) -> str: ...

    async def respond(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings | None = None,
    ) -> ModelResponse: ...


@runtime_checkable
class StreamingModel(Model, Protocol):
    """A model that can also stream its reply. Both SDK adapters and the fakes in `toolweave.testing` are.

    ```python
    model = ScriptedModel(['Hello there.'])
    async with model.stream([UserMessage('Hi')], []) as reply:
        async for chunk in reply:
            pass  # TextChunk / ToolCallChunk, as they arrive
    print(reply.response.text)
    #> Hello there.
    ```
    """

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings | None = None,
    ) -> AbstractAsyncContextManager[ResponseStream]: ...
