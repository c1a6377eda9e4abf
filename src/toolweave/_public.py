"""How the package faces present their names: reprs, tracebacks and docs show the public path (`toolweave.Tool`),
not the private module that defines the class (`toolweave.tools._tool.Tool`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ('present',)


def present(module: str, names: Iterable[str], namespace: Mapping[str, object], *, top_level: bool = False) -> None:
    """Give the classes and functions in `names` the `__module__` `module`: those a private toolweave module defines
    (a sub-package face), or, for the top-level package (which presents last, so it wins), every one but the errors,
    which stay `toolweave.exceptions.UserError` and so on.
    """
    for name in names:
        obj = namespace[name]
        defined_in = getattr(obj, '__module__', '')
        if not isinstance(defined_in, str) or not defined_in.startswith('toolweave.'):
            continue
        if defined_in == 'toolweave.exceptions' or (not top_level and '._' not in defined_in):
            continue
        if isinstance(obj, type) or callable(obj):
            try:
                obj.__module__ = module
            except (AttributeError, TypeError):  # a builtin or slotted object that cannot be renamed
                continue
