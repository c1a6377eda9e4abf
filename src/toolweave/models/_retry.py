"""Retries with exponential backoff for model requests, and the `ModelError` text for failures that remain.

The adapters give their SDK clients `max_retries=0` and retry here instead, so the policy is ours, the same for
every provider, and testable with an injected `sleep`.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal, TypeVar

import anyio

from toolweave._checks import check_number
from toolweave.exceptions import ModelError, UserError

__all__ = (
    'ProviderFailure',
    'RetryPolicy',
    'call_with_retries',
    'failure_to_model_error',
    'parse_retry_after',
    'provider_message',
    'rejected_part',
    'says_request_invalid',
)

logger = logging.getLogger('toolweave.models')

T = TypeVar('T')

RETRYABLE_CLIENT_STATUSES = frozenset({408, 409, 429})
"""4xx statuses worth another try: request timeout, conflict (a concurrent request), rate limit."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How an adapter retries rate limits (429) and transient errors (408, 409, 5xx, connection errors, timeouts).

    The wait before retry `n` (1-based) is `initial_delay * 2 ** (n - 1)`, capped at `max_delay`, then scaled by
    a random factor in `[1 - jitter, 1 + jitter]` so that many clients do not retry in lockstep. A `retry-after`
    (or `retry-after-ms`) header from the provider replaces the computed wait; a provider asking for more than
    `max_retry_after` seconds is not retried at all, because the limit will not lift in time.
    """

    max_retries: int = 3
    """Retries after the first attempt; `0` disables retrying."""
    initial_delay: float = 0.5
    max_delay: float = 20.0
    jitter: float = 0.25
    max_retry_after: float = 60.0
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    """Called with each wait in seconds; inject a recorder in tests."""
    random: Callable[[], float] = field(default=random.random, repr=False)
    """Returns a float in `[0, 1)` for the jitter."""
    retry_timeouts: bool | None = None
    """Whether a request that timed out is sent again. `None`: yes for hosted providers, no for local servers
    (a local server keeps generating the reply nobody waits for, so a retry queues behind it and waits twice)."""

    def __post_init__(self) -> None:
        check_number(self.max_retries, 'RetryPolicy.max_retries', integer=True)
        for name in ('initial_delay', 'max_delay', 'max_retry_after'):
            check_number(getattr(self, name), f'RetryPolicy.{name}')
        check_number(self.jitter, 'RetryPolicy.jitter', maximum=1)
        if self.retry_timeouts is not None and not isinstance(self.retry_timeouts, bool):
            raise UserError(f'RetryPolicy.retry_timeouts must be True, False or None, got {self.retry_timeouts!r}.')

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `retry` (1-based)."""
        if retry_after is not None:
            return max(0.0, retry_after)
        base = min(self.max_delay, self.initial_delay * 2.0 ** (retry - 1))
        return base * (1 - self.jitter + 2 * self.jitter * self.random())


@dataclass(frozen=True, slots=True)
class ProviderFailure:
    """A provider error reduced to what the retry loop and the error message need."""

    kind: Literal['status', 'connection', 'timeout']
    message: str
    """The provider's own message (or the transport's), quoted in the final error."""
    status: int | None = None
    retry_after: float | None = None
    invalid_request: bool = False
    """A server error (5xx) whose message says the request itself is invalid: sending it again cannot help."""
    rejected: str | None = None
    """The part of the request the provider's message points at (such as one message), as sent."""
    final: bool = False
    """Not to be retried whatever its kind (a timeout of a local server, see `RetryPolicy.retry_timeouts`)."""

    @property
    def retryable(self) -> bool:
        if self.final:
            return False
        if self.kind != 'status':
            return True
        assert self.status is not None
        if self.invalid_request:
            return False
        return self.status in RETRYABLE_CLIENT_STATUSES or self.status >= 500


# What servers say when they reject the request itself, even under a 500: pydantic validation errors
# (llama-cpp-python), llama.cpp's `Illegal param`, OpenAI-style error types, "not supported" features.
_INVALID_REQUEST = re.compile(
    r'validation error|input should be|field required|extra inputs are not permitted|invalid_request_error'
    r'|invalid request|illegal param|not supported|unsupported|does not support',
    re.IGNORECASE,
)


def says_request_invalid(body: object, message: str) -> bool:
    """Whether an error body or message says the request is invalid (rather than the server failing)."""
    try:
        text = message if body is None else f'{message} {json.dumps(body, default=str)}'
    except (TypeError, ValueError):
        text = message
    return _INVALID_REQUEST.search(text) is not None


# `('body', 'messages', 2, ...)` (pydantic), `messages.2.content`, `messages[2]`.
_LOCATION = re.compile(r"""['"]?(messages|tools)['"]?(?:\s*,\s*|\.|\[)(\d+)""")


def rejected_part(message: str, body: Mapping[str, object] | None) -> str | None:
    """The element of the request body (`messages[i]` or `tools[i]`) the provider's message names, as sent."""
    if body is None:
        return None
    match = _LOCATION.search(message)
    if match is None:
        return None
    key, index = match[1], int(match[2])
    items = body.get(key)
    if not isinstance(items, list) or index >= len(items):
        return None
    shown = json.dumps(items[index], ensure_ascii=False)
    return f'{key}[{index}] = {shown if len(shown) <= 400 else shown[:400] + "..."}'


