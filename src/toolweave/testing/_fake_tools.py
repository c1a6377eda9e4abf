"""Fake tools with latency and failure knobs, for tests and benchmarks."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import anyio

from toolweave._checks import check_number
from toolweave.exceptions import UserError
from toolweave.tools import (
    Tool,
    ToolArguments,
    ToolCallContext,
    ToolDefinition,
    ToolMetadata,
    ToolResult,
    load_arguments,
    output_text,
)
from toolweave.tools._definition import empty_object_schema
from toolweave.tools._function import to_result

__all__ = ('FakeCall', 'FakeTool', 'concat_tool', 'echo_tool', 'huge_output', 'non_json_output')

Responder = Callable[[dict[str, Any]], Any]
_EMPTY_ARGUMENTS = frozenset({'', '{}'})


@dataclass(slots=True)
class FakeCall:
    """One call of a `FakeTool`."""

    arguments: ToolArguments
    """The arguments exactly as the tool received them (JSON text or a mapping)."""
    context: ToolCallContext
    started: float
    """`time.perf_counter()` when the body started."""
    ended: float | None = None
    """`time.perf_counter()` when the body finished (also when it raised or was cancelled); `None` while running."""

    @property
    def seconds(self) -> float | None:
        return None if self.ended is None else self.ended - self.started


class FakeTool(Tool):
    """A tool whose behaviour is set by knobs: what it returns, how long it takes, how it fails.

    ```python
    slow = FakeTool('lookup', lambda args: {'id': args['id']}, delay=0.01)
    print(slow.call_sync('{"id": 7}').output, slow.call_count)
    #> {"id":7} 1
    ```

    Args:
        name: The tool name.
        respond: The value to return, or a function (sync or async) of the parsed arguments dict that returns
            it. Strings are the output as-is; anything else is rendered as compact JSON; the value is kept in
            `ToolResult.value`.
        delay: Seconds to sleep (anyio) before responding; 0 does not sleep at all.
        raises: An exception (instance or class) to raise after the delay.
        hang: Sleep until cancelled.
        fail: Return `ToolResult.failure(fail)` after the delay.
        output_chars: Return exactly this many characters of text instead of `respond` (huge outputs).
        description: The tool description.
        parameters: The JSON schema of the arguments (an empty object schema by default).
        metadata: Flags such as `ToolMetadata(requires_approval=True)`.
    """

    def __init__(
        self,
        name: str,
        respond: Any = 'ok',
        *,
        delay: float = 0.0,
        raises: BaseException | type[BaseException] | None = None,
        hang: bool = False,
        fail: str | None = None,
        output_chars: int | None = None,
        description: str = '',
        parameters: Mapping[str, Any] | None = None,
        metadata: ToolMetadata | None = None,
    ) -> None:
        check_number(delay, f'delay of FakeTool({name!r})', unit='seconds')
        if raises is not None and not (
            isinstance(raises, BaseException) or (isinstance(raises, type) and issubclass(raises, BaseException))
        ):
            raise UserError(f'raises of FakeTool({name!r}) must be an exception or exception class, got {raises!r}.')
        check_number(output_chars, f'output_chars of FakeTool({name!r})', integer=True, optional=True)
        self._definition = ToolDefinition(
            name, description, dict(parameters) if parameters is not None else empty_object_schema(),
            metadata if metadata is not None else ToolMetadata(),
        )
        self._constant: ToolResult | None = None
        self.respond = huge_output(output_chars) if output_chars is not None else respond
        self.delay = float(delay)
        self.raises = raises
        self.hang = hang
        self.fail = fail
        self.calls: list[FakeCall] = []
        self.in_flight = 0
        self.max_in_flight = 0
        """The most calls that were running at the same time (concurrency observed by this tool)."""
        self._lock = threading.Lock()

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    @property
    def respond(self) -> Any:
        """The value to return, or the function of the arguments that computes it."""
        return self._respond_with

    @respond.setter
    def respond(self, respond: Any) -> None:
        self._respond_with = respond
        # A constant is rendered once: benchmarks make 100k calls and must measure the runtime, not the fake.
        self._constant = None if callable(respond) else to_result(respond)

    @property
    def call_count(self) -> int:
        return len(self.calls)

    def reset(self) -> None:
        """Forget recorded calls and concurrency counts."""
        with self._lock:
            self.calls.clear()
            self.max_in_flight = self.in_flight

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        record = FakeCall(arguments, context, perf_counter())
        with self._lock:
            self.calls.append(record)
            self.in_flight += 1
            if self.in_flight > self.max_in_flight:
                self.max_in_flight = self.in_flight
        try:
            return await self._respond(arguments)
        finally:
            record.ended = perf_counter()
            with self._lock:
                self.in_flight -= 1

    async def _respond(self, arguments: ToolArguments) -> ToolResult:
        if self.delay:
            await anyio.sleep(self.delay)
        if self.hang:
            await anyio.sleep_forever()
        if self.raises is not None:
            raise self.raises
        if self.fail is not None:
            return ToolResult.failure(self.fail)
        constant = self._constant
        if constant is not None:
            if isinstance(arguments, str) and arguments not in _EMPTY_ARGUMENTS:
                load_arguments(arguments, self._definition.name)  # malformed JSON fails, like a function tool
            return constant
        value = self._respond_with(load_arguments(arguments, self._definition.name))
        if inspect.isawaitable(value):
            value = await value
        return to_result(value)


def huge_output(n_chars: int) -> Responder:
    """A responder returning exactly `n_chars` characters of readable text (a repeating numbered pattern)."""
    check_number(n_chars, 'huge_output() character count', integer=True)
    unit = 'lorem ipsum dolor sit amet '
    text = (unit * (n_chars // len(unit) + 1))[:n_chars]
    return lambda _arguments: text


def non_json_output() -> Responder:
    """A responder returning text that is not JSON and looks almost like it (a trap for parsers)."""
    return lambda _arguments: "{'not': json, trailing: [1, 2,]} <b>and</b> \u00e9\u00e0 \\u00zz"


def echo_tool(name: str = 'echo', *, delay: float = 0.0) -> FakeTool:
    """A fake tool that returns its arguments dict (its value) as compact JSON."""
    return FakeTool(name, lambda arguments: arguments, delay=delay, description='Returns its arguments.')


def concat_tool(name: str = 'concat', *, separator: str = '', delay: float = 0.0) -> FakeTool:
    """A fake tool that joins its argument values, in order, as text (non-strings as compact JSON)."""
    return FakeTool(
        name,
        lambda arguments: separator.join(output_text(v) for v in arguments.values()),
        delay=delay,
        description='Joins its argument values as text.',
    )
