"""OpenTelemetry traces: off until `instrument()` turns them on.

While tracing is off, `ACTIVE` is `None` and every instrumented place (`Tool.call`, the plan executor, the agent
loop, model calls) costs one read of that module global; the OpenTelemetry API is not even imported, so
`import toolweave` stays light. `instrument()` imports it, makes a tracer, and from then on:

- every agent run is an `invoke_agent {agent}` span, every model call a `chat {model}` span and every tool call an
  `execute_tool {tool}` span, with the attributes of the OpenTelemetry GenAI semantic conventions (`gen_ai.*`);
- every plan run is an `execute_plan` span with one `plan_step {id}` span per step (`plan/_tracing.py`);
- pipelines and MCP calls add their own attributes to the `execute_tool` span of their call.

Spans nest through the OpenTelemetry context, which lives in a context variable: anyio task groups and toolweave's
worker threads for blocking tools (`tools/_threads.py`) copy it, and the MCP SDK sends it to servers as the W3C
`traceparent` in each request's `_meta`.

Payloads (arguments, results, messages) are recorded only with `include_content=True`, each cut to
`max_content_chars`. A call's `ToolCallContext` is never recorded: it is hidden from models, and from traces too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, Self

import anyio

from toolweave._checks import check_number
from toolweave._json import compact
from toolweave._version import __version__
from toolweave.exceptions import ControlFlowSignal, UserError

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = (
    'ACTIVE',
    'InstrumentationSettings',
    'SpanScope',
    'ToolSpan',
    'Tracing',
    'agent_calling',
    'annotate',
    'exception_raised',
    'instrument',
    'instrumentation',
    'span_opened_for_call',
    'tool_call_id',
    'tool_span',
)

# Attribute names of the OpenTelemetry GenAI semantic conventions (checked against the
# `opentelemetry-semantic-conventions` package by the tests).
OPERATION: Final = 'gen_ai.operation.name'
PROVIDER: Final = 'gen_ai.provider.name'
REQUEST_MODEL: Final = 'gen_ai.request.model'
RESPONSE_MODEL: Final = 'gen_ai.response.model'
AGENT_NAME: Final = 'gen_ai.agent.name'
AGENT_DESCRIPTION: Final = 'gen_ai.agent.description'
TOOL_NAME: Final = 'gen_ai.tool.name'
TOOL_DESCRIPTION: Final = 'gen_ai.tool.description'
TOOL_TYPE: Final = 'gen_ai.tool.type'
TOOL_CALL_ID: Final = 'gen_ai.tool.call.id'
TOOL_CALL_ARGUMENTS: Final = 'gen_ai.tool.call.arguments'
TOOL_CALL_RESULT: Final = 'gen_ai.tool.call.result'
INPUT_TOKENS: Final = 'gen_ai.usage.input_tokens'
OUTPUT_TOKENS: Final = 'gen_ai.usage.output_tokens'
FINISH_REASONS: Final = 'gen_ai.response.finish_reasons'
REQUEST_MAX_TOKENS: Final = 'gen_ai.request.max_tokens'
REQUEST_TEMPERATURE: Final = 'gen_ai.request.temperature'
REQUEST_STREAM: Final = 'gen_ai.request.stream'
TIME_TO_FIRST_CHUNK: Final = 'gen_ai.response.time_to_first_chunk'
INPUT_MESSAGES: Final = 'gen_ai.input.messages'
OUTPUT_MESSAGES: Final = 'gen_ai.output.messages'
SYSTEM_INSTRUCTIONS: Final = 'gen_ai.system_instructions'
ERROR_TYPE: Final = 'error.type'

TOOL_ERROR: Final = 'tool_error'
"""`error.type` of a tool call that failed (raised or returned a failure); the exception, when there was one, is
recorded as the span's exception event."""

_DEFAULT_MAX_CONTENT_CHARS = 2000


@dataclass(frozen=True, slots=True, kw_only=True)
class InstrumentationSettings:
    """How toolweave traces: where its spans go and how much of each call they carry.

    ```python
    import toolweave

    toolweave.instrument(toolweave.InstrumentationSettings(include_content=True, max_content_chars=500))
    print(toolweave.instrumentation())
    #> InstrumentationSettings(tracer_provider=None, include_content=True, max_content_chars=500)
    toolweave.instrument(False)
    ```
    """

    tracer_provider: TracerProvider | None = None
    """Where spans go; `None`: the global tracer provider (`opentelemetry.trace.set_tracer_provider`, or the
    provider a distribution such as `opentelemetry-instrument` or Logfire installs), even one set later."""
    include_content: bool = False
    """Record payloads: tool arguments and results (`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`), the
    messages sent to and received from models (`gen_ai.input.messages`, `gen_ai.output.messages`,
    `gen_ai.system_instructions`). Off by default: payloads are often large, and often personal data."""
    max_content_chars: int = _DEFAULT_MAX_CONTENT_CHARS
    """The longest payload text recorded (one argument text, one result, one message part) and the longest error
    message; longer text is cut, with a note of how much was cut."""

    def __post_init__(self) -> None:
        if self.tracer_provider is not None and not callable(getattr(self.tracer_provider, 'get_tracer', None)):
            raise UserError(f'InstrumentationSettings tracer_provider must be an OpenTelemetry TracerProvider (with '
                            f'`get_tracer`), or None for the global one, got {type(self.tracer_provider).__name__}: '
                            f'{self.tracer_provider!r}.')
        if not isinstance(self.include_content, bool):
            raise UserError(f'InstrumentationSettings include_content must be True or False, '
                            f'got {self.include_content!r}.')
        check_number(self.max_content_chars, 'InstrumentationSettings max_content_chars', integer=True, minimum=1)


