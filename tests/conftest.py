from __future__ import annotations

import pytest

import toolweave.models
from toolweave import GLOBAL_METRICS


@pytest.fixture
def anyio_backend() -> str:
    return 'asyncio'


@pytest.fixture(autouse=True)
def _reset_metrics() -> None:
    GLOBAL_METRICS.reset()


@pytest.fixture(autouse=True)
def _block_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reaches a real provider: adapters on their own network client refuse to send."""
    monkeypatch.setattr(toolweave.models, 'ALLOW_MODEL_REQUESTS', False)
