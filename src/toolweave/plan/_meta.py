"""The meta-tools a model calls with a whole plan: `execute_tool_plan` (id-based) and `execute_plan`
(index-based), and the instructions an agent appends to its prompt.

They never raise for a bad plan or a failed step: the model gets text it can act on. Only configuration
errors and control-flow signals propagate, as from any tool.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from toolweave.approval import PlanReviewRequest, ReviewHandler
from toolweave.exceptions import ControlFlowSignal, PlanValidationError, ToolConfigurationError, UserError
from toolweave.plan._contracts import output_schema
from toolweave.plan._model import Dialect, MissingField, ReviewMode
from toolweave.plan._options import RunOptions
from toolweave.plan._parse import (
    DEFAULT_MAX_BYTES,
    EMPTY_PLAN,
    Parsed,
    loads_async,
    parse_async,
    plan_bytes,
    too_large,
)
from toolweave.plan._plan_schema import (
    PlanSchema,
    SchemaTooLarge,
    compact_schema,
    constrained_schema,
    drop_unset_nulls,
    string_schema,
    typed_schema,
)
from toolweave.plan._record import DEFAULT_MAX_OUTPUT_CHARS, EventHandler, PlanRun
from toolweave.plan._retry import Retries
from toolweave.plan._review import plan_review_request
from toolweave.plan._run import run_parsed
from toolweave.plan._stream import PlanStream
from toolweave.plan._validate import (
    DEFAULT_MAX_ITEMS,
    PLAN_TOOL_NAMES,
    RunsPlans,
    as_toolset,
    prepare_async,
    validate_plan,
)
from toolweave.plan.durable._runs import StoreLike, open_store
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

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

__all__ = ('PlanTool', 'plan_first_instructions', 'planning_instructions')

logger = logging.getLogger('toolweave.plan')

_MODEL_MAX_STEPS = 1000

_ID_DESCRIPTION = (
    'Run tool calls as one plan: steps [{"id", "tool", "arguments"}]; "$ref:ID" or "$ref:ID.field" in arguments '
    'passes an earlier result. Steps may also select (JMESPath), loop (for_each) or wait on a condition (when): see '
    'the Tool Planning instructions.'
)
_INDEX_DESCRIPTION = (
    'Execute a multi-step plan in a single call. `plan` is a JSON string: {"goal": "...", "steps": [{"tool": '
    '"...", "args": {...}, "description": "..."}]}. An argument may be {"$ref": "steps[N].result.<path>"} to use '
    'the result of an earlier step N. Returns one line per step.'
)


def _index_schema() -> dict[str, Any]:
    return {
        'type': 'object',
        'properties': {'plan': {'type': 'string', 'description': 'The full plan as a JSON string'}},
        'required': ['plan'],
        'additionalProperties': False,
    }


def planning_instructions(tool_name: str = 'execute_tool_plan',
                          tools: Iterable[Tool | ToolDefinition] | None = None) -> str:
    """The "# Tool Planning" section an agent appends to its instructions when planning is on (and an MCP gateway
    sends as its instructions): when to plan, the syntax, one example. The tool's own description stays short.

    With `tools`, the example calls those tools with their own argument names (small models copy the example:
    it must never show a tool or a field that does not exist), and with `Tool`s it is a plan that validates;
    without, it shows made-up ones."""
    example = _example(list(tools)) if tools is not None else None
    return (
        '# Tool Planning\n'
        f'Prefer one `{tool_name}` call holding every tool call you can already plan; shape the data inside it and '
        'return only what your answer needs ("output_steps").\n'
        '- "$ref:ID" or "$ref:ID.items[0].name" passes an earlier result ("{{$ref:ID.field}}" inside text). '
        'Independent steps run in parallel; a failed step skips the steps using it.\n'
        '- {"id", "from": "$ref:ID", "select": JMESPath} filters, sorts, counts or joins, with no tool (or, for '
        '"select": "where": {"field", "op", "value"}, "sort_by", "first": N, "keep": [fields]).\n'
        '- "for_each": "$ref:ID" calls the step\'s tool per element ("$item", "$item.field", "$index" in arguments).\n'
        '- "when": {"from": "$ref:ID", "select": JMESPath} runs a step only if true.\n'
        + (example or 'Example: {"steps": [{"id": "s", "tool": "search", "arguments": {"q": "laptop"}}, {"id": "top", '
           '"from": "$ref:s", "select": "sort_by(@, &price)[:3]"}, {"id": "r", "tool": "reviews", "for_each": '
           '"$ref:top", "arguments": {"id": "$item.id"}}], "output_steps": ["top", "r"]}')
    )


def plan_first_instructions(tools: Iterable[ToolDefinition]) -> str:
    """The instructions for a plan written as the reply itself (plan-first mode with a JSON schema instead of a
    tool): the tools as signatures, and the plan's form with positional step ids."""
    listed = '\n'.join(f'- {_signature(tool)}' for tool in tools)
    return (
        '# Tools\n'
        f'{listed}\n'
        '# Plan\n'
        'Reply with one JSON plan of the tool calls that answer the request: {"steps": [...], "output_steps": '
        '[...]}. Steps are numbered "s1", "s2", ... in order; a step uses an earlier one\'s result with "$ref:s1" '
        'or "$ref:s1.field". A step is {"id", "tool", "arguments"}; add "for_each": "$ref:s1" to call the tool '
        'once per item of a list ("$item", "$item.field" in its arguments); {"id", "from": "$ref:s1", "where": '
        '{"field", "op", "value"}, "sort_by": field, "first": N, "keep": [fields]} shapes a list with no tool. '
        'You will then see the results and answer.'
    )


