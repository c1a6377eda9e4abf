"""Plans check themselves against what tools promise: literal arguments against each tool's input schema,
references against the output schema of the step they read, before anything runs."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, field_validator

import toolweave
from toolweave import FunctionTool, PlanValidationError, ToolMetadata, tool, validate_plan
from toolweave.plan import Retries
from toolweave.testing import FakeTool
from toolweave.tools import ArgumentsError

pytestmark = pytest.mark.anyio


class Address(BaseModel):
    city: str
    zip: str


class User(BaseModel):
    name: str
    age: int
    tags: list[str]
    address: Address


@tool
def get_user(user_id: int) -> User:
    """Find a user."""
    return User(name='Ada', age=36, tags=['admin'], address=Address(city='Paris', zip='75001'))


@tool
def get_weather(city: str, days: int = 1, unit: Literal['c', 'f'] = 'c') -> dict[str, float]:
    """Weather for a city."""
    return {'temp': 18.0}


def _send(to: str, count: int, flag: bool = False) -> str:
    """Send something."""
    return f'{to} x{count}'


send = FunctionTool(_send, name='send')


@tool
def text_tool(query: str) -> str:
    """Returns text, which may hold JSON: its shape is unknown."""
    return '{"anything": 1}'


TOOLS = [get_user, get_weather, send, text_tool]


def check(*steps: dict[str, Any]) -> list[str]:
    return validate_plan({'steps': list(steps)}, TOOLS)


def test_a_wrong_argument_name_is_reported_with_the_accepted_ones() -> None:
    assert check({'id': 'w', 'tool': 'get_weather', 'arguments': {'town': 'Paris'}}) == [
        "steps[0] (id 'w'): arguments.city: Field required.",
        "steps[0] (id 'w'): arguments.town: Unexpected argument, got \"Paris\". Tool 'get_weather' takes: city, days, "
        'unit.',
    ]


def test_literal_types_and_enums_are_checked_but_text_a_tool_coerces_is_let_through() -> None:
    assert check({'id': 'a', 'tool': 'get_weather', 'arguments': {'city': 'Oslo', 'days': 'three', 'unit': 'k'}}) == [
        "steps[0] (id 'a'): arguments.days: Input should be a valid integer, unable to parse string as an integer, "
        'got "three".',
        "steps[0] (id 'a'): arguments.unit: Input should be 'c' or 'f', got \"k\".",
    ]
    # what pydantic's lax validation accepts at run time passes here too
    assert check({'id': 'a', 'tool': 'send', 'arguments': {'to': 'x', 'count': '5', 'flag': 'true'}}) == []
    assert check({'id': 'a', 'tool': 'send', 'arguments': {'to': 'x', 'count': 5.0}}) == []


async def test_a_plan_with_a_wrong_literal_runs_nothing() -> None:
    probe = FakeTool('probe')
    with pytest.raises(PlanValidationError):
        await toolweave.run_plan({'steps': [{'id': 'p', 'tool': 'probe', 'arguments': {}},
                                            {'id': 'w', 'tool': 'get_weather', 'arguments': {'town': 'x'}}]},
                                 [*TOOLS, probe])
    assert probe.calls == []


def test_a_reference_that_cannot_be_bound_is_reported_once_not_again_as_a_wrong_type() -> None:
    @tool
    def rank(items: list[dict[str, Any]], best: dict[str, Any]) -> str:
        """Rank objects."""
        return 'ranked'

    assert validate_plan({'steps': [
        {'id': 'r', 'tool': 'rank', 'arguments': {'items': ['$ref:berlin'], 'best': '$ref:r..x'}},
    ]}, [rank]) == [
        "steps[0] (id 'r'): arguments.items[0]: reference '$ref:berlin' names step 'berlin', which is not in the "
        'plan. Refer to one of the step ids: r.',
        "steps[0] (id 'r'): arguments.best: malformed reference '$ref:r..x': empty field name at position 2 (a '.' "
        'must be followed by a name). Write "$ref:STEP", "$ref:STEP.field", "$ref:STEP.items[0].name" or '
        '"$ref:STEP[\\"key with.dots\\"]".',
    ]


def test_references_to_fields_the_output_schema_lacks_list_the_fields_it_has() -> None:
    assert check({'id': 'u', 'tool': 'get_user', 'arguments': {'user_id': 1}},
                 {'id': 's', 'tool': 'send', 'arguments': {'to': '$ref:u.address.town', 'count': 1}},
                 {'id': 't', 'tool': 'send', 'arguments': {'to': 'Hi {{$ref:u.nme}}', 'count': 1}},
                 {'id': 'v', 'tool': 'send', 'arguments': {'to': '$ref:u.tags.first', 'count': 1}}) == [
        "steps[1] (id 's'): arguments.to: reference '$ref:u.address.town' cannot resolve: there is no field 'town' "
        "at address; the fields there are: city, zip (in the output schema of step 'u'). Refer to a field it has.",
        "steps[2] (id 't'): arguments.to: reference '{{$ref:u.nme}}' cannot resolve: there is no field 'nme' at "
        "the top level; the fields there are: name, age, tags, address (in the output schema of step 'u'). Refer to "
        'a field it has.',
        "steps[3] (id 'v'): arguments.to: reference '$ref:u.tags.first' cannot resolve: the value at tags is an "
        "array: use an index like [0], not a field name (in the output schema of step 'u'). Refer to a field it has.",
    ]


def test_a_reference_whose_type_cannot_fit_the_parameter_is_reported() -> None:
    assert check({'id': 'u', 'tool': 'get_user', 'arguments': {'user_id': 1}},
                 {'id': 's', 'tool': 'send', 'arguments': {'to': '$ref:u.tags', 'count': '$ref:u.address'}},
                 {'id': 'ok', 'tool': 'send', 'arguments': {'to': '$ref:u.tags[0]', 'count': '$ref:u.age'}},
                 {'id': 'text', 'tool': 'send', 'arguments': {'to': '{{$ref:u.tags}}', 'count': '$ref:u.name'}}) == [
        "steps[1] (id 's'): arguments.to: reference '$ref:u.tags' gives array, but 'send' expects string here. "
        'Refer to a field of the right type, or convert it with a select step first.',
        "steps[1] (id 's'): arguments.count: reference '$ref:u.address' gives object, but 'send' expects integer "
        'here. Refer to a field of the right type, or convert it with a select step first.',
    ]


def test_tools_without_an_output_schema_are_not_second_guessed() -> None:
    assert check({'id': 't', 'tool': 'text_tool', 'arguments': {'query': 'x'}},
                 {'id': 's', 'tool': 'send', 'arguments': {'to': '$ref:t.anything.deep', 'count': '$ref:t.n'}}) == []


def test_an_mcp_tools_output_schema_is_read_from_its_metadata() -> None:
    schema = {'type': 'object', 'properties': {'rows': {'type': 'array', 'items': {'type': 'object', 'properties': {
        'id': {'type': 'integer'}}, 'required': ['id']}}}, 'required': ['rows']}
    remote = FakeTool('query', {'rows': []}, metadata=ToolMetadata(extra={'output_schema': schema}))
    problems = validate_plan({'steps': [
        {'id': 'q', 'tool': 'query', 'arguments': {}},
        {'id': 'a', 'tool': 'send', 'arguments': {'to': '$ref:q.rows[0].name', 'count': '$ref:q.rows[0].id'}},
    ]}, [remote, send])
    assert problems == [
        "steps[1] (id 'a'): arguments.to: reference '$ref:q.rows[0].name' cannot resolve: there is no field 'name' "
        "at rows[0]; the fields there are: id (in the output schema of step 'q'). Refer to a field it has."]


def test_a_for_each_steps_value_is_a_list_of_its_tools_output() -> None:
    assert check({'id': 'u', 'tool': 'get_user', 'for_each': [1, 2], 'arguments': {'user_id': '$item'}},
                 {'id': 'a', 'tool': 'send', 'arguments': {'to': '$ref:u[0].name', 'count': '$ref:u[1].nme'}}) == [
        "steps[1] (id 'a'): arguments.count: reference '$ref:u[1].nme' cannot resolve: there is no field 'nme' at "
        "[1]; the fields there are: name, age, tags, address (in the output schema of step 'u'). Refer to a field it "
        'has.']


def test_the_return_annotation_is_the_output_schema_through_a_renaming_wrapper() -> None:
    renamed = toolweave.tools.renamed(get_user, 'user')
    assert validate_plan({'steps': [{'id': 'u', 'tool': 'user', 'arguments': {'user_id': 1}},
                                    {'id': 's', 'tool': 'send', 'arguments': {'to': '$ref:u.x', 'count': 1}}]},
                         [renamed, send])[0].startswith("steps[1] (id 's'): arguments.to: reference '$ref:u.x' cannot")


def test_item_fields_are_checked_against_the_elements_of_the_list() -> None:
    @tool
    def users() -> list[User]:
        """Every user."""
        return []

    problems = validate_plan({'steps': [
        {'id': 'all', 'tool': 'users', 'arguments': {}},
        {'id': 'mail', 'tool': 'send', 'for_each': '$ref:all',
         'arguments': {'to': 'Hi {{$item.nmae}}', 'count': '$item.age'}},
        {'id': 'zip', 'tool': 'send', 'for_each': '$ref:all', 'arguments': {'to': '$item.address.zip', 'count': 1}},
    ]}, [users, send])
    assert problems == [
        "steps[1] (id 'mail'): arguments.to: reference '{{$item.nmae}}' cannot resolve: there is no field 'nmae' at "
        'the top level; the fields there are: name, age, tags, address (in the elements of $ref:all). Refer to a '
        'field the elements have.']


async def test_a_tool_whose_schema_is_not_json_schema_is_left_to_check_its_own_arguments() -> None:
    odd = FakeTool('odd', 'fine', parameters={'type': 'object', 'properties': {'x': {'type': 'nonsense'}},
                                              'required': ['x']})
    assert validate_plan({'steps': [{'id': 'a', 'tool': 'odd', 'arguments': {'x': 1}}]}, [odd]) == []
    result = await toolweave.run_plan({'steps': [{'id': 'a', 'tool': 'odd', 'arguments': {'x': 1}}]}, [odd])
    assert result.ok


# --- literal arguments are validated once, by the tool itself --------------------------------------------------


class _Order(BaseModel):
    item: str
    quantity: int

    @field_validator('quantity')
    @classmethod
    def _counted(cls, value: int) -> int:
        _EVENTS.append(f'validated {value}')
        return value


_EVENTS: list[str] = []


@tool
def place(order: _Order, note: str = '') -> str:
    """Place an order."""
    _EVENTS.append(f'placed {order.item}')
    return f'{order.quantity} x {order.item}{note}'


async def test_a_literal_step_is_validated_once_before_the_plan_runs_and_the_call_uses_that() -> None:
    _EVENTS.clear()
    def ran(arguments: Any) -> str:
        _EVENTS.append('first ran')
        return 'ok'

    first = FakeTool('first', ran)
    run = await toolweave.run_plan({'steps': [
        {'id': 'f', 'tool': 'first', 'arguments': {}},  # the longest chain: it starts first
        {'id': 'g', 'tool': 'first', 'arguments': {'after': '$ref:f'}},
        {'id': 'h', 'tool': 'first', 'arguments': {'after': '$ref:g'}},
        {'id': 'a', 'tool': 'place', 'arguments': {'order': {'item': 'tea', 'quantity': 2}}},
        {'id': 'b', 'tool': 'place', 'arguments': {'order': {'item': 'cake', 'quantity': 1}, 'note': '$ref:a'}},
    ]}, [place, first])
    assert run.succeeded == 5
    assert (run.step('a').output, run.step('b').output) == ('2 x tea', '1 x cake2 x tea')
    # a: once, before any step ran (its call took that); b holds a reference: its literal part is checked before
    # any step runs too, and its tool validates the whole when called, with the reference's value. (The steps
    # without references are checked last, all of one tool's together.)
    assert sorted(_EVENTS[:2]) == ['validated 1', 'validated 2']
    assert [e for e in _EVENTS[2:] if e != 'first ran'] == ['placed tea', 'validated 1', 'placed cake']


async def test_a_literal_step_the_tool_would_reject_stops_the_plan_with_the_tools_own_words() -> None:
    probe = FakeTool('probe')
    with pytest.raises(PlanValidationError) as caught:
        await toolweave.run_plan({'steps': [
            {'id': 'p', 'tool': 'probe', 'arguments': {}},
            {'id': 'o', 'tool': 'place', 'arguments': {'order': {'item': 'tea', 'quantity': 'many'}, 'extra': 1}},
        ]}, [place, probe])
    assert caught.value.problems == [
        "steps[1] (id 'o'): arguments.order.quantity: Input should be a valid integer, unable to parse string as an "
        'integer, got "many".',
        "steps[1] (id 'o'): arguments.extra: Unexpected argument, got 1. Tool 'place' takes: order, note.",
    ]
    assert probe.calls == []


async def test_many_literal_steps_of_one_tool_are_each_validated_once_and_each_call_uses_its_own() -> None:
    # 300 steps: more than one call of the tool's validator (it checks them together, a chunk at a time)
    _EVENTS.clear()
    steps = [{'id': f's{i}', 'tool': 'place', 'arguments': {'order': {'item': f'item{i}', 'quantity': i + 1}}}
             for i in range(300)]
    run = await toolweave.run_plan({'steps': steps}, [place])
    assert run.succeeded == 300
    assert [run.step(f's{i}').output for i in (0, 150, 299)] == ['1 x item0', '151 x item150', '300 x item299']
    validated = [e for e in _EVENTS if e.startswith('validated')]
    assert sorted(validated) == sorted(f'validated {i + 1}' for i in range(300))  # once each, none at the call
    assert len([e for e in _EVENTS if e.startswith('placed')]) == 300


async def test_one_wrong_step_among_many_is_named_alone_in_the_tools_own_words() -> None:
    steps = [{'id': f's{i}', 'tool': 'place', 'arguments': {'order': {'item': 'tea', 'quantity': i}}}
             for i in range(200)]
    steps[137]['arguments'] = {'order': {'item': 'tea', 'quantity': 'lots'}}
    with pytest.raises(PlanValidationError) as caught:
        await toolweave.run_plan({'steps': steps}, [place])
    assert caught.value.problems == [
        "steps[137] (id 's137'): arguments.order.quantity: Input should be a valid integer, unable to parse string "
        'as an integer, got "lots".']


async def test_a_subclass_that_changes_check_arguments_alone_is_asked_for_every_step() -> None:
    asked: list[Any] = []

    class Strict(FunctionTool[..., str]):
        def check_arguments(self, arguments: Any, **kwargs: Any) -> Any:
            asked.append(dict(arguments))
            if arguments.get('to') == 'nobody':
                raise ArgumentsError('to: nobody is not an address', problems=['to: not an address'])
            return super().check_arguments(arguments, **kwargs)

    strict = Strict(_send, name='send')
    plan = {'steps': [{'id': 'a', 'tool': 'send', 'arguments': {'to': 'ann', 'count': 1}},
                      {'id': 'b', 'tool': 'send', 'arguments': {'to': 'nobody', 'count': 2}}]}
    assert validate_plan(plan, [strict]) == ["steps[1] (id 'b'): arguments.to: not an address."]
    assert asked == [{'to': 'ann', 'count': 1}, {'to': 'nobody', 'count': 2}]


async def test_a_tool_whose_check_of_many_raises_has_each_step_checked_alone() -> None:
    class Faulty(FunctionTool[..., str]):
        def check_arguments_many(self, arguments: Any) -> Any:
            raise RuntimeError('broken')

    faulty = Faulty(_send, name='send')
    plan = {'steps': [{'id': 'a', 'tool': 'send', 'arguments': {'to': 'ann', 'count': 1}},
                      {'id': 'b', 'tool': 'send', 'arguments': {'to': 'bob', 'count': 'two'}}]}
    assert validate_plan(plan, [faulty]) == [
        "steps[1] (id 'b'): arguments.count: Input should be a valid integer, unable to parse string as an integer, "
        'got "two".']
    plan['steps'].pop()
    run = await toolweave.run_plan(plan, [faulty])
    assert run.step('a').output == 'ann x1'


@pytest.mark.parametrize('answer', [[], [{'to': 'ann', 'count': 1}], ['not arguments', 'either']])
async def test_a_check_of_many_that_answers_wrongly_is_not_believed(answer: list[Any]) -> None:
    # too few arguments, or values that are not arguments: each step is checked on its own instead
    class Careless(FunctionTool[..., str]):
        def check_arguments_many(self, arguments: Any) -> Any:
            return answer

    careless = Careless(_send, name='send')
    steps: list[dict[str, Any]] = [{'id': 'a', 'tool': 'send', 'arguments': {'to': 'ann', 'count': 1}},
                                   {'id': 'b', 'tool': 'send', 'arguments': {'to': 'bob', 'count': 'two'}}]
    assert validate_plan({'steps': steps}, [careless]) == [
        "steps[1] (id 'b'): arguments.count: Input should be a valid integer, unable to parse string as an integer, "
        'got "two".']
    steps[1]['arguments']['count'] = 2
    run = await toolweave.run_plan({'steps': steps}, [careless])
    assert (run.step('a').output, run.step('b').output) == ('ann x1', 'bob x2')


async def test_a_retried_literal_step_is_validated_again_so_a_call_that_changed_its_input_cannot_leak() -> None:
    seen: list[list[int]] = []

    @tool
    def consume(values: list[int]) -> str:
        """Take the values (and leave the list empty), failing the first time."""
        seen.append(list(values))
        values.clear()
        if len(seen) == 1:
            raise ConnectionError('try again')
        return 'ok'

    run = await toolweave.run_plan({'steps': [{'id': 'c', 'tool': 'consume', 'arguments': {'values': [1, 2]}}]},
                                   [consume], retries=Retries(attempts=2, initial_delay=0, jitter=0))
    assert run.succeeded == 1
    assert seen == [[1, 2], [1, 2]]


def test_beside_references_the_tool_checks_the_literal_arguments_and_the_references_must_fill_real_ones() -> None:
    @tool
    def count_words(text: str) -> int:
        """Count the words."""
        return len(text.split())

    problems = validate_plan({'steps': [
        {'id': 'n', 'tool': 'count_words', 'arguments': {'text': 'one two'}},
        {'id': 'o', 'tool': 'place', 'arguments': {'order': {'item': 'tea', 'quantity': -0.5}, 'note': '$ref:n',
                                                   'urgent': '$ref:n'}},
        {'id': 'p', 'tool': 'place', 'arguments': {'order': '$ref:n'}},
    ]}, [place, count_words])
    assert problems == [
        "steps[1] (id 'o'): arguments.order.quantity: Input should be a valid integer, got a number with a "
        'fractional part, got -0.5.',
        "steps[1] (id 'o'): arguments.urgent: Unexpected argument, got \"$ref:n\". Tool 'place' takes: order, note.",
        "steps[1] (id 'o'): arguments.note: reference '$ref:n' gives integer, but 'place' expects string here. Refer "
        'to a field of the right type, or convert it with a select step first.',
        "steps[2] (id 'p'): arguments.order: reference '$ref:n' gives integer, but 'place' expects object here. Refer "
        'to a field of the right type, or convert it with a select step first.',
    ]


def test_a_list_of_many_wrong_items_is_one_bounded_message_not_thousands() -> None:
    @tool
    def label(values: list[str]) -> str:
        """Label the values."""
        return ','.join(values)

    problems = validate_plan({'steps': [{'id': 'l', 'tool': 'label', 'arguments': {'values': list(range(50_000))}}]},
                             [label])
    assert len(problems) == 21 and sum(map(len, problems)) < 3_000
    assert problems[0] == "steps[0] (id 'l'): arguments.values[0]: Input should be a valid string, got 0."
    assert problems[-1] == "steps[0] (id 'l'): arguments: ... and 49980 more problems of the same kinds."
    called = label.call_sync({'values': list(range(50_000))})
    assert called.error is not None and len(called.error) < 2_000
    assert called.error.endswith('... and 49980 more problems of the same kinds. Fix the arguments to match the '
                                 "tool's parameter schema and call it again.")


def test_a_tool_whose_own_check_offers_nothing_is_checked_against_its_schema() -> None:
    class Declines(FakeTool):
        def check_arguments(self, arguments: Any, *, pending: Any = ()) -> None:
            return None  # no validation of its own to offer here

    mail = Declines('mail', parameters={'type': 'object', 'properties': {'to': {'type': 'string'}},
                                        'required': ['to'], 'additionalProperties': False})
    assert validate_plan({'steps': [{'id': 'm', 'tool': 'mail', 'arguments': {'cc': 'x'}}]}, [mail]) == [
        "steps[0] (id 'm'): arguments: 'to' is a required property: it is missing.",
        "steps[0] (id 'm'): arguments: Additional properties are not allowed ('cc' is not an argument of this tool). "
        "Tool 'mail' takes: to.",
    ]


def test_hostile_literal_arguments_for_a_tool_with_its_own_check_are_refused_quickly() -> None:
    @tool
    def keep(data: Any) -> str:
        """Keep anything."""
        return 'kept'

    deep: list[Any] = []
    inner = deep
    for _ in range(5_000):
        inner.append([])
        inner = inner[0]
    looped: dict[str, Any] = {}
    looped['self'] = looped
    for data in (deep, looped):
        assert validate_plan({'steps': [{'id': 'k', 'tool': 'keep', 'arguments': {'data': data}}]}, [keep]) == [
            "steps[0] (id 'k'): arguments: nested too deeply to check. Use fewer levels of nested objects and arrays."]


# --- a tool's contract is prepared once, for as long as its definition stands --------------------------------------


class _Reloadable(FakeTool):
    """A tool whose definition is replaced while it lives, as an MCP tool's is when its server changes it."""

    def reload(self, parameters: dict[str, Any]) -> None:
        self._definition = toolweave.ToolDefinition(self.name, '', parameters)


