"""What several commands share: where the tools come from (`--tools`) and the plan store (`--store`), each read
one way for every command, and the exit codes."""

from __future__ import annotations

import enum
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import anyio
import typer

from toolweave.exceptions import UserError
from toolweave.plan import PlanRun
from toolweave.tools import Tool, Toolset

__all__ = ('DEFAULT_STORE', 'STORE_ENV', 'TOOLS_HELP', 'ExitCode', 'StoreOption', 'ToolsOption', 'load_object',
           'load_tools', 'run_exit_code')


class ExitCode(enum.IntEnum):
    """What every command's exit status means (the table in docs/cli.md lists which command uses which)."""

    OK = 0
    """Done: the plan is valid, every step succeeded, the command did what it was asked."""
    FAILED = 1
    """The work did not succeed: an invalid plan, a step that failed or was skipped, a run that was stopped, a
    store or model that failed."""
    USAGE = 2
    """Bad input: a missing or malformed file or option, unknown tools or runs, a store that cannot be opened, a
    missing API key."""
    WAITING = 3
    """Nothing failed, but steps are parked waiting for a decision: `toolweave runs approve`, then
    `toolweave runs resume`."""
    INTERRUPTED = 130
    """Stopped by Ctrl-C (128 + SIGINT, as shells report it)."""


def run_exit_code(run: PlanRun) -> ExitCode:
    """0 when every step succeeded; 3 when nothing failed but steps wait for a decision; 1 otherwise."""
    if run.ok:
        return ExitCode.OK
    if run.suspended and not run.failed and not run.cancelled:
        return ExitCode.WAITING
    return ExitCode.FAILED


STORE_ENV = 'TOOLWEAVE_STORE'
DEFAULT_STORE = 'sqlite:///toolweave-runs.db'
"""The store of `toolweave runs` and `toolweave worker` when neither `--store` nor TOOLWEAVE_STORE names one."""
STORE_HELP = (f'The plan store: sqlite:///runs.db, a file path, or postgresql://... Every command reads --store, '
              f'else the {STORE_ENV} environment variable.')
StoreOption = Annotated[str, typer.Option('--store', envvar=STORE_ENV, metavar='URL',
                                          help=f'{STORE_HELP} Default: {DEFAULT_STORE}.', show_default=False)]

TOOLS_HELP = ('Where the tools are: module:attribute or path/to/file.py:attribute, holding a Toolset, a list of tools '
              'or functions, one tool or function, or an object with @tool methods (e.g. examples.tools:TOOLS).')
ToolsOption = Annotated[str, typer.Option('--tools', '-t', metavar='MODULE:ATTRIBUTE', help=TOOLS_HELP,
                                          show_default=False)]


def load_tools(spec: str) -> Toolset:
    """The tools `spec` (`module:attribute` or `path/to/file.py:attribute`) names, as a loaded Toolset (async tool
    groups loaded), or a usage error (exit 2) that says what is wrong and how to fix it."""
    obj = load_object(spec)
    try:
        toolset = obj if isinstance(obj, Toolset) else Toolset(obj if isinstance(obj, (list, tuple)) else [obj])
        return anyio.run(toolset.load)
    except UserError as exc:
        raise typer.BadParameter(f'{spec!r} does not resolve to tools: {exc}', param_hint='--tools') from None


def load_object(spec: str, *, option: str = '--tools') -> Any:
    """Import `module:attribute` (or `path/to/file.py:attribute`), or a usage error saying what could not be
    imported and how to fix it. Whatever the module raises while it is imported is reported, never a traceback."""
    module_name, sep, attribute = spec.partition(':')
    if not sep or not module_name or not attribute:
        raise typer.BadParameter(f'expected module:attribute, got {spec!r} (for example examples.tools:TOOLS or '
                                 'path/to/tools.py:TOOLS)', param_hint=option)
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # as `python -m` does: modules next to the user are importable
    try:
        module = _import_file(module_name, option) if module_name.endswith('.py') else importlib.import_module(
            module_name)
    except typer.BadParameter:
        raise
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module_name == exc.name or module_name.startswith(exc.name + '.')):
            raise _import_failed(spec, exc, option) from None  # the module was found; something it imports was not
        raise typer.BadParameter(
            f'could not import module {module_name!r}: {exc}. Check the name, run from the folder that holds it (the '
            'current folder is on the import path), or give the file: path/to/tools.py:ATTRIBUTE.',
            param_hint=option) from None
    except BaseException as exc:  # a syntax error, or an exception (even SystemExit) raised at import time
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise _import_failed(spec, exc, option) from None
    obj: Any = module
    for part in attribute.split('.'):
        if not hasattr(obj, part):
            raise typer.BadParameter(f'module {module.__name__!r} has no attribute {attribute!r}. '
                                     f'{_candidates(module)}', param_hint=option)
        obj = getattr(obj, part)
    return obj


def _import_file(name: str, option: str) -> ModuleType:
    """A module given as a file path: under the current folder it is imported by its dotted name (so it may be
    part of a package); elsewhere from its file, with its folder on the import path for its own imports."""
    path = Path(name)
    if not path.is_file():
        raise typer.BadParameter(f'file {name!r} not found (relative to {Path.cwd()}). Check the path.',
                                 param_hint=option)
    resolved = path.resolve()
    try:
        relative = resolved.relative_to(Path.cwd())
    except ValueError:
        relative = None
    if relative is not None:
        return importlib.import_module('.'.join(relative.with_suffix('').parts))
    folder = str(resolved.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(resolved.stem, resolved)
    assert spec is not None and spec.loader is not None  # a .py file always has a source loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[resolved.stem] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[resolved.stem]
        raise
    return module


def _import_failed(spec: str, exc: BaseException, option: str) -> typer.BadParameter:
    return typer.BadParameter(f'importing {spec!r} failed: {type(exc).__name__}: {exc}. Fix the module, then run '
                              'again.', param_hint=option)


def _candidates(module: ModuleType) -> str:
    """What in `module` could be given instead: its tools, toolsets and lists of tools."""
    found = [name for name, value in vars(module).items() if not name.startswith('_') and (
        isinstance(value, (Tool, Toolset))
        or isinstance(value, (list, tuple)) and value and all(isinstance(v, Tool) for v in value))]
    if not found:
        return 'It defines no tool, Toolset or list of tools at the top level.'
    shown = ', '.join(found[:10]) + (f' (and {len(found) - 10} more)' if len(found) > 10 else '')
    return f'Tools it defines: {shown}.'
