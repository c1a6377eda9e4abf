"""`toolweave runs list | show | approve | retry | resolve | resume | cancel | prune | recover`: stored plan runs (see
`toolweave.plan.durable`).

Every command takes `--store URL` (or the `TOOLWEAVE_STORE` environment variable; default
`sqlite:///toolweave-runs.db`); `list` and `show` open it only to read (a wrong path is an error, not a new empty
file). Exit codes (`ExitCode`): 0 done; 1 the run did not end well (a step failed) or the store failed; 2 bad input
(an unknown run, a decision for a step that is not parked, a bad store URL or filter, a run that cannot be
cancelled or resumed); 3 `resume` ended with steps still parked, waiting for a decision.
"""

from __future__ import annotations

import datetime
import json
import signal
from typing import Annotated, Any, get_args

import anyio
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from toolweave.approval import ReviewDecision
from toolweave.cli._app import CommandGroup, app
from toolweave.cli._common import DEFAULT_STORE, ExitCode, StoreOption, ToolsOption, load_tools, run_exit_code
from toolweave.cli._logs import show_library_warnings
from toolweave.cli._render import STATUS_STYLES
from toolweave.exceptions import (
    DecisionError,
    PlanStoreError,
    PlanValidationError,
    RunCancelledError,
    RunInUseError,
    UnknownRunError,
    UserError,
)
from toolweave.plan.durable import (
    ListedRun,
    PlanStore,
    Recovery,
    RunState,
    Transition,
    cancel_run_sync,
    decide_sync,
    list_runs_sync,
    open_store,
    prune_runs_sync,
    recover_runs_sync,
    resolve_step_sync,
    resume_plan_sync,
    retry_step_sync,
    watch_runs,
)

__all__ = ('runs_app',)

runs_app = typer.Typer(name='runs', help='Stored plan runs: list, show, decide, retry, resume, cancel, prune, '
                       'recover.',
                       cls=CommandGroup, no_args_is_help=True, rich_markup_mode=None)
app.add_typer(runs_app)

RunArgument = Annotated[str, typer.Argument(metavar='RUN_ID', help='The run id.', show_default=False)]
JsonOption = Annotated[bool, typer.Option('--json', help='Print machine-readable JSON only.')]
WHEN_HELP = 'a time: 2026-11-20, 2026-11-20T14:00 (local time), or a time ago: 90m, 12h, 7d'
STATES: dict[str, RunState] = {state: state for state in get_args(RunState)}
RUN_STYLES = {'running': 'yellow', 'crashed': 'bold red', 'suspended': 'cyan', 'finished': 'green',
              'stopped': 'magenta', 'cancelled': 'dim'}


def _open(store: str, *, read_only: bool = False) -> PlanStore:
    try:
        return open_store(store, read_only=read_only)
    except PlanStoreError as exc:
        typer.echo(f'toolweave runs: {exc}', err=True)
        raise typer.Exit(ExitCode.USAGE) from None


def _fail(exc: Exception, code: int) -> typer.Exit:
    typer.echo(f'toolweave runs: {exc}', err=True)
    return typer.Exit(code)


def _store_failed(exc: PlanStoreError) -> typer.Exit:
    """A store that cannot be opened is bad input; one that fails once opened is a failure."""
    return _fail(exc, ExitCode.USAGE if 'Cannot open' in str(exc) else ExitCode.FAILED)


# --- list and show ------------------------------------------------------------------------------------------------

