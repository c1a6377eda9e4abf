"""Every ```python example in a docstring of the package runs, and prints what its `#>` lines say.

The examples of one module run in order in one namespace (a later example may use what an earlier one defined),
with the public API and the testing fakes in scope, as a reader would have them. An example may `await` at the
top level; it then runs in an event loop.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import io
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import toolweave
import toolweave.testing

PACKAGE = Path(toolweave.__file__).parent
NEEDS_A_SERVER = frozenset({'toolweave.mcp._client', 'toolweave.mcp._factory', 'toolweave.mcp._server'})
"""Modules whose examples start MCP servers; `docs/mcp.md` runs the same calls against real servers."""
FENCE = re.compile(r'```python\n(.*?)```', re.DOTALL)


def module_names() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob('*.py')):
        parts = path.relative_to(PACKAGE.parent).with_suffix('').parts
        name = '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)
        if not name.startswith('toolweave.cli') and name not in NEEDS_A_SERVER:
            names.append(name)
    return names


def docstrings(source: str) -> Iterator[str]:
    """The docstrings of a module, its classes and functions (methods included), in source order."""
    tree = ast.parse(source)
    nodes: list[ast.AST] = [tree, *(node for node in ast.walk(tree)
                                    if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef))]
    nodes.sort(key=lambda node: getattr(node, 'lineno', 0))
    for node in nodes:
        assert isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        doc = ast.get_docstring(node)
        if doc:
            yield doc


def examples(module: str) -> list[str]:
    source = inspect.getsource(importlib.import_module(module))
    return [textwrap.dedent(block) for doc in docstrings(source) for block in FENCE.findall(doc)]


MODULES = [name for name in module_names() if examples(name)]


def run(code: str, where: str, namespace: dict[str, Any]) -> str:
    compiled = compile(code, where, 'exec', flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = eval(compiled, namespace)  # our own docstrings' examples
        if inspect.iscoroutine(result):

            async def main() -> None:
                await result

            anyio.run(main)
    return out.getvalue()


@pytest.mark.parametrize('module', MODULES)
def test_docstring_examples_run_and_print_what_they_show(module: str) -> None:
    namespace: dict[str, Any] = {**vars(toolweave.testing), **vars(toolweave),
                                 **vars(importlib.import_module(module)), '__name__': 'example'}
    for index, code in enumerate(examples(module)):
        shown = [line.strip()[3:] for line in code.splitlines() if line.strip().startswith('#> ')]
        printed = run(code, f'{module} example {index}', namespace).splitlines()
        assert printed == shown, f'{module} example {index}:\n{code}'


def test_there_are_examples_in_every_part() -> None:
    parts = {name.split('.')[1] for name in MODULES}
    assert parts >= {'tools', 'approval', 'agent', 'agentic', 'builtins', 'plan', 'progressive', 'decorators',
                     'pipeline', 'testing'}
