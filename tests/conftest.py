from __future__ import annotations

import gc
from collections.abc import Iterator

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


@pytest.fixture(autouse=True, scope='module')
def _collect_framework_garbage(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each module of `tests/integrations`, collect what its agent framework left behind. On CPython 3.11.7 a
    garbage collection that runs while `compile` builds an AST can fail it with `SystemError: AST constructor
    recursion depth mismatch` (python/cpython#106905); the frameworks leave enough cyclic garbage for that to hit a
    module pytest compiles late (its terminal summary imports hypothesis)."""
    yield
    if 'integrations' in request.path.parts:
        gc.collect()
