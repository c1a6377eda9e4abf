"""What operators do with stored runs, as store queries: list them a page at a time, cancel one, prune old ones,
find the ones whose holder is gone, and the schema those queries need.

`RunOperations` is a mixin of `SqlStore`: its methods are the `PlanStore` methods after the run's own write path
(`create` ... `load`), written once with `?` placeholders over the helpers a SQL store has (`_do`, `_header`,
`_insert`). The public functions over them (`list_runs`, `cancel_run`, `prune_runs`, `recover_runs`) are in
`_manage.py`.

The schema grows here, additively: `upgrade` adds the columns and indexes these queries use to a database of any
earlier version (`ALTER TABLE ... ADD COLUMN`, `CREATE INDEX IF NOT EXISTS`), as it is opened, so a store written
by an older toolweave gets them too and an older toolweave still reads the store (it never names the new columns).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import fields
from datetime import datetime
from functools import partial
from typing import Any, Literal, TypeAlias, TypeVar

from toolweave.exceptions import PlanStoreError, UnknownRunError, UserError
from toolweave.plan.durable._store import (
    Cancellation,
    ListedRun,
    Pruned,
    RunInfo,
    RunPage,
    RunQuery,
    RunState,
    Transition,
    owner_is_stale,
    shown_state,
)

__all__ = (
    'PRUNABLE',
    'RETAINED',
    'Retention',
    'RunOperations',
    'UPGRADED_COLUMNS',
    'check_tables',
    'parse_duration',
    'states',
    'take_retention',
    'timestamp',
    'upgrade',
)

T = TypeVar('T')
logger = logging.getLogger('toolweave.plan')
Dialect: TypeAlias = Literal['sqlite', 'postgresql']

PRUNABLE: tuple[RunState, ...] = ('finished', 'stopped', 'cancelled', 'suspended', 'crashed')
"""What `prune_runs` may delete: anything but a run a live process holds."""
MAX_PAGE = 1000

_ENDED = ('succeeded', 'failed', 'skipped')
_COLUMNS = (
    ('name', 'TEXT'),
    ('cancel_requested_at', 'DOUBLE PRECISION'),
    ('cancel_reason', 'TEXT'),
)
"""Columns of `toolweave_runs` added after its first version (SQLite reads `DOUBLE PRECISION` as REAL)."""
UPGRADED_COLUMNS = frozenset(column for column, _ in _COLUMNS)
_INDEXES = (
    # Listing pages, newest first, filtered or not; pruning by status and age.
    'CREATE INDEX IF NOT EXISTS toolweave_runs_by_update ON toolweave_runs (updated_at, run_id)',
    'CREATE INDEX IF NOT EXISTS toolweave_runs_by_status ON toolweave_runs (status, updated_at, run_id)',
    'CREATE INDEX IF NOT EXISTS toolweave_runs_by_name ON toolweave_runs (name, updated_at, run_id)',
    # "Waiting for a decision": only parked rows are in it, so the journal's appends pay nothing for it.
    "CREATE INDEX IF NOT EXISTS toolweave_transitions_parked ON toolweave_transitions (run_id, step_id) "
    "WHERE status = 'parked'",
    # Which transitions still use a blob, when pruning deletes some: only the rows with one.
    'CREATE INDEX IF NOT EXISTS toolweave_transitions_output_blob ON toolweave_transitions (output_blob) '
    'WHERE output_blob IS NOT NULL',
    'CREATE INDEX IF NOT EXISTS toolweave_transitions_value_blob ON toolweave_transitions (value_blob) '
    'WHERE value_blob IS NOT NULL',
)
_WAITING = (
    "EXISTS (SELECT 1 FROM toolweave_transitions p WHERE p.run_id = r.run_id AND p.status = 'parked' "
    'AND p.item IS NULL AND NOT EXISTS (SELECT 1 FROM toolweave_transitions q WHERE q.run_id = p.run_id '
    "AND q.step_id = p.step_id AND q.item IS NULL AND q.id > p.id AND q.status <> 'ready'))"
)
"""A run has a step whose last transition is `parked` (no decision, no later start)."""
_RETENTION_KEY = 'retention_ran_at'
_DURATION = re.compile(r'^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)?\s*$')
_UNITS = {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 7 * 86400, None: 1}


def upgrade(cursor: Any, dialect: Dialect) -> None:
    """Add what the operations need to the tables of a store being opened (see the module docstring). Only what is
    missing is added: on PostgreSQL, DDL locks the table even when it changes nothing, and stores are opened often."""
    if dialect == 'sqlite':
        cursor.execute('PRAGMA table_info(toolweave_runs)')
        present = {row[1] for row in cursor.fetchall()}
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
    else:
        cursor.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'toolweave_runs' "
                       'AND table_schema = current_schema()')
        present = {row[0] for row in cursor.fetchall()}
        cursor.execute('SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()')
    indexes = {row[0] for row in cursor.fetchall()}
    for column, kind in _COLUMNS:
        if column not in present:
            cursor.execute(f'ALTER TABLE toolweave_runs ADD COLUMN {column} {kind}')
    for statement in _INDEXES:
        if statement.split()[5] not in indexes:  # CREATE INDEX IF NOT EXISTS <name> ON ...
            cursor.execute(statement)


def check_tables(cursor: Any, url: str) -> None:
    """Refuse a PostgreSQL database without a plan store's tables (a store opened to read creates none)."""
    cursor.execute("SELECT to_regclass('toolweave_runs') IS NOT NULL")
    if not cursor.fetchone()[0]:
        raise PlanStoreError(f'Cannot open plan store {url}: the database has no plan runs (no table '
                             '`toolweave_runs`). Check the database name in the URL (`--store`, or TOOLWEAVE_STORE).')


