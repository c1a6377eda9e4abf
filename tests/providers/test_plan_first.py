"""Plan-first mode over the wire, the constrained plan schema, and the planning prompt built from the toolset."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import jsonschema
import pytest
from typing_extensions import TypedDict

from toolweave import Agent, Tool, Toolset, UserError, tool, validate_plan
from toolweave.models import ModelSettings, OpenAIChatModel, RetryPolicy
from toolweave.plan import constrained_grammar, constrained_schema, planning_instructions
from toolweave.plan._meta import plan_first_instructions
from toolweave.testing import FakeTool
from toolweave.tools import ToolMetadata

from .strict_server import StrictServer, serve

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures('allow_model_requests')]


class Product(TypedDict):
    name: str
    id: str
    price_usd: float


@tool
def search_products(query: str) -> list[Product]:
    """Search the catalog; each result has id, name and price_usd."""
    return [{'id': 'L1', 'name': 'Aero 14', 'price_usd': 1299}, {'id': 'L2', 'name': 'Nimbus 13', 'price_usd': 799}]


class Stock(TypedDict):
    product_id: str
    units: int


@tool
def get_stock(product_id: str) -> Stock:
    """Units in stock of a product."""
    return Stock(product_id=product_id, units={'L1': 12, 'L2': 0}[product_id])


@tool
def convert_currency(amount: float, from_currency: str, to_currency: str) -> float:
    """Convert money."""
    return round(amount * 0.92, 2)


TOOLS: list[Tool] = [search_products, get_stock, convert_currency]
DEFINITIONS = [t.definition for t in TOOLS]
GOOD_PLAN = {'steps': [{'id': 's1', 'tool': 'search_products', 'arguments': {'query': 'laptop'}},
                       {'id': 's2', 'tool': 'get_stock', 'for_each': '$ref:s1',
                        'arguments': {'product_id': '$item.id'}},
                       {'id': 's3', 'from': '$ref:s1', 'sort_by': 'price_usd', 'first': 1, 'keep': ['name']}],
             'output_steps': ['s2', 's3']}

Start = Callable[..., StrictServer]


@pytest.fixture
def strict(monkeypatch: pytest.MonkeyPatch) -> Iterator[Start]:
    for proxy in ('HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'all_proxy'):
        monkeypatch.delenv(proxy, raising=False)
    with contextlib.ExitStack() as stack:
        yield lambda script, **options: stack.enter_context(
            contextlib.contextmanager(serve)(StrictServer(script, **options)))


@pytest.fixture
async def connect() -> AsyncIterator[Callable[[StrictServer], OpenAIChatModel]]:
    made: list[OpenAIChatModel] = []

    def make(server: StrictServer) -> OpenAIChatModel:
        made.append(OpenAIChatModel('qwen', base_url=server.base_url, provider='llamacpp', api_key_env=None,
                                    retry=RetryPolicy(max_retries=0)))
        return made[-1]

    yield make
    for model in made:
        await model.aclose()


# --- the constrained schema rules out what validation would reject ------------------------------------------------

def _schema_errors(plan: Any, tools: list[Any] | None = None) -> list[str]:
    validator = jsonschema.Draft202012Validator(constrained_schema(tools or DEFINITIONS))
    return [error.message for error in validator.iter_errors(plan)]


def test_a_valid_plan_fits_the_constrained_schema() -> None:
    assert _schema_errors(GOOD_PLAN) == [] and validate_plan(GOOD_PLAN, Toolset(TOOLS)) == []


@pytest.mark.parametrize(('name', 'step'), [
    ('a reference to a later step', {'id': 's2', 'tool': 'get_stock', 'arguments': {'product_id': '$ref:s3'}}),
    ('a reference to itself', {'id': 's2', 'tool': 'get_stock', 'for_each': '$ref:s2',
                               'arguments': {'product_id': '$item.id'}}),
    ('$item outside for_each', {'id': 's2', 'tool': 'get_stock', 'arguments': {'product_id': '$item.id'}}),
    ('an unknown tool', {'id': 's2', 'tool': 'reviews', 'arguments': {'id': '$ref:s1'}}),
    ('an unknown argument', {'id': 's2', 'tool': 'get_stock', 'arguments': {'id': '$ref:s1'}}),
    ('a missing argument', {'id': 's2', 'tool': 'convert_currency', 'arguments': {'amount': 1}}),
    ('a wrong argument type', {'id': 's2', 'tool': 'convert_currency',
                               'arguments': {'amount': 'ten', 'from_currency': 'USD', 'to_currency': 'EUR'}}),
    ('a made-up reference', {'id': 's2', 'tool': 'get_stock', 'arguments': {'product_id': '$ref:null'}}),
])
def test_what_validation_rejects_the_schema_rejects(name: str, step: dict[str, Any]) -> None:
    plan = {'steps': [{'id': 's1', 'tool': 'search_products', 'arguments': {'query': 'laptop'}}, step]}
    assert validate_plan(plan, Toolset(TOOLS)) != [], name
    assert _schema_errors(plan) != [], name


def test_output_steps_name_only_the_plans_own_steps() -> None:
    plan = {'steps': [{'id': 's1', 'tool': 'search_products', 'arguments': {'query': 'laptop'}}],
            'output_steps': ['s2']}
    assert validate_plan(plan, Toolset(TOOLS)) != [] and _schema_errors(plan) != []
    assert _schema_errors({**plan, 'output_steps': ['s1']}) == []


@pytest.mark.parametrize(('name', 'step', 'fits'), [
    ('a field of the items, per item', {'id': 's2', 'tool': 'get_stock', 'for_each': '$ref:s1',
                                        'arguments': {'product_id': '$item.id'}}, True),
    ('a field no output has', {'id': 's2', 'tool': 'get_stock', 'for_each': '$ref:s1',
                               'arguments': {'product_id': '$item.sku'}}, False),
    ('a whole list where a string is wanted', {'id': 's2', 'tool': 'get_stock',
                                               'arguments': {'product_id': '$ref:s1'}}, False),
    ('a number field where a number is wanted', {'id': 's2', 'tool': 'convert_currency', 'arguments': {
        'amount': '$ref:s1[0].price_usd', 'from_currency': 'USD', 'to_currency': 'EUR'}}, True),
    ('a string field where a number is wanted', {'id': 's2', 'tool': 'convert_currency', 'arguments': {
        'amount': '$ref:s1[0].name', 'from_currency': 'USD', 'to_currency': 'EUR'}}, False),
    ('for_each over a number', {'id': 's2', 'tool': 'get_stock', 'for_each': '$ref:s1[0].price_usd',
                                'arguments': {'product_id': '$item'}}, False),
])
def test_with_declared_outputs_references_name_real_fields_of_the_right_type(name: str, step: dict[str, Any],
                                                                              fits: bool) -> None:
    plan = {'steps': [{'id': 's1', 'tool': 'search_products', 'arguments': {'query': 'laptop'}}, step]}
    assert (_schema_errors(plan, TOOLS) == []) is fits, name
    if fits:
        assert validate_plan(plan, Toolset(TOOLS)) == [], name


def test_for_each_and_when_are_optional_and_plans_are_bounded() -> None:
    schema = constrained_schema(DEFINITIONS, max_steps=3)
    first = schema['$defs']['s1']['anyOf'][0]
    assert first['required'] == ['id', 'tool', 'arguments'] and 'for_each' not in first['properties']
    assert len(schema['anyOf']) == 3
    too_long = {'steps': [{'id': f's{n}', 'tool': 'search_products', 'arguments': {'query': 'x'}}
                          for n in range(1, 5)]}
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(too_long))


# --- the planning prompt shows only the tools there are ------------------------------------------------------------

def test_the_planning_example_calls_the_real_tools_and_validates() -> None:
    text = planning_instructions(tools=TOOLS)
    example = json.loads(text.split('Example: ', 1)[1])
    assert example['steps'] == [  # search_products returns a list of objects: the example loops over it
        {'id': 'a', 'tool': 'search_products', 'arguments': {'query': '...'}},
        {'id': 'b', 'tool': 'get_stock', 'for_each': '$ref:a', 'arguments': {'product_id': '$item.id'}}]
    assert validate_plan(example, Toolset(TOOLS)) == []
    assert 'reviews' not in text and 'price' not in text.split('Example: ')[1]
    from_definitions = json.loads(planning_instructions(tools=DEFINITIONS).split('Example: ', 1)[1])
    assert [step['tool'] for step in from_definitions['steps']] == ['search_products', 'get_stock']


def test_without_a_known_output_the_example_passes_nothing_on() -> None:
    @tool
    def lookup(query: str) -> list[dict[str, Any]]:
        """Look up."""
        return []

    example = json.loads(planning_instructions(tools=[lookup, get_stock]).split('Example: ', 1)[1])
    assert example['steps'][1] == {'id': 'b', 'tool': 'get_stock', 'arguments': {'product_id': '...'}}
    assert validate_plan(example, Toolset([lookup, get_stock])) == []


def test_plan_first_instructions_list_the_tools_as_signatures() -> None:
    text = plan_first_instructions(DEFINITIONS)
    assert '- convert_currency(amount: number, from_currency: string, to_currency: string): Convert money.' in text
    assert '"s1", "s2"' in text


# --- plan-first mode -----------------------------------------------------------------------------------------------

async def test_plan_first_on_llama_server_sends_the_plan_grammar_then_asks_for_the_answer(
        strict: Start, connect: Callable[[StrictServer], OpenAIChatModel]) -> None:
    server = strict([json.dumps(GOOD_PLAN), 'Aero 14 is in stock; the cheapest is Nimbus 13.'],
                    flavour='llama-server')
    agent = Agent(connect(server), tools=TOOLS, tool_planning=True, plan_first=True)
    assert agent.plan_first == 'response_format'
    result = await agent.run('Which laptops are in stock, and which is cheapest?')
    assert result.output == 'Aero 14 is in stock; the cheapest is Nimbus 13.'
    assert result.usage.llm_calls == 2 and len(result.plan_runs) == 1
    assert [s.status for s in result.plan_runs[0].steps] == ['succeeded'] * 3
    first, second = server.requests
    assert 'tools' not in first and 'response_format' not in first
    assert first['grammar'] == constrained_grammar(TOOLS)
    assert '- get_stock(product_id: string)' in first['messages'][0]['content']
    assert 'tools' not in second and 'response_format' not in second and 'grammar' not in second
    assert second['messages'][-1]['role'] == 'tool' and 'Nimbus 13' in second['messages'][-1]['content']


async def test_plan_first_keeps_the_model_s_own_extra_body_beside_the_grammar(
        strict: Start) -> None:
    server = strict([json.dumps(GOOD_PLAN), 'Done.'], flavour='llama-server')
    async with OpenAIChatModel('qwen', base_url=server.base_url, provider='llamacpp', api_key_env=None,
                               settings=ModelSettings(extra_body={'top_k': 20})) as model:
        agent = Agent(model, tools=TOOLS, tool_planning=True, plan_first=True,
                      settings=ModelSettings(extra_body={'min_p': 0.05}))
        await agent.run('Which laptops are in stock?')
    first, second = server.requests
    # The agent's extra_body replaces the model's as a whole (as everywhere); the grammar joins both.
    assert first['top_k'] == 20 and first['min_p'] == 0.05 and 'grammar' in first
    assert 'top_k' not in second and second['min_p'] == 0.05 and 'grammar' not in second


async def test_plan_first_on_another_local_server_sends_the_constrained_schema(strict: Start) -> None:
    server = strict([json.dumps(GOOD_PLAN), 'Done.'], flavour='llama-server')
    async with OpenAIChatModel('qwen', base_url=server.base_url, provider='openai-compatible',
                               api_key_env=None) as model:
        agent = Agent(model, tools=TOOLS, tool_planning=True, plan_first=True)
        assert agent.plan_first == 'response_format' and not model.takes_grammar
        result = await agent.run('Which laptops are in stock?')
    assert result.output == 'Done.' and len(result.plan_runs) == 1
    first = server.requests[0]
    assert 'grammar' not in first and first['response_format']['json_schema']['schema'] == constrained_schema(TOOLS)


async def test_an_invalid_plan_gets_one_more_try_then_the_run_goes_tool_by_tool(
        strict: Start, connect: Callable[[StrictServer], OpenAIChatModel]) -> None:
    # What the plan grammar cannot rule out: a JMESPath expression that does not parse.
    bad = json.dumps({'steps': [{'id': 's1', 'tool': 'search_products', 'arguments': {'query': 'laptop'}},
                                {'id': 's2', 'from': '$ref:s1', 'select': '[?price_usd <'}]})
    server = strict([bad, bad, {'tool': 'get_stock', 'arguments': {'product_id': 'L1'}}, 'L1: 12 units.'],
                    flavour='llama-server')
    agent = Agent(connect(server), tools=TOOLS, tool_planning=True, plan_first='response_format')
    result = await agent.run('Stock of L1?')
    assert result.output == 'L1: 12 units.' and result.plan_runs == ()
    assert ['grammar' in r for r in server.requests] == [True, True, False, False]
    problem = server.requests[1]['messages'][-1]['content']
    assert problem.startswith('Error: Plan execution failed:') and "'s2'" in problem and len(problem) < 1200
    assert [t['function']['name'] for t in server.requests[2]['tools']] == [
        'search_products', 'get_stock', 'convert_currency', 'execute_tool_plan']


async def test_plan_first_by_tool_choice_forces_the_plan_tool(
        strict: Start, connect: Callable[[StrictServer], OpenAIChatModel]) -> None:
    server = strict([{'tool': 'execute_tool_plan', 'arguments': GOOD_PLAN}, 'Done.'],
                    flavour='llama-cpp-python')
    agent = Agent(connect(server), tools=TOOLS, tool_planning=True, plan_first='tool_choice')
    result = await agent.run('Which laptops are in stock?')
    assert result.output == 'Done.' and len(result.plan_runs) == 1
    assert server.requests[0]['tool_choice'] == {'type': 'function', 'function': {'name': 'execute_tool_plan'}}
    assert server.requests[1]['tool_choice'] == 'none'


def test_plan_first_needs_tool_planning_and_a_known_mode() -> None:
    model = OpenAIChatModel('m', base_url='http://127.0.0.1:1/v1', provider='llamacpp')
    with pytest.raises(UserError, match='pass tool_planning=True too'):
        Agent(model, tools=TOOLS, plan_first=True)
    with pytest.raises(UserError, match="plan_first must be True, False, 'tool_choice' or 'response_format'"):
        Agent(model, tools=TOOLS, tool_planning=True, plan_first='grammar')  # type: ignore[arg-type]
    hosted = OpenAIChatModel('gpt-4o-mini', api_key='k')
    assert Agent(hosted, tools=TOOLS, tool_planning=True, plan_first=True).plan_first == 'tool_choice'


async def test_plan_first_sends_the_schema_when_the_grammar_would_be_too_large(
        strict: Start, connect: Callable[[StrictServer], OpenAIChatModel]) -> None:
    def returning(index: int) -> Tool:
        fields = {f'f{index}_{k}': {'type': 'number'} for k in range(4)}
        return FakeTool(f't{index}', {f'f{index}_0': 1.0}, parameters={
            'type': 'object', 'properties': {'x': {'type': 'number'}}, 'required': ['x']},
            metadata=ToolMetadata(extra={'output_schema': {'type': 'object', 'properties': fields}}))

    tools = [returning(i) for i in range(40)]  # 81 kinds of step output: a trie of 81^3 prefixes
    plan = {'steps': [{'id': 's1', 'tool': 't0', 'arguments': {'x': 1}}]}
    server = strict([json.dumps(plan), 'Done.'], flavour='llama-server')
    agent = Agent(connect(server), tools=tools, tool_planning=True, plan_first=True)
    result = await agent.run('Run t0.')
    assert result.output == 'Done.' and len(result.plan_runs) == 1
    first = server.requests[0]
    assert 'grammar' not in first and first['response_format']['json_schema']['schema'] == constrained_schema(tools)
