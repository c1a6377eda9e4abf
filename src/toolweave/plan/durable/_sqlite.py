"""`SqliteStore`: durable plan runs in one SQLite file (stdlib `sqlite3`), in WAL mode.

Writes are short transactions made straight from the event loop (`inline`): in WAL mode with
`synchronous=NORMAL` (the default here) a commit appends to the write-ahead log without waiting for the disk, so
a process that is killed loses nothing it committed; a power cut or an operating-system crash may lose the last
commits. `?synchronous=full` in the URL makes every commit wait for the disk.

The event loop never waits for another writer: from there an operation waits at most `_BUSY_MS` for the file's
write lock, and if another process holds it longer, the operation goes to a worker thread (`patiently`), which
waits up to `_PATIENT_MS`.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Literal

from toolweave.exceptions import PlanStoreError, UserError
from toolweave.plan.durable._operations import UPGRADED_COLUMNS
from toolweave.plan.durable._sql import SCHEMA_VERSION, UNIQUE_WRITES, SqlStore
from toolweave.plan.durable._store import LEASE_SECONDS, StoreBusy

__all__ = ('SqliteStore',)

Synchronous = Literal['normal', 'full']

_SCHEMA = (
    'CREATE TABLE IF NOT EXISTS toolweave_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)',
    'CREATE TABLE IF NOT EXISTS toolweave_runs (run_id TEXT PRIMARY KEY, plan_hash TEXT NOT NULL, plan TEXT NOT NULL, '
    'options TEXT NOT NULL, status TEXT NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL, owner TEXT, '
    f'heartbeat_at REAL, review TEXT, epoch INTEGER NOT NULL DEFAULT 0, lease REAL NOT NULL DEFAULT {LEASE_SECONDS}, '
    'name TEXT, cancel_requested_at REAL, cancel_reason TEXT)',
    'CREATE TABLE IF NOT EXISTS toolweave_transitions (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, '
    'step_id TEXT NOT NULL, item INTEGER, status TEXT NOT NULL, at REAL NOT NULL, error TEXT, output TEXT, '
    'output_blob TEXT, value TEXT, value_blob TEXT, flags INTEGER NOT NULL DEFAULT 0, detail TEXT, epoch INTEGER, '
    'seq INTEGER)',
    'CREATE INDEX IF NOT EXISTS toolweave_transitions_by_run ON toolweave_transitions (run_id)',
    UNIQUE_WRITES,
    'CREATE TABLE IF NOT EXISTS toolweave_blobs (digest TEXT PRIMARY KEY, data TEXT NOT NULL)',
)
_BUSY_MS = 50
"""How long an operation made from the event loop waits for another process's write lock."""
_PATIENT_MS = 30_000
"""How long an operation made from a worker thread waits for it."""


