"""The plan grammar for llama.cpp (`constrained_grammar`): every plan it admits validates, the plans a model should
write are admitted, and what validation would reject is not, above all a reference whose type is that of another
step's tool, which the constrained JSON schema cannot rule out."""

from __future__ import annotations

import json
import random
from typing import Any, Literal

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from toolweave import Tool, Toolset, tool, validate_plan
from toolweave.plan import SchemaTooLarge, constrained_grammar
from toolweave.plan._plan_grammar import MAX_GRAMMAR_CHARS
from toolweave.testing import FakeTool
from toolweave.tools import ToolMetadata

from .gbnf import Grammar

pytestmark = pytest.mark.timeout(120)


class Weather(TypedDict):
    city: str
    temp_c: float
    sky: str


class Product(TypedDict):
    id: str
    name: str
    price_usd: float


class Stock(TypedDict):
    product_id: str
    units: int


@tool
def get_weather(city: str) -> Weather:
    """Weather in a city."""
    return {'city': city, 'temp_c': 18, 'sky': 'cloudy'}


@tool
def to_fahrenheit(celsius: float) -> float:
    """Celsius to Fahrenheit."""
    return celsius * 9 / 5 + 32


@tool
def convert_currency(amount: float, from_currency: str, to_currency: str) -> float:
    """Convert money."""
    return amount


@tool
def search_products(query: str) -> list[Product]:
    """Search the catalog."""
    return []


@tool
def get_stock(product_id: str) -> Stock:
    """Units in stock."""
    return {'product_id': product_id, 'units': 1}


TOOLS: list[Tool] = [get_weather, to_fahrenheit, convert_currency, search_products, get_stock]


class Address(BaseModel):
    street: str
    zip: int | None = None


class Order(BaseModel):
    id: str
    lines: list[int]
    address: Address
    status: Literal['open', 'shipped']


@tool
def find_order(order_id: str, include_lines: bool = False) -> Order:
    """Nested output: a model in a model, a list of integers, a Literal."""
    raise NotImplementedError


@tool
def ship(order_id: str, address: Address, express: bool, priority: Literal['low', 'high'] = 'low') -> str:
    """A model argument, an enum, an optional argument; text out (unknown shape)."""
    raise NotImplementedError


@tool
def ping() -> bool:
    """No arguments at all."""
    raise NotImplementedError


@tool
def tag(labels: list[str], weights: dict[str, float] | None = None) -> list[str]:
    """A list argument and a free-form object."""
    raise NotImplementedError


UNDECLARED = FakeTool('lookup', {'any': 'thing'}, parameters={
    'type': 'object', 'properties': {'key': {'type': 'string'}, 'value': {}}, 'required': ['key']})
"""A tool that declares no output: references into it may name any path."""
MCP_LIKE = FakeTool('remote', {'rows': [{'n': 1}]}, parameters={
    'type': 'object', 'properties': {'limit': {'type': 'integer'}}, 'required': []},
    metadata=ToolMetadata(extra={'output_schema': {
        'type': 'object', 'properties': {'rows': {'type': 'array', 'items': {
            'type': 'object', 'properties': {'n': {'type': 'integer'}, 'label': {'type': ['string', 'null']}}}}},
        'required': ['rows']}}))
"""An MCP-style tool: a declared output schema with a list of objects in a field."""

TOOLSETS: dict[str, list[Any]] = {
    'five typed tools': TOOLS,
    'nested models, enums, no arguments': [find_order, ship, ping, tag],
    'undeclared and MCP-declared outputs': [UNDECLARED, MCP_LIKE, get_stock],
}


@pytest.fixture(scope='module')
def grammar() -> Grammar:
    return Grammar(constrained_grammar(TOOLS))


def _only_expression_problems(problems: list[str]) -> bool:
    # A grammar cannot check JMESPath: the text of a select step or a `when` is left to validation.
    return all('JMESPath' in problem for problem in problems)


