"""The one guard for numeric settings (limits, timeouts, counts): a bad value is a developer mistake, reported
at once with the setting's name and the value it got."""

from __future__ import annotations

from toolweave.exceptions import UserError

__all__ = ('check_number',)


def check_number(
    value: object,
    name: str,
    *,
    integer: bool = False,
    minimum: float = 0,
    exclusive: bool = False,
    maximum: float | None = None,
    optional: bool = False,
    unit: str = '',
    error: type[UserError] = UserError,
) -> None:
    """Raise `UserError` unless `value` is a number (an `int` when `integer`) of at least `minimum` (more than it
    when `exclusive`) and at most `maximum`, or `None` when `optional`. Booleans are never numbers here. `unit`
    names what the number counts in the message (`seconds`); `error` is the `UserError` subclass to raise (a
    `ToolConfigurationError` for a setting checked while a call runs, so it propagates out of the call).

    ```python
    try:
        check_number(0, 'Agent max_iterations', integer=True, minimum=1)
    except UserError as exc:
        print(exc)
    #> Agent max_iterations must be an int >= 1, got 0.
    ```
    """
    if value is None and optional:
        return
    kinds = int if integer else (int, float)
    ok = isinstance(value, kinds) and not isinstance(value, bool)
    if ok:
        assert isinstance(value, int | float)
        ok = (value > minimum if exclusive else value >= minimum) and (maximum is None or value <= maximum)
    if not ok:
        bound = f'{">" if exclusive else ">="} {minimum:g}' + ('' if maximum is None else f' and <= {maximum:g}')
        kind = ('an int' if integer else 'a number') + (f' of {unit}' if unit else '')
        raise error(f'{name} must be {kind} {bound}{" or None" if optional else ""}, got {value!r}.')
