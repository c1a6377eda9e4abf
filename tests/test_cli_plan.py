"""`toolweave run` and `toolweave validate`, end to end through the typer app (CliRunner)."""

from __future__ import annotations

import io
import json
import re
import textwrap
from pathlib import Path
from typing import Any

import examples.tools
import pytest
from rich.console import Console
from typer.testing import CliRunner

from toolweave.cli._app import app
from toolweave.cli._render import LiveSteps, critical_chain, format_duration, render_timeline, render_totals

PLANS = Path(__file__).resolve().parent.parent / 'examples' / 'plans'
TOOLS = 'examples.tools:TOOLS'
ANSI = re.compile(r'\x1b\[')


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def instant(monkeypatch: pytest.MonkeyPatch) -> None:
    """Example tools answer at once (the latency is what the timeline shows, not what these tests check)."""
    monkeypatch.setattr(examples.tools, 'LATENCY_SCALE', 0.0)


def flat(output: str) -> str:
    """The output with rich's boxes and line wrapping removed, for matching messages."""
    return ' '.join(output.replace('│', ' ').split())


def invoke(runner: CliRunner, *args: str, env: dict[str, str] | None = None) -> Any:
    result = runner.invoke(app, list(args), env=env, catch_exceptions=False)
    assert 'Traceback' not in result.output
    return result


def write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> str:
    (tmp_path / f'{name}.py').write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def write_plan(tmp_path: Path, plan: Any, name: str = 'plan.json') -> str:
    path = tmp_path / name
    path.write_text(json.dumps(plan))
    return str(path)


# --- run: the human view -----------------------------------------------------------------------------------------

@pytest.mark.usefixtures('instant')
def test_run_weather_prints_events_timeline_summary_and_totals(runner: CliRunner) -> None:
    result = invoke(runner, 'run', str(PLANS / 'weather.json'), '--tools', TOOLS)
    out = result.output
    assert result.exit_code == 0, out
    # Not a terminal: one plain line per event, no escape codes, no redraws.
    assert not ANSI.search(out) and '\r' not in out
    for step in ('tokyo', 'paris', 'lima'):
        assert re.search(rf'started\s+{step} \(get_weather, wave 0\)', out)
        assert re.search(rf'done\s+{step} in ', out)
    assert re.search(r'started\s+warmest \(compare, wave 1\)', out)
    # The timeline: a header with the time axis, then one row per step with its wave, duration and status.
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if re.match(r'step\s+wave\s+0\s', line))
    rows = lines[header + 1:header + 5]
    assert [row.split()[0] for row in rows] == ['tokyo', 'paris', 'lima', 'warmest']
    assert [row.split()[1] for row in rows] == ['0', '0', '0', '1']
    assert all(row.rstrip().endswith('done') for row in rows)
    # The summary the model sees (output_steps = warmest) and the totals.
    assert 'What the model sees' in out
    assert '"warmest"' in out and '"highest"' in out and 'Tokyo' in out
    assert '"tokyo"' not in out.split('What the model sees')[1].split('4 steps')[0]
    assert re.search(r'4 steps in 2 waves: 4 succeeded, 0 failed, 0 skipped, 0 cancelled', out)


@pytest.mark.usefixtures('instant')
def test_run_failing_plan_exits_1_and_shows_failed_and_skipped(runner: CliRunner) -> None:
    # Failed and skipped steps and the errors section, as the person at the terminal sees them.
    result = invoke(runner, 'run', str(PLANS / 'failing.json'), '--tools', TOOLS)
    out = result.output
    assert result.exit_code == 1
    assert re.search(r'failed\s+status in .*: Tool execution failed: upstream service unavailable \(HTTP 503\)', out)
    assert re.search(r"skipped\s+alert: Skipped because dependency 'status' failed", out)
    assert re.search(r'done\s+weather in ', out)
    assert 'Plan completed with errors.' in out
    assert re.search(r'3 steps in 2 waves: 1 succeeded, 1 failed, 1 skipped, 0 cancelled', out)
    rows = {line.split()[0]: line for line in out.splitlines() if re.match(r'(status|weather|alert)\s+\d\s', line)}
    assert rows['status'].rstrip().endswith('failed')
    assert rows['alert'].rstrip().endswith('skipped')
    assert rows['weather'].rstrip().endswith('done')


