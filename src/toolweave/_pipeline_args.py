"""How a pipeline turns what one step produced into the next step's arguments (the rules are listed in the
`toolweave.pipeline` module docstring)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_jsonable_python

from toolweave._json import compact
from toolweave.tools import Tool, ToolArguments, ToolResult, text_input

__all__ = ('TEXT_PARAMETER', 'TEXT_SCHEMA', 'Carry', 'adapted', 'arguments_for', 'carry_of', 'first_arguments')

TEXT_PARAMETER = 'input'
TEXT_SCHEMA: Mapping[str, Any] = {
    'type': 'object',
    'properties': {TEXT_PARAMETER: {'type': 'string', 'description': 'The input to pass to the tool'}},
    'required': [TEXT_PARAMETER],
}
"""The schema of a text pipeline (and of `TextTool`): one `input` string."""


@dataclass(frozen=True, slots=True)
class Carry:
    """What flows to the next step: text (a step's output, an error message, an adapter's string) or a structured
    value (a step's `ToolResult.value`, an adapter's mapping or other object)."""

    text: str | None = None
    value: Any = None

    @property
    def is_text(self) -> bool:
        return self.text is not None


def carry_of(result: ToolResult) -> Carry:
    """A successful step's result: its structured value when it has one that is not text, else its output."""
    if result.has_value and result.value is not None and not isinstance(result.value, str):
        return Carry(value=result.value)
    return Carry(text=result.output)


def adapted(value: object) -> Carry:
    """What an adapter returned: `None` is empty text, a string is text, anything else is a structured value."""
    if value is None:
        return Carry(text='')
    if isinstance(value, str):
        return Carry(text=value)
    return Carry(value=value)


def _properties(tool: Tool) -> tuple[dict[str, Any], bool]:
    """The step's declared parameters, and whether it accepts nothing beyond them."""
    schema = tool.definition.parameters
    properties = schema.get('properties')
    if not isinstance(properties, Mapping):
        return {}, False
    return dict(properties), schema.get('additionalProperties') is False


def _is_string(schema: object) -> bool:
    return isinstance(schema, Mapping) and schema.get('type') == 'string'


def text_parameter(tool: Tool) -> str | None:
    """The name of the tool's only parameter when that parameter is a string (a text tool), else `None`."""
    properties, _ = _properties(tool)
    if len(properties) == 1:
        (name, schema), = properties.items()
        if _is_string(schema):
            return name
    return None


def first_arguments(tool: Tool, arguments: ToolArguments) -> ToolArguments:
    """The first step's arguments from the pipeline's: a text step gets its text parameter (unwrapped as a text
    tool would), any other step gets the pipeline's arguments unchanged (the pipeline exposes its schema)."""
    parameter = text_parameter(tool)
    if parameter is None:
        return arguments
    return {parameter: text_input(arguments, parameter)}


def arguments_for(tool: Tool, carry: Carry) -> ToolArguments:
    """The arguments `tool` is called with, for what the previous step (or adapter) handed on."""
    properties, closed = _properties(tool)
    if not properties and closed:
        return None  # the step takes no arguments: what came before only orders it
    single = next(iter(properties)) if len(properties) == 1 else None
    if carry.is_text:
        text = carry.text or ''
        if single is None:
            return text  # raw arguments: a JSON object text is parsed (and validated) by the step
        if _is_string(properties[single]):
            return {single: text}
        try:
            parsed = json.loads(text)
        except ValueError:
            return {single: text}  # the step's validation says why text does not fit
        return _for_single(single, properties, parsed)
    value = to_jsonable_python(carry.value, fallback=str)
    if single is None:
        return value if isinstance(value, dict) else compact(value)
    return _for_single(single, properties, value)


def _for_single(single: str, properties: Mapping[str, Any], value: Any) -> ToolArguments:
    if isinstance(value, dict) and value and value.keys() <= properties.keys():
        return value  # already the step's arguments
    if _is_string(properties[single]) and not isinstance(value, str):
        return {single: compact(value)}
    return {single: value}
