"""What the UI reads from a plan store beyond the library's own reads: the inbox (every parked step, across
runs), how many runs there are of each status, and what changed since the last look.

Read-only SQL over the store's documented tables (`toolweave_runs`, `toolweave_transitions`), on a connection of
its own, so the pages a person browses do not queue behind the store's writes. Pages of runs come from the
library's `list_runs`, a run's record from the store's `load`.

At setup (`Reads.open`), in PostgreSQL, the UI installs statement triggers that notify the channel
`toolweave_changes` with the ids of the runs a write touched (one `NOTIFY` per statement and run, so a journal
batch written with `COPY` notifies once). The journal's write path is unchanged.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from toolweave.exceptions import PlanStoreError
from toolweave.plan.durable import PlanStore, PostgresStore, SqliteStore

__all__ = ('CHANNEL', 'InboxEntry', 'Reads')

CHANNEL = 'toolweave_changes'
"""The PostgreSQL channel the UI's trigger notifies, with a run id as payload, after each write to a run."""
INBOX_LIMIT = 500
"""The most parked steps the inbox lists at once (the oldest first); the count says how many wait in all."""
OPEN_STATUSES = ('running', 'suspended', 'stopped')
"""Run statuses under which a step may still wait for a decision."""

_PG_TRIGGER = (
    'CREATE OR REPLACE FUNCTION toolweave_notify_changes() RETURNS trigger LANGUAGE plpgsql AS $$ '
    'DECLARE changed TEXT; BEGIN '
    'FOR changed IN SELECT DISTINCT run_id FROM new_rows LOOP '
    f"PERFORM pg_notify('{CHANNEL}', changed); END LOOP; RETURN NULL; END $$",
    'DROP TRIGGER IF EXISTS toolweave_transitions_notify ON toolweave_transitions',
    'CREATE TRIGGER toolweave_transitions_notify AFTER INSERT ON toolweave_transitions '
    'REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION toolweave_notify_changes()',
    'DROP TRIGGER IF EXISTS toolweave_runs_notify ON toolweave_runs',
    'CREATE TRIGGER toolweave_runs_notify AFTER UPDATE ON toolweave_runs '
    'REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION toolweave_notify_changes()',
    'DROP TRIGGER IF EXISTS toolweave_runs_notify_insert ON toolweave_runs',
    'CREATE TRIGGER toolweave_runs_notify_insert AFTER INSERT ON toolweave_runs '
    'REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION toolweave_notify_changes()',
)
_PG_SETUP_LOCK = 0x74776C75  # an advisory lock: two UIs starting together install the trigger once


@dataclass(frozen=True, slots=True)
class InboxEntry:
    """A parked step: a decision waits for it."""

    run_id: str
    step_id: str
    parked_at: float
    reason: str | None
    detail: dict[str, Any]
    run_status: str


