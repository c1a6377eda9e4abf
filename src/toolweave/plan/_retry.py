"""Retries of plan steps: a tool call that fails is tried again, after a pause, as its policy says.

A policy (`Retries`) comes from the tool (`with_retries(tool, policy=...)`, or `@with_retries(policy=...)` above
`@tool`) or from the run (`run_plan(..., retries=...)`); the tool's own wins. `RetryCalls`, a kernel extension,
wraps each call of a step's tool (each element's, for a `for_each` step): a failure the policy matches gets
another attempt after its delay, up to `attempts` in all. Each attempt is journaled before it starts, as the first
one is (a `running` transition saying which attempt it is and why the last one failed), and counted on the record
(`attempts`); the step's `step_timeout` bounds all its attempts together, the plan's `timeout` everything. The
reviewer's approval of a call covers its attempts (the same call, tried again), and nothing else.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

import anyio

from toolweave._checks import check_number
from toolweave.exceptions import UserError
from toolweave.plan._kernel import Call, Extension, Run
from toolweave.plan._record import ItemRecord, StepRecord, cut
from toolweave.plan._validate import each_tool
from toolweave.tools import DelegatingTool, FunctionTool, Tool, ToolDefinition, function_tool

if TYPE_CHECKING:
    from toolweave.tools import ToolResult

P = ParamSpec('P')
R = TypeVar('R')

__all__ = ('RETRIES_KEY', 'RetryCalls', 'Retries', 'RetryingTool', 'retries_of', 'retrying', 'with_retries')

RETRIES_KEY = 'retries'
"""`ToolMetadata.extra` key holding a tool's own `Retries`."""


@dataclass(frozen=True, slots=True)
class Retries:
    """How a failed call of a plan step's tool is tried again.

    The wait before attempt `n + 1` is `initial_delay * 2 ** (n - 1)` seconds, at most `max_delay`, scaled by a
    random factor in `[1 - jitter, 1 + jitter]`. Only failures the policy matches are tried again: an exception
    the tool raised that is one of `on` (classes, or their names: `'TimeoutError'`, `'httpx.ConnectError'`, which
    also match on a worker process's failure), and, with `returned=True`, a failure the tool returned.

    ```python
    from toolweave.plan import Retries

    flaky = Retries(attempts=4, initial_delay=0.2, on=(ConnectionError, 'TimeoutError'))
    print(flaky.attempts, [round(flaky.delay(n, jitter=0.0), 2) for n in (1, 2, 3)])
    #> 4 [0.2, 0.4, 0.8]
    ```
    """

    attempts: int = 3
    """Tries in all, the first included (`1`: no retry)."""
    initial_delay: float = 0.5
    max_delay: float = 30.0
    jitter: float = 0.25
    on: tuple[type[BaseException] | str, ...] = (Exception,)
    """What earns another try: exception classes (or their names, qualified or not) the tool raised."""
    returned: bool = False
    """Whether a failure the tool returned (rather than raised) earns another try too."""
    random: Callable[[], float] = field(default=random.random, repr=False, compare=False)
    """Returns a float in `[0, 1)` for the jitter."""

    def __post_init__(self) -> None:
        check_number(self.attempts, 'Retries.attempts', integer=True, minimum=1)
        check_number(self.initial_delay, 'Retries.initial_delay', unit='seconds')
        check_number(self.max_delay, 'Retries.max_delay', unit='seconds')
        check_number(self.jitter, 'Retries.jitter', maximum=1)
        if not isinstance(self.on, tuple) or not all(
                isinstance(kind, str) or (isinstance(kind, type) and issubclass(kind, BaseException))
                for kind in self.on):
            raise UserError(f'Retries.on must be a tuple of exception classes or their names, got {self.on!r}.')

    def delay(self, attempt: int, *, jitter: float | None = None) -> float:
        """Seconds to wait after attempt number `attempt` (1-based) failed."""
        spread = self.jitter if jitter is None else jitter
        base = min(self.max_delay, self.initial_delay * 2.0 ** (attempt - 1))
        return base * (1 - spread + 2 * spread * self.random())

    def matches(self, result: ToolResult) -> bool:
        """Whether the failure `result` earns another try."""
        if not result.raised:
            return self.returned
        exc = result.exception
        names = {'Exception', 'BaseException'} if exc is None else {
            name for kind in type(exc).__mro__
            for name in (kind.__qualname__, f'{kind.__module__}.{kind.__qualname__}')}
        return any(kind in names if isinstance(kind, str) else exc is not None and isinstance(exc, kind)
                   for kind in self.on) or (exc is None and any(kind is Exception for kind in self.on))

    def data(self) -> dict[str, Any]:
        """The policy as JSON data (exception classes by their qualified names), as a durable run keeps it."""
        return {'attempts': self.attempts, 'initial_delay': self.initial_delay, 'max_delay': self.max_delay,
                'jitter': self.jitter, 'returned': self.returned,
                'on': [kind if isinstance(kind, str) else f'{kind.__module__}.{kind.__qualname__}' for kind in self.on]}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Retries:
        return cls(data['attempts'], data['initial_delay'], data['max_delay'], data['jitter'], tuple(data['on']),
                   data['returned'])


