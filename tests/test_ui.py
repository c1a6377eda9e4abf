"""`toolweave ui`'s server, through its HTTP API: the inbox, decisions (who, when, refused twice), edits checked
against the tool's schema, the runs list and its paging, a run's page data, and the security checks (host, access
tokens, CSRF). The browser side is in test_ui_browser.py."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from toolweave.cli._app import app as cli_app
from toolweave.exceptions import UserError
from toolweave.plan.durable import open_store
from toolweave.tools import Toolset
from toolweave.ui import check_bind, create_app, parse_tokens
from toolweave.ui._reads import CHANNEL, Reads
from ui_tools import MAIL_PLAN, SENT, TOOLS, XSS, XSS_SCRIPT, hostile, park

ORIGIN = 'http://127.0.0.1'


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f'sqlite:///{tmp_path}/runs.db'


def client(store: str, *, tools: bool = True, tokens: dict[str, str | None] | None = None) -> TestClient:
    app = create_app(store, tools=Toolset(TOOLS) if tools else None, tokens=tokens, hosts=('127.0.0.1', 'testserver'))
    return TestClient(app, base_url='http://127.0.0.1')


def session(c: TestClient) -> dict[str, str]:
    """Open the page (which sets the session cookie); the headers a page's changes carry."""
    assert c.get('/').status_code == 200
    csrf = c.get('/api/session').json()['csrf']
    return {'X-CSRF-Token': csrf, 'Origin': ORIGIN}


def decide(c: TestClient, headers: dict[str, str], run_id: str, step_id: str, **body: Any) -> Any:
    return c.post(f'/api/runs/{run_id}/steps/{step_id}/decision', json={'by': 'Ada', **body}, headers=headers)


def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, 'timed out'
        time.sleep(0.02)


def test_the_inbox_lists_each_parked_step_with_what_a_person_needs_to_decide(store_url: str) -> None:
    park(store_url, 'mail-1')
    park(store_url, 'review-1', review_mode='whole_plan')
    with client(store_url) as c:
        inbox = c.get('/api/inbox').json()
    assert inbox['total'] == 2
    step, plan = inbox['items']
    assert step['kind'] == 'step' and step['run_id'] == 'mail-1' and step['step_id'] == 'mail_ada'
    assert step['tool'] == 'send' and step['arguments'] == {'to': 'ada@example.com', 'subject': 'hi'}
    assert step['arguments_as'] == 'sent'  # resolved: what the tool would be called with
    assert (step['position'], step['of'], step['depends_on'], step['dependents']) == (2, 4, ['ada'], ['done'])
    assert step['parked_at'] > 0
    assert step['deadline'] == pytest.approx(step['parked_at'] + 7 * 86400, abs=5)  # the default decision deadline
    assert step['schema']['required'] == ['to']
    assert plan['kind'] == 'plan' and plan['run_id'] == 'review-1' and plan['gated'] == ['mail_ada']
    assert [s['id'] for s in plan['steps']] == ['ada', 'mail_ada', 'pause', 'done']
    assert plan['steps'][1]['arguments'] == {'to': '$ref:ada.email', 'subject': 'hi'}  # as written


def test_a_decision_records_who_and_when_and_is_refused_the_second_time(store_url: str) -> None:
    park(store_url, 'mail-1')
    with client(store_url, tools=False) as c:
        headers = session(c)
        before = time.time()
        answer = decide(c, headers, 'mail-1', 'mail_ada', action='reject', reason='not today')
        assert answer.status_code == 200, answer.text
        assert answer.json()['message'] == 'mail_ada rejected by Ada.'
        again = decide(c, headers, 'mail-1', 'mail_ada', action='approve')
        assert again.status_code == 409
        assert again.json()['error'].startswith("No longer waiting: Step 'mail_ada' of plan run 'mail-1' already has "
                                                'a decision')
        assert c.get('/api/inbox').json()['total'] == 0
        view = c.get('/api/runs/mail-1').json()
    decision = next(s for s in view['steps'] if s['id'] == 'mail_ada')['decision']
    assert decision['kind'] == 'exit_early' and decision['reason'] == 'not today'
    assert decision['by'] == 'Ada' and decision['via'] == 'browser' and decision['at'] >= before


