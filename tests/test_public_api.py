"""The public surface: each face's `__all__` is a sorted tuple that matches what it really exports, every name of
the top-level package is also on the face of its part, and reprs show public paths."""

from __future__ import annotations

import importlib
import inspect
from importlib.metadata import version
from types import ModuleType

import pytest

import toolweave
import toolweave.testing

FACES = ('toolweave', 'toolweave.agent', 'toolweave.agentic', 'toolweave.approval', 'toolweave.builtins',
         'toolweave.decorators', 'toolweave.exceptions', 'toolweave.mcp', 'toolweave.models', 'toolweave.pipeline',
         'toolweave.plan', 'toolweave.plan.durable', 'toolweave.plan.workers', 'toolweave.progressive',
         'toolweave.testing', 'toolweave.testing.scenarios', 'toolweave.tools', 'toolweave.tracing')
"""Every public module: the top-level package and the face of each part."""


def face(name: str) -> ModuleType:
    return importlib.import_module(name)


UNSORTED = ('toolweave.models',)
"""Faces not held to the sort order yet (the models face is being extended on another branch)."""


@pytest.mark.parametrize('name', [n for n in FACES if n not in UNSORTED])
def test_all_is_a_sorted_tuple(name: str) -> None:
    module = face(name)
    assert isinstance(module.__all__, tuple)
    assert list(module.__all__) == sorted(module.__all__, key=str.casefold)


@pytest.mark.parametrize('name', [n for n in FACES if n not in ('toolweave.models', 'toolweave.pipeline',
                                                                    'toolweave.decorators', 'toolweave.exceptions')])
def test_all_matches_exports(name: str) -> None:
    module = face(name)
    exported = {key for key, value in vars(module).items() if not key.startswith('_')
                and not isinstance(value, ModuleType)} - {'annotations'}
    assert set(module.__all__) == exported


@pytest.mark.parametrize('name', FACES)
def test_every_name_in_all_exists(name: str) -> None:
    module = face(name)
    assert [n for n in module.__all__ if not hasattr(module, n)] == []


def test_every_top_level_name_is_on_the_face_of_its_part() -> None:
    on_faces = {n for name in FACES[1:] for n in face(name).__all__}
    assert sorted(set(toolweave.__all__) - on_faces) == []


def test_required_entry_points() -> None:
    for name in ('tool', 'Tool', 'ToolResult', 'ToolCallContext', 'Toolset', 'TextTool', 'tools_from',
                 'ToolPipeline', 'ReviewHandler', 'requires_approval', 'Agent', 'run_plan'):
        assert hasattr(toolweave, name), name
    for name in ('ScriptedModel', 'FunctionModel', 'FakeTool'):
        assert hasattr(toolweave.testing, name), name
    assert toolweave.tools.Toolset is toolweave.Toolset and toolweave.tools.tool is toolweave.tool


def test_reprs_show_public_module() -> None:
    for name in toolweave.__all__:
        obj = getattr(toolweave, name)
        if isinstance(obj, type):
            assert obj.__module__ in ('toolweave', 'toolweave.exceptions'), (name, obj.__module__)


@pytest.mark.parametrize('name', [n for n in FACES[1:] if n not in UNSORTED])
def test_sub_package_names_show_a_public_module(name: str) -> None:
    module = face(name)
    for exported in module.__all__:
        obj = getattr(module, exported)
        if inspect.isclass(obj) and obj.__module__.startswith('toolweave'):
            assert '._' not in obj.__module__, (name, exported, obj.__module__)


def test_the_version_is_the_installed_distributions() -> None:
    assert toolweave.__version__ == version('toolweave')
