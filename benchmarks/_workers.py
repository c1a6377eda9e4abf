"""Worker processes for the scale-out tests and benchmark: `toolweave worker` started as a real subprocess each,
serving `benchmarks._worker_tools`, stopped (or killed) at the end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

__all__ = ('WorkerProcess', 'worker_processes')

ROOT = Path(__file__).resolve().parent.parent


class WorkerProcess:
    """One `toolweave worker` process."""

    def __init__(self, store: str, *, tools: str = 'benchmarks._worker_tools:TOOLS', queue: str = 'toolweave',
                 concurrency: int = 8, ledger: Path | None = None, tool_seconds: float = 0.01,
                 recover: float | None = None) -> None:
        env = dict(os.environ, TOOLWEAVE_TOOL_SECONDS=str(tool_seconds))
        if ledger is not None:
            env['TOOLWEAVE_LEDGER'] = str(ledger)
        self.process = subprocess.Popen(
            [sys.executable, '-c', 'from toolweave.cli import main; main()', 'worker', '--store', store, '--tools',
             tools, '--queue', queue, '--concurrency', str(concurrency), '--drain', '5',
             *(['--recover', str(recover)] if recover is not None else [])],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, timeout: float = 60.0) -> str:
        """Wait for the line saying the worker serves; returns it (raises with its output if it exits first)."""
        assert self.process.stderr is not None
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line:
                raise RuntimeError(f'worker {self.pid} exited ({self.process.wait()}): {"".join(seen)[-3000:]}')
            seen.append(line)
            if line.startswith('Worker '):
                return line
        raise RuntimeError(f'worker {self.pid} did not start within {timeout} s: {"".join(seen)[-3000:]}')

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.process.stderr is not None:
            self.process.stderr.close()
        return self.process.returncode


@contextmanager
def worker_processes(store: str, count: int, *, tools: str = 'benchmarks._worker_tools:TOOLS', concurrency: int = 8,
                     ledger: Path | None = None, tool_seconds: float = 0.01,
                     recover: float | None = None) -> Iterator[list[WorkerProcess]]:
    """`count` workers started together, ready; stopped at the end."""
    with ExitStack() as stack:
        workers = []
        for _ in range(count):
            worker = WorkerProcess(store, tools=tools, concurrency=concurrency, ledger=ledger,
                                   tool_seconds=tool_seconds, recover=recover)
            stack.callback(worker.stop)
            workers.append(worker)
        for worker in workers:
            worker.wait_ready()
        yield workers
