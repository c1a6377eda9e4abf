"""`BlackboardSink`: the artifact sink that publishes to the current run's blackboard."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolweave.agent._process import current_process
from toolweave.decorators import ArtifactSinkingTool
from toolweave.exceptions import ToolConfigurationError
from toolweave.tools import Tool

__all__ = ('BlackboardSink', 'publish_to_blackboard')

NO_PROCESS = 'No AgentProcess available for BlackboardSink'


class BlackboardSink:
    """A sink (`accept(item)`) that adds each item to the blackboard of the agent run it is called in.

    Use it with `ArtifactSinkingTool` (or `publish_to_blackboard`) so a tool's artifacts become available to other
    tools of the run (`current_process().blackboard`). Outside an agent run there is no blackboard: `accept` raises
    `ToolConfigurationError('No AgentProcess available for BlackboardSink')`, which propagates out of the tool
    call, because a sink that silently drops artifacts hides a wiring mistake.

    Args:
        name: Bind every item under this name (the latest item wins on `get(name)`); `None` adds unbound.
    """

    def __init__(self, name: str | None = None) -> None:
        self.name = name

    def accept(self, item: object) -> None:
        process = current_process()
        if process is None:
            raise ToolConfigurationError(NO_PROCESS)
        process.blackboard.add(item, self.name)

    def __repr__(self) -> str:
        return f'BlackboardSink(name={self.name!r})'


def publish_to_blackboard(
    tool: Tool,
    type: type[Any] | tuple[type[Any], ...] = object,  # shadows the builtin: `type=` reads best at the call site
    *,
    filter: Callable[[Any], bool] | None = None,
    transform: Callable[[Any], object] | None = None,
    name: str | None = None,
) -> ArtifactSinkingTool:
    """`tool`, publishing each artifact it returns that is a `type` and passes `filter` (after `transform`) to the
    blackboard of the run it is called in; see `ArtifactSinkingTool` and `BlackboardSink`.

    ```python
    from toolweave import Agent, ToolResult, tool
    from toolweave.testing import ScriptedModel

    @tool
    def search(query: str) -> ToolResult:
        '''Search.'''
        return ToolResult.success('2 hits', [{'score': 0.9, 'doc': 'a'}, {'score': 0.2, 'doc': 'b'}])

    found = publish_to_blackboard(search, dict, filter=lambda hit: hit['score'] > 0.5,
                                  transform=lambda hit: hit['doc'], name='doc')
    model = ScriptedModel([{'tool': 'search', 'arguments': {'query': 'x'}}, 'done'])
    print(Agent(model, tools=[found]).run_sync('go').process.blackboard.get('doc'))
    #> a
    ```
    """
    return ArtifactSinkingTool(tool, BlackboardSink(name), type=type, filter=filter, transform=transform)
