"""The flow every SDK adapter shares: argument checks, the lazy SDK client, the request guard, retries, the
per-request timeout, streaming, closing.

A subclass supplies only its wire format: `build_request`, `_send` and `_parse` for a whole reply,
`_open_stream` and a `StreamParser` for a streamed one, how it makes its SDK client, and the SDK's exception
classes (`_errors`), which all follow the same shape (status, timeout, connection).
"""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

import anyio
import httpx2

from toolweave.exceptions import ModelError, UserError
from toolweave.models._base import (
    DEFAULT_TIMEOUT,
    Message,
    ModelResponse,
    ModelSettings,
    ResponseChunk,
    ResponseStream,
    TextChunk,
)
from toolweave.models._guard import check_allow_model_requests
from toolweave.models._retry import (
    ProviderFailure,
    RetryPolicy,
    call_with_retries,
    failure_to_model_error,
    parse_retry_after,
    provider_message,
    rejected_part,
    says_request_invalid,
)
from toolweave.models._shared import HttpClient, as_httpx2_client, merge_settings
from toolweave.models._stream import CompletedStream, response_chunks
from toolweave.models._text_calls import MAX_TEXT_CALL_CHARS, could_be_text_call, with_text_calls
from toolweave.tools._definition import ToolDefinition

__all__ = ('SdkAdapter', 'SdkErrors', 'StreamParser')

logger = logging.getLogger('toolweave.models')

T = TypeVar('T')


class _SdkClient(Protocol):
    """What the adapters use of an SDK client (`openai.AsyncOpenAI`, `anthropic.AsyncAnthropic`)."""

    @property
    def base_url(self) -> httpx2.URL: ...

    def with_options(self, *, max_retries: int) -> Self: ...

    async def close(self) -> None: ...


class _SdkError(Protocol):
    @property
    def message(self) -> str: ...

    @property
    def __cause__(self) -> BaseException | None: ...


class _SdkStatusError(_SdkError, Protocol):
    @property
    def status_code(self) -> int: ...

    @property
    def body(self) -> object: ...

    @property
    def response(self) -> httpx2.Response: ...


class _SdkEventStream(Protocol):
    """What the adapters use of an SDK's raw event stream (`openai.AsyncStream`, `anthropic.AsyncStream`)."""

    @property
    def response(self) -> httpx2.Response: ...

    def __aiter__(self) -> AsyncIterator[Any]: ...

    async def close(self) -> None: ...


class StreamParser(Protocol):
    """Turns one provider's stream events into chunks, and the whole stream into a `ModelResponse`."""

    def feed(self, event: object) -> list[ResponseChunk]:
        """The chunks one event carries; `AttributeError`, `TypeError`, `KeyError` or `ValueError` for an event
        that is not of the provider's shape."""
        ...

    def finish(self) -> ModelResponse:
        """The whole reply once the events ran out; `ModelError` when the stream ended before the reply did."""
        ...


ClientT = TypeVar('ClientT', bound=_SdkClient)


class _StreamingRefused(Exception):
    """The server cannot stream this request: it said so in an error, or it answered without server-sent events
    (`at_all`: it streams nothing, whatever the request)."""

    def __init__(self, reason: str, *, at_all: bool) -> None:
        super().__init__(reason)
        self.at_all = at_all


@dataclass(frozen=True, slots=True)
class SdkErrors:
    """An SDK's exception classes for HTTP status errors, timeouts, connection errors, and their common base."""

    status: type[_SdkStatusError]
    timeout: type[_SdkError]
    connection: type[_SdkError]
    base: type[Exception]

    def classify(self, exc: Exception) -> ProviderFailure | None:
        """`exc` as a `ProviderFailure`, or `None` when it is not one of the SDK's request errors."""
        if isinstance(exc, self.status):
            message = provider_message(exc.body, exc.message)
            invalid = exc.status_code >= 500 and says_request_invalid(exc.body, message)
            return ProviderFailure(
                kind='status',
                status=exc.status_code,
                message=message,
                retry_after=parse_retry_after(exc.response.headers),
                invalid_request=invalid,
                rejected=rejected_part(message, _request_body(exc.response.request)),
            )
        if isinstance(exc, TimeoutError):  # our own per-request deadline
            return ProviderFailure(kind='timeout', message=str(exc) or 'the request timed out')
        # The timeout class derives from the connection class, so it is checked first.
        if isinstance(exc, self.timeout):
            return ProviderFailure(kind='timeout', message=exc.message)
        if isinstance(exc, self.connection):
            cause = exc.__cause__
            return ProviderFailure(kind='connection', message=f'{exc.message} {cause}' if cause else exc.message)
        return None


