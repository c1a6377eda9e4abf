"""The coordinator's side of a run on workers: each step's tool call becomes a DBOS workflow on the worker queue.

The run itself is unchanged (the scheduler, the journal, parking, resume): `dispatched` gives the kernel extension
`Dispatch`, whose `call` hook enqueues the workflow `<run id>/<step id>` instead of calling the tool here, and waits
for its outcome.
Enqueueing a workflow id DBOS already has attaches to that workflow, so a call made again (a resumed run, a
coordinator that crashed) never runs a step twice: it gets the recorded result, or waits for the one running.

One task (`Dispatcher.serve`) does the talking to the database for every step of the run: each round enqueues the
calls made since the last one, in one transaction, and reads the outcome of every call still waiting, in one
query. A database that fails stops the run, as a journal that fails does; what was recorded stays.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from toolweave.exceptions import ApprovalPending, PlanStoreError, PlanValidationError
from toolweave.plan._kernel import Call, Extension, Run
from toolweave.plan._record import ItemRecord, StepRecord
from toolweave.plan._validate import Prepared
from toolweave.plan.durable._codec import Folded
from toolweave.plan.durable._postgres import redact
from toolweave.plan.durable._store import PlanStore
from toolweave.plan.workers._protocol import (
    APP_NAME,
    APP_VERSION,
    STEP_WORKFLOW,
    TERMINAL,
    Unknown,
    database_url,
    decode,
    import_dbos,
    parse_workflow_id,
    workflow_id,
)
from toolweave.plan.workers._registry import Registry
from toolweave.tools import ToolResult

__all__ = ('Dispatch', 'Dispatcher', 'dispatched')

logger = logging.getLogger('toolweave.workers')

TICK = 0.01
"""Seconds between two reads of the outcomes while calls wait (sooner when new calls come)."""
_migrated: set[str] = set()
"""Databases this process has seen DBOS's tables in (a coordinator may start before any worker)."""


@dataclass(eq=False)
class _Call:
    workflow_id: str
    tool: str
    arguments: Any
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: ToolResult | Unknown | None = None


@dataclass(frozen=True, slots=True)
class Earlier:
    """The latest workflow of a call, found when the run resumed."""

    attempt: int
    outcome: ToolResult | Unknown | None
    """`None` while it has not ended."""


