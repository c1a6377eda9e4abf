"""Process introspection tools: a model reads the state of the agent run it is part of.

Each tool reads `current_process()` when it is called, so one set of tools serves every run (and every
sub-agent run: a sub-agent sees its own process). Outside a run each returns a fixed sentence saying so, as text.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from toolweave._checks import check_number
from toolweave.agent import AgentProcess, current_process
from toolweave.builtins._common import BuiltinTool, format_count, format_duration, metadata
from toolweave.exceptions import UserError
from toolweave.tools import ToolDefinition, ToolResult

__all__ = (
    'MAX_HISTORY_LINES',
    'NO_PROCESS',
    'PROCESS_FACADE_DESCRIPTION',
    'PROCESS_FACADE_NOTES',
    'ModelPrice',
    'process_tools',
)

NO_PROCESS = 'No agent process available. These tools require an active agent context.'
NO_ACTIONS = 'No actions have been executed yet.'
NO_TOOLS = 'No tools have been called yet.'
NO_MODELS = 'No models have been used yet.'
MAX_HISTORY_LINES = 50
"""`process_history` lists at most this many of the latest calls (and steps per plan), so a long run does not
flood the model's context; the header says how many there are in all."""
_ERROR_PREVIEW = 120
_UNNAMED = '(unnamed model)'
CATEGORY = 'agent_process'
PROCESS_FACADE_DESCRIPTION = ('Access information about the current agent process including status, budget, cost, '
                              'and history. Invoke to see available operations.')
PROCESS_FACADE_NOTES = ('Use process_status for current state and runtime. Use process_budget to check limits. '
                        'Use process_cost to see spending.')


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """What a model costs, in US dollars per million tokens; `process_cost` uses it to estimate spending.

    ```python
    from toolweave.builtins import ModelPrice, process_tools

    tools = process_tools(prices={'gpt-4o-mini': ModelPrice(input=0.15, output=0.60)})
    ```
    """

    input: float
    """Dollars per million input (prompt) tokens."""
    output: float
    """Dollars per million output (completion) tokens."""

    def __post_init__(self) -> None:
        for name in ('input', 'output'):
            check_number(getattr(self, name), f'ModelPrice.{name}')  # dollars per million tokens

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """Dollars for this many tokens."""
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


def process_tools(*, prices: Mapping[str, ModelPrice] | None = None) -> list[BuiltinTool]:
    """The six process introspection tools: `process_status`, `process_budget`, `process_cost`,
    `process_history`, `process_tools_stats` and `process_models`. None takes arguments.

    Args:
        prices: Price per model name (as the process records it: the provider's model name, or the model's
            `name`), so `process_cost` can estimate spending; without it the cost is reported as unknown.

    ```python
    from toolweave import Agent
    from toolweave.builtins import process_tools
    from toolweave.testing import ScriptedModel

    model = ScriptedModel([{'tool': 'process_tools_stats', 'arguments': {}}, 'done'])
    result = Agent(model, tools=process_tools()).run_sync('How many tools have I called?')
    print(result.messages[-2].content)
    #> No tools have been called yet.
    ```
    """
    table = _check_prices(prices)
    specs: list[tuple[str, str, Callable[[AgentProcess], str]]] = [
        ('process_status', 'Get the current process status, ID, running time, and parent process', _status),
        ('process_budget', 'Get the budget limits (LLM calls, tokens, tool calls) and the usage against them',
         _budget),
        ('process_cost', 'Get detailed cost and token usage information, per model',
         lambda process: _cost(process, table)),
        ('process_history', 'Get the history of tool calls made in this process, with their running times',
         _history),
        ('process_tools_stats', 'Get statistics about tool usage in this process (calls per tool)', _tools_stats),
        ('process_models', 'Get information about which models have been used, with their token usage', _models),
    ]
    return [BuiltinTool(ToolDefinition(name, description, metadata=metadata(CATEGORY)), _with_process(report))
            for name, description, report in specs]


def _check_prices(prices: Mapping[str, ModelPrice] | None) -> dict[str, ModelPrice]:
    if prices is None:
        return {}
    if not isinstance(prices, Mapping):
        raise UserError(f'process_tools(prices=...) must be a mapping of model name to ModelPrice, got '
                        f'{type(prices).__name__}: {prices!r}.')
    for name, price in prices.items():
        if not isinstance(name, str) or not isinstance(price, ModelPrice):
            raise UserError(f'Entry {name!r}: {price!r} in process_tools(prices=...) must map a model name (str) to '
                            "a ModelPrice, for example {'gpt-4o-mini': ModelPrice(input=0.15, output=0.60)}.")
    return dict(prices)


def _with_process(report: Callable[[AgentProcess], str]) -> Callable[[dict[str, object]], ToolResult]:
    def handler(arguments: dict[str, object]) -> ToolResult:
        process = current_process()
        return ToolResult.success(NO_PROCESS if process is None else report(process))

    return handler


def _running_time(process: AgentProcess) -> float:
    return process.duration if process.duration is not None else process.elapsed()


def _status(process: AgentProcess) -> str:
    parent = process.parent
    parent_line = 'none (root process)' if parent is None else f'{parent.id} (agent {parent.agent_name!r})'
    lines = [
        f'Process ID: {process.id}',
        f'Agent: {process.agent_name}',
        f'Status: {process.status}',
        f'Running time: {format_duration(_running_time(process))}',
        f'Parent ID: {parent_line}',
    ]
    if process.stop_reason:
        lines.append(f'Stop reason: {process.stop_reason}')
    return '\n'.join(lines)


