"""The flow every SDK adapter shares: argument checks, the lazy SDK client, the request guard, retries, closing.

A subclass supplies only its wire format: `build_request`, `_send`, `_parse`, how it makes its SDK client, and
the SDK's exception classes (`_errors`), which all follow the same shape (status, timeout, connection).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

import httpx2

from toolweave.exceptions import ModelError, UserError
from toolweave.models._base import Message, ModelResponse, ModelSettings
from toolweave.models._guard import check_allow_model_requests
from toolweave.models._retry import (
    ProviderFailure,
    RetryPolicy,
    call_with_retries,
    failure_to_model_error,
    parse_retry_after,
    provider_message,
)
from toolweave.models._shared import HttpClient, as_httpx2_client, merge_settings
from toolweave.tools._definition import ToolDefinition

__all__ = ('SdkAdapter', 'SdkErrors')


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


ClientT = TypeVar('ClientT', bound=_SdkClient)


@dataclass(frozen=True, slots=True)
class SdkErrors:
    """An SDK's exception classes for HTTP status errors, timeouts and connection errors."""

    status: type[_SdkStatusError]
    timeout: type[_SdkError]
    connection: type[_SdkError]

    def classify(self, exc: Exception) -> ProviderFailure | None:
        """`exc` as a `ProviderFailure`, or `None` when it is not one of the SDK's request errors."""
        if isinstance(exc, self.status):
            return ProviderFailure(
                kind='status',
                status=exc.status_code,
                message=provider_message(exc.body, exc.message),
                retry_after=parse_retry_after(exc.response.headers),
            )
        # The timeout class derives from the connection class, so it is checked first.
        if isinstance(exc, self.timeout):
            return ProviderFailure(kind='timeout', message=exc.message)
        if isinstance(exc, self.connection):
            cause = exc.__cause__
            return ProviderFailure(kind='connection', message=f'{exc.message} {cause}' if cause else exc.message)
        return None


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
        if self._guarded:
            check_allow_model_requests(self.name)
        client = self._get_client()
        request = self.build_request(messages, tools, merge_settings(self.settings, settings))

        async def send() -> object:
            return await self._send(client, request)

        reply = await call_with_retries(
            send, policy=self.retry, classify=self._errors.classify, give_up=self._give_up, label=self.name
        )
        return self._parse(reply)

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