class Dispatcher:
    """Enqueues steps' calls on the worker queue and hands back their outcomes (see the module docstring).
    Construct it in a worker thread: it connects."""

    def __init__(self, url: str, queue: str, shown: str) -> None:
        dbos = import_dbos()
        import sqlalchemy as sa

        self.queue = queue
        self.shown = shown
        """The database, for messages (no password)."""
        try:
            if url not in _migrated:
                dbos.DBOS.migrate(url)  # creates DBOS's tables if no worker ever did
                _migrated.add(url)
            postgres = url.startswith('postgresql')
            self.engine = sa.create_engine(url, pool_size=2, max_overflow=2, pool_pre_ping=True) if postgres else (
                sa.create_engine(url, connect_args={'timeout': 30}))
            self.client = dbos.DBOSClient(system_database_engine=self.engine, application_name=APP_NAME,
                                          serializer=dbos.DBOSPortableJSONSerializer(), retry_connection_errors=False)
            self.registry = Registry(url)
        except Exception as exc:
            raise PlanStoreError(f'Cannot reach the worker queue in {shown}: {_first_line(exc)}. Check that the '
                                 'database is up.') from exc
        self._submitted: list[_Call] = []
        self._waiting: dict[str, _Call] = {}
        self._wake = anyio.Event()
        self.failure: PlanStoreError | None = None
        """Why `serve` stopped, once the database failed."""

    def close(self) -> None:
        self.client.destroy()
        self.engine.dispose()
        self.registry.close()

    # --- before the run -----------------------------------------------------------------------------------------

    def check_tools(self, prepared: Prepared) -> None:
        """Refuse a plan that a live worker of the queue cannot run (it lacks a tool the plan calls); warn when no
        worker is live (the steps wait in the queue until one starts)."""
        try:
            live = [worker for worker in self.registry.workers(self.queue) if worker.alive]
        except Exception as exc:
            raise self._failed(exc) from exc
        if not live:
            logger.warning('No live worker serves queue %r in %s: the steps wait in the queue until one starts '
                           '(`toolweave worker --store URL --tools module:TOOLS`).', self.queue, self.shown)
        calls: dict[str, str] = {}
        for step, tool in zip(prepared.plan.steps, prepared.tools, strict=True):
            if tool is not None:
                calls.setdefault(tool.name, step.id)
        problems = [f'step {step_id!r} calls tool {name!r}, which worker {worker.executor_id} of queue '
                    f'{self.queue!r} does not have (it runs {", ".join(worker.tools) or "no tools"}). Start every '
                    'worker of the queue with the tools the plans call (`toolweave worker --tools module:TOOLS`).'
                    for worker in live for name, step_id in calls.items() if name not in worker.tools]
        if problems:
            raise PlanValidationError(problems)

    def earlier(self, run_id: str) -> dict[str, Earlier]:
        """The latest workflow of each call of run `run_id` made before (by call id)."""
        found: dict[str, Earlier] = {}
        try:
            statuses = self.client.list_workflows(workflow_id_prefix=f'{run_id}/', load_input=False)
        except Exception as exc:
            raise self._failed(exc) from exc
        for status in statuses:
            parsed = parse_workflow_id(run_id, status.workflow_id)
            if parsed is None:
                continue
            base, attempt = parsed
            if base not in found or found[base].attempt < attempt:
                found[base] = Earlier(attempt, _outcome(status) if status.status in TERMINAL else None)
        return found

    # --- the run ------------------------------------------------------------------------------------------------

    async def call(self, workflow: str, tool: str, arguments: Any) -> ToolResult | Unknown:
        """Enqueue the workflow `workflow` (or attach to it) and wait for its outcome."""
        call = _Call(workflow, tool, arguments)
        self._submitted.append(call)
        self._wake.set()
        try:
            await call.done.wait()
        finally:
            self._waiting.pop(workflow, None)  # given up (a step timeout): the workflow runs on, unread
        assert call.outcome is not None
        return call.outcome

    async def serve(self) -> None:
        """Enqueue and read outcomes, round after round, until cancelled (raises `PlanStoreError` when the database
        fails)."""
        while True:
            if not self._submitted and not self._waiting:
                await self._wake.wait()
            self._wake = anyio.Event()
            batch, self._submitted = self._submitted, []
            for call in batch:
                self._waiting[call.workflow_id] = call
            try:
                ended = await anyio.to_thread.run_sync(self._round, batch, list(self._waiting))
            except PlanStoreError as exc:
                self.failure = exc
                raise
            for workflow, outcome in ended.items():
                waiter = self._waiting.pop(workflow, None)
                if waiter is not None:
                    waiter.outcome = outcome
                    waiter.done.set()
            if self._waiting and not self._submitted:
                with anyio.move_on_after(TICK):
                    await self._wake.wait()

    def _round(self, batch: list[_Call], watching: list[str]) -> dict[str, ToolResult | Unknown]:
        try:
            if batch:
                with self.engine.begin() as db:
                    for call in batch:
                        self.client.enqueue_in_transaction(
                            db, {'workflow_name': STEP_WORKFLOW, 'queue_name': self.queue,
                                 'workflow_id': call.workflow_id, 'app_version': APP_VERSION},
                            call.tool, call.arguments)
            if not watching:
                return {}
            statuses = self.client.list_workflows(workflow_ids=watching, status=list(TERMINAL), load_input=False)
        except Exception as exc:
            raise self._failed(exc) from exc
        return {status.workflow_id: _outcome(status) for status in statuses}

    def _failed(self, exc: Exception) -> PlanStoreError:
        return PlanStoreError(f'The worker queue in {self.shown} failed: {_first_line(exc)}. The run stopped; the '
                              'steps already sent go on on the workers, and a resume picks up their results (none '
                              'runs twice). Resume the run once the database is back.')


