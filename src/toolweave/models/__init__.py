"""Chat models: the `Model` protocol, messages, and adapters for the providers' official SDKs.

`OpenAIChatModel` and `AnthropicModel` are imported on first use, so `toolweave.models` works without either SDK;
using an adapter whose SDK is missing raises an `ImportError` that names the extra to install.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolweave.models._base import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TIMEOUT,
    AssistantMessage,
    Message,
    Model,
    ModelResponse,
    ModelSettings,
    ResponseChunk,
    ResponseStream,
    StreamingModel,
    SystemMessage,
    TextChunk,
    ToolCall,
    ToolCallChunk,
    ToolChoice,
    ToolMessage,
    Usage,
    UserMessage,
)
from toolweave.models._guard import ALLOW_MODEL_REQUESTS
from toolweave.models._infer import KNOWN_PROVIDERS, infer_model
from toolweave.models._retry import RetryPolicy

if TYPE_CHECKING:
    from toolweave.models._anthropic import AnthropicModel
    from toolweave.models._openai import OpenAIChatModel

__all__ = (
    'ALLOW_MODEL_REQUESTS',
    'DEFAULT_MAX_TOKENS',
    'DEFAULT_TIMEOUT',
    'KNOWN_PROVIDERS',
    'AnthropicModel',
    'AssistantMessage',
    'Message',
    'Model',
    'ModelResponse',
    'ModelSettings',
    'OpenAIChatModel',
    'ResponseChunk',
    'ResponseStream',
    'RetryPolicy',
    'StreamingModel',
    'SystemMessage',
    'TextChunk',
    'ToolCall',
    'ToolCallChunk',
    'ToolChoice',
    'ToolMessage',
    'Usage',
    'UserMessage',
    'infer_model',
)


def __getattr__(name: str) -> object:
    # The adapters import their SDK at module level; load them only when asked for.
    if name == 'OpenAIChatModel':
        from toolweave.models._openai import OpenAIChatModel

        return OpenAIChatModel
    if name == 'AnthropicModel':
        from toolweave.models._anthropic import AnthropicModel

        return AnthropicModel
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