def test_a_tool_given_a_new_definition_is_checked_against_the_new_one() -> None:
    counter = _Reloadable('count', parameters={'type': 'object', 'properties': {'n': {'type': 'integer'}}})
    plan = {'steps': [{'id': 'a', 'tool': 'count', 'arguments': {'n': 'three'}}]}
    assert validate_plan(plan, [counter]) == ["steps[0] (id 'a'): arguments.n: 'three' is not of type 'integer'."]
    counter.reload({'type': 'object', 'properties': {'n': {'type': 'string'}}})
    assert validate_plan(plan, [counter]) == []
    counter.reload({'type': 'object', 'properties': {'m': {'type': 'string'}}, 'additionalProperties': False})
    assert validate_plan(plan, [counter]) == [
        "steps[0] (id 'a'): arguments: Additional properties are not allowed ('n' is not an argument of this tool). "
        "Tool 'count' takes: m."]


def test_preparing_a_tools_contract_does_not_keep_the_tool_alive() -> None:
    import gc
    import weakref

    @tool
    def short_lived(n: int) -> int:
        """Lives for one plan."""
        return n

    assert validate_plan({'steps': [{'id': 'a', 'tool': 'short_lived', 'arguments': {'n': 1}}]}, [short_lived]) == []
    gone = weakref.ref(short_lived)
    del short_lived
    gc.collect()
    assert gone() is None


class _Unhashable(FakeTool):
    """A tool that compares by value, so it cannot be hashed (nor kept in a cache of tools)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Unhashable) and other.name == self.name


async def test_a_tool_that_cannot_be_hashed_is_checked_and_run_all_the_same() -> None:
    counter = _Unhashable('count', parameters={'type': 'object', 'properties': {'n': {'type': 'integer'}}})
    bad = {'steps': [{'id': 'a', 'tool': 'count', 'arguments': {'n': 'three'}}]}
    for _ in range(2):  # prepared anew each time, with the same outcome
        assert validate_plan(bad, [counter]) == ["steps[0] (id 'a'): arguments.n: 'three' is not of type 'integer'."]
    run = await toolweave.run_plan({'steps': [{'id': 'a', 'tool': 'count', 'arguments': {'n': 3}}]}, [counter])
    assert run.ok and run.step('a').output == 'ok'
