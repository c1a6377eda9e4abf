"""`Worker`: a process that runs plan steps from a DBOS queue (see the package docstring).

Each step is the DBOS workflow `toolweave.step(tool, arguments)`. Its first durable step records that it started
(with a token fresh to this execution); only then is the tool called. When DBOS runs the workflow again after its
worker died, that first step returns the token recorded by the dead execution instead of the fresh one: the
workflow knows it is a recovery, and calls the tool again only if the tool is idempotent or read-only. Otherwise
it returns *unknown*, and the coordinator parks the step for a person. A workflow that ended is never run again:
DBOS keeps its result under its id.

DBOS recovers a dead executor's workflows only when told which executor died, so every worker also watches the
others (`Registry`): once a second it renews its own heartbeat, looks for the queue's steps held by workers that
are gone, and has DBOS put them back on the queue (idempotent: a step another worker took meanwhile is not
touched).
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

import anyio
import anyio.to_thread

from toolweave.exceptions import ControlFlowSignal, PlanStoreError, ToolConfigurationError, UserError
from toolweave.plan.durable._manage import Recovery, watch_runs
from toolweave.plan.durable._postgres import redact
from toolweave.plan.durable._runs import open_store
from toolweave.plan.durable._store import LEASE_SECONDS, new_owner, owner_is_stale, release_owner
from toolweave.plan.workers._protocol import (
    APP_NAME,
    APP_VERSION,
    DEFAULT_QUEUE,
    STARTED_STEP,
    STEP_WORKFLOW,
    Unknown,
    database_url,
    encode,
    encode_unknown,
    import_dbos,
    may_repeat,
)
from toolweave.plan.workers._registry import Registry
from toolweave.tools import ToolCallContext, ToolResult, Toolset, ToolsetItem

__all__ = ('Worker',)

logger = logging.getLogger('toolweave.workers')

WATCH_SECONDS = 1.0
"""How often a worker renews its heartbeat and looks for the steps of dead workers."""
MAX_RECOVERY_ATTEMPTS = 10
"""Executions of one step DBOS allows (a tool that kills its worker every time fails the step, not every
worker)."""

_serving: Worker | None = None
"""The worker of this process: DBOS runs one executor per process."""
_lock = threading.Lock()
_registered = False


class Worker:
    """Runs plan steps from a worker queue in this process, until stopped: one DBOS executor (a process has one).

    Start it with `start()` (or `with Worker(...)`), stop it with `stop()`; `toolweave worker` runs one until
    Ctrl-C or SIGTERM. A run sends its steps here with `run_plan(..., store=..., workers=True)`.

    Args:
        store: the store the runs are in (its URL: `sqlite:///runs.db`, a file path, or `postgresql://...`); the
            queue lives in the same database.
        tools: the tools this worker runs (a `Toolset` or anything `Toolset(...)` accepts): every tool the plans
            call, with the same names as the coordinator's.
        queue: the queue to serve.
        concurrency: steps each worker of the queue runs at once. DBOS keeps a queue's limits in the database, so
            this is the queue's setting: the last worker started sets it for all.
        context: out-of-band values passed to every tool call here (a run's own call context is never sent to
            workers: it may hold credentials, and the queue is stored).
        poll_interval: seconds between two looks at the queue when it has nothing for this worker (also a queue
            setting).
        recover: also look every `recover` seconds for crashed runs whose steps go to this queue (their coordinator
            died) and go on with them here, as `recover_runs` does: the worker becomes their coordinator. `None`
            (the default): only run steps.

    Raises:
        PlanStoreError: the database cannot be opened (from `start`).
    """

    def __init__(self, store: str | os.PathLike[str], tools: Toolset | Iterable[ToolsetItem], *,
                 queue: str = DEFAULT_QUEUE, concurrency: int = 8, context: Mapping[str, Any] | None = None,
                 poll_interval: float = 0.02, recover: float | None = None) -> None:
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise UserError(f'Worker concurrency must be an integer >= 1, got {concurrency!r}.')
        if not isinstance(queue, str) or not queue.strip() or queue.startswith('_dbos'):
            raise UserError(f'Worker queue must be a name (not starting with "_dbos"), got {queue!r}.')
        if not isinstance(poll_interval, int | float) or not 0 < poll_interval <= 60:
            raise UserError(f'Worker poll_interval must be between 0 and 60 seconds, got {poll_interval!r}.')
        if recover is not None and (isinstance(recover, bool) or not isinstance(recover, int | float) or
                                    not recover > 0):
            raise UserError(f'Worker recover must be a number of seconds > 0 (or None), got {recover!r}.')
        self.recover = recover
        self.store = os.fspath(store)
        self.tools = tools if isinstance(tools, Toolset) else Toolset(tools)
        self.queue = queue
        self.concurrency = concurrency
        self.context = ToolCallContext.of(context)
        self.poll_interval = float(poll_interval)
        self.executor_id = ''
        """`host:pid:token`, once started."""
        self._registry: Registry | None = None
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._recoverer: threading.Thread | None = None
        self._running = 0
        self._running_lock = threading.Lock()
        self._connected_since = 0.0
        """When this worker last found the database again (or started): it judges other machines' heartbeats only
        after a lease of its own."""

    def __repr__(self) -> str:
        return f'Worker(queue={self.queue!r}, store={redact(self.store)!r}, executor_id={self.executor_id!r})'

    # --- lifecycle ----------------------------------------------------------------------------------------------

    def start(self) -> Worker:
        """Launch DBOS in this process and start taking steps from the queue.

        Raises:
            PlanStoreError: the database cannot be opened.
            UserError: another worker already runs in this process.
        """
        global _serving
        dbos = import_dbos()
        with _lock:
            if _serving is not None:
                raise UserError(f'{_serving!r} already runs in this process; DBOS runs one executor per process. '
                                'Stop it first, or start another process (`toolweave worker`).')
            _serving = self
        try:
            self._launch(dbos)
        except BaseException:
            with _lock:
                _serving = None
            raise
        logger.info('Worker %s serves queue %r with tools %s', self.executor_id, self.queue,
                    ', '.join(self.tools.names))
        return self

    def _launch(self, dbos: Any) -> None:
        open_store(self.store).close()  # a clear PlanStoreError for a store that cannot be opened; creates its tables
        url = database_url(self.store)
        try:
            self._registry = Registry(url)
        except Exception as exc:
            raise PlanStoreError(f'Cannot open plan store {redact(self.store)} for workers: {exc}') from exc
        self.executor_id = new_owner()
        self._registry.beat(self.executor_id, self.queue, self.tools.names)
        _register_workflow()
        config: Any = {
            'name': APP_NAME, 'system_database_url': url, 'executor_id': self.executor_id,
            'application_version': APP_VERSION, 'serializer': dbos.DBOSPortableJSONSerializer(),
            'log_level': 'WARNING', 'sys_db_pool_size': self.concurrency + 4,
        }
        try:
            dbos.DBOS(config=config)
            dbos.DBOS.launch()
            dbos.DBOS.register_queue(self.queue, worker_concurrency=self.concurrency,
                                     polling_interval_sec=self.poll_interval, on_conflict='always_update')
        except Exception as exc:
            self._shut(dbos, 0)
            raise PlanStoreError(f'Cannot start a worker on plan store {redact(self.store)}: {type(exc).__name__}: '
                                 f'{exc}') from exc
        self._stop.clear()
        self._connected_since = time.monotonic()
        self._watcher = threading.Thread(target=self._watch, name=f'toolweave-worker-{self.queue}', daemon=True)
        self._watcher.start()
        if self.recover is not None:
            self._recoverer = threading.Thread(target=self._recover_runs, name=f'toolweave-recover-{self.queue}',
                                               daemon=True)
            self._recoverer.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop taking steps; wait up to `timeout` seconds for the steps running here to end, then shut down. A step
        still running then is taken over by another worker once this process has exited (and parks if its tool may
        not run twice)."""
        global _serving
        if _serving is not self:
            return
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join()
            self._watcher = None
        if self._recoverer is not None:
            self._recoverer.join(timeout)  # its runs are handed back as crashed, for the next recoverer
            self._recoverer = None
        self._shut(import_dbos(), timeout if self._running else 0)
        with _lock:
            _serving = None

    def _shut(self, dbos: Any, timeout: float) -> None:
        dbos.DBOS.destroy(workflow_completion_timeout_sec=int(timeout + 0.999))
        registry, self._registry = self._registry, None
        if registry is not None:
            try:
                if not self._running:
                    registry.leave(self.executor_id)
            except Exception as exc:  # the database is gone: the row lapses with the heartbeat
                logger.debug('Worker %s could not leave the workers table: %r', self.executor_id, exc)
            registry.close()
        release_owner(self.executor_id)

    def serve_forever(self, drain: float = 30.0) -> None:
        """Start (if needed) and serve until `stop()` is called from another thread or Ctrl-C, then stop, waiting up
        to `drain` seconds for the running steps."""
        if _serving is not self:
            self.start()
        try:
            while _serving is self and not self._stop.wait(0.5):
                pass
        finally:
            self.stop(drain)

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- one step -----------------------------------------------------------------------------------------------

    async def run(self, name: str, arguments: Any, recovered: Mapping[str, Any] | None) -> dict[str, Any]:
        """Run one step's call (the body of the step workflow): its tool, or *unknown* for a recovered call that may
        not run twice."""
        tool = self.tools.find(name)
        if tool is None:
            return encode(ToolResult.failure(
                f'Worker {self.executor_id} (queue {self.queue!r}) has no tool {name!r}; it runs '
                f'{", ".join(self.tools.names) or "no tools"}. Start every worker of the queue with the tools the '
                'plans call (`toolweave worker --tools module:TOOLS`).'))
        if recovered is not None and not may_repeat(tool):
            return encode_unknown(Unknown(str(recovered.get('executor')), float(recovered.get('at') or 0.0), name))
        with self._running_lock:
            self._running += 1
        try:
            result = await tool.execute(arguments, self.context)
        except (ToolConfigurationError, ControlFlowSignal) as exc:
            result = ToolResult.failure(f'{type(exc).__name__} on worker {self.executor_id}: {exc}')
        except Exception as exc:
            result = ToolResult.from_exception(exc)
        finally:
            with self._running_lock:
                self._running -= 1
        return encode(result)

    # --- recovering the runs of the queue ------------------------------------------------------------------------

    def _recover_runs(self) -> None:
        """Until the worker stops: every `recover` seconds, go on with the crashed runs of this queue (in this
        thread's own event loop)."""
        assert self.recover is not None
        every = self.recover

        async def main() -> None:
            async with anyio.create_task_group() as group:
                async def until_stopped() -> None:
                    await anyio.to_thread.run_sync(self._stop.wait, abandon_on_cancel=True)
                    group.cancel_scope.cancel()

                group.start_soon(until_stopped)
                group.start_soon(partial(watch_runs, self.tools, store=self.store, every=every, queue=self.queue,
                                         context=self.context, report=self._recovered))

        try:
            anyio.run(main)
        except Exception as exc:
            logger.error('Worker %s stopped recovering runs: %r', self.executor_id, exc)

    def _recovered(self, recovery: Recovery) -> None:
        logger.info('Worker %s recovered plan run %r: %s%s', self.executor_id, recovery.run_id, recovery.outcome,
                    f', now {recovery.status}' if recovery.status else '')

    # --- watching the other workers -----------------------------------------------------------------------------

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_SECONDS):
            try:
                self.watch_once()
            except Exception as exc:  # the database is away: DBOS waits for it; so do we
                self._connected_since = time.monotonic()
                logger.warning('Worker %s could not check on the other workers: %r', self.executor_id, exc)

    def watch_once(self) -> list[str]:
        """Renew this worker's heartbeat, put the steps of dead workers back on the queue and forget those workers;
        returns the dead workers whose steps were put back."""
        registry = self._registry
        assert registry is not None
        registry.beat(self.executor_id, self.queue, self.tools.names)
        DBOS = import_dbos().DBOS
        pending = DBOS.list_workflows(status='PENDING', queue_name=self.queue, load_input=False, load_output=False)
        holders = {status.executor_id for status in pending if status.executor_id}
        holders.discard(self.executor_id)
        known = {worker.executor_id: worker for worker in registry.workers()}
        # A worker on this machine is dead once its process is gone. One on another machine once its heartbeat is
        # older than the lease, judged only by a worker that has itself reached the database for that long: after
        # an outage of the database, every heartbeat is old, and nobody died of it.
        patient = time.monotonic() - self._connected_since >= LEASE_SECONDS
        dead = sorted(holder for holder in holders if owner_is_stale(holder, time.time()) or (
            patient and owner_is_stale(holder, known[holder].heartbeat_at if holder in known else None)))
        if dead:
            # DBOS's own recovery, for the executors named: their PENDING workflows go back on their queue, and only
            # those still held by them (a step another worker took meanwhile is not touched).
            handles = DBOS._recover_pending_workflows(dead)
            logger.warning('Worker %s put back %d steps of dead workers %s', self.executor_id, len(handles),
                           ', '.join(dead))
        registry.leave(*(worker.executor_id for worker in known.values() if owner_is_stale(worker.executor_id, (
            worker.heartbeat_at if patient else time.time()))))
        return dead


def _register_workflow() -> None:
    """Declare the step workflow to DBOS, once per process (DBOS keeps it across `destroy`)."""
    global _registered
    if _registered:
        return
    from dbos import DBOS

    @DBOS.step(name=STARTED_STEP)
    async def started(token: str) -> dict[str, Any]:
        serving = _serving
        return {'token': token, 'executor': serving.executor_id if serving else '', 'at': time.time()}

    @DBOS.workflow(name=STEP_WORKFLOW, max_recovery_attempts=MAX_RECOVERY_ATTEMPTS)
    async def step(tool: str, arguments: Any) -> dict[str, Any]:
        token = secrets.token_hex(8)
        mark = await started(token)  # recorded before the tool runs: a re-execution sees the first one's token
        serving = _serving
        if serving is None:  # DBOS runs workflows only between a worker's start and stop
            raise RuntimeError('no toolweave worker serves in this process')
        return await serving.run(tool, arguments, None if mark.get('token') == token else mark)

    _registered = True
