"""`run_plan` / `run_plan_sync`: parse, validate, review (whole-plan mode), then execute a plan straight from
Python; with a `store`, durably (see `toolweave.plan.durable`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

import anyio

from toolweave.approval import ReviewHandler, record_approvals, use_review_handler
from toolweave.exceptions import PlanValidationError, UserError
from toolweave.plan._kernel import Run
from toolweave.plan._model import MissingField, Plan, ReviewMode
from toolweave.plan._observe import observers
from toolweave.plan._options import DEFAULT_MAX_STEPS, RunOptions, worker_queue
from toolweave.plan._parse import DEFAULT_MAX_BYTES, Parsed, Problems, parse_async
from toolweave.plan._record import DEFAULT_MAX_OUTPUT_CHARS, EventHandler, PlanRun
from toolweave.plan._review import review_ahead, reviewing
from toolweave.plan._stream import PlanStream
from toolweave.plan._validate import DEFAULT_MAX_ITEMS, as_toolset, prepare_async
from toolweave.plan.durable._runs import StoreLike, opened, start_run
from toolweave.tools import ToolCallContext, Toolset, ToolsetItem

__all__ = ('DEFAULT_MAX_STEPS', 'RunOptions', 'run_parsed', 'run_plan', 'run_plan_sync')


async def to_parsed(plan: Plan | str | bytes | Mapping[str, Any], options: RunOptions) -> Parsed:
    if isinstance(plan, Plan):
        return Parsed(plan, Problems())
    return await parse_async(plan, max_bytes=options.max_bytes, max_steps=options.max_steps)


async def run_parsed(parsed: Parsed, tools: Toolset, options: RunOptions, *, context: ToolCallContext,
                     on_event: EventHandler | None, refused: frozenset[str] = frozenset(),
                     run_id: str | None = None, earlier: Mapping[str, PlanRun] | None = None,
                     name: str | None = None, streamed: PlanStream | None = None) -> PlanRun:
    """Validate and run; `earlier` are the plans of the same agent run a reference may name
    (`"$ref:<plan>/<step>..."`), `name` this plan's own name there. `streamed`: the plan's stream, whose early
    steps the run keeps (or cancels, when the plan does not validate)."""
    steps = {plan: {record.id: record for record in run.steps} for plan, run in (earlier or {}).items()}
    prepared, problems = await prepare_async(parsed, tools, max_steps=options.max_steps, max_items=options.max_items,
                                             extra_refused=refused, earlier=steps)
    if prepared is None:
        ran = None
        if streamed is not None:
            ran = await streamed.cancel('Cancelled: the plan did not validate (its problems were reported)')
        raise PlanValidationError(problems.messages(), ran)
    if streamed is not None:
        early = await streamed.close(prepared)
        if early is not None:
            early.name = name
            return early
    with record_approvals() as log, use_review_handler(options.review_handler):
        if options.store is not None:
            result = await start_run(prepared, tools, options, run_id=run_id, context=context, on_event=on_event,
                                     refused=refused)
        else:
            decided = None
            if options.review_mode == 'whole_plan':
                prepared, decided = await review_ahead(prepared, tools, context, max_steps=options.max_steps,
                                                       refused=refused)
            run = Run(prepared, concurrency=options.concurrency, step_timeout=options.step_timeout,
                      missing_field=options.missing_field, context=context,
                      extensions=[*reviewing(prepared, decided), *observers(on_event)],
                      park=decided.park if decided is not None else None)
            if decided is not None and decided.rejected is not None:
                run.cancel_all(f'Cancelled: the reviewer rejected the plan ({decided.rejected})')
            result = await run.run(timeout=options.timeout, max_output_chars=options.max_output_chars)
    result.approvals = log.records
    result.name = name
    return result


async def run_plan(
    plan: Plan | str | bytes | Mapping[str, Any],
    tools: Toolset | Iterable[ToolsetItem],
    *,
    concurrency: int | None = None,
    step_timeout: float | None = None,
    timeout: float | None = None,  # noqa: ASYNC109
    missing_field: MissingField = 'error',
    max_steps: int = DEFAULT_MAX_STEPS,
    max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
    review_handler: ReviewHandler | None = None,
    review_mode: ReviewMode = 'per_step',
    context: Mapping[str, Any] | None = None,
    on_event: EventHandler | None = None,
    store: StoreLike | None = None,
    run_id: str | None = None,
    max_items: int = DEFAULT_MAX_ITEMS,
    workers: bool | str = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    name: str | None = None,
) -> PlanRun:
    """Validate `plan` against `tools`, then run it: each step starts as soon as the steps it refers to have
    finished; a failed step skips its dependents and nothing else.

    Args:
        plan: a `Plan`, or plan JSON (text or mapping) in either dialect.
        tools: a `Toolset`, or anything `Toolset(...)` accepts (a list of tools and functions).
        concurrency: most steps running at once (`None`: no limit).
        step_timeout: seconds one step may take; a step that takes longer fails like a raised exception.
        timeout: seconds the whole plan may take; steps still unfinished then are recorded as `cancelled`.
        missing_field: what a reference to a field that does not exist gives: `'error'` (the default: the step
            fails with a message naming the reference and the keys that do exist), or `'null'`. In index-based
            plans a reference to a missing (or null) field always fails its step: those values are spliced into
            text, where `null` would pass for data.
        max_steps: plans with more steps are rejected.
        max_output_chars: where each value in `PlanRun.summary` is cut (`None`: never).
        review_handler: reviews each step whose tool requires approval, together with the reviewers the caller
            installed (the stricter decision wins).
        review_mode: `'per_step'`: each gated step is reviewed when it is ready, with its resolved arguments;
            `'whole_plan'`: the reviewers see the whole plan once, before anything runs, and decide every gated
            step at once (approve all or some, edit, park, or reject the plan); approved steps then run without
            asking again.
        context: out-of-band values passed to every tool call.
        on_event: called synchronously as each step starts, parks and finishes (and as each `for_each`
            element finishes); keep it cheap.
        store: run durably in this plan store (a `PlanStore`, a SQLite path or `sqlite:///...` URL, or a
            `postgresql://...` URL): every step's transitions are recorded, and `resume_plan` goes on after a crash
            or once a parked step's decision arrives. See `toolweave.plan.durable`.
        run_id: the durable run's id (default: a new one; read it in `PlanRun.run_id`). A run id the store holds
            for the same plan goes on with that run; for another plan it is refused.
        max_items: the most elements a `for_each` step may run over; a longer list fails the step (a literal one
            fails validation).
        workers: send each step's tool call to the worker processes of a queue in the store's database (`True`:
            the default queue, or its name), instead of calling it here; see `toolweave.plan.workers`. Needs a
            `store`; the run keeps the setting, so a resume sends its steps there too.
        max_bytes: the largest plan text read, in bytes of UTF-8 (checked before it is read; a larger one is a
            validation problem).
        name: a label for the durable run, to find it by (`list_runs(name=...)`, `toolweave runs list --name`).
            Needs a `store`.

    Returns:
        The `PlanRun`: every step's record (plan order), the totals and the model-facing summary.

    Raises:
        PlanValidationError: the plan cannot run; `.problems` lists every problem. Nothing ran.
        ToolConfigurationError: a step's tool is misconfigured (the other steps are cancelled first).
        ControlFlowSignal: a step asked the whole run to stop (for example a reviewer's exit-early).
        PlanStoreError: the store cannot be opened, or failed during the run (the run stopped; what it recorded
            stays, and `resume_plan` goes on from there).
        PlanMismatchError: `run_id` names a stored run of another plan.
        PlanValidationError: with `workers`, also when a live worker of the queue lacks a tool the plan calls.

    ```python
    from toolweave.testing import FakeTool

    echo = FakeTool('echo', lambda args: args['text'])
    plan = {'steps': [{'id': 'a', 'tool': 'echo', 'arguments': {'text': 'hi'}},
                      {'id': 'b', 'tool': 'echo', 'arguments': {'text': '$ref:a'}}], 'output_steps': ['b']}
    run = await run_plan(plan, [echo])
    print(run.summary, run.waves)
    #> {"b": "hi"} (('a',), ('b',))
    ```
    """
    queue = worker_queue(workers)
    if store is None:
        if run_id is not None:
            raise UserError(f'run_plan got run_id={run_id!r} without a store: a run id names a durable run. Pass '
                            "`store=` (for example 'sqlite:///runs.db') too.")
        if queue is not None:
            raise UserError(f'run_plan got workers={workers!r} without a store: the worker queue lives in the '
                            "store's database. Pass `store=` (for example 'postgresql://host/db') too.")
        if name is not None:
            raise UserError(f'run_plan got name={name!r} without a store: a name labels a durable run. Pass '
                            "`store=` (for example 'sqlite:///runs.db') too.")
        options = RunOptions(concurrency, step_timeout, timeout, missing_field, max_steps, max_output_chars,
                             review_handler, review_mode, max_items=max_items, max_bytes=max_bytes)
        return await run_parsed(await to_parsed(plan, options), as_toolset(tools), options,
                                context=ToolCallContext.of(context), on_event=on_event)
    async with opened(store) as plans:
        options = RunOptions(concurrency, step_timeout, timeout, missing_field, max_steps, max_output_chars,
                             review_handler, review_mode, plans, max_items=max_items, workers=queue,
                             max_bytes=max_bytes, run_name=name)
        return await run_parsed(await to_parsed(plan, options), as_toolset(tools), options,
                                context=ToolCallContext.of(context), on_event=on_event, run_id=run_id)


def run_plan_sync(
    plan: Plan | str | bytes | Mapping[str, Any],
    tools: Toolset | Iterable[ToolsetItem],
    *,
    concurrency: int | None = None,
    step_timeout: float | None = None,
    timeout: float | None = None,
    missing_field: MissingField = 'error',
    max_steps: int = DEFAULT_MAX_STEPS,
    max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
    review_handler: ReviewHandler | None = None,
    review_mode: ReviewMode = 'per_step',
    context: Mapping[str, Any] | None = None,
    on_event: EventHandler | None = None,
    store: StoreLike | None = None,
    run_id: str | None = None,
    max_items: int = DEFAULT_MAX_ITEMS,
    workers: bool | str = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    name: str | None = None,
) -> PlanRun:
    """`run_plan` for scripts with no event loop running (the same arguments)."""
    return anyio.run(partial(run_plan, plan, tools, concurrency=concurrency, step_timeout=step_timeout,
                             timeout=timeout, missing_field=missing_field, max_steps=max_steps,
                             max_output_chars=max_output_chars, review_handler=review_handler,
                             review_mode=review_mode, context=context, on_event=on_event, store=store,
                             run_id=run_id, max_items=max_items, workers=workers, max_bytes=max_bytes,
                             name=name))