@runs_app.command('list')
def list_command(
    store: StoreOption = DEFAULT_STORE,
    status: Annotated[list[str] | None, typer.Option(
        '--status', metavar='STATUS', help='Only runs in this state (repeat for several): running, crashed (its '
        'process is gone), suspended, finished, stopped, cancelled.', show_default=False)] = None,
    name: Annotated[str | None, typer.Option('--name', metavar='NAME', help='Only runs with this name (the name '
                                             "given to run_plan, or an agent's name).", show_default=False)] = None,
    since: Annotated[str | None, typer.Option('--since', metavar='WHEN', help=f'Only runs updated since {WHEN_HELP}.',
                                              show_default=False)] = None,
    until: Annotated[str | None, typer.Option('--until', metavar='WHEN', help=f'Only runs updated before {WHEN_HELP}.',
                                              show_default=False)] = None,
    waiting: Annotated[bool, typer.Option('--waiting', help='Only runs with a step waiting for a decision.')] = False,
    limit: Annotated[int, typer.Option('--limit', min=1, max=1000, metavar='N', help='Runs per page.')] = 50,
    after: Annotated[str | None, typer.Option('--after', metavar='CURSOR', help='The next page: the cursor the '
                                              'previous page printed.', show_default=False)] = None,
    json_output: JsonOption = False,
) -> None:
    """The stored runs, most recently updated first, a page at a time."""
    try:
        page = list_runs_sync(_open(store, read_only=True), status=_states(status), name=name, since=since,
                              until=until, waiting=waiting, limit=limit, after=after)
    except UserError as exc:
        raise typer.BadParameter(str(exc)) from None
    except PlanStoreError as exc:
        raise _store_failed(exc) from None
    if json_output:
        typer.echo(json.dumps({'runs': [run.to_dict() for run in page.runs], 'cursor': page.cursor}, indent=2))
        return
    table = Table('run', 'name', 'status', 'steps', 'waiting', 'updated', 'held by')
    for run in page.runs:
        table.add_row(run.run_id, run.name or '', _state(run), str(run.steps), str(run.waiting or ''),
                      _time(run.updated_at), run.owner or '')
    console = Console(highlight=False)
    console.print(table)
    if page.cursor is not None:
        console.print(f'More: add `--after {page.cursor}` for the next page.', markup=False, soft_wrap=True)


def _state(run: ListedRun) -> Text:
    label = run.status + (' (cancel requested)' if run.cancel_requested_at is not None and run.status == 'running'
                          else '')
    return Text(label, style=RUN_STYLES.get(run.status, ''))


def _states(given: list[str] | None) -> list[RunState] | None:
    if not given:
        return None
    wrong = [state for state in given if state not in STATES]
    if wrong:
        raise typer.BadParameter(f'status must be one or more of {", ".join(STATES)}, got {wrong[0]!r}',
                                 param_hint='--status')
    return [STATES[state] for state in given]


@runs_app.command('show')
def show_command(run_id: RunArgument, store: StoreOption = DEFAULT_STORE, json_output: JsonOption = False) -> None:
    """One run: its status and each step's last transition (why a parked step waits)."""
    plans = _open(store, read_only=True)
    try:
        stored = plans.load(run_id)
    except UnknownRunError as exc:
        raise _fail(exc, ExitCode.USAGE) from None
    except PlanStoreError as exc:
        raise _fail(exc, ExitCode.FAILED) from None
    finally:
        plans.close()
    plan = json.loads(stored.info.plan)
    last: dict[str, Transition] = {}
    for transition in stored.transitions:
        if transition.item is None and transition.status != 'ready':
            last[transition.step_id] = transition
    steps = []
    for step in plan['steps']:
        t = last.get(step['id'])
        steps.append({'id': step['id'], 'tool': step['tool'], 'status': 'pending' if t is None else t.status,
                      'at': None if t is None else t.at, 'error': None if t is None else t.error,
                      'output': None if t is None else t.output,
                      'detail': None if t is None or t.detail is None else json.loads(t.detail)})
    info = stored.info
    state = info.state
    if json_output:
        typer.echo(json.dumps({'run_id': info.run_id, 'name': info.name, 'status': state, 'plan_hash': info.plan_hash,
                               'owner': info.owner, 'created_at': info.created_at, 'updated_at': info.updated_at,
                               'cancel_requested_at': info.cancel_requested_at, 'cancel_reason': info.cancel_reason,
                               'options': json.loads(info.options), 'steps': steps}, indent=2, default=str))
        return
    console = Console(highlight=False)
    held = f', {"was " if state == "crashed" else ""}held by {info.owner}' if info.owner else ''
    named = f' ({info.name})' if info.name else ''
    console.print(Text(f'Run {info.run_id}{named}: {state}', style='bold'),
                  Text(f'(plan {info.plan_hash[:12]}, updated {_time(info.updated_at)}{held})'))
    if info.cancel_requested_at is not None and state != 'cancelled':
        console.print(Text(f'Cancel requested at {_time(info.cancel_requested_at)}'
                           + (f': {info.cancel_reason}' if info.cancel_reason else '')))
    table = Table('step', 'tool', 'status', 'when', 'output / why')
    for row in steps:
        said = row['error'] or row['output'] or ''
        table.add_row(row['id'], row['tool'], Text(row['status'], style=STATUS_STYLES.get(row['status'], '')),
                      _time(row['at']), Text(said if len(said) <= 200 else said[:200] + '...'))
    console.print(table)
    parked = [row['id'] for row in steps if row['status'] == 'parked']
    if parked:
        console.print(f'Parked: {", ".join(parked)}. Decide with `toolweave runs approve {info.run_id} STEP` '
                      '(--reject REASON, --edit JSON), then `toolweave runs resume`.', markup=False)
    if state == 'crashed':
        console.print(f'Its process is gone: `toolweave runs resume {info.run_id} --tools MODULE:ATTRIBUTE` (or '
                      '`toolweave runs recover`) goes on with it.', markup=False)


