"""`ToolPipeline`: several tools run in order as ONE tool, with no model round-trip between the steps.

```python
from toolweave import ToolPipeline, TextTool

shout = TextTool.from_function('shout', 'Upper-cases text', str.upper)
exclaim = TextTool.from_function('exclaim', 'Adds an exclamation mark', lambda text: text + '!')
pipeline = ToolPipeline.of(shout, exclaim)
print(pipeline.name, '|', pipeline.description, '|', pipeline.call_sync('hello').output)
#> shout_then_exclaim | Pipeline: shout -> exclaim | HELLO!
```

A pipeline is a `Tool`: it works in a Toolset, as a plan step, inside another pipeline and over MCP. Its own call
goes through `Tool.call` (approval if the pipeline itself is gated, one aggregate metric and log line per call),
and every step is called through the step's own `call`, so each step records its own metrics, runs its own
approval gate, and receives the pipeline's `ToolCallContext`. The reviewers and metrics of the run are ambient and
reach every step, nested pipelines included; `ToolPipeline(..., review_handler=h)` adds `h` for its steps (the
run's own reviewers still review them: the stricter decision wins).

What flows between steps:

1. The pipeline's input. The pipeline exposes its first step's schema. When that step takes one string
   parameter (a text tool such as `TextTool`, or `@tool def f(text: str)`), the pipeline's arguments are
   unwrapped as a text tool unwraps them (`{"input": "x"}` -> `x`; text that is not a JSON object is the input
   itself; `None` -> `""`) and passed as that parameter. Any other first step gets the arguments unchanged.
   A pipeline without steps is a text tool that returns its input.
2. After a successful step: its adapter's return value if it has an adapter (the adapter receives the step's
   `ToolResult`, structured `value` included; it may be async), else the step's `value` when the step set one
   that is not a string, else its output text. After a failed step under `CONTINUE_ON_FAILURE`: the error
   message (never `None`). Adapters run only between steps: never after the last step, never after a failure.
3. Into the next step's arguments:
   - text -> `{param: text}` for a step with one string parameter; for a step with one parameter of another
     type, the text parsed as JSON (`"42"` -> `{n: 42}`; an object that already names the parameter is used as
     the arguments; text that is not JSON is passed as the value and the step's validation says why it does not
     fit); for any other step, the text as raw arguments (a JSON object text is parsed and validated
     by the step);
   - a structured value (models and dataclasses become JSON data first) -> a mapping whose keys are the step's
     parameters is used as the arguments; for a step with one parameter, `{param: value}` (as JSON text when the
     parameter is a string); for other steps a mapping is the arguments, anything else its JSON text, and the
     step's validation says what does not fit;
   - a step that declares no parameters and no extra ones (`additionalProperties: false`) is called with none.

Errors. `FAIL_FAST` (the default) returns the first failed step's result and runs nothing after it.
`CONTINUE_ON_FAILURE` runs every step; the pipeline's result is the last step's result, even a failure. A step
that raises fails with `Step '<name>' threw: <message>`, so the failure says which step broke (an exception with
no message gives `Tool execution failed with no message`); a step that returns a failure passes it on unchanged.
With `step_timeout`, a step that takes longer is cancelled and fails like a raised exception
(`Step '<name>' timed out after <n> s`). An adapter that raises fails the whole pipeline with the exception's
message and skips the remaining steps even under `CONTINUE_ON_FAILURE` (adapters are the pipeline's own code,
not a step). `ToolConfigurationError` and control-flow signals (`ExitEarly`) from any step or adapter propagate
unchanged under either strategy.
"""

from __future__ import annotations

import copy
import enum
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from time import perf_counter

import anyio

from toolweave import _tracing
from toolweave._checks import check_number
from toolweave._pipeline_args import TEXT_SCHEMA, Carry, adapted, arguments_for, carry_of, first_arguments
from toolweave.approval import ReviewHandler, check_review_handler, use_review_handler
from toolweave.exceptions import ToolNameError, UserError
from toolweave.tools import Tool, ToolArguments, ToolCallContext, ToolDefinition, ToolResult, text_input
from toolweave.tools._metrics import record_call
from toolweave.tools._result import NO_MESSAGE

__all__ = ('Adapter', 'ErrorStrategy', 'PipelineBuilder', 'PipelineStep', 'ToolPipeline')

logger = logging.getLogger('toolweave.pipeline')

Adapter = Callable[[ToolResult], object]
"""Reshapes a step's successful result for the next step: returns text, a mapping (the next step's arguments),
another value, or `None` (empty text). May be an `async def`."""


