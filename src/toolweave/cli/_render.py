"""Rich renderables for plan runs: the live step table, the Gantt timeline, the summary and the totals.

Every function takes the plan API's public types and returns something `Console.print` accepts, so other
commands (the demo, the chat view) reuse them. Text that comes from tools or models is always wrapped in
`Text` (never parsed as console markup: a `[bold]` in a tool's output stays literal).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from toolweave.plan import ItemRecord, Plan, PlanEvent, PlanRun, PlanStep, StepRecord

__all__ = (
    'STATUS_LABELS',
    'STATUS_STYLES',
    'LiveSteps',
    'Timeline',
    'critical_chain',
    'format_duration',
    'format_event',
    'render_report',
    'render_summary',
    'render_timeline',
    'render_totals',
    'step_label',
)

STATUS_LABELS: Mapping[str, str] = {
    'pending': 'waiting',
    'running': 'running',
    'parked': 'parked',
    'succeeded': 'done',
    'failed': 'failed',
    'skipped': 'skipped',
    'cancelled': 'cancelled',
}
"""What each step status is called on screen."""

STATUS_STYLES: Mapping[str, str] = {
    'pending': 'dim',
    'running': 'yellow',
    'parked': 'cyan',
    'succeeded': 'green',
    'failed': 'red',
    'skipped': 'magenta',
    'cancelled': 'bright_red',
}

_EIGHTHS = ' ▏▎▍▌▋▊▉'  # left-aligned partial blocks: the end of a bar lands within 1/8 of a cell


def format_duration(seconds: float | None) -> str:
    """`850 µs`, `12 ms`, `1.25 s`, `3 min 02 s`; `-` when unknown."""
    if seconds is None:
        return '-'
    if seconds < 0.001:
        return f'{seconds * 1_000_000:.0f} µs'
    if seconds < 1:
        return f'{seconds * 1000:.0f} ms'
    if seconds < 60:
        return f'{seconds:.2f} s'
    minutes, rest = divmod(seconds, 60)
    return f'{minutes:.0f} min {rest:02.0f} s'


def step_label(step: PlanStep) -> str:
    """What a step does, in the tool column: the tool's name, `tool[]` for one call per element, `select`."""
    if step.is_select:
        return 'select'
    return f'{step.tool}[]' if step.for_each is not None else step.tool


def _items_done(record: StepRecord) -> str:
    items = record.items or []
    done = sum(item.status != 'pending' and item.status != 'running' for item in items)
    failed = sum(item.status == 'failed' for item in items)
    return f'{done}/{len(items)} items' + (f', {failed} failed' if failed else '')


def _one_line(text: str | None, limit: int) -> str:
    flat = ' '.join((text or '').split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)] + '…'


# --- live view ---------------------------------------------------------------------------------------------------