def _signature(tool: ToolDefinition) -> str:
    properties = tool.parameters.get('properties') or {}
    required = set(tool.parameters.get('required') or ())
    arguments = ', '.join(f'{name}{"" if name in required else "?"}: {_type_name(schema)}'
                          for name, schema in properties.items())
    description = tool.description.strip().split('\n')[0]
    return f'{tool.name}({arguments})' + (f': {description}' if description else '')


def _type_name(schema: Any) -> str:
    if not isinstance(schema, Mapping):
        return 'any'
    if isinstance(schema.get('enum'), list):
        return ' | '.join(json.dumps(value) for value in schema['enum'])
    kind = schema.get('type')
    if isinstance(kind, list):
        return ' | '.join(str(k) for k in kind)
    if kind == 'array':
        return f'list of {_type_name(schema.get("items"))}'
    return str(kind) if isinstance(kind, str) else 'any'


def _example(tools: list[Tool | ToolDefinition]) -> str | None:
    """`Example: {...}` over the first tools with simple required arguments: a call, and a second call that uses
    its result in the first form that validates against these tools (per item with `for_each`, a field, the whole
    result), else two independent calls."""
    definitions = [t.definition if isinstance(t, Tool) else t for t in tools]
    usable = [d for d in definitions if d.name not in PLAN_TOOL_NAMES and _sample_arguments(d) is not None]
    if not usable:
        return None
    first = {'id': 'a', 'tool': usable[0].name, 'arguments': _sample_arguments(usable[0])}
    candidates: list[list[dict[str, Any]]] = []
    if len(usable) > 1:
        second = usable[1]
        arguments = _sample_arguments(second) or {}
        name = next(iter(arguments), None)
        if name is not None:
            wanted = (second.parameters.get('properties') or {}).get(name, {}).get('type')
            output = _output_fields(tools[definitions.index(usable[0])], wanted)
            for field in output:
                candidates.append([first, {'id': 'b', 'tool': second.name, 'for_each': '$ref:a',
                                           'arguments': {**arguments, name: f'$item.{field}'}}])
                candidates.append([first, {'id': 'b', 'tool': second.name,
                                           'arguments': {**arguments, name: f'$ref:a.{field}'}}])
            candidates.append([first, {'id': 'b', 'tool': second.name, 'arguments': {**arguments, name: '$ref:a'}}])
        candidates.append([first, {'id': 'b', 'tool': second.name, 'arguments': arguments}])
    candidates.append([first])
    checkable = [t for t in tools if isinstance(t, Tool)]
    for steps in candidates:
        if len(checkable) == len(tools) and validate_plan({'steps': steps}, Toolset(checkable)):
            continue
        return 'Example: ' + json.dumps({'steps': steps, 'output_steps': [steps[-1]['id']]}, ensure_ascii=False)
    return None


