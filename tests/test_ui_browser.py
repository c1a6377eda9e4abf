"""`toolweave ui` in a real browser: Debian's headless Chromium, driven by Playwright for Python (never a browser
Playwright downloads). A run parks, a person edits and approves it in the inbox, and another tab watches the run
finish live; a rejection; a whole-plan review; hostile text in every field; the access token of a non-loopback
bind; two tabs deciding the same step; 10,000 runs. Screenshots go to tests/screenshots/ (git ignores it)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolweave.exceptions import UserError
from toolweave.plan.durable import open_store
from toolweave.tools import Toolset
from toolweave.ui import create_app, serve
from ui_tools import SENT, TOOLS, XSS, XSS_SCRIPT, hostile, park

playwright_sync = pytest.importorskip('playwright.sync_api', reason='pip install playwright (the driver only)')

CHROMIUM = os.environ.get('TOOLWEAVE_CHROMIUM') or shutil.which('chromium') or '/usr/bin/chromium'
FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync']
SHOTS = Path(__file__).parent / 'screenshots'
TOKEN = 'browser-test-token-0123456789'

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=(
    f'no Chromium at {CHROMIUM}: `apt-get install chromium` (Debian), or set TOOLWEAVE_CHROMIUM to a Chromium binary'))


class Served:
    """The UI under uvicorn in a thread, on a free port."""

    def __init__(self, store: str, context: Any, *, host: str = '127.0.0.1',
                 tokens: dict[str, str | None] | None = None) -> None:
        import uvicorn

        self.context = context
        app = create_app(store, tools=Toolset(TOOLS), tokens=tokens, hosts=('127.0.0.1', 'localhost'))
        self.server = uvicorn.Server(uvicorn.Config(app, host=host, port=0, log_level='warning', lifespan='on'))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, 'the UI server did not start'
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f'http://127.0.0.1:{port}'

    def __exit__(self, *exc: object) -> None:
        for page in self.context.pages if self.context is not None else ():
            page.close()  # their event streams end, so the server stops at once
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope='module')
def browser() -> Iterator[Any]:
    with playwright_sync.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    made = browser.new_context(viewport={'width': 1280, 'height': 900})
    made.set_default_timeout(10_000)
    yield made
    made.close()


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f'sqlite:///{tmp_path}/runs.db'


def in_thread(work: Any, *args: Any, **kwargs: Any) -> Any:
    """Run `work` in a thread of its own: Playwright's sync API keeps an event loop running in this one, and the
    runs that set the tests up start their own."""
    result: list[Any] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            result.append(work(*args, **kwargs))
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(60)
    if failure:
        raise failure[0]
    return result[0] if result else None


def open_page(context: Any, url: str, errors: list[str] | None = None) -> Any:
    page = context.new_page()
    if errors is not None:
        page.on('pageerror', lambda exc: errors.append(str(exc)))
        def on_dialog(dialog: Any) -> None:
            errors.append(f'dialog: {dialog.message}')
            dialog.dismiss()

        page.on('dialog', on_dialog)
    page.goto(url)
    page.wait_for_selector('main[data-rendered]')
    return page


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f'{name}.png'), full_page=True)


def run_status(page: Any) -> str:
    return str(page.locator('h1 .pill').get_attribute('data-status'))


def test_park_edit_approve_and_watch_the_run_finish_live(context: Any, store_url: str) -> None:
    SENT.clear()
    in_thread(park, store_url, 'mail-1')
    with Served(store_url, context) as url:
        watcher = open_page(context, f'{url}/#/runs/mail-1')
        assert run_status(watcher) == 'suspended'
        watcher.evaluate('window.__same_page = true')  # a reload would lose it: the page must update in place
        inbox = open_page(context, f'{url}/#/inbox')
        inbox.fill('#who', 'Ada')
        card = inbox.locator('.inbox-step', has=inbox.locator('.step-id', has_text='mail_ada'))
        assert json.loads(card.locator('pre.arguments').inner_text()) == {'to': 'ada@example.com', 'subject': 'hi'}
        card.locator('button.edit').click()
        editor = card.locator('textarea.editor')
        editor.fill('{"to": ')
        card.locator('.problems', has_text='Not JSON').wait_for()
        assert card.locator('button.save-edit').is_disabled()
        editor.fill('{"to": 3, "copies": "two"}')
        card.locator('.problems', has_text='to: Input should be a valid string, got 3').wait_for()
        assert 'copies: Input should be a valid integer' in card.locator('.problems').inner_text()
        assert card.locator('button.save-edit').is_disabled()
        editor.fill('{"to": "grace@example.com", "copies": 2}')
        card.locator('.problems', has_text='Valid arguments for send').wait_for()
        shot(inbox, 'inbox-edit')
        card.locator('button.save-edit').click()
        inbox.locator('#notice', has_text='mail_ada approved with new arguments by Ada').wait_for()
        watcher.locator('h1 .pill[data-status="finished"]').wait_for()
        assert watcher.evaluate('window.__same_page') is True
        shot(watcher, 'run-finished')
        assert SENT == [{'to': 'grace@example.com', 'subject': 'hello', 'copies': 2}]
        step = watcher.locator('details.step[data-step="mail_ada"]')
        step.locator('> summary').click()
        assert 'edit by Ada in the browser' in step.inner_text()
        assert watcher.locator('.graph .node.critical').count() == 3
        inbox.locator('.empty', has_text='Nothing waits for a decision.').wait_for()


def test_reject_with_a_reason(context: Any, store_url: str) -> None:
    in_thread(park, store_url, 'mail-2')
    with Served(store_url, context) as url:
        inbox = open_page(context, f'{url}/#/inbox')
        inbox.fill('#who', 'Ada')
        card = inbox.locator('.inbox-step')
        card.locator('.reject-reason').fill('not to Ada today')
        card.locator('button.reject').click()
        inbox.locator('#notice', has_text='mail_ada rejected by Ada').wait_for()
        page = open_page(context, f'{url}/#/runs/mail-2')
        page.locator('h1 .pill[data-status="finished"]').wait_for()
        mail = page.locator('details.step[data-step="mail_ada"]')
        assert mail.locator('.pill').first.get_attribute('data-status') == 'failed'
        mail.locator('> summary').click()
        assert 'Rejected by reviewer' in mail.locator('pre.error').inner_text()
        assert 'not to Ada today' in mail.locator('pre.error').inner_text()
        assert page.locator('details.step[data-step="done"] .pill').first.get_attribute('data-status') == 'skipped'
        assert page.locator('.graph .node.skipped').count() == 1


def test_a_whole_plan_review_of_an_agents_plan(context: Any, store_url: str) -> None:
    from toolweave import Agent
    from toolweave.testing import ScriptedModel
    from toolweave.ui import BrowserReviewHandler

    SENT.clear()
    plan = {'steps': [{'id': 'who', 'tool': 'find', 'arguments': {'name': 'Ada'}},
                      {'id': 'mail', 'tool': 'send', 'arguments': {'to': '$ref:who.email', 'subject': 'plans'}},
                      {'id': 'cc', 'tool': 'send', 'arguments': {'to': 'boss@example.com'}}]}
    model = ScriptedModel([{'tool': 'execute_tool_plan', 'arguments': plan}, 'Waiting for the review.'])
    agent = Agent(model, tools=TOOLS, tool_planning=True, plan_store=store_url, review_handler=BrowserReviewHandler(),
                  plan_options={'review_mode': 'whole_plan'})
    in_thread(agent.run_sync, 'Mail Ada about plans')
    with Served(store_url, context) as url:
        inbox = open_page(context, f'{url}/#/inbox')
        inbox.fill('#who', 'Ada')
        card = inbox.locator('.inbox-plan')
        assert card.locator('.plan-step').count() == 3 and card.locator('.plan-step.gated').count() == 2
        mail = card.locator('.plan-step[data-step="mail"]')
        assert '$ref:who.email' in mail.locator('pre.arguments').inner_text()
        mail.locator('input.choice-edit').check()
        mail.locator('textarea.editor').fill('{"to": "ada@example.org", "subject": "plans"}')
        mail.locator('.problems', has_text='Valid arguments for').wait_for()
        cc = card.locator('.plan-step[data-step="cc"]')
        cc.locator('input.choice-reject').check()
        cc.locator('.step-reason').fill('no copies')
        shot(inbox, 'inbox-plan-review')
        card.locator('button.decide-plan').click()
        inbox.locator('#notice:not([hidden])').wait_for()
        assert 'Plan review recorded for 2 steps' in inbox.locator('#notice').inner_text()
        inbox.locator('.empty', has_text='Nothing waits').wait_for()
        for _ in range(200):
            if SENT:
                break
            time.sleep(0.05)
    assert SENT == [{'to': 'ada@example.org', 'subject': 'plans', 'copies': 1}]


def test_hostile_text_is_shown_as_text_and_runs_nothing(context: Any, tmp_path: Path) -> None:
    path = tmp_path / 'runs.db'
    store_url = f'sqlite:///{path}'
    in_thread(hostile, store_url, 'xss-run')
    evil_id = '<img src=x onerror="window.__xss=3">'
    with sqlite3.connect(path) as db:  # a run id and goal no toolweave run accepts, written by someone else
        db.execute('INSERT INTO toolweave_runs (run_id, plan_hash, plan, options, status, created_at, updated_at) '
                   'VALUES (?, ?, ?, ?, ?, ?, ?)', (evil_id, 'h', json.dumps({'goal': XSS_SCRIPT, 'steps': [
                       {'id': XSS, 'tool': XSS_SCRIPT, 'arguments': {XSS: XSS}}]}), '{}', 'stopped', time.time(),
                       time.time()))
    errors: list[str] = []
    with Served(store_url, context) as url:
        pages = [open_page(context, f'{url}/#/inbox', errors), open_page(context, f'{url}/#/runs', errors),
                 open_page(context, f'{url}/#/runs/xss-run', errors)]
        pages[2].locator('details.step[data-step="x-script"] > summary').click()
        evil = open_page(context, f'{url}/#/runs/' + evil_id.replace('"', '%22'), errors)
        pages.append(evil)
        for page in pages:
            assert page.evaluate('window.__xss') is None
            assert page.locator('img').count() == 0 and page.locator('main script').count() == 0
        assert pages[0].locator('pre.arguments', has_text='<img src=x onerror=').count() == 1  # there, as text
        assert pages[1].locator('a.run-link', has_text=evil_id).count() == 1
        assert XSS_SCRIPT in pages[2].locator('details.step[data-step="x-script"] pre.error').inner_text()
        assert evil.locator('h1 .run-id').inner_text() == evil_id
        assert evil.locator('.graph .node').count() == 1
        shot(pages[2], 'run-hostile-text')
    assert errors == []


def test_a_non_loopback_bind_needs_the_token(context: Any, store_url: str) -> None:
    with pytest.raises(UserError, match='without an access token'):
        serve(store_url, host='0.0.0.0', port=0)
    in_thread(park, store_url, 'mail-1')
    with Served(store_url, context, host='0.0.0.0', tokens={TOKEN: 'ada'}) as url:
        page = context.new_page()
        refused = page.goto(f'{url}/')
        assert refused is not None and refused.status == 401 and 'needs its access token' in page.content()
        assert page.goto(f'{url}/api/inbox') is not None and 'needs its access token' in page.content()
        page.goto(f'{url}/?token={TOKEN}#/inbox')
        page.wait_for_selector('main[data-rendered]')
        assert 'token' not in page.url
        assert page.locator('.who .fixed').inner_text() == 'ada'
        page.locator('.inbox-step button.approve').click()
        page.locator('#notice', has_text='mail_ada approved by ada').wait_for()


def test_two_tabs_cannot_decide_the_same_step_twice(context: Any, store_url: str) -> None:
    in_thread(park, store_url, 'mail-1')
    with Served(store_url, context) as url:
        first, second = open_page(context, f'{url}/#/inbox'), open_page(context, f'{url}/#/inbox')
        for page in (first, second):
            page.fill('#who', 'Ada' if page is first else 'Grace')
        second.locator('.inbox-step .reject-reason').click()  # Grace is typing: her page stays as it is
        first.locator('.inbox-step button.approve').click()
        first.locator('#notice', has_text='approved by Ada').wait_for()
        second.locator('.inbox-step button.reject').click()
        second.locator('#notice.error', has_text='No longer waiting').wait_for()
        assert "Step 'mail_ada' of plan run 'mail-1'" in second.locator('#notice').inner_text()
        second.locator('.empty', has_text='Nothing waits').wait_for()


def test_ten_thousand_runs_page_by_page(context: Any, tmp_path: Path) -> None:
    path = tmp_path / 'runs.db'
    open_store(str(path)).close()
    plan = json.dumps({'steps': [{'id': 'a', 'tool': 'find', 'arguments': {'name': 'x'}}]})
    now = time.time()
    with sqlite3.connect(path) as db:
        db.executemany('INSERT INTO toolweave_runs (run_id, plan_hash, plan, options, status, created_at, updated_at, '
                       'name) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
                       [(f'run-{i:05d}', 'h', plan, '{}', ('finished', 'stopped', 'suspended')[i % 3],
                         now - 10_000 + i, now - 10_000 + i, 'nightly' if i % 1000 == 999 else None)
                        for i in range(10_000)])
    with Served(f'sqlite:///{path}', context) as url:
        page = open_page(context, f'{url}/#/runs')
        assert page.locator('tr.run-row').count() == 50
        assert page.locator('tr.run-row').first.get_attribute('data-run') == 'run-09999'
        assert '50 shown of 10000 runs' in page.locator('.pager').inner_text()
        page.locator('a.next-page').click()
        page.locator('tr.run-row[data-run="run-09949"]').wait_for()
        page.select_option('select.f-status', 'suspended')
        page.fill('input.f-name', 'nightly')
        page.locator('form.filters button[type=submit]').first.click()
        page.locator('tr.run-row[data-run="run-08999"]').wait_for()
        assert [page.locator('tr.run-row').nth(i).get_attribute('data-run')
                for i in range(page.locator('tr.run-row').count())] == ['run-08999', 'run-05999', 'run-02999']
        shot(page, 'runs-10000')
        page.fill('input.f-run', 'run-00042')
        page.locator('input.f-run').press('Enter')
        page.locator('h1 .run-id', has_text='run-00042').wait_for()