@pytest.mark.usefixtures('instant')
def test_run_in_a_terminal_uses_the_live_view_then_prints_the_report(runner: CliRunner) -> None:
    result = invoke(runner, 'run', str(PLANS / 'chain.json'), '--tools', TOOLS,
                    env={'TTY_COMPATIBLE': '1', 'COLUMNS': '120', 'LINES': '40'})
    assert result.exit_code == 0, result.output
    plain = ANSI.sub('', re.sub(r'\x1b\[[0-9;?]*[A-Za-z]', '', result.output))
    assert 'started' not in plain  # the live table replaces the event log
    assert re.search(r'5 steps in 5 waves: 5 succeeded', plain)
    assert 'Hello Ada Lovelace, your orders total 186.5 EUR.' in flat(plain)
    assert re.search(r'notify\s+notify\s+4\s+(waiting|running|done)', plain)  # the live table was drawn


def test_tool_output_is_never_read_as_console_markup(runner: CliRunner, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    module = write_module(tmp_path, monkeypatch, 'markup_tools', '''
        from toolweave import tool

        @tool
        def shout(text: str) -> str:
            """Return the text in brackets."""
            return f'[bold red]{text}[/bold red]'
    ''')
    plan = write_plan(tmp_path, {'steps': [{'id': 's1', 'tool': 'shout', 'arguments': {'text': 'hi'}}]})
    result = invoke(runner, 'run', plan, '--tools', f'{module}:shout')
    assert result.exit_code == 0
    assert '[bold red]hi[/bold red]' in result.output


# --- run --json ------------------------------------------------------------------------------------------------

@pytest.mark.usefixtures('instant')
def test_run_json_prints_only_the_run_record(runner: CliRunner) -> None:
    result = invoke(runner, 'run', str(PLANS / 'failing.json'), '--tools', TOOLS, '--json')
    assert result.exit_code == 1
    data = json.loads(result.output)  # nothing but JSON on stdout
    steps = {s['id']: s for s in data['steps']}
    assert [s['id'] for s in data['steps']] == ['status', 'weather', 'alert']
    assert steps['status']['status'] == 'failed'
    assert steps['weather']['status'] == 'succeeded'
    assert steps['alert']['status'] == 'skipped'
    assert steps['alert']['error'] == "Skipped because dependency 'status' failed"
    assert data['summary'].startswith('Plan completed with errors.')


def test_run_json_shows_parallel_steps_overlapping(runner: CliRunner) -> None:
    # Independent steps run together, seen from the CLI's run record.
    result = invoke(runner, 'run', str(PLANS / 'weather.json'), '--tools', TOOLS, '--json')
    assert result.exit_code == 0
    steps = {s['id']: s for s in json.loads(result.output)['steps']}
    cities = [steps[c] for c in ('tokyo', 'paris', 'lima')]
    assert max(s['started_at'] for s in cities) < min(s['ended_at'] for s in cities)  # all three in flight at once
    assert steps['warmest']['started_at'] >= max(s['ended_at'] for s in cities)


@pytest.mark.usefixtures('instant')
def test_concurrency_1_runs_one_step_at_a_time(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(examples.tools, 'LATENCY_SCALE', 0.05)
    result = invoke(runner, 'run', str(PLANS / 'fanout.json'), '--tools', TOOLS, '--json', '--concurrency', '1')
    assert result.exit_code == 0
    spans = sorted((s['started_at'], s['ended_at']) for s in json.loads(result.output)['steps'])
    assert all(end <= next_start + 1e-6 for (_, end), (next_start, _) in zip(spans, spans[1:], strict=False))


# --- run: limits ---------------------------------------------------------------------------------------------

SLOW_TOOLS = '''
    import anyio
    from toolweave import tool

    @tool
    async def slow(seconds: float) -> str:
        """Sleep, then answer."""
        await anyio.sleep(seconds)
        return 'finally'

    TOOLS = [slow]
'''


def test_step_timeout_fails_the_hanging_step_only(runner: CliRunner, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # a timed-out step fails like a raised exception; its dependents are skipped, the rest runs.
    module = write_module(tmp_path, monkeypatch, 'slow_tools_a', SLOW_TOOLS)
    plan = write_plan(tmp_path, {'steps': [
        {'id': 'hang', 'tool': 'slow', 'arguments': {'seconds': 30}},
        {'id': 'quick', 'tool': 'slow', 'arguments': {'seconds': 0.01}},
        {'id': 'after', 'tool': 'slow', 'arguments': {'seconds': '$ref:hang'}},
    ]})
    result = invoke(runner, 'run', plan, '--tools', f'{module}:TOOLS', '--step-timeout', '0.2', '--json')
    assert result.exit_code == 1
    data = json.loads(result.output)
    steps = {s['id']: s for s in data['steps']}
    assert steps['hang']['status'] == 'failed' and 'time' in steps['hang']['error'].lower()
    assert steps['quick']['status'] == 'succeeded'
    assert steps['after']['status'] == 'skipped'
    assert steps['hang']['ended_at'] < 5


def test_whole_plan_timeout_cancels_what_is_still_running(runner: CliRunner, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    module = write_module(tmp_path, monkeypatch, 'slow_tools_b', SLOW_TOOLS)
    plan = write_plan(tmp_path, {'steps': [
        {'id': 'quick', 'tool': 'slow', 'arguments': {'seconds': 0.01}},
        {'id': 'hang', 'tool': 'slow', 'arguments': {'seconds': 30}},
    ]})
    result = invoke(runner, 'run', plan, '--tools', f'{module}:TOOLS', '--timeout', '0.3')
    assert result.exit_code == 1
    rows = {line.split()[0]: line for line in result.output.splitlines() if re.match(r'(quick|hang)\s+\d\s', line)}
    assert rows['quick'].rstrip().endswith('done')
    assert rows['hang'].rstrip().endswith(('cancelled', 'failed'))


@pytest.mark.parametrize('option', [['--concurrency', '0'], ['--step-timeout', '0'], ['--timeout', '-1']])
def test_bad_limits_are_usage_errors(runner: CliRunner, option: list[str]) -> None:
    result = invoke(runner, 'run', str(PLANS / 'weather.json'), '--tools', TOOLS, *option)
    assert result.exit_code == 2
    assert option[0] in result.output


# --- validate ---------------------------------------------------------------------------------------------------

def test_validate_valid_plan_prints_steps_and_waves(runner: CliRunner) -> None:
    result = invoke(runner, 'validate', str(PLANS / 'weather.json'), '--tools', TOOLS)
    assert result.exit_code == 0
    assert 'Plan is valid: 4 steps, 2 waves' in result.output
    assert 'wave 0: tokyo, paris, lima' in result.output
    assert 'wave 1: warmest' in result.output


def test_validate_runs_nothing(runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = write_module(tmp_path, monkeypatch, 'counting_tools', '''
        from toolweave import tool
        CALLS = []

        @tool
        def record(x: int) -> int:
            """Remember the call."""
            CALLS.append(x)
            return x
    ''')
    plan = write_plan(tmp_path, {'steps': [{'id': 'a', 'tool': 'record', 'arguments': {'x': 1}},
                                           {'id': 'b', 'tool': 'record', 'arguments': {'x': '$ref:a'}}]})
    result = invoke(runner, 'validate', plan, '--tools', f'{module}:record')
    assert result.exit_code == 0
    assert 'Plan is valid: 2 steps, 2 waves' in result.output
    one = invoke(runner, 'validate', write_plan(tmp_path, {'steps': [{'id': 'a', 'tool': 'record',
                                                                        'arguments': {'x': 1}}]}),
                 '--tools', f'{module}:record')
    assert 'Plan is valid: 1 step, 1 wave\n' in one.output
    import counting_tools  # type: ignore[import-not-found]

    assert counting_tools.CALLS == []


def test_validate_reports_every_problem(runner: CliRunner) -> None:
    # A duplicate id, a blank tool, a recursive plan, an unknown tool, a cycle and an unknown reference, all
    # in one report.
    result = invoke(runner, 'validate', str(PLANS / 'invalid.json'), '--tools', TOOLS)
    out = result.output
    assert result.exit_code == 1
    problems = [line for line in out.splitlines() if line.startswith('  - ')]
    assert len(problems) >= 6, out
    text = out.lower()
    assert "'tokyo'" in text and 'duplicate' in text  # duplicate id
    assert "'fetch_url'" in text  # unknown tool
    assert "'berlin'" in text  # reference to a step that is not in the plan
    assert 'cycle' in text and re.search(r'\ba -> b -> a\b|\bb -> a -> b\b', text)
    assert 'execute_tool_plan' in text  # recursive plan
    assert 'no_tool' in text  # missing tool field
    assert 'Plan is valid' not in out


def test_validate_json(runner: CliRunner) -> None:
    ok = invoke(runner, 'validate', str(PLANS / 'chain.json'), '--tools', TOOLS, '--json')
    assert ok.exit_code == 0
    assert json.loads(ok.output) == {'valid': True, 'steps': 5,
                                     'waves': [['user'], ['orders'], ['total'], ['in_euros'], ['notify']]}
    bad = invoke(runner, 'validate', str(PLANS / 'invalid.json'), '--tools', TOOLS, '--json')
    assert bad.exit_code == 1
    data = json.loads(bad.output)
    assert data['valid'] is False and len(data['problems']) >= 6


def test_run_invalid_plan_runs_nothing_and_lists_problems(runner: CliRunner) -> None:
    result = invoke(runner, 'run', str(PLANS / 'invalid.json'), '--tools', TOOLS)
    assert result.exit_code == 1
    assert 'Plan is invalid' in result.output
    assert 'started' not in result.output and 'What the model sees' not in result.output


# --- bad input --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('command', ['run', 'validate'])
def test_missing_plan_file(runner: CliRunner, command: str, tmp_path: Path) -> None:
    result = invoke(runner, command, str(tmp_path / 'nope.json'), '--tools', TOOLS)
    assert result.exit_code == 2
    assert 'Plan file not found' in flat(result.output) and 'nope.json' in result.output


@pytest.mark.parametrize('command', ['run', 'validate'])
def test_plan_file_that_is_not_json(runner: CliRunner, command: str, tmp_path: Path) -> None:
    path = tmp_path / 'plan.json'
    path.write_text('{"steps": [ oops')
    result = invoke(runner, command, str(path), '--tools', TOOLS)
    assert result.exit_code == 2
    assert 'is not valid JSON' in flat(result.output) and 'line 1 column' in flat(result.output)


def test_plan_file_that_is_a_directory_or_not_utf8(runner: CliRunner, tmp_path: Path) -> None:
    assert 'is a directory' in flat(invoke(runner, 'run', str(tmp_path), '--tools', TOOLS).output)
    binary = tmp_path / 'plan.json'
    binary.write_bytes(b'\xff\xfe\x00garbage')
    result = invoke(runner, 'validate', str(binary), '--tools', TOOLS)
    assert result.exit_code == 2 and 'not UTF-8' in flat(result.output)


@pytest.mark.parametrize('data', [[], 'just a string', 42, {'steps': 'nope'}, {'steps': []}, {}])
def test_json_that_is_not_a_plan(runner: CliRunner, tmp_path: Path, data: Any) -> None:
    result = invoke(runner, 'validate', write_plan(tmp_path, data), '--tools', TOOLS)
    assert result.exit_code == 1
    assert 'Plan is invalid' in result.output


@pytest.mark.parametrize(('spec', 'message'), [
    ('examples.tools', 'expected module:attribute'),
    ('no_such_module_xyz:TOOLS', "could not import module 'no_such_module_xyz'"),
    ('examples.tools:NOPE', "has no attribute 'NOPE'"),
    ('examples.tools:LATENCY_SCALE', 'does not resolve to tools'),
])
@pytest.mark.parametrize('command', ['run', 'validate'])
def test_bad_tools_option(runner: CliRunner, command: str, spec: str, message: str) -> None:
    result = invoke(runner, command, str(PLANS / 'weather.json'), '--tools', spec)
    assert result.exit_code == 2
    assert message in flat(result.output)


def test_unknown_tool_names_the_available_ones(runner: CliRunner, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, {'steps': [{'id': 'a', 'tool': 'get_wether', 'arguments': {'city': 'Oslo'}}]})
    result = invoke(runner, 'validate', plan, '--tools', TOOLS)
    assert result.exit_code == 1
    assert "'get_wether'" in result.output and 'get_weather' in result.output


# --- renderers --------------------------------------------------------------------------------------------------

def _run(plan: str) -> Any:
    from toolweave.plan import run_plan_sync

    return run_plan_sync(json.loads((PLANS / plan).read_text()), examples.tools.TOOLS)


def _render(renderable: Any, width: int = 100, *, encoding: str = 'utf-8') -> str:
    stream = io.TextIOWrapper(io.BytesIO(), encoding=encoding)
    console = Console(file=stream, width=width, color_system=None, legacy_windows=False)
    console.print(renderable)
    stream.flush()
    stream.seek(0)
    return stream.read()


def test_timeline_bars_follow_the_schedule() -> None:
    run = _run('weather.json')
    lines = _render(render_timeline(run, 100)).splitlines()
    assert all(len(line) <= 100 for line in lines)
    rows = {line.split()[0]: line for line in lines[1:]}

    def span(row: str) -> tuple[int, int]:
        bar = row.split('│')[1]  # columns inside the chart area
        cells = [i for i, ch in enumerate(bar) if ch in '█▏▎▍▌▋▊▉']
        return cells[0], cells[-1]

    cities = [span(rows[c]) for c in ('tokyo', 'paris', 'lima')]
    warmest = span(rows['warmest'])
    assert all(start <= 2 for start, _ in cities)  # the three lookups start together
    assert warmest[0] >= max(end for _, end in cities) - 1  # compare starts when the slowest lookup ends
    slowest = max(run.steps[:3], key=lambda s: s.duration or 0)
    assert span(rows[slowest.id])[1] == max(end for _, end in cities)
    assert format_duration(run.duration) in lines[0]


def test_timeline_marks_skipped_steps_and_falls_back_to_ascii() -> None:
    run = _run('failing.json')
    text = _render(render_timeline(run, 80), encoding='ascii')
    rows = {line.split()[0]: line for line in text.splitlines()[1:]}
    assert '#' in rows['status'] and '#' in rows['weather']
    assert 'x' in rows['alert'].split('|')[1] and '#' not in rows['alert']
    assert rows['alert'].rstrip().endswith('skipped')


def test_totals_and_live_table() -> None:
    run = _run('fanout.json')
    totals = _render(render_totals(run), 200)
    assert '12 steps in 2 waves: 12 succeeded, 0 failed, 0 skipped, 0 cancelled' in totals
    assert 'from running in parallel' in totals
    from toolweave.plan import parse_plan

    view = LiveSteps(parse_plan(json.loads((PLANS / 'fanout.json').read_text())), max_rows=5)
    table = _render(view, 120)
    rows = [line for line in table.splitlines() if 'fetch_price' in line or 'aggregate' in line]
    assert len(rows) == 5 and all('waiting' in row for row in rows)
    assert table.splitlines()[-1] == '12 waiting  (7 more steps not shown)'


@pytest.mark.parametrize(('seconds', 'text'), [
    (None, '-'), (0.0004, '400 µs'), (0.0123, '12 ms'), (1.5, '1.50 s'), (125, '2 min 05 s'),
])
def test_format_duration(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


FORMS = '''
    from toolweave import tool
    from toolweave.tools._toolset import Toolset

    @tool
    def double(x: int) -> int:
        """Twice x."""
        return 2 * x

    def plain(x: int) -> int:
        """x plus one (a plain function: the Toolset makes it a tool)."""
        return x + 1

    class Maths:
        @tool
        def square(self, x: int) -> int:
            """x squared."""
            return x * x

    TOOLSET = Toolset([double])
    TUPLE = (double, plain)
    MATHS = Maths()
'''


@pytest.mark.parametrize(('attribute', 'tool_name', 'expected'), [
    ('TOOLSET', 'double', 6), ('double', 'double', 6), ('plain', 'plain', 4), ('TUPLE', 'plain', 4),
    ('MATHS', 'square', 9),
])
def test_tools_option_accepts_every_form(runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         attribute: str, tool_name: str, expected: int) -> None:
    module = write_module(tmp_path, monkeypatch, 'tool_forms', FORMS)
    plan = write_plan(tmp_path, {'steps': [{'id': 'a', 'tool': tool_name, 'arguments': {'x': 3}}]})
    result = invoke(runner, 'run', plan, '--tools', f'{module}:{attribute}', '--json')
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)['steps'][0]['value'] == expected


def test_live_table_shows_known_waves_before_steps_start() -> None:
    from toolweave.plan import parse_plan

    plan = parse_plan(json.loads((PLANS / 'chain.json').read_text()))
    view = LiveSteps(plan, waves=[['user'], ['orders'], ['total'], ['in_euros'], ['notify']])
    rows = {line.split()[0]: line.split() for line in _render(view, 120).splitlines()[1:-1]}
    assert [rows[s][2] for s in ('user', 'orders', 'total', 'in_euros', 'notify')] == ['0', '1', '2', '3', '4']
    assert all(row[3] == 'waiting' for row in rows.values())


GATED = '''
    from toolweave import tool

    @tool(requires_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file (pretend)."""
        return f'deleted {path}'

    @tool
    def report(text: str) -> str:
        """Report."""
        return f'report: {text}'

    TOOLS = [delete_file, report]
'''
GATED_PLAN = {'steps': [{'id': 'rm', 'tool': 'delete_file', 'arguments': {'path': '/tmp/x'}},
                        {'id': 'tell', 'tool': 'report', 'arguments': {'text': '$ref:rm'}}]}


@pytest.mark.parametrize(('review', 'stdin', 'statuses'), [
    ('approve', None, ['succeeded', 'succeeded']),
    ('reject', None, ['failed', 'skipped']),
    ('ask', 'a\n', ['succeeded', 'succeeded']),
    ('ask', 'r too risky\n', ['failed', 'skipped']),
    ('ask', '', ['failed', 'skipped']),  # no reviewer input: rejected, never run
])
def test_review_option_decides_gated_steps(runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           review: str, stdin: str | None, statuses: list[str]) -> None:
    module = write_module(tmp_path, monkeypatch, f'gated_tools_{review}_{len(stdin or "")}', GATED)
    result = runner.invoke(app, ['run', write_plan(tmp_path, GATED_PLAN), '--tools', f'{module}:TOOLS', '--json',
                                 '--review', review], input=stdin, catch_exceptions=False)
    data = json.loads(result.stdout)  # prompts go to stderr: stdout stays JSON
    assert [s['status'] for s in data['steps']] == statuses
    assert result.exit_code == (0 if statuses[0] == 'succeeded' else 1)
    if statuses[0] == 'succeeded':
        assert data['steps'][1]['output'] == 'report: deleted /tmp/x'
    if review == 'ask':
        assert 'Approval required: delete_file' in result.stderr
    if stdin == 'r too risky\n':
        assert 'too risky' in data['steps'][0]['error']


ODD_TOOLS = '''
    from toolweave import tool
    from toolweave.exceptions import ToolConfigurationError

    @tool
    def huge(n: int) -> str:
        """n characters."""
        return 'x' * n

    @tool
    def misconfigured() -> str:
        """Always a configuration error."""
        raise ToolConfigurationError('misconfigured: set API_URL first')

    TOOLS = [huge, misconfigured]
'''


def test_huge_outputs_stay_off_the_screen(runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = write_module(tmp_path, monkeypatch, 'odd_tools_a', ODD_TOOLS)
    plan = write_plan(tmp_path, {'steps': [{'id': 'big', 'tool': 'huge', 'arguments': {'n': 1_000_000}}]})
    result = invoke(runner, 'run', plan, '--tools', f'{module}:TOOLS')
    assert result.exit_code == 0
    assert len(result.output) < 20_000  # the summary is cut; the full output stays in the record
    assert 'cut 996000 of 1000000 characters' in flat(result.output)
    full = invoke(runner, 'run', plan, '--tools', f'{module}:TOOLS', '--json')
    assert len(json.loads(full.output)['steps'][0]['output']) == 1_000_000


@pytest.mark.parametrize('as_json', [False, True])
def test_configuration_error_stops_the_plan_cleanly(runner: CliRunner, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch, as_json: bool) -> None:
    module = write_module(tmp_path, monkeypatch, f'odd_tools_{as_json}', ODD_TOOLS)
    plan = write_plan(tmp_path, {'steps': [{'id': 'boom', 'tool': 'misconfigured', 'arguments': {}}]})
    result = invoke(runner, 'run', plan, '--tools', f'{module}:TOOLS', *(['--json'] if as_json else []))
    assert result.exit_code == 1
    if as_json:
        assert json.loads(result.output) == {
            'stopped': True, 'error': 'ToolConfigurationError: misconfigured: set API_URL first'}
    else:
        assert 'Plan stopped: ToolConfigurationError: misconfigured: set API_URL first' in flat(result.output)


def test_reviewer_quitting_stops_the_run(runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = write_module(tmp_path, monkeypatch, 'gated_tools_quit', GATED)
    result = runner.invoke(app, ['run', write_plan(tmp_path, GATED_PLAN), '--tools', f'{module}:TOOLS'],
                           input='q\n', catch_exceptions=False)
    assert result.exit_code == 1
    assert "Plan stopped: ExitEarly: Run stopped by the reviewer at tool 'delete_file'." in flat(result.stdout)
    assert 'Traceback' not in result.output


def test_critical_chain_names_the_steps_that_held_the_run_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(examples.tools, 'LATENCY_SCALE', 2.0)  # cpu (0.16-0.4 s) is clearly slower than memory
    run = _run('metrics.json')
    assert critical_chain(run) == ['metrics', 'cpu', 'cpu_alert']
    assert 'critical chain: metrics → cpu → cpu_alert (' in _render(render_timeline(run, 100))
    assert 'critical chain: metrics -> cpu -> cpu_alert (' in _render(render_timeline(run, 100), encoding='ascii')
    failing = _run('failing.json')
    assert critical_chain(failing) == ['weather']  # skipped steps never ran: they hold nothing up
    assert 'critical chain' not in _render(render_timeline(failing, 100))


@pytest.mark.parametrize(('source', 'message'), [
    ('def broken(:\n', 'SyntaxError'),
    ('raise RuntimeError("no API key configured")\n', 'RuntimeError: no API key configured'),
])
def test_tools_module_that_fails_to_import(runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           source: str, message: str) -> None:
    name = f'broken_tools_{len(source)}'
    (tmp_path / f'{name}.py').write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    result = invoke(runner, 'validate', str(PLANS / 'weather.json'), '--tools', f'{name}:TOOLS')
    assert result.exit_code == 2
    assert f"importing '{name}:TOOLS' failed" in flat(result.output) and message in flat(result.output)


@pytest.mark.usefixtures('instant')
def test_plan_from_standard_input(runner: CliRunner) -> None:
    plan = (PLANS / 'weather.json').read_text()
    result = runner.invoke(app, ['run', '-', '--tools', TOOLS, '--json'], input=plan, catch_exceptions=False)
    assert result.exit_code == 0
    assert json.loads(result.stdout)['succeeded'] == 4
    bad = runner.invoke(app, ['validate', '-', '--tools', TOOLS], input='{nope', catch_exceptions=False)
    assert bad.exit_code == 2 and 'standard input is not valid JSON' in flat(bad.output)


@pytest.mark.usefixtures('instant')
def test_run_a_shaping_plan_shows_select_and_each_element(runner: CliRunner) -> None:
    result = invoke(runner, 'run', str(PLANS / 'shaping.json'), '--tools', TOOLS, '--review', 'approve')
    out = result.output
    assert result.exit_code == 0, out
    assert re.search(r'started\s+names \(select, wave 1\)', out)
    assert re.search(r'started\s+readings \(query_metric\[\], wave 2\)', out)
    for index in range(4):
        assert re.search(rf'done\s+readings\[{index}\] in ', out)
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if re.match(r'step\s+wave\s+0\s', line))
    rows = [line.split()[0] for line in lines[header + 1:header + 10]]
    assert rows == ['metrics', 'names', 'readings', '[0]', '[1]', '[2]', '[3]', 'hot', 'alert']
    record = json.loads(invoke(runner, 'run', str(PLANS / 'shaping.json'), '--tools', TOOLS, '--review', 'approve',
                               '--json').output)
    readings = next(step for step in record['steps'] if step['id'] == 'readings')
    assert readings['kind'] == 'for_each' and [item['index'] for item in readings['items']] == [0, 1, 2, 3]
    assert [item['arguments'] for item in readings['items']] == [{'name': n} for n in readings['value'] and [
        r['name'] for r in readings['value']]]


def test_validate_reports_shaping_problems_and_exits_1(runner: CliRunner, tmp_path: Path) -> None:
    plan = tmp_path / 'bad.json'
    plan.write_text(json.dumps({'steps': [
        {'id': 'metrics', 'tool': 'list_metrics', 'arguments': {'category': 'all'}},
        {'id': 'top', 'from': '$ref:metrics.metrics', 'select': "[?unit == '%'"},
        {'id': 'each', 'tool': 'query_metric', 'arguments': {'name': '$item.name'}},
        {'id': 'a', 'from': '$ref:b'}, {'id': 'b', 'from': '$ref:a'}]}))
    result = invoke(runner, 'validate', str(plan), '--tools', TOOLS, '--json')
    assert result.exit_code == 1
    problems = json.loads(result.output)['problems']
    assert [p.split(':')[0] for p in problems] == ["steps[1] (id 'top')", "steps[2] (id 'each')",
                                                   "steps[3] (id 'a')"]
    assert 'invalid JMESPath expression at position' in problems[0] and 'only defined' in problems[1]
    assert 'Cycle detected' in problems[2]