class SqliteStore(SqlStore):
    """Durable plan runs in a SQLite file: no server, one machine (several processes may share the file).

    ```python
    import tempfile
    from toolweave.plan.durable import SqliteStore

    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(f'{folder}/runs.db')
        print(store.runs())
        store.close()
    #> []
    ```

    Args:
        path: the database file (created if missing; its folder must exist).
        synchronous: `'normal'` (the default: a killed process loses nothing committed) or `'full'` (a commit
            also survives a power cut, at the cost of waiting for the disk on every step start).
        lease: seconds a run's holder may go without a heartbeat before another process may take the run over.
        read_only: open an existing store only to read it (listing, showing): a missing file is an error, not a
            new empty store.
    """

    inline = True
    dialect = 'sqlite'

    def __init__(self, path: str | Path, *, synchronous: Synchronous = 'normal',
                 lease: float = LEASE_SECONDS, read_only: bool = False) -> None:
        if synchronous not in ('normal', 'full'):
            raise UserError(f"SqliteStore synchronous must be 'normal' or 'full', got {synchronous!r}.")
        self.path = Path(path)
        super().__init__(f'sqlite:///{self.path}', lease=lease)
        self._lock = threading.Lock()  # one connection, used from the event loop and from worker threads
        self._patient = threading.local()
        self._busy_ms = _BUSY_MS
        self.read_only = read_only
        if read_only and self._open_to_read():
            return
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                       timeout=_BUSY_MS / 1000)
        except sqlite3.Error as exc:
            raise PlanStoreError(f'Cannot open plan store {self.url}: {exc}. Check that the folder '
                                 f'{str(self.path.parent)!r} exists and is writable.') from exc
        self.read_only = False
        try:
            mode = self._db.execute('PRAGMA journal_mode=WAL').fetchone()[0]
            self._db.execute(f'PRAGMA synchronous={synchronous.upper()}')
            # Checkpoints (the WAL copied into the database, with an fsync) every ~40 MB of log rather than ~4 MB:
            # a run commits once per step start, and the checkpoints' fsyncs were a third of that cost.
            self._db.execute('PRAGMA wal_autocheckpoint=10000')
            self._setup()
        except sqlite3.Error as exc:
            self._db.close()
            raise PlanStoreError(f'Cannot open plan store {self.url}: {exc}. Is it a SQLite database that this user '
                                 'may write?') from exc
        self.wal = mode == 'wal'

    def _setup(self) -> None:
        with self.patiently(), self._transaction() as cursor:
            has_meta = cursor.execute("SELECT name FROM sqlite_master WHERE name = 'toolweave_meta'").fetchone()
            self._set_up(cursor, _SCHEMA, has_meta=has_meta is not None, real='REAL')

    @contextmanager
    def patiently(self) -> Iterator[None]:
        """Operations made inside the block (in this thread) wait for another writer's lock as long as it takes (up
        to `_PATIENT_MS`): for worker threads, never for the event loop."""
        self._patient.on = True
        try:
            yield
        finally:
            self._patient.on = False

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        with self._lock:
            cursor = self._db.cursor()
            try:
                wait = _PATIENT_MS if getattr(self._patient, 'on', False) else _BUSY_MS
                if wait != self._busy_ms:
                    cursor.execute(f'PRAGMA busy_timeout = {wait}')
                    self._busy_ms = wait
                try:
                    # The write lock now, not at the first write: no upgrade deadlock (a store opened to read takes
                    # none).
                    cursor.execute('BEGIN' if self.read_only else 'BEGIN IMMEDIATE')
                except sqlite3.OperationalError as exc:
                    if wait == _BUSY_MS and 'locked' in str(exc):
                        raise StoreBusy(f'Plan store {self.url} is being written by another process') from exc
                    raise
                try:
                    yield cursor
                except BaseException:
                    if self._db.in_transaction:
                        self._db.rollback()
                    raise
                else:
                    cursor.execute('COMMIT')
            finally:
                cursor.close()

    def _sql(self, query: str) -> str:
        return query

    def _reading(self) -> AbstractContextManager[sqlite3.Cursor]:
        return self._deferred()

    @contextmanager
    def _deferred(self) -> Iterator[sqlite3.Cursor]:
        """A transaction that reads: it waits for no writer, and no writer waits for it (WAL)."""
        with self._lock:
            cursor = self._db.cursor()
            cursor.execute('BEGIN')
            try:
                yield cursor
            finally:
                if self._db.in_transaction:
                    self._db.rollback()
                cursor.close()

    def _open_to_read(self) -> bool:
        """Open the existing file read-only; `False` when it must be opened to write once first (its tables lack
        what this version reads: `upgrade` adds it)."""
        if not self.path.is_file():
            raise PlanStoreError(f'Cannot open plan store {self.url}: the file {str(self.path)!r} does not exist. '
                                 'Check the path (`--store`, or TOOLWEAVE_STORE).')
        try:
            self._db = sqlite3.connect(f'{self.path.resolve().as_uri()}?mode=ro', uri=True, isolation_level=None,
                                       check_same_thread=False, timeout=30.0)
            columns = {row[1] for row in self._db.execute('PRAGMA table_info(toolweave_runs)')}
            columns |= {row[1] for row in self._db.execute('PRAGMA table_info(toolweave_transitions)')}
            row = self._db.execute("SELECT value FROM toolweave_meta WHERE key = 'schema'").fetchone()
        except sqlite3.Error as exc:
            self._db.close()
            raise PlanStoreError(f'Cannot open plan store {self.url}: {exc}. Is it a plan store (a SQLite database '
                                 'written by toolweave)?') from exc
        if row is not None and row[0] == '1':  # an older store: opened to write once, it is upgraded
            self._db.close()
            return False
        if row is None or row[0] != str(SCHEMA_VERSION):
            self._db.close()
            raise PlanStoreError(f'Cannot open plan store {self.url}: it has schema version '
                                 f'{None if row is None else row[0]!r}; this toolweave reads version {SCHEMA_VERSION}.')
        if not columns.issuperset(UPGRADED_COLUMNS):
            self._db.close()
            return False
        self.wal = self._db.execute('PRAGMA journal_mode').fetchone()[0] == 'wal'
        return True

    def _reason(self, exc: Exception) -> str | None:
        return f'{type(exc).__name__}: {exc}' if isinstance(exc, sqlite3.Error) else None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f'SqliteStore({str(self.path)!r})'
