"""Kill-at-a-random-point trials of a durable plan, shared by the crash tests and `bench_durable`.

A trial starts a plan in a child process (`python -m benchmarks._crash STORE RUN_ID LEDGER STEPS`), kills it
with SIGKILL at a random moment, then plays the person at the console: it resumes the run, and for each step
parked as unknown after the crash it looks at the side-effect ledger the tools write (one line per finished
call) and approves running it again only if its effect is not there (else rejects it: it did happen). It resumes
until the run is over, then counts, from the ledger, how many steps ran more than once.

A paused-holder trial (`pause_for=SECONDS`) stops the child with SIGSTOP instead, at a random moment, under a
short lease (`?lease=` on the store URL); once the lease has lapsed, this process takes the run over and runs it,
then lets the child go on (SIGCONT): fenced, the child must stop without calling another tool. The person decides
the steps parked as unknown once the child has exited (a call it had in flight when it was paused may still
finish then), and the same counts are taken.

The plan: `STEPS` steps in layers of four, each step reading one or two steps of the layer before; a third of
them call a read-only tool (which may run again after a crash), the rest call a tool with a side effect.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from toolweave import ReviewDecision, Tool, tool
from toolweave.plan import run_plan
from toolweave.plan.durable import PlanStore, decide, open_store, resume_plan

__all__ = ('Trial', 'crash_plan', 'crash_tools', 'ledger_counts', 'plan_seconds', 'run_trial', 'with_option')

READ_ONLY_EVERY = 3


def crash_tools(ledger: Path) -> list[Tool]:
    """`effect` (a side effect: appends `E <step>` to the ledger when it finishes) and `lookup` (read-only:
    appends `R <step>`). Each sleeps up to 2 ms first, so a kill often lands while steps run."""

    def write(line: str) -> None:
        with ledger.open('a', encoding='utf-8') as out:
            out.write(line + '\n')

    @tool
    def effect(step: str, inputs: list[Any]) -> dict[str, Any]:
        """Do something that must happen once."""
        time.sleep(random.random() * 0.002)
        write(f'E {step}')
        return {'step': step, 'seen': len(inputs)}

    @tool
    def lookup(step: str, inputs: list[Any]) -> dict[str, Any]:
        """Read something (safe to repeat)."""
        time.sleep(random.random() * 0.002)
        write(f'R {step}')
        return {'step': step, 'seen': len(inputs)}

    read_only = lookup.with_definition(lookup.definition.with_metadata(read_only=True))
    return [effect, read_only]


def crash_plan(steps: int, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    plan = []
    for index in range(steps):
        layer = index // 4
        inputs = [] if layer == 0 else sorted({f's{(layer - 1) * 4 + rng.randrange(4)}' for _ in range(2)})
        name = 'lookup' if index % READ_ONLY_EVERY == 0 else 'effect'
        plan.append({'id': f's{index}', 'tool': name,
                     'arguments': {'step': f's{index}', 'inputs': [f'$ref:{dep}' for dep in inputs]}})
    return {'steps': plan}


def ledger_counts(ledger: Path) -> Counter[str]:
    return Counter(ledger.read_text(encoding='utf-8').split('\n')[:-1]) if ledger.exists() else Counter()


@dataclass
class Trial:
    """What one trial saw."""

    killed_after: float
    """Seconds after the child started that it was killed."""
    finished_before_kill: int = 0
    """Steps the store showed as succeeded after the kill."""
    rerun_finished: int = 0
    """Steps the store showed as succeeded after the kill that ran again: must be 0."""
    rerun_effects: int = 0
    """Steps with a side effect that ran more than once: must be 0."""
    rerun_reads: int = 0
    """Read-only steps that ran again (allowed)."""
    unknown: int = 0
    """Steps parked as unknown after the crash."""
    lost_finishes: int = 0
    """Unknown steps whose effect the ledger shows: they finished, and the kill came before that was recorded."""
    completed: bool = False
    """Whether every step succeeded in the end."""
    extra: dict[str, Any] = field(default_factory=dict[str, Any])


async def _finish(store: PlanStore, run_id: str, tools: list[Tool], ledger: Path, trial: Trial) -> None:
    for _ in range(5):
        run = await resume_plan(run_id, tools, store=store)
        parked = [record for record in run.steps if record.status == 'parked']
        if not parked:
            trial.completed = run.ok
            return
        counts = ledger_counts(ledger)
        for record in parked:
            trial.unknown += 1
            if counts[f'E {record.id}']:
                trial.lost_finishes += 1
                await decide(run_id, record.id, ReviewDecision.reject('its effect is in the ledger'), store=store)
            else:
                await decide(run_id, record.id, ReviewDecision.approve(), store=store)
    raise AssertionError(f'run {run_id} still has parked steps after five resumes')


def with_option(url: str, option: str) -> str:
    """`url` with one more query option (`lease=1`)."""
    return f'{url}{"&" if "?" in url else "?"}{option}'


def run_trial(store_url: str, folder: Path, run_id: str, steps: int, rng: random.Random, *,
              kill_within: float, pause_for: float | None = None) -> Trial:
    """One trial (see the module docstring); `kill_within`: the kill (or pause) lands at a random time in that
    window. `pause_for`: a paused-holder trial, the child's lease in seconds."""
    ledger = folder / f'{run_id}.ledger'
    child_url = store_url if pause_for is None else with_option(store_url, f'lease={pause_for:g}')
    child = subprocess.Popen([sys.executable, '-m', 'benchmarks._crash', child_url, run_id, str(ledger), str(steps)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=Path(__file__).parent.parent)
    assert child.stdout is not None
    child.stdout.readline()  # `go`: imports done, the plan starts now
    delay = rng.random() * kill_within
    time.sleep(delay)
    trial = Trial(delay)
    if pause_for is None:
        child.send_signal(signal.SIGKILL)
        _, stderr = child.communicate(timeout=60)
        if child.returncode != -signal.SIGKILL and child.returncode != 0:
            raise RuntimeError(f'the child failed on its own ({child.returncode}): {stderr.decode()[-2000:]}')
    else:
        child.send_signal(signal.SIGSTOP)
        time.sleep(pause_for * 1.5)  # past the child's lease: its run may be taken over
        if _sqlite_locked(store_url):
            # Paused inside a SQLite write transaction: the file's lock is the child's until it goes on, so nobody
            # can take the run over meanwhile (nor write anything else to that file); the child then goes on.
            trial.extra['paused_holding_the_lock'] = True
            child.send_signal(signal.SIGCONT)
            child.communicate(timeout=120)
    store = open_store(store_url)
    try:
        try:
            stored = store.load(run_id)
        except Exception:  # stopped before it created the run: nothing ran
            trial.extra['before_start'] = True
            if pause_for is not None:  # let it start the run, and finish it
                child.send_signal(signal.SIGCONT)
                child.communicate(timeout=120)
            else:
                anyio.run(_start, store, run_id, ledger, steps)
            stored = store.load(run_id)
        last: dict[str, str] = {}
        for transition in stored.transitions:
            if transition.status not in ('ready', 'decided'):
                last[transition.step_id] = transition.status
        finished = {step for step, status in last.items() if status == 'succeeded'}
        trial.finished_before_kill = len(finished)
        if pause_for is not None and child.poll() is None:
            # Take the run over while the child sleeps, then wake it: it must stop at its next write.
            taken = anyio.run(partial(resume_plan, run_id, crash_tools(ledger), store=store))
            trial.extra['parked_after_takeover'] = taken.parked
            child.send_signal(signal.SIGCONT)
            _, stderr = child.communicate(timeout=120)
            said = stderr.decode()
            trial.extra['holder_exit'] = child.returncode
            trial.extra['holder_lost_run'] = 'RunLostError' in said
            if child.returncode not in (0, 1) or (child.returncode == 1 and 'RunLostError' not in said):
                raise RuntimeError(f'the paused child failed otherwise ({child.returncode}): {said[-2000:]}')
        anyio.run(_finish, store, run_id, crash_tools(ledger), ledger, trial)
    finally:
        store.close()
    counts = ledger_counts(ledger)
    trial.rerun_finished = sum(1 for step in finished if counts[f'E {step}'] + counts[f'R {step}'] > 1)
    trial.rerun_effects = sum(1 for line, n in counts.items() if line.startswith('E ') and n > 1)
    trial.rerun_reads = sum(n - 1 for line, n in counts.items() if line.startswith('R ') and n > 1)
    return trial


def _sqlite_locked(store_url: str) -> bool:
    """Whether another process holds the write lock of the SQLite file `store_url` names (asked with a short wait:
    a store opened to find out would wait for the lock as long as a resume does)."""
    if not store_url.startswith('sqlite:///'):
        return False
    db = sqlite3.connect(store_url[len('sqlite:///'):].partition('?')[0], timeout=0.5, isolation_level=None)
    try:
        db.execute('BEGIN IMMEDIATE')
        db.execute('ROLLBACK')
        return False
    except sqlite3.OperationalError as exc:
        if 'locked' not in str(exc):
            raise
        return True
    finally:
        db.close()


async def _start(store: PlanStore, run_id: str, ledger: Path, steps: int) -> None:
    await run_plan(crash_plan(steps), crash_tools(ledger), store=store, run_id=run_id, concurrency=8)


def main(argv: list[str]) -> None:
    store_url, run_id, ledger, steps = argv
    store = open_store(store_url)
    print('go', flush=True)
    anyio.run(_start, store, run_id, Path(ledger), int(steps))


def plan_seconds(store_url: str, folder: Path, steps: int, run_id: str = 'calibration') -> float:
    """How long the trial plan takes when nothing kills it (the window kills are drawn from)."""
    ledger = folder / f'{run_id}.ledger'
    store = open_store(store_url)
    try:
        started = time.perf_counter()
        anyio.run(_start, store, run_id, ledger, steps)
        return time.perf_counter() - started
    finally:
        store.close()


if __name__ == '__main__':
    main(sys.argv[1:])
    print(json.dumps({'done': True}))
    os._exit(0)