class LiveSteps:
    """The state of every step while a plan runs, fed by `on_event` (pass it as `run_plan(on_event=...)`).

    As a renderable it draws a table (one row per step: id, tool, wave, status, time, output or error) that
    `rich.live.Live` redraws. Plans taller than the screen show the running and most recently finished steps
    first and count the rest.
    """

    def __init__(self, plan: Plan, *, waves: Iterable[Iterable[str]] = (), max_rows: int | None = None) -> None:
        self._ids = [step.id for step in plan.steps]
        self._tools = {step.id: step_label(step) for step in plan.steps}
        self._waves = {step_id: index for index, wave in enumerate(waves) for step_id in wave}
        self._records: dict[str, StepRecord] = {}
        self._finished: list[str] = []
        self._run_started_at: float | None = None
        self.max_rows = max_rows

    def on_event(self, event: PlanEvent) -> None:
        """Record a step event. Cheap: the table is only built when the screen refreshes."""
        self._run_started_at = event.run_started_at
        self._records[event.step.id] = event.step
        if event.kind == 'item_finished':
            return
        if event.kind == 'step_finished':
            self._finished.append(event.step.id)

    @property
    def total(self) -> int:
        """How many steps the plan has."""
        return len(self._ids)

    def finished(self) -> list[StepRecord]:
        """The records of the steps that have ended (succeeded, failed or skipped; not cancelled), in plan order."""
        return [record for step_id in self._ids if (record := self._records.get(step_id)) is not None
                and record.status in ('succeeded', 'failed', 'skipped')]

    def status(self, step_id: str) -> str:
        record = self._records.get(step_id)
        return 'pending' if record is None else record.status

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUS_LABELS, 0)
        for step_id in self._ids:
            counts[self.status(step_id)] += 1
        return counts

    def _visible(self, limit: int) -> list[str]:
        if len(self._ids) <= limit:
            return self._ids
        running = [i for i in self._ids if self.status(i) == 'running']
        recent = list(reversed(self._finished))
        waiting = [i for i in self._ids if self.status(i) == 'pending']
        chosen: dict[str, None] = {}
        for step_id in [*running, *recent, *waiting]:
            if len(chosen) >= limit:
                break
            chosen[step_id] = None
        return [i for i in self._ids if i in chosen]  # plan order reads best

    def _elapsed(self, record: StepRecord) -> float | None:
        if record.status == 'running' and record.started_at is not None and self._run_started_at is not None:
            return time.perf_counter() - self._run_started_at - record.started_at
        return record.duration

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        limit = self.max_rows or max(5, (options.height or console.height) - 6)
        visible = self._visible(limit)
        table = Table(box=None, pad_edge=False, show_edge=False, expand=True, header_style='bold')
        # Ids and tool names keep their width (up to a cap); the output column takes what is left.
        id_width = min(28, max((len(i) for i in self._ids), default=4))
        tool_width = min(24, max((len(t) for t in self._tools.values()), default=4))
        table.add_column('step', no_wrap=True, min_width=id_width, max_width=28, overflow='ellipsis')
        table.add_column('tool', no_wrap=True, style='cyan', min_width=tool_width, max_width=24, overflow='ellipsis')
        table.add_column('wave', justify='right')
        table.add_column('status', no_wrap=True)
        table.add_column('time', justify='right', no_wrap=True)
        table.add_column('output', no_wrap=True, overflow='ellipsis', ratio=1)
        for step_id in visible:
            record = self._records.get(step_id)
            status = self.status(step_id)
            detail = '' if record is None else record.error if record.error else record.output
            if record is not None and record.items is not None and record.status == 'running':
                detail = _items_done(record)
            table.add_row(
                Text(step_id), Text(self._tools[step_id]),
                str(record.wave) if record is not None else str(self._waves.get(step_id, '')),
                Text(STATUS_LABELS[status], style=STATUS_STYLES[status]),
                '' if record is None else format_duration(self._elapsed(record)),
                Text(_one_line(detail, 200), style='red' if record is not None and record.error else 'dim'),
            )
        yield table
        hidden = len(self._ids) - len(visible)
        counts = ', '.join(f'{n} {STATUS_LABELS[s]}' for s, n in self.counts().items() if n)
        yield Text(f'{counts}' + (f'  ({hidden} more steps not shown)' if hidden else ''), style='dim')


def format_event(event: PlanEvent) -> str:
    """One plain line per event, for output that is not a terminal (CI logs, pipes)."""
    record = event.step
    if event.item is not None:
        return _format_item(record, event.item)
    if event.kind == 'step_started':
        at = record.started_at
        return f'[{format_duration(at):>8}] started   {record.id} ({step_label(record.step)}, wave {record.wave})'
    at = record.ended_at if record.ended_at is not None else record.started_at
    label = STATUS_LABELS.get(record.status, record.status)
    line = f'[{format_duration(at):>8}] {label:<9} {record.id}'
    if record.duration is not None and record.status != 'skipped':
        line += f' in {format_duration(record.duration)}'
    if record.error:
        line += f': {_one_line(record.error, 160)}'
    return line


