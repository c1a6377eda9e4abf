"""`toolweave run` and `toolweave validate`: run or check a plan file against a set of tools.

Exit codes (`ExitCode`): 0 the plan is valid / every step succeeded; 1 the plan is invalid, a step did not succeed,
or the run was stopped; 2 bad command-line input (missing or unreadable file, not JSON, bad `--tools`, a store
that cannot be opened); 3 steps are parked waiting for a decision; 130 Ctrl-C.
"""

from __future__ import annotations

import enum
import json
import sys
import uuid
from functools import partial
from pathlib import Path
from typing import Annotated, Any, NoReturn

import anyio
import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from toolweave.approval import (
    AutoApproveHandler,
    ConsoleReviewHandler,
    PlanReviewDecision,
    PlanReviewRequest,
    ReviewDecision,
    ReviewHandler,
    ReviewRequest,
)
from toolweave.cli._app import app
from toolweave.cli._common import STORE_ENV, ExitCode, ToolsOption, load_tools, run_exit_code
from toolweave.cli._logs import show_library_warnings
from toolweave.cli._render import STATUS_LABELS, LiveSteps, count, format_event, render_report
from toolweave.exceptions import (
    ApprovalPending,
    PlanMismatchError,
    PlanStoreError,
    PlanValidationError,
    RunInUseError,
    ToolweaveError,
)
from toolweave.plan import Plan, PlanRun, Retries, parse_plan, run_plan, validate_plan
from toolweave.plan.workers import DEFAULT_QUEUE
from toolweave.tools import Tool, ToolArguments, ToolCallContext, ToolDefinition, ToolResult, Toolset

__all__ = ('load_plan_file', 'run_command', 'validate_command')

PlanArgument = Annotated[
    Path,
    typer.Argument(metavar='PLAN.json', help='A plan file (`-` for standard input): id-based '
                                            '(`steps[].id/tool/arguments`) or index-based (`goal`, '
                                            '`steps[].tool/args/description`).',
                   show_default=False),
]
JsonOption = Annotated[bool, typer.Option('--json', help='Print machine-readable JSON only.')]


def load_plan_file(path: Path) -> Any:
    """The JSON data in `path` (`-` reads standard input), or a usage error (exit 2) that says what is wrong."""
    hint = 'PLAN.json'
    if str(path) == '-':
        return _parse_json(sys.stdin.read(), 'standard input')
    if not path.exists():
        raise typer.BadParameter(f'Plan file not found: {str(path)!r}. Check the path (relative to {Path.cwd()}).',
                                 param_hint=hint)
    if path.is_dir():
        raise typer.BadParameter(f'{str(path)!r} is a directory, not a plan file. Pass a .json file inside it.',
                                 param_hint=hint)
    try:
        text = path.read_text(encoding='utf-8')
    except UnicodeDecodeError as exc:
        raise typer.BadParameter(f'Plan file {str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start}). '
                                 'Save it as UTF-8 JSON.', param_hint=hint) from None
    except OSError as exc:
        raise typer.BadParameter(f'Cannot read plan file {str(path)!r}: {exc.strerror or exc}.',
                                 param_hint=hint) from None
    return _parse_json(text, f'Plan file {str(path)!r}')


def _parse_json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:  # too deep to load here: pass the text on, so validation reports it with its location
        return text
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(
            f'{where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}. '
            'A plan is a JSON object such as {"steps": [{"id": "a", "tool": "...", "arguments": {}}]}.',
            param_hint='PLAN.json') from None


def _fail_invalid(console: Console, problems: list[str], *, as_json: bool) -> NoReturn:
    if as_json:
        typer.echo(json.dumps({'valid': False, 'problems': problems}, indent=2))
    else:
        console.print(Text(f'Plan is invalid ({count(len(problems), "problem")}):',
                           style='bold red'))
        listing = Table.grid(padding=(0, 1))
        listing.add_column(no_wrap=True)
        listing.add_column()  # long problems wrap under their own text, not under the bullet
        for problem in problems:
            listing.add_row('  -', Text(problem))
        console.print(listing)
    raise typer.Exit(1)


def _checked_plan(data: Any, toolset: Toolset, console: Console, *, as_json: bool) -> Plan:
    """The parsed plan, or exit 1 listing every problem (structure, ids, tools, references, cycles at once)."""

    problems = validate_plan(data, toolset)
    if problems:
        _fail_invalid(console, problems, as_json=as_json)
    try:
        return parse_plan(data)
    except PlanValidationError as exc:  # validate_plan found nothing, so this should not happen; stay clean
        _fail_invalid(console, list(exc.problems) or [str(exc)], as_json=as_json)


