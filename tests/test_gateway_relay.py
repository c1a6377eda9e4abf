"""Everything in MCP through the gateway, besides tools: progress, logging and cancellation of calls; prompts,
resources, resource templates, links a tool returned, completions; the upstream server's questions to the client
(elicitation, sampling, roots), inside plans too; and the deadlines that keep a question nobody answers from
holding a call or a plan. The official SDK client (in-process, in both protocol eras) in front of the gateway, in
front of the SDK fixture (`gateway_upstream.py sdk`, whose questions travel in `InputRequiredResult`s on
2026-07-28) and `mcp-server-time` as real subprocesses. server-everything (questions as requests of the server,
task-augmented tools) is in `test_gateway_everything.py`."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.shared.exceptions import MCPDeprecationWarning

from toolweave.mcp import Backoff, McpGateway

pytestmark = pytest.mark.anyio

UPSTREAM = str(Path(__file__).with_name('gateway_upstream.py'))
TIME_SERVER = shutil.which('mcp-server-time', path=str(Path(sys.executable).parent))
FAST = Backoff(initial=0.05, maximum=0.2, stable=60.0, probe_timeout=1.0)
ERAS = ['auto', 'legacy']  # the SDK client's default negotiates 2026-07-28; 'legacy' uses the initialize handshake


def sdk(**options: Any) -> dict[str, Any]:
    return {'command': sys.executable, 'args': [UPSTREAM, 'sdk'], **({'toolweave': options} if options else {})}


@asynccontextmanager
async def gateway_of(servers: dict[str, Any], log_dir: Path, **options: Any) -> AsyncIterator[McpGateway]:
    async with McpGateway({'mcpServers': servers, 'toolweave': options}, log_dir=log_dir, backoff=FAST) as gateway:
        yield gateway


@pytest.fixture(scope='module')
def anyio_backend() -> str:
    return 'asyncio'


@pytest.fixture(scope='module')
async def main(anyio_backend: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpGateway]:
    """alpha and gamma run the same fixture, so every prompt, resource and template name collides; time has
    none of them."""
    assert TIME_SERVER is not None, 'mcp-server-time is a dev dependency'
    servers = {'alpha': sdk(), 'gamma': sdk(), 'time': {'command': TIME_SERVER, 'args': ['--local-timezone', 'UTC']}}
    async with gateway_of(servers, tmp_path_factory.mktemp('logs')) as gateway:
        yield gateway


def text_of(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def until_cancelled(client: Client, server: str, seconds: float) -> None:
    """Wait until the upstream server `server` says its call `slow(seconds)` was cancelled."""
    with anyio.fail_after(10):
        while True:
            cancelled = (await client.call_tool(f'{server}_cancelled', {})).structured_content or {}
            if seconds in cancelled.get('cancelled', []):
                return
            await anyio.sleep(0.05)


class Person:
    """The client side's callbacks: it answers questions and records what it was asked."""

    def __init__(self, colour: str = 'teal', *, silent: bool = False) -> None:
        self.colour = colour
        self.silent = silent
        self.asked: list[Any] = []

    async def elicit(self, context: Any, params: Any) -> Any:
        self.asked.append(params)
        if self.silent:
            await anyio.sleep_forever()
        if params.message.startswith('Allow this'):
            return types.ElicitResult(action='accept', content={'approve': True})
        return types.ElicitResult(action='accept', content={'colour': self.colour})

    async def sample(self, context: Any, params: Any) -> Any:
        self.asked.append(params)
        return types.CreateMessageResult(role='assistant', content=types.TextContent(text='hi from the model'),
                                         model='test-model')

    async def roots(self, context: Any) -> Any:
        self.asked.append('roots')
        return types.ListRootsResult(roots=[types.Root(uri='file:///work', name='work')])

    def callbacks(self) -> dict[str, Any]:
        return {'elicitation_callback': self.elicit, 'sampling_callback': self.sample,
                'list_roots_callback': self.roots}


# progress, logging, cancellation


