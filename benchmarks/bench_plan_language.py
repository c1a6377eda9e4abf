"""Plan language benchmark: tasks where code mode shines, tool by tool, as plans that return everything, and as
plans that shape their data (`select`, `for_each`, `when`).

Tasks (one deterministic data set; 50 orders of about 60 tokens each):
- `top3`: fetch 50 orders, keep the 3 largest;
- `map`: list the SKUs of a category, get each one's stock, report the low ones;
- `aggregate`: total and count of the completed orders;
- `condition`: alert only if a large order is still pending;
- `join`: large pending orders with their customers' names and tiers (a second source, looked up per order).

Modes, each through the real `Agent` loop with a scripted `FunctionModel` that acts as an ideal model would in
that mode (it reads the results it is sent and computes the answer itself from them; every mode must give the
same answer, which the benchmark checks):
- `tool_by_tool`: one tool call per reply;
- `plan_v1`: plans of tool calls only, every result the answer needs returned to the model (the model filters,
  maps and decides; a call that needs an earlier result's content waits for another plan);
- `plan_v2`: one plan that shapes the data and returns only what the answer needs.

Input tokens are what is sent, estimated as the project documents: `ceil(chars / 4)` of each request's messages
and tool definitions (compact JSON), summed over the requests (`toolweave.testing.estimate_usage`). Both plan modes
send the same system prompt and tool definitions, so they differ only in what comes back.

Goals for `plan_v2`: 2 LLM calls for every task; input tokens <= 40% of tool by tool and well under `plan_v1`
(reported per task and in total). Also reported: the token cost of the "# Tool Planning" prompt section and of
`execute_tool_plan`'s definition.

Run: `python -m benchmarks.bench_plan_language [--output PATH]` (seconds; `--quick` is accepted and changes
nothing). Writes `benchmarks/results/plan_language.json`.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from toolweave import Agent, PlanTool, Toolset, tool
from toolweave.models import AssistantMessage, Message, ToolMessage
from toolweave.plan import planning_instructions
from toolweave.testing import FunctionModel
from toolweave.testing._models import CHARS_PER_TOKEN, estimate_tokens
from toolweave.tools import ToolDefinition

__all__ = ('TASKS', 'main', 'run_task')

RESULTS = Path(__file__).parent / 'results' / 'plan_language.json'
MODES = ('tool_by_tool', 'plan_v1', 'plan_v2')
GOAL_CALLS = 2
GOAL_RATIO = 0.40
INSTRUCTIONS = 'You answer questions about the shop with the tools. Answer with the data only.'

# --- the data and the tools ----------------------------------------------------------------------------------------

_random = random.Random(20261123)
REGIONS = ('EU', 'US', 'APAC')
CUSTOMERS = {f'c{i}': {'id': f'c{i}', 'name': f'Customer {i}', 'tier': _random.choice(['gold', 'silver', 'basic']),
                       'email': f'customer{i}@example.com', 'since': f'20{10 + i % 15}-0{1 + i % 9}-15'}
             for i in range(20)}
ORDERS = [{'id': f'o{1000 + i}', 'customer_id': f'c{_random.randrange(20)}',
           'amount': round(_random.uniform(20, 1200), 2), 'status': _random.choice(['complete', 'pending', 'shipped']),
           'region': _random.choice(REGIONS), 'created': f'2026-10-{1 + i % 28:02d}',
           'note': _random.choice(['gift wrap', 'leave at door', 'call before delivery', 'none'])}
          for i in range(50)]
SKUS = {'laptops': [f'LAP-{n:03d}' for n in range(12)], 'phones': [f'PHN-{n:03d}' for n in range(8)]}
STOCK = {sku: {'sku': sku, 'count': _random.randrange(0, 30), 'warehouse': _random.choice(['north', 'south']),
               'updated': '2026-11-20T08:00:00Z'} for skus in SKUS.values() for sku in skus}
LOW_STOCK = 5
BIG = 900.0


@tool
def list_orders(limit: int = 50) -> list[dict[str, Any]]:
    """The latest orders, newest first."""
    return [dict(order) for order in ORDERS[:limit]]


@tool
def get_customer(customer_id: str) -> dict[str, Any]:
    """One customer's record."""
    return dict(CUSTOMERS[customer_id])