class ErrorStrategy(enum.Enum):
    """What a pipeline does when a step fails."""

    FAIL_FAST = 'fail_fast'
    """Stop at the first failed step and return its failure (the default)."""
    CONTINUE_ON_FAILURE = 'continue_on_failure'
    """Hand the failed step's error message to the next step and run to the end."""


@dataclass(frozen=True, slots=True)
class PipelineStep:
    """One step of a pipeline: a tool and the adapter that reshapes its result for the next step."""

    tool: Tool
    adapter: Adapter | None = None


class ToolPipeline(Tool):
    """Tools chained into one tool: each step's output is the next step's input (see the module docstring).

    Build one with `ToolPipeline.of(step, ...)` (automatic name `a_then_b`, description `Pipeline: a -> b`),
    `ToolPipeline.of(name, description, step, ...)`, `ToolPipeline.builder()` (adapters, error strategy), or the
    constructor.

    Args:
        steps: the tools in order, or `PipelineStep(tool, adapter)` for a step with an adapter.
        name: the tool name the model sees; by default the step names joined with `_then_`.
        description: by default `Pipeline: a -> b -> c`.
        error_strategy: `ErrorStrategy.FAIL_FAST` (default) or `ErrorStrategy.CONTINUE_ON_FAILURE`.
        review_handler: reviews the steps' gated calls, together with the run's reviewers (the stricter decision
            wins).
        step_timeout: seconds each step may take (a gated step's review included); a step that takes longer is
            cancelled and fails with `Step '<name>' timed out after <n> s`, like a raised exception.
    """

    def __init__(
        self,
        steps: Iterable[Tool | PipelineStep],
        *,
        name: str | None = None,
        description: str | None = None,
        error_strategy: ErrorStrategy = ErrorStrategy.FAIL_FAST,
        review_handler: ReviewHandler | None = None,
        step_timeout: float | None = None,
    ) -> None:
        if isinstance(steps, Tool | str) or not isinstance(steps, Iterable):
            raise UserError(f'steps of ToolPipeline must be a list of tools, got {steps!r}. Pass '
                            'ToolPipeline([step_a, step_b]) or ToolPipeline.of(step_a, step_b).')
        stages = tuple(_stage(step, index) for index, step in enumerate(steps))
        if not isinstance(error_strategy, ErrorStrategy):
            raise UserError(f'error_strategy of ToolPipeline must be an ErrorStrategy, got {error_strategy!r}. Use '
                            'ErrorStrategy.FAIL_FAST or ErrorStrategy.CONTINUE_ON_FAILURE.')
        names = [stage.tool.name for stage in stages]
        if name is None:
            name = _auto_name(names)
        if description is None:
            description = 'Pipeline: ' + ' -> '.join(names)
        parameters = copy.deepcopy(dict(stages[0].tool.definition.parameters if stages else TEXT_SCHEMA))
        self._definition = ToolDefinition(name, description, parameters)
        check_review_handler(review_handler, f'Tool {name!r}')
        check_number(step_timeout, f'step_timeout of pipeline {name!r}', exclusive=True, optional=True, unit='seconds')
        self._step_timeout = step_timeout
        self._stages = stages
        self._error_strategy = error_strategy
        self._review_handler = review_handler

    @classmethod
    def of(cls, *items: str | Tool) -> ToolPipeline:
        """`of(step, step, ...)` with an automatic name and description, or `of(name, description, step, ...)`.

        ```python
        from toolweave import ToolPipeline, TextTool

        pipeline = ToolPipeline.of('tidy', 'Strips and upper-cases text',
                                   TextTool.from_function('strip', 'Strips spaces', lambda text: text.strip()),
                                   TextTool.from_function('upper', 'Upper-cases text', str.upper))
        print(pipeline.call_sync('  hi  ').output)
        #> HI
        ```
        """
        if items and isinstance(items[0], str):
            if len(items) < 2 or not isinstance(items[1], str):
                raise UserError('ToolPipeline.of(name, description, *steps) needs a description after the name, '
                                f'got {items[1] if len(items) > 1 else None!r}. Pass '
                                "ToolPipeline.of('my_pipeline', 'What it does', step_a, step_b).")
            name, description, steps = items[0], items[1], items[2:]
            _check_text(name, 'name', 'ToolPipeline.of()')
            _check_text(description, 'description', 'ToolPipeline.of()')
            return cls(_check_steps(steps, named=True), name=name, description=description)
        return cls(_check_steps(items, named=False))

    @staticmethod
    def builder() -> PipelineBuilder:
        """A builder: `.name(..).description(..).step(t).adapter(fn).step(t2).error_strategy(..).build()`."""
        return PipelineBuilder()

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    @property
    def steps(self) -> tuple[Tool, ...]:
        """The step tools, in order."""
        return tuple(stage.tool for stage in self._stages)

    @property
    def stages(self) -> tuple[PipelineStep, ...]:
        """The steps with their adapters, in order."""
        return self._stages

    @property
    def error_strategy(self) -> ErrorStrategy:
        return self._error_strategy

    @property
    def review_handler(self) -> ReviewHandler | None:
        return self._review_handler

    @property
    def step_timeout(self) -> float | None:
        return self._step_timeout

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        with use_review_handler(self._review_handler):
            return await self._run(arguments, context)

    async def _run(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        if not self._stages:
            return ToolResult.success(text_input(arguments))
        if _tracing.ACTIVE is not None:
            _tracing.annotate({'toolweave.pipeline.steps': [stage.tool.name for stage in self._stages],
                               'toolweave.pipeline.error_strategy': self._error_strategy.value})
        last = len(self._stages) - 1
        carry = Carry()
        result = ToolResult.success()
        for index, stage in enumerate(self._stages):
            step_arguments = first_arguments(stage.tool, arguments) if index == 0 else arguments_for(stage.tool, carry)
            result = await self._call_step(stage.tool, step_arguments, context)
            if result.error is not None:
                if self._error_strategy is ErrorStrategy.FAIL_FAST or index == last:
                    logger.debug('Pipeline %r stopped at step %d/%d %r: %s', self.name, index + 1, last + 1,
                                 stage.tool.name, result.error)
                    _tracing.annotate({'toolweave.pipeline.failed_step': stage.tool.name})
                    return result
                logger.debug('Pipeline %r step %d/%d %r failed, continuing with its error: %s', self.name,
                             index + 1, last + 1, stage.tool.name, result.error)
                carry = Carry(text=result.error)
            elif index < last:
                carry = await _adapt(stage.adapter, result) if stage.adapter is not None else carry_of(result)
        return result

    async def _call_step(self, step: Tool, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        if self._step_timeout is None:
            return _named(step, await step.call(arguments, context))
        start = perf_counter()
        with anyio.move_on_after(self._step_timeout):
            return _named(step, await step.call(arguments, context))
        # The step's own call was cancelled before it recorded anything: record the timeout as its failure.
        timed_out = ToolResult('', f'Step {step.name!r} timed out after {self._step_timeout:g} s', raised=True)
        record_call(step.name, arguments, '', timed_out.error, perf_counter() - start)
        return timed_out

    def __repr__(self) -> str:
        return f'ToolPipeline(name={self.name!r}, steps={[t.name for t in self.steps]!r})'


def _named(step: Tool, result: ToolResult) -> ToolResult:
    """A step's result, its failure naming the step when the step raised (a returned failure is passed on)."""
    if not result.raised or result.error in (None, NO_MESSAGE):
        return result
    return ToolResult('', f'Step {step.name!r} threw: {result.error}', raised=True)


async def _adapt(adapter: Adapter, result: ToolResult) -> Carry:
    value = adapter(result)
    if inspect.isawaitable(value):
        value = await value
    return adapted(value)


def _stage(step: object, index: int) -> PipelineStep:
    if isinstance(step, PipelineStep):
        if not isinstance(step.tool, Tool):
            raise UserError(f'step tool at position {index} of ToolPipeline must be a Tool, got {step.tool!r}.')
        return step
    if isinstance(step, Tool):
        return PipelineStep(step)
    raise UserError(f'step tool at position {index} of ToolPipeline must be a Tool, got '
                    f'{type(step).__name__}: {step!r}. Make functions tools first with @tool or TextTool.')


def _check_steps(steps: Sequence[object], *, named: bool) -> list[Tool]:
    if not named and (not steps or steps[0] is None):
        raise UserError('ToolPipeline.of() needs a first step, got ' + ('nothing' if not steps else 'None') +
                        '. Pass the tools in order: ToolPipeline.of(step_a, step_b).')
    for index, step in enumerate(steps):
        if step is None:
            raise UserError(f'ToolPipeline.of() steps must not contain None elements (null elements), got None at '
                            f'position {index}. Remove it or pass the tool you meant.')
        if not isinstance(step, Tool):
            raise UserError(f'step tool at position {index} of ToolPipeline.of() must be a Tool, got '
                            f'{type(step).__name__}: {step!r}. Make functions tools first with @tool or TextTool.')
    return [step for step in steps if isinstance(step, Tool)]


def _check_text(value: object, what: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UserError(f'Pipeline {what} in {where} must be a non-blank string, got {value!r}. '
                        f'Pass one, for example .{what}({"my_pipeline" if what == "name" else "What it does"!r}).')
    return value


def _auto_name(names: list[str]) -> str:
    if not names:
        raise UserError('A ToolPipeline without steps needs an explicit name: pass name= and description=.')
    name = '_then_'.join(names)
    if len(name) > 64:
        raise ToolNameError(f'The automatic pipeline name {name!r} is longer than 64 characters. Name the pipeline: '
                            "ToolPipeline.of('short_name', 'What it does', ...) or ToolPipeline(steps, name=...).")
    return name


class PipelineBuilder:
    """Builds a `ToolPipeline` step by step; `name` and `description` are required.

    ```python
    from toolweave import ErrorStrategy, ToolPipeline, TextTool

    pipeline = (ToolPipeline.builder().name('shout_twice').description('Upper-cases, then repeats')
                .step(TextTool.from_function('upper', 'Upper-cases text', str.upper))
                .adapter(lambda result: result.output + ' ')
                .step(TextTool.from_function('twice', 'Repeats text', lambda text: text * 2))
                .error_strategy(ErrorStrategy.CONTINUE_ON_FAILURE)
                .build())
    print(repr(pipeline.call_sync('hi').output))
    #> 'HI HI '
    ```
    """

    def __init__(self) -> None:
        self._name: str | None = None
        self._description: str | None = None
        self._stages: list[PipelineStep] = []
        self._error_strategy = ErrorStrategy.FAIL_FAST
        self._review_handler: ReviewHandler | None = None
        self._step_timeout: float | None = None

    def name(self, name: str) -> PipelineBuilder:
        self._name = _check_text(name, 'name', 'ToolPipeline.builder()')
        return self

    def description(self, description: str) -> PipelineBuilder:
        self._description = _check_text(description, 'description', 'ToolPipeline.builder()')
        return self

    def step(self, tool: Tool) -> PipelineBuilder:
        """Add the next step."""
        if not isinstance(tool, Tool):
            raise UserError(f'step tool in ToolPipeline.builder().step() must be a Tool, got {tool!r}. Make '
                            'functions tools first with @tool or TextTool.')
        self._stages.append(PipelineStep(tool))
        return self

    def adapter(self, adapter: Adapter | Callable[[ToolResult], Awaitable[object]]) -> PipelineBuilder:
        """Reshape the last added step's result before the next step; a second call replaces the first."""
        if adapter is None or not callable(adapter):
            raise UserError(f'adapter in ToolPipeline.builder().adapter() must be a function of the ToolResult, got '
                            f'{adapter!r}.')
        if not self._stages:
            raise UserError('adapter() must be called after a step() in ToolPipeline.builder(): an adapter reshapes '
                            'the result of the step before it. Call .step(tool).adapter(fn).')
        self._stages[-1] = PipelineStep(self._stages[-1].tool, adapter)
        return self

    def error_strategy(self, strategy: ErrorStrategy) -> PipelineBuilder:
        if not isinstance(strategy, ErrorStrategy):
            raise UserError(f'error_strategy in ToolPipeline.builder() must be an ErrorStrategy, got {strategy!r}. '
                            'Use ErrorStrategy.FAIL_FAST or ErrorStrategy.CONTINUE_ON_FAILURE.')
        self._error_strategy = strategy
        return self

    def review_handler(self, handler: ReviewHandler) -> PipelineBuilder:
        """Add `handler` to the reviewers of the steps' gated calls."""
        check_review_handler(handler, 'ToolPipeline.builder().review_handler()')
        self._review_handler = handler
        return self

    def step_timeout(self, seconds: float | None) -> PipelineBuilder:
        """Seconds each step may take; see `ToolPipeline`."""
        check_number(seconds, 'ToolPipeline.builder().step_timeout()', exclusive=True, optional=True, unit='seconds')
        self._step_timeout = seconds
        return self

    def build(self) -> ToolPipeline:
        if self._name is None:
            raise UserError('Pipeline name is missing in ToolPipeline.builder(). Call .name("my_pipeline") before '
                            '.build().')
        if self._description is None:
            raise UserError('Pipeline description is missing in ToolPipeline.builder(). Call .description("What it '
                            'does") before .build().')
        return ToolPipeline(self._stages, name=self._name, description=self._description,
                            error_strategy=self._error_strategy, review_handler=self._review_handler,
                            step_timeout=self._step_timeout)
