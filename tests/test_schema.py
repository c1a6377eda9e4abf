"""Signature + docstring -> JSON schema; docstring styles; error text; the docstring examples of function tools."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from toolweave import ToolCallContext, UserError, tool
from toolweave.tools import _schema
from toolweave.tools._schema import clean_schema, parse_docstring


class Color(enum.Enum):
    RED = 'red'
    BLUE = 'blue'


class Address(BaseModel):
    """A postal address."""

    street: str
    title: str = ''  # a property called `title` must survive the cleaning


@dataclasses.dataclass
class Size:
    width: int
    height: int = 1


def _walk(node: Any, parent_is_names: bool = False) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if not parent_is_names:
                yield key, value
            yield from _walk(value, key in ('properties', '$defs'))
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)


def test_rich_types_schema() -> None:
    @tool
    def rich(
        color: Color,
        address: Address,
        sizes: list[Size],
        mode: Literal['fast', 'slow'] = 'fast',
        note: str | None = None,
        weights: dict[str, float] | None = None,
        tags: tuple[str, ...] = (),
    ) -> None:
        """Use every kind of type."""

    schema = rich.definition.parameters
    assert list(schema) == ['type', 'properties', 'required', 'additionalProperties', '$defs']
    assert schema['required'] == ['color', 'address', 'sizes']
    props = schema['properties']
    assert props['color'] == {'$ref': '#/$defs/Color'}
    assert props['sizes'] == {'items': {'$ref': '#/$defs/Size'}, 'type': 'array'}
    assert props['mode'] == {'default': 'fast', 'enum': ['fast', 'slow'], 'type': 'string'}
    assert props['note'] == {'anyOf': [{'type': 'string'}, {'type': 'null'}], 'default': None}
    assert props['weights']['anyOf'][0] == {'additionalProperties': {'type': 'number'}, 'type': 'object'}
    assert schema['$defs']['Color'] == {'enum': ['red', 'blue'], 'type': 'string'}
    assert schema['$defs']['Address']['properties']['title'] == {'default': '', 'type': 'string'}
    assert schema['$defs']['Address']['description'] == 'A postal address.'
    assert schema['$defs']['Size']['required'] == ['width']
    assert not [key for key, _ in _walk(schema) if key == 'title']  # no pydantic title noise anywhere


@pytest.mark.anyio
async def test_rich_types_validate() -> None:
    @tool
    def rich(color: Color, address: Address, sizes: list[Size], mode: Literal['fast', 'slow'] = 'fast') -> str:
        assert isinstance(color, Color) and isinstance(address, Address) and isinstance(sizes[0], Size)
        return f'{color.value} {address.street} {sizes[0].width}x{sizes[0].height} {mode}'

    ok = await rich.call({'color': 'red', 'address': {'street': 'Main'}, 'sizes': [{'width': 2}]})
    assert ok.output == 'red Main 2x1 fast'
    bad = await rich.call({'color': 'green', 'address': {}, 'sizes': [{'width': 2}], 'mode': 'medium'})
    assert bad.error is not None
    assert "color: Input should be 'red' or 'blue', got \"green\"" in bad.error
    assert 'address.street: Field required' in bad.error
    assert "mode: Input should be 'fast' or 'slow', got \"medium\"" in bad.error


def test_annotated_field_description_wins_over_docstring() -> None:
    @tool
    def search(query: Annotated[str, Field(description='From Field', min_length=1)], limit: int = 5) -> None:
        """Search.

        Args:
            query: From docstring.
            limit: How many results.
        """

    props = search.definition.parameters['properties']
    assert props['query'] == {'description': 'From Field', 'minLength': 1, 'type': 'string'}
    assert props['limit'] == {'default': 5, 'description': 'How many results.', 'type': 'integer'}


def test_parameter_names_that_clash_with_pydantic_are_fine() -> None:
    @tool
    def clash(json: str, model_config: int, schema: bool, _private: str = 'x') -> str:
        return f'{json}{model_config}{schema}{_private}'

    assert list(clash.definition.parameters['properties']) == ['json', 'model_config', 'schema', '_private']
    assert clash.call_sync({'json': 'j', 'model_config': 1, 'schema': True}).output == 'j1Truex'


def test_positional_only_and_keyword_only_parameters() -> None:
    @tool
    def mixed(a: int, /, b: int, *, c: int = 3) -> str:
        return f'{a}{b}{c}'

    assert mixed.call_sync({'a': 1, 'b': 2}).output == '123'
    assert mixed.definition.parameters['required'] == ['a', 'b']


GOOGLE = """Fetch the weather.

    Looks the city up first.

    Args:
        city: The city name.
            Any language.
        days (int): How many days.

    Returns:
        The forecast.
    """

NUMPY = """Fetch the weather.

    Looks the city up first.

    Parameters
    ----------
    city : str
        The city name.
    days : int
        How many days.

    Returns
    -------
    str
        The forecast.
    """

SPHINX = """Fetch the weather.

    Looks the city up first.

    :param city: The city name.
    :param days: How many days.
    :returns: The forecast.
    """


@pytest.mark.parametrize('doc', [GOOGLE, NUMPY, SPHINX], ids=['google', 'numpy', 'sphinx'])
def test_docstring_styles(doc: str) -> None:
    def weather(city: str, days: int = 1) -> str:
        return city

    weather.__doc__ = doc
    built = tool(weather)
    assert built.description == 'Fetch the weather.\n\nLooks the city up first.'
    props = built.definition.parameters['properties']
    assert props['city']['description'].startswith('The city name.')
    assert props['days']['description'] == 'How many days.'


def test_google_continuation_lines_are_kept() -> None:
    assert parse_docstring(GOOGLE).params['city'] == 'The city name.\nAny language.'


def test_plain_docstring_and_no_docstring() -> None:
    assert parse_docstring('Just a summary.') == _schema.DocstringInfo('Just a summary.', {})
    assert parse_docstring(None) == _schema.DocstringInfo('', {})
    assert parse_docstring('   ') == _schema.DocstringInfo('', {})


def test_docstring_parsing_does_not_log(caplog: pytest.LogCaptureFixture) -> None:
    parse_docstring(SPHINX)
    assert not [r for r in caplog.records if r.name.startswith('griffe')]


def test_clean_schema_keeps_property_names() -> None:
    raw = {'title': 'M', 'type': 'object', 'properties': {'title': {'title': 'Title', 'type': 'string'}},
           '$defs': {'title': {'title': 'X', 'type': 'object'}}, 'anyOf': [{'title': 'A'}]}
    assert clean_schema(raw) == {'type': 'object', 'properties': {'title': {'type': 'string'}},
                                 '$defs': {'title': {'type': 'object'}}, 'anyOf': [{}]}


def test_context_in_a_union_with_none_is_injected() -> None:
    @tool
    def optional_ctx(x: int, ctx: ToolCallContext | None = None) -> str:
        return str(ctx is not None and ctx.is_empty)

    assert list(optional_ctx.definition.parameters['properties']) == ['x']
    assert optional_ctx.call_sync({'x': 1}).output == 'True'


def test_schema_errors_list_every_problem_once() -> None:
    def bad(a, *rest: int, cb: Any = None, fn: Any = None) -> None:  # type: ignore[no-untyped-def]
        pass

    with pytest.raises(UserError) as info:
        tool(bad)
    assert str(info.value).count('\n  - ') == 2


# --- docstring examples of this part's public entry points run and print what they show ---


