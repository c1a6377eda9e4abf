"""The workers table: which workers serve which queue with which tools, and when each was last seen alive.

DBOS recovers a dead executor's workflows only when it is told which executor died (its hosted Conductor does
that; a self-hosted deployment must). So each worker writes a row here when it starts, renews its heartbeat while
it runs, and deletes the row when it stops; the live workers look for the steps of the dead ones. A worker's id
is `host:pid:token`, so a dead worker on the same machine is recognised at once (its process is gone) and one on
another machine once its heartbeat is older than the lease (`LEASE_SECONDS`), as a durable run's holder is.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from toolweave.plan.durable._store import owner_is_stale

__all__ = ('Registry', 'WorkerInfo')

_SCHEMA = ('CREATE TABLE IF NOT EXISTS toolweave_workers (executor_id TEXT PRIMARY KEY, queue TEXT NOT NULL, '
           'tools TEXT NOT NULL, started_at DOUBLE PRECISION NOT NULL, heartbeat_at DOUBLE PRECISION NOT NULL)')
_SETUP_LOCK = 0x746F6F6D  # an advisory lock: workers starting together create the table once


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker as the table knows it."""

    executor_id: str
    queue: str
    tools: tuple[str, ...]
    started_at: float
    heartbeat_at: float

    @property
    def alive(self) -> bool:
        return not owner_is_stale(self.executor_id, self.heartbeat_at)


class Registry:
    """The workers table in the database at `url` (a SQLAlchemy URL). Methods block."""

    def __init__(self, url: str) -> None:
        import sqlalchemy as sa

        self._sa = sa
        postgres = url.startswith('postgresql')
        self.engine = sa.create_engine(url, pool_size=1, max_overflow=1, pool_pre_ping=True) if postgres else (
            sa.create_engine(url, connect_args={'timeout': 30}))
        try:
            with self.engine.begin() as db:
                if postgres:
                    db.execute(sa.text('SELECT pg_advisory_xact_lock(:key)'), {'key': _SETUP_LOCK})
                db.execute(sa.text(_SCHEMA))
        except BaseException:
            self.engine.dispose()
            raise

    def beat(self, executor_id: str, queue: str, tools: list[str]) -> None:
        """Write the worker's row, or renew its heartbeat (a worker whose row another took for dead's writes it
        again)."""
        sa = self._sa
        now = time.time()
        with self.engine.begin() as db:
            renewed = db.execute(sa.text('UPDATE toolweave_workers SET heartbeat_at = :now '
                                         'WHERE executor_id = :executor'), {'executor': executor_id, 'now': now})
            if renewed.rowcount == 0:
                db.execute(sa.text('INSERT INTO toolweave_workers (executor_id, queue, tools, started_at, '
                                   'heartbeat_at) VALUES (:executor, :queue, :tools, :now, :now)'),
                           {'executor': executor_id, 'queue': queue, 'tools': json.dumps(tools), 'now': now})

    def leave(self, *executor_ids: str) -> None:
        if not executor_ids:
            return
        with self.engine.begin() as db:
            for executor_id in executor_ids:
                db.execute(self._sa.text('DELETE FROM toolweave_workers WHERE executor_id = :executor'),
                           {'executor': executor_id})

    def workers(self, queue: str | None = None) -> list[WorkerInfo]:
        """The workers of `queue` (every worker when `None`), the oldest first."""
        query = 'SELECT executor_id, queue, tools, started_at, heartbeat_at FROM toolweave_workers'
        params: dict[str, Any] = {}
        if queue is not None:
            query += ' WHERE queue = :queue'
            params['queue'] = queue
        with self.engine.begin() as db:
            rows = db.execute(self._sa.text(query + ' ORDER BY started_at'), params).fetchall()
        return [WorkerInfo(row[0], row[1], tuple(json.loads(row[2])), row[3], row[4]) for row in rows]

    def close(self) -> None:
        self.engine.dispose()