class Tracing:
    """Tracing turned on: the settings, the tracer every span starts from, and the OpenTelemetry API functions the
    spans use (looked up once here, not at every span)."""

    __slots__ = ('Status', 'attach', 'current_span', 'detach', 'error', 'in_context', 'include_content', 'kinds',
                 'limit', 'settings', 'tracer')

    def __init__(self, settings: InstrumentationSettings) -> None:
        try:
            from opentelemetry import context, trace
        except ImportError as exc:  # the API comes with the `otel` extra (and with mcp, anthropic, pydantic-ai)
            raise ImportError('Tracing needs the OpenTelemetry API: `pip install "toolweave[otel]"`.') from exc
        self.settings = settings
        provider = settings.tracer_provider
        self.tracer: Tracer = (provider.get_tracer('toolweave', __version__) if provider is not None
                               else trace.get_tracer('toolweave', __version__))
        self.include_content = settings.include_content
        self.limit = settings.max_content_chars
        self.attach = context.attach
        self.detach = context.detach
        self.in_context = trace.set_span_in_context
        self.current_span = trace.get_current_span
        self.Status = trace.Status
        self.error = trace.StatusCode.ERROR
        self.kinds = {'internal': trace.SpanKind.INTERNAL, 'client': trace.SpanKind.CLIENT}

    def cut(self, text: str) -> str:
        """`text`, cut to `max_content_chars` with a note of how much was cut."""
        limit = self.limit
        return text if len(text) <= limit else f'{text[:limit]}... [cut {len(text) - limit} of {len(text)} characters]'

    def payload(self, value: object) -> str:
        """A payload as recorded: text as it is, anything else as compact JSON; cut to `max_content_chars`."""
        if isinstance(value, str):
            return self.cut(value)
        try:
            return self.cut(compact(value))
        except (TypeError, ValueError):  # a circular structure
            return self.cut(repr(value))

    def start(self, name: str, attributes: Mapping[str, Any], *, kind: Literal['internal', 'client'] = 'internal',
              parent: Context | None = None, at: int | None = None) -> Span:
        """A span started now (or `at`, in nanoseconds since the epoch), under the current span or under `parent`;
        not made current (see `SpanScope`)."""
        return self.tracer.start_span(name, context=parent, kind=self.kinds[kind], attributes=attributes,
                                      start_time=at)

    def failed(self, span: Span, error_type: str, message: str) -> None:
        """Mark `span` failed with `error_type` and `message` (cut to `max_content_chars`)."""
        span.set_attribute(ERROR_TYPE, error_type)
        span.set_status(self.Status(self.error, self.cut(message)))

    def ended_by(self, span: Span, exc: BaseException) -> None:
        """Record on `span` the exception that ended its operation: an error, except a control-flow signal (a
        deliberate stop); a cancellation is an error without an exception event (it has no story to tell)."""
        if isinstance(exc, ControlFlowSignal):
            span.set_attribute('toolweave.signal', type(exc).__name__)
            return
        if isinstance(exc, Exception):
            span.record_exception(exc)
        cancelled = _is_cancellation(exc)
        self.failed(span, type(exc).__qualname__, 'cancelled' if cancelled else str(exc) or type(exc).__qualname__)


def _is_cancellation(exc: BaseException) -> bool:
    try:
        return isinstance(exc, anyio.get_cancelled_exc_class())
    except RuntimeError:  # not in an event loop: nothing was cancelled
        return False


ACTIVE: Tracing | None = None
"""Tracing while it is on; `None` (the default) while it is off."""


def instrument(settings: InstrumentationSettings | bool = True) -> None:
    """Turn toolweave's OpenTelemetry traces on (`True`: the default settings), on with `settings`, or off
    (`False`). Process-wide: it applies to every agent run, plan and tool call that starts afterwards.

    Spans go to the global tracer provider unless `settings` names one; configure the OpenTelemetry SDK with the
    exporter of your backend (see docs/observability.md). Needs the OpenTelemetry API (`pip install
    "toolweave[otel]"` also brings the SDK).
    """
    global ACTIVE
    if settings is False:
        ACTIVE = None
        return
    if settings is True:
        settings = InstrumentationSettings()
    if not isinstance(settings, InstrumentationSettings):
        raise UserError(f'instrument() takes InstrumentationSettings, True or False, got {type(settings).__name__}: '
                        f'{settings!r}. Write `toolweave.instrument(InstrumentationSettings(...))`.')
    ACTIVE = Tracing(settings)


