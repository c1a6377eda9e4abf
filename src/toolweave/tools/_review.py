"""Where `Tool.call` meets the approval layer: the reviewer of gated calls is ambient, installed from above.

The tools layer only knows that some calls need a review (a layer of the tool says `requires_approval`) and who
to ask: the `CallReviewer` in a context variable. `toolweave.approval` implements it (the reviewers installed with
`use_review_handler`, the request, the timeout, the log), so the tools layer never imports approval.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol

from toolweave.exceptions import ToolConfigurationError

if TYPE_CHECKING:
    from toolweave.tools._context import ToolCallContext
    from toolweave.tools._result import ToolResult
    from toolweave.tools._tool import Tool, ToolArguments

__all__ = ('CallReviewer', 'current_reviewer', 'review_call', 'reviewer_var')


class CallReviewer(Protocol):
    """Decides a gated call: the arguments to run with (approved or edited), or the failure that replaces it."""

    async def review_call(
        self, tool: Tool, arguments: ToolArguments, context: ToolCallContext
    ) -> ToolArguments | ToolResult: ...


reviewer_var: ContextVar[CallReviewer | None] = ContextVar('toolweave_reviewer', default=None)


def current_reviewer() -> CallReviewer | None:
    return reviewer_var.get()


async def review_call(tool: Tool, arguments: ToolArguments, context: ToolCallContext) -> ToolArguments | ToolResult:
    """Ask the installed reviewer about a call of `tool`; with none installed, the call cannot run."""
    reviewer = reviewer_var.get()
    if reviewer is None:
        raise ToolConfigurationError(
            f'Tool {tool.name!r} requires approval but no ReviewHandler is configured. Pass `review_handler=` to the '
            'Agent, `run_plan` or pipeline, or wrap the call in `with use_review_handler(handler):`.'
        )
    return await reviewer.review_call(tool, arguments, context)