PRUNE_RUNS = 500
"""Runs deleted in one transaction at most."""
PRUNE_ROWS = 20_000
"""Transitions deleted in one transaction, about: a batch closes once its runs hold this many (a single run with
more is deleted alone, in one transaction, so that no run is ever left half deleted)."""


# --- values from people --------------------------------------------------------------------------------------------

def parse_duration(text: str, what: str = 'duration') -> float:
    """Seconds in `'30d'`, `'12h'`, `'15m'`, `'90s'`, `'2w'` or a plain number of seconds."""
    match = _DURATION.match(text) if isinstance(text, str) else None
    if match is None:
        raise UserError(f"{what} must be a number with a unit (s, m, h, d or w), like '30d' or '12h', got {text!r}.")
    return float(match.group(1)) * _UNITS[match.group(2)]


def timestamp(value: datetime | float | str | None, what: str) -> float | None:
    """`value` as seconds since the epoch: a `datetime` (naive: local time), seconds, an ISO date or date and time
    (`'2026-11-20'`, `'2026-11-20T14:00'`, local unless it says), or a duration before now (`'7d'`, `'12h'`)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        if _DURATION.match(value):
            return time.time() - parse_duration(value)
        try:
            return datetime.fromisoformat(value.strip()).timestamp()
        except ValueError:
            pass
    elif not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    raise UserError(f"{what} must be a datetime, seconds since the epoch (time.time()), an ISO date ('2026-11-20', "
                    f"'2026-11-20T14:00') or a time ago ('90m', '12h', '7d'), got {value!r}.")


def states(status: str | Iterable[str] | None, allowed: Sequence[RunState], what: str) -> frozenset[RunState] | None:
    """The statuses `status` names, each one of `allowed`."""
    if status is None:
        return None
    given = [status] if isinstance(status, str) else list(status)
    chosen = frozenset(state for state in allowed if state in given)
    if not given or len(chosen) != len(set(given)):
        raise UserError(f'{what} must be one or more of {", ".join(allowed)}, got {status!r}.')
    return chosen


def encode_cursor(updated_at: float, run_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([updated_at, run_id]).encode()).decode().rstrip('=')


def decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + '=' * (-len(cursor) % 4)))
        updated_at, run_id = data
        if isinstance(updated_at, int | float) and not isinstance(updated_at, bool) and isinstance(run_id, str):
            return float(updated_at), run_id
    except (ValueError, TypeError, binascii.Error):
        pass
    raise UserError(f'after must be the cursor of a page of runs (`RunPage.cursor`, printed by `toolweave runs list`), '
                    f'got {cursor!r}.')


# --- retention ----------------------------------------------------------------------------------------------------

RETENTION_EVERY = 3600.0
"""Seconds between two applications of a store's `?retain=`, across every process that opens it."""
RETAINED: frozenset[RunState] = frozenset({'finished', 'cancelled'})
"""What `?retain=` prunes: the runs that are over (a stopped, suspended or crashed run may still go on)."""


