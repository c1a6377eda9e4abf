"""Check toolweave against a real local model: llama-cpp-python's server with a small GGUF model.

`make check-local-llm` builds the server's venv and the model, then runs this script, which starts the server on
127.0.0.1, runs measurements against it, prints one table per measurement, and writes them to a JSON file.

Measurements (`--measure`, comma-separated):

- `agent`: agent tasks in tool-by-tool mode and in plan mode (`tool_planning=True`), each run streamed with
  `Agent.run_stream` (the path `toolweave chat` takes). Per mode: tool calls made, plans sent, plans valid, turns
  (model calls), errors (failed tool calls and plans, failed runs), empty answers, time. Every distinct error
  text the model was sent is listed under the table.
- `forced-plans`: one request per task with `tool_choice` set to the plan tool, so the model must write a plan;
  the share of those plans that validate, for each plan tool schema in `--plan-schema`. `PLAN_SCHEMAS` holds the
  schemas; a new schema variant is one more entry there.

A 270M model writes poor plans; what matters is that the wire works and that every failure reaches the model as
a clear, short error.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import httpx

from toolweave import Agent, PlanTool, Toolset, tool, validate_plan
from toolweave.agent import AgentEvent, AgentProcess, EmptyAnswer, TextDelta, ToolCallDelta
from toolweave.models import ModelSettings, OpenAIChatModel, RetryPolicy, SystemMessage, UserMessage
from toolweave.plan import planning_instructions
from toolweave.tools import ToolDefinition

ROOT = Path(__file__).resolve().parent.parent
PLAN_TOOL = 'execute_tool_plan'

# --- the tools and tasks -----------------------------------------------------------------------------------------

WEATHER = {'paris': (18, 'cloudy'), 'tokyo': (24, 'sunny'), 'lima': (21, 'foggy'), 'oslo': (9, 'rainy')}
POPULATION = {'paris': 2_102_650, 'tokyo': 13_960_000, 'lima': 10_092_000, 'oslo': 717_710}


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city: temperature in Celsius and the sky."""
    key = city.strip().lower()
    if key not in WEATHER:
        raise ValueError(f'Unknown city {city!r}. Known cities: Paris, Tokyo, Lima, Oslo.')
    temp, sky = WEATHER[key]
    return {'city': city, 'temp_c': temp, 'sky': sky}


@tool
def to_fahrenheit(celsius: float) -> float:
    """Convert a temperature from Celsius to Fahrenheit."""
    return round(celsius * 9 / 5 + 32, 1)


@tool
def get_population(city: str) -> int:
    """How many people live in a city."""
    key = city.strip().lower()
    if key not in POPULATION:
        raise ValueError(f'Unknown city {city!r}. Known cities: Paris, Tokyo, Lima, Oslo.')
    return POPULATION[key]


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


TOOLS = [get_weather, to_fahrenheit, get_population, add]
TASKS = (
    'What is the weather in Paris?',
    'What is the temperature in Tokyo in Fahrenheit?',
    'Which city has more people, Lima or Oslo?',
    'Add 17 and 25.',
)
INSTRUCTIONS = 'You answer questions with the tools. Call a tool whenever it can help, then answer briefly.'

# --- plan tool schemas (the forced-plans measurement compares them) ----------------------------------------------

PLAN_SCHEMAS: dict[str, Callable[[Toolset], ToolDefinition]] = {
    'string-arguments': lambda toolset: PlanTool(toolset, plan_schema='string').definition,
    'compact': lambda toolset: PlanTool(toolset, plan_schema='compact').definition,
    'typed': lambda toolset: PlanTool(toolset, plan_schema='typed').definition,
}
"""Plan tool definitions by name: `string-arguments`, each step's `arguments` a JSON string (strict); `compact`, the
default (`arguments` an object, step shapes in the description); `typed`, a strict variant per tool whose arguments
follow that tool's schema (what a grammar-constrained decoder can hold a model to)."""


# --- measurements ------------------------------------------------------------------------------------------------

@dataclass
class AgentRow:
    mode: str
    tasks: int = 0
    tool_calls: int = 0
    plans_sent: int = 0
    plans_valid: int = 0
    turns: int = 0
    errors: int = 0
    empty_answers: int = 0
    deltas: int = 0
    seconds: float = 0.0
    error_texts: list[str] = field(default_factory=list[str])


async def measure_agent(model: OpenAIChatModel, settings: ModelSettings) -> list[AgentRow]:
    rows = []
    for mode, planning in (('tool-by-tool', False), ('plan', True)):
        row = AgentRow(mode)
        agent = Agent(model, instructions=INSTRUCTIONS, tools=TOOLS, tool_planning=planning, settings=settings,
                      max_iterations=6, tool_timeout=10)
        for task in TASKS:
            await _agent_task(agent, task, row)
        rows.append(row)
    return rows


