"""`toolweave runs list | show | resume | approve`: stored plan runs (see `toolweave.plan.durable`).

Every command takes `--store URL` (or the `TOOLWEAVE_STORE` environment variable; default
`sqlite:///toolweave-runs.db`). Exit codes (`ExitCode`): 0 done; 1 the run did not end well (a step failed) or the
store failed; 2 bad input (an unknown run, a decision for a step that is not parked, a bad store URL); 3 `resume`
ended with steps still parked, waiting for a decision.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from toolweave.approval import ReviewDecision
from toolweave.cli._app import CommandGroup, app
from toolweave.cli._common import DEFAULT_STORE, ExitCode, StoreOption, ToolsOption, load_tools, run_exit_code
from toolweave.cli._logs import show_library_warnings
from toolweave.cli._render import STATUS_STYLES
from toolweave.exceptions import DecisionError, PlanStoreError, PlanValidationError, RunInUseError, UnknownRunError
from toolweave.plan.durable import PlanStore, Transition, decide_sync, open_store, resume_plan_sync

__all__ = ('runs_app',)

runs_app = typer.Typer(name='runs', help='Stored plan runs: list them, show one, resume one, decide a parked step.',
                       cls=CommandGroup, no_args_is_help=True, rich_markup_mode=None)
app.add_typer(runs_app)

RunArgument = Annotated[str, typer.Argument(metavar='RUN_ID', help='The run id.', show_default=False)]
JsonOption = Annotated[bool, typer.Option('--json', help='Print machine-readable JSON only.')]


def _open(store: str) -> PlanStore:
    try:
        return open_store(store)
    except PlanStoreError as exc:
        typer.echo(f'toolweave runs: {exc}', err=True)
        raise typer.Exit(ExitCode.USAGE) from None


def _fail(exc: Exception, code: int) -> typer.Exit:
    typer.echo(f'toolweave runs: {exc}', err=True)
    return typer.Exit(code)


@runs_app.command('list')
def list_command(store: StoreOption = DEFAULT_STORE, limit: Annotated[int, typer.Option(min=1)] = 50,
                 json_output: JsonOption = False) -> None:
    """The stored runs, most recently updated first."""
    plans = _open(store)
    try:
        runs = plans.runs(limit)
    except PlanStoreError as exc:
        raise _fail(exc, ExitCode.FAILED) from None
    finally:
        plans.close()
    if json_output:
        typer.echo(json.dumps([{'run_id': r.run_id, 'status': r.status, 'steps': len(json.loads(r.plan)['steps']),
                                'updated_at': r.updated_at, 'owner': r.owner} for r in runs], indent=2))
        return
    table = Table('run', 'status', 'steps', 'updated', 'held by')
    for r in runs:
        table.add_row(r.run_id, r.status, str(len(json.loads(r.plan)['steps'])), _when(r.updated_at), r.owner or '')
    Console(highlight=False).print(table)


@runs_app.command('show')
def show_command(run_id: RunArgument, store: StoreOption = DEFAULT_STORE, json_output: JsonOption = False) -> None:
    """One run: its status and each step's last transition (why a parked step waits)."""
    plans = _open(store)
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
    if json_output:
        typer.echo(json.dumps({'run_id': info.run_id, 'status': info.status, 'plan_hash': info.plan_hash,
                               'owner': info.owner, 'created_at': info.created_at, 'updated_at': info.updated_at,
                               'options': json.loads(info.options), 'steps': steps}, indent=2, default=str))
        return
    console = Console(highlight=False)
    held = f', held by {info.owner}' if info.owner else ''
    console.print(Text(f'Run {info.run_id}: {info.status}', style='bold'),
                  Text(f'(plan {info.plan_hash[:12]}, updated {_when(info.updated_at)}{held})'))
    table = Table('step', 'tool', 'status', 'when', 'output / why')
    for row in steps:
        said = row['error'] or row['output'] or ''
        table.add_row(row['id'], row['tool'], Text(row['status'], style=STATUS_STYLES.get(row['status'], '')),
                      _when(row['at']), Text(said if len(said) <= 200 else said[:200] + '...'))
    console.print(table)
    parked = [row['id'] for row in steps if row['status'] == 'parked']
    if parked:
        console.print(f'Parked: {", ".join(parked)}. Decide with `toolweave runs approve {info.run_id} STEP` '
                      '(--reject REASON, --edit JSON), then `toolweave runs resume`.', markup=False)


@runs_app.command('approve')
def approve_command(
    run_id: RunArgument,
    step_id: Annotated[str, typer.Argument(metavar='STEP_ID', help='The parked step.', show_default=False)],
    reject: Annotated[str | None, typer.Option('--reject', metavar='REASON', help='Reject instead: the step fails '
                                               'and its dependents are skipped.')] = None,
    edit: Annotated[str | None, typer.Option('--edit', metavar='JSON', help='Approve with these arguments instead '
                                             '(a JSON object).')] = None,
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
    try:
        decide_sync(run_id, step_id, decision, store=store)
    except (UnknownRunError, DecisionError) as exc:
        raise _fail(exc, ExitCode.USAGE) from None
    except PlanStoreError as exc:
        raise _fail(exc, ExitCode.USAGE if 'Cannot open' in str(exc) else ExitCode.FAILED) from None
    resume = f'`toolweave runs resume {run_id} --tools MODULE:ATTRIBUTE`'
    if decision.kind == 'exit_early':
        typer.echo(f'{step_id} rejected: {resume} records it as failed and skips the steps that depend on it.')
    else:
        verb = 'approved' if decision.kind == 'continue' else 'approved with new arguments'
        typer.echo(f'{step_id} {verb}: {resume} runs it.')


@runs_app.command('resume')
def resume_command(run_id: RunArgument, tools: ToolsOption, store: StoreOption = DEFAULT_STORE,
                   json_output: JsonOption = False) -> None:
    """Go on with a stored run (after a crash, Ctrl-C, or once parked steps have decisions): no finished step runs
    again."""
    toolset = load_tools(tools)
    show_library_warnings()
    try:
        run = resume_plan_sync(run_id, toolset, store=store)
    except (UnknownRunError, PlanValidationError) as exc:
        raise _fail(exc, ExitCode.USAGE) from None
    except PlanStoreError as exc:
        raise _fail(exc, ExitCode.USAGE if 'Cannot open' in str(exc) else ExitCode.FAILED) from None
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


def _when(at: float | None) -> str:
    if at is None:
        return ''
    import datetime

    return datetime.datetime.fromtimestamp(at).strftime('%Y-%m-%d %H:%M:%S')
