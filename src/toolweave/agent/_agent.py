"""`Agent`: a model, instructions and tools; `run` drives the tool loop and returns an `AgentRunResult`."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from toolweave._ambient import using
from toolweave._checks import check_number
from toolweave.agent._blackboard import Blackboard
from toolweave.agent._events import AgentEvent, EventHub, MessageEvent
from toolweave.agent._injection import RunToolSet, ToolInjectionStrategy, check_strategies
from toolweave.agent._loop import CallLimits, FinishReason, LoopTools, run_loop
from toolweave.agent._planning import AgentPlanTool, PlanFirst, PlanFirstMode, eager_plans
from toolweave.agent._process import AgentProcess, Budget, RunUsage, current_process, process_var
from toolweave.agent._streaming import AgentStream, open_run_stream
from toolweave.agent._subagent import SubAgentTool
from toolweave.agent._tracing import run_trace
from toolweave.agent._unfolding import UnfoldingInjectionStrategy
from toolweave.approval import ApprovalRecord, ReviewHandler, check_review_handler, record_approvals, use_review_handler
from toolweave.exceptions import ControlFlowSignal, UsageLimitExceeded, UserError
from toolweave.models import (
    AssistantMessage,
    Message,
    Model,
    ModelSettings,
    SystemMessage,
    ToolMessage,
    UserMessage,
    infer_model,
)
from toolweave.plan import PlanRun, planning_instructions
from toolweave.plan._meta import plan_first_instructions
from toolweave.plan.durable import StoreLike, open_store
from toolweave.tools import Tool, ToolCallContext, ToolDefinition, Toolset, ToolsetItem

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ('MAX_DEPTH', 'Agent', 'AgentRunResult')

DEFAULT_MAX_ITERATIONS = 20
DEFAULT_MAX_OUTPUT_CHARS = 20_000
MAX_DEPTH = 8
"""How deeply agent runs may nest (a sub-agent in a sub-agent...); a deeper run does not start. It stops an agent
that calls itself before its budget would."""


@dataclass(frozen=True, slots=True)
class AgentRunResult:
    """What one `Agent.run` produced."""

    output: str
    """The final answer: the text of the model's last reply, or the output of a `return_direct` tool."""
    messages: tuple[Message, ...]
    """The whole conversation, including `message_history` passed to `run` and the final reply."""
    usage: RunUsage
    """LLM calls, input and output tokens (as the model reported them) and tool calls."""
    plan_runs: tuple[PlanRun, ...]
    """Every plan run through `execute_tool_plan`, in order, with its full step records."""
    process: AgentProcess
    """The run's process: blackboard, tool call history, timings, status."""
    finish_reason: FinishReason = 'final_answer'
    """Why the run ended; `'empty_answer'` means `output` is empty because the model gave no answer."""
    approvals: tuple[ApprovalRecord, ...] = ()
    """Every review decision made during the run (direct calls, plan steps, sub-agents), in order."""


