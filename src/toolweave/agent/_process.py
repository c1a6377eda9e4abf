"""`AgentProcess`: the state of one agent run (status, blackboard, history, usage, budget)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, TypeAlias

from toolweave import _runtime
from toolweave.agent._blackboard import Blackboard
from toolweave.agent._events import AgentEvent, EventHub, MessageEvent, ProgressEvent
from toolweave.exceptions import UsageLimitExceeded, UserError
from toolweave.models._base import AssistantMessage, Usage
from toolweave.tools._context import ToolCallContext
from toolweave.tools._result import ToolResult

if TYPE_CHECKING:
    from toolweave.plan import PlanRun
    from toolweave.tools._tool import Tool

__all__ = ('AgentProcess', 'Budget', 'ProcessStatus', 'RunUsage', 'ToolCallRecord', 'current_process')

ProcessStatus: TypeAlias = Literal['running', 'completed', 'failed', 'stopped']
"""`stopped`: a budget, `max_iterations`, an exit-early signal or cancellation ended the run."""


@dataclass(frozen=True, slots=True)
class RunUsage:
    """What a run consumed.

    `tool_calls` counts the user tools that ran: direct calls plus plan steps that started. The
    `execute_tool_plan` call itself is not counted (it is in the history). A sub-agent's usage is added to its
    parent's when it finishes.
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
    """Limits of one run; `None` means no limit. A run that would go past one stops: `Agent.run` raises
    `UsageLimitExceeded` (its `process` attribute is the stopped `AgentProcess`, status `stopped`, with
    `stop_reason`).

    When each is checked: `max_llm_calls` before each model call; `max_tokens` (input + output) after each
    model reply; `max_tool_calls` before each round of tool calls, counting the round's calls (a plan's steps
    are counted when the plan finishes, so the next round sees them).
    """

    max_llm_calls: int | None = None
    max_tokens: int | None = None
    max_tool_calls: int | None = None

    def __post_init__(self) -> None:
        for name in ('max_llm_calls', 'max_tokens', 'max_tool_calls'):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise UserError(f'Budget.{name} must be a non-negative int or None, got {value!r}.')


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
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def depth(self) -> int:
        """0 for a top-level run, 1 for a sub-agent run inside it, and so on."""
        return 0 if self.parent is None else self.parent.depth + 1

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

    def record_model_call(self, usage: Usage, model_name: str = '') -> None:
        with self._lock:
            counted = Usage(1, usage.input_tokens, usage.output_tokens)
            self.models[model_name] = self.models.get(model_name, Usage()) + counted
            self.usage = replace(
                self.usage,
                llm_calls=self.usage.llm_calls + 1,
                input_tokens=self.usage.input_tokens + usage.input_tokens,
                output_tokens=self.usage.output_tokens + usage.output_tokens,
            )

    def record_tool_calls(self, count: int) -> None:
        with self._lock:
            self.usage = replace(self.usage, tool_calls=self.usage.tool_calls + count)

    def absorb(self, child: AgentProcess) -> None:
        """Add a finished sub-agent's usage (totals and per model) to this process."""
        with self._lock:
            self.usage = self.usage + child.usage
            for name, usage in child.models.items():
                self.models[name] = self.models.get(name, Usage()) + usage

    def check_before_model_call(self) -> None:
        limit = self.budget.max_llm_calls
        if limit is not None and self.usage.llm_calls >= limit:
            self._stop(f'LLM call budget exhausted: {self.usage.llm_calls} of max_llm_calls={limit} used '
                       'and the model has not given a final answer yet. Raise Budget.max_llm_calls.')
        self._check_tokens()

    def check_after_model_call(self) -> None:
        self._check_tokens()

    def check_tool_calls(self, count: int) -> None:
        limit = self.budget.max_tool_calls
        if limit is not None and self.usage.tool_calls + count > limit:
            self._stop(f'Tool call budget exhausted: {self.usage.tool_calls} of max_tool_calls={limit} used and '
                       f'the model asked for {count} more. Raise Budget.max_tool_calls.')

    def _check_tokens(self) -> None:
        limit = self.budget.max_tokens
        if limit is not None and self.usage.total_tokens > limit:
            self._stop(f'Token budget exhausted: {self.usage.total_tokens} tokens used '
                       f'({self.usage.input_tokens} in, {self.usage.output_tokens} out), more than '
                       f'max_tokens={limit}. Raise Budget.max_tokens or shorten the conversation.')

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
        started = sum(1 for step in run.steps if step.started_at is not None)
        with self._lock:
            self.plan_runs.append(run)
            self.usage = replace(self.usage, tool_calls=self.usage.tool_calls + started)

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


def current_process() -> AgentProcess | None:
    """The `AgentProcess` of the agent run the calling code executes in, or `None` outside a run. Works in
    async tools, plan steps and sync tools running in worker threads."""
    process = _runtime.process_var.get()
    return process if isinstance(process, AgentProcess) else None
