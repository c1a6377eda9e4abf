from __future__ import annotations

from collections.abc import Iterator

import pytest

import toolweave.models
from toolweave import GLOBAL_METRICS, instrument


@pytest.fixture
def anyio_backend() -> str:
    return 'asyncio'


@pytest.fixture(autouse=True)
def _reset_metrics() -> None:
    GLOBAL_METRICS.reset()


@pytest.fixture(autouse=True)
def _tracing_off() -> Iterator[None]:
    """Every test starts and ends with tracing off (a docs page may turn it on)."""
    instrument(False)
    yield
    instrument(False)


@pytest.fixture(autouse=True)
def _block_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reaches a real provider: adapters on their own network client refuse to send."""
    monkeypatch.setattr(toolweave.models, 'ALLOW_MODEL_REQUESTS', False)
