"""`PostgresStore`: durable plan runs in PostgreSQL (psycopg 3 and its pool, the `postgres` extra), shared by
processes on several machines.

Writes go to a worker thread (`inline = False`): a commit is a round trip to the server, and the journal groups
the transitions of steps that start together into one commit. Changes to a run's header lock its row
(`SELECT ... FOR UPDATE`), so two processes cannot both claim a run, a decision cannot race another one, and a
journal write is checked against the run's holder (fencing, see `_sql.py`).

**Connections.** Every `PostgresStore` of one URL in a process shares one pool (`psycopg_pool.ConnectionPool`),
at most `pool` connections (10 unless the URL says `?pool=N`): a thousand concurrent runs need ten connections,
not a thousand (PostgreSQL's default `max_connections` is 100). A connection is checked before it is lent.

**A server that goes away.** An operation whose connection breaks (the server restarted, the network dropped) is
tried again with a fresh connection, waiting 0.1 s, then twice as long each time (at most 2 s), for up to `retry`
seconds (30 unless the URL says `?retry=SECONDS`); a journal write tried again adds nothing it had already added.
After that the operation fails with `PlanStoreError`, and the run stops.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolweave.exceptions import PlanStoreError
from toolweave.plan.durable._operations import check_tables
from toolweave.plan.durable._sql import (
    UNIQUE_WRITES,
    WRITE_COLUMNS,
    SqlStore,
    store_options,
)
from toolweave.plan.durable._store import LEASE_SECONDS

__all__ = ('DEFAULT_POOL', 'DEFAULT_RETRY', 'PostgresStore', 'redact')

DEFAULT_POOL = 10
"""Connections per URL per process, at most."""
DEFAULT_RETRY = 30.0
"""Seconds an operation whose connection broke is tried again for."""

_SCHEMA = (
    'CREATE TABLE IF NOT EXISTS toolweave_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)',
    'CREATE TABLE IF NOT EXISTS toolweave_runs (run_id TEXT PRIMARY KEY, plan_hash TEXT NOT NULL, plan TEXT NOT NULL, '
    'options TEXT NOT NULL, status TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, '
    'updated_at DOUBLE PRECISION NOT NULL, owner TEXT, heartbeat_at DOUBLE PRECISION, review TEXT, '
    f'epoch INTEGER NOT NULL DEFAULT 0, lease DOUBLE PRECISION NOT NULL DEFAULT {LEASE_SECONDS}, name TEXT, '
    'cancel_requested_at DOUBLE PRECISION, cancel_reason TEXT)',
    'CREATE TABLE IF NOT EXISTS toolweave_transitions (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, '
    'run_id TEXT NOT NULL, step_id TEXT NOT NULL, item INTEGER, status TEXT NOT NULL, at DOUBLE PRECISION NOT NULL, '
    'error TEXT, output TEXT, output_blob TEXT, value TEXT, value_blob TEXT, flags INTEGER NOT NULL DEFAULT 0, '
    'detail TEXT, epoch INTEGER, seq INTEGER)',
    'CREATE INDEX IF NOT EXISTS toolweave_transitions_by_run ON toolweave_transitions (run_id)',
    UNIQUE_WRITES,
    'CREATE TABLE IF NOT EXISTS toolweave_blobs (digest TEXT PRIMARY KEY, data TEXT NOT NULL)',
)
_INSERT_ROWS = 1000
"""Journal rows per INSERT statement (within PostgreSQL's 65,535 parameters a statement)."""
_SETUP_LOCK = 0x746F6F6C  # an advisory lock: processes starting together create the tables once
_OPTIONS = ('lease', 'pool', 'retry')


def redact(url: str) -> str:
    """`url` without its password."""
    scheme, sep, rest = url.partition('://')
    if not sep or '@' not in rest.split('/', 1)[0]:
        return url
    credentials, _, host = rest.partition('@')
    user = credentials.split(':', 1)[0]
    return f'{scheme}://{user}:***@{host}' if ':' in credentials else url


class _Pools:
    """One connection pool per connection string (and lease) in this process, shared by its stores (counted, closed
    with the last)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pools: dict[str, tuple[Any, int]] = {}

    def take(self, conninfo: str, size: int, lease: float) -> Any:
        key = f'{conninfo}#{lease}'
        with self._lock:
            found = self._pools.get(key)
            if found is not None:
                pool, users = found
                self._pools[key] = (pool, users + 1)
                return pool
            from psycopg.conninfo import conninfo_to_dict
            from psycopg_pool import ConnectionPool

            # A process that stopped (SIGSTOP, a suspended machine) in the middle of a write holds the run's locks:
            # the server ends its statement or its open transaction after half the lease, so the process that takes
            # the run over is not blocked by it, and the stopped one finds its write refused when it wakes. No
            # statement of this store takes that long otherwise (writes and pages are bounded).
            limit = max(int(lease * 500), 100)
            given = str(conninfo_to_dict(conninfo).get('options') or '')  # the URL's own server options, kept
            options = f'{given} -c idle_in_transaction_session_timeout={limit} -c statement_timeout={limit}'.strip()
            pool = ConnectionPool(conninfo, min_size=1, max_size=size, open=False, timeout=30,
                                  kwargs={'autocommit': True, 'connect_timeout': 10, 'options': options},
                                  check=ConnectionPool.check_connection, reconnect_timeout=0)
            self._pools[key] = (pool, 1)
            return pool

    def give_back(self, conninfo: str, lease: float) -> None:
        key = f'{conninfo}#{lease}'
        with self._lock:
            pool, users = self._pools.get(key, (None, 0))
            if pool is None:
                return
            if users > 1:
                self._pools[key] = (pool, users - 1)
                return
            del self._pools[key]
        pool.close()


_POOLS = _Pools()


class PostgresStore(SqlStore):
    """Durable plan runs in PostgreSQL: several processes, on several machines, share runs.

    Args:
        conninfo: a libpq connection string or URL (`postgresql://user:password@host:5432/db`;
            `postgresql:///db?host=/run/postgresql` for a Unix socket). Options of toolweave's own in the query
            (`lease`, `pool`, `retry`) are read and taken out; the rest goes to libpq.
        lease: seconds a run's holder may go without a heartbeat before another process may take the run over.
        pool: connections this process opens to the database, at most (shared by every store of the URL).
        retry: seconds an operation whose connection broke is tried again for.
        read_only: open it only to read (listing, showing): a database without the plan store's tables is an
            error, and none are created in it.
    """

    inline = False
    dialect = 'postgresql'
    _for_update = ' FOR UPDATE'

    def __init__(self, conninfo: str, *, lease: float | None = None, pool: int | None = None,
                 retry: float | None = None, read_only: bool = False) -> None:
        try:
            import psycopg
            import psycopg_pool
        except ImportError as e:
            raise ImportError('PostgresStore needs psycopg and its pool: `pip install "toolweave[postgres]"`.') from e
        self._psycopg = psycopg
        conninfo, options = store_options(conninfo.replace('postgresql+psycopg://', 'postgresql://', 1), _OPTIONS)
        self._conninfo = conninfo
        super().__init__(redact(conninfo), lease=lease if lease is not None else _number(
            options, 'lease', LEASE_SECONDS, conninfo))
        self.pool_size = pool if pool is not None else int(_number(options, 'pool', DEFAULT_POOL, conninfo))
        self.retry = retry if retry is not None else _number(options, 'retry', DEFAULT_RETRY, conninfo)
        self._pool: Any = None
        try:
            psycopg.connect(conninfo, connect_timeout=10).close()  # a server that is not there fails now, not in 30 s
            self._pool = _POOLS.take(conninfo, self.pool_size, self.lease)
            self._pool.open(wait=True, timeout=30)
            with self._transaction() as cursor:
                cursor.execute('SELECT pg_advisory_xact_lock(%s)', (_SETUP_LOCK,))
                if read_only:
                    check_tables(cursor, self.url)
                cursor.execute("SELECT to_regclass('toolweave_meta') IS NOT NULL")
                self._set_up(cursor, _SCHEMA, has_meta=bool(cursor.fetchone()[0]), real='DOUBLE PRECISION')
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            self.close()
            raise PlanStoreError(f'Cannot open plan store {self.url}: {_first_line(exc)}. Check that the server is '
                                 'running and that the URL, user and database are right.') from exc
        except BaseException:
            self.close()
            raise

    @property
    def conninfo(self) -> str:
        """The connection string, password included (toolweave's own options left out): for other clients of the
        same database (the workers of `toolweave.plan.workers` keep their queue in it). `url` is the one to show."""
        return self._conninfo

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        # A short wait for a connection: while the server is away, `_do` tries again (within `retry`), not the pool.
        with self._pool.connection(timeout=min(5.0, self.retry)) as db, db.transaction(), db.cursor() as cursor:
            yield cursor

    def _retrying(self, exc: Exception) -> bool:
        import psycopg_pool

        errors = self._psycopg.errors
        # The server ending a write this process left open (it was stopped past half its lease) is a broken
        # connection too: tried again, the write finds out whether the run is still this process's.
        return isinstance(exc, (self._psycopg.OperationalError, psycopg_pool.PoolTimeout,
                                errors.IdleInTransactionSessionTimeout, errors.QueryCanceled))

    def _wait_to_retry(self, attempt: int, started: float) -> bool:
        pause = min(0.1 * 2 ** attempt, 2.0)
        if time.monotonic() - started + pause > self.retry:
            return False
        time.sleep(pause)  # in a worker thread: PostgreSQL operations never run on the event loop
        return True

    def _sql(self, query: str) -> str:
        return query.replace('?', '%s')

    def _insert(self, cursor: Any, rows: list[tuple[Any, ...]]) -> None:
        # One multi-row INSERT per chunk: the rows of a batch (the steps that started together) in one statement.
        # Not COPY: a process stopped in the middle of a COPY holds its locks in a state the server cannot time
        # out (it waits for the client's data), while one stopped between statements is ended after half the lease.
        width = len(rows[0])
        for start in range(0, len(rows), _INSERT_ROWS):
            chunk = rows[start:start + _INSERT_ROWS]
            marks = ', '.join(['(' + ', '.join(['%s'] * width) + ')'] * len(chunk))
            cursor.execute(f'INSERT INTO toolweave_transitions (run_id, {WRITE_COLUMNS}) VALUES {marks}',
                           [value for row in chunk for value in row])

    def _reason(self, exc: Exception) -> str | None:
        import psycopg_pool

        if isinstance(exc, psycopg_pool.PoolTimeout):
            return f'no connection to the server ({_first_line(exc)})'
        return _first_line(exc) if isinstance(exc, self._psycopg.Error) else None

    def close(self) -> None:
        if self._pool is not None:
            self._pool = None
            _POOLS.give_back(self._conninfo, self.lease)

    def __repr__(self) -> str:
        return f'PostgresStore({self.url!r})'


def _number(options: dict[str, str], name: str, default: float, url: str) -> float:
    text = options.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value <= 0 or (name == 'pool' and value != int(value)):
        raise PlanStoreError(f'Cannot open plan store {redact(url)}: `?{name}=` must be a positive '
                             f'{"whole number" if name == "pool" else "number of seconds"}, got {text!r}.')
    return value


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f'{type(exc).__name__}: {text[0] if text else "no message"}'