def _format_item(record: StepRecord, item: ItemRecord) -> str:
    label = STATUS_LABELS.get(item.status, item.status)
    duration = None if item.started_at is None or item.ended_at is None else item.ended_at - item.started_at
    line = f'[{format_duration(item.ended_at):>8}] {label:<9} {record.id}[{item.index}]'
    if duration is not None:
        line += f' in {format_duration(duration)}'
    if item.error:
        line += f': {_one_line(item.error, 160)}'
    return line


# --- timeline --------------------------------------------------------------------------------------------------

class Timeline:
    """A Gantt chart of a finished run: one row per step (plan order), its bar spanning start to end on a
    shared time axis, coloured by status, with the wave number and the duration."""

    def __init__(self, run: PlanRun, width: int | None = None) -> None:
        self.run = run
        self.width = width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.lines(min(self.width or options.max_width, options.max_width), ascii_only=options.ascii_only)

    def lines(self, width: int, *, ascii_only: bool = False) -> Iterator[Text]:
        steps = self.run.steps
        if not steps:
            yield Text('(no steps)', style='dim')
            return
        id_width = min(24, max(4, *(len(s.id) for s in steps)))
        fixed = id_width + 5 + 2 + 1 + 8 + 1 + 9  # id, wave, borders, duration, status
        bar_width = max(10, width - fixed)
        total = max(self.run.duration, max((s.ended_at or 0.0) for s in steps), 1e-9)
        left, right = ('|', '|') if ascii_only else ('│', '│')
        start_label, end_label = '0', format_duration(total)
        axis = start_label + end_label.rjust(bar_width - len(start_label))
        yield Text(f'{"step":<{id_width}} {"wave":>4} {axis}  {"duration":>8} status', style='bold')
        chain = critical_chain(self.run)
        on_chain = set(chain)
        for record in steps:
            row = Text(f'{_fit(record.id, id_width):<{id_width}}', style='bold' if record.id in on_chain else '')
            row.append(f' {record.wave:>4} ')
            row.append(left, style='dim')
            row.append_text(_bar(record, total, bar_width, ascii_only))
            row.append(right, style='dim')
            shown = record.duration if record.started_at is not None else None
            row.append(f'{format_duration(shown):>8} ')
            row.append(STATUS_LABELS.get(record.status, record.status), style=STATUS_STYLES.get(record.status, ''))
            if record.condition_skipped:
                row.append(' (when)', style='dim')
            yield row
            yield from self.item_rows(record, id_width, total, bar_width, ascii_only)
        if len(chain) > 1:
            arrow = ' -> ' if ascii_only else ' → '
            busy = sum(self.run.step(i).duration or 0.0 for i in chain)
            yield Text(f'critical chain: {arrow.join(chain)} ({format_duration(busy)} of work, '
                       f'{format_duration(total)} wall)', style='dim')


    def item_rows(self, record: StepRecord, id_width: int, total: float, bar_width: int,
                  ascii_only: bool) -> Iterator[Text]:
        """A `for_each` step's elements, one row each under the step (the first `MAX_ITEM_ROWS`)."""
        items = record.items or []
        left, right = ('|', '|') if ascii_only else ('│', '│')
        for item in items[:MAX_ITEM_ROWS]:
            row = Text(f'{_fit(f"  [{item.index}]", id_width):<{id_width}}', style='dim')
            row.append('      ')
            row.append(left, style='dim')
            row.append_text(_bar(item, total, bar_width, ascii_only))
            row.append(right, style='dim')
            shown = None if item.started_at is None or item.ended_at is None else item.ended_at - item.started_at
            row.append(f'{format_duration(shown):>8} ')
            row.append(STATUS_LABELS.get(item.status, item.status), style=STATUS_STYLES.get(item.status, ''))
            yield row
        if len(items) > MAX_ITEM_ROWS:
            yield Text(f'{"":<{id_width}}  ... {len(items) - MAX_ITEM_ROWS} more items ({_items_done(record)})',
                       style='dim')


