"""Built-in tools: process introspection, blackboard, progress and communicate.

Cases without a process call the tools directly; cases with one run a real `Agent` over a `ScriptedModel`
(or a `FunctionModel` where the reply depends on what a tool returned) and read the tool messages.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

import toolweave
import toolweave.builtins
from toolweave import (
    Agent,
    AgentEvent,
    Budget,
    MessageEvent,
    ModelPrice,
    ProgressEvent,
    Tool,
    UserError,
    blackboard_tools,
    communicate_tool,
    format_blackboard_entry,
    process_tools,
    progress_tool,
    tool,
)
from toolweave.agent import current_process
from toolweave.builtins import HasContent, HasInfoString, blackboard_facade, process_tools_facade
from toolweave.models import AssistantMessage, Message, ToolMessage
from toolweave.testing import FakeTool, FunctionModel, ScriptedModel

pytestmark = pytest.mark.anyio

NO_PROCESS = 'No agent process available. These tools require an active agent context.'
NO_PROCESS_BB = 'No agent process available. Blackboard tools require an active agent context.'
PROCESS_TOOLS = ['process_status', 'process_budget', 'process_cost', 'process_history', 'process_tools_stats',
                 'process_models']
BLACKBOARD_TOOLS = ['blackboard_list', 'blackboard_get', 'blackboard_last', 'blackboard_describe',
                    'blackboard_count']


# --- fixtures and helpers ----------------------------------------------------------------------------------


@dataclass
class User:
    name: str


@dataclass
class Admin(User):
    level: int = 1


class Report:
    def info_string(self, verbose: bool | None = None, indent: int = 0) -> str:
        return f'Report(verbose={verbose}, indent={indent})'


@dataclass
class Note:
    content: str


class Order(BaseModel):
    id: int
    total: float


class Broken:
    def info_string(self, verbose: bool | None = None, indent: int = 0) -> str:
        raise RuntimeError('no info today')


def call(name: str, arguments: Any = None, call_id: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {'tool': name, 'arguments': {} if arguments is None else arguments}
    if call_id is not None:
        spec['id'] = call_id
    return spec


def outputs(messages: Sequence[Message]) -> list[tuple[str, str, bool]]:
    """(tool name, content, is_error) of every tool message, in order."""
    return [(m.name, m.content, m.is_error) for m in messages if isinstance(m, ToolMessage)]


def by_name(tools: Sequence[Tool]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


def loader(*items: tuple[object, str | None]) -> Tool:
    """A user tool `load` that puts `items` on the run's blackboard."""

    @tool
    def load() -> str:
        """Put the test objects on the blackboard."""
        process = current_process()
        assert process is not None
        for value, name in items:
            process.blackboard.add(value, name)
        return 'loaded'

    return load


Reply = dict[str, Any] | list[dict[str, Any]]


async def run_calls(tools: Sequence[object], *calls: Reply, **agent_options: Any) -> list[str]:
    """Run an agent whose model makes `calls` one per reply, then answers; the tool outputs, in order."""
    model = ScriptedModel([*calls, 'done'])
    result = await Agent(model, tools=tools, **agent_options).run('go')
    return [content for _, content, _ in outputs(result.messages)]


# --- definitions ------------------------------------------------------------------


def test_process_tools_have_the_six_names_and_no_parameters() -> None:
    tools = process_tools()
    assert [t.name for t in tools] == PROCESS_TOOLS
    for t in tools:
        assert t.definition.parameters == {'type': 'object', 'properties': {}, 'required': []}
        assert t.description and t.definition.metadata.category == 'agent_process'


def test_blackboard_tools_have_the_five_names_and_their_parameters() -> None:
    tools = by_name(blackboard_tools())
    assert list(tools) == BLACKBOARD_TOOLS
    assert tools['blackboard_list'].definition.parameters['properties'] == {}
    for name, param in [('blackboard_get', 'name'), ('blackboard_describe', 'name'), ('blackboard_last', 'typeName'),
                        ('blackboard_count', 'typeName')]:
        schema = tools[name].definition.parameters
        assert schema['required'] == [param] and schema['properties'][param]['type'] == 'string'
    assert {t.definition.metadata.category for t in tools.values()} == {'blackboard'}


