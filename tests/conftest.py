from __future__ import annotations

import pytest

from toolweave import GLOBAL_METRICS


@pytest.fixture
def anyio_backend() -> str:
    return 'asyncio'


@pytest.fixture(autouse=True)
def _reset_metrics() -> None:
    GLOBAL_METRICS.reset()
