"""AgentProcess: blackboard, history, usage, status, current_process, and the blackboard sink."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pytest

import toolweave
from toolweave import (
    Agent,
    AgentProcess,
    ArtifactSinkingTool,
    Blackboard,
    BlackboardSink,
    ToolConfigurationError,
    UserError,
    tool,
)
from toolweave.models import ToolMessage
from toolweave.testing import FakeTool, ScriptedModel

pytestmark = pytest.mark.anyio


@dataclass
class User:
    name: str


@dataclass
class Admin(User):
    level: int = 1


def call(name: str, arguments: Any = None) -> dict[str, Any]:
    return {'tool': name, 'arguments': arguments or {}}


def test_blackboard_add_get_last_count() -> None:
    board = Blackboard()
    board.add(User('ann'), name='user')
    board.add(Admin('bob'))
    board.add('a note')
    board['user'] = User('cy')  # rebinding: the latest wins on get
    assert board.get('user') == User('cy') and board['user'] == User('cy')
    assert board.get('missing') is None and board.get('missing', 0) == 0
    assert board.last(User) == User('cy')
    assert board.last(Admin) == Admin('bob')
    assert board.count(User) == 3  # subtypes match
    assert board.count('Admin') == 1 and board.count(f'{__name__}.Admin') == 1  # simple or qualified name
    assert board.last('User') == User('cy') and board.last(int) is None
    assert board.objects == [User('ann'), Admin('bob'), 'a note', User('cy')]
    assert board.names == ['user'] and 'user' in board and 'x' not in board
    assert len(board) == 4
    with pytest.raises(KeyError, match="No object bound to 'x'"):
        board['x']
    with pytest.raises(UserError, match='binding name'):
        board.add(1, name=' ')


def test_spawned_blackboard_shares_with_its_parent() -> None:
    parent = Blackboard()
    parent.add('from parent', name='p')
    child = parent.spawn()
    child.add('from child', name='c')
    assert child.get('p') == 'from parent'  # the child sees the parent's objects
    assert parent.get('c') is None  # the child's additions stay private until published
    parent.add('later parent object')
    assert 'later parent object' in child.objects  # live view
    assert child.publish() == 1 and parent.get('c') == 'from child'
    assert child.publish() == 0  # nothing is published twice
    assert parent.count(str) == 3


def test_blackboard_is_thread_safe() -> None:
    board = Blackboard()

    def add_many() -> None:
        for i in range(500):
            board.add(i)

    threads = [threading.Thread(target=add_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(board) == 2000


async def test_a_tool_reaches_the_process_of_its_run() -> None:
    seen: list[AgentProcess | None] = []

    @tool
    def remember(city: str) -> str:
        """Remember a city (a sync tool: it runs in a worker thread)."""
        process = toolweave.current_process()
        seen.append(process)
        assert process is not None
        process.add(city, name='city')
        return 'remembered'

    @tool
    async def recall() -> str:
        """Recall the city."""
        process = toolweave.current_process()
        assert process is not None
        return str(process.blackboard.get('city'))

    model = ScriptedModel([call('remember', {'city': 'Oslo'}), call('recall'), 'Oslo it is'])
    result = await Agent(model, tools=[remember, recall]).run('go')
    assert seen == [result.process]
    assert result.process.blackboard.get('city') == 'Oslo'
    assert [m.content for m in result.messages if isinstance(m, ToolMessage)] == ['remembered', 'Oslo']
    assert toolweave.current_process() is None  # nothing leaks out of the run


async def test_process_records_status_times_history_and_usage() -> None:
    probe = FakeTool('probe', 'x')
    result = await Agent(ScriptedModel([[call('probe'), call('probe')], 'ok']), tools=[probe], name='worker').run('go')
    process = result.process
    assert process.status == 'completed' and process.stop_reason is None
    assert process.agent_name == 'worker' and len(process.id) == 12
    assert process.duration is not None and process.duration >= 0
    assert [r.name for r in process.history] == ['probe', 'probe']
    assert all(0 <= r.started_at <= r.ended_at for r in process.history)
    assert process.usage == result.usage and process.usage.tool_calls == 2 and process.usage.llm_calls == 2
    assert process.usage.total_tokens == process.usage.input_tokens + process.usage.output_tokens > 0
    [(model_name, model_usage)] = process.models.items()
    assert model_name == 'scripted' and model_usage.requests == 2
    assert model_usage.input_tokens == process.usage.input_tokens
    assert 'completed' in repr(process)


async def test_each_run_has_its_own_process() -> None:
    agent = Agent(ScriptedModel(['a', 'b']))
    first, second = await agent.run('1'), await agent.run('2')
    assert first.process.id != second.process.id
    assert first.process.blackboard is not second.process.blackboard


# --- BlackboardSink ---------------------------------------------------------------------------------------


def test_blackboard_sink_is_a_sink() -> None:
    assert isinstance(BlackboardSink(), toolweave.Sink)
    assert repr(BlackboardSink('user')) == "BlackboardSink(name='user')"


def test_blackboard_sink_without_a_process_raises() -> None:
    with pytest.raises(ToolConfigurationError) as info:
        BlackboardSink().accept(User('ann'))
    assert str(info.value) == 'No AgentProcess available for BlackboardSink'


async def test_blackboard_sink_adds_artifacts_to_the_run_blackboard() -> None:
    finder = FakeTool('find_user', lambda args: User(args['name']))
    sinking = ArtifactSinkingTool(finder, BlackboardSink(name='user'))
    result = await Agent(ScriptedModel([call('find_user', {'name': 'ann'}), 'found']), tools=[sinking]).run('go')
    assert result.process.blackboard.get('user') == User('ann')
    assert result.process.blackboard.count(User) == 1


async def test_blackboard_sink_unwraps_lists_and_composes() -> None:  # with the blackboard
    finder = FakeTool('find_users', lambda args: [User('ann'), Admin('bob'), 'not a user'])
    collected = toolweave.ListSink()
    sinking = ArtifactSinkingTool(finder, toolweave.CompositeSink(BlackboardSink(), collected), type=User)
    result = await Agent(ScriptedModel([call('find_users'), 'found']), tools=[sinking]).run('go')
    assert result.process.blackboard.objects == [User('ann'), Admin('bob')]
    assert collected.items() == [User('ann'), Admin('bob')]


async def test_blackboard_sink_in_a_tool_outside_a_run_fails_loudly() -> None:
    finder = FakeTool('find_user', lambda args: User('ann'))
    sinking = ArtifactSinkingTool(finder, BlackboardSink())
    with pytest.raises(ToolConfigurationError, match='No AgentProcess available for BlackboardSink'):
        await sinking.call('{}')


async def test_publish_to_blackboard_filters_then_transforms_into_the_run_blackboard() -> None:
    finder = FakeTool('find_users', lambda args: [User('ann'), Admin('bob'), User('cy'), 'not a user'])
    published = toolweave.publish_to_blackboard(finder, User, filter=lambda user: user.name != 'cy',
                                                transform=lambda user: user.name.upper(), name='who')
    assert published.name == 'find_users' and published.definition == finder.definition
    result = await Agent(ScriptedModel([call('find_users'), 'found']), tools=[published]).run('go')
    assert result.process.blackboard.objects == ['ANN', 'BOB'] and result.process.blackboard.get('who') == 'BOB'
    with pytest.raises(ToolConfigurationError, match='No AgentProcess available for BlackboardSink'):
        await published.call('{}')  # outside a run there is no blackboard to publish to