@tool
def list_skus(category: str) -> list[str]:
    """The SKUs of a product category."""
    return list(SKUS[category])


@tool
def get_stock(sku: str) -> dict[str, Any]:
    """Stock of one SKU."""
    return dict(STOCK[sku])


@tool
def send_alert(message: str) -> str:
    """Alert the on-call team."""
    return 'alert sent'


TOOLS = [list_orders, get_customer, list_skus, get_stock, send_alert]

# --- an ideal model, scripted per task and mode ----------------------------------------------------------------------


def _results(messages: Sequence[Message]) -> list[Any]:
    """Every tool result the model has been sent, parsed as JSON where it is JSON."""
    out: list[Any] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            try:
                out.append(json.loads(message.content))
            except json.JSONDecodeError:
                out.append(message.content)
    return out


def _turn(messages: Sequence[Message]) -> int:
    return sum(isinstance(m, AssistantMessage) for m in messages)


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {'tool': name, 'arguments': arguments}


def _plan(*steps: dict[str, Any], output: list[str] | None = None) -> dict[str, Any]:
    return _call('execute_tool_plan', {'steps': list(steps), **({'output_steps': output} if output else {})})


def _step(step_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {'id': step_id, 'tool': name, 'arguments': arguments}


Reply = Callable[[Sequence[Message]], Any]


@dataclass(frozen=True)
class Task:
    name: str
    prompt: str
    answer: str
    """The right answer, computed here from the data."""
    modes: dict[str, Reply]


def _top3_answer(orders: list[dict[str, Any]]) -> str:
    top = sorted(orders, key=lambda o: o['amount'], reverse=True)[:3]
    return json.dumps([{'id': o['id'], 'amount': o['amount']} for o in top])


def _task_top3() -> Task:
    def by_tool(messages: Sequence[Message]) -> Any:
        return _call('list_orders', {'limit': 50}) if _turn(messages) == 0 else _top3_answer(_results(messages)[0])

    def v1(messages: Sequence[Message]) -> Any:
        if _turn(messages) == 0:
            return _plan(_step('orders', 'list_orders', limit=50))
        return _top3_answer(_results(messages)[0]['orders'])

    def v2(messages: Sequence[Message]) -> Any:
        if _turn(messages) == 0:
            return _plan(_step('orders', 'list_orders', limit=50),
                         {'id': 'top', 'from': '$ref:orders',
                          'select': 'sort_by(@, &amount) | reverse(@) | [:3].{id: id, amount: amount}'},
                         output=['top'])
        return json.dumps(_results(messages)[0]['top'])

    return Task('top3', 'Which 3 of the latest 50 orders are largest? Give id and amount.', _top3_answer(ORDERS),
                {'tool_by_tool': by_tool, 'plan_v1': v1, 'plan_v2': v2})


def _low_answer(stock: list[dict[str, Any]]) -> str:
    return json.dumps(sorted(s['sku'] for s in stock if s['count'] < LOW_STOCK))


def _task_map() -> Task:
    def by_tool(messages: Sequence[Message]) -> Any:
        results = _results(messages)
        if not results:
            return _call('list_skus', {'category': 'laptops'})
        skus = results[0]
        if len(results) - 1 < len(skus):
            return _call('get_stock', {'sku': skus[len(results) - 1]})
        return _low_answer(results[1:])

    def v1(messages: Sequence[Message]) -> Any:
        results = _results(messages)
        if not results:
            return _plan(_step('skus', 'list_skus', category='laptops'))
        if len(results) == 1:
            return _plan(*(_step(f's{i}', 'get_stock', sku=sku) for i, sku in enumerate(results[0]['skus'])))
        return _low_answer(list(results[1].values()))

    def v2(messages: Sequence[Message]) -> Any:
        if _turn(messages) == 0:
            return _plan(_step('skus', 'list_skus', category='laptops'),
                         {**_step('stock', 'get_stock', sku='$item'), 'for_each': '$ref:skus'},
                         {'id': 'low', 'from': '$ref:stock', 'select': f'[?count < `{LOW_STOCK}`].sku | sort(@)'},
                         output=['low'])
        return json.dumps(_results(messages)[0]['low'])

    laptops = [STOCK[sku] for sku in SKUS['laptops']]
    return Task('map', f'Which laptop SKUs have fewer than {LOW_STOCK} in stock?', _low_answer(laptops),
                {'tool_by_tool': by_tool, 'plan_v1': v1, 'plan_v2': v2})


def _total_answer(orders: list[dict[str, Any]]) -> str:
    done = [o['amount'] for o in orders if o['status'] == 'complete']
    return json.dumps({'total': round(sum(done), 2), 'count': len(done)})


def _task_aggregate() -> Task:
    def by_tool(messages: Sequence[Message]) -> Any:
        return _call('list_orders', {'limit': 50}) if _turn(messages) == 0 else _total_answer(_results(messages)[0])

    def v1(messages: Sequence[Message]) -> Any:
        if _turn(messages) == 0:
            return _plan(_step('orders', 'list_orders', limit=50))
        return _total_answer(_results(messages)[0]['orders'])

    def v2(messages: Sequence[Message]) -> Any:
        if _turn(messages) == 0:
            return _plan(_step('orders', 'list_orders', limit=50),
                         {'id': 'sum', 'from': '$ref:orders',
                          'select': "[?status == 'complete'].amount | {total: sum(@), count: length(@)}"},
                         output=['sum'])
        found = _results(messages)[0]['sum']
        return json.dumps({'total': round(found['total'], 2), 'count': found['count']})

    return Task('aggregate', 'What is the total amount of the completed orders among the latest 50, and how many?',
                _total_answer(ORDERS), {'tool_by_tool': by_tool, 'plan_v1': v1, 'plan_v2': v2})


def _pending_big(orders: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in orders if o['status'] == 'pending' and o['amount'] > BIG]


def _alert_text(ids: list[str]) -> str:
    return f'Large pending orders: {", ".join(ids)}'


def _task_condition() -> Task:
    expected = _pending_big(ORDERS)
    answer = 'alerted: ' + ', '.join(o['id'] for o in expected) if expected else 'no alert needed'

    def by_tool(messages: Sequence[Message]) -> Any:
        results = _results(messages)
        if not results:
            return _call('list_orders', {'limit': 50})
        ids = [o['id'] for o in _pending_big(results[0])]
        if ids and len(results) == 1:
            return _call('send_alert', {'message': _alert_text(ids)})
        return 'alerted: ' + ', '.join(ids) if ids else 'no alert needed'

    def v1(messages: Sequence[Message]) -> Any:
        results = _results(messages)
        if not results:
            return _plan(_step('orders', 'list_orders', limit=50))
        ids = [o['id'] for o in _pending_big(results[0]['orders'])]
        if ids and len(results) == 1:
            return _plan(_step('alert', 'send_alert', message=_alert_text(ids)))
        return 'alerted: ' + ', '.join(ids) if ids else 'no alert needed'

    def v2(messages: Sequence[Message]) -> Any:
        if _turn(messages) == 0:
            return _plan(_step('orders', 'list_orders', limit=50),
                         {'id': 'big', 'from': '$ref:orders',
                          'select': f"[?status == 'pending' && amount > `{BIG}`].id"},
                         {**_step('alert', 'send_alert', message='Large pending orders: {{$ref:big}}'),
                          'when': {'from': '$ref:big', 'select': 'length(@) > `0`'}},
                         output=['big', 'alert'])
        shown = _results(messages)[0]
        return 'alerted: ' + ', '.join(shown['big']) if shown['alert'] == 'alert sent' else 'no alert needed'

    return Task('condition', f'If any of the latest 50 orders over ${BIG:.0f} is still pending, alert on-call.',
                answer, {'tool_by_tool': by_tool, 'plan_v1': v1, 'plan_v2': v2})


def _joined(orders: list[dict[str, Any]], customers: list[dict[str, Any]]) -> str:
    return json.dumps([{'id': o['id'], 'amount': o['amount'], 'name': c['name'], 'tier': c['tier']}
                       for o, c in zip(orders, customers, strict=True)])


def _task_join() -> Task:
    big = _pending_big(ORDERS)

    def by_tool(messages: Sequence[Message]) -> Any:
        results = _results(messages)
        if not results:
            return _call('list_orders', {'limit': 50})
        wanted = _pending_big(results[0])
        if len(results) - 1 < len(wanted):
            return _call('get_customer', {'customer_id': wanted[len(results) - 1]['customer_id']})
        return _joined(wanted, results[1:])

    def v1(messages: Sequence[Message]) -> Any:
        results = _results(messages)
        if not results:
            return _plan(_step('orders', 'list_orders', limit=50))
        wanted = _pending_big(results[0]['orders'])
        if len(results) == 1:
            return _plan(*(_step(f'c{i}', 'get_customer', customer_id=o['customer_id']) for i, o in enumerate(wanted)))
        return _joined(wanted, list(results[1].values()))

    def v2(messages: Sequence[Message]) -> Any:
        if _turn(messages) == 0:
            return _plan(_step('orders', 'list_orders', limit=50),
                         {'id': 'big', 'from': '$ref:orders',
                          'select': f"[?status == 'pending' && amount > `{BIG}`]"
                                    '.{id: id, amount: amount, customer_id: customer_id}'},
                         {**_step('who', 'get_customer', customer_id='$item.customer_id'), 'for_each': '$ref:big'},
                         {'id': 'rows', 'from': {'orders': '$ref:big', 'customers': '$ref:who'},
                          'select': '{orders: orders[].{id: id, amount: amount}, '
                                    'customers: customers[].{name: name, tier: tier}}'},
                         output=['rows'])
        rows = _results(messages)[0]['rows']
        return json.dumps([{**o, **c} for o, c in zip(rows['orders'], rows['customers'], strict=True)])

    return Task('join', f'Which pending orders over ${BIG:.0f} are there, and who are their customers (name, tier)?',
                _joined(big, [CUSTOMERS[o['customer_id']] for o in big]),
                {'tool_by_tool': by_tool, 'plan_v1': v1, 'plan_v2': v2})


TASKS = (_task_top3(), _task_map(), _task_aggregate(), _task_condition(), _task_join())

# --- running --------------------------------------------------------------------------------------------------------


@dataclass
class Row:
    task: str
    mode: str
    llm_calls: int
    input_tokens: int
    output_tokens: int
    tool_calls: int
    correct: bool


async def run_task(task: Task, mode: str) -> Row:
    script = task.modes[mode]
    model = FunctionModel(lambda messages, tools: script(messages), name=f'ideal-{mode}')
    # Plans return whole results, as tool calls do (the default cut at 4,000 characters would hide orders).
    agent = Agent(model, instructions=INSTRUCTIONS, tools=TOOLS, tool_planning=mode != 'tool_by_tool',
                  max_iterations=30, plan_options={'max_output_chars': None})
    result = await agent.run(task.prompt)
    usage = result.usage
    return Row(task.name, mode, usage.llm_calls, usage.input_tokens, usage.output_tokens, usage.tool_calls,
               result.output == task.answer)


def _definition_tokens(definition: ToolDefinition) -> int:
    return estimate_tokens(json.dumps({'name': definition.name, 'description': definition.description,
                                       'parameters': definition.parameters}, separators=(',', ':')))


def teaching_cost() -> dict[str, int]:
    """Tokens of what teaches the plan language: the prompt section and the plan tool's definition."""
    planner = PlanTool(Toolset(TOOLS))
    return {'prompt_section': estimate_tokens(planning_instructions()),
            'definition_compact': _definition_tokens(planner.definition),
            'definition_typed_for_these_tools': _definition_tokens(PlanTool(Toolset(TOOLS),
                                                                            plan_schema='typed').definition),
            'definition_string': _definition_tokens(PlanTool(Toolset(TOOLS), plan_schema='string').definition)}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='accepted for `python -m benchmarks --quick`')
    parser.add_argument('--output', type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows = [anyio.run(run_task, task, mode) for task in TASKS for mode in MODES]
    by = {(r.task, r.mode): r for r in rows}
    print(f'Plan language benchmark: input tokens = ceil(chars/{CHARS_PER_TOKEN}) of what is sent, summed over the '
          'requests; every mode checked against the right answer.\n')
    print(f'{"task":<10} | {"LLM calls":^20} | {"input tokens":^26} | {"v2 / tbt":>8} {"v2 / v1":>8} | correct')
    print(f'{"":<10} | {"tbt":>6} {"v1":>6} {"v2":>6} | {"tbt":>8} {"v1":>8} {"v2":>8} |')
    totals = dict.fromkeys(MODES, 0)
    verdicts: dict[str, Any] = {}
    for task in TASKS:
        t, v1, v2 = (by[(task.name, m)] for m in MODES)
        for mode in MODES:
            totals[mode] += by[(task.name, mode)].input_tokens
        ratio_tbt, ratio_v1 = v2.input_tokens / t.input_tokens, v2.input_tokens / v1.input_tokens
        verdicts[task.name] = {'calls': v2.llm_calls <= GOAL_CALLS, 'vs_tool_by_tool': ratio_tbt <= GOAL_RATIO,
                               'vs_plan_v1': ratio_v1 < 1}
        print(f'{task.name:<10} | {t.llm_calls:>6} {v1.llm_calls:>6} {v2.llm_calls:>6} | {t.input_tokens:>8,} '
              f'{v1.input_tokens:>8,} {v2.input_tokens:>8,} | {ratio_tbt:>8.0%} {ratio_v1:>8.0%} | '
              f'{"yes" if t.correct and v1.correct and v2.correct else "NO"}')
    total_tbt, total_v1 = totals['plan_v2'] / totals['tool_by_tool'], totals['plan_v2'] / totals['plan_v1']
    print(f'{"all":<10} | {"":>20} | {totals["tool_by_tool"]:>8,} {totals["plan_v1"]:>8,} {totals["plan_v2"]:>8,} | '
          f'{total_tbt:>8.0%} {total_v1:>8.0%} |')
    cost = teaching_cost()
    print(f'\nteaching the language: prompt section {cost["prompt_section"]} tokens, execute_tool_plan definition '
          f'{cost["definition_compact"]} (compact, default), {cost["definition_typed_for_these_tools"]} (typed, these '
          f'{len(TOOLS)} tools), {cost["definition_string"]} (string)')
    calls_ok = all(v['calls'] for v in verdicts.values())
    ratio_ok = all(v['vs_tool_by_tool'] for v in verdicts.values())
    v1_ok = all(v['vs_plan_v1'] for v in verdicts.values())
    print(f'goal: {GOAL_CALLS} LLM calls per task in plan_v2: {"met" if calls_ok else "MISSED"}; input tokens <= '
          f'{GOAL_RATIO:.0%} of tool by tool on every task: {"met" if ratio_ok else "MISSED"} (all tasks: '
          f'{total_tbt:.0%}); under plan_v1 on every task: {"met" if v1_ok else "MISSED"} (all tasks: {total_v1:.0%})')
    correct = all(r.correct for r in rows)
    if not correct:
        print('WRONG ANSWERS: ' + ', '.join(f'{r.task}/{r.mode}' for r in rows if not r.correct))
    report = {'benchmark': 'plan_language', 'python': platform.python_version(), 'chars_per_token': CHARS_PER_TOKEN,
              'rows': [vars(r) for r in rows], 'totals': totals, 'ratio_v2_tool_by_tool': total_tbt,
              'ratio_v2_v1': total_v1, 'teaching_tokens': cost, 'verdicts': verdicts, 'all_correct': correct,
              'goals': {'calls': calls_ok, 'vs_tool_by_tool': ratio_ok, 'vs_plan_v1': v1_ok}}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + '\n')
    print(f'wrote {args.output}')
    return report


if __name__ == '__main__':
    report = main()
    sys.exit(0 if report['all_correct'] else 1)
