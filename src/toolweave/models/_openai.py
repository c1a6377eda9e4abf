"""OpenAI-compatible Chat Completions on the official `openai` SDK: OpenAI, Ollama, vLLM, a llama.cpp server."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from typing import Any

import httpx2

from toolweave.exceptions import ModelError, UserError
from toolweave.models._adapter import SdkAdapter, SdkErrors
from toolweave.models._base import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TIMEOUT,
    AssistantMessage,
    Message,
    ModelResponse,
    ModelSettings,
    ResponseChunk,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from toolweave.models._retry import RetryPolicy
from toolweave.models._shared import HttpClient, arguments_object, plain_json_object, resolve_tool_choice
from toolweave.models._stream import ReplyBuilder, new_call_id
from toolweave.tools._definition import ToolDefinition

try:
    import openai
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionChunk,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageFunctionToolCallParam,
        ChatCompletionMessageParam,
        ChatCompletionToolChoiceOptionParam,
    )
    from openai.types.shared_params import FunctionDefinition
except ImportError as _exc:  # pragma: no cover - exercised by a test that hides the package
    raise ImportError(
        'Please install the `openai` package to use OpenAI-compatible models: `pip install "toolweave[openai]"`.'
    ) from _exc

__all__ = ('OpenAIChatModel',)

logger = logging.getLogger('toolweave.models')

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
        status=openai.APIStatusError,
        timeout=openai.APITimeoutError,
        connection=openai.APIConnectionError,
        base=openai.APIError,
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
        self._ignores_named_choice = False
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
        """The keyword arguments for `chat.completions.create`, as the SDK receives them.

        Every message shape is one that the strictest servers accept: string `content` everywhere (`""` beside
        tool calls, never `null`: llama-cpp-python rejects `null`), tool call arguments that are a JSON object
        (Ollama parses them), and `tool_choice` sent whenever tools are (llama.cpp reads a missing one as "answer
        in text").
        """
        # OpenAI's newer models only accept `max_completion_tokens`; compatible servers know `max_tokens`.
        max_key = 'max_completion_tokens' if self._is_openai() else 'max_tokens'
        request: dict[str, Any] = {
            'model': self.model_name,
            'messages': [_message(m) for m in messages],
            max_key: settings.max_tokens or DEFAULT_MAX_TOKENS,
        }
        choice = resolve_tool_choice(settings, tools, adapter=self._adapter)
        if choice is not None:
            if choice[0] == 'tool' and self._ignores_named_choice:
                # The server ignores a named choice: offering only that tool with 'required' says the same.
                tools, choice = [t for t in tools if t.name == choice[1]], ('required', '')
            request['tools'] = [_tool(t) for t in tools]
            request['tool_choice'] = _tool_choice(*choice)
            if settings.parallel_tool_calls is not None:
                request['parallel_tool_calls'] = settings.parallel_tool_calls
        if settings.temperature is not None:
            request['temperature'] = settings.temperature
        if settings.response_format is not None:
            schema = plain_json_object(settings.response_format, where='ModelSettings.response_format')
            request['response_format'] = {'type': 'json_schema', 'json_schema': {
                'name': 'reply', 'schema': schema, 'strict': bool(self._is_openai())}}
        if settings.extra_body:
            request['extra_body'] = dict(settings.extra_body)
        request['timeout'] = settings.timeout or DEFAULT_TIMEOUT
        return request

    def _is_openai(self) -> bool:
        return self.base_url == OPENAI_BASE_URL

    @property
    def is_local(self) -> bool:
        if self.provider in _LOCAL_PROVIDERS:
            return True
        host = httpx2.URL(self.base_url).host
        return host in ('localhost', '::1') or host.endswith('.localhost') or host.startswith('127.')

    @property
    def takes_grammar(self) -> bool:
        return self.provider == 'llamacpp'

    @property
    def honours_named_tool_choice(self) -> bool:
        """Whether the server is known to honour a named `tool_choice`: not once a reply showed it did not
        (llama.cpp's `llama-server` takes only 'auto', 'none' and 'required'); such requests are then sent as
        'required' with only the named tool offered."""
        return not self._ignores_named_choice

    def _unhonoured_choice(self, request: dict[str, Any], response: ModelResponse) -> dict[str, Any] | None:
        choice = request.get('tool_choice')
        if not isinstance(choice, dict):
            return None
        name = choice['function']['name']
        if any(call.name == name for call in response.tool_calls):
            return None
        self._ignores_named_choice = True
        logger.warning(
            "%s at %s ignored tool_choice=%r: the reply %s. The server does not honour a named tool choice "
            "(llama.cpp's llama-server takes only 'auto', 'none' and 'required'); from now on such requests offer "
            "only that tool with tool_choice='required'.", self._label(), self.base_url, name,
            f'called {", ".join(c.name for c in response.tool_calls)}' if response.tool_calls else 'called no tool')
        again = {**request, 'tools': [t for t in request['tools'] if t['function']['name'] == name],
                 'tool_choice': 'required'}
        return again

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

    async def _open_stream(self, client: openai.AsyncOpenAI, request: dict[str, Any]) -> Any:
        # `stream_options` asks for the usage chunk at the end; servers that do not know it ignore it.
        return await client.chat.completions.create(
            **request, stream=True, stream_options={'include_usage': True}
        )

    def _stream_parser(self) -> _ChunkParser:
        return _ChunkParser(self.model_name)

    def _parse(self, completion: object) -> ModelResponse:
        # The SDK builds models without validation: a server that is not OpenAI-compatible yields a `str`
        # (non-JSON body) or a completion whose fields are missing.
        try:
            if not isinstance(completion, ChatCompletion) or not completion.choices:
                raise TypeError('no choices')
            message = completion.choices[0].message
            calls: list[ToolCall] = []
            for call in message.tool_calls or ():
                # Servers that leave out the id still need one: the tool result must refer to it.
                call_id = call.id or new_call_id()
                if call.type == 'custom':
                    calls.append(ToolCall(id=call_id, name=call.custom.name, arguments=call.custom.input))
                else:
                    calls.append(ToolCall(id=call_id, name=call.function.name, arguments=call.function.arguments))
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
                truncated=completion.choices[0].finish_reason == 'length',
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


_LOCAL_PROVIDERS = frozenset({'ollama', 'llamacpp', 'vllm'})

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
            {'id': c.id, 'type': 'function', 'function': {'name': c.name, 'arguments': _wire_arguments(c.arguments)}}
            for c in message.tool_calls
        ]
        return {'role': 'assistant', 'content': message.content or '', 'tool_calls': calls}
    if isinstance(message, ToolMessage):
        # Chat Completions has no error flag for tool results; the text itself says `Error: ...`.
        return {'role': 'tool', 'tool_call_id': message.tool_call_id, 'content': message.content}
    raise UserError(
        f'Unsupported message type in OpenAIChatModel: {type(message).__name__}. '
        'Use SystemMessage, UserMessage, AssistantMessage or ToolMessage.'
    )


def _wire_arguments(arguments: str) -> str:
    """The arguments as sent back in the history: as the model wrote them when they are a JSON object, else
    wrapped into one (see `arguments_object`)."""
    try:
        if isinstance(json.loads(arguments), dict):
            return arguments
    except ValueError:
        pass
    return json.dumps(arguments_object(arguments), ensure_ascii=False)


def _tool_choice(kind: str, name: str) -> ChatCompletionToolChoiceOptionParam:
    if kind == 'tool':
        return {'type': 'function', 'function': {'name': name}}
    if kind == 'required':
        return 'required'
    return 'none' if kind == 'none' else 'auto'


class _ChunkParser:
    """Chat Completions chunks into reply chunks: `delta.content` is text; `delta.tool_calls[i]` carries a call's
    id and name (once, or on every chunk for some servers) and pieces of its arguments."""

    def __init__(self, model_name: str) -> None:
        self._builder = ReplyBuilder()
        self._model_name = model_name
        self._finish_reason: str | None = None
        self._usage = Usage(requests=1)

    def feed(self, event: object) -> list[ResponseChunk]:
        if not isinstance(event, ChatCompletionChunk):
            raise TypeError(f'not a chat completion chunk: {type(event).__name__}')
        if event.model:
            self._model_name = event.model
        if event.usage is not None:
            self._usage = Usage(1, event.usage.prompt_tokens or 0, event.usage.completion_tokens or 0)
        chunks: list[ResponseChunk] = []
        for choice in event.choices or ():
            if choice.index:  # only the first choice is the reply (`n` is never sent)
                continue
            delta = choice.delta
            if delta is not None:
                chunks += self._builder.text(delta.content or delta.refusal or '')
                for position, call in enumerate(delta.tool_calls or ()):
                    function = call.function
                    chunks += self._builder.tool_call(
                        call.index if call.index is not None else position,
                        call_id=call.id,
                        name=function.name if function is not None else None,
                        arguments=function.arguments if function is not None else None,
                    )
            if choice.finish_reason:
                self._finish_reason = choice.finish_reason
        return chunks

    def finish(self) -> ModelResponse:
        if self._finish_reason is None:
            raise ModelError(
                f'The stream for model {self._model_name!r} ended before the reply did (no `finish_reason` came): '
                'the connection was probably cut. The reply is incomplete and was not retried; try again.'
            )
        return self._builder.response(usage=self._usage, model_name=self._model_name,
                                      truncated=self._finish_reason == 'length', empty_arguments='{}')


def _tool(tool: ToolDefinition) -> ChatCompletionFunctionToolParam:
    parameters = plain_json_object(tool.parameters, where=f'Parameters schema of tool {tool.name!r}')
    function: FunctionDefinition = {'name': tool.name, 'parameters': parameters}
    if tool.description:
        function['description'] = tool.description
    if tool.metadata.strict:
        function['strict'] = True
    return {'type': 'function', 'function': function}
