"""`toolweave run` and `toolweave validate`: run or check a plan file against a set of tools.

Exit codes: 0 the plan is valid / every step succeeded; 1 the plan is invalid, a step did not succeed, or the
run was stopped; 2 bad command-line input (missing or unreadable file, not JSON, bad `--tools`).
"""

from __future__ import annotations

import enum
import json
import logging
import sys
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
from toolweave.cli._common import ToolsOption, load_tools
from toolweave.cli._render import LiveSteps, count, format_event, render_report
from toolweave.exceptions import ApprovalPending, PlanStoreError, PlanValidationError, ToolweaveError
from toolweave.plan import Plan, PlanRun, parse_plan, run_plan, validate_plan
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


def _review_handler(review: Review) -> ReviewHandler:

    if review is Review.approve:
        return AutoApproveHandler()
    if review is Review.reject:
        return _RejectAll()
    if review is Review.park:
        return _ParkAll()
    return ConsoleReviewHandler()  # prompts on stderr, so `--json` output on stdout stays clean


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
                                                'them all for `toolweave runs approve` (park, needs --store).')
                      ] = Review.ask,
    store: Annotated[str | None, typer.Option('--store', metavar='URL', help='Run durably in this plan store '
                                              '(sqlite:///runs.db, a file path, or postgresql://...): `toolweave runs '
                                              'resume` goes on after a crash or a parked step.')] = None,
    run_id: Annotated[str | None, typer.Option('--run-id', metavar='ID', help="The durable run's id (default: a new "
                                               'one, printed).')] = None,
    workers: Annotated[bool, typer.Option('--workers', help='Send each step to the worker processes of the queue '
                                          '(`toolweave worker`) in the --store database.')] = False,
    queue: Annotated[str, typer.Option('--queue', metavar='NAME', help='The worker queue (with --workers).')
                     ] = DEFAULT_QUEUE,
    json_output: JsonOption = False,
) -> None:
    """Run a plan: live step status, then a timeline, the summary the model would see, and totals."""
    if workers and store is None:
        raise typer.BadParameter('the worker queue lives in the store database: give --store too',
                                 param_hint='--workers')

    if review is Review.park and store is None:
        raise typer.BadParameter('parked steps wait in a plan store: add --store URL (e.g. --store '
                                 'sqlite:///runs.db), or choose another --review', param_hint='--review park')
    console = _console()
    toolset = load_tools(tools)
    plan = _checked_plan(load_plan_file(plan_file), toolset, console, as_json=json_output)
    _quiet_library_logs()
    gated = any(toolset.get(step.tool).definition.metadata.requires_approval for step in plan.steps
                if not step.is_select)
    # Approval prompts and a redrawing live table would overwrite each other: prompts get the plain event log.
    live = not json_output and console.is_terminal and not (gated and review in (Review.ask, Review.plan))
    view = LiveSteps(plan, waves=_waves(plan, toolset) if live else ())

    def on_event(event: Any) -> None:
        view.on_event(event)
        if not json_output and not live:
            console.print(Text(format_event(event)), soft_wrap=True)  # log lines: never wrapped or cut

    execute = partial(run_plan, plan, toolset, concurrency=concurrency, step_timeout=step_timeout, timeout=timeout,
                      on_event=on_event, review_handler=_review_handler(review) if gated else None,
                      review_mode='whole_plan' if review is Review.plan else 'per_step', store=store, run_id=run_id,
                      workers=queue if workers else False)
    try:
        if live:
            with Live(view, console=console, refresh_per_second=12, transient=True):
                run = anyio.run(execute)
        else:
            run = anyio.run(execute)
    except PlanValidationError as exc:
        _fail_invalid(console, list(exc.problems) or [str(exc)], as_json=json_output)
    except PlanStoreError as exc:
        console.print(Text(f'Plan store: {exc}', style='bold red'))
        raise typer.Exit(1) from None
    except ToolweaveError as exc:  # a configuration error or an exit-early signal stopped the plan
        if json_output:
            typer.echo(json.dumps({'stopped': True, 'error': f'{type(exc).__name__}: {exc}'}, indent=2))
        else:
            console.print(Text(f'Plan stopped: {type(exc).__name__}: {exc}', style='bold red'))
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        console.print(Text('Interrupted.', style='bold red'))
        raise typer.Exit(130) from None
    _report(console, run, as_json=json_output)
    if run.run_id is not None and not json_output:
        state = 'suspended: decide its parked steps with `toolweave runs approve`' if run.suspended else 'stored'
        console.print(Text(f'Run {run.run_id} {state} (store {store}).', style='bold'))
    if not run.ok:
        raise typer.Exit(1)


def _quiet_library_logs() -> None:
    # Without logging configured, Python prints warnings (each failed tool call) to stderr through its
    # last-resort handler, in the middle of the live view; the view already shows every failure.
    if not logging.getLogger().handlers:
        library = logging.getLogger('toolweave')
        if not library.handlers:
            library.addHandler(logging.NullHandler())


def _report(console: Console, run: PlanRun, *, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(run.to_dict(), indent=2, default=str))
        return
    if not console.is_terminal:
        console.print()
    console.print(render_report(run, console.width))
