"""`toolweave ui` benchmark: how long the server takes to answer the inbox and the runs list as a store grows, and
how soon a transition the journal records is on the page.

Server time. A store is filled with 100, 1,000 and 10,000 runs, each a copy of one real run of a four-step plan
(its header and its 13 journal rows, ids and times shifted: the rows a real run writes), one run in a hundred
left with a step parked for a decision. The app answers each request in this process (Starlette's test client:
the app's time, with no network; the client's own share is a few tens of microseconds). Per size and store,
`--requests` requests of each kind, after 5 not counted: the inbox; the first page of 50 runs; a page of 50 runs
11 pages in (keyset cursor); the first page of 50 runs of one status; one run's page. Reported: p50 and p95.

Transition to screen. Headless Chromium (the system's, driven by Playwright) shows a run whose step is parked
(one of `--trials` more runs, all parked, added to the largest store); this process records a decision for it (a
`decided` row in the journal: one transition) and notes the time once the write has committed (`decide` returned);
the page notes (a `MutationObserver`) when the step shows its new status. The delay between the two, per store:
SQLite is looked at every 0.1 s by the UI, PostgreSQL notifies it (the UI's trigger).

Run: `python -m benchmarks.bench_ui [--quick] [--requests N] [--trials N] [--no-postgres] [--output PATH]` (about
2 minutes; `--quick`, SQLite with 100 runs, about 10 s). Writes `benchmarks/results/ui.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from benchmarks._postgres import temporary_postgres, unavailable
from toolweave import ReviewDecision, tool
from toolweave.exceptions import ApprovalPending
from toolweave.plan import run_plan_sync
from toolweave.plan.durable import StoredRun, decide_sync, open_store

__all__ = ('main',)

RESULTS = Path(__file__).parent / 'results' / 'ui.json'
SIZES = (100, 1_000, 10_000)
GOAL_PAGE_MS = 100.0
GOAL_SCREEN_MS = 500.0
CHROMIUM = os.environ.get('TOOLWEAVE_CHROMIUM') or shutil.which('chromium') or '/usr/bin/chromium'
FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync']


@tool
def fetch(item: str) -> dict[str, str]:
    """Read an item."""
    return {'item': item, 'owner': 'ada'}


@tool(requires_approval=True)
def notify(to: str) -> str:
    """Tell someone."""
    return f'told {to}'


PLAN = {'goal': 'Tell the owner', 'steps': [
    {'id': 'a', 'tool': 'fetch', 'arguments': {'item': 'x'}},
    {'id': 'b', 'tool': 'fetch', 'arguments': {'item': 'y'}},
    {'id': 'c', 'tool': 'fetch', 'arguments': {'item': '$ref:a.owner'}},
    {'id': 'tell', 'tool': 'notify', 'arguments': {'to': '$ref:c.owner'}}]}


class _Park:
    async def review(self, request: Any) -> ReviewDecision:
        raise ApprovalPending('waiting for the benchmark')


def _templates(url: str) -> tuple[StoredRun, StoredRun]:
    """One finished run and one parked run of `PLAN`, as the store holds them."""
    run_plan_sync(PLAN, [fetch, notify], store=url, run_id='template-parked', review_handler=_Park())
    run_plan_sync(PLAN, [fetch, notify], store=url, run_id='template-done',
                  review_handler=_Always())
    store = open_store(url)
    try:
        return store.load('template-done'), store.load('template-parked')
    finally:
        store.close()


class _Always:
    async def review(self, request: Any) -> ReviewDecision:
        return ReviewDecision.approve()


def _fill(url: str, count: int, done: StoredRun, parked: StoredRun, prefix: str = 'run') -> None:
    """`count` runs copied from the templates (one in a hundred parked), ids and times shifted."""
    headers: list[tuple[Any, ...]] = []
    rows: list[tuple[Any, ...]] = []
    now = time.time() - count
    for i in range(count):
        template = parked if i % 100 == 0 else done
        run_id = f'{prefix}-{i:06d}'
        shift = now + i - template.info.created_at
        info = template.info
        headers.append((run_id, info.plan_hash, info.plan, info.options, info.status, info.created_at + shift,
                        info.updated_at + shift))
        rows.extend((run_id, t.step_id, t.item, t.status, t.at + shift, t.error, t.output, t.value, t.flags, t.detail)
                    for t in template.transitions)
    header_sql = ('INSERT INTO toolweave_runs (run_id, plan_hash, plan, options, status, created_at, updated_at) '
                  'VALUES (?, ?, ?, ?, ?, ?, ?)')
    row_sql = ('INSERT INTO toolweave_transitions (run_id, step_id, item, status, at, error, output, value, flags, '
               'detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)')
    if url.startswith('sqlite:///'):
        with sqlite3.connect(url.removeprefix('sqlite:///')) as lite:
            lite.executemany(header_sql, headers)
            lite.executemany(row_sql, rows)
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as db, db.transaction(), db.cursor() as cursor:
        cursor.executemany(header_sql.replace('?', '%s'), headers)
        with cursor.copy('COPY toolweave_transitions (run_id, step_id, item, status, at, error, output, value, flags, '
                         'detail) FROM STDIN') as copy:
            for row in rows:
                copy.write_row(row)
        cursor.execute('ANALYZE')


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {'p50_ms': round(statistics.median(ordered) * 1000, 2),
            'p95_ms': round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000, 2),
            'n': len(ordered)}


def _server_times(url: str, requests: int) -> dict[str, Any]:
    from starlette.testclient import TestClient

    from toolweave.ui import create_app

    with TestClient(create_app(url), base_url='http://127.0.0.1') as client:
        page = client.get('/api/runs', params={'limit': 50}).json()
        after = None
        for _ in range(10):
            after = page['after']
            page = client.get('/api/runs', params={'limit': 50, 'after': after}).json()
        inbox = client.get('/api/inbox').json()
        kinds: dict[str, tuple[str, dict[str, Any]]] = {
            'inbox': ('/api/inbox', {}),
            'runs_first_page': ('/api/runs', {'limit': 50}),
            'runs_page_11': ('/api/runs', {'limit': 50, 'after': after}),
            'runs_status_page': ('/api/runs', {'limit': 50, 'status': 'suspended'}),
            'run_page': ('/api/runs/run-000001', {}),
        }
        times: dict[str, Any] = {}
        for name, (path, params) in kinds.items():
            samples = []
            for index in range(requests + 5):
                started = time.perf_counter()
                answer = client.get(path, params=params)
                elapsed = time.perf_counter() - started
                assert answer.status_code == 200, answer.text
                if index >= 5:
                    samples.append(elapsed)
            times[name] = _percentiles(samples)
        times['waiting'] = inbox['total']
    return times


def _screen_delays(url: str, trials: int) -> dict[str, Any] | str:
    """The delay from a decision's commit to the page showing it, per trial (a browser page per store)."""
    if not Path(CHROMIUM).exists():
        return f'no Chromium at {CHROMIUM}'
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return 'playwright is not installed'
    import uvicorn

    from toolweave.ui import create_app

    server = uvicorn.Server(uvicorn.Config(create_app(url), host='127.0.0.1', port=0, log_level='warning'))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    address = f'http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}'
    delays: list[float] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
            page = browser.new_page()
            for trial in range(trials):
                run_id = f'screen-{trial:06d}'  # parked, as every `screen-` run
                page.goto(f'{address}/#/runs/{run_id}')
                page.wait_for_selector('details.step[data-step="tell"] .pill[data-status="parked"]')
                page.wait_for_timeout(150)  # the event stream is open
                page.evaluate("""() => { window.__seen = null; new MutationObserver(() => {
                    if (window.__seen === null && document.querySelector(
                        'details.step[data-step="tell"] .pill[data-status="decided"]')) window.__seen = Date.now();
                  }).observe(document.body, {subtree: true, childList: true, attributes: true}); }""")
                _decide_in_thread(url, run_id)
                committed = time.time()
                deadline = time.monotonic() + 10
                while (seen := page.evaluate('window.__seen')) is None:  # the page's CSP allows no eval of a string
                    assert time.monotonic() < deadline, f'the decision for {run_id} never showed'
                    page.wait_for_timeout(5)
                delays.append(seen / 1000 - committed)
            page.close()
            browser.close()
    finally:
        server.should_exit = True
        thread.join(10)
    return _percentiles(delays) | {'max_ms': round(max(delays) * 1000, 2)}


