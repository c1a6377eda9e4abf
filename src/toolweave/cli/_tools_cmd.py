"""`toolweave tools` command: list the tools a `module:attribute` resolves to, for people or as JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from toolweave.cli._app import app
from toolweave.cli._common import ToolsOption, load_tools
from toolweave.tools import ToolDefinition

__all__ = ('definition_json', 'schema_type', 'tools_command')


@app.command('tools')
def tools_command(
    tools: ToolsOption,
    as_json: Annotated[bool, typer.Option('--json', help='Print the tool definitions as JSON.')] = False,
) -> None:
    """List tools with their descriptions and parameters."""
    toolset = load_tools(tools)
    definitions = toolset.definitions()
    if as_json:
        typer.echo(json.dumps([definition_json(d) for d in definitions], indent=2, ensure_ascii=False, default=str))
        return
    console = Console()
    if not definitions:
        console.print(f'{escape(tools)} resolves to no tools.')
        return
    console.print(f'[bold]{len(definitions)} tool{"s" if len(definitions) != 1 else ""}[/bold] from {escape(tools)}')
    for definition in definitions:
        console.print()
        _print_definition(console, definition)


def definition_json(definition: ToolDefinition) -> dict[str, Any]:
    """A tool definition as plain JSON data: name, description, parameters, metadata."""
    metadata = definition.metadata
    return {
        'name': definition.name,
        'description': definition.description,
        'parameters': dict(definition.parameters),
        'metadata': {
            'return_direct': metadata.return_direct,
            'requires_approval': metadata.requires_approval,
            'category': metadata.category,
            'extra': dict(metadata.extra),
        },
    }


def _print_definition(console: Console, definition: ToolDefinition) -> None:
    flags = [name for name, on in (('return direct', definition.metadata.return_direct),
                                   ('requires approval', definition.metadata.requires_approval)) if on]
    if definition.metadata.category:
        flags.append(f'category: {definition.metadata.category}')
    suffix = f'  [dim]({escape(", ".join(flags))})[/dim]' if flags else ''
    console.print(f'[bold cyan]{escape(definition.name)}[/bold cyan]{suffix}')
    if definition.description:
        console.print(escape(definition.description))
    properties = definition.parameters.get('properties') or {}
    if not isinstance(properties, Mapping) or not properties:
        console.print('[dim]No parameters.[/dim]')
        return
    required = set(definition.parameters.get('required') or ())
    table = Table(show_header=True, header_style='bold', show_lines=False)
    for column in ('Parameter', 'Type', 'Required', 'Default', 'Description'):
        table.add_column(column, overflow='fold')
    for name, schema in properties.items():
        schema = schema if isinstance(schema, Mapping) else {}
        default = json.dumps(schema['default'], default=str) if 'default' in schema else ''
        table.add_row(escape(str(name)), escape(schema_type(schema)), 'yes' if name in required else 'no',
                      escape(default), escape(str(schema.get('description', ''))))
    console.print(table)


def schema_type(schema: Mapping[str, Any]) -> str:
    """A short readable type for a JSON schema: `string`, `integer | null`, `array[string]`, `one of 'a', 'b'`."""
    if 'enum' in schema:
        return 'one of ' + ', '.join(json.dumps(v, default=str) for v in schema['enum'])
    if 'const' in schema:
        return json.dumps(schema['const'], default=str)
    if '$ref' in schema:
        return str(schema['$ref']).rsplit('/', 1)[-1]
    for combiner in ('anyOf', 'oneOf', 'allOf'):
        if combiner in schema and isinstance(schema[combiner], list):
            joiner = ' & ' if combiner == 'allOf' else ' | '
            return joiner.join(schema_type(s) for s in schema[combiner] if isinstance(s, Mapping))
    kind = schema.get('type')
    if isinstance(kind, list):
        return ' | '.join(str(k) for k in kind)
    if kind == 'array':
        items = schema.get('items')
        return f'array[{schema_type(items)}]' if isinstance(items, Mapping) and items else 'array'
    if kind == 'object' and isinstance(schema.get('additionalProperties'), Mapping):
        return f'object[string, {schema_type(schema["additionalProperties"])}]'
    return str(kind) if kind else 'any'