class Agent:
    """A model with instructions and tools. `run` (async) and `run_sync` drive the tool loop: send the messages
    and tool definitions, run every tool call of a reply concurrently, repeat until a reply has no tool calls.

    ```python
    from toolweave import Agent, tool
    from toolweave.testing import ScriptedModel

    @tool
    def add(a: int, b: int) -> int:
        \"\"\"Add two numbers.\"\"\"
        return a + b

    model = ScriptedModel([{'tool': 'add', 'arguments': {'a': 2, 'b': 3}}, 'The sum is 5.'])
    result = Agent(model, tools=[add]).run_sync('What is 2 + 3?')
    print(result.output, result.usage.llm_calls, result.usage.tool_calls)
    #> The sum is 5. 2 1
    ```

    Args:
        model: A `Model`, or a model string such as `'openai:gpt-4o-mini'` (see `toolweave.models.infer_model`).
        instructions: The system prompt.
        tools: Anything `Toolset` resolves (tools, functions, objects with `@tool` methods, toolsets, groups).
            A `Toolset` is used as is, so tools added to it later are offered too.
        tool_planning: Offer the `execute_tool_plan` meta-tool and append its "# Tool Planning" instructions,
            whenever the toolset has a tool (or a tool group not loaded yet).
        max_iterations: The most model calls one run may make; reaching it raises `UsageLimitExceeded`.
        review_handler: Reviews every call of a tool that requires approval during a run (also inside plans
            and sub-agents). `None` keeps whatever handler the caller installed.
        context: The agent's call context (tenant ids, tokens...), passed to every tool call; a run's own
            `context` is merged over it, the run's entries winning.
        budget: Limits of each run and of the runs started inside it (LLM calls, tokens, tool calls); see
            `Budget`.
        settings: Model settings sent with every request.
        name: The agent's name (the default tool name of `as_tool`; shown in errors).
        description: What the agent does (the default description of `as_tool`).
        plan_options: Options for the plan executor (`concurrency`, `step_timeout`, `timeout`, `review_mode`, ...).
        plan_store: Makes the agent's plans durable: each plan runs in this store (a `PlanStore`, a SQLite path or
            `sqlite:///...` URL, or a `postgresql://...` URL, opened once here) under a new run id, every step's
            transitions recorded. A plan whose steps park (a reviewer raised `ApprovalPending`) tells the model
            its run id; after a crash or a decision, `resume_plan(run_id, ...)` or `toolweave runs resume` goes on
            with it without running a finished step again. Its runs are labelled with the agent's `name`
            (`list_runs(name=...)`) unless `plan_options` gives a `run_name`. See `toolweave.plan.durable`.
        tool_timeout: Seconds a tool call may take (plan steps too, unless `plan_options` sets `step_timeout`); a
            call that takes longer is cancelled and fails with a message the model reads. `None`: no limit.
        max_output_chars: The longest tool result text sent to the model; longer text is cut with a note saying
            how much was cut (the full result stays in `process.history`). `None`: no limit.
        injection_strategies: Asked after every tool call of a run whether the run's tool set changes (see
            `ToolInjectionStrategy`); they run after the built-in unfolding strategy, in order. Each run starts
            from the agent's tools; the agent's toolset itself is never changed.
        tool_decorator: Applied to every tool injected during a run (inner tools of an `UnfoldingTool`, tools
            added by a strategy), for example to add a note or a sink to each of them.
        empty_answer_nudges: How many times the agent asks again when the model ends its turn with neither text
            nor tool calls (an `EmptyAnswer` event each time); after that the run ends with `finish_reason`
            `'empty_answer'`. `0`: end at the first empty reply.
        eager_plans: Start plan steps while the model is still writing the plan: each model call of a run
            streams (in `run` too), and a step of `execute_tool_plan` starts as soon as it has arrived if its tool
            is marked read-only (`ToolMetadata.read_only`) and needs no approval (or it is a select step), it
            validates with the steps before it, and what it refers to has arrived; every other step waits for
            the whole plan, validated as usual. A plan that turns out invalid, or a reply that breaks off, cancels
            what started early. Needs `tool_planning=True`; not with `plan_store` or whole-plan review.
        plan_first: Make the first reply one plan, then the answer: the first model call must call
            `execute_tool_plan` (with one more try after an invalid plan's problems went back), and once a plan
            ran, the next call lets the model only answer from the results (no tools sent; with `'tool_choice'`,
            sent with `tool_choice='none'`). Two ways: `'tool_choice'`
            forces the plan tool by name; `'response_format'` offers no tools but asks for the plan as JSON
            under the constrained plan schema (positional step ids; a local server compiles it to a grammar, so
            the plan can only name real tools, earlier steps and fitting arguments) and lists the tools in the
            instructions. `True` picks `'response_format'` for local servers (`model.is_local`), else
            `'tool_choice'`. If neither plan is valid, the run goes on tool by tool. Needs `tool_planning=True`.
    """

    def __init__(
        self,
        model: Model | str,
        *,
        instructions: str = '',
        tools: Toolset | Iterable[ToolsetItem] = (),
        tool_planning: bool = False,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        review_handler: ReviewHandler | None = None,
        context: Mapping[str, Any] | None = None,
        budget: Budget | None = None,
        settings: ModelSettings | None = None,
        name: str = 'agent',
        description: str | None = None,
        plan_options: Mapping[str, Any] | None = None,
        plan_store: StoreLike | None = None,
        tool_timeout: float | None = None,
        max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
        injection_strategies: Sequence[ToolInjectionStrategy] = (),
        tool_decorator: Callable[[Tool], Tool] | None = None,
        empty_answer_nudges: int = 1,
        eager_plans: bool = False,
        plan_first: bool | PlanFirstMode = False,
    ) -> None:
        self.model = _resolve_model(model)
        if not isinstance(instructions, str):
            raise UserError(f'Agent instructions must be a string, got {type(instructions).__name__}.')
        check_number(max_iterations, 'Agent max_iterations', integer=True, minimum=1)
        check_review_handler(review_handler, f'Agent {name!r}')
        check_number(tool_timeout, 'Agent tool_timeout', exclusive=True, optional=True, unit='seconds')
        check_number(max_output_chars, 'Agent max_output_chars', integer=True, minimum=1, optional=True)
        if tool_decorator is not None and not callable(tool_decorator):
            raise UserError(f'Agent tool_decorator must be a function taking a Tool and returning a Tool, or None, '
                            f'got {type(tool_decorator).__name__}: {tool_decorator!r}.')
        if isinstance(empty_answer_nudges, bool) or not isinstance(empty_answer_nudges, int) or empty_answer_nudges < 0:
            raise UserError(f'Agent empty_answer_nudges must be an int >= 0, got {empty_answer_nudges!r}.')
        self.empty_answer_nudges = empty_answer_nudges
        self.injection_strategies = check_strategies(injection_strategies)
        self.tool_decorator = tool_decorator
        if budget is not None and not isinstance(budget, Budget):
            raise UserError(f'Agent budget must be a Budget, got {type(budget).__name__}.')
        self.toolset = tools if isinstance(tools, Toolset) else Toolset(tools)
        self.base_instructions = instructions
        self.max_iterations = max_iterations
        self.review_handler = review_handler
        self.context = ToolCallContext.of(context)
        self.budget = budget or Budget()
        self.settings = settings
        self.name = name
        self.description = description
        self.plan_options = dict(plan_options or {})
        if tool_timeout is not None:
            self.plan_options.setdefault('step_timeout', tool_timeout)
        if plan_store is not None:
            self.plan_options['store'] = open_store(plan_store)
        if self.plan_options.get('store') is not None:
            self.plan_options.setdefault('run_name', name)  # its runs are listed under the agent's name
        self.limits = CallLimits(tool_timeout, max_output_chars)
        self.events = EventHub()
        """Subscribers here see the events of every run of this agent (`agent.events.subscribe(cb)`)."""
        self._plan_tool = AgentPlanTool(self.toolset, self.plan_options) if tool_planning else None
        self.eager_plans = _check_eager(eager_plans, tool_planning=tool_planning, options=self.plan_options)
        self.plan_first = _plan_first_mode(plan_first, self.model, tool_planning=tool_planning)
        """`None`, or how the first reply is made a plan (see `plan_first` above)."""

    @property
    def plan_tool(self) -> AgentPlanTool | None:
        """The `execute_tool_plan` meta-tool, when it is offered: planning is on and the toolset has a tool (or a
        tool group not loaded yet), checked when asked, since tools may be added to the toolset later."""
        return self._plan_tool if self._plan_tool is not None and self.toolset else None

    @property
    def tool_planning(self) -> bool:
        """Whether the plan meta-tool is offered (planning was asked for and there is at least one tool)."""
        return self.plan_tool is not None

    @property
    def instructions(self) -> str:
        """The system prompt sent: the instructions, plus the tool planning section when planning is on."""
        if self.plan_tool is None:
            return self.base_instructions
        tools = self.toolset.tools
        section = plan_first_instructions([t.definition for t in tools]) if self.plan_first == 'response_format' \
            else planning_instructions(tools=tools)
        return f'{self.base_instructions.rstrip()}\n\n{section}' if self.base_instructions.strip() else section

    def tool_definitions(self) -> list[ToolDefinition]:
        """What the model is offered: the toolset's definitions, then `execute_tool_plan` when planning is on."""
        definitions = self.toolset.definitions()
        if self.plan_tool is not None:
            definitions.append(self.plan_tool.definition)
        return definitions

    def with_context(self, context: Mapping[str, Any] | None, *, replace: bool = False) -> Agent:
        """A copy of this agent with more call context: merged over this one's (calls accumulate, conflicting
        keys take the newest value), or with `replace=True` instead of it. The original agent is unchanged; the
        copy shares its model, tools and settings but has its own `events`."""
        clone = object.__new__(Agent)
        clone.__dict__.update(self.__dict__)
        added = ToolCallContext.of(context)
        clone.context = added if replace else self.context.merge(added)
        clone.events = EventHub()
        return clone

    # --- running -------------------------------------------------------------------------------------------

    async def run(
        self,
        prompt: str,
        *,
        context: Mapping[str, Any] | None = None,
        message_history: Sequence[Message] | None = None,
        on_event: Callable[[AgentEvent], Any] | None = None,
        objects: Mapping[str, object] | None = None,
    ) -> AgentRunResult:
        """Run the tool loop on `prompt`.

        A run started inside another agent run (from a tool, a `SubAgentTool`, an agentic tool) is part of it: its
        blackboard sees the outer run's objects and publishes its own to it when it ends, its usage counts in the
        outer run's usage and budget as it happens, and its events reach the outer run's subscribers too. Runs nest
        at most `MAX_DEPTH` levels deep.

        Args:
            prompt: The user's message.
            context: This run's call context, merged over the agent's (the run's entries win). Every tool call of
                the run receives the merged context, in a fresh tool loop (`ToolCallContext.loop_id`, not an entry).
            message_history: Earlier messages of the conversation (for example `result.messages` of the last
                run); the agent's system prompt is added only if the history does not start with one.
            on_event: Called with every event of this run (tool calls, plan steps, progress, messages).
            objects: Put on the run's blackboard before it starts, each bound to its name.

        Raises:
            UsageLimitExceeded: A budget, `max_iterations` or the nesting limit stopped the run (`exc.process` is
                the process).
            ToolConfigurationError: A tool is misconfigured (for example it needs a review handler).
            ExitEarly: A tool or reviewer stopped the run.
            ModelError: The model provider failed.
        """
        return await self._run(prompt, context=context, message_history=message_history, on_event=on_event,
                               objects=objects)

    def run_sync(
        self,
        prompt: str,
        *,
        context: Mapping[str, Any] | None = None,
        message_history: Sequence[Message] | None = None,
        on_event: Callable[[AgentEvent], Any] | None = None,
        objects: Mapping[str, object] | None = None,
    ) -> AgentRunResult:
        """`run` for scripts with no event loop running."""
        return anyio.run(partial(self.run, prompt, context=context, message_history=message_history,
                                 on_event=on_event, objects=objects))

    def run_stream(
        self,
        prompt: str,
        *,
        context: Mapping[str, Any] | None = None,
        message_history: Sequence[Message] | None = None,
        objects: Mapping[str, object] | None = None,
    ) -> AbstractAsyncContextManager[AgentStream]:
        """Run the tool loop on `prompt`, streaming: the model's replies arrive as `TextDelta` and
        `ToolCallDelta` events while they are written, among the run's other events.

        ```python
        model = ScriptedModel([{'tool': 'add', 'arguments': {'a': 2, 'b': 3}}, 'The sum is 5.'])
        agent = Agent(model, tools=[add])
        async with agent.run_stream('What is 2 + 3?') as stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    print(event.text, end='')
        print()
        print(stream.result.usage.llm_calls)
        #> The sum is 5.
        #> 2
        ```

        The stream covers the whole run, every tool round, until the final answer. The run is a task inside the
        `async with` block: leaving the block early cancels it. A failure of the run is raised when the
        iteration reaches it (or when the block ends, if nobody iterated that far). Arguments as for `run`.
        """
        if not isinstance(prompt, str):
            raise UserError(f'Agent prompt must be a string, got {type(prompt).__name__}: {prompt!r}.')
        return open_run_stream(partial(self._listened_run, prompt, context=context,
                                       message_history=message_history, objects=objects))

    async def _listened_run(self, prompt: str, listener: Callable[[AgentEvent], Any], *,
                            context: Mapping[str, Any] | None, message_history: Sequence[Message] | None,
                            objects: Mapping[str, object] | None) -> AgentRunResult:
        return await self._run(prompt, context=context, message_history=message_history, on_event=listener,
                               objects=objects, stream=True)

    async def _run(
        self,
        prompt: str,
        *,
        context: Mapping[str, Any] | None = None,
        message_history: Sequence[Message] | None = None,
        on_event: Callable[[AgentEvent], Any] | None = None,
        objects: Mapping[str, object] | None = None,
        stream: bool = False,
    ) -> AgentRunResult:
        if not isinstance(prompt, str):
            raise UserError(f'Agent prompt must be a string, got {type(prompt).__name__}: {prompt!r}.')
        parent = current_process()
        # The loop id travels beside the entries: a tool's context is exactly what the caller configured.
        effective = self.context.merge(ToolCallContext.of(context)).with_loop_id(uuid.uuid4().hex)
        board = parent.blackboard.spawn() if parent is not None else Blackboard()
        process = AgentProcess(agent_name=self.name, budget=self.budget, parent=parent, blackboard=board,
                               context=effective)
        if process.depth > MAX_DEPTH:
            process._stop(f'agent runs are nested more than {MAX_DEPTH} levels deep (an agent probably calls '
                          'itself). Answer with what you have.')
        for name, value in (objects or {}).items():
            board.add(value, name)
        process.events.subscribe(self.events.emit)
        if on_event is not None:
            process.events.subscribe(on_event)
        messages: list[Message] = []
        trace = run_trace(self.name, self.description, self.model.name, self.instructions, prompt, process)
        try:
            with using(process_var, process), use_review_handler(self.review_handler), \
                    record_approvals() as approvals, trace:
                messages.extend(self._start_messages(prompt, message_history, process))
                await self.toolset.load()
                outcome = await run_loop(self.model, self._loop_tools(process), process, messages,
                                         settings=self.settings, max_iterations=self.max_iterations,
                                         limits=self.limits, stream=stream or self.eager_plans,
                                         empty_answer_nudges=self.empty_answer_nudges)
                trace.finished(outcome.output, outcome.finish_reason)
        except UsageLimitExceeded:
            process.finish('stopped', process.stop_reason)
            raise
        except ControlFlowSignal as exc:
            process.finish('stopped', f'{type(exc).__name__}: {exc}')
            raise
        except anyio.get_cancelled_exc_class():
            process.finish('stopped', 'cancelled')
            raise
        except BaseException as exc:
            process.finish('failed', f'{type(exc).__name__}: {exc}')
            raise
        finally:
            if parent is not None:
                board.publish()
        process.finish('completed')
        return AgentRunResult(outcome.output, tuple(messages), process.usage, tuple(process.plan_runs), process,
                              outcome.finish_reason, approvals.records)

    def _start_messages(self, prompt: str, history: Sequence[Message] | None,
                        process: AgentProcess) -> list[Message]:
        earlier: list[Message] = list(history or ())
        for index, message in enumerate(earlier):
            if not isinstance(message, SystemMessage | UserMessage | AssistantMessage | ToolMessage):
                raise UserError(f'message_history[{index}] must be a message (SystemMessage, UserMessage, '
                                f'AssistantMessage or ToolMessage), got {type(message).__name__}: {message!r}. '
                                'Pass `result.messages` of an earlier run.')
        added: list[Message] = []
        instructions = self.instructions
        if instructions and not (earlier and isinstance(earlier[0], SystemMessage)):
            added.append(SystemMessage(instructions))
        user = UserMessage(prompt)
        for message in (*added, user):
            process.emit(MessageEvent(process_id=process.id, time=process.elapsed(), message=message))
        return [*added, *earlier, user]

    def _loop_tools(self, process: AgentProcess) -> LoopTools:
        """The tools of one run: the agent's (read live) changed by tool injections, never the toolset itself."""
        plan_tool = self.plan_tool  # fixed for the run: a plan tool offered at the start stays offered

        def base() -> list[Tool]:
            tools = self.toolset.tools
            return [*tools, plan_tool] if plan_tool is not None else tools

        def find_base(name: str) -> Tool | None:
            if plan_tool is not None and name == plan_tool.name:
                return plan_tool
            return self.toolset.find(name)

        run_tools = RunToolSet(base, find_base, (UnfoldingInjectionStrategy(), *self.injection_strategies),
                               self.tool_decorator)
        process.offered_tools = run_tools.tools

        def definitions() -> list[ToolDefinition]:
            return [tool.definition for tool in run_tools.tools()]

        def available() -> list[str]:
            return [tool.name for tool in run_tools.tools()]

        eager = partial(eager_plans, plan_tool) if self.eager_plans and plan_tool is not None else None
        mode = self.plan_first
        first = None
        if mode is not None and plan_tool is not None:
            own = getattr(self.model, 'settings', None)
            body = dict(own.extra_body or {}) if isinstance(own, ModelSettings) else {}
            first = partial(PlanFirst, plan_tool, mode=mode,
                            grammar_body=body if getattr(self.model, 'takes_grammar', False) else None)
        return LoopTools(definitions, run_tools.find, available, lambda tool: tool is not plan_tool,
                         run_tools.after_call, eager, first)

    # --- sub-agents -----------------------------------------------------------------------------------------

    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        input_type: type[BaseModel] | None = None,
        prompt: Callable[[Any], str] | None = None,
    ) -> SubAgentTool:
        """This agent as a tool another agent can call (a sub-agent); see `SubAgentTool`."""
        return SubAgentTool(self, name=name, description=description, input_type=input_type, prompt=prompt)

    def __repr__(self) -> str:
        return (f'Agent(name={self.name!r}, model={self.model.name!r}, tools={self.toolset.names}, '
                f'tool_planning={self.tool_planning})')