def _outcome(status: Any) -> ToolResult | Unknown:
    """What a workflow that ended says about its step."""
    if status.status == 'SUCCESS':
        return decode(status.output)
    if status.status == 'MAX_RECOVERY_ATTEMPTS_EXCEEDED':
        return ToolResult.failure(f'Its workers died every time it ran ({status.workflow_id}): DBOS stopped '
                                  'recovering it.')
    if status.status == 'CANCELLED':
        return ToolResult.failure(f'Its workflow {status.workflow_id} was cancelled in DBOS.')
    return ToolResult.failure(f'Its workflow {status.workflow_id} failed on its worker: {status.error}')


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f'{type(exc).__name__}: {lines[0] if lines else "no message"}'


class Dispatch(Extension):
    """The kernel extension that sends each call of a step's tool to the workers: the call enqueues the step's
    workflow (`<run>/<step>`, the elements of a `for_each` step `<run>/<step>/<index>`) and waits for its outcome;
    a call whose worker died while the tool ran (and that may not run twice) parks the step.

    Reviews happen here, before the call is sent (the `Review` extension admits each call first): workers run the
    tool's body only."""

    def __init__(self, dispatcher: Dispatcher, run_id: str, *, earlier: Mapping[str, Earlier],
                 approved: frozenset[str]) -> None:
        self._dispatcher = dispatcher
        self._run_id = run_id
        self._earlier = earlier
        self._approved = approved
        self._run: Run | None = None

    def attach(self, run: Run) -> None:
        self._run = run

    async def call(self, record: StepRecord, item: ItemRecord | None, arguments: Any, proceed: Call) -> ToolResult:
        assert self._run is not None
        tool = self._run.tools[record.index]
        assert tool is not None
        call = 0 if item is None else item.index
        base = workflow_id(self._run_id, record.id, call)
        attempt = 1
        earlier = self._earlier.get(base)
        if earlier is not None:
            attempt = earlier.attempt
            if isinstance(earlier.outcome, Unknown):
                if record.id not in self._approved:  # not decided since it parked: park it again
                    raise ApprovalPending(earlier.outcome.reason(record.id))
                attempt += 1  # a person approved running it again
        outcome = await self._dispatcher.call(workflow_id(self._run_id, record.id, call, attempt), tool.name,
                                              arguments)
        if isinstance(outcome, Unknown):
            raise ApprovalPending(outcome.reason(record.id))
        return outcome


@asynccontextmanager
async def dispatched(store: PlanStore, queue: str, run_id: str, prepared: Prepared,
                     folded: Folded) -> AsyncIterator[Extension]:
    """The extension that sends the run's calls to the workers of `queue`, while the block runs.

    Raises:
        PlanValidationError: a live worker of the queue lacks a tool the plan calls (nothing ran).
        PlanStoreError: the database cannot be reached, or failed during the run (the run stopped).
    """
    url = database_url(store)
    dispatcher = await anyio.to_thread.run_sync(Dispatcher, url, queue, redact(store.url))
    try:
        await anyio.to_thread.run_sync(dispatcher.check_tools, prepared)
        earlier = await anyio.to_thread.run_sync(dispatcher.earlier, run_id) if folded.steps else {}
        approved = frozenset(step_id for step_id, state in folded.steps.items() if state.decided_last and (
            state.decision is not None and state.decision.kind != 'exit_early'))
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(dispatcher.serve)
                try:
                    yield Dispatch(dispatcher, run_id, earlier=earlier, approved=approved)
                finally:
                    group.cancel_scope.cancel()
        except BaseExceptionGroup as failures:  # the database failed: the run's own error says it first, if it has one
            own = [error for error in failures.exceptions if error is not dispatcher.failure]
            raise (own or list(failures.exceptions))[0] from None
    finally:
        await anyio.to_thread.run_sync(dispatcher.close)