async def _agent_task(agent: Agent, task: str, row: AgentRow) -> None:
    row.tasks += 1
    started = time.perf_counter()
    events: list[AgentEvent] = []
    process: AgentProcess | None = None
    try:
        async with agent.run_stream(task) as stream:
            async for event in stream:
                events.append(event)
        process = stream.result.process
        row.empty_answers += stream.result.finish_reason == 'empty_answer'
    except Exception as exc:  # a failed run is a row entry, not the end of the check
        row.errors += 1
        row.error_texts.append(f'run failed: {type(exc).__name__}: {exc}')
        process = getattr(exc, 'process', None)  # budget and iteration limits carry the stopped process
    row.seconds += time.perf_counter() - started
    row.deltas += sum(isinstance(e, TextDelta | ToolCallDelta) for e in events)
    row.empty_answers += sum(isinstance(e, EmptyAnswer) and e.nudged for e in events)
    if process is not None:
        _count(process, row)


def _count(process: AgentProcess, row: AgentRow) -> None:
    """Tool calls, plans and the errors the model was sent, from the run's record."""
    row.turns += process.usage.llm_calls
    row.tool_calls += process.usage.tool_calls
    row.plans_sent += sum(record.name == PLAN_TOOL for record in process.history)
    row.plans_valid += len(process.plan_runs)
    for record in process.history:
        if not record.result.ok:
            row.errors += 1
            row.error_texts.append(f'{record.name}: {record.result.text}')
    for run in process.plan_runs:
        failed = [step for step in run.steps if step.status != 'succeeded']
        row.errors += len(failed)
        row.error_texts += [f'plan step {step.id} ({step.tool}) {step.status}: {step.error}' for step in failed]


@dataclass
class ForcedRow:
    schema: str
    requests: int = 0
    plans: int = 0
    valid: int = 0
    errors: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list[str])


async def measure_forced_plans(model: OpenAIChatModel, settings: ModelSettings, schemas: Sequence[str],
                               repeat: int = 1) -> list[ForcedRow]:
    toolset = Toolset(TOOLS)
    rows = []
    for name in schemas:
        row = ForcedRow(name)
        definitions = [*toolset.definitions(), PLAN_SCHEMAS[name](toolset)]
        forced = replace(settings, tool_choice=PLAN_TOOL)
        for task in TASKS * repeat:
            row.requests += 1
            started = time.perf_counter()
            try:
                response = await model.respond(
                    [SystemMessage(f'{INSTRUCTIONS}\n\n{planning_instructions()}'), UserMessage(task)],
                    definitions, forced)
            except Exception as exc:
                row.errors += 1
                row.problems.append(f'request failed: {type(exc).__name__}: {exc}')
                continue
            finally:
                row.seconds += time.perf_counter() - started
            for call in response.tool_calls:
                if call.name != PLAN_TOOL:
                    continue
                row.plans += 1
                problems = validate_plan(call.arguments, toolset)
                row.valid += not problems
                row.problems += problems
        rows.append(row)
    return rows


# --- the server ----------------------------------------------------------------------------------------------------