def _decide_in_thread(url: str, run_id: str) -> None:
    """`decide_sync` (it runs an event loop; Playwright's sync API holds one in this thread)."""
    thread = threading.Thread(target=decide_sync, args=(run_id, 'tell', ReviewDecision.approve()),
                              kwargs={'store': url})
    thread.start()
    thread.join(30)


@contextmanager
def _databases(folder: str, with_postgres: bool) -> Iterator[tuple[dict[str, Any], str | None]]:
    """A factory of empty databases per store kind, and why PostgreSQL is missing (if it is)."""
    with ExitStack() as stack:
        counter = iter(range(1_000_000))
        factories: dict[str, Any] = {'sqlite': lambda: f'sqlite:///{folder}/runs-{next(counter)}.db'}
        reason = unavailable() if with_postgres else 'not asked for (--no-postgres)'
        if reason is None:
            server = stack.enter_context(temporary_postgres())

            def database() -> str:
                import psycopg

                name = f'ui_{next(counter)}'
                with psycopg.connect(server.url, autocommit=True) as admin:
                    admin.execute(f'CREATE DATABASE {name}')
                return server.url.replace('/postgres?', f'/{name}?', 1)
            factories['postgres'] = database
        yield factories, reason


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the tables and write the JSON report; returns the report."""
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_ui', description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='SQLite, 100 runs, 10 requests, 3 trials')
    parser.add_argument('--requests', type=int, default=None, help='timed requests of each kind (default 100)')
    parser.add_argument('--trials', type=int, default=None, help='transitions watched on screen (default 20)')
    parser.add_argument('--no-postgres', action='store_true', help='SQLite only')
    parser.add_argument('--no-browser', action='store_true', help='server times only')
    parser.add_argument('--output', type=Path, default=RESULTS, help=f'JSON report path (default {RESULTS})')
    args = parser.parse_args(argv)
    requests = args.requests or (10 if args.quick else 100)
    trials = args.trials or (3 if args.quick else 20)
    sizes = (100,) if args.quick else SIZES
    started = time.perf_counter()
    report: dict[str, Any] = {'mode': 'quick' if args.quick else 'full', 'python': platform.python_version(),
                              'platform': platform.platform(), 'cpus': os.cpu_count(), 'requests': requests,
                              'server': {}, 'screen': {}}
    with tempfile.TemporaryDirectory() as folder, _databases(folder, not (args.no_postgres or args.quick)) as (
            factories, reason):
        report['postgres'] = reason or 'a temporary server on a Unix socket, fsync off'
        for name, database in factories.items():
            report['server'][name] = {}
            for size in sizes:
                url = database()
                done, parked = _templates(url)
                _fill(url, size - 2, done, parked)
                report['server'][name][str(size)] = _server_times(url, requests)
                if size == sizes[-1] and not args.no_browser:
                    _fill(url, trials, parked, parked, prefix='screen')
                    report['screen'][name] = _screen_delays(url, trials)
    report['elapsed_s'] = round(time.perf_counter() - started, 2)
    _print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + '\n', encoding='utf-8')
    print(f'wrote {args.output}')
    return report


def _print(report: dict[str, Any]) -> None:
    print(f'\nServer time per request, ms (p50 / p95), {report["requests"]} requests each; PostgreSQL: '
          f'{report["postgres"]}')
    kinds = ('inbox', 'runs_first_page', 'runs_page_11', 'runs_status_page', 'run_page')
    print(f'{"store":<9} {"runs":>7} {"waiting":>8} ' + ' '.join(f'{k:>18}' for k in kinds))
    worst = 0.0
    for store, sizes in report['server'].items():
        for size, times in sizes.items():
            cells = ' '.join(f'{times[k]["p50_ms"]:>8} / {times[k]["p95_ms"]:<7}' for k in kinds)
            print(f'{store:<9} {int(size):>7,} {times["waiting"]:>8} {cells}')
            worst = max(worst, *(times[k]['p95_ms'] for k in kinds if k.startswith('runs')))
    print(f'Page of 50 runs: worst p95 {worst} ms; aim <= {GOAL_PAGE_MS:g} ms.')
    print('\nFrom a transition committed to the page showing it, ms')
    for store, delays in report['screen'].items():
        if isinstance(delays, str):
            print(f'{store:<9} skipped: {delays}')
        else:
            print(f'{store:<9} p50 {delays["p50_ms"]}  p95 {delays["p95_ms"]}  max {delays["max_ms"]}  '
                  f'(n={delays["n"]}; aim <= {GOAL_SCREEN_MS:g} ms)')


if __name__ == '__main__':
    main(sys.argv[1:])