def take_retention(url: str) -> tuple[str, float | None]:
    """`url` without its `retain=` option, and that option in seconds (`None`: there is none)."""
    base, sep, query = url.partition('?')
    if not sep:
        return url, None
    kept: list[str] = []
    retain: float | None = None
    for part in query.split('&'):
        key, _, value = part.partition('=')
        if key == 'retain':
            retain = parse_duration(value, f'The `retain` option of plan store {base!r}')
            if retain <= 0:
                raise UserError(f'The `retain` option of plan store {base!r} must be more than 0, got {value!r}.')
        elif part:
            kept.append(part)
    return (f'{base}?{"&".join(kept)}' if kept else base), retain


class Retention:
    """A store's `?retain=` option: prunes the runs over for longer than `seconds` from a daemon thread, with a
    store of its own (`reopen`), when no process of the store did in the last hour."""

    def __init__(self, seconds: float, reopen: Callable[[], Any]) -> None:
        self.seconds = seconds
        self.reopen = reopen
        self.thread: threading.Thread | None = None
        """The thread of the last prune this process started, if any."""
        self.pruned: Pruned | None = None
        """What it deleted, once it is done."""

    def start(self, store: RunOperations) -> bool:
        """Start a prune if it is this process's turn; whether it started one. Kept on `store.retention`."""
        store.retention = self
        if self.thread is not None and self.thread.is_alive():
            return False
        try:
            if not store.claim_retention(RETENTION_EVERY):
                return False
        except PlanStoreError as exc:
            logger.warning('Could not schedule the retention of plan store %s: %s', store.url, exc)
            return False
        self.thread = threading.Thread(target=self._prune, name='toolweave-retention', daemon=True)
        self.thread.start()
        return True

    def _prune(self) -> None:
        try:
            store = self.reopen()
            try:
                self.pruned = store.prune(time.time() - self.seconds, RETAINED)
            finally:
                store.close()
        except Exception as exc:  # a thread of its own: say so, and try again at the next turn
            logger.warning('The retention of a plan store failed: %s', exc)
            return
        if self.pruned.runs:
            logger.info('Pruned %d plan runs over for more than %g s (%d transitions, %d blobs) from %s',
                        self.pruned.runs, self.seconds, self.pruned.transitions, self.pruned.blobs, store.url)


# --- the store side ------------------------------------------------------------------------------------------------

