from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from toolweave.tools._definition import ToolDefinition

__all__ = (
    'AssistantMessage',
    'Message',
    'Model',
    'ModelResponse',
    'ModelSettings',
    'SystemMessage',
    'ToolCall',
    'ToolMessage',
    'Usage',
    'UserMessage',
)


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


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Provider-neutral request settings; `None` leaves the provider's default."""

    temperature: float | None = None
    max_tokens: int | None = None
    parallel_tool_calls: bool | None = None
    timeout: float | None = None


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One reply: text, tool calls, or both."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    model_name: str = ''


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
