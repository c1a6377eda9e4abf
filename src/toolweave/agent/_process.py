"""`AgentProcess`: the state of one agent run (status, blackboard, history, usage, budget)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Literal, TypeAlias

from toolweave._checks import check_number
from toolweave.agent._blackboard import Blackboard
from toolweave.agent._events import AgentEvent, EventHub, MessageEvent, ProgressEvent
from toolweave.exceptions import UsageLimitExceeded
from toolweave.models import AssistantMessage, Usage
from toolweave.plan import PlanRun
from toolweave.tools import Tool, ToolCallContext, ToolResult

__all__ = ('AgentProcess', 'Budget', 'ProcessStatus', 'RunUsage', 'ToolCallRecord', 'current_process', 'process_var')

ProcessStatus: TypeAlias = Literal['running', 'completed', 'failed', 'stopped']
"""`stopped`: a budget, `max_iterations`, an exit-early signal or cancellation ended the run."""


@dataclass(frozen=True, slots=True)
class RunUsage:
    """What a run consumed.

    `tool_calls` counts the user tools the model called: direct calls plus plan steps. The `execute_tool_plan`
    call itself is not counted (it is in the history). A run's usage includes its sub-runs' (sub-agents, agentic
    tools), counted as they happen.
    """

    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: RunUsage) -> RunUsage:
        return RunUsage(
            self.llm_calls + other.llm_calls,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.tool_calls + other.tool_calls,
        )


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits of one run and of every run started inside it (sub-agents, agentic tools, at any depth); `None` means
    no limit. A run that would go past a limit stops: `Agent.run` raises `UsageLimitExceeded` (its `process`
    attribute is the stopped `AgentProcess`, status `stopped`, with `stop_reason`).

    Every limit holds for the whole tree of runs below the run that set it, and is enforced before each call, so
    concurrent calls (parallel plan steps, sub-agents running side by side) cannot go past it together:
    `max_llm_calls` before each model request of any run in the tree; `max_tool_calls` before each tool call the
    model makes (a reply's direct calls together, then each plan step as it starts); `max_tokens` (input + output)
    after each model reply, the only one that can be overshot, by the replies already in flight. A sub-run that hits
    a limit ends with a failure its caller's model reads; the run whose budget it is stops at its own next check.
    """

    max_llm_calls: int | None = None
    max_tokens: int | None = None
    max_tool_calls: int | None = None

    def __post_init__(self) -> None:
        for name in ('max_llm_calls', 'max_tokens', 'max_tool_calls'):
            check_number(getattr(self, name), f'Budget.{name}', integer=True, optional=True)


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One tool call the loop made (a plan's steps are in `AgentProcess.plan_runs`)."""

    call_id: str
    name: str
    arguments: str
    """The raw JSON text the model sent."""
    result: ToolResult
    started_at: float
    """Seconds since the process started."""
    ended_at: float

    @property
    def duration(self) -> float:
        return self.ended_at - self.started_at


@dataclass(eq=False)
class AgentProcess:
    """The state of one agent run. A tool reaches the process it runs in with `current_process()`.

    ```python
    from toolweave import tool
    from toolweave.agent import current_process

    @tool
    def remember(city: str) -> str:
        \"\"\"Remember a city.\"\"\"
        current_process().blackboard.add(city, name='city')
        return 'ok'
    ```
    """

    agent_name: str = 'agent'
    budget: Budget = field(default_factory=Budget)
    parent: AgentProcess | None = None
    blackboard: Blackboard = field(default_factory=Blackboard)
    context: ToolCallContext = ToolCallContext.EMPTY
    """The effective call context of the run (agent context merged with the run's, plus the loop id)."""
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    status: ProcessStatus = 'running'
    stop_reason: str | None = None
    """Why the run ended when it did not complete (budget, `max_iterations`, exit early, error)."""
    started_at: float = field(default_factory=time.time)
    """Wall-clock start (`time.time()`)."""
    ended_at: float | None = None
    history: list[ToolCallRecord] = field(default_factory=list)
    plan_runs: list[PlanRun] = field(default_factory=list)
    usage: RunUsage = RunUsage()
    models: dict[str, Usage] = field(default_factory=dict)
    """Usage per model name (requests, input and output tokens), for cost reports."""
    events: EventHub = field(default_factory=EventHub, repr=False)
    offered_tools: Callable[[], list[Tool]] | None = field(default=None, repr=False)
    """The tools the run offers the model right now (the agent's, changed by unfolding and other injections);
    a plan sent during the run may call any of them."""
    _clock_start: float = field(default_factory=time.perf_counter, repr=False)
    _lock: threading.Lock = field(init=False, repr=False)
    """One lock for the whole tree of runs: usage is counted, and budgets checked, across it."""

    def __post_init__(self) -> None:
        self._lock = self.parent._lock if self.parent is not None else threading.Lock()

    @property
    def depth(self) -> int:
        """0 for a top-level run, 1 for a sub-agent run inside it, and so on."""
        return 0 if self.parent is None else self.parent.depth + 1

    def lineage(self) -> Iterator[AgentProcess]:
        """This process, then its parent, up to the top-level run."""
        process: AgentProcess | None = self
        while process is not None:
            yield process
            process = process.parent

    # --- time and status -----------------------------------------------------------------------------------

    def elapsed(self) -> float:
        """Seconds since the process started (the time base of history records and events)."""
        return time.perf_counter() - self._clock_start

    @property
    def duration(self) -> float | None:
        """Seconds from start to end, once ended."""
        return None if self.ended_at is None else self.ended_at - self.started_at

    def finish(self, status: ProcessStatus, reason: str | None = None) -> None:
        if self.status == 'running':
            self.status = status
            self.stop_reason = reason
            self.ended_at = time.time()

    # --- blackboard ------------------------------------------------------------------------------------------

    def add(self, value: object, name: str | None = None) -> None:
        """Add an object to the blackboard (shortcut for `blackboard.add`)."""
        self.blackboard.add(value, name)

    # --- usage and budget ------------------------------------------------------------------------------------

    def reserve_model_call(self) -> None:
        """Count one model request against every budget above it, before it is sent; stop the run when one is used
        up (or the token budget already was)."""
        with self._lock:
            reason = _exhausted(self, 'max_tokens', 0) or _exhausted(self, 'max_llm_calls', 1)
            if reason is None:
                for process in self.lineage():
                    process.usage = replace(process.usage, llm_calls=process.usage.llm_calls + 1)
        if reason is not None:
            self._stop(reason)

    def record_model_call(self, usage: Usage, model_name: str = '') -> None:
        """Add a reply's tokens (and the request, per model) to this run and every run above it."""
        counted = Usage(1, usage.input_tokens, usage.output_tokens)
        with self._lock:
            for process in self.lineage():
                process.models[model_name] = process.models.get(model_name, Usage()) + counted
                process.usage = replace(process.usage, input_tokens=process.usage.input_tokens + usage.input_tokens,
                                        output_tokens=process.usage.output_tokens + usage.output_tokens)

    def check_after_model_call(self) -> None:
        """Stop the run when a token budget above it is used up."""
        with self._lock:
            reason = _exhausted(self, 'max_tokens', 0)
        if reason is not None:
            self._stop(reason)

    def reserve_tool_calls(self, count: int) -> None:
        """Count `count` tool calls against every budget above this run before they run; stop the run when they
        would go past one."""
        reason = self.try_tool_calls(count)
        if reason is not None:
            self._stop(reason)

    def try_tool_calls(self, count: int = 1) -> str | None:
        """Count `count` tool calls against every budget above this run, or, when they would go past one, count
        nothing and return why (for a plan step, which fails with it while the run goes on)."""
        with self._lock:
            reason = _exhausted(self, 'max_tool_calls', count)
            if reason is None:
                for process in self.lineage():
                    process.usage = replace(process.usage, tool_calls=process.usage.tool_calls + count)
        return reason

    def _stop(self, reason: str) -> None:
        self.finish('stopped', reason)
        exc = UsageLimitExceeded(f'Agent {self.agent_name!r} (process {self.id}) stopped: {reason}')
        exc.process = self
        raise exc

    # --- records and events ----------------------------------------------------------------------------------

    def record_call(self, record: ToolCallRecord) -> None:
        with self._lock:
            self.history.append(record)

    def record_plan_run(self, run: PlanRun) -> None:
        with self._lock:
            self.plan_runs.append(run)

    def emit(self, event: AgentEvent) -> None:
        """Send an event to this run's subscribers, then to the parent run's (sub-agent events bubble up)."""
        self.events.emit(event)
        if self.parent is not None:
            self.parent.emit(event)

    def report_progress(self, status: str) -> None:
        """Emit a transient `ProgressEvent` (for a live display)."""
        self.emit(ProgressEvent(process_id=self.id, time=self.elapsed(), status=status))

    def send_message(self, text: str) -> None:
        """Emit a persistent `MessageEvent` carrying an assistant message for the user."""
        message = AssistantMessage(text)
        self.emit(MessageEvent(process_id=self.id, time=self.elapsed(), message=message, persistent=True))

    def __repr__(self) -> str:
        return (f'AgentProcess(id={self.id!r}, agent={self.agent_name!r}, status={self.status!r}, '
                f'tool_calls={len(self.history)}, blackboard={len(self.blackboard)} objects)')


def _exhausted(process: AgentProcess, limit_name: str, more: int) -> str | None:
    """Why `more` of what `limit_name` limits cannot happen in `process` (a budget of it or of a run above it is
    used up), or `None`. Called under the tree's lock."""
    for level, owner in enumerate(process.lineage()):
        limit = getattr(owner.budget, limit_name)
        if limit is None:
            continue
        used = owner.usage
        whose = '' if level == 0 else f' (the budget of agent {owner.agent_name!r}, {level} level(s) up)'
        if limit_name == 'max_llm_calls' and used.llm_calls + more > limit:
            return (f'LLM call budget exhausted: {used.llm_calls} of max_llm_calls={limit} used{whose} and the model '
                    'has not given a final answer yet. Raise Budget.max_llm_calls.')
        if limit_name == 'max_tool_calls' and used.tool_calls + more > limit:
            return (f'Tool call budget exhausted: {used.tool_calls} of max_tool_calls={limit} used{whose} and the '
                    f'model asked for {more} more. Raise Budget.max_tool_calls.')
        if limit_name == 'max_tokens' and used.total_tokens > limit:
            return (f'Token budget exhausted: {used.total_tokens} tokens used ({used.input_tokens} in, '
                    f'{used.output_tokens} out){whose}, more than max_tokens={limit}. Raise Budget.max_tokens or '
                    'shorten the conversation.')
    return None


process_var: ContextVar[AgentProcess | None] = ContextVar('toolweave_process', default=None)


def current_process() -> AgentProcess | None:
    """The `AgentProcess` of the agent run the calling code executes in, or `None` outside a run. Works in
    async tools, plan steps and sync tools running in worker threads."""
    return process_var.get()