class RunOperations(ABC):
    """The operators' queries of a SQL store (see the module docstring)."""

    url: str
    dialect: Dialect
    _lock: threading.Lock
    retention: Retention | None = None
    """The store's `?retain=` option, when it was opened with one."""

    @abstractmethod
    def _do(self, what: str, run_id: str | None, work: Callable[[Any], T], *, lock_run: bool = False) -> T: ...

    @abstractmethod
    def _sql(self, query: str) -> str: ...

    @abstractmethod
    def _header(self, cursor: Any, run_id: str) -> RunInfo | None: ...

    @abstractmethod
    def _unknown(self, cursor: Any, run_id: str) -> UnknownRunError: ...

    @abstractmethod
    def _insert(self, cursor: Any, rows: list[tuple[Any, ...]]) -> None: ...

    @abstractmethod
    def _reason(self, exc: Exception) -> str | None: ...

    def _reading(self) -> AbstractContextManager[Any]:
        """A transaction that only reads (SQLite: deferred, so that it does not wait for the write lock)."""
        return self._transaction()

    @abstractmethod
    def _transaction(self, run_id: str | None = None) -> AbstractContextManager[Any]: ...

    def _read(self, what: str, run_id: str | None, work: Callable[[Any], T]) -> T:
        """`_do` for reading."""
        with self._lock:
            try:
                with self._reading() as cursor:
                    return work(cursor)
            except Exception as exc:
                reason = self._reason(exc)
                if reason is None:
                    raise
                where = f' {run_id!r}' if run_id is not None else ''
                raise PlanStoreError(f'Plan store {self.url} failed to {what}{where}: {reason}') from exc

    # --- listing ------------------------------------------------------------------------------------------------

    def header(self, run_id: str) -> RunInfo:
        """The run's header (`UnknownRunError` if the store has no such run)."""
        def work(cursor: Any) -> RunInfo:
            info = self._header(cursor, run_id)
            if info is None:
                raise self._unknown(cursor, run_id)
            return info
        return self._read('read run', run_id, work)

    def list_page(self, query: RunQuery) -> RunPage:
        """A page of runs matching `query`, newest first (see `list_runs`)."""
        return self._read('list runs', None, lambda cursor: self._page(cursor, query))

    def _page(self, cursor: Any, query: RunQuery) -> RunPage:
        wanted = query.states
        stored = None if wanted is None else {'running' if s == 'crashed' else s for s in wanted}
        # `running` and `crashed` are one stored status told apart here (by the holder's liveness): when only one
        # of them is asked for, rows of the other are read and dropped, and reading goes on until the page is full.
        sift = wanted is not None and ('running' in wanted) != ('crashed' in wanted)
        rows: list[ListedRun] = []
        after = query.after
        while len(rows) <= query.limit:
            batch = self._select(cursor, query, stored, after, query.limit + 1)
            for row in batch:
                after = (row[4], row[0])
                state = shown_state(row[2], row[5], row[6])
                if not sift or state in (wanted or ()):
                    rows.append(ListedRun(row[0], row[1], state, int(row[9] or 0), 0, row[3], row[4], row[5], row[6],
                                          row[7], row[8]))
            if len(batch) <= query.limit:
                break
        more = len(rows) > query.limit
        rows = rows[:query.limit]
        waiting = self._waiting(cursor, [row.run_id for row in rows])
        listed = tuple(ListedRun(r.run_id, r.name, r.status, r.steps, waiting.get(r.run_id, 0), r.created_at,
                                 r.updated_at, r.owner, r.heartbeat_at, r.cancel_requested_at, r.cancel_reason)
                       for r in rows)
        last = listed[-1] if listed else None
        return RunPage(listed, encode_cursor(last.updated_at, last.run_id) if more and last else None)

    def _select(self, cursor: Any, query: RunQuery, stored: Collection[str] | None, after: tuple[float, str] | None,
                limit: int) -> list[tuple[Any, ...]]:
        where: list[str] = []
        params: list[Any] = []
        if stored is not None:
            where.append(f'status IN ({", ".join("?" * len(stored))})')
            params.extend(sorted(stored))
        if query.name is not None:
            where.append('name = ?')
            params.append(query.name)
        if query.since is not None:
            where.append('updated_at >= ?')
            params.append(query.since)
        if query.until is not None:
            where.append('updated_at < ?')
            params.append(query.until)
        if after is not None:
            where.append('(updated_at, run_id) < (?, ?)')
            params.extend(after)
        if query.waiting:
            # A run with a step waiting for a decision is one of these (a finished or cancelled one has none).
            where.append("status IN ('running', 'suspended', 'stopped')")
            where.append(_WAITING)
        steps = ("json_array_length(plan, '$.steps')" if self.dialect == 'sqlite'
                 else "json_array_length((plan::json)->'steps')")
        cursor.execute(self._sql(
            'SELECT run_id, name, status, created_at, updated_at, owner, heartbeat_at, cancel_requested_at, '
            f'cancel_reason, {steps} FROM toolweave_runs r {"WHERE " + " AND ".join(where) if where else ""} '
            'ORDER BY updated_at DESC, run_id DESC LIMIT ?'), (*params, limit))
        return [tuple(row) for row in cursor.fetchall()]

    def _waiting(self, cursor: Any, run_ids: list[str]) -> dict[str, int]:
        """How many steps of each run wait for a decision."""
        if not run_ids:
            return {}
        cursor.execute(self._sql(
            'SELECT p.run_id, count(DISTINCT p.step_id) FROM toolweave_transitions p '
            f"WHERE p.run_id IN ({', '.join('?' * len(run_ids))}) AND p.status = 'parked' AND p.item IS NULL "
            'AND NOT EXISTS (SELECT 1 FROM toolweave_transitions q WHERE q.run_id = p.run_id AND q.step_id = p.step_id '
            "AND q.item IS NULL AND q.id > p.id AND q.status <> 'ready') GROUP BY p.run_id"), tuple(run_ids))
        return {run_id: int(count) for run_id, count in cursor.fetchall()}

    def unheld(self) -> list[RunInfo]:
        """Runs no live process holds that a recoverer acts on: `running` ones whose holder is gone (crashed), and
        any with a cancel request still to carry out."""
        def work(cursor: Any) -> list[RunInfo]:
            columns = ', '.join(field.name for field in fields(RunInfo))
            cursor.execute(self._sql(f"SELECT {columns} FROM toolweave_runs WHERE status = 'running' OR "
                                     "(cancel_requested_at IS NOT NULL AND status <> 'cancelled') "
                                     'ORDER BY updated_at'))
            found = [RunInfo(*row) for row in cursor.fetchall()]
            return [info for info in found if info.owner is None or owner_is_stale(info.owner, info.heartbeat_at)]
        return self._read('look for crashed runs', None, work)

    def hand_back(self, run_id: str) -> bool:
        """Make a run that a recoverer let go of when it was stopped (`stopped`, nobody holding it) crashed again, so
        that the next recoverer takes it; whether it did (not if someone claimed it meanwhile)."""
        def work(cursor: Any) -> bool:
            cursor.execute(self._sql("UPDATE toolweave_runs SET status = 'running' WHERE run_id = ? AND owner IS NULL "
                                     "AND status = 'stopped'"), (run_id,))
            return bool(cursor.rowcount == 1)
        return self._do('hand back run', run_id, work, lock_run=True)

    # --- cancelling ---------------------------------------------------------------------------------------------

    def cancel(self, run_id: str, reason: str | None) -> Cancellation:
        """Cancel a run no live process holds, or ask its holder to (see `Cancellation.outcome`)."""
        def work(cursor: Any) -> Cancellation:
            info = self._header(cursor, run_id)
            if info is None:
                raise self._unknown(cursor, run_id)
            if info.status == 'cancelled':
                return Cancellation(run_id, 'already cancelled', (), info.cancel_reason)
            if info.status == 'finished':
                return Cancellation(run_id, 'already finished')
            now = time.time()
            if info.owner is not None and not owner_is_stale(info.owner, info.heartbeat_at):
                cursor.execute(self._sql('UPDATE toolweave_runs SET cancel_requested_at = '
                                         'COALESCE(cancel_requested_at, ?), cancel_reason = ?, updated_at = ? '
                                         'WHERE run_id = ?'), (now, reason, now, run_id))
                return Cancellation(run_id, 'requested', (), reason)
            steps = self._cancel_steps(cursor, info, reason, now)
            cursor.execute(self._sql("UPDATE toolweave_runs SET status = 'cancelled', owner = NULL, updated_at = ?, "
                                     'cancel_requested_at = COALESCE(cancel_requested_at, ?), cancel_reason = ? '
                                     'WHERE run_id = ?'), (now, now, reason, run_id))
            return Cancellation(run_id, 'cancelled', steps, reason)
        return self._do('cancel run', run_id, work, lock_run=True)

    def _cancel_steps(self, cursor: Any, info: RunInfo, reason: str | None, now: float) -> tuple[str, ...]:
        """Record every step of the run that has not ended as `cancelled`; the ids of those steps."""
        cursor.execute(self._sql('SELECT step_id, status FROM toolweave_transitions WHERE run_id = ? AND item IS NULL '
                                 "AND status NOT IN ('ready', 'decided') ORDER BY id"), (info.run_id,))
        last: dict[str, str] = dict(cursor.fetchall())
        error = 'Cancelled: the run was cancelled' + (f' ({reason})' if reason else '')
        rows: list[tuple[Any, ...]] = []
        for step in json.loads(info.plan)['steps']:
            status = last.get(step['id'])
            if status in _ENDED:
                continue
            detail = json.dumps({'started': True, 'run_cancelled': True}) if status in ('running', 'reviewing') else (
                json.dumps({'run_cancelled': True}))
            t = Transition(step['id'], 'cancelled', now, error, detail=detail)
            rows.append((info.run_id, t.step_id, None, t.status, t.at, t.error, None, None, None, None, 0, t.detail))
        if rows:
            self._insert(cursor, rows)
        return tuple(row[1] for row in rows)

    # --- pruning ------------------------------------------------------------------------------------------------

    def prune(self, before: float, wanted: frozenset[RunState], *, dry_run: bool = False) -> Pruned:
        """Delete the runs in `wanted` states last updated before `before`, with their transitions and the blobs
        nothing else uses, in bounded transactions (see `prune_runs`)."""
        stored: list[str] = sorted({'running' if s == 'crashed' else s for s in wanted})
        total = Pruned(dry_run=dry_run)
        after: tuple[float, str] | None = None
        while True:
            candidates = self._read('find runs to prune', None,
                                    partial(self._prune_candidates, stored=stored, before=before, after=after))
            if not candidates:
                return total
            after = (candidates[-1][1], candidates[-1][0])
            chosen = [(run_id, rows) for run_id, _, status, owner, heartbeat_at, rows in candidates
                      if shown_state(status, owner, heartbeat_at) in wanted]
            for batch in _batches(chosen):
                if dry_run:
                    total += self._read('count runs to prune', None, partial(self._count, batch=batch))
                else:
                    total += self._do('prune runs', None, partial(self._delete, batch=batch, stored=stored,
                                                                   before=before, wanted=wanted))

    def _prune_candidates(self, cursor: Any, stored: list[str], before: float,
                          after: tuple[float, str] | None) -> list[tuple[Any, ...]]:
        params: list[Any] = [*stored, before]
        keyset = ''
        if after is not None:
            keyset = ' AND (updated_at, run_id) > (?, ?)'
            params.extend(after)
        cursor.execute(self._sql(
            'SELECT run_id, updated_at, status, owner, heartbeat_at, (SELECT count(*) FROM toolweave_transitions t '
            f'WHERE t.run_id = r.run_id) FROM toolweave_runs r WHERE status IN ({", ".join("?" * len(stored))}) '
            f'AND updated_at < ?{keyset} ORDER BY updated_at, run_id LIMIT ?'), (*params, PRUNE_RUNS))
        return [tuple(row) for row in cursor.fetchall()]

    def _count(self, cursor: Any, batch: list[str]) -> Pruned:
        marks = ', '.join('?' * len(batch))
        cursor.execute(self._sql(f'SELECT count(*) FROM toolweave_transitions WHERE run_id IN ({marks})'), tuple(batch))
        transitions = int(cursor.fetchone()[0])
        digests = self._digests(cursor, batch)
        orphans = len(self._unused(cursor, digests, batch))
        return Pruned(len(batch), transitions, orphans, 1, dry_run=True)

    def _delete(self, cursor: Any, batch: list[str], stored: list[str], before: float,
                wanted: frozenset[RunState]) -> Pruned:
        marks = ', '.join('?' * len(batch))
        lock = ' FOR UPDATE' if self.dialect == 'postgresql' else ''
        # Checked again under the rows' locks: a run claimed, resumed or touched since it was chosen stays.
        cursor.execute(self._sql(f'SELECT run_id, status, owner, heartbeat_at, updated_at FROM toolweave_runs '
                                 f'WHERE run_id IN ({marks}){lock}'), tuple(batch))
        doomed = [run_id for run_id, status, owner, heartbeat_at, updated_at in cursor.fetchall()
                  if status in stored and updated_at < before and shown_state(status, owner, heartbeat_at) in wanted
                  and (owner is None or owner_is_stale(owner, heartbeat_at))]
        if not doomed:
            return Pruned(batches=1)
        marks = ', '.join('?' * len(doomed))
        digests = self._digests(cursor, doomed)
        cursor.execute(self._sql(f'DELETE FROM toolweave_transitions WHERE run_id IN ({marks})'), tuple(doomed))
        transitions = cursor.rowcount
        cursor.execute(self._sql(f'DELETE FROM toolweave_runs WHERE run_id IN ({marks})'), tuple(doomed))
        blobs = 0
        if digests:
            if self.dialect == 'postgresql':
                # Waits for the transactions that are adding blobs (an append holds ROW EXCLUSIVE on the table until
                # it commits its transitions) and holds new ones back until this commits: a blob an append is
                # about to use is never deleted under it.
                cursor.execute('LOCK TABLE toolweave_blobs IN SHARE ROW EXCLUSIVE MODE')
            unused = self._unused(cursor, digests, [])
            for start in range(0, len(unused), 500):
                chunk = unused[start:start + 500]
                marks = ', '.join('?' * len(chunk))
                cursor.execute(self._sql(f'DELETE FROM toolweave_blobs WHERE digest IN ({marks})'), tuple(chunk))
                blobs += cursor.rowcount
        return Pruned(len(doomed), transitions, blobs, 1)

    def _digests(self, cursor: Any, run_ids: list[str]) -> list[str]:
        marks = ', '.join('?' * len(run_ids))
        cursor.execute(self._sql(f'SELECT output_blob FROM toolweave_transitions WHERE run_id IN ({marks}) AND '
                                 f'output_blob IS NOT NULL UNION SELECT value_blob FROM toolweave_transitions WHERE '
                                 f'run_id IN ({marks}) AND value_blob IS NOT NULL'), (*run_ids, *run_ids))
        return sorted({row[0] for row in cursor.fetchall()})

    def _unused(self, cursor: Any, digests: list[str], leaving: list[str]) -> list[str]:
        """The digests no transition uses, but those of the runs `leaving`."""
        unused: list[str] = []
        outside = f' AND t.run_id NOT IN ({", ".join("?" * len(leaving))})' if leaving else ''
        for start in range(0, len(digests), 500):
            chunk = digests[start:start + 500]
            cursor.execute(self._sql(
                f'SELECT b.digest FROM toolweave_blobs b WHERE b.digest IN ({", ".join("?" * len(chunk))}) '
                f'AND NOT EXISTS (SELECT 1 FROM toolweave_transitions t WHERE t.output_blob = b.digest{outside}) '
                f'AND NOT EXISTS (SELECT 1 FROM toolweave_transitions t WHERE t.value_blob = b.digest{outside})'),
                (*chunk, *leaving, *leaving))
            unused.extend(row[0] for row in cursor.fetchall())
        return unused

    # --- retention ----------------------------------------------------------------------------------------------

    def claim_retention(self, every: float) -> bool:
        """Whether this process should apply the store's retention now: true for one process at most per `every`
        seconds (the time it last ran is kept in `toolweave_meta`)."""
        now = time.time()

        def work(cursor: Any) -> bool:
            cursor.execute(self._sql('INSERT INTO toolweave_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO '
                                     'NOTHING'), (_RETENTION_KEY, '0'))
            cursor.execute(self._sql('UPDATE toolweave_meta SET value = ? WHERE key = ? AND '
                                     'CAST(value AS DOUBLE PRECISION) < ?'), (repr(now), _RETENTION_KEY, now - every))
            return bool(cursor.rowcount == 1)
        return self._do('schedule the retention of', None, work)


def _batches(chosen: list[tuple[str, int]]) -> Iterable[list[str]]:
    """Run ids in groups of at most `PRUNE_RUNS` runs holding about `PRUNE_ROWS` transitions."""
    batch: list[str] = []
    rows = 0
    for run_id, count in chosen:
        if batch and rows + count > PRUNE_ROWS:
            yield batch
            batch, rows = [], 0
        batch.append(run_id)
        rows += count
    if batch:
        yield batch

