"""The arguments of a tool call, and the one set of rules that reads them.

A call's arguments are `ToolArguments`: the JSON text a model sent, a mapping from Python code (a plan step's
resolved arguments, a pipeline's), or nothing. Tools read them with these functions only, so every tool agrees
on what `None`, blank text, malformed JSON and a non-object mean.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from toolweave._json import compact

__all__ = ('ArgumentsError', 'CheckedArguments', 'ToolArguments', 'arguments_json', 'load_arguments', 'text_input')

ToolArguments: TypeAlias = str | Mapping[str, Any] | None
"""Arguments as a model sends them (a JSON text) or as Python code passes them (a mapping); `None` for none."""


class ArgumentsError(ValueError):
    """The arguments of a call cannot be used: not a JSON object, or they fail the tool's validation. The message
    is written for the model that sent them: it says what is wrong and how to send them instead."""

    def __init__(self, message: str, *, problems: Sequence[str] = (), accepted: str | None = None) -> None:
        super().__init__(message)
        self.problems = tuple(problems)
        """Each problem the validation found, with its field path (`days: Input should be a valid integer, got
        "x"`): empty when the message is all there is."""
        self.accepted = accepted
        """The argument names the tool accepts, when an argument was unexpected."""


class CheckedArguments(dict[str, Any]):
    """Arguments a tool has validated ahead of its call (`Tool.check_arguments`): a dict like any other, which also
    carries what the validation produced, for one call of that tool, so that the call does not validate them again.

    The carried value is used once (a second call, a retry, validates anew, since the first call may have changed
    it), and setting or removing a key drops it, so a call never runs with a value that no longer matches its
    arguments (values nested inside are the caller's not to change in place, as with any arguments). Copies and
    pickles are plain dicts.
    """

    __slots__ = ('_owner', '_value')
    _owner: object
    _value: Any

    @classmethod
    def of(cls, arguments: Mapping[str, Any], owner: object, value: Any) -> CheckedArguments:
        """`arguments`, carrying `value`, which `owner` (the validator that made it) takes back with `take`."""
        checked = cls(arguments)
        checked._owner, checked._value = owner, value
        return checked

    def take(self, owner: object) -> Any:
        """The validated value, if `owner` (the validator that made it) asks and nobody has taken it; else `None`."""
        if getattr(self, '_owner', None) is not owner:
            return None
        value, self._owner, self._value = self._value, None, None
        return value

    def _drop(self) -> None:
        self._owner = self._value = None

    def __setitem__(self, key: str, value: Any) -> None:
        self._drop()
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self._drop()
        super().__delitem__(key)

    def __ior__(self, other: Any) -> CheckedArguments:  # type: ignore[override,misc]
        self._drop()
        return super().__ior__(other)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._drop()
        super().update(*args, **kwargs)

    def pop(self, *args: Any) -> Any:
        self._drop()
        return super().pop(*args)

    def popitem(self) -> tuple[str, Any]:
        self._drop()
        return super().popitem()

    def setdefault(self, key: str, default: Any = None) -> Any:
        self._drop()
        return super().setdefault(key, default)

    def clear(self) -> None:
        self._drop()
        super().clear()

    def copy(self) -> dict[str, Any]:
        return dict(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return dict, (dict(self),)


def load_arguments(arguments: ToolArguments, tool_name: str) -> dict[str, Any]:
    """The arguments as a dict: `None` and blank text are `{}`. Raises `ArgumentsError` when they are not a JSON
    object.

    ```python
    print(load_arguments('{"city": "Paris"}', 'weather'), load_arguments(None, 'weather'))
    #> {'city': 'Paris'} {}
    ```
    """
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if not arguments.strip():
        return {}
    try:
        loaded = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise ArgumentsError(
            f'Invalid JSON arguments for tool {tool_name!r}: {exc.msg} at line {exc.lineno} column {exc.colno}. '
            'Send a JSON object such as {"name": "value"}.'
        ) from None
    if not isinstance(loaded, dict):
        raise ArgumentsError(
            f'Arguments for tool {tool_name!r} must be a JSON object, got {type(loaded).__name__}: '
            f'{arguments[:100]!r}. Wrap the values in an object such as {{"name": "value"}}.'
        )
    return loaded


def text_input(arguments: ToolArguments, parameter: str = 'input') -> str:
    """The one string a text tool receives for these arguments.

    `{"input": "x"}` gives `x`; a non-string `input` gives its compact JSON; arguments without the parameter (or
    with `null` there) give their whole JSON text; text that is not valid JSON is the input itself; nothing is `""`.

    ```python
    print(text_input('{"input": "AI trends"}'), text_input('not valid json'), text_input('{"q": 1}'),
          text_input('{"input": 42}'), text_input({'input': [1, 2]}))
    #> AI trends not valid json {"q": 1} 42 [1,2]
    ```
    """
    if arguments is None:
        return ''
    if isinstance(arguments, str):
        try:
            loaded = json.loads(arguments)
        except ValueError:
            return arguments
        if not isinstance(loaded, dict) or loaded.get(parameter) is None:
            return arguments
        value = loaded[parameter]
    else:
        value = arguments.get(parameter)
        if value is None:
            return compact(dict(arguments))
    return value if isinstance(value, str) else compact(value)


def arguments_json(arguments: ToolArguments) -> str:
    """The arguments as the raw JSON text a model would send: text as is, a mapping encoded, nothing as `""`."""
    if arguments is None:
        return ''
    if isinstance(arguments, str):
        return arguments
    return json.dumps(dict(arguments), ensure_ascii=False, default=str)
