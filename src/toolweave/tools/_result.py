from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ('NO_MESSAGE', 'ToolResult')

NO_MESSAGE = 'Tool execution failed with no message'
_SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call produced.

    `output` is the text a model sees; `error` is `None` on success; `value` is the Python value the tool
    returned (a model instance, a dict, a number...), which plan references, pipeline adapters, sinks and
    tool chaining read without re-parsing the text.

    ```python
    print(ToolResult.success('42', 42).value, ToolResult.failure(None).error)
    #> 42 Tool execution failed with no message
    ```
    """

    output: str = ''
    error: str | None = None
    value: Any = None
    has_value: bool = False
    """Whether `value` was set (a tool may legitimately return `None` as its value)."""
    raised: bool = field(default=False, compare=False)
    """Whether the failure came from an exception raised by the tool body rather than a returned failure."""

    @classmethod
    def success(cls, output: object = None, value: Any = ..., /) -> ToolResult:
        """A successful result. `None` output becomes `""`; non-string output is converted with `str()`."""
        text = '' if output is None else output if isinstance(output, str) else str(output)
        if value is ...:
            return cls(text)
        return cls(text, None, value, True)

    @classmethod
    def failure(cls, message: str | None, /) -> ToolResult:
        """A failed result. A missing or blank message is normalised to a fixed sentence, never `None`."""
        return cls('', message if message and message.strip() else NO_MESSAGE)

    @classmethod
    def from_exception(cls, exc: BaseException, /) -> ToolResult:
        """The failure for an exception raised by a tool body: its message, or the fixed sentence."""
        return cls('', str(exc) if str(exc).strip() else NO_MESSAGE, raised=True)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def text(self) -> str:
        """What a model sees: the output, or `Error: <message>` for a failure."""
        return self.output if self.error is None else f'Error: {self.error}'

    @property
    def artifact(self) -> Any:
        """The value as an artifact for sinks and tool chaining: set only for a successful result whose value
        is an object or a collection, never for plain text, numbers or booleans."""
        if self.error is None and self.has_value and not isinstance(self.value, _SCALARS):
            return self.value
        return None