def test_a_decision_without_a_name_is_refused(store_url: str) -> None:
    park(store_url, 'mail-1')
    with client(store_url) as c:
        answer = decide(c, session(c), 'mail-1', 'mail_ada', action='approve', by='  ')
        assert answer.status_code == 422 and 'Say who decides' in answer.json()['error']
        assert c.get('/api/inbox').json()['total'] == 1


def test_an_edit_is_checked_against_the_schema_then_the_run_goes_on_with_it(store_url: str) -> None:
    SENT.clear()
    park(store_url, 'mail-1')
    with client(store_url) as c:
        headers = session(c)
        checked = c.post('/api/validate', json={'tool': 'send', 'arguments': {'to': 3, 'copies': 'x', 'bcc': 1}},
                         headers=headers).json()
        assert checked['ok'] is False and checked['checked'] is True
        assert checked['problems'] == [  # the tool's own validation: what its call would say
            'to: Input should be a valid string, got 3',
            'copies: Input should be a valid integer, unable to parse string as an integer, got "x"',
            "bcc: Unexpected argument, got 1 ('send' takes: to, subject, copies)"]
        bad = decide(c, headers, 'mail-1', 'mail_ada', action='edit', arguments={'to': 3})
        assert bad.status_code == 422 and 'to: Input should be a valid string, got 3' in bad.json()['error']
        assert decide(c, headers, 'mail-1', 'mail_ada', action='edit', arguments='{"to": "x"}').status_code == 422
        assert c.get('/api/inbox').json()['total'] == 1  # nothing was recorded
        good = decide(c, headers, 'mail-1', 'mail_ada', action='edit', arguments={'to': 'bob@example.com', 'copies': 2})
        assert good.status_code == 200, good.text
        assert good.json()['message'] == 'mail_ada approved with new arguments by Ada. Resuming run mail-1.'
        wait_for(lambda: c.get('/api/runs/mail-1').json()['status'] == 'finished')
        view = c.get('/api/runs/mail-1').json()
    assert SENT == [{'to': 'bob@example.com', 'subject': 'hello', 'copies': 2}]
    steps = {s['id']: s for s in view['steps']}
    assert steps['mail_ada']['given'] == {'to': 'bob@example.com', 'copies': 2}
    assert steps['done']['output'] == 'AFTER SENT TO BOB@EXAMPLE.COM AND WAITED 0.4'
    assert view['resume']['state'] == 'done'


def test_a_whole_plan_review_is_decided_at_once(store_url: str) -> None:
    SENT.clear()
    park(store_url, 'review-1', review_mode='whole_plan')
    with client(store_url) as c:
        headers = session(c)
        answer = c.post('/api/runs/review-1/review', headers=headers, json={
            'by': 'Ada', 'decisions': {'mail_ada': {'action': 'edit', 'arguments': {'to': 'ada@example.org'}}}})
        assert answer.status_code == 200, answer.text
        assert answer.json()['steps']['mail_ada']['ok'] is True
        wait_for(lambda: c.get('/api/runs/review-1').json()['status'] == 'finished')
        twice = c.post('/api/runs/review-1/review', headers=headers,
                       json={'by': 'Ada', 'decisions': {'mail_ada': {'action': 'approve'}}})
        assert twice.status_code == 409 and 'No longer waiting' in twice.json()['steps']['mail_ada']['error']
    assert SENT == [{'to': 'ada@example.org', 'subject': 'hello', 'copies': 1}]


def test_bad_requests_get_clear_answers(store_url: str) -> None:
    park(store_url, 'mail-1')
    with client(store_url) as c:
        headers = session(c)
        assert decide(c, headers, 'mail-1', 'nope', action='approve').json() == {
            'ok': False, 'error': "Run 'mail-1' has no step 'nope'."}
        assert decide(c, headers, 'gone', 'mail_ada', action='approve').status_code == 404
        assert decide(c, headers, 'mail-1', 'mail_ada', action='delete').json()['error'] == (
            "Unknown action 'delete': use one of approve, edit, reject, resolve.")
        assert decide(c, headers, 'mail-1', 'mail_ada', action='reject', reason='x' * 3000).status_code == 422
        raw = c.post('/api/runs/mail-1/steps/mail_ada/decision', content=b'{not json', headers={
            **headers, 'Content-Type': 'application/json'})
        assert raw.status_code == 400 and 'not JSON' in raw.json()['error']
        assert c.get('/api/runs/unknown').status_code == 404
        assert c.get('/api/runs?after=garbage').status_code == 400
        assert c.get('/api/runs?since=yesterday').status_code == 400
        assert c.get('/api/inbox').json()['total'] == 1