class Reads:
    """The UI's read connection to a store's tables (see the module docstring). Thread-safe: one connection, one
    lock; every method blocks (call it from a worker thread)."""

    def __init__(self, db: Any, *, postgres: bool, conninfo: str | None = None) -> None:
        self._db = db
        self._conninfo = conninfo
        self.postgres = postgres
        self._lock = threading.Lock()

    @classmethod
    def open(cls, store: PlanStore) -> Reads:
        """A read connection to `store`'s database (in PostgreSQL, after installing the UI's trigger).

        Raises:
            PlanStoreError: the database cannot be opened, or is not a plan store.
        """
        if isinstance(store, SqliteStore):
            return cls._open_sqlite(store)
        if isinstance(store, PostgresStore):
            return cls._open_postgres(store)
        raise PlanStoreError(f'The UI reads SQLite and PostgreSQL plan stores, got {type(store).__name__} '
                             f'({store.url}).')

    @classmethod
    def _open_sqlite(cls, store: SqliteStore) -> Reads:
        try:
            db = sqlite3.connect(f'file:{store.path}?mode=ro', uri=True, isolation_level=None,
                                 check_same_thread=False, timeout=30.0)
            db.execute('SELECT 1 FROM toolweave_runs LIMIT 1')
        except sqlite3.Error as exc:
            raise PlanStoreError(f'Cannot read plan store {store.url}: {exc}.') from exc
        return cls(db, postgres=False)

    @classmethod
    def _open_postgres(cls, store: PostgresStore) -> Reads:
        import psycopg

        try:
            db = psycopg.connect(store.conninfo, autocommit=True, connect_timeout=10)
            with db.transaction():
                db.execute('SELECT pg_advisory_xact_lock(%s)', (_PG_SETUP_LOCK,))
                for statement in _PG_TRIGGER:
                    db.execute(statement)
        except psycopg.Error as exc:
            raise PlanStoreError(f'Cannot read plan store {store.url}: {exc}.') from exc
        return cls(db, postgres=True, conninfo=store.conninfo)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _cursor(self) -> Iterator[Any]:
        with self._lock:
            cursor = self._db.cursor()
            try:
                yield cursor
            except Exception as exc:
                if isinstance(exc, (sqlite3.Error, *self._pg_errors())):
                    raise PlanStoreError(f'Reading the plan store failed: {exc}') from exc
                raise
            finally:
                cursor.close()

    def _pg_errors(self) -> tuple[type[Exception], ...]:
        if not self.postgres:
            return ()
        import psycopg

        return (psycopg.Error,)

    def _sql(self, query: str) -> str:
        return query.replace('?', '%s') if self.postgres else query

    def _query(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._cursor() as cursor:
            cursor.execute(self._sql(query), tuple(params))
            return list(cursor.fetchall())

    def counts(self) -> dict[str, int]:
        """How many runs the store has in each stored status."""
        return {status: int(count) for status, count in self._query(
            'SELECT status, COUNT(*) FROM toolweave_runs GROUP BY status')}

    # --- the inbox --------------------------------------------------------------------------------------------

    def inbox(self, limit: int = INBOX_LIMIT) -> tuple[list[InboxEntry], int]:
        """The parked steps (a step whose last transition, `ready` aside, is `parked`), oldest first, and how
        many there are in all."""
        statuses = ', '.join('?' * len(OPEN_STATUSES))
        waiting = (f'FROM toolweave_transitions t JOIN toolweave_runs r ON r.run_id = t.run_id '
                   f"WHERE r.status IN ({statuses}) AND t.item IS NULL AND t.status = 'parked' AND NOT EXISTS ("
                   'SELECT 1 FROM toolweave_transitions u WHERE u.run_id = t.run_id AND u.step_id = t.step_id '
                   "AND u.item IS NULL AND u.id > t.id AND u.status <> 'ready')")
        rows = self._query(f'SELECT t.run_id, t.step_id, t.at, t.error, t.detail, r.status {waiting} '
                           'ORDER BY t.at, t.id LIMIT ?', [*OPEN_STATUSES, limit])
        total = self._query(f'SELECT COUNT(*) {waiting}', OPEN_STATUSES)[0][0]
        return [InboxEntry(row[0], row[1], row[2], row[3], _detail(row[4]), row[5]) for row in rows], int(total)

    def plans(self, run_ids: Sequence[str]) -> dict[str, str]:
        """The stored plans (JSON text) of `run_ids`."""
        found: dict[str, str] = {}
        ids = list(dict.fromkeys(run_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            found.update(self._query(f'SELECT run_id, plan FROM toolweave_runs WHERE run_id IN '
                                     f'({", ".join("?" * len(chunk))})', chunk))
        return found

    # --- changes ----------------------------------------------------------------------------------------------

    def mark(self) -> tuple[int, float]:
        """Where the store is now: the last transition's id and the last update of a run header."""
        row = self._query('SELECT (SELECT COALESCE(MAX(id), 0) FROM toolweave_transitions), '
                          '(SELECT COALESCE(MAX(updated_at), 0) FROM toolweave_runs)')[0]
        return int(row[0]), float(row[1])

    def changed_since(self, mark: tuple[int, float]) -> tuple[set[str], tuple[int, float]]:
        """The runs written to since `mark`, and the new mark."""
        last_id, last_update = mark
        changed = {row[0] for row in self._query(
            'SELECT DISTINCT run_id FROM toolweave_transitions WHERE id > ?', (last_id,))}
        changed.update(row[0] for row in self._query(
            'SELECT run_id FROM toolweave_runs WHERE updated_at > ?', (last_update,)))
        return changed, self.mark() if changed else mark

    def listen(self, deliver: Callable[[str], None], stop: threading.Event) -> None:
        """PostgreSQL only: call `deliver(run_id)` for each notification on `CHANNEL` until `stop` is set (on a
        connection of its own, in the calling thread)."""
        import psycopg

        assert self._conninfo is not None
        conn = psycopg.connect(self._conninfo, autocommit=True, connect_timeout=10)
        try:
            conn.execute(f'LISTEN {CHANNEL}')
            while not stop.is_set():
                for notice in conn.notifies(timeout=0.25):
                    deliver(notice.payload)
        finally:
            conn.close()


def _detail(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
