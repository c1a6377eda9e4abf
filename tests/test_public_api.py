"""The public surface: `__all__` is a sorted tuple that matches what the package really exports."""

from __future__ import annotations

import toolweave
import toolweave.testing


def test_all_is_a_sorted_tuple() -> None:
    for module in (toolweave, toolweave.testing):
        assert isinstance(module.__all__, tuple)
        assert list(module.__all__) == sorted(module.__all__, key=str.casefold)


def test_all_matches_exports() -> None:
    for module in (toolweave, toolweave.testing):
        exported = {name for name in vars(module) if not name.startswith('_')} - {'annotations'}
        exported -= {name for name in exported if type(getattr(module, name)).__name__ == 'module'}
        assert set(module.__all__) == exported


def test_required_entry_points() -> None:
    for name in ('tool', 'Tool', 'ToolResult', 'ToolCallContext', 'Toolset', 'TextTool', 'tools_from',
                 'ToolPipeline', 'ReviewHandler', 'requires_approval', 'Agent', 'run_plan'):
        assert hasattr(toolweave, name), name
    for name in ('ScriptedModel', 'FunctionModel', 'FakeTool'):
        assert hasattr(toolweave.testing, name), name


def test_reprs_show_public_module() -> None:
    for name in toolweave.__all__:
        obj = getattr(toolweave, name)
        if isinstance(obj, type):
            assert obj.__module__ in ('toolweave', 'toolweave.exceptions'), (name, obj.__module__)