def _check_eager(eager: bool, *, tool_planning: bool, options: Mapping[str, Any]) -> bool:
    if not isinstance(eager, bool):
        raise UserError(f'Agent eager_plans must be True or False, got {eager!r}.')
    if not eager:
        return False
    if not tool_planning:
        raise UserError('Agent eager_plans=True starts the steps of `execute_tool_plan` early, but tool_planning is '
                        'off: pass tool_planning=True too.')
    if options.get('store') is not None:
        raise UserError('Agent eager_plans=True cannot be used with plan_store: a durable plan starts once the whole '
                        'plan has arrived and is recorded. Drop one of the two.')
    if options.get('review_mode') == 'whole_plan':
        raise UserError("Agent eager_plans=True cannot be used with plan_options review_mode='whole_plan': the "
                        'reviewer sees the whole plan before anything runs. Drop one of the two.')
    return True


def _plan_first_mode(plan_first: bool | PlanFirstMode, model: Model, *,
                     tool_planning: bool) -> PlanFirstMode | None:
    if plan_first is False:
        return None
    if plan_first not in (True, 'tool_choice', 'response_format'):
        raise UserError("Agent plan_first must be True, False, 'tool_choice' or 'response_format', "
                        f'got {plan_first!r}.')
    if not tool_planning:
        raise UserError('Agent plan_first makes the first reply a plan of `execute_tool_plan`, but tool_planning is '
                        'off: pass tool_planning=True too.')
    if plan_first is True:
        # A local server (llama.cpp's ignores a named tool choice) gets the plan as grammar-constrained JSON.
        return 'response_format' if getattr(model, 'is_local', False) else 'tool_choice'
    return plan_first


def _resolve_model(model: Model | str) -> Model:
    if isinstance(model, str):
        return infer_model(model)
    if not isinstance(model, Model):
        raise UserError(
            f'Agent model must be a Model (an object with `name` and `async respond(messages, tools, settings)`) '
            f"or a model string such as 'openai:gpt-4o-mini', got {type(model).__name__}: {model!r}."
        )
    return model
