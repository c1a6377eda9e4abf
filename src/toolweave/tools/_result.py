from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ('NO_MESSAGE', 'ToolResult')

NO_MESSAGE = 'Tool execution failed with no message'


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call produced.

    `output` is the text a model sees; `error` is `None` on success; `value` is the Python value the tool
    returned (a model instance, a dict, a number...), which plan references and pipeline adapters read without
    re-parsing the text.

    A value may also be an **artifact**: something the tool produced for the rest of the run (sinks, playbook
    conditions, tool chaining, an agentic tool's result). A value given to `success` is an artifact, whatever its
    type; a function tool's return value is one when it is structured (an object or a collection), and plain text,
    numbers and booleans it returns are values only. `success(text, value, artifact=False)` keeps a value without
    making it an artifact.

    ```python
    print(ToolResult.success('42', 42).value, ToolResult.success('saved', 'draft-7').artifact)
    #> 42 draft-7
    print(ToolResult.failure(None).error)
    #> Tool execution failed with no message
    ```
    """

    output: str = ''
    error: str | None = None
    value: Any = None
    has_value: bool = False
    """Whether `value` was set (a tool may legitimately return `None` as its value)."""
    raised: bool = field(default=False, compare=False)
    """Whether the failure came from an exception raised by the tool body rather than a returned failure."""
    is_artifact: bool = field(default=True, compare=False)
    """Whether `value` (when set) is an artifact; see the class docstring."""
    exception: BaseException | None = field(default=None, compare=False, repr=False)
    """The exception the tool body raised, for a failure that came from one (what a retry policy matches)."""

    @classmethod
    def success(cls, output: object = None, value: Any = ..., /, *, artifact: bool = True) -> ToolResult:
        """A successful result, with `value` as an artifact unless `artifact=False`. `None` output becomes `""`;
        non-string output is converted with `str()`."""
        text = '' if output is None else output if isinstance(output, str) else str(output)
        if value is ...:
            return cls(text)
        return cls(text, None, value, True, is_artifact=artifact)

    @classmethod
    def failure(cls, message: str | None, /) -> ToolResult:
        """A failed result. A missing or blank message is normalised to a fixed sentence, never `None`."""
        return cls('', message if message and message.strip() else NO_MESSAGE)

    @classmethod
    def from_exception(cls, exc: BaseException, /) -> ToolResult:
        """The failure for an exception raised by a tool body: its message, or the fixed sentence."""
        return cls('', str(exc) if str(exc).strip() else NO_MESSAGE, raised=True, exception=exc)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def text(self) -> str:
        """What a model sees: the output, or `Error: <message>` for a failure."""
        return self.output if self.error is None else f'Error: {self.error}'

    @property
    def artifact(self) -> Any:
        """The artifact of a successful result (see the class docstring), or `None`."""
        if self.error is None and self.has_value and self.is_artifact:
            return self.value
        return None
