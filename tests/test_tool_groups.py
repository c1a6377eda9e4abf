"""Tool groups (issue 2): a named group loaded on first use, once, concurrency-safe, resolvable by role and usable
as an item of a Toolset."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest

from toolweave import DuplicateToolError, Tool, ToolGroup, Toolset, UnknownToolError, UserError, tool
from toolweave.testing import FakeTool

pytestmark = pytest.mark.anyio


class CountingLoader:
    """A sync loader that counts its runs."""

    def __init__(self, *names: str, sleep: float = 0.0) -> None:
        self.names = names
        self.sleep = sleep
        self.runs = 0

    def __call__(self) -> list[Tool]:
        self.runs += 1
        if self.sleep:
            time.sleep(self.sleep)
        return [FakeTool(name) for name in self.names]


class AsyncLoader:
    def __init__(self, *names: str, delay: float = 0.01) -> None:
        self.names = names
        self.delay = delay
        self.runs = 0

    async def __call__(self) -> list[Tool]:
        self.runs += 1
        await anyio.sleep(self.delay)
        return [FakeTool(name) for name in self.names]


def test_group_attributes() -> None:
    group = ToolGroup('web', CountingLoader('search'), description='Web access', provider='acme',
                      permissions={'network'})
    assert group.role == 'web'
    assert group.description == 'Web access'
    assert group.provider == 'acme'
    assert group.permissions == frozenset({'network'})
    assert not group.loaded
    assert repr(group) == "ToolGroup(role='web', not loaded)"


def test_loader_runs_on_first_use_only() -> None:
    loader = CountingLoader('search', 'fetch')
    tools = Toolset([FakeTool('clock'), ToolGroup('web', loader)])
    assert loader.runs == 0  # building the toolset does not load
    assert tools.get('clock').name == 'clock'
    assert loader.runs == 0  # a hit on an eager tool does not load either
    assert tools.names == ['clock', 'search', 'fetch']
    assert loader.runs == 1
    assert tools.get('fetch').name == 'fetch'
    assert 'search' in tools
    assert len(tools) == 3
    assert loader.runs == 1


def test_unknown_name_loads_groups_before_failing() -> None:
    loader = CountingLoader('search')
    tools = Toolset([ToolGroup('web', loader)])
    with pytest.raises(UnknownToolError) as info:
        tools.get('missing')
    assert info.value.available == ['search']
    assert loader.runs == 1


def test_group_resolvable_by_role() -> None:
    web = ToolGroup('web', CountingLoader('search'))
    files = ToolGroup('files', CountingLoader('read'))
    tools = Toolset([web, files])
    assert tools.group('web') is web
    assert tools.groups == [web, files]
    with pytest.raises(UserError, match=r"Unknown tool group role 'db'.*'web', 'files'"):
        tools.group('db')


async def test_group_toolset_and_tools_now() -> None:
    group = ToolGroup('web', CountingLoader('search', 'fetch'))
    with pytest.raises(UserError, match='not loaded yet'):
        group.tools_now()
    assert (await group.toolset()).names == ['search', 'fetch']
    assert [t.name for t in group.tools_now()] == ['search', 'fetch']
    assert group.loaded


def test_loader_may_return_any_toolset_items() -> None:
    @tool
    def search(query: str) -> str:
        """Search."""
        return query

    class Files:
        @tool
        def read(self, path: str) -> str:
            """Read a file."""
            return path

    group = ToolGroup('mixed', lambda: [search, Files(), Toolset([FakeTool('x')])])
    assert Toolset([group]).names == ['search', 'read', 'x']


def test_items_instead_of_a_loader() -> None:
    assert Toolset([ToolGroup('fixed', [FakeTool('a'), FakeTool('b')])]).names == ['a', 'b']


async def test_async_loader_needs_await_load() -> None:
    loader = AsyncLoader('search')
    tools = Toolset([ToolGroup('web', loader)])
    with pytest.raises(UserError, match=r'async loader.*await toolset\.load\(\)'):
        tools.names  # noqa: B018
    assert await tools.load() is tools
    assert tools.names == ['search']
    assert loader.runs == 1


async def test_sync_lambda_returning_a_coroutine_is_reported() -> None:
    async def make() -> list[Tool]:
        return [FakeTool('x')]

    tools = Toolset([ToolGroup('lazy', lambda: make())])
    with pytest.raises(UserError, match='async loader'):
        tools.get('x')
    await tools.load()
    assert tools.names == ['x']


async def test_dispatch_loads_async_groups() -> None:
    loader = AsyncLoader('search')
    tools = Toolset([ToolGroup('web', loader)])
    result = await tools.call('search', '{}')
    assert result.output == 'ok'
    assert loader.runs == 1
    assert (await tools.call('nope')).error is not None


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_concurrent_async_loads_run_the_loader_once(anyio_backend: str) -> None:
    loader = AsyncLoader('a', 'b', delay=0.05)
    group = ToolGroup('g', loader)
    results: list[list[str]] = []

    async def use() -> None:
        results.append([t.name for t in await group.load()])

    async with anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(use)
    assert loader.runs == 1
    assert results == [['a', 'b']] * 20


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_concurrent_loads_of_a_sync_loader_run_it_once(anyio_backend: str) -> None:
    loader = CountingLoader('a', sleep=0.05)
    tools = Toolset([ToolGroup('g', loader)])

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(tools.load)
    assert loader.runs == 1
    assert tools.names == ['a']


def test_threads_load_once() -> None:
    loader = CountingLoader('a', 'b', sleep=0.02)
    tools = Toolset([ToolGroup('g', loader)])
    barrier = threading.Barrier(16)
    seen: list[list[str]] = []

    def worker() -> None:
        barrier.wait()
        seen.append(tools.names)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loader.runs == 1
    assert seen == [['a', 'b']] * 16


async def test_failed_loader_is_retried_next_time() -> None:
    attempts = 0

    def flaky() -> list[Tool]:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise ConnectionError('server down')
        return [FakeTool('x')]

    tools = Toolset([ToolGroup('remote', flaky)])
    with pytest.raises(ConnectionError, match='server down'):
        tools.names  # noqa: B018
    assert tools.names == ['x']
    assert attempts == 2


async def test_cancelled_async_load_lets_the_next_caller_load() -> None:
    loader = AsyncLoader('x', delay=10)
    group = ToolGroup('slow', loader)
    with anyio.move_on_after(0.02):
        await group.load()
    assert not group.loaded
    loader.delay = 0.001
    assert [t.name for t in await group.load()] == ['x']
    assert loader.runs == 2


def test_duplicate_between_group_and_eager_tool_names_the_group() -> None:
    tools = Toolset([FakeTool('search'), ToolGroup('web', CountingLoader('search', 'fetch'))])
    with pytest.raises(DuplicateToolError) as info:
        tools.names  # noqa: B018
    assert "group 'web'" in str(info.value) and "'search'" in str(info.value)
    # all or nothing: nothing from the group was registered, and the clash is reported again
    with pytest.raises(DuplicateToolError):
        tools.get('fetch')


def test_duplicate_and_repeated_roles() -> None:
    group = ToolGroup('web', CountingLoader('a'))
    with pytest.raises(DuplicateToolError, match='added twice'):
        Toolset([group, group])
    with pytest.raises(DuplicateToolError, match='clashes'):
        Toolset([group, ToolGroup('web', CountingLoader('b'))])


def test_loaded_group_registers_at_once() -> None:
    group = ToolGroup('g', CountingLoader('a'))
    Toolset([group]).names  # noqa: B018
    fresh = Toolset([group])
    assert repr(fresh) == "Toolset(['a'])"


def test_unloaded_groups_survive_nesting_and_derivation() -> None:
    loader = CountingLoader('a', 'b')
    inner = Toolset([ToolGroup('g', loader)])
    outer = Toolset([FakeTool('z'), inner])
    assert loader.runs == 0
    assert repr(outer) == "Toolset(['z'], unloaded groups=['g'])"
    assert outer.group('g').role == 'g'
    assert outer.filtered(['a']).names == ['a']
    assert outer.filtered(['a']).group('g') is outer.group('g')
    assert loader.runs == 1
    assert outer.prefixed('p').names == ['p_z', 'p_a', 'p_b']


@pytest.mark.parametrize(
    ('args', 'kwargs', 'match'),
    [
        (('', list), {}, 'non-blank'),
        ((None, list), {}, 'non-blank'),
        (('g', 42), {}, 'loader of tool group'),
        (('g', 'tools'), {}, 'loader of tool group'),
        (('g', list), {'permissions': 'network'}, 'permissions'),
    ],
)
def test_bad_construction(args: tuple[object, ...], kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(UserError, match=match):
        ToolGroup(*args, **kwargs)  # type: ignore[arg-type]


def test_loader_returning_a_non_list() -> None:
    with pytest.raises(UserError, match="Loader of tool group 'g' must return a list of tools, got int"):
        Toolset([ToolGroup('g', lambda: 42)]).names  # type: ignore[arg-type, return-value]  # noqa: B018


def test_len_counts_loaded_tools_without_running_loaders() -> None:
    from toolweave import Agent
    from toolweave.testing import ScriptedModel

    async def web() -> list[Any]:
        return [FakeTool('search')]

    tools = Toolset([FakeTool('clock'), ToolGroup('web', web)])
    assert len(tools) == 1 and bool(tools)
    agent = Agent(ScriptedModel([]), tools=[ToolGroup('web', web)], tool_planning=True)
    assert agent.tool_planning
