"""OpenAI-compatible Chat Completions on the official `openai` SDK: OpenAI, Ollama, vLLM, a llama.cpp server."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from toolweave.exceptions import ModelError, UserError
from toolweave.models._adapter import SdkAdapter, SdkErrors
from toolweave.models._base import (
    AssistantMessage,
    Message,
    ModelResponse,
    ModelSettings,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from toolweave.models._retry import RetryPolicy
from toolweave.models._shared import HttpClient, plain_json_object
from toolweave.tools._definition import ToolDefinition

try:
    import openai
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageFunctionToolCallParam,
        ChatCompletionMessageParam,
    )
    from openai.types.shared_params import FunctionDefinition
except ImportError as _exc:  # pragma: no cover - exercised by a test that hides the package
    raise ImportError(
        'Please install the `openai` package to use OpenAI-compatible models: `pip install "toolweave[openai]"`.'
    ) from _exc

__all__ = ('OpenAIChatModel',)

OPENAI_BASE_URL = 'https://api.openai.com/v1'

# Local OpenAI-compatible servers ignore the key, but the SDK refuses to start without one.
_PLACEHOLDER_KEY = 'not-needed'


class OpenAIChatModel(SdkAdapter[openai.AsyncOpenAI]):
    """A chat model behind an OpenAI-compatible Chat Completions endpoint.

    Works with OpenAI itself and with any server that speaks the same API: Ollama (`http://localhost:11434/v1`),
    vLLM, a llama.cpp server. Requests go through `openai.AsyncOpenAI` with the SDK's own retries off; rate
    limits and transient errors are retried by `retry` (a [`RetryPolicy`][toolweave.models.RetryPolicy]).

    Args:
        model_name: The provider's model name, such as `gpt-4o-mini` or `qwen2.5`.
        base_url: The API root (ending in `/v1` for most servers); `None` means OpenAI.
        api_key: The key; defaults to the `api_key_env` environment variable. Servers at a custom `base_url`
            get a placeholder key when none is set, since local servers do not check it.
        http_client: An `httpx2.AsyncClient` or `httpx.AsyncClient` to send requests with (a mock transport in
            tests). It stays open; closing it is the caller's job.
        client: A ready `openai.AsyncOpenAI`; it is copied with `max_retries=0`.
        max_retries: Retries after the first attempt; overrides `retry.max_retries` when given.
        retry: The backoff policy.
        settings: Default settings; the `settings` passed to `respond` override them field by field.
        provider: The model string prefix, used in `name` and in error messages (`openai`, `ollama`, ...).
        api_key_env: The environment variable holding the key, named in authentication errors.
    """

    _adapter = 'OpenAIChatModel'
    _sdk_client_name = 'openai.AsyncOpenAI'
    _sdk_client_type = openai.AsyncOpenAI
    _default_base_url = OPENAI_BASE_URL
    _errors = SdkErrors(
        status=openai.APIStatusError, timeout=openai.APITimeoutError, connection=openai.APIConnectionError
    )

    def __init__(
        self,
        model_name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        http_client: HttpClient | None = None,
        client: openai.AsyncOpenAI | None = None,
        max_retries: int | None = None,
        retry: RetryPolicy | None = None,
        settings: ModelSettings | None = None,
        provider: str = 'openai',
        api_key_env: str | None = 'OPENAI_API_KEY',
    ) -> None:
        self.provider = provider
        self.api_key_env = api_key_env
        super().__init__(
            model_name,
            base_url=base_url,
            api_key=api_key,
            http_client=http_client,
            client=client,
            max_retries=max_retries,
            retry=retry,
            settings=settings,
        )

    @property
    def name(self) -> str:
        return f'{self.provider}:{self.model_name}'

    def __repr__(self) -> str:
        extra = f', base_url={self._base_url!r}' if self._base_url else ''
        return f'OpenAIChatModel({self.model_name!r}{extra})'

    def build_request(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition], settings: ModelSettings
    ) -> dict[str, Any]:
        """The keyword arguments for `chat.completions.create`, as the SDK receives them."""
        request: dict[str, Any] = {'model': self.model_name, 'messages': [_message(m) for m in messages]}
        if tools:
            request['tools'] = [_tool(t) for t in tools]
            if settings.parallel_tool_calls is not None:
                request['parallel_tool_calls'] = settings.parallel_tool_calls
        if settings.temperature is not None:
            request['temperature'] = settings.temperature
        if settings.max_tokens is not None:
            # OpenAI's newer models only accept `max_completion_tokens`; compatible servers know `max_tokens`.
            key = 'max_completion_tokens' if self._is_openai() else 'max_tokens'
            request[key] = settings.max_tokens
        if settings.timeout is not None:
            request['timeout'] = settings.timeout
        return request

    def _is_openai(self) -> bool:
        return self.base_url == OPENAI_BASE_URL

    def _new_client(self) -> openai.AsyncOpenAI:
        api_key = self._api_key or (os.environ.get(self.api_key_env) if self.api_key_env else None)
        if not api_key:
            if self._base_url is None:
                hint = f'set {self.api_key_env} or pass' if self.api_key_env else 'pass'
                raise ModelError(f'No API key for model {self.name!r}: {hint} `api_key=...` to `OpenAIChatModel(...)`.')
            api_key = _PLACEHOLDER_KEY
        return openai.AsyncOpenAI(
            api_key=api_key,
            base_url=self._base_url or OPENAI_BASE_URL,
            http_client=self._http_client,
            max_retries=0,
        )

    async def _send(self, client: openai.AsyncOpenAI, request: dict[str, Any]) -> object:
        # `request` is built (and typed) message by message in `build_request`; the SDK's overloads only see a dict.
        completion: object = await client.chat.completions.create(**request)
        return completion

    def _parse(self, completion: object) -> ModelResponse:
        # The SDK builds models without validation: a server that is not OpenAI-compatible yields a `str`
        # (non-JSON body) or a completion whose fields are missing.
        try:
            if not isinstance(completion, ChatCompletion) or not completion.choices:
                raise TypeError('no choices')
            message = completion.choices[0].message
            calls: list[ToolCall] = []
            for call in message.tool_calls or ():
                if call.type == 'function':
                    calls.append(ToolCall(id=call.id, name=call.function.name, arguments=call.function.arguments))
                else:
                    calls.append(ToolCall(id=call.id, name=call.custom.name, arguments=call.custom.input))
            usage = completion.usage
            return ModelResponse(
                text=message.content if message.content is not None else message.refusal,
                tool_calls=tuple(calls),
                usage=Usage(
                    requests=1,
                    input_tokens=usage.prompt_tokens if usage else 0,
                    output_tokens=usage.completion_tokens if usage else 0,
                ),
                model_name=completion.model or self.model_name,
            )
        except (AttributeError, TypeError, IndexError) as exc:
            shown = str(completion)
            raise ModelError(
                f'{self._label()} at {self.base_url} sent a reply for model {self.model_name!r} that is not a chat '
                f'completion: {shown[:300]!r}. Check that `base_url` points at an OpenAI-compatible API '
                '(it usually ends in `/v1`).'
            ) from exc

    def _label(self) -> str:
        return _PROVIDER_LABELS.get(self.provider, self.provider)

    def _key_env(self) -> str | None:
        return self.api_key_env


_PROVIDER_LABELS = {
    'openai': 'OpenAI',
    'ollama': 'Ollama',
    'vllm': 'vLLM',
    'llamacpp': 'llama.cpp server',
    'openai-compatible': 'OpenAI-compatible server',
}


def _message(message: Message) -> ChatCompletionMessageParam:
    if isinstance(message, SystemMessage):
        return {'role': 'system', 'content': message.content}
    if isinstance(message, UserMessage):
        return {'role': 'user', 'content': message.content}
    if isinstance(message, AssistantMessage):
        if not message.tool_calls:
            return {'role': 'assistant', 'content': message.content or ''}
        calls: list[ChatCompletionMessageFunctionToolCallParam] = [
            {'id': c.id, 'type': 'function', 'function': {'name': c.name, 'arguments': c.arguments}}
            for c in message.tool_calls
        ]
        return {'role': 'assistant', 'content': message.content, 'tool_calls': calls}
    if isinstance(message, ToolMessage):
        # Chat Completions has no error flag for tool results; the text itself says `Error: ...`.
        return {'role': 'tool', 'tool_call_id': message.tool_call_id, 'content': message.content}
    raise UserError(
        f'Unsupported message type in OpenAIChatModel: {type(message).__name__}. '
        'Use SystemMessage, UserMessage, AssistantMessage or ToolMessage.'
    )


def _tool(tool: ToolDefinition) -> ChatCompletionFunctionToolParam:
    parameters = plain_json_object(tool.parameters, where=f'Parameters schema of tool {tool.name!r}')
    function: FunctionDefinition = {'name': tool.name, 'parameters': parameters}
    if tool.description:
        function['description'] = tool.description
    if tool.metadata.strict:
        function['strict'] = True
    return {'type': 'function', 'function': function}
