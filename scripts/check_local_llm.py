"""Check toolweave against a real small model on llama.cpp's `llama-server`, on six tasks with known answers.

`make check-local-llm` builds the server and assembles the model (`scripts/local_llm.py`), then runs this script:
it starts `llama-server --jinja --no-repack` on 127.0.0.1, runs the measurements, prints one table per
measurement, writes them to a JSON file, and stops the server. `--model` (or `LOCAL_LLM_MODEL`) picks the model:
`qwen-1.5b` (default), `qwen-0.5b`, `gemma-270m`, or a path to a GGUF; `--server` (or `LOCAL_LLM_SERVER`) another
`llama-server` binary; `--base-url` a server that is already running (nothing is started then).

Measurements (`--measure`, comma-separated):

- `agent`: each task in three modes: tool by tool, plan (`tool_planning=True`: the model may call
  `execute_tool_plan`), plan first (`plan_first=True`: the first reply must be a plan, then the answer). Every
  answer is checked against the known truth; per mode: tasks correct, LLM calls, input and output tokens, tool
  calls, plans sent and valid, time; the same for the multi-step tasks alone; the longest error text a model was
  sent, in the model's own tokens (the server's `/tokenize`).
- `forced-plans`: one request per task and repeat that must be a plan: `compact` forces the plan tool by name
  (with `tool_choice='required'` and only the plan tool where the server ignores a name), `constrained` asks for
  the plan as the reply under the constrained plan schema (`response_format`, a grammar in llama.cpp). The share
  of plans that validate; for each invalid one, the problems go back and the share of second plans that validate.

The tools are deterministic, so every task has one right answer.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import httpx
from typing_extensions import TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))

from local_llm import DEFAULT_THREADS, LLM_DIR, MODELS, SERVER, SERVER_FLAGS, model_path, serve
from toolweave import Agent, PlanTool, Tool, Toolset, tool, validate_plan
from toolweave.agent import AgentProcess
from toolweave.models import (
    AssistantMessage,
    Message,
    ModelSettings,
    OpenAIChatModel,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from toolweave.plan import planning_instructions
from toolweave.plan._meta import plan_first_instructions
from toolweave.plan._plan_grammar import constrained_grammar
from toolweave.plan._plan_schema import constrained_schema

PLAN_TOOL = 'execute_tool_plan'

# --- the tools ---------------------------------------------------------------------------------------------------

WEATHER = {'paris': (18, 'cloudy'), 'tokyo': (24, 'sunny'), 'lima': (21, 'foggy'), 'oslo': (9, 'rainy')}
RATES = {('USD', 'EUR'): 0.92, ('EUR', 'USD'): 1.087, ('USD', 'JPY'): 151.0, ('EUR', 'JPY'): 164.0}
CATALOG: dict[str, list[Product]] = {'laptop': [
    {'id': 'L1', 'name': 'Aero 14', 'price_usd': 1299}, {'id': 'L2', 'name': 'Nimbus 13', 'price_usd': 799},
    {'id': 'L3', 'name': 'Volt 15', 'price_usd': 1049}]}
STOCK = {'L1': 12, 'L2': 4, 'L3': 0}


class Weather(TypedDict):
    city: str
    temp_c: float
    sky: str


class Product(TypedDict):
    id: str
    name: str
    price_usd: float


class Stock(TypedDict):
    product_id: str
    units: int


@tool
def get_weather(city: str) -> Weather:
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
def convert_currency(amount: float, from_currency: str, to_currency: str) -> float:
    """Convert an amount of money between currencies (USD, EUR, JPY)."""
    pair = (from_currency.strip().upper(), to_currency.strip().upper())
    if pair[0] == pair[1]:
        return amount
    if pair not in RATES:
        raise ValueError(f'No rate for {pair[0]} to {pair[1]}. Known: USD, EUR, JPY.')
    return round(amount * RATES[pair], 2)


@tool
def search_products(query: str) -> list[Product]:
    """Search the product catalog; each result has id, name and price_usd."""
    words = query.lower().split()
    return [item for key, items in CATALOG.items() if any(key in word for word in words) for item in items]


@tool
def get_stock(product_id: str) -> Stock:
    """How many units of a product (by id) are in stock."""
    if product_id not in STOCK:
        raise ValueError(f'Unknown product id {product_id!r}: use an id from search_products.')
    return {'product_id': product_id, 'units': STOCK[product_id]}


TOOLS: list[Tool] = [get_weather, to_fahrenheit, convert_currency, search_products, get_stock]


# --- the tasks and their truths ------------------------------------------------------------------------------------

def _has(*words: str) -> Callable[[str], bool]:
    return lambda answer: all(word.lower() in answer.lower() for word in words)


def _first(winner: str, loser: str) -> Callable[[str], bool]:
    def check(answer: str) -> bool:
        text = answer.lower()
        return winner.lower() in text and (loser.lower() not in text or text.index(winner.lower())
                                           < text.index(loser.lower()))
    return check


def _in_stock(answer: str) -> bool:
    text = answer.lower()
    return 'aero' in text and 'nimbus' in text and ('volt' not in text or re.search(
        r'volt 15[^.]*\b(out of stock|not in stock|0 units|no units|zero)', text) is not None)


@dataclass(frozen=True)
class Task:
    prompt: str
    truth: str
    check: Callable[[str], bool]
    steps: int
    """Tool calls the task needs."""


TASKS = (
    Task('What is the weather in Paris?', '18 C and cloudy', _has('18', 'cloudy'), 1),
    Task('What is the temperature in Tokyo in Fahrenheit?', '75.2 F', _has('75.2'), 2),
    Task('Which city is warmer right now, Lima or Oslo?', 'Lima', _first('Lima', 'Oslo'), 2),
    Task('How much is 250 US dollars in euros?', '230 EUR', _has('230'), 1),
    Task('Which laptops in the catalog are in stock? Check the stock of each one.', 'Aero 14 and Nimbus 13',
         _in_stock, 4),
    Task('What is the cheapest laptop in the catalog, and what does it cost in euros?', 'Nimbus 13, 735.08 EUR',
         _has('nimbus', '735'), 2),
)
SELECTED = set(range(1, len(TASKS) + 1))
"""The task numbers to run (`--tasks`)."""
INSTRUCTIONS = ('You answer questions with the tools. Call the tools the question needs, then answer briefly '
                'from their results.')


# --- agent tasks ---------------------------------------------------------------------------------------------------

@dataclass
class TaskRun:
    task: int
    correct: bool
    answer: str
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0
    plans_sent: int = 0
    plans_valid: int = 0
    seconds: float = 0.0
    failure: str | None = None
    errors: list[str] = field(default_factory=list[str])


MODES: dict[str, dict[str, Any]] = {
    'tool-by-tool': {},
    'plan': {'tool_planning': True},
    'plan-first': {'tool_planning': True, 'plan_first': True},
}


async def measure_agent(model: OpenAIChatModel, settings: ModelSettings, repeat: int) -> dict[str, list[TaskRun]]:
    runs: dict[str, list[TaskRun]] = {}
    for mode, options in MODES.items():
        agent = Agent(model, instructions=INSTRUCTIONS, tools=TOOLS, settings=settings, max_iterations=8,
                      tool_timeout=10, **options)
        runs[mode] = []
        for _ in range(repeat):
            for number, task in enumerate(TASKS, 1):
                if number not in SELECTED:
                    continue
                runs[mode].append(await _agent_task(agent, number, task))
                print(f'  {mode} task {number}: {"right" if runs[mode][-1].correct else "wrong"}', flush=True)
    return runs


async def _agent_task(agent: Agent, number: int, task: Task) -> TaskRun:
    started = time.perf_counter()
    process: AgentProcess | None = None
    try:
        async with agent.run_stream(task.prompt) as stream:
            async for _ in stream:
                pass
        run = TaskRun(number, task.check(stream.result.output), stream.result.output)
        process = stream.result.process
    except Exception as exc:  # a failed run is a row entry, not the end of the check
        run = TaskRun(number, False, '', failure=f'{type(exc).__name__}: {exc}')
        process = getattr(exc, 'process', None)  # budget and iteration limits carry the stopped process
    run.seconds = time.perf_counter() - started
    if process is not None:
        usage = process.usage
        run.llm_calls, run.input_tokens, run.output_tokens = usage.llm_calls, usage.input_tokens, usage.output_tokens
        run.tool_calls = usage.tool_calls
        run.plans_sent = sum(record.name == PLAN_TOOL for record in process.history)
        run.plans_valid = len(process.plan_runs)
        run.errors = [f'{record.name}: {record.result.text}' for record in process.history if not record.result.ok]
        run.errors += [f'plan step {step.id} ({step.tool}) {step.status}: {step.error}'
                       for plan in process.plan_runs for step in plan.steps
                       if step.status != 'succeeded' and step.error]
    return run


# --- forced plans --------------------------------------------------------------------------------------------------

@dataclass
class ForcedRow:
    schema: str
    requests: int = 0
    valid: int = 0
    retried: int = 0
    valid_second: int = 0
    failures: int = 0
    input_tokens: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list[str])
    plans: list[str] = field(default_factory=list[str])
    """Every plan the model wrote, as it wrote it."""


async def measure_forced(model: OpenAIChatModel, settings: ModelSettings, repeat: int,
                         schemas: Sequence[str]) -> list[ForcedRow]:
    toolset = Toolset(TOOLS)
    definitions = toolset.definitions()
    rows = []
    for schema in schemas:
        row = ForcedRow(schema)
        request = _forced_request(schema, settings, toolset, definitions)  # the grammar takes ~70 ms: built once
        for _ in range(repeat):
            for task in (task for number, task in enumerate(TASKS, 1) if number in SELECTED):
                await _forced(model, request, toolset, schema, task, row)
        print(f'  forced plans, {schema}: {row.valid}/{row.requests} valid', flush=True)
        rows.append(row)
    return rows


def _forced_request(schema: str, settings: ModelSettings, toolset: Toolset,
                    definitions: Any) -> tuple[str, list[Any], ModelSettings]:
    """The system prompt, the tools offered and the settings of a forced plan under `schema`."""
    if schema == 'compact':
        return (f'{INSTRUCTIONS}\n\n{planning_instructions(tools=definitions)}',
                [*definitions, PlanTool(toolset).definition], replace(settings, tool_choice=PLAN_TOOL))
    forced = replace(settings, response_format=constrained_schema(TOOLS), text_tool_calls=False) \
        if schema == 'constrained' else \
        replace(settings, extra_body={**(settings.extra_body or {}), 'grammar': constrained_grammar(TOOLS)},
                text_tool_calls=False)
    return f'{INSTRUCTIONS}\n\n{plan_first_instructions(definitions)}', [], forced


async def _forced(model: OpenAIChatModel, request: tuple[str, list[Any], ModelSettings], toolset: Toolset,
                  schema: str, task: Task, row: ForcedRow) -> None:
    system, offered, forced = request
    messages: list[Message] = [SystemMessage(system), UserMessage(task.prompt)]
    row.requests += 1
    for attempt in (1, 2):
        started = time.perf_counter()
        try:
            response = await model.respond(messages, offered, forced)
        except Exception as exc:
            row.failures += 1
            row.problems.append(f'request failed: {type(exc).__name__}: {exc}')
            return
        finally:
            row.seconds += time.perf_counter() - started
        row.input_tokens += response.usage.input_tokens
        plan = next((c.arguments for c in response.tool_calls if c.name == PLAN_TOOL), None) \
            if schema == 'compact' else response.text
        row.plans.append(plan or '')
        problems = validate_plan(plan or '', toolset) if plan else ['no plan in the reply']
        if not problems:
            row.valid += attempt == 1
            row.valid_second += attempt == 2
            return
        row.problems += problems
        if attempt == 2:
            return
        row.retried += 1
        call = ToolCall('call_plan_1', PLAN_TOOL, plan or '{}')
        text = 'Plan execution failed: ' + '; '.join(problems)
        messages += [AssistantMessage(None, (call,)), ToolMessage(call.id, PLAN_TOOL, text, is_error=True),
                     UserMessage('Send the corrected plan.')] if schema == 'compact' else \
            [AssistantMessage(plan or ''), UserMessage(f'{text}\nSend the corrected plan.')]


# --- tables --------------------------------------------------------------------------------------------------------

def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ['| ' + ' | '.join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + ' |' for row in cells]
    lines.insert(1, '| ' + ' | '.join('-' * w for w in widths) + ' |')
    return '\n'.join(lines)


def _totals(runs: Sequence[TaskRun]) -> list[object]:
    return [f'{sum(r.correct for r in runs)}/{len(runs)}', sum(r.llm_calls for r in runs),
            sum(r.input_tokens for r in runs), sum(r.output_tokens for r in runs), sum(r.tool_calls for r in runs),
            f'{sum(r.plans_valid for r in runs)}/{sum(r.plans_sent for r in runs)}',
            f'{sum(r.seconds for r in runs):.0f}']


def show_agent(runs: dict[str, list[TaskRun]], longest_error: tuple[int, str]) -> str:
    headers = ['mode', 'tasks', 'correct', 'LLM calls', 'input tokens', 'output tokens', 'tool calls',
               'plans valid/sent', 'time (s)']
    rows = []
    for mode, mode_runs in runs.items():
        multi = [r for r in mode_runs if TASKS[r.task - 1].steps > 1]
        rows.append([mode, 'all 6', *_totals(mode_runs)])
        rows.append([mode, 'multi-step', *_totals(multi)])
    detail = [[mode, r.task, 'right' if r.correct else 'wrong', r.llm_calls, r.input_tokens,
               _short(r.failure or r.answer, 90)] for mode, mode_runs in runs.items() for r in mode_runs]
    texts = sorted({f'{mode}: {_short(t, 200)}' for mode, mode_runs in runs.items() for r in mode_runs
                    for t in r.errors})
    return '\n\n'.join([
        table(headers, rows),
        table(['mode', 'task', 'answer', 'LLM calls', 'input tokens', 'answer or failure'], detail),
        f'Longest error text sent to the model: {longest_error[0]} tokens ({_short(longest_error[1], 120)})',
        'Errors sent to the model:\n' + '\n'.join(f'- {t}' for t in texts) if texts else 'No errors.'])


def show_forced(rows: Sequence[ForcedRow]) -> str:
    body = table(['plan schema', 'forced requests', 'plans valid', 'share valid', 'second plans valid',
                  'input tokens / request', 'failures', 'time (s)'],
                 [[r.schema, r.requests, r.valid, f'{r.valid / r.requests:.0%}' if r.requests else '-',
                   f'{r.valid_second}/{r.retried}', r.input_tokens // max(1, r.requests + r.retried), r.failures,
                   f'{r.seconds:.0f}'] for r in rows])
    texts = sorted({f'{r.schema}: {_short(t, 200)}' for r in rows for t in r.problems})
    return body + ('\n\nValidation problems:\n' + '\n'.join(f'- {t}' for t in texts) if texts else '')


def _short(text: str, limit: int) -> str:
    flat = re.sub(r' \(process [0-9a-f]+\)', '', ' '.join(text.split()))
    return flat if len(flat) <= limit else flat[:limit - 3] + '...'


async def _longest_error(base_url: str, runs: dict[str, list[TaskRun]]) -> tuple[int, str]:
    """The longest error text the model was sent, in the model's tokens (the server's `/tokenize`)."""
    texts = {t for mode_runs in runs.values() for r in mode_runs for t in r.errors}
    longest = (0, '')
    async with httpx.AsyncClient(base_url=base_url.removesuffix('/v1'), timeout=30) as client:
        for text in texts:
            reply = await client.post('/tokenize', json={'content': text})
            count = len(reply.json().get('tokens', ()))
            longest = max(longest, (count, text))
    return longest


# --- main ----------------------------------------------------------------------------------------------------------

async def run(base_url: str, measures: Sequence[str], schemas: Sequence[str], max_tokens: int, seconds: float,
              repeat: int) -> dict[str, Any]:
    settings = ModelSettings(max_tokens=max_tokens, timeout=seconds, temperature=0.2)
    results: dict[str, Any] = {}
    async with OpenAIChatModel('local', base_url=base_url, provider='llamacpp', api_key_env=None) as model:
        if 'forced-plans' in measures:
            rows = await measure_forced(model, settings, repeat, schemas)
            print(show_forced(rows), end='\n\n', flush=True)
            results['forced-plans'] = [asdict(row) for row in rows]
        if 'agent' in measures:
            runs = await measure_agent(model, settings, 1)
            longest = await _longest_error(base_url, runs)
            print(show_agent(runs, longest), end='\n\n', flush=True)
            results['agent'] = {mode: [asdict(r) for r in mode_runs] for mode, mode_runs in runs.items()}
            results['longest_error_tokens'] = longest[0]
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--model', default=os.environ.get('LOCAL_LLM_MODEL', 'qwen-1.5b'),
                        help=f'{", ".join(MODELS)}, or a GGUF path (env LOCAL_LLM_MODEL).')
    parser.add_argument('--server', type=Path, default=Path(os.environ.get('LOCAL_LLM_SERVER', SERVER)),
                        help='The llama-server binary (env LOCAL_LLM_SERVER).')
    parser.add_argument('--base-url', help='Use this running OpenAI-compatible server; start none.')
    parser.add_argument('--port', type=int, default=8765)
    parser.add_argument('--threads', type=int, default=DEFAULT_THREADS, help='llama-server --threads (env '
                        'LOCAL_LLM_THREADS; 1 by default, see scripts/local_llm.py).')
    parser.add_argument('--measure', default='agent,forced-plans', help='Comma-separated: agent, forced-plans.')
    parser.add_argument('--plan-schema', default='compact,constrained,grammar',
                        help='Comma-separated plan schemas for forced-plans: compact, constrained (the JSON '
                             'schema), grammar (the plan grammar, as plan-first sends it to llama-server).')
    parser.add_argument('--max-tokens', type=int, default=768)
    parser.add_argument('--timeout', type=float, default=300)
    parser.add_argument('--repeat', type=int, default=4,
                        help='Send each forced-plans task this many times (6 tasks x 4 = 24 plans per schema).')
    parser.add_argument('--tasks', default='1,2,3,4,5,6', help='Comma-separated task numbers (1-6) to run.')
    parser.add_argument('--modes', default=','.join(MODES), help=f'Comma-separated agent modes: {", ".join(MODES)}.')
    parser.add_argument('--out', type=Path, default=None)
    args = parser.parse_args(argv)
    measures = [m.strip() for m in args.measure.split(',') if m.strip()]
    schemas = [s.strip() for s in args.plan_schema.split(',') if s.strip()]
    unknown = [m for m in measures if m not in ('agent', 'forced-plans')]
    unknown += [s for s in schemas if s not in ('compact', 'constrained', 'grammar')]
    if unknown:
        parser.error(f'unknown measurement or plan schema: {", ".join(unknown)}')
    SELECTED.clear()
    SELECTED.update(int(number) for number in args.tasks.split(','))
    for mode in set(MODES) - set(args.modes.split(',')):
        del MODES[mode]
    gguf = model_path(args.model) if args.model in MODELS else Path(args.model)
    out = args.out or LLM_DIR / f'check-{gguf.stem}.json'
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a terminated check still stops its server
    started = time.perf_counter()
    if args.base_url:
        results = anyio.run(run, args.base_url, measures, schemas, args.max_tokens, args.timeout, args.repeat)
    else:
        for path in (args.server, gguf):
            if not path.exists():
                parser.error(f'{path} does not exist; `make check-local-llm` builds the server and the models.')
        log = out.with_suffix('.server.log')
        print(f'llama-server {" ".join(SERVER_FLAGS)}: {gguf.name} on 127.0.0.1:{args.port} (log: {log})',
              flush=True)
        with serve(gguf, args.port, log, server=args.server, threads=args.threads) as base_url:
            results = anyio.run(run, base_url, measures, schemas, args.max_tokens, args.timeout, args.repeat)
    out.write_text(json.dumps({'model': gguf.name, 'server_flags': SERVER_FLAGS, 'max_tokens': args.max_tokens,
                               'repeat': args.repeat, 'seconds': round(time.perf_counter() - started),
                               **results}, indent=2))
    print(f'Wrote {out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