@contextmanager
def llama_server(python: Path, gguf: Path, port: int, log: Path) -> Iterator[str]:
    """llama-cpp-python's server on 127.0.0.1:`port` with the function-calling chat format; its base URL."""
    command = [str(python), '-m', 'llama_cpp.server', '--model', str(gguf), '--chat_format',
               'chatml-function-calling', '--host', '127.0.0.1', '--port', str(port), '--n_ctx', '8192']
    base_url = f'http://127.0.0.1:{port}/v1'
    with log.open('w') as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 180
            while True:
                if process.poll() is not None:
                    raise SystemExit(f'The llama.cpp server exited with code {process.returncode}; see {log}.')
                try:
                    if httpx.get(f'{base_url}/models', timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit(f'The llama.cpp server did not answer within 180 s; see {log}.')
                time.sleep(0.5)
            yield base_url
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


# --- tables --------------------------------------------------------------------------------------------------------

def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ['| ' + ' | '.join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + ' |' for row in cells]
    lines.insert(1, '| ' + ' | '.join('-' * w for w in widths) + ' |')
    return '\n'.join(lines)


def show_agent(rows: Sequence[AgentRow]) -> str:
    body = table(['mode', 'tasks', 'tool calls made', 'plans sent', 'plans valid', 'turns', 'errors',
                  'empty answers', 'streamed deltas', 'time (s)'],
                 [[r.mode, r.tasks, r.tool_calls, r.plans_sent, r.plans_valid, r.turns, r.errors, r.empty_answers,
                   r.deltas, f'{r.seconds:.1f}'] for r in rows])
    texts = sorted({f'{r.mode}: {_short(t)}' for r in rows for t in r.error_texts})
    return body + ('\n\nErrors sent to the model:\n' + '\n'.join(f'- {t}' for t in texts) if texts else '')


def show_forced(rows: Sequence[ForcedRow]) -> str:
    body = table(['plan schema', 'forced requests', 'plans returned', 'plans valid', 'share valid', 'errors',
                  'time (s)'],
                 [[r.schema, r.requests, r.plans, r.valid, f'{r.valid / r.requests:.0%}' if r.requests else '-',
                   r.errors, f'{r.seconds:.1f}'] for r in rows])
    texts = sorted({f'{r.schema}: {_short(t)}' for r in rows for t in r.problems})
    return body + ('\n\nValidation problems:\n' + '\n'.join(f'- {t}' for t in texts) if texts else '')


def _short(text: str) -> str:
    flat = re.sub(r' \(process [0-9a-f]+\)', '', ' '.join(text.split()))
    return flat if len(flat) <= 220 else flat[:217] + '...'


# --- main ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Measurement:
    """How to take one measurement (`model, settings, plan schemas -> rows`) and show its rows as a table."""

    take: Callable[[OpenAIChatModel, ModelSettings, Sequence[str], int], Awaitable[Sequence[Any]]]
    show: Callable[[Sequence[Any]], str]


async def _agent(model: OpenAIChatModel, settings: ModelSettings, schemas: Sequence[str],
                 repeat: int) -> list[AgentRow]:
    return await measure_agent(model, settings)


MEASUREMENTS = {
    'agent': Measurement(_agent, show_agent),
    'forced-plans': Measurement(measure_forced_plans, show_forced),
}


async def run(base_url: str, measures: Sequence[str], schemas: Sequence[str], max_tokens: int,
              repeat: int = 1) -> dict[str, Any]:
    settings = ModelSettings(max_tokens=max_tokens, timeout=120)
    results: dict[str, Any] = {}
    async with OpenAIChatModel('local', base_url=base_url, provider='llamacpp', api_key_env=None,
                               retry=RetryPolicy(max_retries=1)) as model:
        for name in measures:
            measurement = MEASUREMENTS[name]
            rows = await measurement.take(model, settings, schemas, repeat)
            print(measurement.show(rows), end='\n\n', flush=True)
            results[name] = [asdict(row) for row in rows]
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--server-python', type=Path, default=ROOT / '.local-llm' / 'venv' / 'bin' / 'python',
                        help='The Python of the venv with llama-cpp-python[server].')
    parser.add_argument('--model', type=Path, default=ROOT / '.local-llm' / 'gemma-3-270m-q4_k_m.gguf',
                        help='The GGUF file to serve.')
    parser.add_argument('--port', type=int, default=8765)
    parser.add_argument('--measure', default='agent,forced-plans',
                        help=f'Comma-separated: {", ".join(MEASUREMENTS)}.')
    parser.add_argument('--plan-schema', default=','.join(PLAN_SCHEMAS),
                        help=f'Comma-separated plan tool schemas for forced-plans: {", ".join(PLAN_SCHEMAS)}.')
    parser.add_argument('--max-tokens', type=int, default=512)
    parser.add_argument('--repeat', type=int, default=1,
                        help='Send each forced-plans task this many times (the model samples, so shares vary).')
    parser.add_argument('--out', type=Path, default=ROOT / '.local-llm' / 'check-local-llm.json')
    args = parser.parse_args(argv)
    measures = [m.strip() for m in args.measure.split(',') if m.strip()]
    schemas = [s.strip() for s in args.plan_schema.split(',') if s.strip()]
    unknown = [m for m in measures if m not in MEASUREMENTS] + [s for s in schemas if s not in PLAN_SCHEMAS]
    if unknown:
        parser.error(f'unknown measurement or plan schema: {", ".join(unknown)}')
    for path in (args.server_python, args.model):
        if not path.exists():
            parser.error(f'{path} does not exist; run `make check-local-llm`, which builds it.')
    # A terminated check still stops its server (the `finally` of `llama_server` runs on SystemExit).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    log = args.out.with_suffix('.server.log')
    print(f'llama-cpp-python server: {args.model.name}, chatml-function-calling, 127.0.0.1:{args.port} '
          f'(log: {log.relative_to(ROOT) if log.is_relative_to(ROOT) else log})', flush=True)
    with llama_server(args.server_python, args.model, args.port, log) as base_url:
        results = anyio.run(run, base_url, measures, schemas, args.max_tokens, args.repeat)
    args.out.write_text(json.dumps({'model': args.model.name, 'max_tokens': args.max_tokens, 'repeat': args.repeat,
                                    **results}, indent=2))
    print(f'Wrote {args.out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
