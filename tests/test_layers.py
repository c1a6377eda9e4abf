"""The package's layers: each part imports only the parts below it, so there is no import cycle, and the CLI and
the examples use the public faces only. Every import counts: at module level, inside functions, and under
`TYPE_CHECKING`."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / 'src' / 'toolweave'

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({'exceptions', '_ambient', '_json', '_version', '_public'}),
    frozenset({'_checks'}),
    frozenset({'tracing'}),
    frozenset({'tools'}),
    frozenset({'decorators', 'approval', 'progressive', 'models'}),
    frozenset({'pipeline', 'plan'}),
    frozenset({'agent'}),
    frozenset({'agentic', 'builtins', 'mcp', 'testing', 'ui'}),
    frozenset({'cli', 'integrations'}),
    frozenset({'toolweave'}),
)
"""The parts, bottom up: a part may import the parts of the layers below its own, never above or beside it."""
PART_OF = {'_pipeline_args': 'pipeline', '_tracing': 'tracing'}
"""Top-level private modules that belong to a part."""


@dataclass(frozen=True, slots=True)
class Import:
    module: str
    """The importing module, `toolweave.x.y`."""
    target: str
    """The imported module, `toolweave.a.b`."""
    line: int


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix('').parts
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def imports(path: Path) -> Iterator[Import]:
    """Every toolweave import of the module at `path`."""
    module = module_name(path)
    is_package = path.name == '__init__.py'
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:  # relative: resolve against the importing module's package
                anchor = module.split('.')[: len(module.split('.')) - node.level + (1 if is_package else 0)]
                base = '.'.join([*anchor, base] if base else anchor)
            # `from toolweave import models` imports the module `toolweave.models`
            targets = [f'{base}.{alias.name}' if (PACKAGE / alias.name).exists() or (
                PACKAGE / f'{alias.name}.py').exists() else base for alias in node.names] if base == 'toolweave' else [
                base]
        else:
            continue
        for target in targets:
            if target == 'toolweave' or target.startswith('toolweave.'):
                yield Import(module, target, node.lineno)


def part(module: str) -> str:
    """The part a module belongs to: `toolweave.tools._tool` -> `tools`; the package itself -> `toolweave`."""
    pieces = module.split('.')
    if len(pieces) == 1:
        return 'toolweave'
    return PART_OF.get(pieces[1], pieces[1])


def layer(name: str) -> int:
    for level, members in enumerate(LAYERS):
        if name in members:
            return level
    raise AssertionError(f'Part {name!r} is in no layer. Add it to LAYERS in {__file__}, above what it imports.')


def all_imports() -> list[Import]:
    return [found for path in sorted(PACKAGE.rglob('*.py')) for found in imports(path)]


def test_every_part_imports_only_the_layers_below_it() -> None:
    wrong = [
        f'{found.module}:{found.line} imports {found.target} ({part(found.module)!r} -> {part(found.target)!r})'
        for found in all_imports()
        if part(found.module) != part(found.target) and layer(part(found.target)) >= layer(part(found.module))
    ]
    assert wrong == [], 'Imports that go sideways or up (move the code down, or the import up):\n' + '\n'.join(wrong)


def test_the_parts_import_no_cycle() -> None:
    graph: dict[str, set[str]] = {}
    for found in all_imports():
        source, target = part(found.module), part(found.target)
        if source != target:
            graph.setdefault(source, set()).add(target)
    cycle = _find_cycle(graph)
    assert cycle is None, f'Import cycle between parts: {" -> ".join(cycle or [])}'


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target):], target]
            if target not in state:
                found = visit(target)
                if found is not None:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found is not None:
                return found
    return None


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _find_cycle({'tools': {'approval'}, 'approval': {'agent'}, 'agent': {'tools'}}) == [
        'agent', 'tools', 'approval', 'agent']
    assert _find_cycle({'agent': {'tools'}, 'tools': set()}) is None


@pytest.mark.parametrize('path', [*sorted((PACKAGE / 'cli').glob('*.py')), *sorted((ROOT / 'examples').glob('*.py'))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_cli_and_the_examples_use_public_modules_only(path: Path) -> None:
    own = module_name(path) if path.is_relative_to(PACKAGE) else ''
    private = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            targets = [node.module or '']
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        for target in targets:
            if not target.startswith('toolweave') or target.startswith('toolweave.cli'):
                continue
            if any(piece.startswith('_') for piece in target.split('.')):
                private.append(f'line {node.lineno}: {target}')
    assert private == [], f'{own or path.name} imports private modules: {private}'


KERNEL = 'toolweave.plan._kernel'
PLUG_INS = ('toolweave.plan._review', 'toolweave.plan._stream', 'toolweave.plan._tracing', 'toolweave.plan._observe',
            'toolweave.plan._run', 'toolweave.plan._meta', 'toolweave.plan.durable', 'toolweave.plan.workers')
"""What attaches to the plan kernel: each imports the kernel, never the reverse."""


def _plan_modules() -> dict[str, set[str]]:
    """Each module of `toolweave.plan` and the modules of `toolweave.plan` it imports (every import counts)."""
    graph: dict[str, set[str]] = {}
    for found in all_imports():
        if found.module.startswith('toolweave.plan') and found.target.startswith('toolweave.plan'):
            graph.setdefault(found.module, set()).add(found.target)
    return graph


def test_the_modules_of_the_plan_package_import_no_cycle() -> None:
    graph = {module: {target for target in targets if target != module} for module, targets in _plan_modules().items()
             if module != 'toolweave.plan'}  # the package's face imports everything; nothing inside imports it
    assert not any('toolweave.plan' in targets for targets in graph.values())
    cycle = _find_cycle(graph)
    assert cycle is None, f'Import cycle inside toolweave.plan: {" -> ".join(cycle or [])}'


def test_the_kernel_imports_none_of_what_attaches_to_it() -> None:
    graph = _plan_modules()
    reached: set[str] = set()
    todo = [KERNEL]
    while todo:  # everything the kernel imports, directly or not
        module = todo.pop()
        for target in graph.get(module, ()):
            if target not in reached:
                reached.add(target)
                todo.append(target)
    wrong = sorted(module for module in reached if module.startswith(PLUG_INS))
    assert wrong == [], f'The kernel imports what attaches to it: {wrong}'
    extensions = ('toolweave.plan._review', 'toolweave.plan._stream', 'toolweave.plan._tracing',
                  'toolweave.plan._observe', 'toolweave.plan.durable._journal')
    assert [module for module in extensions if KERNEL not in graph.get(module, ())] == []