@pytest.mark.parametrize('name', list(TOOLSETS))
def test_every_plan_the_grammar_admits_validates(name: str) -> None:
    tools = TOOLSETS[name]
    grammar = Grammar(constrained_grammar(tools))
    rng = random.Random(7)
    kinds: set[str] = set()
    for _ in range(300):
        text = grammar.sample(rng)
        assert grammar.matches(text)  # the reader agrees with itself
        plan = json.loads(text)
        problems = validate_plan(text, Toolset(tools))
        assert _only_expression_problems(problems), (problems, text)
        kinds.update('for_each' if 'for_each' in step else 'tool' if 'tool' in step else
                     'select' if 'select' in step else 'shape' for step in plan['steps'])
    assert kinds == {'tool', 'for_each', 'select', 'shape'}  # the samples reached every kind of step


@pytest.mark.parametrize('plan', [
    {'steps': [{'id': 's1', 'tool': 'get_weather', 'arguments': {'city': 'Tokyo'}},
               {'id': 's2', 'tool': 'to_fahrenheit', 'arguments': {'celsius': '$ref:s1.temp_c'}}],
     'output_steps': ['s2']},
    {'steps': [{'id': 's1', 'tool': 'search_products', 'arguments': {'query': 'laptop'}},
               {'id': 's2', 'tool': 'get_stock', 'for_each': '$ref:s1', 'arguments': {'product_id': '$item.id'}}]},
    {'steps': [{'id': 's1', 'tool': 'search_products', 'arguments': {'query': 'laptop'}},
               {'id': 's2', 'from': '$ref:s1', 'sort_by': 'price_usd', 'first': 1, 'keep': ['name', 'price_usd']},
               {'id': 's3', 'tool': 'convert_currency',
                'arguments': {'amount': '$ref:s2[0].price_usd', 'from_currency': 'USD', 'to_currency': 'EUR'}}],
     'output_steps': ['s2', 's3']},
    {'steps': [{'id': 's1', 'tool': 'get_weather', 'arguments': {'city': 'Lima'}},
               {'id': 's2', 'tool': 'get_weather', 'arguments': {'city': 'Oslo'}},
               {'id': 's3', 'from': '$ref:s1', 'select': 'temp_c'}]},
    {'steps': [{'id': 's1', 'tool': 'convert_currency',
                'arguments': {'amount': 250, 'from_currency': 'USD', 'to_currency': 'EUR'}}]},
], ids=['a field of the right type', 'for_each over a list', 'shaped, then an item field',
        'a select step', 'literal arguments only'])
@pytest.mark.parametrize('indent', [None, 2], ids=['compact', 'pretty'])
def test_the_grammar_admits_the_plans_a_model_should_write(grammar: Grammar, plan: dict[str, Any],
                                                           indent: int | None) -> None:
    assert validate_plan(plan, Toolset(TOOLS)) == []
    assert grammar.matches(json.dumps(plan, indent=indent))


def _plan(*steps: dict[str, Any], output_steps: list[str] | None = None) -> dict[str, Any]:
    return {'steps': list(steps), **({'output_steps': output_steps} if output_steps is not None else {})}


SEARCH = {'id': 's1', 'tool': 'search_products', 'arguments': {'query': 'laptop'}}
STOCK = {'id': 's2', 'tool': 'get_stock', 'arguments': {'product_id': '$ref:s1[0].id'}}


