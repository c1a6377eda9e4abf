"""`select` and `when` expressions: JMESPath, compiled and checked when the plan is validated, evaluated within
a budget when the step runs.

JMESPath is a specified query language with its own compliance suite and no side effects. What a model writes
is still bounded here, because a short expression can ask for a lot: `'[' * 400` recurses past Python's limit,
`[@, @] | [@, @] | ...` doubles a value at every `|`, `join('', [@, @])` doubles a text.

- **At validation** (`compile_expression`): the text is at most `MAX_EXPRESSION_CHARS` long, its syntax tree at
  most `MAX_EXPRESSION_DEPTH` levels deep; every function exists and gets as many arguments as it takes, literal
  arguments of the types it takes, and `&expr` exactly where it takes one; literals are finite numbers. So a
  plan whose expression can only fail never starts its other steps.
- **At run time** (`evaluate`): every node visited and every element the expression builds or hands to a function
  costs work, at most `MAX_EXPRESSION_WORK`; a text it builds, and its result (unless that is a part of the input
  as it is), are measured as JSON, shared parts counted each time they appear, at most `MAX_EXPRESSION_VALUE`
  bytes. Its result is JSON data, always: no `&expr`, no `Infinity`.

Evaluation first runs on the event loop with a small budget (`_INLINE_WORK`, a few milliseconds), which is
enough for almost every expression. One that needs more starts again in a worker thread with the whole budget:
the event loop keeps running (a pure-Python thread gives up the GIL every few milliseconds), and when the step's
`step_timeout` or the plan's `timeout` cancels the wait, the thread sees a flag at its next node and stops. The
work done inline is lost, but it is at most the small budget, and JMESPath has no side effects to repeat.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn

import anyio
import jmespath
from jmespath.exceptions import JMESPathError, ParseError
from jmespath.functions import REVERSE_TYPES_MAP, TYPES_MAP, Functions, signature
from jmespath.parser import ParsedResult
from jmespath.visitor import Options, TreeInterpreter

from toolweave.plan._parse import INLINE_BYTES, MAX_CONTAINERS, CountingDecoder, TooMany

__all__ = (
    'MAX_EXPRESSION_CHARS',
    'MAX_EXPRESSION_DEPTH',
    'MAX_EXPRESSION_VALUE',
    'MAX_EXPRESSION_WORK',
    'MAX_FROM_JSON_CHARS',
    'Expression',
    'ExpressionError',
    'compile_expression',
    'evaluate',
    'truthy',
)

Expression = ParsedResult
"""A compiled expression (evaluate it with `evaluate`)."""

MAX_EXPRESSION_CHARS = 2_000
"""The longest expression text a plan may hold."""
MAX_EXPRESSION_DEPTH = 50
"""The deepest an expression's syntax tree may nest (`a.b.c` is 3 levels, `[[[1]]]` 4)."""
MAX_EXPRESSION_WORK = 2_000_000
"""Work one evaluation may do: one per node visited, one per element of a list or object the expression builds
or hands to a function, one per 16 characters of text it builds, one per element of a value it measures;
sorting n elements costs n log2(n) / 4 more (about 2 s of work in all, in a worker thread)."""
MAX_EXPRESSION_VALUE = 8_000_000
"""The largest value (bytes of JSON, shared parts counted each time they appear) an expression may build."""
MAX_FROM_JSON_CHARS = 1_000_000
"""The longest text `from_json` reads."""
_INLINE_WORK = 10_000
"""Work done on the event loop before an evaluation moves to a worker thread (a few milliseconds)."""
_MAX_VALUE_DEPTH = 254
"""The deepest value an expression may build: what a step can record (`jsonable`'s limit)."""

_EXAMPLES = ('Examples: "items[?price < `1000`]", "sort_by(@, &rating) | reverse(@) | [:3]", '
             '"length(@) > `0`", "{names: [].name, total: sum([].amount)}" (literals go in backticks).')