@pytest.mark.parametrize('mode', ERAS)
async def test_progress_of_a_call_reaches_the_client(main: McpGateway, mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def report(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client(main.server(), mode=mode) as client:
        result = await client.call_tool('alpha_progress', {'n': 3}, progress_callback=report)
    assert text_of(result) == 'progressed'
    assert seen == [(1, 3, 'step 1'), (2, 3, 'step 2'), (3, 3, 'step 3')]


@pytest.mark.parametrize('mode', ERAS)
async def test_log_messages_of_a_call_reach_the_client_at_its_level(main: McpGateway, mode: str) -> None:
    logged: list[Any] = []

    async def log(params: Any) -> None:
        logged.append((params.level, params.data, params.logger))

    if mode == 'legacy':
        async with Client(main.server(), mode=mode, logging_callback=log) as client:
            with pytest.warns(MCPDeprecationWarning):  # deprecated in 2026-07-28, the way before it
                await client.session.set_logging_level('warning')
            await client.call_tool('alpha_log', {})
    else:  # 2026-07-28: the client opts in on each request
        async with Client(main.server(), logging_callback=log, log_level='warning') as client:
            await client.call_tool('alpha_log', {})
    with anyio.fail_after(5):
        while len(logged) < 2:  # noqa: ASYNC110 - notifications arrive beside the result
            await anyio.sleep(0.01)
    assert logged == [('warning', {'said': 'warning'}, 'fixture'), ('error', {'said': 'error'}, 'fixture')]


@pytest.mark.parametrize('mode', ERAS)
async def test_cancelling_a_call_cancels_it_upstream(main: McpGateway, mode: str) -> None:
    async with Client(main.server(), mode=mode) as client:
        with anyio.move_on_after(0.5):
            await client.call_tool('gamma_slow', {'seconds': 31 if mode == 'auto' else 32})
        await until_cancelled(client, 'gamma', 31 if mode == 'auto' else 32)


# the upstream server's questions


@pytest.mark.parametrize('mode', ERAS)
async def test_elicitation_sampling_and_roots_of_a_server_reach_the_client(main: McpGateway, mode: str) -> None:
    person = Person()
    async with Client(main.server(), mode=mode, **person.callbacks()) as client:
        asked = await client.call_tool('alpha_ask', {})
        sampled = await client.call_tool('alpha_sample', {})
        rooted = await client.call_tool('alpha_roots', {})
    assert asked.structured_content == {'answer': {'action': 'accept', 'content': {'colour': 'teal'}}}
    assert sampled.structured_content is not None
    assert sampled.structured_content['answer']['content'] == {'type': 'text', 'text': 'hi from the model'}
    assert rooted.structured_content == {'answer': {'roots': [{'uri': 'file:///work', 'name': 'work'}]}}
    question, sampling, roots = person.asked
    assert question.message == 'Which colour?' and question.requested_schema['required'] == ['colour']
    assert sampling.messages[0].content.text == 'Say hi.' and roots == 'roots'


@pytest.mark.parametrize('mode', ERAS)
async def test_a_client_that_cannot_answer_gets_the_servers_answer_to_a_refusal(main: McpGateway, mode: str) -> None:
    async with Client(main.server(), mode=mode) as client:  # declares no elicitation, sampling or roots
        result = await client.call_tool('alpha_ask', {})
    # The fixture's own error handling turns the refusal into a failed call; the reason names the capability.
    assert result.is_error and 'does not support elicitation' in text_of(result)


@pytest.mark.parametrize('mode', ERAS)
async def test_a_question_inside_a_plan_reaches_the_client(main: McpGateway, mode: str) -> None:
    person = Person('amber')
    plan = {'steps': [{'id': 'q', 'tool': 'alpha_ask', 'arguments': '{}'},
                      {'id': 'e', 'tool': 'alpha_echo', 'arguments': '{"text": "$ref:q.answer.content.colour"}'}],
            'output_steps': ['e']}
    async with Client(main.server(), mode=mode, **person.callbacks()) as client:
        result = await client.call_tool('execute_tool_plan', plan)
    assert result.structured_content == {'results': {'e': 'amber'}, 'errors': {}}
    assert [params.message for params in person.asked] == ['Which colour?']


@pytest.mark.parametrize('mode', ERAS)
async def test_progress_of_plan_steps_is_the_plans_progress(main: McpGateway, mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def report(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    plan = {'steps': [{'id': 'a', 'tool': 'alpha_progress', 'arguments': '{"n": 2}'},
                      {'id': 'b', 'tool': 'gamma_progress', 'arguments': '{"n": 2}'},
                      {'id': 'c', 'tool': 'alpha_echo', 'arguments': '{"text": "{{$ref:a}} {{$ref:b}}"}'}],
            'output_steps': ['c']}
    async with Client(main.server(), mode=mode) as client:
        result = await client.call_tool('execute_tool_plan', plan, progress_callback=report)
    assert result.structured_content == {'results': {'c': 'progressed progressed'}, 'errors': {}}
    values = [value for value, _, _ in seen]
    assert values == sorted(values) and len(set(values)) == len(values)  # always increasing
    assert {total for _, total, _ in seen} == {3.0} and values[-1] == 3.0
    messages = [message for _, _, message in seen]
    assert 'alpha_progress: step 1' in messages and 'gamma_progress: step 2' in messages
    assert messages[-1] == 'step c finished (3 of 3)'


@pytest.mark.parametrize('mode', ERAS)
async def test_cancelling_a_plan_cancels_its_running_upstream_calls(main: McpGateway, mode: str) -> None:
    seconds = 41 if mode == 'auto' else 42
    plan = {'steps': [{'id': 's', 'tool': 'alpha_slow', 'arguments': json.dumps({'seconds': seconds})},
                      {'id': 't', 'tool': 'gamma_slow', 'arguments': json.dumps({'seconds': seconds})}],
            'output_steps': None}
    async with Client(main.server(), mode=mode) as client:
        with anyio.move_on_after(0.5):
            await client.call_tool('execute_tool_plan', plan)
        for server in ('alpha', 'gamma'):
            await until_cancelled(client, server, seconds)


# deadlines: a question nobody answers


@pytest.fixture(scope='module')
async def hurried(anyio_backend: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpGateway]:
    """A server whose calls may take 0.5 s, in plans of 0.75 s."""
    async with gateway_of({'alpha': sdk(timeout=0.5)}, tmp_path_factory.mktemp('hurried'),
                          planTimeout=0.75) as gateway:
        yield gateway


async def test_an_approval_nobody_answers_ends_at_the_call_timeout(hurried: McpGateway) -> None:
    person = Person(silent=True)
    async with Client(hurried.server(), mode='legacy', **person.callbacks()) as client:
        result = await client.call_tool('touch', {})
    assert result.is_error and text_of(result) == (
        "Rejected by reviewer: {} (The client did not answer within the timeout of MCP server 'alpha' (0.5 s))")
    assert len(person.asked) == 1


async def test_a_plan_approval_nobody_answers_ends_at_the_plan_timeout(hurried: McpGateway) -> None:
    async with Client(hurried.server(), mode='legacy', **Person(silent=True).callbacks()) as client:
        result = await client.call_tool('execute_tool_plan', {'steps': [
            {'id': 'w', 'tool': 'wipe', 'arguments': '{"path": "/tmp/x"}'}], 'output_steps': None})
    assert result.is_error and result.structured_content is not None
    assert result.structured_content['errors'] == {
        'w': 'Cancelled: the reviewer rejected the plan (The client did not answer within planTimeout (0.75 s))'}


async def test_on_2026_connections_an_unanswered_approval_ends_at_the_timeout_too(hurried: McpGateway) -> None:
    async with Client(hurried.server(), **Person().callbacks()) as client:
        first = await client.session.call_tool('touch', {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
        await anyio.sleep(0.8)  # the client keeps the question past the deadline
        final = await client.session.call_tool('touch', {}, request_state=first.request_state,
                                               input_responses={}, allow_input_required=True)
    assert isinstance(final, types.CallToolResult) and final.is_error
    assert text_of(final) == ("Rejected by reviewer: {} (The client did not answer within the timeout of MCP server "
                              "'alpha' (0.5 s))")


@pytest.mark.parametrize('mode', ERAS)
async def test_an_upstream_question_counts_against_the_plan_timeout_not_the_servers(hurried: McpGateway,
                                                                                  mode: str) -> None:
    """The person takes longer than the server's 0.5 s: the call is not timed out; the plan's 0.75 s ends it."""
    plan = {'steps': [{'id': 'q', 'tool': 'ask', 'arguments': '{}'}], 'output_steps': None}
    async with Client(hurried.server(), mode=mode, **Person(silent=True).callbacks()) as client:
        if mode == 'legacy':
            result = await client.call_tool('execute_tool_plan', plan)
        else:  # the driver would wait on the silent person: the test holds the question itself
            first = await client.session.call_tool('execute_tool_plan', plan, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            await anyio.sleep(0.9)
            result = await client.session.call_tool('execute_tool_plan', {}, request_state=first.request_state,
                                                     input_responses={})
    assert result.structured_content is not None
    # Whichever clock notices first, the gateway's (the question) or the executor's (the steps), it is the plan's.
    assert result.structured_content['errors']['q'] in (
        "Tool 'ask' of MCP server 'alpha' was stopped: the request ran out of time (planTimeout (0.75 s)).",
        'Cancelled: the plan timed out after 0.75 s (timeout)')


async def test_a_persons_time_does_not_count_against_the_servers_timeout(tmp_path: Path) -> None:
    """In a plan, the person answers the server's question after 0.8 s, longer than the server's 0.5 s: the
    call goes on (its clock stood still meanwhile) and finishes within the plan's time."""
    class Slow(Person):
        async def elicit(self, context: Any, params: Any) -> Any:
            await anyio.sleep(0.8)
            return await super().elicit(context, params)

    plan = {'steps': [{'id': 'q', 'tool': 'ask', 'arguments': '{}'}], 'output_steps': None}
    async with gateway_of({'alpha': sdk(timeout=0.5)}, tmp_path, planTimeout=5) as gateway:
        async with Client(gateway.server(), mode='legacy', **Slow('plum').callbacks()) as client:
            result = await client.call_tool('execute_tool_plan', plan)
            single = await client.call_tool('ask', {})  # a single call's question waits up to the timeout only
    assert result.structured_content == {'results': {'q': {'answer': {'action': 'accept', 'content': {
        'colour': 'plum'}}}}, 'errors': {}}
    assert single.is_error and 'did not answer within the timeout of MCP server' in text_of(single)


# prompts, resources, templates, completions


@pytest.mark.parametrize('mode', ERAS)
async def test_prompts_are_listed_with_names_kept_unless_they_collide_and_can_be_got(main: McpGateway,
                                                                                     mode: str) -> None:
    async with Client(main.server(), mode=mode) as client:
        prompts = (await client.list_prompts()).prompts
        got = await client.get_prompt('gamma_greet', {'name': 'Ada'})
        with pytest.raises(MCPError, match=r"Unknown prompt 'greet'\. Prompts: alpha_greet, gamma_greet\."):
            await client.get_prompt('greet', {'name': 'Ada'})
    assert [(p.name, p.title, [a.name for a in p.arguments or []]) for p in prompts] == [
        ('alpha_greet', 'Greeting', ['name']), ('gamma_greet', 'Greeting', ['name'])]
    assert got.description == 'A greeting'
    assert isinstance(got.messages[0].content, types.TextContent)
    assert got.messages[0].content.text == 'Say hello to Ada.'


@pytest.mark.parametrize('mode', ERAS)
async def test_resources_templates_and_links_are_read_through_the_gateway(main: McpGateway, mode: str) -> None:
    async with Client(main.server(), mode=mode) as client:
        resources = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
        listed = await client.read_resource('gamma+memo://notes')
        templated = await client.read_resource('alpha+memo://notes/7')
        media = await client.call_tool('alpha_media', {})
        link = media.content[-1]
        assert isinstance(link, types.ResourceLink)
        linked = await client.read_resource(str(link.uri))
        with pytest.raises(MCPError, match=r"No server of the gateway offers the resource 'nowhere://x'"):
            await client.read_resource('nowhere://x')
    assert [str(r.uri) for r in resources] == ['alpha+memo://notes', 'gamma+memo://notes']
    assert [t.uri_template for t in templates] == ['alpha+memo://notes/{id}', 'gamma+memo://notes/{id}']
    contents = [(str(c.uri), getattr(c, 'text', None)) for c in (*listed.contents, *templated.contents,
                                                                  *linked.contents)]
    assert contents == [('gamma+memo://notes', 'the text of memo://notes'),
                        ('alpha+memo://notes/7', 'the text of memo://notes/7'),
                        ('memo://linked/big', 'the text of memo://linked/big')]


@pytest.mark.parametrize('mode', ERAS)
async def test_completions_are_passed_to_the_server_that_owns_the_prompt(main: McpGateway, mode: str) -> None:
    async with Client(main.server(), mode=mode) as client:
        completed = await client.complete(types.PromptReference(name='alpha_greet'), {'name': 'name', 'value': 'A'})
        templated = await client.complete(types.ResourceTemplateReference(uri='gamma+memo://notes/{id}'),
                                          {'name': 'id', 'value': 'G'})
        with pytest.raises(MCPError, match=r"Unknown prompt 'nope'"):
            await client.complete(types.PromptReference(name='nope'), {'name': 'name', 'value': 'A'})
    assert completed.completion.values == ['Ada', 'Alan'] and templated.completion.values == ['Grace']


@pytest.mark.parametrize('mode', ERAS)
async def test_the_gateway_declares_what_its_servers_offer(main: McpGateway, tmp_path: Path, mode: str) -> None:
    async with Client(main.server(), mode=mode) as client:
        full = client.server_capabilities
    tools_server = {'command': sys.executable, 'args': [UPSTREAM, 'legacy']}  # it declares tools alone
    async with gateway_of({'plain': tools_server}, tmp_path) as gateway:
        async with Client(gateway.server(), mode=mode) as client:
            tools_only = client.server_capabilities
            prompts = (await client.list_prompts()).prompts
    assert full.prompts is not None and full.resources is not None and full.completions is not None
    assert full.logging is not None and full.tools is not None
    assert tools_only.prompts is None and tools_only.resources is None and tools_only.completions is None
    assert tools_only.logging is None and tools_only.tools is not None and prompts == []


# approvals: what MCP says about a tool without annotations


async def test_a_tool_without_annotations_asks_unless_the_config_trusts_it(tmp_path: Path) -> None:
    servers = {'alpha': sdk(), 'beta': sdk(trustTools=['touch', 'wipe'], prefix='b')}
    async with gateway_of(servers, tmp_path) as gateway:
        person = Person()
        async with Client(gateway.server(), mode='legacy', **person.callbacks()) as client:
            asked = await client.call_tool('alpha_touch', {})
            trusted = await client.call_tool('b_touch', {})
            still_asked = await client.call_tool('b_wipe', {'path': '/tmp/z'})  # marked destructive: always asks
    assert not asked.is_error and not trusted.is_error and not still_asked.is_error
    assert [params.message for params in person.asked] == ['Allow this tool call?\n\nalpha_touch: {}',
                                                           'Allow this tool call?\n\nb_wipe: {"path":"/tmp/z"}']
    gated = {tool.name for tool in gateway.tools if tool.definition.metadata.requires_approval}
    assert gated == {'alpha_touch', 'alpha_wipe', 'b_wipe'}


# questions of several clients


async def test_questions_of_two_clients_calls_at_once_each_reach_their_own_client(main: McpGateway) -> None:
    """On 2026-07-28 the SDK fixture's question comes inside the call it belongs to. (Servers with the initialize
    handshake send questions on their own: see test_gateway_everything.py.)"""
    person_a, person_b = Person('red'), Person('blue')
    async with Client(main.server(), mode='legacy', **person_a.callbacks()) as a, \
            Client(main.server(), mode='legacy', **person_b.callbacks()) as b:
        async with anyio.create_task_group() as group:
            answers: dict[str, Any] = {}

            async def ask(name: str, client: Client) -> None:
                answers[name] = (await client.call_tool('alpha_ask', {})).structured_content

            group.start_soon(ask, 'a', a)
            group.start_soon(ask, 'b', b)
    assert answers == {'a': {'answer': {'action': 'accept', 'content': {'colour': 'red'}}},
                       'b': {'answer': {'action': 'accept', 'content': {'colour': 'blue'}}}}
