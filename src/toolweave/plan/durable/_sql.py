"""What the SQLite and PostgreSQL stores share: the schema, the queries, and the rules of each operation.

Each subclass supplies a connection, a transaction (`BEGIN IMMEDIATE` in SQLite; in PostgreSQL a transaction in
which `_for_update` locks the run's header row) and its database's errors; the SQL is written once with `?`
placeholders.

**Fencing.** A run's holder is its `owner` token, fresh at every claim (and the run's `epoch` counts the claims).
Every write of a holder checks, in the same transaction and under the header row's lock, that the token is still
the run's owner: a process that lost the run (its lease lapsed while it was paused, and another process claimed
it) gets `RunLostError` and writes nothing. The journal's writes carry the epoch and a sequence number per
holding, so a write retried after its answer was lost (the connection dropped after the commit) adds nothing twice.

Large texts (a step output or value over `BLOB_THRESHOLD` characters) are kept once in `toolweave_blobs`, keyed
by their SHA-256, and the transition holds the key: the same large output recorded twice (a retried step, two
steps fetching the same page) is stored once.
"""

from __future__ import annotations

import hashlib
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, TypeVar

from toolweave.exceptions import (
    DecisionError,
    PlanStoreError,
    RunCancelledError,
    RunInUseError,
    RunLostError,
    UnknownRunError,
)
from toolweave.plan.durable._operations import RunOperations, upgrade
from toolweave.plan.durable._store import (
    LEASE_SECONDS,
    RunInfo,
    RunStatus,
    StoredRun,
    Transition,
    owner_is_stale,
)

__all__ = ('BLOB_THRESHOLD', 'SCHEMA_VERSION', 'TRANSITION_COLUMNS', 'UNIQUE_WRITES', 'WRITE_COLUMNS', 'SqlStore',
           'store_options', 'upgrade_statements')

T = TypeVar('T')

BLOB_THRESHOLD = 2048
"""Characters above which an output or value is stored once, by digest."""
SCHEMA_VERSION = 2
"""1: the first stores; 2: fencing (`epoch`, `lease`, and each transition's `epoch` and `seq`). A store of version 1
is upgraded when it is opened; the columns operations added since (run names, cancel requests) and their indexes
are added to any store that lacks them as it opens (`_operations.upgrade`)."""
_HEARTBEAT_EVERY = 1.0
"""Seconds between two heartbeat renewals carried by appends (an append is frequent; the renewal need not be)."""

_RUN_COLUMNS = ('run_id, plan_hash, plan, options, status, created_at, updated_at, owner, heartbeat_at, review, epoch, '
                'lease, name, cancel_requested_at, cancel_reason')
TRANSITION_COLUMNS = _TRANSITION_COLUMNS = ('step_id, item, status, at, error, output, output_blob, value, value_blob, '
                                             'flags, detail')
WRITE_COLUMNS = f'{TRANSITION_COLUMNS}, epoch, seq'
"""The columns a journal write fills."""