_TOO_DEEP = (f'the expression is nested more than {MAX_EXPRESSION_DEPTH} levels deep. Split it into several steps '
             '(a select step can read the result of another).')


class ExpressionError(ValueError):
    """A malformed expression, or one that does not fit the data; the message says where and how to fix it."""


# --- functions ----------------------------------------------------------------------------------------------------


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f'{name} is not a JSON number')


class _Functions(Functions):
    """JMESPath's built-in functions, and `from_json`: the one way a plan reads JSON held in a text (MCP servers
    often return their results as JSON text)."""

    @signature({'types': ['string']})
    def _func_from_json(self, text: str) -> Any:
        if len(text) > MAX_FROM_JSON_CHARS:
            raise ExpressionError(f'from_json() reads texts of at most {MAX_FROM_JSON_CHARS:,} characters, got '
                                  f'{len(text):,}. Select the part you need before reading it as JSON.')
        # A large text is read by the pure-Python reader, as a large plan is: in the worker thread an evaluation this
        # big runs in, it lets the event loop run (the C reader holds the interpreter until it is done).
        try:
            if len(text) <= INLINE_BYTES:
                return json.loads(text, parse_constant=_reject_constant)
            return CountingDecoder(MAX_CONTAINERS, _reject_constant).decode(text)
        except json.JSONDecodeError as exc:
            shown = text[:60] + ('...' if len(text) > 60 else '')
            raise ExpressionError(f'from_json() got text that is not JSON ({exc.msg} at line {exc.lineno} column '
                                  f'{exc.colno}): {shown!r}.') from None
        except RecursionError:
            raise ExpressionError('from_json() got JSON nested too deeply to read.') from None
        except TooMany:
            raise ExpressionError(f'from_json() reads at most {MAX_CONTAINERS:,} objects and arrays.') from None
        except ValueError as exc:  # NaN or Infinity, an integer too long to read
            raise ExpressionError(f'from_json() got JSON it cannot read: {exc}.') from None


_FUNCTIONS = _Functions()
_SIGNATURES: dict[str, Sequence[dict[str, Any]]] = {
    name: spec['signature'] for name, spec in _Functions.FUNCTION_TABLE.items()}
_TAKE_EXPREF = sorted(name for name, params in _SIGNATURES.items() if any('expref' in p['types'] for p in params))
_SORTING = frozenset({'sort', 'sort_by'})
_DEEP = frozenset({'to_string', 'contains'})
"""Functions whose work (in C) goes through the whole value of their arguments: measured first."""


# --- compiling and checking ---------------------------------------------------------------------------------------


def compile_expression(text: str) -> Expression:
    """Compile `text` and check what can be checked before running it (see the module). Raises `ExpressionError`
    naming every problem: the position and token of a syntax error, an unknown function, a wrong argument."""
    if not text.strip():
        raise ExpressionError(f'the expression is empty. Write "@" for the whole value. {_EXAMPLES}')
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f'the expression is {len(text):,} characters long, more than the limit of '
                              f'{MAX_EXPRESSION_CHARS:,}. Split it into several steps (a select step can read the '
                              'result of another).')
    try:
        with warnings.catch_warnings():
            # jmespath still reads a backtick literal that is not JSON (`%`) as a string, with a warning that it
            # is deprecated: say how to write it instead.
            warnings.simplefilter('error', PendingDeprecationWarning)
            expression = jmespath.compile(text)
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
    except RecursionError:  # the parser recurses once per level of nesting
        raise ExpressionError(_TOO_DEEP) from None
    except JMESPathError as exc:  # pragma: no cover - the parser raises ParseError subclasses only
        raise ExpressionError(f'invalid JMESPath expression: {exc}. {_EXAMPLES}') from None
    problems = _Checker().check(expression.parsed)
    if problems:
        raise ExpressionError('; '.join(problems))
    return expression


