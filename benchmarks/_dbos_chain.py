"""A peer for the journal-cost benchmark: DBOS Transact's own durable steps, on the same database.

`python -m benchmarks._dbos_chain URL STEPS ROUNDS` runs, in this process, a DBOS workflow that calls STEPS no-op
`@DBOS.step` functions one after the other (each step's output is recorded before the next starts, as a
toolweave journal records a chain), ROUNDS times after a warm-up, and prints a JSON line: the median wall time per
step, and the same for a workflow of plain function calls (no steps) as its floor. A process of its own: DBOS runs
one instance per process, configured once.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import uuid
from typing import Any

__all__ = ('main',)


def main(url: str, steps: int, rounds: int) -> dict[str, Any]:
    from dbos import DBOS, SetWorkflowID

    from toolweave.plan.workers._protocol import database_url

    DBOS(config={'name': 'bench-dbos-chain', 'system_database_url': database_url(url), 'log_level': 'WARNING'})

    @DBOS.step()
    def noop(i: int) -> int:
        return i + 1

    def plain(i: int) -> int:
        return i + 1

    @DBOS.workflow()
    def chain(n: int, durable: bool) -> int:
        value = 0
        for _ in range(n):
            value = noop(value) if durable else plain(value)
        return value

    DBOS.launch()
    try:
        timings: dict[str, list[float]] = {'steps': [], 'plain': []}
        for index in range(rounds + 1):
            for kind in ('steps', 'plain'):
                with SetWorkflowID(f'chain-{kind}-{uuid.uuid4().hex}'):
                    started = time.perf_counter()
                    assert chain(steps, kind == 'steps') == steps
                    if index:  # the first round warms up
                        timings[kind].append(time.perf_counter() - started)
    finally:
        DBOS.destroy()
    step_us = statistics.median(timings['steps']) / steps * 1e6
    plain_us = statistics.median(timings['plain']) / steps * 1e6
    return {'steps': steps, 'rounds': rounds, 'us_per_step': round(step_us, 2),
            'no_steps_us_per_call': round(plain_us, 2), 'step_us_over_plain': round(step_us - plain_us, 2)}


if __name__ == '__main__':
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))
