"""The UI's web application (Starlette): one page, its static assets, a JSON API and a stream of changes.

| Route | What |
| --- | --- |
| `GET /` | the page (everything else is drawn in the browser from the API) |
| `GET /static/...` | the page's script and style, shipped in the package |
| `GET /api/session` | this browser's session: its CSRF token, who it decides as, what this UI can do |
| `GET /api/inbox` | every decision waiting, across runs |
| `GET /api/runs?status=&name=&since=&until=&waiting=&after=&limit=` | a page of runs (`list_runs`) |
| `GET /api/runs/{run_id}` | one run: plan graph, steps, journal, critical path |
| `GET /api/events` | server-sent events: `change` with the ids of the runs that changed |
| `POST /api/validate` | check arguments against a tool's input schema |
| `POST /api/runs/{run_id}/steps/{step_id}/decision` | decide a parked step |
| `POST /api/runs/{run_id}/review` | decide a whole-plan review (every gated step at once) |
| `POST /api/runs/{run_id}/resume`, `/cancel`, `/steps/{step_id}/retry` | the run's actions |
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from importlib.resources import files
from pathlib import Path
from typing import Any, get_args

import anyio
import anyio.to_thread
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from toolweave.exceptions import DecisionError, PlanStoreError, RunInUseError, UnknownRunError, UserError
from toolweave.plan.durable import ListedRun, PlanStore, RunState, StoreLike, list_runs, open_store
from toolweave.tools import Toolset, ToolsetItem
from toolweave.ui._actions import ActionError, Actions, who
from toolweave.ui._feed import ChangeFeed
from toolweave.ui._reads import Reads
from toolweave.ui._security import COOKIE, SESSION_SECONDS, Guard
from toolweave.ui._views import inbox_view, run_view

__all__ = ('create_app',)

logger = logging.getLogger('toolweave.ui')

STATIC = Path(str(files('toolweave.ui') / 'static'))
_HEADERS = {
    'Content-Security-Policy': ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
                                "frame-ancestors 'none'"),
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'no-referrer',
    'Cache-Control': 'no-store',
}
MAX_BODY = 2_000_000
_STATES: dict[str, RunState] = {state: state for state in get_args(RunState)}


def create_app(store: StoreLike, *, tools: Toolset | Iterable[ToolsetItem] | None = None,
               tokens: Mapping[str, str | None] | None = None,
               hosts: Iterable[str] = ('127.0.0.1', 'localhost', '::1'), interval: float = 0.1) -> Starlette:
    """The UI as an ASGI application, for any ASGI server (`toolweave.ui.serve` runs it with uvicorn).

    Args:
        store: the plan store (or its URL) whose runs it shows.
        tools: the tools the runs' plans call: with them the UI resumes runs and checks edits against each tool's
            input schema.
        tokens: access tokens (secret -> label or `None`); empty: none needed (serve on the loopback only).
        hosts: the host names it answers to (the `Host` header, without its port).
        interval: seconds between two looks at a SQLite store for changes.
    """
    toolset = None if tools is None else tools if isinstance(tools, Toolset) else Toolset(tools)
    state = _State(store, toolset, Guard(dict(tokens or {}), frozenset(hosts)), interval)
    routes = [
        Route('/', state.page),
        Route('/api/session', state.session),
        Route('/api/inbox', state.inbox),
        Route('/api/runs', state.runs),
        Route('/api/runs/{run_id:str}', state.run),
        Route('/api/events', state.events),
        Route('/api/validate', state.validate, methods=['POST']),
        Route('/api/runs/{run_id:str}/steps/{step_id:str}/decision', state.decision, methods=['POST']),
        Route('/api/runs/{run_id:str}/review', state.review, methods=['POST']),
        Route('/api/runs/{run_id:str}/resume', state.resume, methods=['POST']),
        Route('/api/runs/{run_id:str}/cancel', state.cancel, methods=['POST']),
        Route('/api/runs/{run_id:str}/steps/{step_id:str}/retry', state.retry, methods=['POST']),
        Mount('/static', app=StaticFiles(directory=STATIC), name='static'),
    ]
    return Starlette(routes=routes, lifespan=state.lifespan, exception_handlers={HTTPException: _http_error})


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return JSONResponse({'error': exc.detail}, status_code=exc.status_code, headers=_HEADERS)


def _json(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status, headers=_HEADERS)


class _State:
    """The application's state and endpoints (one instance per app)."""

    def __init__(self, store: StoreLike, tools: Toolset | None, guard: Guard, interval: float) -> None:
        self._store_like = store
        self._tools = tools
        self.guard = guard
        self.interval = interval
        self._store: PlanStore | None = None
        self._reads: Reads | None = None
        self._feed: ChangeFeed | None = None
        self._actions: Actions | None = None
        self._closing = anyio.Event()

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        owned = not isinstance(self._store_like, PlanStore)
        store = await anyio.to_thread.run_sync(open_store, self._store_like)
        try:
            reads = await anyio.to_thread.run_sync(Reads.open, store)
        except BaseException:
            if owned:
                store.close()
            raise
        self._store, self._reads = store, reads
        self._feed = ChangeFeed(reads, interval=self.interval)
        try:
            async with anyio.create_task_group() as group:
                self._actions = Actions(store, self._tools, group=group)
                await self._feed.run(group)
                try:
                    yield
                finally:
                    self._closing.set()
                    self._feed.close()
                    group.cancel_scope.cancel()
        finally:
            reads.close()
            if owned:
                store.close()

    # --- helpers ----------------------------------------------------------------------------------------------

    @property
    def reads(self) -> Reads:
        assert self._reads is not None, 'the app is not started (run it under an ASGI server with its lifespan)'
        return self._reads

    @property
    def actions(self) -> Actions:
        assert self._actions is not None, 'the app is not started (run it under an ASGI server with its lifespan)'
        return self._actions

    async def _body(self, request: Request) -> dict[str, Any]:
        raw = await request.body()
        if len(raw) > MAX_BODY:
            raise HTTPException(413, f'The request is over {MAX_BODY:,} bytes.')
        try:
            body = json.loads(raw or b'{}')
        except ValueError as exc:
            raise HTTPException(400, f'The request is not JSON: {exc}.') from None
        if not isinstance(body, dict):
            raise HTTPException(400, 'The request is a JSON object.')
        return body

    async def _act(self, work: Callable[[], Awaitable[str]]) -> JSONResponse:
        """Run an action; its refusals become answers the page shows."""
        try:
            return _json({'ok': True, 'message': await work()})
        except ActionError as exc:
            return _json({'ok': False, 'error': str(exc)}, exc.status)
        except DecisionError as exc:
            return _json({'ok': False, 'error': f'No longer waiting: {exc} (Someone, maybe in another tab, decided '
                                                f'it already; the page now shows where it is.)'}, 409)
        except UnknownRunError as exc:
            return _json({'ok': False, 'error': str(exc)}, 404)
        except RunInUseError as exc:
            return _json({'ok': False, 'error': str(exc)}, 409)
        except (UserError, PlanStoreError) as exc:
            return _json({'ok': False, 'error': str(exc)}, 422 if isinstance(exc, UserError) else 503)

    def _tool_of(self, run_id: str, step_id: str) -> str | None:
        plan = self.reads.plans([run_id]).get(run_id)
        if plan is None:
            raise ActionError(404, f'No run {run_id!r} in this store.')
        for step in json.loads(plan).get('steps') or ():
            if isinstance(step, dict) and step.get('id') == step_id:
                tool = step.get('tool')
                return tool if isinstance(tool, str) else None
        raise ActionError(404, f'Run {run_id!r} has no step {step_id!r}.')

    # --- pages ------------------------------------------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        self.guard.check_host(request)
        ok, label = self.guard.token_in_query(request)
        if ok:  # the address with ?token=: open a session, and go on without the token in the address bar
            sid, _ = self.guard.open_session(label)
            response: Response = RedirectResponse('/', status_code=303, headers=_HEADERS)
            response.set_cookie(COOKIE, sid, max_age=int(SESSION_SECONDS), httponly=True, samesite='strict')
            return response
        session = self.guard.reader(request)
        html = (STATIC / 'index.html').read_text(encoding='utf-8')
        response = Response(html, media_type='text/html', headers=_HEADERS)
        if session is None:
            sid, _ = self.guard.open_session(None)
            response.set_cookie(COOKIE, sid, max_age=int(SESSION_SECONDS), httponly=True, samesite='strict')
        return response

    async def session(self, request: Request) -> Response:
        session = self.guard.reader(request)
        store = self._store
        return _json({'csrf': session.csrf if session else None, 'user': session.user if session else None,
                      'store': store.url if store else None, 'capabilities': self.actions.capabilities(),
                      'pid': os.getpid()})

    async def inbox(self, request: Request) -> Response:
        self.guard.reader(request)
        entries, total = await anyio.to_thread.run_sync(self.reads.inbox)
        plans = await anyio.to_thread.run_sync(self.reads.plans, [e.run_id for e in entries])
        return _json(inbox_view(entries, plans, total, schemas=self.actions.schemas))

    async def runs(self, request: Request) -> Response:
        """A page of runs from the library's `list_runs` (keyset pages over the store's indexes), and how many
        runs there are of each status."""
        self.guard.reader(request)
        query = request.query_params
        store = self._store
        assert store is not None
        status = query.get('status') or None
        if status is not None and status not in _STATES:
            raise HTTPException(400, f'Bad filter: status {status!r} is none of {", ".join(_STATES)}.')
        try:
            limit = int(query.get('limit') or 50)
            page = await list_runs(store, status=None if status is None else _STATES[status],
                                   name=query.get('name') or None, since=query.get('since') or None,
                                   until=query.get('until') or None,
                                   waiting=query.get('waiting') in ('1', 'true', 'on'), limit=limit,
                                   after=query.get('after') or None)
        except (UserError, ValueError) as exc:
            raise HTTPException(400, f'Bad filter: {exc}') from None
        counts = await anyio.to_thread.run_sync(self.reads.counts)
        return _json({'runs': [_listed(run) for run in page.runs], 'after': page.cursor, 'counts': counts})

    async def run(self, request: Request) -> Response:
        self.guard.reader(request)
        store = self._store
        assert store is not None
        run_id = request.path_params['run_id']
        try:
            stored = await anyio.to_thread.run_sync(store.load, run_id)
        except UnknownRunError as exc:
            raise HTTPException(404, str(exc)) from None
        view = run_view(stored, schemas=self.actions.schemas)
        view['resume'] = self.actions.resumes.get(run_id)
        return _json(view)

    async def events(self, request: Request) -> Response:
        self.guard.reader(request)
        feed = self._feed
        assert feed is not None

        async def stream() -> AsyncIterator[ServerSentEvent]:
            async with feed.subscribe() as changes:
                yield ServerSentEvent(data='[]', event='hello')
                async for run_ids in changes:
                    yield ServerSentEvent(data=json.dumps(sorted(run_ids)), event='change')

        return EventSourceResponse(stream(), ping=15, headers=_HEADERS, shutdown_event=self._closing)

    # --- changes ----------------------------------------------------------------------------------------------

    async def validate(self, request: Request) -> Response:
        self.guard.writer(request)
        body = await self._body(request)
        tool = body.get('tool')
        problems, checked = self.actions.problems(tool if isinstance(tool, str) else None, body.get('arguments'))
        return _json({'ok': not problems, 'problems': problems, 'checked': checked})

    async def decision(self, request: Request) -> Response:
        label = self.guard.writer(request)
        body = await self._body(request)
        run_id, step_id = request.path_params['run_id'], request.path_params['step_id']

        async def work() -> str:
            tool = await anyio.to_thread.run_sync(self._tool_of, run_id, step_id)
            message = await self.actions.decide(run_id, step_id, body, who(label, body), tool)
            return message + await self._maybe_resume(run_id)
        return await self._act(work)

    async def review(self, request: Request) -> Response:
        """A whole-plan review answered at once: `{"decisions": {step_id: {action, arguments, reason}}}`; each is
        recorded on its own (a step decided elsewhere meanwhile is reported, the others still recorded)."""
        label = self.guard.writer(request)
        body = await self._body(request)
        run_id = request.path_params['run_id']
        decisions = body.get('decisions')
        if not isinstance(decisions, dict) or not decisions:
            return _json({'ok': False, 'error': 'A plan review sends a decision for each gated step.'}, 400)
        try:
            by = who(label, body)
        except ActionError as exc:
            return _json({'ok': False, 'error': str(exc)}, exc.status)
        results: dict[str, Any] = {}
        for step_id, decision in decisions.items():
            if not isinstance(decision, dict):
                results[step_id] = {'ok': False, 'error': 'not a decision object'}
                continue

            async def work(step_id: str = step_id, decision: dict[str, Any] = decision) -> str:
                tool = await anyio.to_thread.run_sync(self._tool_of, run_id, step_id)
                return await self.actions.decide(run_id, step_id, decision, by, tool)
            answer = await self._act(work)
            results[step_id] = json.loads(bytes(answer.body))
        ok = all(result.get('ok') for result in results.values())
        resumed = await self._maybe_resume(run_id) if ok else ''
        message = f'Plan review recorded for {len(results)} steps.{resumed}'
        return _json({'ok': ok, 'steps': results, 'message': message}, 200 if ok else 409)

    async def _maybe_resume(self, run_id: str) -> str:
        """After a decision: when this UI has the tools and no step of the run waits any more, go on with it."""
        if not self.actions.capabilities()['resume']:
            return ''
        entries, _ = await anyio.to_thread.run_sync(self.reads.inbox)
        if any(entry.run_id == run_id for entry in entries):
            return ''
        store = self._store
        assert store is not None
        info = (await anyio.to_thread.run_sync(store.load, run_id)).info
        if info.owner is not None and info.status == 'running':
            return ' The process running it picks the decision up.'
        return ' ' + self.actions.resume(run_id)

    async def resume(self, request: Request) -> Response:
        self.guard.writer(request)
        run_id = request.path_params['run_id']

        async def work() -> str:
            return self.actions.resume(run_id)
        return await self._act(work)

    async def cancel(self, request: Request) -> Response:
        self.guard.writer(request)
        body = await self._body(request)
        reason = body.get('reason') if isinstance(body.get('reason'), str) else None
        run_id = request.path_params['run_id']
        return await self._act(lambda: self.actions.cancel(run_id, reason))

    async def retry(self, request: Request) -> Response:
        self.guard.writer(request)
        run_id, step_id = request.path_params['run_id'], request.path_params['step_id']
        return await self._act(lambda: self.actions.retry(run_id, step_id))


def _listed(run: ListedRun) -> dict[str, Any]:
    return {'run_id': run.run_id, 'name': run.name, 'status': run.status, 'steps': run.steps, 'waiting': run.waiting,
            'created_at': run.created_at, 'updated_at': run.updated_at, 'owner': run.owner,
            'cancel_requested_at': run.cancel_requested_at, 'cancel_reason': run.cancel_reason}