def test_progress_and_communicate_have_one_required_string_parameter() -> None:
    for t, param in [(progress_tool(), 'status'), (communicate_tool(), 'message')]:
        schema = t.definition.parameters
        assert schema['required'] == [param] and list(schema['properties']) == [param]
        assert schema['properties'][param]['type'] == 'string'
        assert t.definition.metadata.extra[toolweave.builtins.USER_OUTPUT_KEY] is True
    assert progress_tool().name == 'progress' and communicate_tool().name == 'communicate'


def test_factories_reject_bad_options() -> None:
    with pytest.raises(UserError, match=r'formatter.*callable.*got int'):
        blackboard_tools(42)  # type: ignore[arg-type]
    with pytest.raises(UserError, match='mapping of model name to ModelPrice'):
        process_tools(prices=[1.0])  # type: ignore[arg-type]
    with pytest.raises(UserError, match=r"Entry 'gpt': 1.5 .* ModelPrice"):
        process_tools(prices={'gpt': 1.5})  # type: ignore[dict-item]
    for bad in (-1, True, 'cheap'):
        with pytest.raises(UserError, match=r'ModelPrice.input must be a number'):
            ModelPrice(input=bad, output=1.0)  # type: ignore[arg-type]


# --- no process -------------------------------------------------------------------


@pytest.mark.parametrize('name', PROCESS_TOOLS)
async def test_process_tools_without_a_process(name: str) -> None:
    result = await by_name(process_tools())[name].call({})
    assert result.ok and result.output == NO_PROCESS


@pytest.mark.parametrize('name', BLACKBOARD_TOOLS)
@pytest.mark.parametrize('arguments', [{}, {'name': 'x', 'typeName': 'User'}])
async def test_blackboard_tools_without_a_process(name: str, arguments: dict[str, Any]) -> None:
    result = await by_name(blackboard_tools())[name].call(arguments)
    assert result.ok and result.output == NO_PROCESS_BB  # the process check comes before the parameter check


async def test_progress_without_a_process_logs_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger='toolweave.builtins'):
        result = await progress_tool().call({'status': 'indexing'})
    assert result.ok and result.output == 'Progress noted (no active process to display it).'
    assert any(r.levelno == logging.WARNING and 'indexing' in r.getMessage() for r in caplog.records)