def _type_of(value: Any) -> str:
    return TYPES_MAP.get(type(value).__name__, 'unknown')


def _accepts(types: Sequence[str], value: Any) -> bool:
    """Whether a literal `value` is of one of a function parameter's JMESPath `types` (`array-number`: an array
    of numbers)."""
    kind = _type_of(value)
    for wanted in types:
        outer, _, inner = wanted.partition('-')
        if kind != outer:
            continue
        if not inner or all(type(item).__name__ in REVERSE_TYPES_MAP[inner] for item in value):
            return True
    return False


class _Checker:
    """Walks a syntax tree (without recursion: it may be deep) for what can fail before any data is seen."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def check(self, tree: Any) -> list[str]:
        stack: list[tuple[Any, int, bool]] = [(tree, 1, False)]
        while stack:
            node, depth, expref_allowed = stack.pop()
            if depth > MAX_EXPRESSION_DEPTH:
                return [_TOO_DEEP]
            kind = node['type']
            if kind == 'expref' and not expref_allowed:
                self.problems.append(f'`&` makes an expression reference, which only the functions that take one '
                                     f'read ({", ".join(_TAKE_EXPREF)}): for example sort_by(@, &price).')
            elif kind == 'literal':
                self.literal(node['value'])
            children = [child for child in node.get('children', ()) if isinstance(child, dict)]
            allowed = self.function(node['value'], children) if kind == 'function_expression' else None
            for position, child in enumerate(children):
                stack.append((child, depth + 1, allowed is not None and allowed[position]))
        return self.problems

    def literal(self, value: Any) -> None:
        stack = [value]
        while stack:
            item = stack.pop()
            if type(item) is float and not math.isfinite(item):
                self.problems.append('a literal number is out of range (it reads as infinity): JSON numbers are '
                                     'finite.')
                return
            if isinstance(item, dict):
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)

    def function(self, name: str, arguments: list[Any]) -> list[bool] | None:
        """Check a call's name, arity and literal arguments; which arguments may be `&expr`."""
        params = _SIGNATURES.get(name)
        if params is None:
            self.problems.append(f'unknown function {name}(). The functions are: {", ".join(sorted(_SIGNATURES))}.')
            return None
        variadic = bool(params and params[-1].get('variadic'))
        count = len(params)
        if len(arguments) < count or (len(arguments) > count and not variadic):
            wanted = f'at least {count}' if variadic else str(count)
            self.problems.append(f'{name}() takes {wanted} argument{"s" if count != 1 else ""}, got '
                                 f'{len(arguments)}.')
            return None
        allowed = []
        for position, argument in enumerate(arguments):
            types = params[min(position, count - 1)]['types']
            takes_expref = 'expref' in types
            allowed.append(takes_expref)
            where = f'argument {position + 1} of {name}()'
            if takes_expref and argument['type'] != 'expref':
                self.problems.append(f'{where} must be an expression reference, like &price.')
            elif argument['type'] == 'literal' and types and not _accepts(types, argument['value']):
                self.problems.append(f'{where} must be {" or ".join(types)}, got {_type_of(argument["value"])} '
                                     f'{json.dumps(argument["value"])[:60]}.')
        return allowed


# --- evaluating ---------------------------------------------------------------------------------------------------


class _Overrun(Exception):
    """The inline budget is spent: evaluate again in a worker thread."""


