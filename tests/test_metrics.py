"""Logging and metrics of tool calls: INFO one line per call with truncated
input and output and the duration, WARNING for failures, DEBUG full payloads; per-tool counts and timings."""

from __future__ import annotations

import logging
import re

import anyio
import pytest

from toolweave import GLOBAL_METRICS, ToolMetrics, Toolset, UserError, use_metrics
from toolweave.testing import FakeTool

pytestmark = pytest.mark.anyio

LOGGER = 'toolweave.tools'


def records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno == level]


async def test_info_one_line_per_call_with_input_output_and_duration(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    await FakeTool('search', 'three results').call('{"q": "cats"}')
    (record,) = records(caplog, logging.INFO)
    message = record.getMessage()
    assert '\n' not in message
    assert "'search'" in message
    assert '{"q": "cats"}' in message
    assert 'three results' in message
    assert re.search(r'\d+\.\d ms', message)
    assert records(caplog, logging.DEBUG) == []


async def test_info_truncates_huge_input_and_output(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    await FakeTool('big', output_chars=100_000).call({'blob': 'y' * 10_000})
    (record,) = records(caplog, logging.INFO)
    message = record.getMessage()
    assert len(message) < 1_000
    assert 'more chars)' in message


async def test_mapping_arguments_are_logged_as_json(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    await FakeTool('t').call({'a': 1})
    assert '{"a":1}' in records(caplog, logging.INFO)[0].getMessage()


@pytest.mark.parametrize('fake', [FakeTool('t', raises=RuntimeError('Service unavailable')),
                                  FakeTool('t', fail='Service unavailable')])
async def test_failures_log_a_warning(caplog: pytest.LogCaptureFixture, fake: FakeTool) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    await fake.call('{}')
    (warning,) = records(caplog, logging.WARNING)
    assert 'Service unavailable' in warning.getMessage()
    assert "'t'" in warning.getMessage()
    assert records(caplog, logging.INFO) == []


async def test_debug_logs_full_payloads(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    await FakeTool('big', output_chars=5_000).call({'blob': 'z' * 3_000})
    (debug,) = records(caplog, logging.DEBUG)
    message = debug.getMessage()
    assert 'z' * 3_000 in message
    assert len(message) > 8_000


async def test_nothing_logged_above_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger=LOGGER)
    await FakeTool('t', fail='x').call()
    await FakeTool('u').call()
    assert [r for r in caplog.records if r.name == LOGGER] == []


async def test_global_metrics_count_successes_failures_and_time() -> None:
    ok = FakeTool('ok', delay=0.02)
    bad = FakeTool('bad', raises=ValueError('no'))
    await ok.call()
    await ok.call()
    await bad.call()
    stats = GLOBAL_METRICS.stats('ok')
    assert (stats.calls, stats.successes, stats.failures) == (2, 2, 0)
    assert stats.total_seconds >= 0.04
    assert stats.max_seconds >= 0.02
    assert stats.mean_seconds == pytest.approx(stats.total_seconds / 2)
    bad_stats = GLOBAL_METRICS.stats('bad')
    assert (bad_stats.calls, bad_stats.successes, bad_stats.failures) == (1, 0, 1)
    assert GLOBAL_METRICS.stats('never').calls == 0
    assert set(GLOBAL_METRICS.snapshot()) == {'ok', 'bad'}


async def test_stats_are_copies() -> None:
    await FakeTool('t').call()
    stats = GLOBAL_METRICS.stats('t')
    stats.calls = 99
    assert GLOBAL_METRICS.stats('t').calls == 1


async def test_use_metrics_isolates_a_run_including_child_tasks() -> None:
    fake = FakeTool('t')
    with use_metrics() as mine:
        await fake.call()
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(fake.call)
    assert mine.stats('t').calls == 4
    assert GLOBAL_METRICS.stats('t').calls == 0
    await fake.call()
    assert GLOBAL_METRICS.stats('t').calls == 1
    assert mine.stats('t').calls == 4


async def test_use_metrics_with_a_given_object_and_nesting() -> None:
    outer, inner = ToolMetrics(), ToolMetrics()
    with use_metrics(outer) as installed:
        assert installed is outer
        await FakeTool('a').call()
        with use_metrics(inner):
            await FakeTool('a').call()
        await FakeTool('a').call()
    assert outer.stats('a').calls == 2
    assert inner.stats('a').calls == 1


def test_use_metrics_rejects_other_objects() -> None:
    with pytest.raises(UserError, match='ToolMetrics'):
        with use_metrics({}):  # type: ignore[arg-type]
            pass


async def test_unknown_tool_dispatch_records_nothing() -> None:  # is not a tool call
    with use_metrics() as metrics:
        await Toolset([FakeTool('a')]).call('b')
    assert metrics.snapshot() == {}


async def test_reset() -> None:
    metrics = ToolMetrics()
    metrics.record('x', ok=True, seconds=0.5)
    metrics.reset()
    assert metrics.snapshot() == {}
