"""Tool groups: a named set of tools (a role, a description, a provider, permissions) whose loader runs on first
use, once, even when many tasks or threads ask at the same time."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeAlias

import anyio
import anyio.to_thread

from toolweave.exceptions import UserError
from toolweave.tools._callables import is_async_callable

if TYPE_CHECKING:
    from toolweave.tools._tool import Tool
    from toolweave.tools._toolset import Toolset

__all__ = ('ToolGroup', 'ToolGroupLoader')

ToolGroupLoader: TypeAlias = Callable[[], Iterable[Any] | Awaitable[Iterable[Any]]]
"""A function (sync or async) returning the group's items: anything a `Toolset` accepts."""


class ToolGroup:
    """A named group of tools loaded on first use.

    The loader runs once: the first `Toolset` access that needs the group's tools (or `await group.load()`)
    runs it, and concurrent callers wait for that one run. A loader that raises is not cached: the next use
    tries again. Sync loaders run in a worker thread when loaded from async code; async loaders can only be
    loaded from async code (`await toolset.load()`).

    ```python
    from toolweave import Toolset
    from toolweave.testing import FakeTool
    web = ToolGroup('web', lambda: [FakeTool('search'), FakeTool('fetch')], description='Web access',
                    permissions={'network'})
    tools = Toolset([FakeTool('clock'), web])
    print(tools.group('web').loaded, tools.names, tools.group('web').loaded)
    #> False ['clock', 'search', 'fetch'] True
    ```
    """

    def __init__(
        self,
        role: str,
        loader: ToolGroupLoader | Iterable[Any],
        *,
        description: str = '',
        provider: str = '',
        permissions: Iterable[str] = (),
    ) -> None:
        """Create a group.

        Args:
            role: What the group is for (`'web'`, `'filesystem'`); the key a toolset resolves it by.
            loader: A function (sync or async) returning the tools, or the items themselves (then nothing is
                deferred but the resolution).
            description: What the tools in the group do, for people and for model-facing listings.
            provider: Who supplies the tools (a package, a server name).
            permissions: What the tools may touch (`{'network', 'filesystem:read'}`).
        """
        if not isinstance(role, str) or not role.strip():
            raise UserError(f'Tool group role must be a non-blank string, got {role!r}. '
                            "Name the group for what it does, for example `ToolGroup('web', load_web_tools)`.")
        if isinstance(permissions, str):
            raise UserError(f'permissions of tool group {role!r} must be a collection of strings, got the string '
                            f'{permissions!r}. Write `permissions={{{permissions!r}}}`.')
        if callable(loader):
            self._loader: ToolGroupLoader = loader
        elif isinstance(loader, Iterable) and not isinstance(loader, (str, bytes)):
            items = list(loader)
            self._loader = lambda: items
        else:
            raise UserError(f'loader of tool group {role!r} must be a function returning tools or a list of '
                            f'tools, got {type(loader).__name__} {loader!r}.')
        self._is_async = is_async_callable(self._loader)
        self.role = role
        self.description = description
        self.provider = provider
        self.permissions: frozenset[str] = frozenset(permissions)
        self._tools: list[Tool] | None = None
        self._sync_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._loading: anyio.Event | None = None

    @property
    def loaded(self) -> bool:
        return self._tools is not None

    def tools_now(self) -> list[Tool]:
        """The loaded tools. Raises `UserError` when the group has not been loaded yet."""
        if self._tools is None:
            raise UserError(f'Tool group {self.role!r} is not loaded yet. Call `await group.load()` first.')
        return list(self._tools)

    def load_sync(self) -> list[Tool]:
        """Load the group from sync code (once); the loader must be synchronous."""
        if self._is_async:
            raise self._async_loader_error()
        tools, awaitable = self._run_sync_loader()
        if awaitable is not None:
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # never awaited; close it so no "never awaited" warning fires
            raise self._async_loader_error()
        assert tools is not None
        return tools

    def _run_sync_loader(self) -> tuple[list[Tool] | None, Awaitable[Any] | None]:
        """Run a sync loader once under the lock: the tools, or the awaitable a disguised async loader
        returned (for the async path to await)."""
        with self._sync_lock:
            if self._tools is None:
                result = self._loader()
                if inspect.isawaitable(result):
                    return None, result
                self._tools = self._resolve(result)
            return list(self._tools), None

    async def load(self) -> list[Tool]:
        """Load the group (once) and return its tools; concurrent callers share the one loader run."""
        while self._tools is None:
            with self._state_lock:
                waiter = self._loading
                owner = waiter is None
                if waiter is None:
                    waiter = self._loading = anyio.Event()
            if not owner:
                await waiter.wait()
                continue
            try:
                await self._load_as_owner()
            finally:
                with self._state_lock:
                    self._loading = None
                waiter.set()
        return list(self._tools)

    async def _load_as_owner(self) -> None:
        if self._is_async:
            result: Any = self._loader()
            if inspect.isawaitable(result):
                result = await result
        else:
            # Sync loaders may block (network, disk): run them in a worker thread, under the same lock as
            # sync callers, so the loader still runs once.
            tools, awaitable = await anyio.to_thread.run_sync(self._run_sync_loader)
            if awaitable is None:
                return
            result = await awaitable
        tools = self._resolve(result)
        with self._sync_lock:
            if self._tools is None:
                self._tools = tools

    async def toolset(self) -> Toolset:
        """The group's tools as a `Toolset` (loading it first)."""
        from toolweave.tools._toolset import Toolset  # a toolset holds groups; a group's items make a toolset

        return Toolset(await self.load())

    def _resolve(self, result: object) -> list[Tool]:
        from toolweave.tools._toolset import Toolset  # a toolset holds groups; a group's items make a toolset

        if result is None or isinstance(result, (str, bytes)) or not isinstance(result, Iterable):
            raise UserError(f'Loader of tool group {self.role!r} must return a list of tools, got '
                            f'{type(result).__name__} {result!r}.')
        return Toolset(result).tools

    def _async_loader_error(self) -> UserError:
        return UserError(f'Tool group {self.role!r} has an async loader, so it cannot be loaded from sync code. '
                         'Call `await toolset.load()` (or `await group.load()`) before using the toolset.')

    def __repr__(self) -> str:
        state = 'loaded' if self.loaded else 'not loaded'
        return f'ToolGroup(role={self.role!r}, {state})'