def _output_fields(tool: Tool | ToolDefinition, wanted: object) -> list[str]:
    """The property names of a tool's declared output (of its items, for a list): first those of the `wanted`
    JSON type, then the id-like ones."""
    schema = output_schema(tool) if isinstance(tool, Tool) else None
    if not isinstance(schema, Mapping):
        return []
    root = schema
    if schema.get('type') == 'array' and isinstance(schema.get('items'), Mapping):
        schema = schema['items']
    if isinstance(schema.get('$ref'), str):  # pydantic puts a TypedDict or model under $defs
        schema = root.get('$defs', {}).get(schema['$ref'].rsplit('/', 1)[-1], {})
    properties = schema.get('properties') if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return []
    names = list(properties)

    def kind(name: str) -> object:
        field = properties[name]
        kind = field.get('type') if isinstance(field, Mapping) else None
        return 'number' if kind == 'integer' else kind

    wanted = 'number' if wanted == 'integer' else wanted
    return sorted(names, key=lambda name: (kind(name) != wanted, not name.endswith('id'), names.index(name)))


def _sample_arguments(tool: ToolDefinition) -> dict[str, Any] | None:
    """Arguments for the tool's required parameters, when each is a plain value (else `None`)."""
    properties = tool.parameters.get('properties') or {}
    arguments: dict[str, Any] = {}
    for name in tool.parameters.get('required') or ():
        schema = properties.get(name)
        if not isinstance(schema, Mapping):
            return None
        if isinstance(schema.get('enum'), list) and schema['enum']:
            arguments[name] = schema['enum'][0]
            continue
        sample = {'string': '...', 'integer': 1, 'number': 1.5, 'boolean': True}.get(str(schema.get('type')))
        if sample is None:
            return None
        arguments[name] = sample
    return arguments


