"""The demo and benchmark scenarios: simulated tools and scripted models that behave like a real one would.

Each scenario is a small task that needs several tool calls whose arguments depend on earlier results. It runs
in one of three modes, each with a `FunctionModel` that reads the tool results from the messages it is sent:

- `tool_by_tool`: one tool call per model reply (a ReAct loop). The model sees each result and then asks for
  the next call, copying the values it needs from earlier results into the arguments, so the conversation,
  and the input tokens of every request, grow with the history.
- `parallel_calls`: like `tool_by_tool`, but each reply asks for every call whose inputs are already known
  (the best a model can do with parallel tool calls and no plan).
- `plan`: the first reply is one `execute_tool_plan` call holding every step, with `$ref` references; the
  second reads the plan's summary (only the `output_steps`) and answers.

Every mode ends with the same answer, computed from the same results. Latencies are simulated with
`anyio.sleep`: each model reply takes `llm_latency` seconds, each tool call `tool_latency` seconds.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from toolweave._json import compact
from toolweave.agent import Agent, AgentRunResult
from toolweave.models import Message, ToolMessage
from toolweave.testing._fake_tools import FakeTool
from toolweave.testing._models import FunctionModel
from toolweave.tools import Tool, ToolDefinition

__all__ = ('MODES', 'SCENARIOS', 'Mode', 'Scenario', 'ScenarioRun', 'Step', 'run_scenario', 'scenario_by_name')

Mode: TypeAlias = Literal['tool_by_tool', 'parallel_calls', 'plan']
MODES: tuple[Mode, ...] = ('tool_by_tool', 'parallel_calls', 'plan')

DEFAULT_LLM_LATENCY = 0.4
"""Seconds per model reply at speed 1 (a fast hosted model's time to a short tool-call reply)."""
DEFAULT_TOOL_LATENCY = 0.1
"""Seconds per tool call at speed 1 (an internal HTTP API)."""

_REF = re.compile(r'^\$ref:([A-Za-z0-9_-]+)((?:\.[A-Za-z0-9_]+|\[-?\d+\])*)$')
_SEGMENT = re.compile(r'\.([A-Za-z0-9_]+)|\[(-?\d+)\]')


@dataclass(frozen=True, slots=True)
class Step:
    """One tool call of a scenario. String argument values `"$ref:<step>.<path>"` refer to earlier results."""

    id: str
    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    title: str
    prompt: str
    steps: tuple[Step, ...]
    output_steps: tuple[str, ...]
    answer: Callable[[dict[str, Any]], str]
    """The final answer, from the results of `output_steps` (keyed by step id)."""
    tools: Callable[[float], list[Tool]]
    """Builds the scenario's tools with a given latency in seconds."""
    instructions: str = 'You are an operations assistant. Use the tools to answer; be brief and exact.'


@dataclass(frozen=True, slots=True)
class ScenarioRun:
    """The measurements of one scenario in one mode."""

    scenario: str
    mode: Mode
    result: AgentRunResult
    wall_time: float
    model_tool_calls: int
    """Tool calls the model itself asked for (a plan counts as one)."""

    @property
    def llm_calls(self) -> int:
        return self.result.usage.llm_calls

    @property
    def input_tokens(self) -> int:
        return self.result.usage.input_tokens

    @property
    def output_tokens(self) -> int:
        return self.result.usage.output_tokens

    @property
    def tool_calls(self) -> int:
        return self.result.usage.tool_calls

    def to_dict(self) -> dict[str, Any]:
        return {'scenario': self.scenario, 'mode': self.mode, 'llm_calls': self.llm_calls,
                'input_tokens': self.input_tokens, 'output_tokens': self.output_tokens,
                'tool_calls': self.tool_calls, 'model_tool_calls': self.model_tool_calls,
                'wall_time_s': round(self.wall_time, 4), 'output': self.result.output}


# --- the scripted models ------------------------------------------------------------------------------------------


def resolve_refs(value: Any, results: dict[str, Any]) -> Any:
    """Replace every `"$ref:step.path"` string inside `value` with the referenced part of a result."""
    if isinstance(value, dict):
        return {key: resolve_refs(item, results) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve_refs(item, results) for item in value]
    if isinstance(value, str) and (match := _REF.match(value)):
        current = results[match.group(1)]
        for key, index in _SEGMENT.findall(match.group(2)):
            current = current[key] if key else current[int(index)]
        return current
    return value


def _refs(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set().union(*(_refs(item) for item in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_refs(item) for item in value)) if value else set()
    if isinstance(value, str) and (match := _REF.match(value)):
        return {match.group(1)}
    return set()


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _call_id(step: Step) -> str:
    return f'call_{step.id}'


def tool_by_tool_replies(scenario: Scenario, *, parallel: bool = False) -> Callable[..., object]:
    """The reply function of a model without plans: it reads every tool result in the conversation, then asks
    for the next call (or, with `parallel`, every call whose inputs are known), or answers when all are done."""
    by_call = {_call_id(step): step for step in scenario.steps}

    def reply(messages: list[Message], tools: list[ToolDefinition]) -> object:
        results = {by_call[m.tool_call_id].id: _parse(m.content)
                   for m in messages if isinstance(m, ToolMessage) and m.tool_call_id in by_call}
        ready = [step for step in scenario.steps if step.id not in results and _refs(step.arguments) <= set(results)]
        if not ready:
            return scenario.answer({step_id: results[step_id] for step_id in scenario.output_steps})
        batch = ready if parallel else ready[:1]
        return [{'tool': step.tool, 'id': _call_id(step), 'arguments': resolve_refs(step.arguments, results)}
                for step in batch]

    return reply


def plan_replies(scenario: Scenario) -> Callable[..., object]:
    """The reply function of a planning model: one `execute_tool_plan` call, then the answer from its summary."""
    plan = {
        'steps': [{'id': s.id, 'tool': s.tool, 'arguments': compact(s.arguments)}
                  for s in scenario.steps],
        'output_steps': list(scenario.output_steps),
    }

    def reply(messages: list[Message], tools: list[ToolDefinition]) -> object:
        summaries = [m for m in messages if isinstance(m, ToolMessage)]
        if not summaries:
            return {'tool': 'execute_tool_plan', 'id': 'call_plan', 'arguments': plan}
        summary = summaries[-1]
        if summary.is_error:
            return f'The plan failed: {summary.content}'
        return scenario.answer(_summary_results(summary.content))

    return reply


def _summary_results(text: str) -> dict[str, Any]:
    parsed = _parse(text)
    if isinstance(parsed, dict):
        return parsed
    for line in text.splitlines():  # "Plan completed with errors.\nResults: {...}\nErrors: ..."
        if line.startswith('Results: '):
            found = _parse(line[len('Results: '):])
            if isinstance(found, dict):
                return found
    raise ValueError(f'Cannot read the plan summary: {text[:200]!r}')


async def run_scenario(
    scenario: Scenario,
    mode: Mode,
    *,
    llm_latency: float = DEFAULT_LLM_LATENCY,
    tool_latency: float = DEFAULT_TOOL_LATENCY,
    on_event: Callable[..., Any] | None = None,
) -> ScenarioRun:
    """Run one scenario in one mode with simulated latencies; returns the measurements."""
    replies = plan_replies(scenario) if mode == 'plan' else tool_by_tool_replies(
        scenario, parallel=mode == 'parallel_calls')
    model = FunctionModel(replies, name=f'scripted-{mode}', latency=llm_latency)
    agent = Agent(model, instructions=scenario.instructions, tools=scenario.tools(tool_latency),
                  tool_planning=mode == 'plan', name=scenario.name.replace('-', '_'))
    start = time.perf_counter()
    result = await agent.run(scenario.prompt, on_event=on_event)
    wall = time.perf_counter() - start
    return ScenarioRun(scenario.name, mode, result, wall, len(result.process.history))


def scenario_by_name(name: str) -> Scenario:
    for scenario in SCENARIOS:
        if scenario.name == name:
            return scenario
    raise KeyError(f'Unknown scenario {name!r}. Available: {", ".join(s.name for s in SCENARIOS)}.')


# --- tools ----------------------------------------------------------------------------------------------------------


def _schema(properties: dict[str, Any], required: Sequence[str] | None = None) -> dict[str, Any]:
    return {'type': 'object', 'properties': properties,
            'required': list(properties) if required is None else list(required), 'additionalProperties': False}


_STRING = {'type': 'string'}
_NUMBER = {'type': 'number'}
_OBJECTS = {'type': 'array', 'items': {'type': 'object'}}

_METRICS = {
    'compute': [{'name': 'cpu_usage', 'unit': 'percent'}, {'name': 'memory_usage', 'unit': 'percent'},
                {'name': 'load_average', 'unit': 'processes'}],
    'storage': [{'name': 'disk_used', 'unit': 'percent'}, {'name': 'disk_io', 'unit': 'MB/s'}],
}
_READINGS = {'cpu_usage': (87.5, 71.2), 'memory_usage': (64.0, 61.8), 'load_average': (3.2, 2.9),
             'disk_used': (72.0, 71.9), 'disk_io': (41.0, 38.5)}


def _metrics_tools(latency: float) -> list[Tool]:
    def query(args: dict[str, Any]) -> dict[str, Any]:
        current, average = _READINGS[args['name']]
        return {'name': args['name'], 'host': 'web-01', 'current': current, 'avg_1h': average,
                'unit': 'percent', 'sampled_at': '2026-11-22T06:00:00Z'}

    def check(args: dict[str, Any]) -> dict[str, Any]:
        value, threshold, op = float(args['value']), float(args['threshold']), args.get('operator', 'gt')
        exceeded = value > threshold if op == 'gt' else value < threshold
        return {'metric': args['metric_name'], 'value': value, 'threshold': threshold, 'operator': op,
                'exceeded': exceeded}

    return [
        FakeTool('list_metrics', lambda a: {'category': a['category'], 'metrics': _METRICS[a['category']]},
                 delay=latency, description='List the metrics available in a category (compute or storage).',
                 parameters=_schema({'category': {'type': 'string', 'enum': ['compute', 'storage']}})),
        FakeTool('query_metric', query, delay=latency, description='Read the current value of one metric.',
                 parameters=_schema({'name': _STRING})),
        FakeTool('check_threshold', check, delay=latency,
                 description='Check a metric value against a threshold (operator gt or lt).',
                 parameters=_schema({'metric_name': _STRING, 'value': _NUMBER, 'threshold': _NUMBER,
                                     'operator': {'type': 'string', 'enum': ['gt', 'lt']}})),
    ]


_WEATHER = {'Tokyo': (18.5, 'clear', 55), 'London': (9.0, 'light rain', 87), 'Paris': (12.5, 'overcast', 71)}


def _weather_tools(latency: float) -> list[Tool]:
    def weather(args: dict[str, Any]) -> dict[str, Any]:
        temp, conditions, humidity = _WEATHER[args['city']]
        return {'city': args['city'], 'temp_c': temp, 'conditions': conditions, 'humidity_pct': humidity,
                'wind_kmh': 12, 'observed_at': '2026-11-22T06:00:00Z'}

    def compare(args: dict[str, Any]) -> dict[str, Any]:
        readings = sorted(args['readings'], key=lambda r: r['temp_c'])
        return {'warmest': readings[-1]['city'], 'coldest': readings[0]['city'],
                'spread_c': round(readings[-1]['temp_c'] - readings[0]['temp_c'], 1)}

    return [
        FakeTool('get_weather', weather, delay=latency, description='Current weather for a city.',
                 parameters=_schema({'city': _STRING})),
        FakeTool('compare_weather', compare, delay=latency,
                 description='Compare weather readings; returns the warmest and coldest city and the spread.',
                 parameters=_schema({'readings': _OBJECTS})),
    ]


def _orders() -> list[dict[str, Any]]:
    skus = ['SKU-CHAIR-OAK', 'SKU-DESK-120', 'SKU-LAMP-LED', 'SKU-SHELF-90', 'SKU-RUG-200x300']
    prices = [149.0, 389.5, 42.25, 99.9, 259.0]
    return [{'id': f'O-{1000 + i}', 'sku': skus[i % 5], 'qty': 1 + i % 4, 'unit_price': prices[i % 5],
             'status': 'open' if i % 3 else 'shipped', 'placed': f'2026-10-{1 + i:02d}', 'warehouse': 'AMS-2'}
            for i in range(24)]


def _chain_tools(latency: float) -> list[Tool]:
    def priced(args: dict[str, Any]) -> dict[str, Any]:
        lines = [{'id': o['id'], 'total': round(o['qty'] * o['unit_price'], 2)} for o in args['orders']]
        return {'currency': args.get('currency', 'EUR'), 'lines': lines}

    def total(args: dict[str, Any]) -> dict[str, Any]:
        return {'total': round(sum(line['total'] for line in args['lines']), 2), 'count': len(args['lines']),
                'currency': args['currency']}

    def convert(args: dict[str, Any]) -> dict[str, Any]:
        rate = 1.08 if (args['from_currency'], args['to_currency']) == ('EUR', 'USD') else 1.0
        return {'amount': round(float(args['amount']) * rate, 2), 'currency': args['to_currency'], 'rate': rate}

    return [
        FakeTool('fetch_orders', lambda a: {'customer_id': a['customer_id'], 'orders': _orders()}, delay=latency,
                 description="Fetch a customer's recent orders.", parameters=_schema({'customer_id': _STRING})),
        FakeTool('filter_orders', lambda a: {'orders': [o for o in a['orders'] if o['status'] == a['status']]},
                 delay=latency, description='Keep the orders with a given status (open or shipped).',
                 parameters=_schema({'orders': _OBJECTS, 'status': _STRING})),
        FakeTool('price_orders', priced, delay=latency, description='Price each order line (qty x unit price).',
                 parameters=_schema({'orders': _OBJECTS, 'currency': _STRING})),
        FakeTool('sum_totals', total, delay=latency, description='Sum priced order lines.',
                 parameters=_schema({'lines': _OBJECTS, 'currency': _STRING})),
        FakeTool('convert_currency', convert, delay=latency, description='Convert an amount between currencies.',
                 parameters=_schema({'amount': _NUMBER, 'from_currency': _STRING, 'to_currency': _STRING})),
    ]


_SYMBOLS = ('AAPL', 'MSFT', 'GOOG', 'AMZN', 'NVDA', 'META', 'TSLA', 'ORCL', 'SAP', 'ASML')


def _fanout_tools(latency: float) -> list[Tool]:
    def quote(args: dict[str, Any]) -> dict[str, Any]:
        index = _SYMBOLS.index(args['symbol'])
        return {'symbol': args['symbol'], 'price': round(100 + 37.5 * index, 2),
                'change_pct': round(-2.4 + 0.55 * index, 2), 'currency': 'USD', 'exchange': 'XNAS'}

    def aggregate(args: dict[str, Any]) -> dict[str, Any]:
        quotes = sorted(args['quotes'], key=lambda q: q['change_pct'])
        mean = sum(q['change_pct'] for q in quotes) / len(quotes)
        return {'count': len(quotes), 'mean_change_pct': round(mean, 2), 'best': quotes[-1]['symbol'],
                'worst': quotes[0]['symbol']}

    return [
        FakeTool('get_stock_quote', quote, delay=latency, description='Latest quote for a stock symbol.',
                 parameters=_schema({'symbol': _STRING})),
        FakeTool('aggregate_quotes', aggregate, delay=latency,
                 description='Summarise quotes: count, mean change, best and worst symbol.',
                 parameters=_schema({'quotes': _OBJECTS})),
    ]


def _metrics_answer(r: dict[str, Any]) -> str:
    check = r['check']
    verdict = 'above' if check['exceeded'] else 'not above'
    return f'{check["metric"]} is {check["value"]:g}%, {verdict} the {check["threshold"]:g}% threshold.'


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        'metrics', 'List metrics -> query CPU -> check the 80% threshold',
        'List the compute metrics, query CPU usage, and check whether it is above 80%.',
        (Step('list', 'list_metrics', {'category': 'compute'}),
         Step('query', 'query_metric', {'name': '$ref:list.metrics[0].name'}),
         Step('check', 'check_threshold', {'metric_name': '$ref:query.name', 'value': '$ref:query.current',
                                           'threshold': 80, 'operator': 'gt'})),
        ('check',), _metrics_answer, _metrics_tools),
    Scenario(
        'weather', 'Weather in three cities -> compare',
        'Compare the weather in Tokyo, London and Paris: which is warmest?',
        (Step('tokyo', 'get_weather', {'city': 'Tokyo'}), Step('london', 'get_weather', {'city': 'London'}),
         Step('paris', 'get_weather', {'city': 'Paris'}),
         Step('compare', 'compare_weather', {'readings': ['$ref:tokyo', '$ref:london', '$ref:paris']})),
        ('compare',),
        lambda r: (f'{r["compare"]["warmest"]} is warmest and {r["compare"]["coldest"]} coldest '
                   f'({r["compare"]["spread_c"]:g} C apart).'),
        _weather_tools),
    Scenario(
        'chain', 'A 5-step chain (orders -> filter -> price -> sum -> convert)',
        'What are the open orders of customer C-1042 worth, in USD?',
        (Step('fetch', 'fetch_orders', {'customer_id': 'C-1042'}),
         Step('open', 'filter_orders', {'orders': '$ref:fetch.orders', 'status': 'open'}),
         Step('price', 'price_orders', {'orders': '$ref:open.orders', 'currency': 'EUR'}),
         Step('sum', 'sum_totals', {'lines': '$ref:price.lines', 'currency': '$ref:price.currency'}),
         Step('usd', 'convert_currency', {'amount': '$ref:sum.total', 'from_currency': '$ref:sum.currency',
                                          'to_currency': 'USD'})),
        ('sum', 'usd'),
        lambda r: (f'{r["sum"]["count"]} open orders worth {r["sum"]["total"]:,.2f} EUR '
                   f'= {r["usd"]["amount"]:,.2f} USD.'),
        _chain_tools),
    Scenario(
        'fanout', 'A 10-way fan-out, then aggregate',
        f'Get quotes for {", ".join(_SYMBOLS)} and tell me the best and worst mover.',
        tuple(Step(s.lower(), 'get_stock_quote', {'symbol': s}) for s in _SYMBOLS)
        + (Step('summary', 'aggregate_quotes', {'quotes': [f'$ref:{s.lower()}' for s in _SYMBOLS]}),),
        ('summary',),
        lambda r: (f'Best mover {r["summary"]["best"]}, worst {r["summary"]["worst"]}; mean change '
                   f'{r["summary"]["mean_change_pct"]:+.2f}%.'),
        _fanout_tools),
)
