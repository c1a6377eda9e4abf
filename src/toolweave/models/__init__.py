"""Chat models: the `Model` protocol, messages, and adapters for the providers' official SDKs."""

from __future__ import annotations

from toolweave.models._base import (
    AssistantMessage,
    Message,
    Model,
    ModelResponse,
    ModelSettings,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)

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