def _console() -> Console:
    # Created per command, so it writes to whatever stdout is at call time (pipes, test runners).
    return Console(highlight=False, soft_wrap=False)


@app.command('validate')
def validate_command(plan_file: PlanArgument, tools: ToolsOption, json_output: JsonOption = False) -> None:
    """Check a plan against the tools without running anything: print every problem, or its shape."""
    console = _console()
    toolset = load_tools(tools)
    plan = _checked_plan(load_plan_file(plan_file), toolset, console, as_json=json_output)
    waves = _waves(plan, toolset)
    if json_output:
        typer.echo(json.dumps({'valid': True, 'steps': len(plan.steps), 'waves': [list(w) for w in waves]}, indent=2))
        return
    console.print(Text(f'Plan is valid: {count(len(plan.steps), "step")}, {count(len(waves), "wave")}',
                       style='bold green'))
    for index, wave in enumerate(waves):
        console.print(Text(f'  wave {index}: {", ".join(wave)}'))


def _waves(plan: Plan, toolset: Toolset) -> tuple[tuple[str, ...], ...]:
    """The plan's waves, computed by the executor itself: a dry run against instant stand-ins of the tools
    (same names and schemas, nothing real is called), so the grouping is exactly what `run` would use."""

    names = dict.fromkeys(step.tool for step in plan.steps if not step.is_select)
    stand_ins = Toolset([_StandIn(toolset.get(name).definition) for name in names])
    return anyio.run(partial(run_plan, plan, stand_ins)).waves


class _StandIn(Tool):
    def __init__(self, definition: ToolDefinition) -> None:
        self._definition = definition.with_metadata(requires_approval=False)

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        return ToolResult.success('{}', {})


class OnDeadlineChoice(enum.StrEnum):
    reject = 'reject'
    escalate = 'escalate'


class Review(enum.StrEnum):
    """How `toolweave run` answers approval requests."""

    ask = 'ask'
    plan = 'plan'
    approve = 'approve'
    reject = 'reject'
    park = 'park'


class _RejectAll:
    async def review(self, request: ReviewRequest) -> ReviewDecision:
        return ReviewDecision.reject('rejected by `toolweave run --review reject`')

    async def review_plan(self, request: PlanReviewRequest) -> PlanReviewDecision:
        return PlanReviewDecision.reject('rejected by `toolweave run --review reject`')


class _ParkAll:
    async def review(self, request: ReviewRequest) -> ReviewDecision:
        raise ApprovalPending('parked by `toolweave run --review park`')


def _review_handler(review: Review, log: _EventLog) -> ReviewHandler:
    if review is Review.approve:
        return AutoApproveHandler()
    if review is Review.reject:
        return _RejectAll()
    if review is Review.park:
        return _ParkAll()
    return _HoldingReviewer(ConsoleReviewHandler(), log)  # prompts on stderr: `--json` output on stdout stays clean


