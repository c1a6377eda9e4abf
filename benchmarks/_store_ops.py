"""Operating a big store, for `bench_durable`: fill it with runs straight through SQL, then time `list_runs` pages
and filters and a `prune_runs` (its total time and its longest transaction).

The runs are what a store of a service looks like after a while: mostly finished one-step runs, a few waiting
for a decision, a few stopped or cancelled, under ten names, updated over 60 days. Each has the four transitions a
one-step run writes (ready, running, then succeeded, parked, cancelled...).
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import anyio

from toolweave.plan.durable import PlanStore, list_runs, open_store, prune_runs

__all__ = ('fill', 'operations')

DAY = 86400.0
PLAN = json.dumps({'steps': [{'id': 'a', 'tool': 'work', 'arguments': {'n': 1}, 'description': None}],
                   'output_steps': None, 'goal': None, 'dialect': 'id'})
STATES = [('finished', 90), ('suspended', 5), ('stopped', 3), ('cancelled', 2)]
LAST = {'finished': 'succeeded', 'suspended': 'parked', 'stopped': 'cancelled', 'cancelled': 'cancelled'}


def fill(url: str, runs: int, seed: int = 1) -> float:
    """Insert `runs` runs and their transitions into the (empty) store at `url`; seconds it took."""
    open_store(url).close()  # the tables and indexes
    rng = random.Random(seed)
    now = time.time()
    statuses = [status for status, weight in STATES for _ in range(weight)]
    headers: list[tuple[Any, ...]] = []
    transitions: list[tuple[Any, ...]] = []
    for n in range(runs):
        status = rng.choice(statuses)
        updated = now - rng.random() * 60 * DAY
        headers.append((f'run-{n:06d}', 'h', PLAN, '{}', status, updated - 5, updated, f'name-{n % 10}'))
        transitions += [(f'run-{n:06d}', 'a', 'ready', updated - 4, None), (f'run-{n:06d}', 'a', 'running',
                                                                               updated - 3, None),
                        (f'run-{n:06d}', 'a', LAST[status], updated - 2, 'why' if status != 'finished' else None),
                        (f'run-{n:06d}', 'b', 'ready', updated - 1, None)]
    started = time.perf_counter()
    header_sql = ('INSERT INTO toolweave_runs (run_id, plan_hash, plan, options, status, created_at, updated_at, name) '
                  'VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
    transition_sql = ('INSERT INTO toolweave_transitions (run_id, step_id, status, at, error, flags) '
                      'VALUES (?, ?, ?, ?, ?, 0)')
    if url.startswith('sqlite'):
        import sqlite3

        db = sqlite3.connect(url.removeprefix('sqlite:///'))
        with db:
            db.executemany(header_sql, headers)
            db.executemany(transition_sql, transitions)
        db.close()
    else:
        import psycopg

        with psycopg.connect(url) as pg, pg.cursor() as cursor:
            with cursor.copy('COPY toolweave_runs (run_id, plan_hash, plan, options, status, created_at, updated_at, '
                             'name) FROM STDIN') as copy:
                for row in headers:
                    copy.write_row(row)
            columns = 'run_id, step_id, status, at, error, flags'
            with cursor.copy(f'COPY toolweave_transitions ({columns}) FROM STDIN') as copy:
                for row in transitions:
                    copy.write_row((*row, 0))
            cursor.execute('ANALYZE')
    return time.perf_counter() - started


def _median_ms(work: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times = []
    result = None
    for _ in range(repeats):
        started = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1e3, 2), result


class _Batches:
    """Times each transaction of a prune (the store's `_do` calls named 'prune runs')."""

    def __init__(self, store: PlanStore) -> None:
        self.seconds: list[float] = []
        original = store._do  # type: ignore[attr-defined]

        def timed(what: str, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(what, *args, **kwargs)
            finally:
                if what == 'prune runs':
                    self.seconds.append(time.perf_counter() - started)
        store._do = timed  # type: ignore[attr-defined]


def operations(url: str, runs: int, repeats: int = 7) -> dict[str, Any]:
    """Fill a store at `url` with `runs` runs, then time its listing and a prune."""
    report: dict[str, Any] = {'runs': runs, 'transitions': runs * 4, 'fill_s': round(fill(url, runs), 2)}
    store = open_store(url)
    try:
        def page(**filters: Any) -> Any:
            return anyio.run(lambda: list_runs(store, **filters))

        listing: dict[str, Any] = {}
        listing['first page (50)'], first = _median_ms(page, repeats)
        cursor = first.cursor
        deep = []
        for _ in range(20):  # walk 20 pages in, then time the next ones
            cursor = page(after=cursor).cursor
        for _ in range(repeats):
            started = time.perf_counter()
            cursor = page(after=cursor).cursor
            deep.append(time.perf_counter() - started)
        listing['a page 20 pages in'] = round(statistics.median(deep) * 1e3, 2)
        listing['status=suspended'], _ = _median_ms(lambda: page(status='suspended'), repeats)
        listing['status=crashed'], _ = _median_ms(lambda: page(status='crashed'), repeats)
        listing['name=name-3'], _ = _median_ms(lambda: page(name='name-3'), repeats)
        listing['since=7d'], _ = _median_ms(lambda: page(since='7d'), repeats)
        listing['waiting'], waiting = _median_ms(lambda: page(waiting=True), repeats)
        assert len(waiting.runs) == 50
        listing['waiting, 20 pages in'], _ = _median_ms(lambda: page(waiting=True, after=cursor), repeats)
        report['list_ms'] = listing
        batches = _Batches(store)
        started = time.perf_counter()
        pruned = anyio.run(lambda: prune_runs(store, older_than='30d'))
        report['prune'] = {'runs': pruned.runs, 'transitions': pruned.transitions, 'batches': pruned.batches,
                           'total_s': round(time.perf_counter() - started, 2),
                           'longest_transaction_ms': round(max(batches.seconds, default=0) * 1e3, 1),
                           'median_transaction_ms': round(statistics.median(batches.seconds or [0]) * 1e3, 1)}
        report['list_ms_after_prune'] = _median_ms(page, repeats)[0]
    finally:
        store.close()
    return report