class _Evaluation(TreeInterpreter):
    """One evaluation: JMESPath's tree interpreter, counting work and measuring what it builds."""

    def __init__(self, expression: Expression, limit: int) -> None:
        super().__init__(Options(custom_functions=_FUNCTIONS))
        self.expression = expression
        self.limit = limit
        self.work = 0
        self.stopped = False
        """Set from the event loop when the evaluation is no longer awaited (its step timed out or was cancelled)."""
        self.built: dict[int, Any] = {}
        """The lists and objects the expression built, by id (kept alive, so an id is not reused meanwhile)."""
        self.sizes: dict[int, int] = {}
        """JSON sizes measured so far, by id of a list or object in `built` or in the input."""

    def run(self, value: Any) -> Any:
        try:
            result = self.visit(self.expression.parsed, value)
            return self.checked(result)
        except (ExpressionError, _Overrun):
            raise
        except JMESPathError as exc:
            raise ExpressionError(' '.join(str(exc).split())) from None
        except RecursionError:
            raise ExpressionError('the value is nested too deeply to evaluate the expression over it.') from None
        except (TypeError, ValueError, ArithmeticError) as exc:  # mixed types inside sort_by, ceil(1e308 * 10)...
            raise ExpressionError(f'{type(exc).__name__}: {exc}') from None
        except RuntimeError as exc:  # a value changed while it was read
            raise ExpressionError(f'the value changed while the expression read it ({exc})') from None

    def spend(self, work: int) -> None:
        self.work += work
        if self.work > self.limit or self.stopped:
            self.overrun()

    def overrun(self) -> NoReturn:
        if self.limit < MAX_EXPRESSION_WORK:
            raise _Overrun
        if self.stopped:
            raise ExpressionError('the evaluation was stopped')
        raise ExpressionError(f'the expression needs more than {MAX_EXPRESSION_WORK:,} steps of work over this '
                              'value. Narrow the value in an earlier step (fewer elements or fields), or simplify '
                              'the expression.')

    # The interpreter's methods, with the work counted.

    def visit(self, node: Any, *args: Any, **kwargs: Any) -> Any:
        self.spend(1)
        result = super().visit(node, *args, **kwargs)
        kind = type(result)
        if kind is list or kind is dict:
            if node['type'] in _BUILDS:
                self.built[id(result)] = result
                self.spend(len(result))
        elif kind is str and node['type'] == 'function_expression':
            self.spend(len(result) >> 4)
            if len(result) > MAX_EXPRESSION_VALUE:
                raise self.too_large()
        return result

    def visit_function_expression(self, node: Any, value: Any) -> Any:
        name = node['value']
        arguments = [self.visit(child, value) for child in node['children']]
        work = 0
        for argument in arguments:
            kind = type(argument)
            if kind is list or kind is dict:
                work += len(argument)
                if name in _DEEP:
                    self.measure(argument)
            elif kind is str:
                work += len(argument) >> 4
        if name in _SORTING and arguments and type(arguments[0]) is list:
            work += len(arguments[0]) * len(arguments[0]).bit_length() // 4
        self.spend(work)  # before the call: sorting or joining runs in C, without a check in between
        return _FUNCTIONS.call_function(name, arguments)

    def visit_comparator(self, node: Any, value: Any) -> Any:
        left = self.visit(node['children'][0], value)
        right = self.visit(node['children'][1], value)
        if isinstance(left, list | dict) and isinstance(right, list | dict):  # compared deeply, in C
            self.measure(left)
            self.measure(right)
        return _compare(node['value'], left, right)

    # Measuring.

    def checked(self, result: Any) -> Any:
        """`result`, once it is known to be JSON data of at most `MAX_EXPRESSION_VALUE` bytes (a part of the input
        as it is, not measured: it is already there)."""
        kind = type(result)
        if kind is list or kind is dict:
            if id(result) in self.built:
                self.measure(result)
            return result
        _check_scalar(result)
        return result

    def measure(self, value: list[Any] | dict[str, Any]) -> int:
        """The JSON size of `value` (approximate: 8 bytes a number), each shared part counted where it appears;
        checks it is JSON data no larger than `MAX_EXPRESSION_VALUE` and no deeper than `_MAX_VALUE_DEPTH`."""
        sizes = self.sizes
        known = sizes.get(id(value))
        if known is not None:
            return known
        # An explicit stack (values may be deep): per open container, its children and its size so far.
        stack: list[tuple[Any, Any, list[int]]] = [(value, _children(value), [_shell(value)])]
        while stack:
            container, children, total = stack[-1]
            for child in children:
                kind = type(child)
                if kind is list or kind is dict:
                    size = sizes.get(id(child))
                    if size is None:
                        if len(stack) >= _MAX_VALUE_DEPTH:
                            raise ExpressionError(f'the expression builds a value nested more than '
                                                  f'{_MAX_VALUE_DEPTH} levels deep.')
                        stack.append((child, _children(child), [_shell(child)]))
                        break
                    total[0] += size + 1
                else:
                    total[0] += _scalar_size(child) + 1
                if total[0] > MAX_EXPRESSION_VALUE:
                    raise self.too_large()
            else:
                stack.pop()
                sizes[id(container)] = total[0]
                self.built.setdefault(id(container), container)  # keep it alive: its id must not be reused
                self.spend(len(container))
                if stack:
                    stack[-1][2][0] += total[0] + 1
                    if stack[-1][2][0] > MAX_EXPRESSION_VALUE:
                        raise self.too_large()
        return sizes[id(value)]

    def too_large(self) -> ExpressionError:
        return ExpressionError(f'the expression builds a value larger than {MAX_EXPRESSION_VALUE / 1e6:g} MB as '
                               'JSON (parts that appear several times count each time). Select fewer or smaller '
                               'values.')


