from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from benchmarks._postgres import PostgresServer, temporary_postgres, unavailable

import toolweave.models
from toolweave import GLOBAL_METRICS, instrument


@pytest.fixture
def anyio_backend() -> str:
    return 'asyncio'


@pytest.fixture
def no_gc() -> Iterator[None]:
    """The collector paused for a test that times how long the event loop is held: a full collection of the
    suite's heap holds every thread, whichever made the garbage."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


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


@pytest.fixture(scope='session')
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server for the session (a temporary folder, a Unix socket in it), or a skip saying why
    there is none: see `benchmarks/_postgres.py` and the README's "Durable plans" for how to get one."""
    reason = unavailable()
    if reason is not None:
        pytest.skip(f'no PostgreSQL for this test: {reason}')
    with temporary_postgres() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh, empty database on the session's server for one test."""
    import uuid

    import psycopg

    name = f'tw_{uuid.uuid4().hex[:12]}'
    with psycopg.connect(postgres_server.url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE {name}')
    yield postgres_server.url.replace('/postgres?', f'/{name}?', 1)


@pytest.fixture(params=['sqlite', 'postgres'])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh plan store of each kind: a SQLite file, and a database on the session's PostgreSQL server (a test
    file that wants another kind of store defines its own `store_url`)."""
    if request.param == 'sqlite':
        yield f'sqlite:///{tmp_path}/runs.db'
    else:
        yield request.getfixturevalue('postgres_url')
