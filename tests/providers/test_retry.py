"""`RetryPolicy`: backoff, jitter, `retry-after` forms, and validation."""

from __future__ import annotations

import email.utils
import time
from typing import Any

import pytest

from toolweave import ModelError, UserError
from toolweave.models import OpenAIChatModel, RetryPolicy, UserMessage

from .conftest import Replay, Sleeps, load_cassette

pytestmark = pytest.mark.anyio

TEXT_REPLY: dict[str, Any] = load_cassette('openai_text.json')['interactions'][0]['response']
RATE_LIMIT: dict[str, Any] = load_cassette('openai_errors.json')['responses']['rate_limit']


def test_exponential_backoff_is_capped() -> None:
    policy = RetryPolicy(initial_delay=0.5, max_delay=3.0, jitter=0.0)
    assert [policy.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


@pytest.mark.parametrize(('draw', 'factor'), [(0.0, 0.75), (0.5, 1.0), (0.999999, 1.25)])
def test_jitter_spreads_the_wait(draw: float, factor: float) -> None:
    policy = RetryPolicy(initial_delay=2.0, jitter=0.25, random=lambda: draw)
    assert policy.delay(1) == pytest.approx(2.0 * factor, rel=1e-5)


def test_retry_after_replaces_the_backoff() -> None:
    policy = RetryPolicy(initial_delay=0.5)
    assert policy.delay(3, retry_after=7.0) == 7.0
    assert policy.delay(1, retry_after=-2.0) == 0.0


@pytest.mark.parametrize(
    ('kwargs', 'match'),
    [
        ({'max_retries': -1}, 'max_retries must be an int >= 0, got -1'),
        ({'max_retries': 1.5}, 'max_retries'),
        ({'max_retries': True}, 'max_retries'),
        ({'initial_delay': -0.1}, 'initial_delay must be a number >= 0'),
        ({'max_delay': 'soon'}, 'max_delay'),
        ({'max_retry_after': -1}, 'max_retry_after'),
        ({'jitter': 1.5}, 'jitter must be a number >= 0 and <= 1'),
    ],
)
def test_bad_policies_are_rejected(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(UserError, match=match):
        RetryPolicy(**kwargs)


def rate_limited(headers: dict[str, str]) -> dict[str, Any]:
    return {**RATE_LIMIT, 'headers': headers}


@pytest.mark.parametrize(
    ('headers', 'expected'),
    [
        ({'retry-after': '1.5'}, 1.5),
        ({'Retry-After': '4'}, 4.0),
        ({'retry-after-ms': '1200', 'retry-after': '9'}, 1.2),  # the precise header wins
        ({'retry-after': 'soon'}, 0.5),  # unparseable: the computed backoff
        ({}, 0.5),
    ],
)
async def test_retry_after_header_forms(headers: dict[str, str], expected: float, sleeps: Sleeps) -> None:
    replay = Replay([rate_limited(headers), TEXT_REPLY])
    model = OpenAIChatModel(
        'm', api_key='k', http_client=replay.httpx2_client(), retry=sleeps.policy(initial_delay=0.5)
    )
    await model.respond([UserMessage('x')], [])
    assert sleeps.waits == [pytest.approx(expected)]


async def test_retry_after_as_http_date(sleeps: Sleeps) -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    replay = Replay([rate_limited({'retry-after': when}), TEXT_REPLY])
    model = OpenAIChatModel('m', api_key='k', http_client=replay.httpx2_client(), retry=sleeps.policy())
    await model.respond([UserMessage('x')], [])
    [wait] = sleeps.waits
    assert 25 <= wait <= 31


async def test_retry_after_in_the_past_retries_at_once(sleeps: Sleeps) -> None:
    replay = Replay([rate_limited({'retry-after': 'Wed, 21 Oct 2015 07:28:00 GMT'}), TEXT_REPLY])
    model = OpenAIChatModel('m', api_key='k', http_client=replay.httpx2_client(), retry=sleeps.policy())
    await model.respond([UserMessage('x')], [])
    assert sleeps.waits == [0.0]


async def test_zero_retries_fails_on_the_first_rate_limit(sleeps: Sleeps) -> None:
    replay = Replay([RATE_LIMIT, TEXT_REPLY])
    model = OpenAIChatModel('m', api_key='k', http_client=replay.httpx2_client(), retry=sleeps.policy(max_retries=0))
    with pytest.raises(ModelError, match=r'failed after 1 attempt \(HTTP 429: Rate limit reached.*a rate limit\.'):
        await model.respond([UserMessage('x')], [])
    assert sleeps.waits == []


@pytest.mark.parametrize('status', [408, 409])
async def test_request_timeout_and_conflict_are_retried(status: int, sleeps: Sleeps) -> None:
    replay = Replay([{'status': status, 'body': {'error': {'message': 'try again'}}}, TEXT_REPLY])
    model = OpenAIChatModel('m', api_key='k', http_client=replay.httpx2_client(), retry=sleeps.policy())
    assert (await model.respond([UserMessage('x')], [])).text == 'Hello!'
    assert len(replay.sent) == 2


@pytest.mark.parametrize('status', [402, 413, 422])
async def test_other_client_errors_are_not_retried(status: int, sleeps: Sleeps) -> None:
    replay = Replay([{'status': status, 'body': {'error': {'message': f'nope {status}'}}}, TEXT_REPLY])
    model = OpenAIChatModel('m', api_key='k', http_client=replay.httpx2_client(), retry=sleeps.policy())
    with pytest.raises(ModelError, match=f'HTTP {status}: nope {status}'):
        await model.respond([UserMessage('x')], [])
    assert len(replay.sent) == 1


async def test_error_body_that_is_plain_text(sleeps: Sleeps) -> None:
    replay = Replay([{'status': 400, 'headers': {'content-type': 'text/plain'}, 'body': 'model is required'}])
    model = OpenAIChatModel('m', api_key='k', http_client=replay.httpx2_client(), retry=sleeps.policy())
    with pytest.raises(ModelError, match='HTTP 400: model is required'):
        await model.respond([UserMessage('x')], [])


def test_max_retries_argument_overrides_the_policy() -> None:
    policy = RetryPolicy(max_retries=5, initial_delay=0.1)
    model = OpenAIChatModel('m', retry=policy, max_retries=1)
    assert (model.retry.max_retries, model.retry.initial_delay) == (1, 0.1)
    assert OpenAIChatModel('m', retry=policy).retry is policy