async def call_with_retries(
    send: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    classify: Callable[[Exception], ProviderFailure | None],
    give_up: Callable[[ProviderFailure, int], ModelError],
    label: str = 'model',
) -> T:
    """Await `send()` until it succeeds, retrying the failures `classify` marks as retryable.

    `classify` returns `None` for exceptions that are not provider failures; those propagate unchanged.
    `give_up(failure, attempts)` builds the `ModelError` raised when a failure is not retryable or the retries
    are used up. Cancellation is a `BaseException` and always propagates at once.
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return await send()
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
            if failure.retryable and failure.retry_after is not None and failure.retry_after > policy.max_retry_after:
                # A long wait means a quota, not a blip: waiting it out inside one request helps nobody.
                note = f'asked to wait {failure.retry_after:.0f} s, over max_retry_after={policy.max_retry_after:g}'
                raise give_up(replace(failure, message=f'{failure.message} ({note})'), attempt) from exc
            if not failure.retryable or attempt > policy.max_retries:
                raise give_up(failure, attempt) from exc
            wait = policy.delay(attempt, failure.retry_after)
            logger.warning(
                'Request to %s failed (%s); retry %d of %d in %.2f s',
                label,
                describe_failure(failure),
                attempt,
                policy.max_retries,
                wait,
            )
        await policy.sleep(wait)


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds a provider asks us to wait: `retry-after-ms`, else `retry-after` as seconds or an HTTP date."""
    lowered = {key.lower(): value for key, value in headers.items()}
    for name, divisor in (('retry-after-ms', 1000.0), ('retry-after', 1.0)):
        raw = lowered.get(name)
        if raw is None:
            continue
        try:
            return max(0.0, float(raw) / divisor)
        except ValueError:
            pass
    raw = lowered.get('retry-after')
    if raw is None:
        return None
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def provider_message(body: object, fallback: str) -> str:
    """The human-readable message inside a provider's error body (OpenAI, Anthropic and Ollama shapes)."""
    candidates: list[object] = []
    if isinstance(body, Mapping):
        error = body.get('error')
        if isinstance(error, Mapping):
            candidates.append(error.get('message'))
        candidates += [error, body.get('message'), body.get('detail')]
    elif isinstance(body, str):
        candidates.append(body)
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.strip():
            text = candidate.strip()
            return text if len(text) <= 1000 else text[:1000] + '...'
    return fallback


def describe_failure(failure: ProviderFailure) -> str:
    if failure.kind == 'status':
        return f'HTTP {failure.status}: {failure.message}'
    return f'{failure.kind} error: {failure.message}'


def failure_to_model_error(
    failure: ProviderFailure,
    *,
    attempts: int,
    model_name: str,
    provider: str,
    adapter: str,
    api_key_env: str | None,
    base_url: str,
) -> ModelError:
    """Turn the last failure into a `ModelError` that says what went wrong and what to do about it."""
    what = describe_failure(failure)
    status = failure.status
    sent = f' The request sent {failure.rejected}.' if failure.rejected else ''
    key_hint = (
        f'set {api_key_env} or pass `api_key=...` to `{adapter}(...)`'
        if api_key_env
        else (f'pass `api_key=...` to `{adapter}(...)`')
    )
    if status in (401, 403):
        verb = 'rejected the credentials' if status == 401 else 'refused access'
        return ModelError(
            f'{provider} {verb} for model {model_name!r} ({what}). Check the API key: {key_hint}; '
            'the key must be valid and allowed to use this model.'
        )
    if status == 404:
        pull = ' (for Ollama, run `ollama pull <model>` first)' if provider == 'Ollama' else ''
        return ModelError(
            f'{provider} at {base_url} does not know model {model_name!r} ({what}). '
            f'Check the model name{pull} and `base_url`.'
        )
    if failure.kind == 'timeout':
        tries = f' ({attempts} attempts)' if attempts > 1 else ''
        return ModelError(
            f'{provider} at {base_url} did not answer in time for model {model_name!r}{tries}: '
            f'{failure.message.rstrip(".")}. The server was reached but its reply did not come: raise '
            '`ModelSettings.timeout`, lower `max_tokens`, or use a smaller model or a faster machine.'
        )
    if failure.invalid_request:
        return ModelError(
            f'{provider} rejected the request for model {model_name!r} as invalid ({what}). The server answered '
            'with a server error, but its message says the request itself is wrong, so it was not retried.'
            f'{sent} Fix what the message names, or the setting that produced it.'
        )
    if failure.retryable:
        tries = f'{attempts} attempt{"s" if attempts != 1 else ""}'
        if failure.kind != 'status':
            return ModelError(
                f'{provider} request for model {model_name!r} failed after {tries} ({what}): {provider} at {base_url} '
                'could not be reached. Check that the server is running, that `base_url` is right, and the network.'
            )
        cause = 'rate limit' if status == 429 else 'transient provider error'
        return ModelError(
            f'{provider} request for model {model_name!r} failed after {tries} ({what}), a {cause}. '
            'Try again later, send fewer requests, or raise `max_retries`.'
        )
    return ModelError(
        f'{provider} rejected the request for model {model_name!r} ({what}).{sent} '
        "Fix what the provider's message names; this error is not retried."
    )
