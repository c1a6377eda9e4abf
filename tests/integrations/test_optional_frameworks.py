"""Each framework adapter is optional: `import toolweave` loads no framework, and an adapter whose framework is
missing says which extra to install."""

from __future__ import annotations

import importlib
import subprocess
import sys
from dataclasses import dataclass

import pytest

FRAMEWORKS = ('pydantic_ai', 'agents', 'langchain_core', 'langgraph')


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=60, check=False)


def test_importing_toolweave_loads_no_framework() -> None:
    code = ('import sys, toolweave, toolweave.integrations, toolweave.testing\n'
            f'print(sorted(name for name in {FRAMEWORKS!r} if name in sys.modules))')
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == '[]'


@dataclass(frozen=True)
class Case:
    adapter: str
    blocked: str
    extra: str


@pytest.mark.parametrize('case', [Case('pydantic_ai', 'pydantic_ai', 'pydantic-ai'),
                                  Case('openai_agents', 'agents', 'openai-agents'),
                                  Case('langgraph', 'langgraph', 'langgraph')], ids=lambda c: c.adapter)
def test_an_adapter_without_its_framework_says_how_to_install_it(case: Case) -> None:
    # `None` in sys.modules makes `import <name>` raise ImportError, as a missing package does.
    done = run_python(f'import sys\nsys.modules[{case.blocked!r}] = None\nimport toolweave.integrations.{case.adapter}')
    assert done.returncode == 1
    last_line = done.stderr.strip().splitlines()[-1]
    assert last_line == (
        f'ImportError: `toolweave.integrations.{case.adapter}` needs the `{case.extra}` extra, which is not installed '
        f'(missing module {case.blocked!r}). Install it with: pip install "toolweave[{case.extra}]"'
    )


@pytest.mark.parametrize('adapter', ['pydantic_ai', 'openai_agents', 'langgraph'])
def test_each_adapter_lists_its_public_names_sorted(adapter: str) -> None:
    module = importlib.import_module(f'toolweave.integrations.{adapter}')
    assert isinstance(module.__all__, tuple)
    assert list(module.__all__) == sorted(module.__all__)
    assert all(hasattr(module, name) for name in module.__all__)
