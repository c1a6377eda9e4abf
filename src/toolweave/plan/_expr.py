"""`select` and `when` expressions: JMESPath, compiled when the plan is validated, evaluated when the step runs.

JMESPath is a specified query language with its own compliance suite: every expression terminates, and none has
side effects, so an expression a model wrote can run without a sandbox.
"""

from __future__ import annotations

import warnings
from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError, ParseError
from jmespath.parser import ParsedResult

__all__ = ('Expression', 'ExpressionError', 'compile_expression', 'evaluate', 'truthy')

Expression = ParsedResult
"""A compiled expression: `expression.search(value)`."""

_EXAMPLES = ('Examples: "items[?price < `1000`]", "sort_by(@, &rating) | reverse(@) | [:3]", '
             '"length(@) > `0`", "{names: [].name, total: sum([].amount)}" (literals go in backticks).')


class ExpressionError(ValueError):
    """A malformed expression; the message says where and how to fix it."""


def compile_expression(text: str) -> Expression:
    """Compile `text`. Raises `ExpressionError` naming the position and the token at fault."""
    if not text.strip():
        raise ExpressionError(f'the expression is empty. Write "@" for the whole value. {_EXAMPLES}')
    try:
        with warnings.catch_warnings():
            # jmespath still reads a backtick literal that is not JSON (`%`) as a string, with a warning that it
            # is deprecated: say how to write it instead.
            warnings.simplefilter('error', PendingDeprecationWarning)
            return jmespath.compile(text)
    except PendingDeprecationWarning:
        raise ExpressionError(f'a literal in backticks is not JSON in {text!r}: write numbers as `1000`, strings as '
                              f"'text' (single quotes) or `\"text\"`. {_EXAMPLES}") from None
    except ParseError as exc:
        position = exc.lex_position if isinstance(exc.lex_position, int) else len(text)
        token = '' if exc.token_value in (None, '') else f", near '{exc.token_value}'"
        reason = str(getattr(exc, 'message', '') or exc.msg).rstrip('.')
        if type(exc).__name__ == 'IncompleteExpressionError':
            reason = 'the expression ends too early'
        pointer = f'{text}\n{" " * position}^'
        raise ExpressionError(f'invalid JMESPath expression at position {position}{token}: {reason}.\n{pointer}\n'
                              f'{_EXAMPLES}') from None
    except JMESPathError as exc:  # pragma: no cover - the parser raises ParseError subclasses only
        raise ExpressionError(f'invalid JMESPath expression: {exc}. {_EXAMPLES}') from None


def evaluate(expression: Expression, value: Any) -> Any:
    """`expression` over `value`. Raises `ExpressionError` when the expression does not fit the data (a function
    given the wrong type, for example)."""
    try:
        return expression.search(value)
    except JMESPathError as exc:
        raise ExpressionError(' '.join(str(exc).split())) from None
    except (TypeError, ValueError) as exc:  # comparisons of mixed types inside sort_by and the like
        raise ExpressionError(f'{type(exc).__name__}: {exc}') from None


def truthy(value: Any) -> bool:
    """JMESPath truthiness: `false`, `null`, `""`, `[]` and `{}` are false; everything else (`0` too) is true."""
    if value is None or value is False:
        return False
    if isinstance(value, (str, list, dict)):
        return bool(value)
    return True
