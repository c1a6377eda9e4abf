"""`toolweave tools --tools module:attribute [--json]`."""

from __future__ import annotations

import itertools
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolweave.cli._app import app

runner = CliRunner(env={'COLUMNS': '200', 'NO_COLOR': '1', 'TERM': 'dumb'})
_counter = itertools.count()

MODULE = '''
from enum import Enum
from typing import Literal

from pydantic import BaseModel

from toolweave import Toolset, ToolGroup, ToolMetadata, tool
from toolweave.testing import FakeTool


class Unit(str, Enum):
    C = 'celsius'
    F = 'fahrenheit'


class Place(BaseModel):
    city: str
    country: str = 'AU'


@tool
def weather(place: Place, unit: Unit = Unit.C, days: int = 1, tags: list[str] | None = None) -> str:
    """Get the weather forecast.

    Args:
        place: Where to look.
        unit: Temperature unit.
        days: How many days ahead.
        tags: Labels for the request.
    """
    return 'sunny'


def shout(text: str, mode: Literal['loud', 'louder'] = 'loud') -> str:
    """Upper-case the text."""
    return text.upper()


class Calculator:
    @tool
    def add(self, a: int, b: int) -> int:
        """Add two integers."""
        return a + b


async def load_remote():
    return [FakeTool('remote_fetch', description='Fetch remotely.')]


TOOLS = Toolset([weather, shout, FakeTool('deploy', description='Deploy [prod].',
                                          metadata=ToolMetadata(requires_approval=True, category='ops'))])
LIST = [shout, Calculator()]
ONE = FakeTool('solo', description='Just one.')
CALC = Calculator()
GROUPED = Toolset([ToolGroup('remote', load_remote)])
EMPTY = Toolset()
NOT_TOOLS = 42
DUPLICATES = [FakeTool('x'), FakeTool('x')]
'''


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = f'cli_tools_fixture_{next(_counter)}'
    (tmp_path / f'{name}.py').write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield name
    sys.modules.pop(name, None)


def test_lists_tools_for_people(module: str) -> None:
    result = runner.invoke(app, ['tools', '--tools', f'{module}:TOOLS'])
    assert result.exit_code == 0, result.output
    out = result.output
    assert f'3 tools from {module}:TOOLS' in out
    assert 'weather' in out and 'Get the weather forecast.' in out
    assert 'place' in out and 'Place' in out and 'Where to look.' in out
    assert 'unit' in out and 'Unit' in out
    assert 'days' in out and 'integer' in out
    assert 'array[string] | null' in out
    assert 'one of "loud", "louder"' in out
    assert 'requires approval' in out and 'category: ops' in out
    assert 'Deploy [prod].' in out  # rich markup in a description is shown literally
    assert 'No parameters.' in out


def test_json_output(module: str) -> None:
    result = runner.invoke(app, ['tools', '--tools', f'{module}:TOOLS', '--json'])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [d['name'] for d in data] == ['weather', 'shout', 'deploy']
    weather = data[0]
    assert weather['description'] == 'Get the weather forecast.'
    assert weather['parameters']['type'] == 'object'
    assert weather['parameters']['required'] == ['place']
    assert set(weather['parameters']['properties']) == {'place', 'unit', 'days', 'tags'}
    assert data[2]['metadata'] == {'return_direct': False, 'requires_approval': True, 'category': 'ops', 'extra': {}}


@pytest.mark.parametrize(
    ('attribute', 'names'),
    [('LIST', ['shout', 'add']), ('ONE', ['solo']), ('CALC', ['add']), ('shout', ['shout']),
     ('GROUPED', ['remote_fetch']), ('EMPTY', [])],
)
def test_resolves_every_kind_of_attribute(module: str, attribute: str, names: list[str]) -> None:
    result = runner.invoke(app, ['tools', '--tools', f'{module}:{attribute}', '--json'])
    assert result.exit_code == 0, result.output
    assert [d['name'] for d in json.loads(result.output)] == names


def test_file_path_form(module: str) -> None:
    result = runner.invoke(app, ['tools', '--tools', f'{module}.py:ONE'])
    assert result.exit_code == 0, result.output
    assert 'solo' in result.output and 'Just one.' in result.output


def test_empty_toolset_says_so(module: str) -> None:
    result = runner.invoke(app, ['tools', '--tools', f'{module}:EMPTY'])
    assert result.exit_code == 0
    assert 'resolves to no tools' in result.output


def test_missing_module_says_what_could_not_be_imported(module: str) -> None:
    result = runner.invoke(app, ['tools', '--tools', 'no_such_module_xyz:TOOLS'])
    assert result.exit_code == 2
    assert "could not import module 'no_such_module_xyz'" in result.output


def test_missing_attribute_names_what_the_module_offers(module: str) -> None:
    result = runner.invoke(app, ['tools', '--tools', f'{module}:MISSING'])
    assert result.exit_code == 2
    assert f"module '{module}' has no attribute 'MISSING'. Tools it defines: weather, TOOLS, ONE, GROUPED, EMPTY," \
        in result.output


def test_a_file_outside_the_current_folder_is_imported_from_its_path(
        module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = runner.invoke(app, ['tools', '--tools', f'{tmp_path / module}.py:ONE', '--json'])
    assert result.exit_code == 0, result.output
    assert [d['name'] for d in json.loads(result.output)] == ['solo']
    result = runner.invoke(app, ['tools', '--tools', f'{tmp_path}/nope.py:ONE'])
    assert result.exit_code == 2
    assert "file '" in result.output and "nope.py' not found" in result.output


@pytest.mark.parametrize(('source', 'message'), [
    ('def broken(:\n', 'SyntaxError: invalid syntax'),
    ('raise RuntimeError("no API key configured")\n', 'RuntimeError: no API key configured'),
    ('import sys\nsys.exit(3)\n', 'SystemExit: 3'),
    ('import no_such_dependency_xyz\n', "ModuleNotFoundError: No module named 'no_such_dependency_xyz'"),
])
def test_a_module_that_fails_to_import_is_reported_without_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, message: str) -> None:
    name = f'broken_tools_{next(_counter)}'
    (tmp_path / f'{name}.py').write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    result = runner.invoke(app, ['tools', '--tools', f'{name}:TOOLS'])
    assert result.exit_code == 2, result.output
    assert f"importing '{name}:TOOLS' failed: {message}" in result.output
    assert 'Fix the module' in result.output and 'Traceback' not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize('spec', ['no_colon', ':TOOLS', 'module:'])
def test_malformed_spec(spec: str, module: str) -> None:
    result = runner.invoke(app, ['tools', '--tools', spec])
    assert result.exit_code == 2
    assert 'expected module:attribute' in result.output


def test_attribute_that_is_not_tools(module: str) -> None:
    result = runner.invoke(app, ['tools', '--tools', f'{module}:NOT_TOOLS'])
    assert result.exit_code == 2
    assert f"'{module}:NOT_TOOLS' does not resolve to tools" in result.output
    assert "type 'int'" in result.output


def test_duplicate_names_are_reported(module: str) -> None:
    result = runner.invoke(app, ['tools', '--tools', f'{module}:DUPLICATES'])
    assert result.exit_code == 2
    assert 'Duplicate tool name' in result.output


def test_tools_option_is_required() -> None:
    result = runner.invoke(app, ['tools'])
    assert result.exit_code == 2
    assert '--tools' in result.output