# --- decide and resume --------------------------------------------------------------------------------------------

@runs_app.command('approve')
def approve_command(
    run_id: RunArgument,
    step_id: Annotated[str, typer.Argument(metavar='STEP_ID', help='The parked step.', show_default=False)],
    reject: Annotated[str | None, typer.Option('--reject', metavar='REASON', help='Reject instead: the step fails '
                                               'and its dependents are skipped.')] = None,
    edit: Annotated[str | None, typer.Option('--edit', metavar='JSON', help='Approve with these arguments instead '
                                             '(a JSON object).')] = None,
    tools: Annotated[str | None, typer.Option('--tools', '-t', metavar='MODULE:ATTRIBUTE', help='The tools the plan '
                                              "calls: an --edit is checked against its tool's input schema before "
                                              'it is recorded.', show_default=False)] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Record a decision for a parked step; the next `runs resume` runs it under that decision."""
    if reject is not None and edit is not None:
        raise typer.BadParameter('give --reject or --edit, not both', param_hint='--reject/--edit')
    decision = ReviewDecision.approve()
    if reject is not None:
        decision = ReviewDecision.reject(reject or None)
    elif edit is not None:
        try:
            revised: Any = json.loads(edit)
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(f'not JSON: {exc.msg} at column {exc.colno}', param_hint='--edit') from None
        if not isinstance(revised, dict):
            raise typer.BadParameter('the arguments must be a JSON object, e.g. {"to": "ada@example.com"}',
                                     param_hint='--edit')
        decision = ReviewDecision.edit(revised)
    toolset = load_tools(tools) if tools is not None else None
    try:
        decide_sync(run_id, step_id, decision, store=store, tools=toolset)
    except (UnknownRunError, DecisionError, UserError) as exc:
        raise _fail(exc, ExitCode.USAGE) from None
    except PlanStoreError as exc:
        raise _store_failed(exc) from None
    resume = f'`toolweave runs resume {run_id} --tools MODULE:ATTRIBUTE`'
    if decision.kind == 'exit_early':
        typer.echo(f'{step_id} rejected: {resume} records it as failed and skips the steps that depend on it.')
    else:
        verb = 'approved' if decision.kind == 'continue' else 'approved with new arguments'
        typer.echo(f'{step_id} {verb}: {resume} runs it.')


@runs_app.command('retry')
def retry_command(
    run_id: RunArgument,
    step_id: Annotated[str, typer.Argument(metavar='STEP_ID', help='The failed step.', show_default=False)],
    reason: Annotated[str | None, typer.Option('--reason', metavar='TEXT', help='Why (recorded).',
                                               show_default=False)] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Ask a failed step to run again; the next `runs resume` runs it, then the steps its failure skipped."""
    try:
        retry_step_sync(run_id, step_id, store=store, reason=reason)
    except (UnknownRunError, DecisionError, UserError) as exc:
        raise _fail(exc, ExitCode.USAGE) from None
    except PlanStoreError as exc:
        raise _store_failed(exc) from None
    typer.echo(f'{step_id} will run again: `toolweave runs resume {run_id} --tools MODULE:ATTRIBUTE` runs it and the '
               'steps its failure skipped.')


@runs_app.command('resolve')
def resolve_command(
    run_id: RunArgument,
    step_id: Annotated[str, typer.Argument(metavar='STEP_ID', help='The parked step.', show_default=False)],
    output: Annotated[str, typer.Option('--output', metavar='JSON|TEXT', help='What the step gave: JSON data, or '
                                        'text (what the steps that refer to it read).', show_default=False)],
    reason: Annotated[str | None, typer.Option('--reason', metavar='TEXT', help='Why (recorded).',
                                               show_default=False)] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Resolve a parked step as done (it ran, but its run could not record it; or a person did its work): it
    counts as succeeded with --output, and the next `runs resume` runs the steps that depend on it."""
    try:
        given: Any = json.loads(output)
    except json.JSONDecodeError:
        given = output  # plain text
    try:
        resolve_step_sync(run_id, step_id, given, store=store, reason=reason)
    except (UnknownRunError, DecisionError, UserError) as exc:
        raise _fail(exc, ExitCode.USAGE) from None
    except PlanStoreError as exc:
        raise _store_failed(exc) from None
    typer.echo(f'{step_id} resolved as done: `toolweave runs resume {run_id} --tools MODULE:ATTRIBUTE` runs the steps '
               'that depend on it.')


@runs_app.command('resume')
def resume_command(run_id: RunArgument, tools: ToolsOption, store: StoreOption = DEFAULT_STORE,
                   json_output: JsonOption = False,
                   wait_for_decisions: Annotated[float | None, typer.Option(
                       '--wait-for-decisions', min=0, metavar='SECONDS', show_default=False,
                       help='Keep the run while steps are parked, going on as each decision arrives, for up to '
                            'this long.')] = None) -> None:
    """Go on with a stored run (after a crash, Ctrl-C, or once parked steps have decisions): no finished step runs
    again."""
    toolset = load_tools(tools)
    show_library_warnings()
    try:
        run = resume_plan_sync(run_id, toolset, store=store, wait_for_decisions=wait_for_decisions)
    except (UnknownRunError, PlanValidationError, RunCancelledError) as exc:
        raise _fail(exc, ExitCode.USAGE) from None
    except PlanStoreError as exc:
        raise _store_failed(exc) from None
    except RunInUseError as exc:
        raise _fail(exc, ExitCode.FAILED) from None
    except KeyboardInterrupt:
        typer.echo(f'Interrupted: `toolweave runs resume {run_id} --store {store} --tools {tools}` goes on again.',
                   err=True)
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    if json_output:
        typer.echo(json.dumps(run.to_dict(), indent=2, default=str))
    else:
        console = Console(highlight=False)
        console.print(Text(f'Run {run_id}: {run.succeeded}/{run.total} succeeded, {run.failed} failed, '
                           f'{run.skipped} skipped, {run.parked} parked.', style='bold'))
        console.print(Text(run.summary))
        if run.suspended:
            parked = ', '.join(r.id for r in run.steps if r.status == 'parked')
            console.print(Text(f'Parked: {parked}. Decide with `toolweave runs approve {run_id} STEP`, then resume '
                               'again.'), soft_wrap=True)
    raise typer.Exit(run_exit_code(run))


# --- cancel, prune, recover ---------------------------------------------------------------------------------------

@runs_app.command('cancel')
def cancel_command(
    run_id: RunArgument,
    reason: Annotated[str | None, typer.Option('--reason', metavar='TEXT', help='Why: recorded with each step it '
                                               'cancels.', show_default=False)] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Cancel a run: it never runs again. A run no process holds is cancelled at once; a running one is asked to
    stop (its process stops it at its next step)."""
    try:
        done = cancel_run_sync(run_id, store=store, reason=reason)
    except (UnknownRunError, UserError) as exc:
        raise _fail(exc, ExitCode.USAGE) from None
    except PlanStoreError as exc:
        raise _store_failed(exc) from None
    if done.outcome == 'already finished':
        raise _fail(Exception(f'Run {run_id} has already finished: there is nothing to cancel.'), ExitCode.USAGE)
    if done.outcome == 'already cancelled':
        typer.echo(f'Run {run_id} was already cancelled.')
    elif done.outcome == 'requested':
        typer.echo(f'Run {run_id} is running in another process: asked it to cancel; it stops at its next step. '
                   f'`toolweave runs show {run_id}` shows when it has.')
    else:
        steps = f': {len(done.steps)} unfinished steps recorded cancelled ({", ".join(done.steps)})' if done.steps \
            else ''
        typer.echo(f'Run {run_id} cancelled{steps}.')


@runs_app.command('prune')
def prune_command(
    older_than: Annotated[str, typer.Option('--older-than', metavar='AGE', help='Delete the runs last updated longer '
                                            'ago than this: 30d, 12h, 90m, 2w.', show_default=False)],
    status: Annotated[list[str] | None, typer.Option(
        '--status', metavar='STATUS', help='Which runs (repeat for several): finished (the default), cancelled, '
        'stopped, suspended, crashed. A run a live process holds is never pruned.', show_default=False)] = None,
    dry_run: Annotated[bool, typer.Option('--dry-run', help='Count what would be deleted; delete nothing.')] = False,
    store: StoreOption = DEFAULT_STORE,
    json_output: JsonOption = False,
) -> None:
    """Delete old runs, their journal and the large outputs nothing else uses, in short transactions."""
    try:
        pruned = prune_runs_sync(_open(store), older_than=older_than, status=_states(status) or ['finished'],
                                 dry_run=dry_run)
    except UserError as exc:
        raise typer.BadParameter(str(exc)) from None
    except PlanStoreError as exc:
        raise _store_failed(exc) from None
    if json_output:
        typer.echo(json.dumps({'runs': pruned.runs, 'transitions': pruned.transitions, 'blobs': pruned.blobs,
                               'batches': pruned.batches, 'dry_run': pruned.dry_run}, indent=2))
        return
    verb = 'Would delete' if dry_run else 'Deleted'
    typer.echo(f'{verb} {pruned.runs} runs ({pruned.transitions} transitions, {pruned.blobs} large outputs) in '
               f'{pruned.batches} batches.')


@runs_app.command('recover')
def recover_command(
    tools: ToolsOption,
    store: StoreOption = DEFAULT_STORE,
    watch: Annotated[float | None, typer.Option('--watch', min=0.1, metavar='SECONDS', help='Keep looking, every '
                                                "SECONDS, until Ctrl-C or SIGTERM (a supervisor's loop).",
                                                show_default=False)] = None,
    queue: Annotated[str | None, typer.Option('--queue', metavar='NAME', help='Only the runs whose steps go to this '
                                              'worker queue.', show_default=False)] = None,
    json_output: JsonOption = False,
) -> None:
    """Resume the runs whose process died (crashed, lease lapsed): no finished step runs again. Suspended runs wait
    for decisions and are left alone; a gated step with nobody to ask parks."""
    toolset = load_tools(tools)
    show_library_warnings()
    plans = _open(store)
    try:
        if watch is not None:
            typer.echo(f'Looking for crashed runs in {plans.url} every {watch:g} s. Ctrl-C to stop.', err=True)
            signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops it as Ctrl-C does
            try:
                anyio.run(lambda: watch_runs(toolset, store=plans, every=watch, queue=queue,
                                             report=lambda done: _report(done, json_output)))
            except KeyboardInterrupt:
                typer.echo('Stopped.', err=True)
            return
        try:
            done = recover_runs_sync(toolset, store=plans, queue=queue)
        except PlanStoreError as exc:
            raise _store_failed(exc) from None
    finally:
        plans.close()
    if json_output:
        typer.echo(json.dumps([_recovery_data(r) for r in done], indent=2))
    elif not done:
        typer.echo('No crashed runs.')
    for recovery in done if not json_output else ():
        _report(recovery, False)
    if any(recovery.outcome == 'failed' for recovery in done):
        raise typer.Exit(ExitCode.FAILED)


def _recovery_data(recovery: Recovery) -> dict[str, Any]:
    return {'run_id': recovery.run_id, 'outcome': recovery.outcome, 'status': recovery.status,
            'error': recovery.error}


def _report(recovery: Recovery, json_output: bool) -> None:
    if json_output:
        typer.echo(json.dumps(_recovery_data(recovery)))
        return
    why = f': {recovery.error}' if recovery.error and recovery.outcome != 'resumed' else ''
    now = f', now {recovery.status}' if recovery.status else ''
    typer.echo(f'{recovery.run_id}: {recovery.outcome}{now}{why}')


def _time(at: float | None) -> str:
    if at is None:
        return ''
    return datetime.datetime.fromtimestamp(at).strftime('%Y-%m-%d %H:%M:%S')
