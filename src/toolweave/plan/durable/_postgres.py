"""`PostgresStore`: durable plan runs in PostgreSQL (psycopg 3, the `postgres` extra), shared by processes on
several machines.

Writes go to a worker thread (`inline = False`): a commit is a round trip to the server, and the journal groups
the transitions of steps that start together into one commit. Changes to a run's header lock its row
(`SELECT ... FOR UPDATE`), so two processes cannot both claim a run, and a decision cannot race another one.
A connection that fails (the server restarted) is opened again at the next operation.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolweave.exceptions import PlanStoreError
from toolweave.plan.durable._operations import check_tables, upgrade
from toolweave.plan.durable._sql import SCHEMA_VERSION, TRANSITION_COLUMNS, SqlStore

__all__ = ('PostgresStore', 'redact')

_SCHEMA = (
    'CREATE TABLE IF NOT EXISTS toolweave_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)',
    'CREATE TABLE IF NOT EXISTS toolweave_runs (run_id TEXT PRIMARY KEY, plan_hash TEXT NOT NULL, plan TEXT NOT NULL, '
    'options TEXT NOT NULL, status TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, '
    'updated_at DOUBLE PRECISION NOT NULL, owner TEXT, heartbeat_at DOUBLE PRECISION, review TEXT)',
    'CREATE TABLE IF NOT EXISTS toolweave_transitions (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, '
    'run_id TEXT NOT NULL, step_id TEXT NOT NULL, item INTEGER, status TEXT NOT NULL, at DOUBLE PRECISION NOT NULL, '
    'error TEXT, output TEXT, output_blob TEXT, value TEXT, value_blob TEXT, flags INTEGER NOT NULL DEFAULT 0, '
    'detail TEXT)',
    'CREATE INDEX IF NOT EXISTS toolweave_transitions_by_run ON toolweave_transitions (run_id)',
    'CREATE TABLE IF NOT EXISTS toolweave_blobs (digest TEXT PRIMARY KEY, data TEXT NOT NULL)',
)
_SETUP_LOCK = 0x746F6F6C  # an advisory lock: processes starting together create the tables once


def redact(url: str) -> str:
    """`url` without its password."""
    scheme, sep, rest = url.partition('://')
    if not sep or '@' not in rest.split('/', 1)[0]:
        return url
    credentials, _, host = rest.partition('@')
    user = credentials.split(':', 1)[0]
    return f'{scheme}://{user}:***@{host}' if ':' in credentials else url


class PostgresStore(SqlStore):
    """Durable plan runs in PostgreSQL: several processes, on several machines, share runs.

    Args:
        conninfo: a libpq connection string or URL (`postgresql://user:password@host:5432/db`;
            `postgresql:///db?host=/run/postgresql` for a Unix socket).
        read_only: open it only to read (listing, showing): a database without the plan store's tables is an
            error, and none are created in it.
    """

    inline = False
    dialect = 'postgresql'

    def __init__(self, conninfo: str, *, read_only: bool = False) -> None:
        try:
            import psycopg
        except ImportError as e:
            raise ImportError('PostgresStore needs psycopg: `pip install "toolweave[postgres]"`.') from e
        self._psycopg = psycopg
        self._conninfo = conninfo.replace('postgresql+psycopg://', 'postgresql://', 1)
        super().__init__(redact(self._conninfo))
        self._db: Any = None
        try:
            self._connect()
            with self._lock, self._transaction() as cursor:
                cursor.execute('SELECT pg_advisory_xact_lock(%s)', (_SETUP_LOCK,))
                if read_only:
                    check_tables(cursor, self.url)
                for statement in _SCHEMA:
                    cursor.execute(statement)
                upgrade(cursor, 'postgresql')
                cursor.execute("SELECT value FROM toolweave_meta WHERE key = 'schema'")
                row = cursor.fetchone()
                if row is None:
                    cursor.execute("INSERT INTO toolweave_meta (key, value) VALUES ('schema', %s)",
                                   (str(SCHEMA_VERSION),))
                elif row[0] != str(SCHEMA_VERSION):
                    raise PlanStoreError(f'Plan store {self.url} has schema version {row[0]}; this toolweave reads '
                                         f'version {SCHEMA_VERSION}.')
        except PlanStoreError:
            self.close()
            raise
        except psycopg.Error as exc:
            self.close()
            raise PlanStoreError(f'Cannot open plan store {self.url}: {_first_line(exc)}. Check that the server is '
                                 'running and that the URL, user and database are right.') from exc

    @property
    def conninfo(self) -> str:
        """The connection string, password included: for other clients of the same database (the workers of
        `toolweave.plan.workers` keep their queue in it). `url` is the one to show."""
        return self._conninfo

    def _connect(self) -> Any:
        if self._db is None or self._db.closed or self._db.broken:
            if self._db is not None:
                self._db.close()
            self._db = self._psycopg.connect(self._conninfo, autocommit=True, connect_timeout=10)
        return self._db

    @contextmanager
    def _transaction(self, run_id: str | None = None) -> Iterator[Any]:
        db = self._connect()
        with db.transaction(), db.cursor() as cursor:
            if run_id is not None:
                cursor.execute('SELECT 1 FROM toolweave_runs WHERE run_id = %s FOR UPDATE', (run_id,))
            yield cursor

    def _sql(self, query: str) -> str:
        return query.replace('?', '%s')

    def _insert(self, cursor: Any, rows: list[tuple[Any, ...]]) -> None:
        # COPY: the rows of a batch (the steps that started together) go in one stream, not one statement each.
        with cursor.copy(f'COPY toolweave_transitions (run_id, {TRANSITION_COLUMNS}) FROM STDIN') as copy:
            for row in rows:
                copy.write_row(row)

    def _reason(self, exc: Exception) -> str | None:
        return _first_line(exc) if isinstance(exc, self._psycopg.Error) else None

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()

    def __repr__(self) -> str:
        return f'PostgresStore({self.url!r})'


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f'{type(exc).__name__}: {text[0] if text else "no message"}'
