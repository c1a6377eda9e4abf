"""The meta-tools a model calls with a whole plan: `execute_tool_plan` (id-based) and `execute_plan`
(index-based), and the instructions an agent appends to its prompt.

They never raise for a bad plan or a failed step: the model gets text it can act on. Only configuration
errors and control-flow signals propagate, as from any tool.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from toolweave.approval import ReviewHandler
from toolweave.exceptions import ControlFlowSignal, PlanValidationError, ToolConfigurationError
from toolweave.plan._model import Dialect, EventHandler, MissingField
from toolweave.plan._parse import EMPTY_PLAN, parse_lenient
from toolweave.plan._record import DEFAULT_MAX_OUTPUT_CHARS, PlanRun
from toolweave.plan._run import RunOptions, run_parsed
from toolweave.plan._validate import as_toolset
from toolweave.tools import (
    Tool,
    ToolArguments,
    ToolCallContext,
    ToolDefinition,
    ToolMetadata,
    ToolResult,
    Toolset,
    ToolsetItem,
)

__all__ = ('PlanTool', 'planning_instructions')

_MODEL_MAX_STEPS = 1000

_ID_DESCRIPTION = (
    "Run a plan of several tool calls in one go. Steps run in parallel unless one refers to another's "
    'result with "$ref:<step id>" (or "$ref:<step id>.<field>") inside its arguments. Returns the outputs of '
    '`output_steps` (all steps if omitted) as JSON keyed by step id, plus an error list if any step failed.'
)
_INDEX_DESCRIPTION = (
    'Execute a multi-step plan in a single call. `plan` is a JSON string: {"goal": "...", "steps": [{"tool": '
    '"...", "args": {...}, "description": "..."}]}. An argument may be {"$ref": "steps[N].result.<path>"} to use '
    'the result of an earlier step N. Returns one line per step.'
)


def _id_schema() -> dict[str, Any]:
    step = {
        'type': 'object',
        'properties': {
            'id': {'type': 'string', 'description': 'Unique step id (letters, digits, _ and -).'},
            'tool': {'type': 'string', 'description': 'Name of the tool to call.'},
            'arguments': {'type': 'string', 'description': 'The tool arguments as a JSON object string; values may '
                          'be "$ref:<step id>" or "$ref:<step id>.<field>".'},
        },
        'required': ['id', 'tool', 'arguments'],
        'additionalProperties': False,
    }
    return {
        'type': 'object',
        'properties': {
            'steps': {'type': 'array', 'items': step, 'description': 'The tool calls of the plan.'},
            # Required but nullable: providers' strict mode wants every property listed; null means all steps.
            'output_steps': {'type': ['array', 'null'], 'items': {'type': 'string'},
                             'description': 'Ids of the steps whose outputs you need back (null: all).'},
        },
        'required': ['steps', 'output_steps'],
        'additionalProperties': False,
    }


def _index_schema() -> dict[str, Any]:
    return {
        'type': 'object',
        'properties': {'plan': {'type': 'string', 'description': 'The full plan as a JSON string'}},
        'required': ['plan'],
        'additionalProperties': False,
    }


def planning_instructions(tool_name: str = 'execute_tool_plan') -> str:
    """The "# Tool Planning" section an agent appends to its instructions when planning is on."""
    return (
        '# Tool Planning\n'
        f'When you already know several tool calls you need, call `{tool_name}` once with all of them instead of '
        'calling the tools one by one.\n'
        '- Each step has an `id` (unique: letters, digits, _ and -), a `tool` name, and `arguments`: a JSON object '
        'string for that tool.\n'
        '- Use an earlier result inside arguments: "$ref:step_id" inserts the whole output (JSON stays JSON); '
        '"$ref:step_id.field" (also "$ref:step_id.items[0].name") inserts one field; '
        '"text {{$ref:step_id.field}} text" splices a value into a longer string.\n'
        '- Steps that do not refer to each other run in parallel automatically; a step runs as soon as the steps '
        'it refers to are done. If a step fails, the steps that refer to it are skipped; the rest still run.\n'
        '- Set `output_steps` to the ids whose results you need; other outputs are not returned.\n'
        'Example: {"steps": [{"id": "a", "tool": "get_weather", "arguments": "{\\"city\\": \\"Tokyo\\"}"}, '
        '{"id": "b", "tool": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}, {"id": "c", "tool": '
        '"compare", "arguments": "{\\"x\\": \\"$ref:a.temp\\", \\"y\\": \\"$ref:b.temp\\"}"}], '
        '"output_steps": ["c"]}'
    )


class PlanTool(Tool):
    """The `execute_tool_plan` meta-tool (or, with `dialect='index'`, the index-based `execute_plan`, whose steps
    refer to earlier ones as `{"$ref": "steps[N].result.<path>"}`), bound to a Toolset that it reads at call time:
    tools added to the Toolset later can be used in plans.

    The result text is the run's summary (`PlanRun.summary`; the digest for `execute_plan`) and the result
    value is the `PlanRun` itself. A plan that fails validation gives the failure
    `Plan execution failed: <every problem>` and runs nothing.

    ```python
    echo = FakeTool('echo', lambda args: args['text'])
    planner = PlanTool(Toolset([echo]))
    result = await planner.call({'steps': [{'id': 'a', 'tool': 'echo', 'arguments': '{"text": "hi"}'}]})
    print(result.text)
    #> {"a": "hi"}
    ```
    """

    def __init__(
        self,
        tools: Toolset | Iterable[ToolsetItem],
        *,
        dialect: Dialect = 'id',
        name: str | None = None,
        description: str | None = None,
        concurrency: int | None = None,
        step_timeout: float | None = None,
        timeout: float | None = None,
        missing_field: MissingField = 'error',
        max_steps: int = _MODEL_MAX_STEPS,
        max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
        review_handler: ReviewHandler | None = None,
        on_event: EventHandler | None = None,
    ) -> None:
        self.tools = as_toolset(tools)
        self.dialect: Literal['id', 'index'] = dialect
        self.options = RunOptions(concurrency, step_timeout, timeout, missing_field, max_steps, max_output_chars,
                                  review_handler)
        self.on_event = on_event
        default_name = 'execute_tool_plan' if dialect == 'id' else 'execute_plan'
        self._definition = ToolDefinition(
            name or default_name,
            description or (_ID_DESCRIPTION if dialect == 'id' else _INDEX_DESCRIPTION),
            _id_schema() if dialect == 'id' else _index_schema(),
            ToolMetadata(strict=True),
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    def instructions(self) -> str:
        """The prompt section that teaches a model this tool."""
        return planning_instructions(self._definition.name)

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        if self.dialect == 'index':
            return await self._execute_index(arguments, context)
        data: Any = arguments if arguments is not None else {}
        parsed = parse_lenient(data)  # either dialect is accepted; the schema shows the id-based one
        try:
            run = await self._run(parsed, context)
        except PlanValidationError as exc:
            return ToolResult.failure(_render_problems(exc.problems))
        except (ToolConfigurationError, ControlFlowSignal):
            raise
        except Exception as exc:
            return ToolResult.failure(f'Unexpected error during plan execution: {type(exc).__name__}: {exc}')
        return ToolResult.success(run.summary, run)

    async def _run(self, parsed: Any, context: ToolCallContext) -> PlanRun:
        return await run_parsed(parsed, self.tools, self.options, context=context, on_event=self.on_event,
                                refused=frozenset({self._definition.name}))

    async def _execute_index(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        text = _plan_text(arguments)
        if text is None:
            return ToolResult.success(json.dumps({'error': 'Plan validation failed: the tool takes one string '
                                                  'argument "plan" holding the plan JSON'}))
        try:
            data = json.loads(text) if isinstance(text, str) else text
        except (json.JSONDecodeError, RecursionError):
            return ToolResult.success(json.dumps({'error': f'Invalid JSON: {str(text)[:100]}...'}))
        parsed = parse_lenient(data, 'index')
        try:
            run = await self._run(parsed, context)
        except PlanValidationError as exc:
            return ToolResult.success(json.dumps({'error': 'Plan validation failed: ' + '; '.join(exc.problems)}))
        except (ToolConfigurationError, ControlFlowSignal):
            raise
        except Exception as exc:
            return ToolResult.success(json.dumps({'error': f'Unexpected error during plan execution: {exc}'}))
        return ToolResult.success(run.digest(), run)


def _plan_text(arguments: ToolArguments) -> str | Mapping[str, Any] | None:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (json.JSONDecodeError, RecursionError):
            return arguments  # the model sent the plan itself rather than {"plan": ...}
    if not isinstance(arguments, Mapping):
        return None
    plan = arguments.get('plan')
    if isinstance(plan, str):
        return plan
    if isinstance(plan, Mapping):
        return plan
    if 'steps' in arguments:
        return arguments
    return None


def _render_problems(problems: list[str]) -> str:
    if len(problems) == 1 and problems[0].startswith(EMPTY_PLAN):
        return problems[0]
    if len(problems) == 1:
        return f'Plan execution failed: {problems[0]}'
    listed = '\n'.join(f'- {p}' for p in problems)
    return f'Plan execution failed: {len(problems)} problems (nothing ran; fix them all and resend):\n{listed}'