def test_actions_the_library_does_not_offer_are_hidden_and_refused(store_url: str) -> None:
    import toolweave.plan.durable as durable

    park(store_url, 'mail-1')
    with client(store_url, tools=False) as c:
        headers = session(c)
        caps = c.get('/api/session').json()['capabilities']
        assert caps['resume'] is False and caps['decide'] is True
        for action in ('cancel', 'retry', 'resolve'):
            assert caps[action] is hasattr(durable, {'cancel': 'cancel_run', 'retry': 'retry_step',
                                                      'resolve': 'resolve_step'}[action])
        resumed = c.post('/api/runs/mail-1/resume', json={}, headers=headers)
        assert resumed.status_code == 501 and 'toolweave runs resume mail-1' in resumed.json()['error']
        if not caps['cancel']:
            assert c.post('/api/runs/mail-1/cancel', json={}, headers=headers).status_code == 501
        if not caps['retry']:
            assert c.post('/api/runs/mail-1/steps/ada/retry', json={}, headers=headers).status_code == 501
        if not caps['resolve']:
            assert decide(c, headers, 'mail-1', 'mail_ada', action='resolve', output='done').status_code == 501


# --- the runs list ---------------------------------------------------------------------------------------------

def seed_runs(path: Path, count: int) -> None:
    """`count` finished runs written straight into a store's header table (fast; a page reads nothing else)."""
    open_store(str(path)).close()
    plan = json.dumps({'steps': [{'id': 'a', 'tool': 'find', 'arguments': {'name': 'x'}}]})
    with sqlite3.connect(path) as db:
        db.executemany('INSERT INTO toolweave_runs (run_id, plan_hash, plan, options, status, created_at, updated_at, '
                       'name) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
                       [(f'run-{i:05d}', 'h', plan, '{}', 'stopped' if i % 10 == 0 else 'finished', 1_000_000.0 + i,
                         2_000_000.0 + (i // 3), 'nightly' if i % 50 == 0 else None) for i in range(count)])


def test_the_runs_list_pages_through_every_run_once_with_filters(tmp_path: Path) -> None:
    seed_runs(tmp_path / 'runs.db', 250)  # updated_at repeats three times: the cursor must break the ties
    with client(str(tmp_path / 'runs.db'), tools=False) as c:
        seen: list[str] = []
        after = ''
        while True:
            page = c.get('/api/runs', params={'limit': 40, 'after': after}).json()
            seen += [run['run_id'] for run in page['runs']]
            if page['after'] is None:
                break
            after = page['after']
        assert len(seen) == 250 and len(set(seen)) == 250
        assert seen[0] == 'run-00249' and page['counts'] == {'finished': 225, 'stopped': 25}
        stopped = c.get('/api/runs', params={'status': 'stopped', 'limit': 200}).json()['runs']
        assert len(stopped) == 25 and {r['status'] for r in stopped} == {'stopped'}
        named = c.get('/api/runs', params={'name': 'nightly'}).json()['runs']
        assert [r['run_id'] for r in named] == [f'run-{i:05d}' for i in (200, 150, 100, 50, 0)]
        assert named[0]['name'] == 'nightly' and named[0]['steps'] == 1 and named[0]['waiting'] == 0
        iso = {key: datetime.fromtimestamp(at, UTC).isoformat() for key, at in (('since', 2_000_010),
                                                                                 ('until', 2_000_012))}
        window = c.get('/api/runs', params=iso).json()['runs']
        assert sorted(r['run_id'] for r in window) == [f'run-{i:05d}' for i in range(30, 36)]
        assert c.get('/api/runs', params={'status': 'lost'}).status_code == 400
        assert c.get('/api/runs', params={'limit': 0}).status_code == 400


def test_the_runs_list_finds_the_runs_waiting_for_a_decision(store_url: str) -> None:
    park(store_url, 'mail-1')
    park(store_url, 'review-1', review_mode='whole_plan')
    with client(store_url) as c:
        waiting = c.get('/api/runs', params={'waiting': '1'}).json()['runs']
        assert sorted((r['run_id'], r['waiting']) for r in waiting) == [('mail-1', 1), ('review-1', 1)]
        decide(c, session(c), 'mail-1', 'mail_ada', action='reject')
        assert [r['run_id'] for r in c.get('/api/runs', params={'waiting': '1'}).json()['runs']] == ['review-1']


# --- a run's page ----------------------------------------------------------------------------------------------

def test_a_run_page_has_the_graph_the_journal_and_the_critical_path(store_url: str) -> None:
    park(store_url, 'mail-1')
    with client(store_url) as c:
        headers = session(c)
        decide(c, headers, 'mail-1', 'mail_ada', action='approve')
        wait_for(lambda: c.get('/api/runs/mail-1').json()['status'] == 'finished')
        view = c.get('/api/runs/mail-1').json()
    assert view['edges'] == [['ada', 'mail_ada'], ['mail_ada', 'done'], ['pause', 'done']]
    steps = {s['id']: s for s in view['steps']}
    assert {s['status'] for s in steps.values()} == {'succeeded'}
    assert view['critical_path'] == ['ada', 'mail_ada', 'done']  # mail_ada waited for a person: it ended last
    mail = steps['mail_ada']
    assert [t['status'] for t in mail['journal']] == ['ready', 'reviewing', 'parked', 'decided', 'ready', 'running',
                                                       'succeeded']
    assert mail['attempts'] == 1 and mail['output'] == 'sent to ada@example.com'
    assert mail['decision']['by'] == 'Ada'


def test_hostile_text_comes_back_as_data_exactly_as_stored(store_url: str) -> None:
    hostile(store_url, 'xss-run')
    with client(store_url) as c:
        view = c.get('/api/runs/xss-run').json()
        inbox = c.get('/api/inbox').json()
        page = c.get('/')
    steps = {s['id']: s for s in view['steps']}
    assert view['goal'] == XSS and steps['x-img']['output'] == XSS
    assert steps['x-script']['error'] is not None and XSS_SCRIPT in steps['x-script']['error']
    assert inbox['items'][0]['arguments'] == {'to': XSS, 'subject': XSS_SCRIPT}
    assert "script-src 'self'" in page.headers['content-security-policy']
    assert page.headers['x-frame-options'] == 'DENY'


# --- security --------------------------------------------------------------------------------------------------

def test_every_change_needs_the_session_csrf_token_and_the_same_origin(store_url: str) -> None:
    park(store_url, 'mail-1')
    with client(store_url) as c:
        headers = session(c)
        url = '/api/runs/mail-1/steps/mail_ada/decision'
        body = {'action': 'approve', 'by': 'Mallory'}
        assert c.post(url, json=body, headers={'Origin': ORIGIN}).status_code == 403  # no CSRF token
        assert c.post(url, json=body, headers={**headers, 'X-CSRF-Token': 'guess'}).status_code == 403
        assert c.post(url, json=body, headers={**headers, 'Origin': 'http://evil.example'}).status_code == 403
        no_origin = {'X-CSRF-Token': headers['X-CSRF-Token']}
        assert c.post(url, json=body, headers=no_origin).status_code == 403
        form = c.post(url, data={'action': 'approve'}, headers=headers)  # what a cross-site form could send
        assert form.status_code == 415
        c.cookies.clear()
        assert c.post(url, json=body, headers=headers).status_code == 403  # no session
        assert c.get('/api/inbox').json()['total'] == 1  # nothing was decided


def test_a_request_for_another_host_is_refused(store_url: str) -> None:
    with client(store_url) as c:
        answer = c.get('/api/inbox', headers={'Host': 'attacker.example'})
        assert answer.status_code == 421 and 'does not answer to the host' in answer.json()['error']


def test_with_tokens_nothing_is_shown_without_one_and_the_token_label_decides(store_url: str) -> None:
    park(store_url, 'mail-1')
    secret = 'a-long-enough-secret-1234'
    with client(store_url, tokens={secret: 'ada'}) as c:
        assert c.get('/api/inbox').status_code == 401
        assert c.get('/').status_code == 401
        assert c.get('/?token=wrong-wrong-wrong-wrong').status_code == 401
        opened = c.get(f'/?token={secret}', follow_redirects=False)
        assert opened.status_code == 303 and opened.headers['location'] == '/'
        assert 'httponly' in opened.headers['set-cookie'].lower()
        assert 'samesite=strict' in opened.headers['set-cookie'].lower()
        assert c.get('/api/inbox').json()['total'] == 1
        me = c.get('/api/session').json()
        assert me['user'] == 'ada'
        headers = {'X-CSRF-Token': me['csrf'], 'Origin': ORIGIN}
        answer = decide(c, headers, 'mail-1', 'mail_ada', action='reject', by='Mallory')
        assert answer.json()['message'].startswith('mail_ada rejected by ada.')  # the token's label, not the page's
    with client(store_url, tokens={secret: None}) as c:
        bearer = {'Authorization': f'Bearer {secret}'}
        assert c.get('/api/runs', headers=bearer).status_code == 200
        assert c.post('/api/validate', json={'tool': 'send', 'arguments': {}}, headers=bearer).status_code == 200


def test_a_non_loopback_bind_needs_a_token() -> None:
    check_bind('127.0.0.1', None)
    check_bind('::1', None)
    check_bind('localhost', None)
    check_bind('0.0.0.0', {'a-long-enough-secret-1234': None})
    with pytest.raises(UserError, match="Refusing to serve the UI on '0.0.0.0' without an access token"):
        check_bind('0.0.0.0', None)
    with pytest.raises(UserError, match='at least 16 characters'):
        parse_tokens(['short'])
    assert parse_tokens(['ada=a-long-enough-secret-1234', 'b-long-enough-secret-12345']) == {
        'a-long-enough-secret-1234': 'ada', 'b-long-enough-secret-12345': None}


def test_the_command_refuses_a_public_bind_without_a_token(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv('TOOLWEAVE_UI_TOKEN', raising=False)
    result = CliRunner().invoke(cli_app, ['ui', '--store', store_url, '--host', '0.0.0.0'])
    assert result.exit_code == 2
    assert 'Refusing to serve the UI on' in result.output and '--token' in result.output


# --- PostgreSQL ------------------------------------------------------------------------------------------------

def test_postgres_inbox_decisions_and_notifications(postgres_url: str) -> None:
    park(postgres_url, 'mail-1')
    store = open_store(postgres_url)
    reads = Reads.open(store)
    heard: list[str] = []
    stop = threading.Event()
    listener = threading.Thread(target=reads.listen, args=(heard.append, stop), daemon=True)
    listener.start()
    try:
        time.sleep(0.3)  # LISTEN is in place
        with client(postgres_url) as c:
            assert c.get('/api/inbox').json()['items'][0]['step_id'] == 'mail_ada'
            assert decide(c, session(c), 'mail-1', 'mail_ada', action='approve').status_code == 200
            wait_for(lambda: c.get('/api/runs/mail-1').json()['status'] == 'finished')
            assert c.get('/api/runs').json()['counts'] == {'finished': 1}
        wait_for(lambda: 'mail-1' in heard)
    finally:
        stop.set()
        listener.join(5)
        reads.close()
        store.close()
    assert CHANNEL == 'toolweave_changes'


def test_the_read_model_runs_the_same_queries_on_both_stores(postgres_url: str, tmp_path: Path) -> None:
    for url in (postgres_url, f'sqlite:///{tmp_path}/runs.db'):
        park(url, 'a-1', MAIL_PLAN)
        park(url, 'b-2', MAIL_PLAN)
        store = open_store(url)
        reads = Reads.open(store)
        try:
            entries, total = reads.inbox()
            assert total == 2 and [e.run_id for e in entries] == ['a-1', 'b-2']
            assert reads.counts() == {'suspended': 2}
            assert reads.plans(['b-2', 'nope']).keys() == {'b-2'}
            mark = reads.mark()
            assert reads.changed_since(mark)[0] == set()
        finally:
            reads.close()
            store.close()