_BUILDS = frozenset({'multi_select_list', 'multi_select_dict', 'projection', 'value_projection', 'filter_projection',
                     'flatten', 'slice', 'function_expression'})
"""Nodes whose list or object is (or may be) new: the elements are counted as work, the result is measured."""


def _compare(operator: str, left: Any, right: Any) -> Any:
    return TreeInterpreter.COMPARATOR_FUNC[operator](left, right) if operator in ('eq', 'ne') or (
        _comparable(left) and _comparable(right)) else None


def _comparable(value: Any) -> bool:
    """Ordering applies to numbers and strings only (JMESPath gives null for anything else)."""
    return type(value) in (int, float, str)


def _children(value: Any) -> Any:
    return iter(value.values()) if type(value) is dict else iter(value)


def _shell(value: Any) -> int:
    """A container's own JSON bytes: brackets, and an object's keys with their quotes and colons."""
    if type(value) is dict:
        return 2 + sum(len(key) + 3 if type(key) is str else 11 for key in value)
    return 2


def _scalar_size(value: Any) -> int:
    kind = type(value)
    if kind is str:
        return len(value) + 2
    _check_scalar(value)
    return 8


def _check_scalar(value: Any) -> None:
    kind = type(value)
    if kind is float and not math.isfinite(value):
        raise ExpressionError(f'the expression gives {value}, which is not a JSON number (too large, or not a '
                              'number).')
    if kind not in (str, int, float, bool, type(None)):
        what = 'an expression reference (&...)' if kind.__name__ == '_Expression' else f'a {kind.__name__}'
        raise ExpressionError(f'the expression gives {what}, which is not JSON data.')


async def evaluate(expression: Expression, value: Any) -> Any:
    """`expression` over `value` (JSON data), within the budget (see the module). Raises `ExpressionError` when
    the expression does not fit the data (a function given the wrong type, for example) or needs more than the
    budget."""
    try:
        return _Evaluation(expression, _INLINE_WORK).run(value)
    except _Overrun:
        pass
    evaluation = _Evaluation(expression, MAX_EXPRESSION_WORK)
    try:
        return await anyio.to_thread.run_sync(evaluation.run, value, abandon_on_cancel=True)
    finally:
        evaluation.stopped = True  # if the wait was cancelled, the thread stops at its next node


def truthy(value: Any) -> bool:
    """JMESPath truthiness: `false`, `null`, `""`, `[]` and `{}` are false; everything else (`0` too) is true."""
    if value is None or value is False:
        return False
    if isinstance(value, (str, list, dict)):
        return bool(value)
    return True