def _request_body(request: httpx2.Request) -> dict[str, Any] | None:
    try:
        body = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    return body if isinstance(body, dict) else None


def _refuses_streaming(message: str) -> bool:
    lowered = message.lower()
    return 'stream' in lowered and any(words in lowered for words in ('not supported', 'unsupported', 'not support'))


class SdkAdapter(ABC, Generic[ClientT]):
    """A chat model on a provider's official SDK, with the SDK's own retries off and ours on."""

    _adapter: ClassVar[str]
    """The public class name, as error messages and `repr` show it."""
    _sdk_client_name: ClassVar[str]
    """The SDK client class as users spell it, such as `openai.AsyncOpenAI`."""
    _sdk_client_type: ClassVar[type[Any]]
    _default_base_url: ClassVar[str]
    _errors: ClassVar[SdkErrors]

    model_name: str
    settings: ModelSettings
    retry: RetryPolicy

    def __init__(
        self,
        model_name: str,
        *,
        base_url: str | None,
        api_key: str | None,
        http_client: HttpClient | None,
        client: ClientT | None,
        max_retries: int | None,
        retry: RetryPolicy | None,
        settings: ModelSettings | None,
    ) -> None:
        adapter = self._adapter
        if not isinstance(model_name, str) or not model_name.strip():
            raise UserError(f'model_name of {adapter} must be a non-empty string, got {model_name!r}.')
        if client is not None and (http_client is not None or base_url is not None or api_key is not None):
            raise UserError(
                f'{adapter} got `client=` together with `http_client=`, `base_url=` or `api_key=`. '
                f'Configure the `{self._sdk_client_name}` you pass instead, or pass only the other arguments.'
            )
        if client is not None and not isinstance(client, self._sdk_client_type):
            raise UserError(f'client of {adapter} must be an `{self._sdk_client_name}`, got {type(client).__name__}.')
        self._check_options()
        self.model_name = model_name
        self.settings = settings or ModelSettings()
        policy = retry or RetryPolicy()
        self.retry = policy if max_retries is None else replace(policy, max_retries=max_retries)
        self._base_url = base_url
        self._api_key = api_key
        self._http_client = None if http_client is None else as_httpx2_client(http_client, adapter=adapter)
        # A caller-supplied transport or client is the caller's business; only our own defaults are guarded.
        self._guarded = client is None and http_client is None
        self._owns_client = client is None and http_client is None
        self._client: ClientT | None = None if client is None else client.with_options(max_retries=0)
        self._streams = True
        """Turned off when the server answers a streamed request whole; later requests then go unstreamed."""
        self._streams_tool_calls = True
        """Turned off when the server refuses to stream a request that offers tools (llama-cpp-python's
        function-calling mode does); later such requests then go unstreamed."""

    @property
    @abstractmethod
    def name(self) -> str:
        """`provider:model_name`."""

    @property
    def base_url(self) -> str:
        if self._client is not None:
            return str(self._client.base_url).rstrip('/')
        return (self._base_url or self._default_base_url).rstrip('/')

    def __repr__(self) -> str:
        return f'{self._adapter}({self.model_name!r})'

    async def respond(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """Send the conversation and tool definitions; return the model's text and tool calls."""
        client, request, timeout, offered = self._prepare(messages, tools, settings)
        response = with_text_calls(await self._respond(client, request, timeout), offered)
        again = self._unhonoured_choice(request, response)
        if again is not None:
            response = with_text_calls(await self._respond(client, again, timeout), offered)
        return response

    @asynccontextmanager
    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ResponseStream]:
        """Send the conversation and stream the reply: `async with model.stream(...) as reply`, then iterate
        `reply` for `TextChunk` and `ToolCallChunk` as they arrive, then read `reply.response`.

        Failures before the first event (status errors, connection errors) are retried like `respond`'s; a
        failure in the middle of the stream is not (its chunks are out already) and raises `ModelError`. A server
        that cannot stream the request (llama-cpp-python with tools; a server that ignores `stream`) gets it
        again unstreamed, and so do later requests of the same kind; the reply then arrives as one chunk per part.
        """
        client, request, timeout, offered = self._prepare(messages, tools, settings)
        events: _SdkEventStream | None = None
        started = 0.0
        if not self._streams or (tools and not self._streams_tool_calls):
            whole: ResponseStream = CompletedStream(
                with_text_calls(await self._respond(client, request, timeout), offered))
        else:
            try:
                events, started = await self._with_retries(lambda: self._open(client, request), timeout)
            except _StreamingRefused as exc:
                whole = CompletedStream(with_text_calls(
                    await self._unstreamed(client, request, timeout, exc, tools=bool(tools)), offered))
        if events is None:
            yield whole
            self._unhonoured_choice(request, whole.response)
            return

        async def unstreamed() -> ModelResponse:
            refusal = _StreamingRefused('it sent an empty stream', at_all=False)
            return await self._unstreamed(client, request, timeout, refusal, tools=bool(tools))

        reply = _ReplyStream(self, events, self._stream_parser(), started, timeout, unstreamed, offered)
        try:
            yield reply
        finally:
            with anyio.CancelScope(shield=True):
                await events.close()
        if reply.complete:
            self._unhonoured_choice(request, reply.response)

    async def _unstreamed(self, client: ClientT, request: dict[str, Any], seconds: float, refusal: _StreamingRefused,
                          *, tools: bool) -> ModelResponse:
        """The reply to `request` sent again unstreamed, after the server could not stream it; later requests of
        the same kind go unstreamed from the start."""
        kind = 'any request' if refusal.at_all else 'a request with tools' if tools else 'a request'
        logger.warning('%s cannot stream %s (%s); such requests go unstreamed from now on', self.name, kind, refusal)
        if refusal.at_all or not tools:
            self._streams = False
        else:
            self._streams_tool_calls = False
        return await self._respond(client, request, seconds)

    def _prepare(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                 settings: ModelSettings | None) -> tuple[ClientT, dict[str, Any], float, frozenset[str]]:
        """The client, the request, its timeout, and the tools whose calls written as text are read as calls."""
        if self._guarded:
            check_allow_model_requests(self.name)
        client = self._get_client()
        merged = merge_settings(self.settings, settings)
        reads_text = merged.text_tool_calls if merged.text_tool_calls is not None else self.is_local
        offered = frozenset(t.name for t in tools) if reads_text and merged.tool_choice != 'none' else frozenset()
        return client, self.build_request(messages, tools, merged), merged.timeout or DEFAULT_TIMEOUT, offered

    @property
    def is_local(self) -> bool:
        """Whether the model is served locally (an Ollama, llama.cpp or vLLM string, or a server on this
        machine): calls written as text are read as calls, and timed-out requests are not sent again."""
        return False

    @property
    def takes_grammar(self) -> bool:
        """Whether the server constrains a reply to a GBNF grammar sent as `extra_body={'grammar': ...}`
        (llama.cpp's `llama-server`): plan-first mode then sends the plan grammar (`constrained_grammar`),
        which types each reference by the step it names, instead of the constrained JSON schema."""
        return False

    def _unhonoured_choice(self, request: dict[str, Any], response: ModelResponse) -> dict[str, Any] | None:
        """When the reply shows that the server ignored the request's tool choice: the request to send instead
        (or `None`, also when the choice was honoured)."""
        return None

    async def _respond(self, client: ClientT, request: dict[str, Any], seconds: float) -> ModelResponse:
        return self._parse(await self._with_retries(lambda: self._send(client, request), seconds))

    async def _with_retries(self, send: Callable[[], Awaitable[T]], seconds: float) -> T:
        async def attempt() -> T:
            try:
                with anyio.fail_after(seconds):
                    return await send()
            except TimeoutError:
                raise TimeoutError(f'no reply within timeout={seconds:g} s') from None

        retry_timeouts = self.retry.retry_timeouts if self.retry.retry_timeouts is not None else not self.is_local

        def classify(exc: Exception) -> ProviderFailure | None:
            failure = self._errors.classify(exc)
            if failure is not None and failure.kind == 'timeout' and not retry_timeouts:
                return replace(failure, final=True)
            return failure

        return await call_with_retries(attempt, policy=self.retry, classify=classify, give_up=self._give_up,
                                       label=self.name)

    async def _open(self, client: ClientT, request: dict[str, Any]) -> tuple[_SdkEventStream, float]:
        """The SDK's event stream, and when the attempt that opened it started (the reply's deadline counts from
        there)."""
        started = anyio.current_time()
        try:
            events = await self._open_stream(client, request)
        except self._errors.base as exc:
            if isinstance(exc, self._errors.status) and _refuses_streaming(provider_message(exc.body, exc.message)):
                raise _StreamingRefused(provider_message(exc.body, exc.message), at_all=False) from exc
            raise
        content_type = events.response.headers.get('content-type', '')
        if not content_type.startswith('text/event-stream'):
            await events.close()
            raise _StreamingRefused(f'it answered a streamed request with {content_type or "no content type"}, '
                                    'not server-sent events', at_all=True)
        return events, started

    def _stream_failure(self, exc: Exception, chunks: int, timeout: float | None = None) -> ModelError:
        """A failure in the middle of a stream, as the `ModelError` the caller gets."""
        where = f'{self._label()} at {self.base_url}'
        if timeout is not None:
            what = f'did not finish its reply for model {self.model_name!r} within timeout={timeout:g} s'
            fix = 'Raise `ModelSettings.timeout`, or lower `max_tokens`.'
        elif isinstance(exc, ValueError) and not isinstance(exc, UserError):
            what = f'sent malformed JSON in the stream for model {self.model_name!r} ({exc})'
            fix = 'Check that `base_url` points at an API that streams server-sent events.'
        else:
            message = getattr(exc, 'message', None) or str(exc) or type(exc).__name__
            cause = f': {exc.__cause__}' if exc.__cause__ is not None else ''
            what = f'broke off the stream for model {self.model_name!r} ({message}{cause})'
            fix = 'The reply is incomplete and was not retried; try again, or check the server.'
        return ModelError(f'{where} {what} after {chunks} event{"s" if chunks != 1 else ""}. {fix}')

    @abstractmethod
    def build_request(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition], settings: ModelSettings
    ) -> dict[str, Any]:
        """The keyword arguments for the SDK's create call, as the SDK receives them."""

    async def aclose(self) -> None:
        """Close the SDK client if this model created it (a caller's `http_client` or `client` stays open)."""
        if self._owns_client and self._client is not None:
            await self._client.close()
            self._client = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _check_options(self) -> None:
        """Check the adapter's own constructor options (set before `super().__init__`); raise `UserError`."""

    def _get_client(self) -> ClientT:
        if self._client is None:
            self._client = self._new_client()
        return self._client

    @abstractmethod
    def _new_client(self) -> ClientT:
        """A new SDK client with `max_retries=0`, from `_api_key`, `_base_url` and `_http_client`."""

    @abstractmethod
    async def _send(self, client: ClientT, request: dict[str, Any]) -> object:
        """One request through the SDK; its errors go to `_errors.classify`."""

    @abstractmethod
    async def _open_stream(self, client: ClientT, request: dict[str, Any]) -> _SdkEventStream:
        """Send `request` as a streamed request through the SDK; its errors go to `_errors.classify`."""

    @abstractmethod
    def _stream_parser(self) -> StreamParser:
        """A fresh parser for one streamed reply."""

    @abstractmethod
    def _parse(self, reply: object) -> ModelResponse:
        """The SDK's reply as a `ModelResponse`; a `ModelError` when it is not the expected shape."""

    @abstractmethod
    def _label(self) -> str:
        """The provider as error messages name it, such as `OpenAI` or `Ollama`."""

    @abstractmethod
    def _key_env(self) -> str | None:
        """The environment variable holding the API key, named in authentication errors."""

    def _give_up(self, failure: ProviderFailure, attempts: int) -> ModelError:
        return failure_to_model_error(
            failure,
            attempts=attempts,
            model_name=self.model_name,
            provider=self._label(),
            adapter=self._adapter,
            api_key_env=self._key_env(),
            base_url=self.base_url,
        )


