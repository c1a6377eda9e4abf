"""Plan steps on worker processes and machines, on DBOS (durable queues in the store's database; the `dbos` extra).

- A run sends its steps to the workers with `run_plan(plan, tools, store=URL, workers=True)`: the run is planned,
  journaled, reviewed and parked in this process as usual, and each step's tool call becomes a DBOS workflow with
  the id `<run id>/<step id>` on a queue in the store's database.
- `Worker(store, tools)` (or `toolweave worker --store URL --tools module:TOOLS`) runs steps from the queue; start
  as many as needed, on as many machines as can reach the database.
- A step whose workflow ended is never run again (DBOS keeps its result under its id). A step whose worker died
  while its tool ran is taken over by a live worker, which calls the tool again only if it is idempotent or
  read-only; otherwise the step parks as unknown after a crash, for a person to decide.
"""

from __future__ import annotations

from toolweave._public import present as _present
from toolweave.plan._options import DEFAULT_QUEUE
from toolweave.plan.workers._worker import Worker

__all__ = ('DEFAULT_QUEUE', 'Worker')

_present('toolweave.plan.workers', __all__, globals())