def instrumentation() -> InstrumentationSettings | None:
    """The settings tracing runs with, or `None` while it is off."""
    return None if ACTIVE is None else ACTIVE.settings


class SpanScope:
    """A started span made current for a block, so that the spans started inside nest under it. An exception
    leaving the block is recorded on the span (a control-flow signal is not an error), and the span ends with the
    block unless `end=False` (its owner ends it later)."""

    __slots__ = ('_end', '_token', '_tracing', 'span')

    def __init__(self, tracing: Tracing, span: Span, *, end: bool = True) -> None:
        self._tracing = tracing
        self.span = span
        self._end = end

    def __enter__(self) -> Self:
        self._token = self._tracing.attach(self._tracing.in_context(self.span))
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if exc is not None:
                self._tracing.ended_by(self.span, exc)
        finally:
            self._tracing.detach(self._token)
            if self._end:
                self.span.end()


def annotate(attributes: Mapping[str, Any]) -> None:
    """Add `attributes` to the current span (the `execute_tool` span of the call running), while tracing is on."""
    if ACTIVE is not None:
        ACTIVE.current_span().set_attributes(attributes)


def exception_raised(exc: BaseException) -> None:
    """A tool body raised `exc` (which becomes a failure result): record it on the current span."""
    if ACTIVE is not None:
        ACTIVE.current_span().record_exception(exc)


# --- tool calls ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Caller:
    """Who is calling tools in this task: the agent (for `gen_ai.agent.name`) and the model's id of the call
    about to start (for `gen_ai.tool.call.id`), consumed by that call so that its own inner calls do not get it."""

    agent: str | None = None
    call_id: str | None = None


_caller: ContextVar[_Caller | None] = ContextVar('toolweave_tracing_caller', default=None)


@contextmanager
def _calling(caller: _Caller) -> Iterator[None]:
    token = _caller.set(caller)
    try:
        yield
    finally:
        _caller.reset(token)


def agent_calling(agent: str) -> AbstractContextManager[None]:
    """The tool calls in the block are made by the agent `agent` (while tracing is on)."""
    return _calling(_Caller(agent)) if ACTIVE is not None else nullcontext()


def tool_call_id(call_id: str) -> AbstractContextManager[None]:
    """The next tool call in the block answers the model's call `call_id` (while tracing is on)."""
    if ACTIVE is None:
        return nullcontext()
    caller = _caller.get()
    return _calling(_Caller(caller.agent if caller is not None else None, call_id))


class ToolSpan(SpanScope):
    """The `execute_tool` span of one call; `result` records how the call ended."""

    __slots__ = ('_caller_token', '_opened_token')

    def __enter__(self) -> Self:
        caller = _caller.get()
        # The model's call id is this call's alone: the calls this one makes in turn do not answer it.
        self._caller_token = _caller.set(_Caller(caller.agent)) if caller is not None and caller.call_id else None
        self._opened_token = _opened.set(True)
        return super().__enter__()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        _opened.reset(self._opened_token)
        if self._caller_token is not None:
            _caller.reset(self._caller_token)
        super().__exit__(exc_type, exc, tb)

    def result(self, output: str, error: str | None) -> None:
        if error is not None:
            self._tracing.failed(self.span, TOOL_ERROR, error)
        elif self._tracing.include_content:
            self.span.set_attribute(TOOL_CALL_RESULT, self._tracing.cut(output))


_opened: ContextVar[bool] = ContextVar('toolweave_tool_span_opened', default=False)
"""Set by a `ToolSpan` for the `Tool.call` it is about to run (see `span_opened_for_call`)."""


def span_opened_for_call() -> bool:
    """Whether the `Tool.call` asking already runs inside the span opened for it; the answer is given once, so
    that the calls it makes in turn open their own spans."""
    if _opened.get():
        _opened.set(False)
        return True
    return False


def tool_span(tracing: Tracing, name: str, description: str, arguments: object) -> ToolSpan:
    """The `execute_tool {name}` span of a call of the tool `name` (call it only while tracing is on)."""
    caller = _caller.get()
    attributes: dict[str, Any] = {OPERATION: 'execute_tool', TOOL_NAME: name, TOOL_TYPE: 'function'}
    if description:
        attributes[TOOL_DESCRIPTION] = tracing.cut(description)
    if caller is not None:
        if caller.call_id is not None:
            attributes[TOOL_CALL_ID] = caller.call_id
        if caller.agent is not None:
            attributes[AGENT_NAME] = caller.agent
    if tracing.include_content and arguments is not None:
        attributes[TOOL_CALL_ARGUMENTS] = tracing.payload(arguments)
    return ToolSpan(tracing, tracing.start(f'execute_tool {name}', attributes))