def _limit_lines(label: str, limit: int | None, used: int) -> list[str]:
    if limit is None:
        return [f'{label}: none', f'  Used: {used:,}']
    return [f'{label}: {limit:,}', f'  Used: {used:,}', f'  Remaining: {max(limit - used, 0):,}']


def _budget(process: AgentProcess) -> str:
    budget, usage = process.budget, process.usage
    lines = ['Budget Status:', '']
    lines += _limit_lines('LLM call limit', budget.max_llm_calls, usage.llm_calls) + ['']
    lines += _limit_lines('Token limit', budget.max_tokens, usage.total_tokens) + ['']
    # the call reading this is already counted: the loop counts a call before running it
    lines += _limit_lines('Tool call limit', budget.max_tool_calls, usage.tool_calls)
    return '\n'.join(lines)


def _cost(process: AgentProcess, prices: Mapping[str, ModelPrice]) -> str:
    usage = process.usage
    models = dict(process.models)
    unpriced = [name for name in models if name not in prices]
    total = sum(prices[name].cost(u.input_tokens, u.output_tokens) for name, u in models.items() if name in prices)
    if not prices:
        cost_line = 'Total cost: unknown (no model prices configured)'
    elif unpriced:
        cost_line = f'Total cost: at least ${total:.6f} (no price for: {", ".join(unpriced)})'
    else:
        cost_line = f'Total cost: ${total:.6f}'
    lines = [
        'Cost and Usage:', '', cost_line, f'LLM invocations: {usage.llm_calls:,}', '', 'Tokens used:',
        f'  Input tokens: {usage.input_tokens:,}',
        f'  Output tokens: {usage.output_tokens:,}',
        f'  Total tokens: {usage.total_tokens:,}',
    ]
    if models:
        lines += ['', 'By model:']
        for name, model_usage in models.items():
            price = prices.get(name)
            spent = '' if price is None else f', ${price.cost(model_usage.input_tokens, model_usage.output_tokens):.6f}'
            lines.append(f'  {name or _UNNAMED}: {format_count(model_usage.requests, "request")}, '
                         f'{model_usage.input_tokens:,} in, {model_usage.output_tokens:,} out{spent}')
    return '\n'.join(lines)


def _preview(error: str | None) -> str:
    flat = ' '.join((error or '').split())
    return flat if len(flat) <= _ERROR_PREVIEW else f'{flat[: _ERROR_PREVIEW - 3]}...'


def _history(process: AgentProcess) -> str:
    history, runs = list(process.history), list(process.plan_runs)
    if not history and not runs:
        return NO_ACTIONS
    shown = history[-MAX_HISTORY_LINES:]
    note = f', the last {len(shown)} shown' if len(shown) < len(history) else ''
    lines = [f'Action history ({len(history)} action(s){note}):', '']
    first = len(history) - len(shown) + 1
    for number, record in enumerate(shown, start=first):
        outcome = '' if record.result.ok else f' - failed: {_preview(record.result.error)}'
        lines.append(f'{number}. {record.name} ({format_duration(record.duration)}){outcome}')
    if runs:
        lines += ['', f'Plan runs ({len(runs)}):']
        for number, run in enumerate(runs, start=1):
            lines.append(f'  {number}. {run.succeeded}/{run.total} steps succeeded in {format_duration(run.duration)}')
            for step in run.steps[:MAX_HISTORY_LINES]:
                took = '' if step.duration is None else f' ({format_duration(step.duration)})'
                failed = f': {_preview(step.error)}' if step.error else ''
                lines.append(f'     - {step.id}: {step.tool} {step.status}{took}{failed}')
            if run.total > MAX_HISTORY_LINES:
                lines.append(f'     ... {run.total - MAX_HISTORY_LINES} more step(s)')
    return '\n'.join(lines)


def _tools_stats(process: AgentProcess) -> str:
    calls: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    for record in list(process.history):
        calls[record.name] += 1
        failures[record.name] += 0 if record.result.ok else 1
    for run in list(process.plan_runs):
        for step in run.steps:
            if step.started_at is not None:  # a skipped step never called its tool
                calls[step.tool] += 1
                failures[step.tool] += 1 if step.status == 'failed' else 0
    if not calls:
        return NO_TOOLS
    lines = ['Tool Usage Statistics:', '', f'Total tool calls: {sum(calls.values()):,}',
             f'Unique tools used: {len(calls)}', '', 'Calls by tool:']
    for name, count in calls.most_common():  # ties keep first-use order
        failed = f' ({failures[name]:,} failed)' if failures[name] else ''
        lines.append(f'  {name}: {format_count(count, "call")}{failed}')
    return '\n'.join(lines)


def _models(process: AgentProcess) -> str:
    models = dict(process.models)
    if not models:
        return NO_MODELS
    lines = [f'Models used ({len(models)}):', '']
    for name, usage in models.items():
        lines.append(f'- {name or _UNNAMED}: {format_count(usage.requests, "request")}, '
                     f'{usage.input_tokens:,} input tokens, {usage.output_tokens:,} output tokens')
    return '\n'.join(lines)