class PlanTool(Tool, RunsPlans):
    """The `execute_tool_plan` meta-tool (or, with `dialect='index'`, the index-based `execute_plan`, whose steps
    refer to earlier ones as `{"$ref": "steps[N].result.<path>"}`), bound to a Toolset that it reads at call time:
    tools added to the Toolset later can be used in plans.

    The result text is the run's summary (`PlanRun.summary`; the digest for `execute_plan`) and the result
    value is the `PlanRun` itself. A plan that fails validation gives the failure
    `Plan execution failed: <every problem>` and runs nothing.

    With `review_mode='whole_plan'` the reviewers see each plan whole before it runs (see `run_plan`). With a
    `store` (a `PlanStore` or its URL, opened once here) every plan runs durably under a new run id, named in the
    summary when steps park; `resume_plan` goes on with it. `run_name` labels those runs (`list_runs(name=...)`);
    an agent's plan tool labels them with the agent's name.

    `plan_schema` chooses the input schema the model is shown: `'compact'` (the default: one generic step,
    `arguments` an object), `'typed'` (a variant per tool whose arguments follow the tool's schema, strict: a
    provider's strict mode or a grammar-constrained decoder can only write plans that match the tools; built
    from the tools there when the plan tool is made; `SchemaTooLarge` when they do not fit strict mode's
    limits), `'auto'` (typed when it fits, else compact, with a warning logged and `schema_note` saying why),
    or `'string'` (strict, `arguments` a JSON string). Every form of plan is accepted whatever the schema.

    `max_steps` (1,000 by default here) and `max_bytes` (the plan text, 2,000,000) are checked before a plan is
    built or read; a large plan is read and validated off the event loop (see docs/plans.md, Limits).

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
        review_mode: ReviewMode = 'per_step',
        on_event: EventHandler | None = None,
        store: StoreLike | None = None,
        plan_schema: PlanSchema = 'compact',
        max_items: int = DEFAULT_MAX_ITEMS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        retries: Retries | None = None,
        run_name: str | None = None,
    ) -> None:
        self.tools = as_toolset(tools)
        self.dialect: Literal['id', 'index'] = dialect
        self.options = RunOptions(concurrency, step_timeout, timeout, missing_field, max_steps, max_output_chars,
                                  review_handler, review_mode, None if store is None else open_store(store),
                                  max_items, max_bytes=max_bytes, retries=retries, run_name=run_name)
        self.on_event = on_event
        default_name = 'execute_tool_plan' if dialect == 'id' else 'execute_plan'
        self.schema_note: str | None = None
        """Why `plan_schema='auto'` fell back to the compact schema (`None`: it did not)."""
        parameters, strict = self._schema(plan_schema) if dialect == 'id' else (_index_schema(), True)
        self._definition = ToolDefinition(
            name or default_name,
            description or (_ID_DESCRIPTION if dialect == 'id' else _INDEX_DESCRIPTION),
            parameters,
            ToolMetadata(strict=strict),
        )

    def _schema(self, plan_schema: PlanSchema) -> tuple[dict[str, Any], bool]:
        """The input schema for `plan_schema`, and whether it is strict."""
        self.plan_schema = plan_schema
        if plan_schema == 'compact':
            return compact_schema(), False
        if plan_schema == 'string':
            return string_schema(), True
        if plan_schema not in ('typed', 'auto', 'constrained'):
            raise UserError(f"plan_schema must be 'compact', 'typed', 'auto', 'constrained' or 'string', "
                            f'got {plan_schema!r}.')
        definitions = [t.definition for t in self.tools
                       if t.name not in PLAN_TOOL_NAMES and not isinstance(t, PlanTool)]
        if plan_schema == 'constrained':
            return constrained_schema([t for t in self.tools
                                       if t.name not in PLAN_TOOL_NAMES and not isinstance(t, PlanTool)]), False
        try:
            schema = typed_schema(definitions)
        except SchemaTooLarge as exc:
            if plan_schema == 'typed':
                raise SchemaTooLarge(f'The typed plan schema does not fit strict mode: {exc}. Use plan_schema='
                                     "'auto' (falls back to the compact schema) or 'compact'.") from None
            self.schema_note = f'typed plan schema not used ({exc}): the compact schema is offered instead'
            logger.warning('PlanTool: %s', self.schema_note)
            self.plan_schema = 'compact'
            return compact_schema(), False
        self.plan_schema = 'typed'
        return schema, True

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    def instructions(self) -> str:
        """The prompt section that teaches a model this tool."""
        return planning_instructions(self._definition.name)

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        return await self.run_call(arguments, context)

    def stream(self, task_group: TaskGroup, context: ToolCallContext = ToolCallContext.EMPTY, *,
               earlier: Mapping[str, PlanRun] | None = None, name: str | None = None) -> PlanStream:
        """A stream for a call of this tool whose arguments are still arriving: `feed` it the arguments text as it
        streams, and the steps that may run early start in `task_group` (read-only tools that need no approval,
        select steps; see `PlanStream`); then pass it to `run_call(..., streamed=...)` with the whole arguments.
        Durable runs, whole-plan review and `execute_plan` start nothing early."""
        options = self.options
        eager = self.dialect == 'id' and options.store is None and options.review_mode == 'per_step'
        return PlanStream(self.tools, options, task_group, context=context, on_event=self.on_event,
                          refused=frozenset({self._definition.name}), earlier=earlier, name=name,
                          clean=self._step_without_unset_nulls, eager=eager)

    async def run_call(self, arguments: ToolArguments, context: ToolCallContext, *,
                       earlier: Mapping[str, PlanRun] | None = None, name: str | None = None,
                       streamed: PlanStream | None = None) -> ToolResult:
        """`execute`, with the earlier plans of the agent run a reference may name (`"$ref:<plan>/<step>"`)
        and this plan's own name among them. `streamed`: the call's `stream`, fed with these arguments as they
        arrived (its `earlier` and `name` apply): the steps it started keep running into the plan's run, or are
        cancelled if the plan does not validate."""
        if streamed is not None:
            earlier, name = streamed.earlier, streamed.name
        if self.dialect == 'index':
            if streamed is not None:
                streamed.abandon('Cancelled: an index-based plan starts nothing early')
            return await self._execute_index(arguments, context)
        parsed = await self._parsed(arguments)
        try:
            run = await self._run(parsed, context, earlier, name, streamed)
        except PlanValidationError as exc:
            if isinstance(exc.ran, PlanRun):  # steps started while the plan was written: say what they did
                text = (f'{_render_problems(exc.problems, ran=True)}\nThese steps ran while the plan was being '
                        f'written (they are read-only; their results stand): {exc.ran.summary}')
                return ToolResult('', text, exc.ran, True, is_artifact=False)
            return ToolResult.failure(_render_problems(exc.problems))
        except (ToolConfigurationError, ControlFlowSignal):
            raise
        except Exception as exc:
            return ToolResult.failure(f'Unexpected error during plan execution: {type(exc).__name__}: {exc}')
        finally:
            if streamed is not None:  # whatever went wrong, nothing started early outlives the call
                streamed.abandon('Cancelled: the plan call ended before its run did')
        return ToolResult.success(run.summary, run)

    async def _parsed(self, arguments: ToolArguments) -> Parsed:
        """The call's plan, read: either dialect is accepted (the schema shows the id-based one), with the nulls
        of unset optional arguments dropped; a large plan is read off the event loop."""
        options = self.options
        return await parse_async(arguments if arguments is not None else {}, max_bytes=options.max_bytes,
                                 max_steps=options.max_steps, clean=self._step_without_unset_nulls)

    async def review_request(self, arguments: ToolArguments,
                             context: ToolCallContext = ToolCallContext.EMPTY) -> PlanReviewRequest | None:
        """What a whole-plan reviewer is shown for this call (every step, arguments as written, dependencies, the
        gated ones marked), read and validated as the call itself will be: for code that asks its own person
        before the call runs (the framework adapters, with `ApprovedCalls`). `None` when the plan cannot run (the
        call then runs nothing and reports every problem). For `execute_tool_plan` (`dialect='id'`)."""
        if self.dialect != 'id':
            raise UserError('review_request reads id-based plans; this plan tool takes index-based ones '
                            "(dialect='index').")
        options = self.options
        prepared, _ = await prepare_async(await self._parsed(arguments), self.tools, max_steps=options.max_steps,
                                          max_items=options.max_items,
                                          extra_refused=frozenset({self._definition.name}))
        return None if prepared is None else plan_review_request(prepared, context)

    def _step_without_unset_nulls(self, step: Any) -> Any:
        """Strict schemas make a model send `null` for every optional argument it leaves out: drop those the
        tool's own schema does not accept (there, `null` can only mean "not given")."""
        if isinstance(step, dict) and isinstance(step.get('tool'), str) and isinstance(step.get('arguments'), dict):
            tool = self.tools.find(step['tool'])
            if tool is not None:
                parameters = tool.definition.parameters
                return {**step, 'arguments': drop_unset_nulls(step['arguments'], parameters, parameters)}
        return step

    async def _run(self, parsed: Any, context: ToolCallContext, earlier: Mapping[str, PlanRun] | None = None,
                   name: str | None = None, streamed: PlanStream | None = None) -> PlanRun:
        return await run_parsed(parsed, self.tools, self.options, context=context, on_event=self.on_event,
                                refused=frozenset({self._definition.name}), earlier=earlier, name=name,
                                streamed=streamed)

    async def _execute_index(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        limit = self.options.max_bytes
        size = plan_bytes(arguments, limit) if isinstance(arguments, str) else None
        if size is not None:
            return ToolResult.success(json.dumps({'error': f'Plan validation failed: {too_large(size, limit)}'}))
        text = await _plan_text(arguments)
        if text is None:
            return ToolResult.success(json.dumps({'error': 'Plan validation failed: the tool takes one string '
                                                  'argument "plan" holding the plan JSON'}))
        try:
            data = await loads_async(text) if isinstance(text, str) else text
        except (json.JSONDecodeError, RecursionError):
            return ToolResult.success(json.dumps({'error': f'Invalid JSON: {str(text)[:100]}...'}))
        except ValueError as exc:  # more objects and arrays than a plan text may hold
            return ToolResult.success(json.dumps({'error': f'Plan validation failed: {exc}'}))
        parsed = await parse_async(data, 'index', max_bytes=limit, max_steps=self.options.max_steps)
        try:
            run = await self._run(parsed, context)
        except PlanValidationError as exc:
            return ToolResult.success(json.dumps({'error': 'Plan validation failed: ' + '; '.join(exc.problems)}))
        except (ToolConfigurationError, ControlFlowSignal):
            raise
        except Exception as exc:
            return ToolResult.success(json.dumps({'error': f'Unexpected error during plan execution: {exc}'}))
        return ToolResult.success(run.digest(), run)


async def _plan_text(arguments: ToolArguments) -> str | Mapping[str, Any] | None:
    if isinstance(arguments, str):
        try:
            arguments = await loads_async(arguments)
        except (ValueError, RecursionError):
            return arguments  # the model sent the plan itself rather than {"plan": ...}, or a text parse reports
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


def _render_problems(problems: list[str], *, ran: bool = False) -> str:
    if len(problems) == 1 and problems[0].startswith(EMPTY_PLAN):
        return problems[0]
    if len(problems) == 1:
        return f'Plan execution failed: {problems[0]}'
    listed = '\n'.join(f'- {p}' for p in problems)
    what = 'the plan did not run' if ran else 'nothing ran'
    return f'Plan execution failed: {len(problems)} problems ({what}; fix them all and resend):\n{listed}'