async def test_communicate_without_a_process_logs_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger='toolweave.builtins'):
        result = await communicate_tool().call('{"message": "PR #7 is open"}')
    assert result.ok and result.output == 'Message noted (no active process to deliver it).'
    assert any(r.levelno == logging.WARNING and 'PR #7' in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize('arguments', [None, '', '{}', {'status': None}, {'status': '  '}, {'other': 'x'}])
async def test_progress_missing_status_is_an_error(arguments: Any) -> None:
    result = await progress_tool().call(arguments)
    assert result.error == "Missing 'status' parameter"
    assert result.text == "Error: Missing 'status' parameter"


@pytest.mark.parametrize('arguments', [None, {}, {'message': None}, {'message': ''}])
async def test_communicate_missing_message_is_an_error(arguments: Any) -> None:
    result = await communicate_tool().call(arguments)
    assert result.error == "Missing 'message' parameter"


async def test_wrong_types_and_malformed_json_fail_with_the_fix() -> None:
    wrong = await progress_tool().call({'status': 5})
    assert wrong.error is not None
    assert "Parameter 'status' of tool 'progress' must be a string, got int: 5" in wrong.error
    malformed = await communicate_tool().call('{"message": ')
    assert malformed.error is not None and "Invalid JSON arguments for tool 'communicate'" in malformed.error
    not_object = await process_tools()[0].call('[1, 2]')
    assert not_object.error is not None and 'must be a JSON object, got list' in not_object.error


# --- process tools in a run ---------------------------------------------------------------------------


@pytest.mark.parametrize(('name', 'expected'), [
    ('process_history', 'No actions have been executed yet.'),
    ('process_tools_stats', 'No tools have been called yet.'),
])
async def test_process_tools_with_no_activity_yet(name: str, expected: str) -> None:
    # the first call of a run: the loop records a call in the history only once it has finished
    assert await run_calls(process_tools(), call(name)) == [expected]


async def test_process_models_before_any_model_call() -> None:
    models_tool = by_name(process_tools())['process_models']
    seen: list[str] = []

    async def reply(messages: list[Message], tools: Any) -> object:
        if not seen:  # inside the run, before the first model call is recorded
            seen.append((await models_tool.call()).output)
            return call('process_models')
        return 'done'

    result = await Agent(FunctionModel(reply, name='fn-model'), tools=[models_tool]).run('go')
    assert seen == ['No models have been used yet.']
    [(_, after, _)] = outputs(result.messages)
    assert after.startswith('Models used (1):\n\n- fn-model: 1 request, ')


async def test_process_tools_report_a_run() -> None:
    model = ScriptedModel([call('lookup'), call('lookup'), call('lookup_fail'), *map(call, PROCESS_TOOLS), 'done'])
    agent = Agent(model, tools=[FakeTool('lookup'), FakeTool('lookup_fail', fail='backend down'), *process_tools()],
                  name='auditor', budget=Budget(max_llm_calls=10, max_tool_calls=20))
    result = await agent.run('go')
    report = {name: content for name, content, _ in outputs(result.messages) if name.startswith('process_')}

    status = report['process_status'].splitlines()
    assert status[0] == f'Process ID: {result.process.id}'
    assert status[1:3] == ['Agent: auditor', 'Status: running']
    assert re.fullmatch(r'Running time: (\d+ms|\d+\.\ds)', status[3])
    assert status[4] == 'Parent ID: none (root process)'

    # process_budget answers the 5th reply: 5 model calls; the 3 lookups, process_status and itself counted
    tokens = sum(request.usage.input_tokens + request.usage.output_tokens for request in model.requests[:5])
    assert report['process_budget'].splitlines() == [
        'Budget Status:', '',
        'LLM call limit: 10', '  Used: 5', '  Remaining: 5', '',
        'Token limit: none', f'  Used: {tokens:,}', '',
        'Tool call limit: 20', '  Used: 5', '  Remaining: 15',
    ]

    cost = report['process_cost'].splitlines()
    first_six = model.requests[:6]
    input_tokens = sum(request.usage.input_tokens for request in first_six)
    output_tokens = sum(request.usage.output_tokens for request in first_six)
    assert cost == [
        'Cost and Usage:', '', 'Total cost: unknown (no model prices configured)', 'LLM invocations: 6', '',
        'Tokens used:', f'  Input tokens: {input_tokens:,}', f'  Output tokens: {output_tokens:,}',
        f'  Total tokens: {input_tokens + output_tokens:,}', '',
        'By model:', f'  scripted: 6 requests, {input_tokens:,} in, {output_tokens:,} out',
    ]

    history = report['process_history'].splitlines()
    assert history[:2] == ['Action history (6 action(s)):', '']
    assert [re.sub(r' \(\d+ms\)', ' (T)', line) for line in history[2:]] == [
        '1. lookup (T)', '2. lookup (T)', '3. lookup_fail (T) - failed: backend down', '4. process_status (T)',
        '5. process_budget (T)', '6. process_cost (T)',
    ]

    assert report['process_tools_stats'].splitlines() == [
        'Tool Usage Statistics:', '', 'Total tool calls: 7', 'Unique tools used: 6', '', 'Calls by tool:',
        '  lookup: 2 calls', '  lookup_fail: 1 call (1 failed)', '  process_status: 1 call', '  process_budget: 1 call',
        '  process_cost: 1 call', '  process_history: 1 call',
    ]

    models = report['process_models'].splitlines()
    nine = model.requests[:9]
    assert models == ['Models used (1):', '', f'- scripted: 9 requests, {sum(r.usage.input_tokens for r in nine):,} '
                      f'input tokens, {sum(r.usage.output_tokens for r in nine):,} output tokens']


async def test_process_cost_with_prices() -> None:
    prices = {'scripted': ModelPrice(input=2.0, output=8.0)}
    model = ScriptedModel([call('process_cost'), 'done'])
    result = await Agent(model, tools=process_tools(prices=prices)).run('go')
    [(_, text, _)] = outputs(result.messages)
    first = model.requests[0].usage
    expected = (first.input_tokens * 2.0 + first.output_tokens * 8.0) / 1_000_000
    assert f'Total cost: ${expected:.6f}' in text.splitlines()
    assert f'  Input tokens: {first.input_tokens:,}' in text.splitlines()
    assert text.splitlines()[-1] == (f'  scripted: 1 request, {first.input_tokens:,} in, {first.output_tokens:,} out, '
                                     f'${expected:.6f}')


async def test_process_cost_with_a_missing_price() -> None:
    [text] = await run_calls(process_tools(prices={'other': ModelPrice(1, 1)}), call('process_cost'))
    assert 'Total cost: at least $0.000000 (no price for: scripted)' in text


async def test_process_history_shows_plan_runs_and_stats_count_steps() -> None:
    plan = {'steps': [
        {'id': 'a', 'tool': 'fetch', 'arguments': '{}'},
        {'id': 'b', 'tool': 'broken', 'arguments': '{"x": "$ref:a"}'},
        {'id': 'c', 'tool': 'fetch', 'arguments': '{"y": "$ref:b"}'},
    ]}
    tools = [FakeTool('fetch', {'v': 1}), FakeTool('broken', fail='no luck'), *process_tools()]
    texts = await run_calls(tools, call('execute_tool_plan', plan), call('process_history'),
                            call('process_tools_stats'), tool_planning=True)
    history = texts[1].splitlines()
    assert history[:3] == ['Action history (1 action(s)):', '', history[2]]
    assert history[2].startswith('1. execute_tool_plan (')
    assert history[4:6] == ['Plan runs (1):', history[5]]
    assert re.fullmatch(r'  1\. 1/3 steps succeeded in \d+(ms|\.\ds)', history[5])
    assert re.fullmatch(r'     - a: fetch succeeded \(\d+ms\)', history[6])
    assert re.fullmatch(r'     - b: broken failed \(\d+ms\): no luck', history[7])
    assert history[8] == "     - c: fetch skipped: Skipped because dependency 'b' failed"
    stats = texts[2].splitlines()
    # the plan call, two started steps (c was skipped), and the history call
    assert stats[2:4] == ['Total tool calls: 4', 'Unique tools used: 4']
    assert '  broken: 1 call (1 failed)' in stats and '  fetch: 1 call' in stats


async def test_process_history_keeps_to_the_latest_calls() -> None:
    many = [call('noop', call_id=f'n{i}') for i in range(60)]
    texts = await run_calls([FakeTool('noop'), *process_tools()], many, call('process_history'))
    history = texts[-1].splitlines()
    assert history[0] == 'Action history (60 action(s), the last 50 shown):'
    assert history[2].startswith('11. noop (') and history[-1].startswith('60. noop (')
    assert len(history) == 52


async def test_sub_agent_sees_its_own_process_and_its_parent() -> None:
    def child_reply(messages: list[Message], tools: Any) -> object:
        last = messages[-1]
        return last.content if isinstance(last, ToolMessage) else call('process_status')

    child = Agent(FunctionModel(child_reply), tools=process_tools(), name='child')
    parent_model = ScriptedModel([call('child', {'prompt': 'who are you?'}), 'done'])
    result = await Agent(parent_model, tools=[child.as_tool()], name='parent').run('go')
    [(_, status, _)] = outputs(result.messages)
    assert 'Agent: child' in status
    assert f"Parent ID: {result.process.id} (agent 'parent')" in status


# --- blackboard tools in a run ------------------------------------------------------------


async def test_blackboard_is_empty() -> None:
    texts = await run_calls(blackboard_tools(), call('blackboard_list'), call('blackboard_count', {'typeName': 'X'}))
    assert texts == ['Blackboard is empty - no objects available.', "Found 0 object(s) of type 'X' in blackboard"]


async def test_blackboard_list() -> None:
    load = loader((User('ann'), 'user'), (Admin('bob'), None), ('a note', 'note'), (7, None))
    texts = await run_calls([load, *blackboard_tools()], call('load'), call('blackboard_list'))
    assert texts[1] == ('Blackboard contains 4 object(s):\n[0] User\n[1] Admin\n[2] str\n[3] int\n'
                        "Binding names: 'user', 'note'")


async def test_blackboard_list_without_names_is_exactly_the_listing() -> None:
    texts = await run_calls([loader((User('ann'), None)), *blackboard_tools()], call('load'), call('blackboard_list'))
    assert texts[1] == 'Blackboard contains 1 object(s):\n[0] User'


async def test_blackboard_list_caps_a_huge_board() -> None:
    load = loader(*[(i, None) for i in range(250)])
    texts = await run_calls([load, *blackboard_tools()], call('load'), call('blackboard_list'))
    lines = texts[1].splitlines()
    assert lines[0] == 'Blackboard contains 250 object(s):'
    assert lines[1] == '[50] int' and lines[200] == '[249] int'
    assert lines[-1] == '(50 older object(s) not listed)' and len(lines) == 202


async def test_blackboard_get_and_describe() -> None:
    load = loader((User('ann'), 'user'), (User('cy'), 'user'), (Order(id=3, total=9.5), 'order'))
    texts = await run_calls(
        [load, *blackboard_tools()], call('load'),
        call('blackboard_get', {'name': 'user'}),
        call('blackboard_get', {}),
        call('blackboard_get', {'name': 'nobody'}),
        call('blackboard_describe', {'name': 'order'}),
        call('blackboard_describe', {'name': '   '}),
        call('blackboard_describe', {'name': 'ghost'}),
    )
    assert texts[1] == "User bound to 'user':\nUser(name='cy')"  # the latest binding wins
    assert texts[2] == 'Missing required parameter: name'
    assert texts[3] == "No object found with binding name 'nobody'"
    assert texts[4] == (f"Description of Order 'order':\nType: {__name__}.Order\nFields: id, total\n"
                        'id=3 total=9.5')
    assert texts[5] == 'Missing required parameter: name'
    assert texts[6] == "No object found with binding name 'ghost'"


async def test_blackboard_describe_lists_fields_when_there_are_fields() -> None:
    load = loader((Admin('bob', 3), 'admin'), ({'sku': 'A1', 'qty': 2}, 'line'), (Report(), 'report'))
    texts = await run_calls([load, *blackboard_tools()], call('load'), *[
        call('blackboard_describe', {'name': name}) for name in ('admin', 'line', 'report')])
    assert texts[1:] == [
        f"Description of Admin 'admin':\nType: {__name__}.Admin\nFields: name, level\nAdmin(name='bob', level=3)",
        "Description of dict 'line':\nType: dict\nFields: sku, qty\n{'sku': 'A1', 'qty': 2}",
        f"Description of Report 'report':\nType: {__name__}.Report\nReport(verbose=True, indent=0)",
    ]


def test_durations_read_like_a_stopwatch() -> None:
    # the helper behind every running time the process tools show (a run cannot be made to last an hour here)
    from toolweave.builtins._common import format_duration

    cases = [(-1, '0ms'), (0.0004, '0ms'), (0.8509, '850ms'), (3.27, '3.2s'), (59.99, '59.9s'), (245.5, '4m 5s'),
             (3723.9, '1h 2m 3s')]
    assert [format_duration(seconds) for seconds, _ in cases] == [text for _, text in cases]


async def test_blackboard_last_and_count_match_simple_and_qualified_names() -> None:
    load = loader((User('ann'), None), (Admin('bob', 2), None), (User('cy'), None), ('text', None))
    texts = await run_calls(
        [load, *blackboard_tools()], call('load'),
        call('blackboard_last', {'typeName': 'User'}),
        call('blackboard_last', {'typeName': f'{__name__}.Admin'}),
        call('blackboard_last', {'typeName': 'Missing'}),
        call('blackboard_last', {}),
        call('blackboard_count', {'typeName': 'User'}),
        call('blackboard_count', {'typeName': f'{__name__}.User'}),
        call('blackboard_count', {'typeName': 'Admin'}),
        call('blackboard_count', {'typeName': 'str'}),
        call('blackboard_count', {'typeName': None}),
        call('blackboard_count', {'type_name': 'Admin'}),
    )
    assert texts[1] == "Last User:\nUser(name='cy')"  # the most recent match
    assert texts[2] == "Last Admin:\nAdmin(name='bob', level=2)"
    assert texts[3] == "No object of type 'Missing' found in blackboard"
    assert texts[4] == 'Missing required parameter: typeName'
    assert texts[5] == "Found 3 object(s) of type 'User' in blackboard"  # a subclass is a User too
    assert texts[6] == f"Found 3 object(s) of type '{__name__}.User' in blackboard"
    assert texts[7] == "Found 1 object(s) of type 'Admin' in blackboard"
    assert texts[8] == "Found 1 object(s) of type 'str' in blackboard"
    assert texts[9] == 'Missing required parameter: typeName'
    assert texts[10] == "Found 1 object(s) of type 'Admin' in blackboard"


async def test_blackboard_argument_errors_are_failures_the_model_reads() -> None:
    model = ScriptedModel([call('blackboard_get', {'name': 3}), call('blackboard_last', '{"typeName": '), 'done'])
    result = await Agent(model, tools=blackboard_tools()).run('go')
    [(_, wrong, wrong_error), (_, malformed, malformed_error)] = outputs(result.messages)
    assert wrong_error and "Parameter 'name' of tool 'blackboard_get' must be a string, got int: 3" in wrong
    assert malformed_error and "Invalid JSON arguments for tool 'blackboard_last'" in malformed


def test_default_formatting() -> None:
    assert format_blackboard_entry(Report()) == 'Report(verbose=True, indent=0)'
    assert format_blackboard_entry(Note('call Bob')) == 'call Bob'
    assert format_blackboard_entry(User('ann')) == "User(name='ann')"
    assert format_blackboard_entry({'a': 1}) == "{'a': 1}"
    assert format_blackboard_entry(Report) == str(Report)  # a class is shown by its string form
    assert isinstance(Report(), HasInfoString) and isinstance(Note('x'), HasContent)

    @dataclass
    class Both:
        content: str

        def info_string(self, verbose: bool | None = None, indent: int = 0) -> str:
            return 'info wins'

    @dataclass
    class NotText:
        content: int

    assert format_blackboard_entry(Both('content loses')) == 'info wins'
    assert format_blackboard_entry(NotText(5)) == repr(NotText(5))  # not a string: the string form


async def test_formatting_in_the_tools() -> None:
    load = loader((Report(), 'report'), (Note('remember the milk'), 'note'))
    texts = await run_calls([load, *blackboard_tools()], call('load'), call('blackboard_get', {'name': 'report'}),
                            call('blackboard_last', {'typeName': 'Note'}))
    assert texts[1:] == ["Report bound to 'report':\nReport(verbose=True, indent=0)", 'Last Note:\nremember the milk']


async def test_custom_formatter() -> None:
    load = loader((User('ann'), 'user'))
    texts = await run_calls([load, *blackboard_tools(lambda value: json.dumps(vars(value)))], call('load'),
                            call('blackboard_get', {'name': 'user'}))
    assert texts[1] == 'User bound to \'user\':\n{"name": "ann"}'


async def test_a_failing_formatter_says_which_object() -> None:
    model = ScriptedModel([call('load'), call('blackboard_get', {'name': 'bad'}), 'done'])
    result = await Agent(model, tools=[loader((Broken(), 'bad')), *blackboard_tools()]).run('go')
    [_, (_, text, is_error)] = outputs(result.messages)
    assert is_error
    assert text.startswith("Error: Formatting the Broken bound to 'bad' failed: RuntimeError: no info today.")


async def test_sub_agent_blackboard_tools_see_the_parent_board() -> None:
    child_model = ScriptedModel([call('blackboard_count', {'typeName': 'User'}), 'child done'])
    child = Agent(child_model, tools=blackboard_tools(), name='child')
    parent_model = ScriptedModel([call('load'), call('child', {'prompt': 'count users'}), 'done'])
    await Agent(parent_model, tools=[loader((User('ann'), None)), child.as_tool()]).run('go')
    [(_, text, _)] = outputs(child_model.requests[-1].messages)
    assert text == "Found 1 object(s) of type 'User' in blackboard"


async def test_blackboard_tools_inside_a_plan() -> None:
    count = {'id': 'n', 'tool': 'blackboard_count', 'arguments': '{"typeName": "User", "after": "$ref:load"}'}
    plan = {'steps': [{'id': 'load', 'tool': 'load', 'arguments': '{}'}, count]}
    model = ScriptedModel([call('execute_tool_plan', plan), 'done'])
    result = await Agent(model, tools=[loader((User('ann'), None)), *blackboard_tools()], tool_planning=True).run('go')
    assert result.plan_runs[0].step('n').output == "Found 1 object(s) of type 'User' in blackboard"


# --- progress and communicate in a run --------------------------------------------------------


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_progress_and_communicate_emit_events(anyio_backend: str) -> None:
    events: list[AgentEvent] = []
    model = ScriptedModel([call('progress', {'status': 'Reading 3 files'}),
                           call('communicate', {'message': 'Opened PR #12'}), 'done'])
    result = await Agent(model, tools=[progress_tool(), communicate_tool()]).run('go', on_event=events.append)
    assert [content for _, content, _ in outputs(result.messages)] == [
        'Progress reported: Reading 3 files', 'Message sent to user.']
    [progress] = [e for e in events if isinstance(e, ProgressEvent)]
    assert progress.status == 'Reading 3 files' and progress.process_id == result.process.id
    persistent = [e for e in events if isinstance(e, MessageEvent) and e.persistent]
    assert [e.message for e in persistent] == [AssistantMessage('Opened PR #12')]
    assert persistent[0].process_id == result.process.id
    # a persistent message is for the user, not loop traffic: the conversation holds only the tool result
    assert AssistantMessage('Opened PR #12') not in result.messages


async def test_progress_missing_status_in_a_run_is_an_error_result() -> None:
    events: list[AgentEvent] = []
    model = ScriptedModel([call('progress', {}), 'done'])
    result = await Agent(model, tools=[progress_tool()]).run('go', on_event=events.append)
    assert outputs(result.messages) == [('progress', "Error: Missing 'status' parameter", True)]
    assert not any(isinstance(e, ProgressEvent) for e in events)


async def test_sub_agent_progress_bubbles_up_to_the_parent() -> None:
    events: list[AgentEvent] = []
    child = Agent(ScriptedModel([call('progress', {'status': 'child working'}), 'ok']), tools=[progress_tool()],
                  name='child')
    parent = Agent(ScriptedModel([call('child', {'prompt': 'work'}), 'done']), tools=[child.as_tool()])
    result = await parent.run('go', on_event=events.append)
    [progress] = [e for e in events if isinstance(e, ProgressEvent)]
    assert progress.status == 'child working' and progress.process_id != result.process.id


# --- facades -------------------------------------------------------------------------------------


def test_facades_wrap_the_tool_lists() -> None:
    process = process_tools_facade()
    assert process.name == 'agent_process' and process.definition.parameters['properties'] == {}
    assert [t.name for t in process.inner_tools] == PROCESS_TOOLS
    assert process.child_tool_usage_notes and 'process_status' in process.child_tool_usage_notes
    board = blackboard_facade()
    assert board.name == 'blackboard' and [t.name for t in board.inner_tools] == BLACKBOARD_TOOLS
    assert board.child_tool_usage_notes and 'blackboard_list' in board.child_tool_usage_notes


async def test_facades_unfold_in_a_run() -> None:
    model = ScriptedModel([call('agent_process'), call('process_tools_stats'), call('blackboard'),
                           call('blackboard_list'), 'done'])
    agent = Agent(model, tools=[process_tools_facade(), blackboard_facade(lambda value: 'custom')])
    result = await agent.run('go')
    assert [t.name for t in model.requests[0].tools] == ['agent_process', 'blackboard']
    offered = [t.name for t in model.requests[1].tools]
    assert set(PROCESS_TOOLS) <= set(offered) and 'blackboard' in offered and 'blackboard_list' not in offered
    assert set(BLACKBOARD_TOOLS) <= {t.name for t in model.requests[3].tools}
    texts = [content for _, content, _ in outputs(result.messages)]
    assert texts[0].startswith('Tools now available: process_status, process_budget, process_cost, ')
    assert texts[1].splitlines()[-1] == '  agent_process: 1 call'  # the facade call is a tool call too
    assert texts[3] == 'Blackboard is empty - no objects available.'


# --- public API and docstring examples ---------------------------------------------------------------------


def test_public_names() -> None:
    for name in ('process_tools', 'blackboard_tools', 'progress_tool', 'communicate_tool', 'ModelPrice',
                 'format_blackboard_entry', 'process_tools_facade', 'blackboard_facade'):
        assert getattr(toolweave, name) is getattr(toolweave.builtins, name)
    assert ModelPrice.__module__ == 'toolweave' and repr(ModelPrice(1, 2)) == 'ModelPrice(input=1, output=2)'
    assert set(toolweave.builtins.__all__) <= set(dir(toolweave.builtins))
