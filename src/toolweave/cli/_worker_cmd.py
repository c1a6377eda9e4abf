"""`toolweave worker`: run plan steps from a worker queue in this process until Ctrl-C or SIGTERM (see
`toolweave.plan.workers`).

Exit codes: 0 stopped; 2 bad input (a store that cannot be opened, bad `--tools`, no DBOS installed).
"""

from __future__ import annotations

import logging
import signal
import sys
from types import FrameType
from typing import Annotated

import typer

from toolweave.cli._app import app
from toolweave.cli._common import DEFAULT_STORE, StoreOption, ToolsOption, load_tools
from toolweave.exceptions import PlanStoreError, UserError
from toolweave.plan.workers import DEFAULT_QUEUE, Worker

__all__ = ('worker_command',)


@app.command('worker')
def worker_command(
    tools: ToolsOption,
    store: StoreOption = DEFAULT_STORE,
    queue: Annotated[str, typer.Option('--queue', metavar='NAME', help='The queue to serve.')] = DEFAULT_QUEUE,
    concurrency: Annotated[int, typer.Option('--concurrency', min=1, metavar='N',
                                             help="Steps each worker of the queue runs at once (the queue's "
                                                  'setting: the last worker started sets it).')] = 8,
    poll: Annotated[float, typer.Option('--poll', min=0.001, max=60, metavar='SECONDS',
                                        help="Seconds between two looks at the queue when it has nothing for this "
                                             "worker (the queue's setting, like --concurrency).")] = 0.02,
    drain: Annotated[float, typer.Option('--drain', min=0, metavar='SECONDS',
                                         help='On Ctrl-C or SIGTERM, wait this long for the running steps.')] = 30.0,
    recover: Annotated[float | None, typer.Option('--recover', min=0.1, metavar='SECONDS',
                                                  help='Also look every SECONDS for crashed runs whose steps go to '
                                                       'this queue (their coordinator died), and go on with them '
                                                       'here.', show_default=False)] = None,
) -> None:
    """Run plan steps sent by `run_plan(..., workers=True)` or `toolweave run --workers`, until Ctrl-C or SIGTERM."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format='%(asctime)s %(levelname)s %(name)s: %(message)s')
    toolset = load_tools(tools)
    worker = Worker(store, toolset, queue=queue, concurrency=concurrency, poll_interval=poll, recover=recover)
    try:
        worker.start()
    except (PlanStoreError, UserError, ImportError) as exc:
        typer.echo(f'toolweave worker: {exc}', err=True)
        raise typer.Exit(2) from None
    recovering = f'; recovers its crashed runs every {recover:g} s' if recover is not None else ''
    typer.echo(f'Worker {worker.executor_id} serves queue {queue!r} ({concurrency} steps at once) with tools '
               f'{", ".join(toolset.names)}{recovering}. Ctrl-C to stop.', err=True)
    sys.stderr.flush()

    def interrupt(signum: int, frame: FrameType | None) -> None:
        typer.echo(f'Stopping: waiting up to {drain:g} s for the running steps...', err=True)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    try:
        worker.serve_forever(drain)
    except KeyboardInterrupt:
        pass
    typer.echo('Stopped.', err=True)
