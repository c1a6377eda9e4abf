"""Tools and stored runs for the UI's tests: a lookup, a gated send whose schema an edit is checked against, a
slow step to watch live, a `for_each` step, and runs with hostile text in every field a page shows."""

from __future__ import annotations

import time
from typing import Any

from toolweave import tool
from toolweave.plan import run_plan_sync
from toolweave.plan.durable import PlanStore
from toolweave.ui import BrowserReviewHandler

XSS = '<img src=x onerror="window.__xss=1">'
"""A payload that runs script if it is ever inserted as markup."""
XSS_SCRIPT = '</pre><script>window.__xss=2</script>'
SENT: list[dict[str, Any]] = []
"""What `send` was called with, in this process."""


@tool
def find(name: str) -> dict[str, str]:
    """Look a person up."""
    return {'email': f'{name.lower()}@example.com'}


@tool(requires_approval=True)
def send(to: str, subject: str = 'hello', copies: int = 1) -> str:
    """Send an email."""
    SENT.append({'to': to, 'subject': subject, 'copies': copies})
    return f'sent to {to}'


@tool
def wait(seconds: float) -> str:
    """Wait, then say so."""
    time.sleep(seconds)
    return f'waited {seconds}'


@tool
def shout(text: str) -> str:
    """Repeat text, loud (its output is whatever it was given)."""
    return text.upper() if text.isascii() and '<' not in text else text


@tool
def boom(text: str) -> str:
    """Fail with the text as the error."""
    raise ValueError(text)


TOOLS = [find, send, wait, shout, boom]

MAIL_PLAN = {'goal': 'Mail Ada', 'steps': [
    {'id': 'ada', 'tool': 'find', 'arguments': {'name': 'Ada'}},
    {'id': 'mail_ada', 'tool': 'send', 'arguments': {'to': '$ref:ada.email', 'subject': 'hi'}},
    {'id': 'pause', 'tool': 'wait', 'arguments': {'seconds': 0.4}},
    {'id': 'done', 'tool': 'shout', 'arguments': {'text': 'after {{$ref:mail_ada}} and {{$ref:pause}}'}}]}


def park(store: PlanStore | str, run_id: str, plan: dict[str, Any] | None = None, *,
         review_mode: str = 'per_step') -> None:
    """Run `plan` until its gated steps park for the browser."""
    run = run_plan_sync(plan or MAIL_PLAN, TOOLS, store=store, run_id=run_id,
                        review_handler=BrowserReviewHandler(), review_mode=review_mode)  # type: ignore[arg-type]
    assert run.suspended, run.summary


def hostile(store: PlanStore | str, run_id: str = 'xss-<b>run</b>') -> None:
    """A run whose step ids, arguments, outputs and errors carry HTML and script; `run_id` may carry some too
    (run ids allow only letters, digits and `_-.:`, so the default is refused: see `hostile_run_id`)."""
    plan = {'goal': XSS, 'steps': [
        {'id': 'x-img', 'tool': 'shout', 'arguments': {'text': XSS}},
        {'id': 'x-script', 'tool': 'boom', 'arguments': {'text': XSS_SCRIPT}},
        {'id': 'x-gate', 'tool': 'send', 'arguments': {'to': XSS, 'subject': XSS_SCRIPT}},
        {'id': 'x-after', 'tool': 'shout', 'arguments': {'text': '$ref:x-img'}, 'description': XSS}]}
    run_plan_sync(plan, TOOLS, store=store, run_id=run_id, review_handler=BrowserReviewHandler())