@app.command('run')
def run_command(
    plan_file: PlanArgument,
    tools: ToolsOption,
    concurrency: Annotated[int | None, typer.Option('--concurrency', min=1, metavar='N', show_default='unlimited',
                                                    help='At most this many steps run at once.')] = None,
    step_timeout: Annotated[float | None, typer.Option('--step-timeout', min=0.001, metavar='SECONDS',
                                                       help='Fail a step that runs longer than this.')] = None,
    timeout: Annotated[float | None, typer.Option('--timeout', min=0.001, metavar='SECONDS',
                                                  help='Cancel the steps still running after this.')] = None,
    review: Annotated[Review, typer.Option('--review', case_sensitive=False,
                                           help='Steps whose tool requires approval: ask at the terminal as each is '
                                                'ready (ask), show the whole plan at the terminal once before '
                                                'anything runs (plan), approve them all, reject them all, or park '
                                                'them all for `toolweave runs approve` (park, needs a store).')
                      ] = Review.ask,
    store: Annotated[str | None, typer.Option('--store', envvar=STORE_ENV, metavar='URL', show_default=False,
                                              help=f'Run durably in this plan store (sqlite:///runs.db, a file path, '
                                                   f'or postgresql://...): `toolweave runs resume` goes on after a '
                                                   f'crash, Ctrl-C or a parked step. Default: the {STORE_ENV} '
                                                   'environment variable; without either the run is kept in memory '
                                                   'only.')] = None,
    run_id: Annotated[str | None, typer.Option('--run-id', metavar='ID', help="The durable run's id (default: a new "
                                               'one, printed). Needs a store.')] = None,
    workers: Annotated[bool, typer.Option('--workers', help='Send each step to the worker processes of the queue '
                                          '(`toolweave worker`) in the store database.')] = False,
    queue: Annotated[str, typer.Option('--queue', metavar='NAME', help='The worker queue (with --workers).')
                     ] = DEFAULT_QUEUE,
    retries: Annotated[int | None, typer.Option('--retries', min=1, metavar='N',
                                                help='Try a step whose tool raised an error up to N times in all, '
                                                     'waiting 0.5 s, then 1 s, and so on, between tries (a tool '
                                                     'with its own policy keeps it).', show_default=False)] = None,
    name: Annotated[str | None, typer.Option('--name', metavar='NAME', help='A label to find the stored run by '
                                             '(`toolweave runs list --name`). Needs a store.',
                                             show_default=False)] = None,
    decision_deadline: Annotated[float | None, typer.Option(
        '--decision-deadline', min=0.001, metavar='SECONDS', show_default='7 days',
        help='How long a step parked for a review waits for its decision. Needs a store.')] = None,
    on_deadline: Annotated[OnDeadlineChoice, typer.Option(
        '--on-deadline', case_sensitive=False, help='A parked review past its deadline: reject it, or escalate '
                                                    '(the next resume asks the reviewers at hand again).')
                           ] = OnDeadlineChoice.reject,
    wait_for_decisions: Annotated[float | None, typer.Option(
        '--wait-for-decisions', min=0, metavar='SECONDS', show_default=False,
        help='Keep the run while steps are parked, going on as each decision arrives (from `toolweave runs '
             'approve`, the UI, any process), for up to this long. Needs a store.')] = None,
    json_output: JsonOption = False,
) -> None:
    """Run a plan: live step status, then a timeline, the summary the model would see, and totals.

    Exit codes: 0 every step succeeded; 1 a step failed or the run stopped; 2 bad input; 3 steps are parked
    waiting for `toolweave runs approve`; 130 Ctrl-C (with a store, the run id and how to resume it are printed).
    """
    for needs, option, why in ((workers, '--workers', "the worker queue lives in the plan store's database"),
                               (review is Review.park, '--review park', 'parked steps wait in a plan store'),
                               (run_id is not None, '--run-id', 'a run id names a run kept in a plan store'),
                               (name is not None, '--name', 'a name labels a run kept in a plan store'),
                               (decision_deadline is not None, '--decision-deadline',
                                'a deadline applies to steps parked in a plan store'),
                               (wait_for_decisions is not None, '--wait-for-decisions',
                                'decisions arrive through a plan store')):
        if needs and store is None:
            raise typer.BadParameter(f'{why}: add --store URL (e.g. --store sqlite:///runs.db) or set {STORE_ENV}, '
                                     f'or leave out {option}', param_hint=option)
    console = _console()
    toolset = load_tools(tools)
    plan = _checked_plan(load_plan_file(plan_file), toolset, console, as_json=json_output)
    show_library_warnings()
    if store is not None and run_id is None:
        run_id = uuid.uuid4().hex  # chosen here, so an interrupted run can still be named for `runs resume`
    gated = any(toolset.get(step.tool).definition.metadata.requires_approval for step in plan.steps
                if not step.is_select)
    prompts = gated and review in (Review.ask, Review.plan)
    # Approval prompts and a redrawing live table would overwrite each other: prompts get the plain event log.
    live = not json_output and console.is_terminal and not prompts
    view = LiveSteps(plan, waves=_waves(plan, toolset) if live else ())
    log = _EventLog(console, enabled=not json_output and not live)

    def on_event(event: Any) -> None:
        view.on_event(event)
        log.line(format_event(event))

    deadline: dict[str, Any] = {} if decision_deadline is None else {'decision_deadline': decision_deadline}
    execute = partial(run_plan, plan, toolset, concurrency=concurrency, step_timeout=step_timeout, timeout=timeout,
                      on_event=on_event, review_handler=_review_handler(review, log) if gated else None,
                      review_mode='whole_plan' if review is Review.plan else 'per_step', store=store, run_id=run_id,
                      workers=queue if workers else False, name=name, on_deadline=on_deadline.value,
                      retries=None if retries is None else Retries(attempts=retries),
                      wait_for_decisions=wait_for_decisions, **deadline)
    try:
        if live:
            with Live(view, console=console, refresh_per_second=12, transient=True):
                run = anyio.run(execute)
        else:
            run = anyio.run(execute)
    except KeyboardInterrupt:
        log.flush()
        _interrupted(Console(stderr=True, highlight=False) if json_output else console, view, store=store,
                     run_id=run_id, tools=tools)  # with --json, stdout keeps nothing but JSON
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    except PlanValidationError as exc:
        _fail_invalid(console, list(exc.problems) or [str(exc)], as_json=json_output)
    except PlanMismatchError:
        _stop(console, f'Run {run_id!r} in {store} was started with another plan. Give this plan a new --run-id, or '
                       f'go on with the stored one: toolweave runs resume {run_id} --store {store} --tools {tools}',
              ExitCode.USAGE)
    except RunInUseError as exc:
        _stop(console, str(exc), ExitCode.FAILED)
    except PlanStoreError as exc:
        _stop(console, f'Plan store: {exc}', ExitCode.USAGE if 'Cannot open' in str(exc) else ExitCode.FAILED)
    except ToolweaveError as exc:  # a configuration error or an exit-early signal stopped the plan
        if json_output:
            typer.echo(json.dumps({'stopped': True, 'error': f'{type(exc).__name__}: {exc}'}, indent=2))
            raise typer.Exit(ExitCode.FAILED) from None
        _stop(console, f'Plan stopped: {type(exc).__name__}: {exc}', ExitCode.FAILED)
    _report(console, run, as_json=json_output)
    if run.run_id is not None and not json_output:
        console.print(Text(_stored_line(run, store, tools), style='bold'), soft_wrap=True)
    raise typer.Exit(run_exit_code(run))