class _ReplyStream:
    """One streamed reply of an SDK adapter: its events become chunks, within the request's deadline."""

    def __init__(self, adapter: SdkAdapter[Any], events: _SdkEventStream, parser: StreamParser, started: float,
                 timeout: float, unstreamed: Callable[[], Awaitable[ModelResponse]],
                 offered: frozenset[str] = frozenset()) -> None:
        self._adapter = adapter
        self._offered = offered
        self._unstreamed = unstreamed
        self._events = events
        self._parser = parser
        self._timeout = timeout
        self._deadline = started + timeout
        self._response: ModelResponse | None = None

    async def __aiter__(self) -> AsyncIterator[ResponseChunk]:
        """The reply's chunks. When calls written as text are read, text that may still turn out to be such a
        call is held back until it is known: released as text if it is not, sent as tool call chunks if it is."""
        if not self._offered:
            async for chunk in self._chunks():
                yield chunk
            return
        held: list[TextChunk] = []
        text = ''
        holding = True
        async for chunk in self._chunks():
            if holding and isinstance(chunk, TextChunk):
                held.append(chunk)
                text += chunk.text
                if len(text) <= MAX_TEXT_CALL_CHARS and could_be_text_call(text):
                    continue
            if holding:
                holding = False
                for piece in held:
                    yield piece
                if held and held[-1] is chunk:
                    continue
            yield chunk
        if not holding:
            return
        assert self._response is not None
        converted = with_text_calls(self._response, self._offered)
        if converted is self._response:
            for piece in held:
                yield piece
            return
        self._response = converted
        for call_chunk in response_chunks(converted):
            yield call_chunk

    async def _chunks(self) -> AsyncIterator[ResponseChunk]:
        adapter, parser = self._adapter, self._parser
        iterator = aiter(self._events)
        received = 0
        while True:
            try:
                with anyio.fail_after(max(0.0, self._deadline - anyio.current_time())):
                    event = await anext(iterator)
            except StopAsyncIteration:
                break
            except TimeoutError as exc:
                raise adapter._stream_failure(exc, received, timeout=self._timeout) from exc
            except (adapter._errors.base, httpx2.HTTPError, ValueError) as exc:
                raise adapter._stream_failure(exc, received) from exc
            received += 1
            try:
                chunks = parser.feed(event)
            except (AttributeError, TypeError, KeyError, ValueError) as exc:
                raise ModelError(
                    f'{adapter._label()} at {adapter.base_url} sent a stream event for model {adapter.model_name!r} '
                    f'that is not of the expected shape: {str(event)[:300]!r}. Check that `base_url` points at '
                    'the right kind of API.'
                ) from exc
            for chunk in chunks:
                yield chunk
        if received == 0:
            # llama-cpp-python answers a tool call it cannot stream with an empty stream (its error happens after
            # the headers went out). Nothing was reported yet, so asking again unstreamed is safe.
            self._response = await self._unstreamed()
            for chunk in response_chunks(self._response):
                yield chunk
            return
        self._response = parser.finish()

    @property
    def complete(self) -> bool:
        """Whether the stream was read to its end."""
        return self._response is not None

    @property
    def response(self) -> ModelResponse:
        if self._response is None:
            raise UserError('The reply is not complete yet: iterate the stream to its end before reading `response`.')
        return self._response