@pytest.mark.parametrize('plan', [
    # What the constrained JSON schema let through (Qwen2.5-Coder 1.5B wrote these): the type of another step.
    _plan(SEARCH, STOCK, {'id': 's3', 'tool': 'convert_currency', 'arguments': {
        'amount': '$ref:s2', 'from_currency': 'USD', 'to_currency': 'EUR'}}),
    _plan(SEARCH, STOCK, {'id': 's3', 'tool': 'to_fahrenheit', 'arguments': {'celsius': '$ref:s2[0].price_usd'}}),
    _plan(SEARCH, STOCK, {'id': 's3', 'tool': 'to_fahrenheit', 'arguments': {'celsius': '$ref:s1.units'}}),
    _plan(SEARCH, {'id': 's2', 'tool': 'get_stock', 'for_each': '$ref:s1', 'arguments': {'product_id': '$item.units'}}),
    _plan(SEARCH, {'id': 's2', 'from': '$ref:s1', 'sort_by': 'price', 'first': 1}),
    # What the schema ruled out too.
    _plan({'id': 's1', 'tool': 'get_stock', 'arguments': {'product_id': '$ref:s2'}}, STOCK),
    _plan({'id': 's1', 'tool': 'get_stock', 'arguments': {'product_id': '$item.id'}}),
    _plan({'id': 's1', 'tool': 'get_exchange_rate', 'arguments': {'currency': 'EUR'}}),
    _plan({'id': 's1', 'tool': 'get_weather', 'arguments': {'city': 'Paris', 'units': 'metric'}}),
    _plan({'id': 's1', 'tool': 'convert_currency', 'arguments': {'amount': 250, 'from_currency': 'USD'}}),
    _plan({'id': 's1', 'tool': 'convert_currency', 'arguments': {
        'amount': '250', 'from_currency': 'USD', 'to_currency': 'EUR'}}),
    _plan({'id': 's1', 'tool': 'get_weather', 'arguments': {'city': '$Paris'}}),
    _plan(SEARCH, output_steps=['s2']),
    _plan({**SEARCH, 'id': 'search'}),
    _plan(*[{**SEARCH, 'id': f's{n}'} for n in range(1, 6)]),
    _plan(),
], ids=['a whole object for a number', 'indexing an object', 'a field of another tool', 'an item field of another tool',
        'a sort field the items lack', 'a later step', '$item outside for_each', 'an unknown tool',
        'an unknown argument', 'a missing argument', 'text for a number', 'a literal that reads as a reference',
        'output_steps naming no step', 'an id that is not positional', 'five steps', 'no steps'])
def test_the_grammar_refuses_what_validation_would_reject_and_more(grammar: Grammar, plan: dict[str, Any]) -> None:
    assert not grammar.matches(json.dumps(plan))
    assert not grammar.matches(json.dumps(plan, indent=2))


def test_two_tools_with_the_same_output_share_their_rules() -> None:
    one = constrained_grammar([get_weather, to_fahrenheit])

    @tool
    def to_kelvin(celsius: float) -> float:
        """Celsius to Kelvin."""
        return celsius + 273.15

    two = constrained_grammar([get_weather, to_fahrenheit, to_kelvin])
    # One more step rule per position and kind of step, not a trie twice as wide.
    assert len(two) < 1.5 * len(one)


def test_a_toolset_too_varied_for_the_trie_says_so() -> None:
    def returning(index: int) -> Tool:
        fields = {f'f{index}_{k}': {'type': 'number'} for k in range(4)}
        return FakeTool(f't{index}', {}, parameters={
            'type': 'object', 'properties': {'x': {'type': 'number'}}, 'required': ['x']},
            metadata=ToolMetadata(extra={'output_schema': {'type': 'object', 'properties': fields}}))

    with pytest.raises(SchemaTooLarge, match='plan grammar for these tools would'):
        constrained_grammar([returning(i) for i in range(40)])


def test_a_huge_input_schema_makes_the_grammar_too_large_not_slow() -> None:
    # 2,000 optional arguments (fewer parts than the schema check's limit): each position's rules are linear in
    # them, and the whole grammar would pass the size bound.
    wide = FakeTool('wide', {}, parameters={'type': 'object', 'properties': {
        f'p{i}': {'type': 'string'} for i in range(2000)}, 'required': []})
    with pytest.raises(SchemaTooLarge, match=f'larger than {MAX_GRAMMAR_CHARS:,} characters'):
        constrained_grammar([wide, get_weather])


def test_enum_values_that_read_as_references_are_left_out() -> None:
    mode = FakeTool('mode', 'ok', parameters={'type': 'object', 'properties': {
        'm': {'enum': ['$ref:s1', 'plain', 3]}}, 'required': ['m']})
    grammar = Grammar(constrained_grammar([mode]))
    assert grammar.matches(json.dumps(_plan({'id': 's1', 'tool': 'mode', 'arguments': {'m': 'plain'}})))
    assert grammar.matches(json.dumps(_plan({'id': 's1', 'tool': 'mode', 'arguments': {'m': 3}})))
    assert not grammar.matches(json.dumps(_plan({'id': 's1', 'tool': 'mode', 'arguments': {'m': '$ref:s1'}})))


def test_max_steps_bounds_the_plan() -> None:
    grammar = Grammar(constrained_grammar(TOOLS, max_steps=2))
    two = _plan(SEARCH, STOCK)
    assert grammar.matches(json.dumps(two))
    assert not grammar.matches(json.dumps(_plan(SEARCH, STOCK, {**STOCK, 'id': 's3'})))
