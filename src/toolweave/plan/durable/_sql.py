"""What the SQLite and PostgreSQL stores share: the schema, the queries, and the rules of each operation.

Each subclass supplies a connection, a transaction (`BEGIN IMMEDIATE` in SQLite; a transaction that locks the
run's header row in PostgreSQL) and its database's errors; the SQL is written once with `?` placeholders.

Large texts (a step output or value over `BLOB_THRESHOLD` characters) are kept once in `toolweave_blobs`, keyed
by their SHA-256, and the transition holds the key: the same large output recorded twice (a retried step, two
steps fetching the same page) is stored once.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from toolweave.exceptions import DecisionError, PlanStoreError, RunCancelledError, RunInUseError, UnknownRunError
from toolweave.plan.durable._operations import RunOperations
from toolweave.plan.durable._store import RunInfo, RunStatus, StoredRun, Transition, owner_is_stale

__all__ = ('BLOB_THRESHOLD', 'SCHEMA_VERSION', 'TRANSITION_COLUMNS', 'SqlStore')

T = TypeVar('T')

BLOB_THRESHOLD = 2048
"""Characters above which an output or value is stored once, by digest."""
SCHEMA_VERSION = 1
_HEARTBEAT_EVERY = 1.0
"""Seconds between two heartbeat renewals carried by appends (an append is frequent; the renewal need not be)."""

_RUN_COLUMNS = ('run_id, plan_hash, plan, options, status, created_at, updated_at, owner, heartbeat_at, review, name, '
                'cancel_requested_at, cancel_reason')
TRANSITION_COLUMNS = _TRANSITION_COLUMNS = ('step_id, item, status, at, error, output, output_blob, value, value_blob, '
                                             'flags, detail')


class SqlStore(RunOperations, ABC):
    """A `PlanStore` over a SQL database (see the module docstring). Thread-safe: one connection, one lock."""

    url: str
    inline: bool
    _create_schema: Sequence[str]

    def __init__(self, url: str) -> None:
        self.url = url
        self._lock = threading.Lock()
        self._last_heartbeat: dict[str, float] = {}

    # --- what a database supplies -------------------------------------------------------------------------------

    @abstractmethod
    def _transaction(self, run_id: str | None = None) -> AbstractContextManager[Any]:
        """A transaction (the run's header row locked against concurrent changes when `run_id` is given); yields a
        cursor-like object with `execute(sql, params)` and `executemany(sql, rows)`."""

    @abstractmethod
    def _sql(self, query: str) -> str:
        """`query` with this database's placeholders."""

    @abstractmethod
    def _reason(self, exc: Exception) -> str | None:
        """Why a database error happened, when `exc` is one (else `None`: not ours to translate)."""

    @abstractmethod
    def close(self) -> None: ...

    # --- the protocol -------------------------------------------------------------------------------------------

    def create(self, info: RunInfo) -> RunInfo | None:
        def run(cursor: Any) -> RunInfo | None:
            existing = self._header(cursor, info.run_id)
            if existing is not None:
                return existing
            cursor.execute(self._sql(f'INSERT INTO toolweave_runs ({_RUN_COLUMNS}) '
                                     'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)'),
                           (info.run_id, info.plan_hash, info.plan, info.options, info.status, info.created_at,
                            info.updated_at, info.owner, info.heartbeat_at, info.review, info.name,
                            info.cancel_requested_at, info.cancel_reason))
            return None
        return self._do('create run', info.run_id, run, lock_run=True)

    def claim(self, run_id: str, owner: str) -> RunInfo:
        def run(cursor: Any) -> RunInfo:
            info = self._header(cursor, run_id)
            if info is None:
                raise self._unknown(cursor, run_id)
            if info.status == 'cancelled' or info.cancel_requested_at is not None:
                raise _cancelled(self.url, info)
            if info.owner is not None and info.owner != owner and not owner_is_stale(info.owner, info.heartbeat_at):
                age = '' if info.heartbeat_at is None else (
                    f', last heard from {time.time() - info.heartbeat_at:.0f} s ago')
                raise RunInUseError(f'Plan run {run_id!r} in {self.url} is being run by {info.owner}{age}. Wait for it '
                                    'to end (or for its lease to lapse if that process is gone), then resume it.')
            now = time.time()
            cursor.execute(self._sql('UPDATE toolweave_runs SET owner = ?, heartbeat_at = ?, updated_at = ?, '
                                     "status = 'running' WHERE run_id = ?"), (owner, now, now, run_id))
            self._last_heartbeat[run_id] = now
            return RunInfo(info.run_id, info.plan_hash, info.plan, info.options, 'running', info.created_at, now,
                           owner, now, info.review)
        return self._do('claim run', run_id, run, lock_run=True)

    def append(self, run_id: str, owner: str, transitions: list[Transition]) -> None:
        rows = []
        blobs: dict[str, str] = {}
        for t in transitions:
            output, output_blob = _split(t.output, blobs)
            value, value_blob = _split(t.value, blobs)
            rows.append((run_id, t.step_id, t.item, t.status, t.at, t.error, output, output_blob, value, value_blob,
                         t.flags, t.detail))
        now = time.time()
        renew = now - self._last_heartbeat.get(run_id, 0.0) >= _HEARTBEAT_EVERY

        def run(cursor: Any) -> None:
            if blobs:
                cursor.executemany(self._sql('INSERT INTO toolweave_blobs (digest, data) VALUES (?, ?) '
                                             'ON CONFLICT (digest) DO NOTHING'), list(blobs.items()))
            self._insert(cursor, rows)
            if renew:
                cursor.execute(self._sql('UPDATE toolweave_runs SET heartbeat_at = ?, updated_at = ? '
                                         'WHERE run_id = ? AND owner = ?'), (now, now, run_id, owner))
        self._do('record steps of run', run_id, run)
        if renew:
            self._last_heartbeat[run_id] = now

    def update(self, run_id: str, owner: str, *, status: RunStatus | None = None, plan: str | None = None,
               review: str | None = None, release: bool = False) -> None:
        now = time.time()
        sets = ['updated_at = ?', 'heartbeat_at = ?']
        params: list[Any] = [now, now]
        for column, value in (('status', status), ('plan', plan), ('review', review)):
            if value is not None:
                sets.append(f'{column} = ?')
                params.append(value)
        if release:
            sets.append('owner = NULL')
            self._last_heartbeat.pop(run_id, None)

        def run(cursor: Any) -> None:
            cursor.execute(self._sql(f'UPDATE toolweave_runs SET {", ".join(sets)} WHERE run_id = ? AND owner = ?'),
                           (*params, run_id, owner))
        self._do('update run', run_id, run)

    def decide(self, run_id: str, transition: Transition) -> None:
        def run(cursor: Any) -> None:
            info = self._header(cursor, run_id)
            if info is None:
                raise self._unknown(cursor, run_id)
            cursor.execute(self._sql('SELECT status, error FROM toolweave_transitions WHERE run_id = ? AND step_id = ? '
                                     "AND item IS NULL AND status <> 'ready' ORDER BY id DESC LIMIT 1"),
                           (run_id, transition.step_id))
            last = cursor.fetchone()
            if last is None or last[0] != 'parked':
                raise self._not_parked(cursor, info, transition.step_id, None if last is None else last[0])
            cursor.execute(self._sql(f'INSERT INTO toolweave_transitions (run_id, {_TRANSITION_COLUMNS}) '
                                     'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)'),
                           (run_id, transition.step_id, None, 'decided', transition.at, transition.error, None, None,
                            None, None, 0, transition.detail))
            cursor.execute(self._sql('UPDATE toolweave_runs SET updated_at = ? WHERE run_id = ?'),
                           (time.time(), run_id))
        self._do('record a decision in run', run_id, run, lock_run=True)

    def load(self, run_id: str) -> StoredRun:
        def run(cursor: Any) -> StoredRun:
            info = self._header(cursor, run_id)
            if info is None:
                raise self._unknown(cursor, run_id)
            cursor.execute(self._sql(f'SELECT {_TRANSITION_COLUMNS} FROM toolweave_transitions WHERE run_id = ? '
                                     'ORDER BY id'), (run_id,))
            rows = cursor.fetchall()
            digests = {d for row in rows for d in (row[6], row[8]) if d is not None}
            blobs = self._blobs(cursor, digests) if digests else {}
            return StoredRun(info, tuple(
                Transition(row[0], row[2], row[3], row[4], blobs[row[6]] if row[6] is not None else row[5],
                           blobs[row[8]] if row[8] is not None else row[7], row[9], row[10], row[1])
                for row in rows))
        return self._do('load run', run_id, run)

    def runs(self, limit: int = 100) -> list[RunInfo]:
        def run(cursor: Any) -> list[RunInfo]:
            cursor.execute(self._sql(f'SELECT {_RUN_COLUMNS} FROM toolweave_runs ORDER BY updated_at DESC LIMIT ?'),
                           (limit,))
            return [RunInfo(*row) for row in cursor.fetchall()]
        return self._do('list runs', None, run)

    def heartbeat(self, run_id: str, owner: str) -> None:
        """Renew `owner`'s hold on the run (while its steps run for a long time without a transition)."""
        now = time.time()

        def run(cursor: Any) -> None:
            cursor.execute(self._sql('UPDATE toolweave_runs SET heartbeat_at = ? WHERE run_id = ? AND owner = ?'),
                           (now, run_id, owner))
        self._do('renew the lease of run', run_id, run)
        self._last_heartbeat[run_id] = now

    # --- helpers ------------------------------------------------------------------------------------------------

    def _insert(self, cursor: Any, rows: list[tuple[Any, ...]]) -> None:
        """Insert transition rows (`run_id` first, then `_TRANSITION_COLUMNS`)."""
        cursor.executemany(self._sql(f'INSERT INTO toolweave_transitions (run_id, {_TRANSITION_COLUMNS}) '
                                     'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)'), rows)

    def _do(self, what: str, run_id: str | None, work: Callable[[Any], T], *, lock_run: bool = False) -> T:
        """Run `work(cursor)` in one transaction; a database error becomes a `PlanStoreError` saying what failed."""
        with self._lock:
            try:
                with self._transaction(run_id if lock_run else None) as cursor:
                    return work(cursor)
            except Exception as exc:
                reason = self._reason(exc)
                if reason is None:
                    raise
                where = f' {run_id!r}' if run_id is not None else ''
                raise PlanStoreError(f'Plan store {self.url} failed to {what}{where}: {reason}') from exc

    def _header(self, cursor: Any, run_id: str) -> RunInfo | None:
        cursor.execute(self._sql(f'SELECT {_RUN_COLUMNS} FROM toolweave_runs WHERE run_id = ?'), (run_id,))
        row = cursor.fetchone()
        return None if row is None else RunInfo(*row)

    def _not_parked(self, cursor: Any, info: RunInfo, step_id: str, status: str | None) -> DecisionError:
        """Why a decision for `step_id` is refused (its last status is `status`), naming the steps that do wait."""
        parked = self._waiting_steps(cursor, info.run_id)
        waiting = (f'Its steps waiting for a decision: {", ".join(parked)}.' if parked else
                   'None of its steps waits for a decision.')
        if step_id not in {step['id'] for step in json.loads(info.plan)['steps']}:
            return DecisionError(f'Plan run {info.run_id!r} has no step {step_id!r}: it is not in the plan. {waiting}')
        state = 'has not started' if status is None else f'is {status}'
        if status == 'decided':
            state = 'already has a decision, not yet picked up by a resume'
        return DecisionError(f'Step {step_id!r} of plan run {info.run_id!r} {state}: only a parked step takes a '
                             f'decision. {waiting}')

    def _waiting_steps(self, cursor: Any, run_id: str) -> list[str]:
        cursor.execute(self._sql('SELECT step_id, status FROM toolweave_transitions WHERE run_id = ? AND item IS NULL '
                                 "AND status <> 'ready' ORDER BY id"), (run_id,))
        last = dict(cursor.fetchall())
        return [step_id for step_id, status in last.items() if status == 'parked']

    def _unknown(self, cursor: Any, run_id: str) -> UnknownRunError:
        cursor.execute(self._sql('SELECT run_id FROM toolweave_runs ORDER BY updated_at DESC LIMIT 5'))
        recent = [row[0] for row in cursor.fetchall()]
        listed = f' Recent runs: {", ".join(recent)}.' if recent else ' The store has no runs yet.'
        return UnknownRunError(f'No plan run {run_id!r} in {self.url}.{listed} `toolweave runs list` shows them all.')

    def _blobs(self, cursor: Any, digests: set[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        ordered = sorted(digests)
        for start in range(0, len(ordered), 500):
            chunk = ordered[start:start + 500]
            cursor.execute(self._sql(f'SELECT digest, data FROM toolweave_blobs WHERE digest IN '
                                     f'({", ".join("?" * len(chunk))})'), tuple(chunk))
            found.update(cursor.fetchall())
        return found


def _cancelled(url: str, info: RunInfo) -> RunCancelledError:
    why = f' ({info.cancel_reason})' if info.cancel_reason else ''
    if info.status == 'cancelled':
        return RunCancelledError(f'Plan run {info.run_id!r} in {url} was cancelled{why}: a cancelled run never runs '
                                 'again. Start the plan under a new run id to run it again.')
    return RunCancelledError(f'Plan run {info.run_id!r} in {url} is being cancelled{why}: it does not run again. '
                             f'`toolweave runs cancel {info.run_id}` (or `cancel_run`) completes the cancel.')


def _split(text: str | None, blobs: dict[str, str]) -> tuple[str | None, str | None]:
    """`(text, None)` for short text; `(None, digest)` for long text, added to `blobs`."""
    if text is None or len(text) <= BLOB_THRESHOLD:
        return text, None
    digest = hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()
    blobs[digest] = text
    return None, digest