def _stored_line(run: PlanRun, store: str | None, tools: str) -> str:
    where = f'--store {store}'
    if run.suspended:
        return (f'Run {run.run_id} waits for decisions (store {store}): `toolweave runs show {run.run_id} {where}`, '
                f'`toolweave runs approve {run.run_id} STEP {where}`, then `toolweave runs resume {run.run_id} '
                f'{where} --tools {tools}`.')
    return f'Run {run.run_id} stored (store {store}).'


def _stop(console: Console, message: str, code: ExitCode) -> NoReturn:
    console.print(Text(message, style='bold red'), soft_wrap=True)
    raise typer.Exit(code)


def _interrupted(console: Console, view: LiveSteps, *, store: str | None, run_id: str | None, tools: str) -> None:
    """After Ctrl-C: what had finished (the live table is gone), and how to go on with a stored run."""
    finished = view.finished()
    console.print(Text(f'Interrupted: {count(len(finished), "step")} of {view.total} had finished.',
                       style='bold red'), soft_wrap=True)
    for record in finished:
        said = record.error or record.output or ''
        console.print(Text(f'  {STATUS_LABELS.get(record.status, record.status):<9} {record.id}: ')
                      + Text(' '.join(said.split())[:200]), soft_wrap=True)
    if store is not None and run_id is not None:
        console.print(Text(f'Run {run_id} is stored: `toolweave runs resume {run_id} --store {store} --tools {tools}` '
                           'goes on without running a finished step again.', style='bold'), soft_wrap=True)


class _EventLog:
    """The plain event lines (`[  12 ms] started ...`), held back while an approval prompt is on screen so that
    the question and its answer are not broken up by progress from other steps."""

    def __init__(self, console: Console, *, enabled: bool) -> None:
        self.console = console
        self.enabled = enabled
        self.asking = 0
        self.held: list[str] = []

    def line(self, text: str) -> None:
        if not self.enabled:
            return
        if self.asking:
            self.held.append(text)
        else:
            self.console.print(Text(text), soft_wrap=True)  # log lines: never wrapped or cut

    def flush(self) -> None:
        held, self.held = self.held, []
        for text in held:
            self.console.print(Text(text), soft_wrap=True)


class _HoldingReviewer:
    """The console reviewer, with the event log on hold from the moment a review is asked until it is answered."""

    applies_timeout = True  # the console reviewer starts the clock once its prompt is on screen

    def __init__(self, reviewer: ConsoleReviewHandler, log: _EventLog) -> None:
        self.reviewer = reviewer
        self.log = log

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        self.log.asking += 1
        try:
            return await self.reviewer.review(request)
        finally:
            self._done()

    async def review_plan(self, request: PlanReviewRequest) -> PlanReviewDecision:
        self.log.asking += 1
        try:
            return await self.reviewer.review_plan(request)
        finally:
            self._done()

    def _done(self) -> None:
        self.log.asking -= 1
        if not self.log.asking:
            self.log.flush()


def _report(console: Console, run: PlanRun, *, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(run.to_dict(), indent=2, default=str))
        return
    if not console.is_terminal:
        console.print()
    console.print(render_report(run, console.width))