class SqlStore(RunOperations, ABC):
    """A `PlanStore` over a SQL database (see the module docstring). Thread-safe."""

    url: str
    inline: bool
    _for_update = ''
    """What locks a selected row for the rest of the transaction (PostgreSQL: ` FOR UPDATE`; SQLite's write lock
    already covers the whole transaction)."""

    def __init__(self, url: str, *, lease: float = LEASE_SECONDS) -> None:
        self.url = url
        self.lease = lease
        self._last_heartbeat: dict[str, float] = {}

    # --- what a database supplies -------------------------------------------------------------------------------

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[Any]:
        """A transaction; yields a cursor-like object with `execute(sql, params)`, `executemany(sql, rows)` and
        `rowcount`."""

    @abstractmethod
    def _sql(self, query: str) -> str:
        """`query` with this database's placeholders."""

    @abstractmethod
    def _reason(self, exc: Exception) -> str | None:
        """Why a database error happened, when `exc` is one (else `None`: not ours to translate)."""

    def _retrying(self, exc: Exception) -> bool:
        """Whether an operation that failed with `exc` may be tried again (the connection broke); none by default."""
        return False

    def _wait_to_retry(self, attempt: int, started: float) -> bool:
        """Wait before try number `attempt + 1` of an operation first tried at `started` (`time.monotonic()`);
        `False` when it is time to give up."""
        return False

    @abstractmethod
    def close(self) -> None: ...

    # --- the protocol -------------------------------------------------------------------------------------------

    def create(self, info: RunInfo) -> RunInfo | None:
        def run(cursor: Any, attempt: int) -> RunInfo | None:
            existing = self._header(cursor, info.run_id, lock=True)
            if existing is not None:
                return existing if attempt == 0 or existing.owner != info.owner else None
            cursor.execute(self._sql(f'INSERT INTO toolweave_runs ({_RUN_COLUMNS}) '
                                     'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)'),
                           (info.run_id, info.plan_hash, info.plan, info.options, info.status, info.created_at,
                            info.updated_at, info.owner, info.heartbeat_at, info.review, 1, self.lease, info.name,
                            info.cancel_requested_at, info.cancel_reason))
            self._last_heartbeat[info.run_id] = info.heartbeat_at or 0.0
            return None
        return self._do('create run', info.run_id, run)

    def _set_up(self, cursor: Any, schema: Sequence[str], *, has_meta: bool, real: str) -> None:
        """Create the tables of a new store (`schema`), or upgrade a store of version 1 to this one (every run
        kept); refuse any other version. DDL runs only then: it locks its table even when it changes nothing, and
        a store is opened while other processes write (or while a stopped one holds a write open). The columns and
        indexes the operations added since are added, where missing, to every store (`upgrade`). `has_meta`:
        whether the store has its `toolweave_meta` table; `real`: the database's floating-point type."""
        row = None
        if has_meta:
            cursor.execute(self._sql("SELECT value FROM toolweave_meta WHERE key = 'schema'"))
            row = cursor.fetchone()
        if row is not None and row[0] not in ('1', str(SCHEMA_VERSION)):
            raise PlanStoreError(f'Plan store {self.url} has schema version {row[0]}; this toolweave reads version '
                                 f'{SCHEMA_VERSION}. Use a new store, or the toolweave version that wrote it.')
        if row is None or row[0] == '1':
            for statement in (*(upgrade_statements(real) if row is not None else ()), *schema):
                cursor.execute(statement)
        upgrade(cursor, self.dialect)
        if row is None:
            cursor.execute(self._sql("INSERT INTO toolweave_meta (key, value) VALUES ('schema', ?)"),
                           (str(SCHEMA_VERSION),))
        elif row[0] == '1':
            cursor.execute(self._sql("UPDATE toolweave_meta SET value = ? WHERE key = 'schema'"),
                           (str(SCHEMA_VERSION),))

    def claim(self, run_id: str, owner: str) -> RunInfo:
        def run(cursor: Any, attempt: int) -> RunInfo:
            info = self._header(cursor, run_id, lock=True)
            if info is None:
                raise self._unknown(cursor, run_id)
            if info.status == 'cancelled' or info.cancel_requested_at is not None:
                raise _cancelled(self.url, info)
            if info.owner is not None and info.owner != owner and not owner_is_stale(info.owner, info.heartbeat_at,
                                                                                     lease=info.lease):
                age = '' if info.heartbeat_at is None else (
                    f', last heard from {time.time() - info.heartbeat_at:.0f} s ago')
                raise RunInUseError(f'Plan run {run_id!r} in {self.url} is being run by {info.owner}{age}. Wait for it '
                                    f'to end (or for its lease of {info.lease:g} s to lapse if that process is gone), '
                                    'then resume it.')
            if info.owner == owner:  # a retry whose first try took the run: it is ours already
                return info
            now = time.time()
            epoch = info.epoch + 1
            cursor.execute(self._sql('UPDATE toolweave_runs SET owner = ?, heartbeat_at = ?, updated_at = ?, '
                                     "status = 'running', epoch = ?, lease = ? WHERE run_id = ?"),
                           (owner, now, now, epoch, self.lease, run_id))
            self._last_heartbeat[run_id] = now
            return replace(info, status='running', updated_at=now, owner=owner, heartbeat_at=now, epoch=epoch,
                           lease=self.lease)
        return self._do('claim run', run_id, run)

    def append(self, run_id: str, owner: str, transitions: list[Transition], *, seq: int) -> str | None:
        blobs: dict[str, str] = {}
        split = [(_split(t.output, blobs), _split(t.value, blobs)) for t in transitions]
        now = time.time()
        renew = now - self._last_heartbeat.get(run_id, 0.0) >= _HEARTBEAT_EVERY

        def run(cursor: Any, attempt: int) -> str | None:
            epoch, cancel = self._held(cursor, run_id, owner)
            first = 0
            if attempt:  # the first try may have committed before its answer was lost: add only what it did not
                cursor.execute(self._sql('SELECT MAX(seq) FROM toolweave_transitions WHERE run_id = ? AND epoch = ?'),
                               (run_id, epoch))
                done = cursor.fetchone()[0]
                first = 0 if done is None else max(0, done - seq + 1)
            rows = [(run_id, t.step_id, t.item, t.status, t.at, t.error, output, output_blob, value, value_blob,
                     t.flags, t.detail, epoch, seq + i)
                    for i, (t, ((output, output_blob), (value, value_blob)))
                    in enumerate(zip(transitions, split, strict=True)) if i >= first]
            if blobs:
                cursor.executemany(self._sql('INSERT INTO toolweave_blobs (digest, data) VALUES (?, ?) '
                                             'ON CONFLICT (digest) DO NOTHING'), list(blobs.items()))
            if rows:
                self._insert(cursor, rows)
            if renew:
                cursor.execute(self._sql('UPDATE toolweave_runs SET heartbeat_at = ?, updated_at = ? WHERE run_id = ?'),
                               (now, now, run_id))
            return cancel
        cancel = self._do('record steps of run', run_id, run)
        if renew:
            self._last_heartbeat[run_id] = now
        return cancel

    def heartbeat(self, run_id: str, owner: str) -> str | None:
        """Renew `owner`'s hold on the run (while its steps run for a long time without a transition)."""
        now = time.time()

        def run(cursor: Any, attempt: int) -> str | None:
            _, cancel = self._held(cursor, run_id, owner)
            cursor.execute(self._sql('UPDATE toolweave_runs SET heartbeat_at = ? WHERE run_id = ?'), (now, run_id))
            return cancel
        cancel = self._do('renew the lease of run', run_id, run)
        self._last_heartbeat[run_id] = now
        return cancel

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

        def run(cursor: Any, attempt: int) -> None:
            try:
                self._held(cursor, run_id, owner)
            except RunLostError:
                if release or attempt:  # nothing of ours to give up (or the first try already did it)
                    return
                raise
            cursor.execute(self._sql(f'UPDATE toolweave_runs SET {", ".join(sets)} WHERE run_id = ?'),
                           (*params, run_id))
        self._do('update run', run_id, run)
        if release:
            self._last_heartbeat.pop(run_id, None)

    def decide(self, run_id: str, transition: Transition) -> None:
        """Append a person's `transition` for a step, atomically checking the step waits for it: a decision
        (`decided`) or a recorded outcome (`succeeded`, "resolve as done") for a parked step; a new attempt
        (`retry`) for a failed one."""
        wanted = 'failed' if transition.status == 'retry' else 'parked'
        blobs: dict[str, str] = {}
        (output, output_blob), (value, value_blob) = _split(transition.output, blobs), _split(transition.value, blobs)

        def run(cursor: Any, attempt: int) -> None:
            info = self._header(cursor, run_id, lock=True)
            if info is None:
                raise self._unknown(cursor, run_id)
            cursor.execute(self._sql('SELECT status, error FROM toolweave_transitions WHERE run_id = ? AND step_id = ? '
                                     "AND item IS NULL AND status <> 'ready' ORDER BY id DESC LIMIT 1"),
                           (run_id, transition.step_id))
            last = cursor.fetchone()
            if (last is None or last[0] != wanted) and wanted == 'parked':
                raise self._not_parked(cursor, info, transition.step_id, None if last is None else last[0])
            if last is None or last[0] != wanted:
                state = 'has not started' if last is None else f'is {last[0]}'
                if last is not None and last[0] in ('decided', 'retry'):
                    state = 'already has a decision, not yet picked up by a resume'
                what = 'a failed step can be retried' if wanted == 'failed' else 'only a parked step takes a decision'
                raise DecisionError(f'Step {transition.step_id!r} of plan run {run_id!r} {state}: {what}. '
                                    '`toolweave runs show RUN_ID` lists the steps and their states.')
            if blobs:
                cursor.executemany(self._sql('INSERT INTO toolweave_blobs (digest, data) VALUES (?, ?) '
                                             'ON CONFLICT (digest) DO NOTHING'), list(blobs.items()))
            cursor.execute(self._sql(f'INSERT INTO toolweave_transitions (run_id, {_TRANSITION_COLUMNS}) '
                                     'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)'),
                           (run_id, transition.step_id, None, transition.status, transition.at, transition.error,
                            output, output_blob, value, value_blob, transition.flags, transition.detail))
            cursor.execute(self._sql('UPDATE toolweave_runs SET updated_at = ? WHERE run_id = ?'),
                           (time.time(), run_id))
        self._do('record a decision in run', run_id, run, retry=False)  # a retry could not tell it was recorded

    def load(self, run_id: str) -> StoredRun:
        def run(cursor: Any, attempt: int) -> StoredRun:
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
        def run(cursor: Any, attempt: int) -> list[RunInfo]:
            cursor.execute(self._sql(f'SELECT {_RUN_COLUMNS} FROM toolweave_runs ORDER BY updated_at DESC LIMIT ?'),
                           (limit,))
            return [RunInfo(*row) for row in cursor.fetchall()]
        return self._do('list runs', None, run)

    # --- helpers ------------------------------------------------------------------------------------------------

    def _insert(self, cursor: Any, rows: list[tuple[Any, ...]]) -> None:
        """Insert journal rows (`run_id` first, then `WRITE_COLUMNS`)."""
        cursor.executemany(self._sql(f'INSERT INTO toolweave_transitions (run_id, {WRITE_COLUMNS}) '
                                     'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)'), rows)

    def _held(self, cursor: Any, run_id: str, owner: str) -> tuple[int, str | None]:
        """The fence: lock the run's header and check that `owner` holds it; its epoch and cancel request.

        Raises:
            RunLostError: another process holds it, or nobody does (it was taken and let go).
        """
        cursor.execute(self._sql(f'SELECT owner, epoch, cancel_requested_at, cancel_reason FROM toolweave_runs '
                                 f'WHERE run_id = ?{self._for_update}'), (run_id,))
        row = cursor.fetchone()
        if row is None or row[0] != owner:
            holder = 'no longer in the store' if row is None else (
                'let go by its holder' if row[0] is None else f'taken over by {row[0]}')
            raise RunLostError(f'Plan run {run_id!r} in {self.url} was {holder} while this process ({owner}) ran it: '
                               f'its lease lapsed (no heartbeat for over {self.lease:g} s: was the process paused, '
                               'suspended or cut off from the store?). This process stopped the run without calling '
                               'another tool; the store refused its writes, and the run goes on where it is held.')
        return row[1], None if row[2] is None else (row[3] or 'no reason given')

    def _do(self, what: str, run_id: str | None, work: Callable[[Any, int], T], *, retry: bool = True) -> T:
        """Run `work(cursor, attempt)` in one transaction; while the connection breaks, try again (see
        `_wait_to_retry`) when `retry`. A database error becomes a `PlanStoreError` saying what failed."""
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                with self._transaction() as cursor:
                    return work(cursor, attempt)
            except Exception as exc:
                reason = self._reason(exc)
                if reason is None:
                    raise
                if retry and self._retrying(exc) and self._wait_to_retry(attempt, started):
                    attempt += 1
                    continue
                where = f' {run_id!r}' if run_id is not None else ''
                spent = time.monotonic() - started
                tried = f' (tried {attempt + 1} times over {spent:.0f} s)' if attempt or spent >= 1 else ''
                raise PlanStoreError(f'Plan store {self.url} failed to {what}{where}: {reason}{tried}') from exc

    def _header(self, cursor: Any, run_id: str, *, lock: bool = False) -> RunInfo | None:
        cursor.execute(self._sql(f'SELECT {_RUN_COLUMNS} FROM toolweave_runs WHERE run_id = ?'
                                 f'{self._for_update if lock else ""}'), (run_id,))
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
        if status in ('decided', 'retry'):
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


