"""Anthropic Messages on the official `anthropic` SDK."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from toolweave._checks import check_number
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
from toolweave.models._stream import ReplyBuilder
from toolweave.tools._definition import ToolDefinition

try:
    import anthropic
    from anthropic.types import (
        ContentBlockParam,
        MessageParam,
        RawMessageStreamEvent,
        TextBlockParam,
        ToolChoiceParam,
        ToolParam,
        ToolResultBlockParam,
        ToolUseBlockParam,
    )
    from anthropic.types import Message as AnthropicMessage
except ImportError as _exc:  # pragma: no cover - exercised by a test that hides the package
    raise ImportError(
        'Please install the `anthropic` package to use Anthropic models: `pip install "toolweave[anthropic]"`.'
    ) from _exc

__all__ = ('AnthropicModel',)

ANTHROPIC_BASE_URL = 'https://api.anthropic.com'

_AUTH_ERROR_TEXT = 'Could not resolve authentication method'


class AnthropicModel(SdkAdapter[anthropic.AsyncAnthropic]):
    """A Claude model through the Anthropic Messages API.

    Requests go through `anthropic.AsyncAnthropic` with the SDK's own retries off; rate limits, overload (529)
    and transient errors are retried by `retry` (a [`RetryPolicy`][toolweave.models.RetryPolicy]).

    Args:
        model_name: The model, such as `claude-sonnet-4-5`.
        api_key: The key; defaults to the SDK's lookup (`ANTHROPIC_API_KEY`, then its other credential sources).
        base_url: The API root; `None` means Anthropic's.
        http_client: An `httpx2.AsyncClient` or `httpx.AsyncClient` to send requests with (a mock transport in
            tests). It stays open; closing it is the caller's job.
        client: A ready `anthropic.AsyncAnthropic`; it is copied with `max_retries=0`.
        max_tokens: The reply limit the Messages API requires; `settings.max_tokens` overrides it.
        max_retries: Retries after the first attempt; overrides `retry.max_retries` when given.
        retry: The backoff policy.
        settings: Default settings; the `settings` passed to `respond` override them field by field.
    """

    _adapter = 'AnthropicModel'
    _sdk_client_name = 'anthropic.AsyncAnthropic'
    _sdk_client_type = anthropic.AsyncAnthropic
    _default_base_url = ANTHROPIC_BASE_URL
    _errors = SdkErrors(
        status=anthropic.APIStatusError,
        timeout=anthropic.APITimeoutError,
        connection=anthropic.APIConnectionError,
        base=anthropic.APIError,
    )

    def __init__(
        self,
        model_name: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: HttpClient | None = None,
        client: anthropic.AsyncAnthropic | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_retries: int | None = None,
        retry: RetryPolicy | None = None,
        settings: ModelSettings | None = None,
    ) -> None:
        self.max_tokens = max_tokens
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
        return f'anthropic:{self.model_name}'

    def build_request(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition], settings: ModelSettings
    ) -> dict[str, Any]:
        """The keyword arguments for `messages.create`, as the SDK receives them."""
        if settings.response_format is not None:
            raise UserError('AnthropicModel got ModelSettings.response_format, which the Messages API has no '
                            'equivalent of here. Force a tool instead (`tool_choice=<tool name>`; a strict tool '
                            'holds the model to its schema).')
        system = '\n\n'.join(m.content for m in messages if isinstance(m, SystemMessage))
        request: dict[str, Any] = {
            'model': self.model_name,
            'max_tokens': settings.max_tokens if settings.max_tokens is not None else self.max_tokens,
            'messages': _conversation(messages),
        }
        if system:
            request['system'] = system
        choice = resolve_tool_choice(settings, tools, adapter=self._adapter)
        if choice is not None:
            request['tools'] = [_tool(t) for t in tools]
            request['tool_choice'] = _tool_choice(*choice, parallel=settings.parallel_tool_calls)
        extra: dict[str, Any] = {}
        if settings.temperature is not None:
            # The SDK no longer lists `temperature`; the API still reads it from the body.
            extra['temperature'] = settings.temperature
        extra.update(settings.extra_body or {})
        if extra:
            request['extra_body'] = extra
        request['timeout'] = settings.timeout or DEFAULT_TIMEOUT
        return request

    def _check_options(self) -> None:
        check_number(self.max_tokens, 'max_tokens of AnthropicModel', integer=True, minimum=1)

    def _new_client(self) -> anthropic.AsyncAnthropic:
        try:
            return anthropic.AsyncAnthropic(
                api_key=self._api_key,
                base_url=self._base_url,
                http_client=self._http_client,
                max_retries=0,
            )
        except anthropic.CredentialsError as exc:
            raise self._no_credentials(str(exc)) from exc

    async def _send(self, client: anthropic.AsyncAnthropic, request: dict[str, Any]) -> object:
        try:
            # `request` is built (and typed) block by block; the SDK's overloads only see a dict here.
            reply: object = await client.messages.create(**request)
        except anthropic.CredentialsError as exc:
            raise self._no_credentials(str(exc)) from exc
        except TypeError as exc:
            # The SDK checks for a credential only when it builds the request, and says so with a TypeError.
            if _AUTH_ERROR_TEXT in str(exc):
                raise self._no_credentials('no API key found') from exc
            raise
        return reply

    def _no_credentials(self, detail: str) -> ModelError:
        return ModelError(
            f'No usable credentials for model {self.name!r} ({detail}). '
            'Set ANTHROPIC_API_KEY or pass `api_key=...` to `AnthropicModel(...)`.'
        )

    async def _open_stream(self, client: anthropic.AsyncAnthropic, request: dict[str, Any]) -> Any:
        return await self._send(client, {**request, 'stream': True})

    def _stream_parser(self) -> _EventParser:
        return _EventParser(self.model_name)

    def _label(self) -> str:
        return 'Anthropic'

    def _key_env(self) -> str | None:
        return 'ANTHROPIC_API_KEY'

    def _parse(self, reply: object) -> ModelResponse:
        # The SDK builds models without validation: a non-JSON body arrives as a `str`, a foreign JSON body as a
        # message whose fields are missing.
        try:
            if not isinstance(reply, AnthropicMessage) or reply.content is None:
                raise TypeError('no content')
            texts: list[str] = []
            calls: list[ToolCall] = []
            for block in reply.content:
                if block.type == 'text':
                    texts.append(block.text)
                elif block.type == 'tool_use':
                    calls.append(ToolCall(id=block.id, name=block.name, arguments=json.dumps(block.input)))
                # Thinking and server-tool blocks are the provider's business, not a reply or a tool call.
            usage = reply.usage
            # `input_tokens` excludes prompt-cache reads and writes; the model still processed them.
            input_tokens = (
                usage.input_tokens + (usage.cache_creation_input_tokens or 0) + (usage.cache_read_input_tokens or 0)
            )
            return ModelResponse(
                text=''.join(texts) if texts else None,
                tool_calls=tuple(calls),
                usage=Usage(requests=1, input_tokens=input_tokens, output_tokens=usage.output_tokens),
                model_name=str(reply.model or self.model_name),
                truncated=reply.stop_reason == 'max_tokens',
            )
        except (AttributeError, TypeError) as exc:
            raise ModelError(
                f'Anthropic at {self.base_url} sent a reply for model {self.model_name!r} that is not a message: '
                f'{str(reply)[:300]!r}. Check `base_url`; it should point at the Messages API root.'
            ) from exc


def _conversation(messages: Sequence[Message]) -> list[MessageParam]:
    """Messages as Anthropic turns: consecutive same-role content (tool results, then user text) share one turn."""
    turns: list[tuple[Literal['user', 'assistant'], list[ContentBlockParam]]] = []

    def add(role: Literal['user', 'assistant'], block: ContentBlockParam) -> None:
        if turns and turns[-1][0] == role:
            turns[-1][1].append(block)
        else:
            turns.append((role, [block]))

    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        if isinstance(message, UserMessage):
            add('user', _text(message.content))
        elif isinstance(message, AssistantMessage):
            if message.content:
                add('assistant', _text(message.content))
            for call in message.tool_calls:
                add('assistant', _tool_use(call))
        elif isinstance(message, ToolMessage):
            result: ToolResultBlockParam = {
                'type': 'tool_result',
                'tool_use_id': message.tool_call_id,
                'content': message.content,
            }
            if message.is_error:
                result['is_error'] = True
            add('user', result)
        else:
            raise UserError(
                f'Unsupported message type in AnthropicModel: {type(message).__name__}. '
                'Use SystemMessage, UserMessage, AssistantMessage or ToolMessage.'
            )
    return [_turn(role, blocks) for role, blocks in turns]


def _turn(role: Literal['user', 'assistant'], blocks: list[ContentBlockParam]) -> MessageParam:
    if role == 'user':
        return {'role': 'user', 'content': blocks}
    return {'role': 'assistant', 'content': blocks}


def _text(text: str) -> TextBlockParam:
    return {'type': 'text', 'text': text}


def _tool_use(call: ToolCall) -> ToolUseBlockParam:
    return {'type': 'tool_use', 'id': call.id, 'name': call.name, 'input': arguments_object(call.arguments)}


def _tool_choice(kind: str, name: str, *, parallel: bool | None) -> ToolChoiceParam:
    if kind == 'none':
        return {'type': 'none'}
    serial = parallel is False
    if kind == 'tool':
        return {'type': 'tool', 'name': name, 'disable_parallel_tool_use': True} if serial else \
            {'type': 'tool', 'name': name}
    if kind == 'required':
        return {'type': 'any', 'disable_parallel_tool_use': True} if serial else {'type': 'any'}
    return {'type': 'auto', 'disable_parallel_tool_use': True} if serial else {'type': 'auto'}


class _EventParser:
    """Messages stream events into reply chunks: `text` blocks stream text; a `tool_use` block's start carries the
    call's id and name, its `input_json_delta`s the pieces of its arguments."""

    def __init__(self, model_name: str) -> None:
        self._builder = ReplyBuilder()
        self._model_name = model_name
        self._counts: dict[str, int] = {}
        self._stop_reason: str | None = None
        self._stopped = False

    def feed(self, event: object) -> list[ResponseChunk]:
        typed: RawMessageStreamEvent = event  # type: ignore[assignment]  # checked by the `type` tags below
        if typed.type == 'message_start':
            self._model_name = str(typed.message.model or self._model_name)
            self._count(typed.message.usage)
        elif typed.type == 'content_block_start':
            block = typed.content_block
            if block.type == 'text':
                return self._builder.text(block.text)
            if block.type == 'tool_use':
                return self._builder.tool_call(typed.index, call_id=block.id, name=block.name)
        elif typed.type == 'content_block_delta':
            delta = typed.delta
            if delta.type == 'text_delta':
                return self._builder.text(delta.text)
            if delta.type == 'input_json_delta':
                return self._builder.tool_call(typed.index, arguments=delta.partial_json)
        elif typed.type == 'message_delta':
            self._stop_reason = typed.delta.stop_reason
            self._count(typed.usage)
        elif typed.type == 'message_stop':
            self._stopped = True
        return []

    def _count(self, usage: Any) -> None:
        # Counts in `message_delta` are running totals that replace earlier ones; absent ones keep theirs.
        for name in ('input_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens', 'output_tokens'):
            value = getattr(usage, name, None)
            if value is not None:
                self._counts[name] = value

    def finish(self) -> ModelResponse:
        if not self._stopped:
            raise ModelError(
                f'The stream for model {self._model_name!r} ended before the reply did (no `message_stop` came): '
                'the connection was probably cut. The reply is incomplete and was not retried; try again.'
            )
        counts = self._counts
        # `input_tokens` excludes prompt-cache reads and writes; the model still processed them.
        input_tokens = sum(counts.get(name, 0) for name in
                           ('input_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens'))
        return self._builder.response(usage=Usage(1, input_tokens, counts.get('output_tokens', 0)),
                                      model_name=self._model_name, truncated=self._stop_reason == 'max_tokens',
                                      empty_arguments='{}')


def _tool(tool: ToolDefinition) -> ToolParam:
    schema = plain_json_object(tool.parameters, where=f'Parameters schema of tool {tool.name!r}')
    if tool.description:
        return {'name': tool.name, 'description': tool.description, 'input_schema': schema}
    return {'name': tool.name, 'input_schema': schema}
