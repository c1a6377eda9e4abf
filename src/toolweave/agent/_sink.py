"""`BlackboardSink`: the artifact sink that publishes to the current run's blackboard."""

from __future__ import annotations

from toolweave.agent._process import current_process
from toolweave.exceptions import ToolConfigurationError

__all__ = ('BlackboardSink',)

NO_PROCESS = 'No AgentProcess available for BlackboardSink'


class BlackboardSink:
    """A sink (`accept(item)`) that adds each item to the blackboard of the agent run it is called in (AS-8).

    Use it with `ArtifactSinkingTool` so a tool's structured results become available to other tools of the
    run (`current_process().blackboard`). Outside an agent run there is no blackboard: `accept` raises
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