def store_options(url: str, allowed: Sequence[str]) -> tuple[str, dict[str, str]]:
    """`url` without the query options this library reads (`?lease=5&retry=30`), and those options; any other
    option is left in the URL (a PostgreSQL URL carries libpq's). An option not in `allowed` is a `PlanStoreError`
    only for URLs that take no options of their own (the caller checks)."""
    base, sep, query = url.partition('?')
    if not sep:
        return url, {}
    ours: dict[str, str] = {}
    theirs = []
    for part in query.split('&'):
        key, _, value = part.partition('=')
        if key in allowed:
            ours[key] = value
        elif part:
            theirs.append(part)
    return base + ('?' + '&'.join(theirs) if theirs else ''), ours
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


def upgrade_statements(real: str) -> tuple[str, ...]:
    """What turns a store of schema version 1 into version 2 (`real`: the database's floating-point type)."""
    return ('ALTER TABLE toolweave_runs ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0',
            f'ALTER TABLE toolweave_runs ADD COLUMN lease {real} NOT NULL DEFAULT {LEASE_SECONDS}',
            'ALTER TABLE toolweave_transitions ADD COLUMN epoch INTEGER',
            'ALTER TABLE toolweave_transitions ADD COLUMN seq INTEGER',
            UNIQUE_WRITES)


UNIQUE_WRITES = ('CREATE UNIQUE INDEX IF NOT EXISTS toolweave_transitions_written ON toolweave_transitions '
                 '(run_id, epoch, seq) WHERE seq IS NOT NULL')
"""A journal write is in the store at most once (a safety net under the retry's own check)."""