MAX_ITEM_ROWS = 8
"""Elements of a `for_each` step drawn in the timeline; the rest are counted."""


def critical_chain(run: PlanRun) -> list[str]:
    """The steps that held the run up, first to last: from the step that ended last, back through the
    dependency of each that ended last. Shortening any other step would not have finished the plan sooner."""
    ended = {r.id: r for r in run.steps if r.started_at is not None and r.ended_at is not None}
    step = max(ended.values(), key=lambda r: r.ended_at or 0.0, default=None)
    chain: list[str] = []
    while step is not None:
        chain.append(step.id)
        step = max((ended[d] for d in step.depends_on if d in ended), key=lambda r: r.ended_at or 0.0, default=None)
    return chain[::-1]


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + '…'


def _bar(record: StepRecord | ItemRecord, total: float, width: int, ascii_only: bool) -> Text:
    style = STATUS_STYLES.get(record.status, '')
    if record.started_at is None:  # skipped or cancelled before starting: mark when it was decided
        at = record.ended_at if record.ended_at is not None else 0.0
        column = min(width - 1, int(at / total * width))
        return Text(' ' * column + ('x' if ascii_only else '╳') + ' ' * (width - column - 1), style=style)
    end = record.ended_at if record.ended_at is not None else total
    start_cells = min(width - 1, int(record.started_at / total * width))
    end_eighths = max(start_cells * 8 + 1, round(min(end, total) / total * width * 8))
    full, part = divmod(end_eighths - start_cells * 8, 8)
    if ascii_only:
        body = '#' * max(1, full + (1 if part else 0))
    else:
        body = '█' * full + (_EIGHTHS[part] if part else '')
    body = body[: width - start_cells]
    return Text(' ' * start_cells + body + ' ' * (width - start_cells - len(body)), style=style)


def render_timeline(run: PlanRun, width: int | None = None) -> RenderableType:
    """The run as a terminal Gantt chart (see `Timeline`); `width` defaults to the console width."""
    return Timeline(run, width)


# --- summary and totals ------------------------------------------------------------------------------------------

def render_summary(run: PlanRun, *, title: str = 'What the model sees') -> RenderableType:
    """The model-facing text in a panel, verbatim: the summary, or the digest for index-based plans."""
    text = run.digest() if run.plan.dialect == 'index' else run.summary
    return Panel(Text(text), title=title, title_align='left', border_style='blue', expand=True)


def count(n: int, noun: str) -> str:
    """`1 step`, `2 steps`."""
    return f'{n} {noun}' if n == 1 else f'{n} {noun}s'


def render_totals(run: PlanRun) -> RenderableType:
    """Counts, wall time and how much parallelism saved, on one line."""
    text = Text()
    text.append(f'{count(run.total, "step")} in {count(len(run.waves), "wave")}: ', style='bold')
    parts: list[tuple[str, int, str]] = [
        ('succeeded', run.succeeded, 'green'), ('failed', run.failed, 'red'),
        ('skipped', run.skipped, 'magenta'), ('cancelled', run.cancelled, 'bright_red'),
    ]
    if run.parked:  # only a run that waits for decisions has any: the usual line stays as it was
        parts.append(('parked', run.parked, 'cyan'))
    for index, (label, n, style) in enumerate(parts):
        text.append(f'{n} {label}', style=style if n else 'dim')
        text.append(', ' if index < len(parts) - 1 else '')
    busy = sum(s.duration or 0.0 for s in run.steps)
    text.append(f' · wall {format_duration(run.duration)}')
    if run.duration > 0 and busy > run.duration * 1.05:
        text.append(f' · step time {format_duration(busy)} ({busy / run.duration:.1f}x from running in parallel)')
    return text


def render_report(run: PlanRun, width: int | None = None) -> RenderableType:
    """Timeline, summary and totals together: what `toolweave run` prints once a plan has finished."""
    return Group(render_timeline(run, width), Text(), render_summary(run), render_totals(run))

