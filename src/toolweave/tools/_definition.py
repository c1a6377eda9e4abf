from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from toolweave.exceptions import ToolNameError

__all__ = ('NAME_PATTERN', 'ToolDefinition', 'ToolMetadata', 'check_tool_name', 'empty_object_schema')

NAME_PATTERN = re.compile(r'[A-Za-z0-9_-]{1,64}')
"""Tool names (and plan step ids) the OpenAI and Anthropic APIs both accept."""


def check_tool_name(name: object, *, where: str = 'tool') -> str:
    """Return `name` if it follows the name rule, else raise `ToolNameError` saying what to change."""
    if not isinstance(name, str):
        raise ToolNameError(f'Tool name of {where} must be a string, got {type(name).__name__} {name!r}.')
    if NAME_PATTERN.fullmatch(name) is None:
        problem = 'is blank' if not name.strip() else 'is longer than 64 characters' if len(name) > 64 else (
            'has characters outside [A-Za-z0-9_-]'
        )
        raise ToolNameError(
            f'Invalid tool name {name!r} for {where}: it {problem}. Tool names must match ^[A-Za-z0-9_-]{{1,64}}$ '
            '(letters, digits, `_` and `-`); for example `web_search`.'
        )
    return name


def empty_object_schema() -> dict[str, Any]:
    return {'type': 'object', 'properties': {}, 'required': []}


@dataclass(frozen=True, slots=True)
class ToolMetadata:
    """Flags about a tool that a model never sees."""

    return_direct: bool = False
    """The tool's output is the agent's final answer; the loop ends after it."""
    requires_approval: bool = False
    """A review handler must approve each call before the tool runs."""
    category: str | None = None
    """A grouping label for progressive disclosure."""
    strict: bool = False
    """The schema follows the providers' strict rules (every property required, no additional properties), so
    adapters ask the provider to enforce it (OpenAI `strict: true`): the model's arguments always match."""
    read_only: bool | None = None
    """The tool does not change anything outside itself (MCP `readOnlyHint`); `None`: not said."""
    destructive: bool | None = None
    """The tool may delete or overwrite something (MCP `destructiveHint`); `None`: not said."""
    idempotent: bool | None = None
    """Calling it again with the same arguments has no further effect (MCP `idempotentHint`); `None`: not said."""
    open_world: bool | None = None
    """The tool reaches outside a closed set of things, such as the web (MCP `openWorldHint`); `None`: not said."""
    extra: Mapping[str, Any] = field(default_factory=dict[str, Any])
    """Anything else an integration wants to carry."""

    @classmethod
    def create(cls, return_direct: bool = False) -> ToolMetadata:
        return cls(return_direct=return_direct)


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """What a model is told about a tool: its name, description and JSON schema of its arguments."""

    name: str
    description: str = ''
    parameters: Mapping[str, Any] = field(default_factory=empty_object_schema)
    """A JSON Schema object describing the arguments."""
    metadata: ToolMetadata = ToolMetadata()

    def __post_init__(self) -> None:
        check_tool_name(self.name)
        if not isinstance(self.description, str):
            raise ToolNameError(f'Description of tool {self.name!r} must be a string, got {self.description!r}.')

    def with_description(self, description: str) -> ToolDefinition:
        return replace(self, description=description)

    def with_metadata(self, **changes: Any) -> ToolDefinition:
        return replace(self, metadata=replace(self.metadata, **changes))