class RetryingTool(DelegatingTool):
    """A tool whose plan steps follow `policy` when a call fails (see `with_retries`)."""

    def __init__(self, delegate: Tool, policy: Retries) -> None:
        super().__init__(delegate)
        self._definition = _with_policy(delegate.definition, policy)

    @property
    def definition(self) -> ToolDefinition:
        return self._definition


@overload
def with_retries(tool: FunctionTool[P, R], /, policy: Retries) -> FunctionTool[P, R]: ...
@overload
def with_retries(tool: Tool | Callable[..., Any], /, policy: Retries) -> Tool: ...
@overload
def with_retries(*, policy: Retries) -> Callable[[Tool | Callable[..., Any]], Tool]: ...
def with_retries(tool: Tool | Callable[..., Any] | None = None, /,
                 policy: Retries | None = None) -> Tool | Callable[[Tool | Callable[..., Any]], Tool]:
    """`tool`, whose calls as plan steps are tried again as `policy` says when they fail (over a run's own
    policy); usable as a decorator, above `@tool`. A function tool stays a function tool.

    ```python
    from toolweave import tool
    from toolweave.plan import Retries, with_retries

    @with_retries(policy=Retries(attempts=3, on=(ConnectionError,)))
    @tool
    def fetch(url: str) -> str:
        \"\"\"Fetch a page.\"\"\"
        return 'page'

    print(fetch.name, fetch.definition.metadata.extra['retries'].attempts)
    #> fetch 3
    ```
    """
    if policy is None or not isinstance(policy, Retries):
        raise UserError(f'with_retries needs `policy=Retries(...)`, got {policy!r}.')
    if tool is None:
        return lambda inner: with_retries(inner, policy)
    candidate: object = tool
    if not isinstance(candidate, Tool):
        if not callable(candidate):
            raise UserError(f'with_retries needs a Tool or a function, got {type(candidate).__name__}: {candidate!r}.')
        candidate = function_tool(candidate)
    if isinstance(candidate, FunctionTool):
        return candidate.with_definition(_with_policy(candidate.definition, policy))
    return RetryingTool(candidate, policy)


def _with_policy(definition: ToolDefinition, policy: Retries) -> ToolDefinition:
    return definition.with_metadata(extra={**definition.metadata.extra, RETRIES_KEY: policy})


def retries_of(tool: Tool) -> Retries | None:
    """The retry policy a tool carries (on any of its layers, the outer one winning), or `None`."""
    for layer in tool.layers():
        found = layer.definition.metadata.extra.get(RETRIES_KEY)
        if isinstance(found, Retries):
            return found
    return None


class RetryCalls(Extension):
    """Tries each failed call again as its tool's policy, or the run's, says (see the module docstring)."""

    def __init__(self, policy: Retries | None) -> None:
        self.policy = policy
        self.policies: dict[int, Retries | None] = {}
        """Per tool (by id), the policy its calls follow."""
        self.run: Run | None = None

    def attach(self, run: Run) -> None:
        self.run = run

    def policy_for(self, tool: Tool) -> Retries | None:
        key = id(tool)
        if key not in self.policies:
            self.policies[key] = retries_of(tool) or self.policy
        return self.policies[key]

    async def call(self, record: StepRecord, item: ItemRecord | None, arguments: Any, proceed: Call) -> ToolResult:
        run = self.run
        assert run is not None
        tool = run.tools[record.index]
        policy = None if tool is None else self.policy_for(tool)
        result = await proceed(arguments)
        if policy is None:
            return result
        attempt = 1
        while result.error is not None and attempt < policy.attempts and policy.matches(result):
            delay = policy.delay(attempt)
            await anyio.sleep(delay)
            attempt += 1
            run.transition(record.index, 'running', detail={'attempt': attempt, 'after': cut(result.error, 500),
                                                      'waited': round(delay, 3)}, item=item)
            await run.sync()  # each attempt is on record before it starts, as the first one was
            result = await proceed(arguments)
        return result


def retrying(tools: Sequence[Tool | None], policy: Retries | None) -> list[Extension]:
    """The `RetryCalls` extension a run needs: when it has a policy, or one of its tools does (none otherwise)."""
    if policy is None:
        if all(retries_of(tool) is None for tool in each_tool(tools)):
            return []
    return [RetryCalls(policy)]
