"""Every public toolweave error, in three families.

```
ToolweaveError
├── UserError                 a developer mistake, found as early as possible (usually at build time)
│   ├── ToolConfigurationError  also raised at call time; the only error that escapes `Tool.call`
│   ├── ToolNameError           a tool name breaks the name rule
│   ├── DuplicateToolError      two tools resolve to the same name
│   ├── UnknownToolError        a lookup by a name that does not exist
│   └── PlanValidationError     a plan that cannot run (raised by `run_plan`; the meta-tool returns text)
├── ControlFlowSignal         raised on purpose to stop normal flow; propagates through every layer unchanged
│   └── ExitEarly               a reviewer or tool asks the whole run to stop now
└── RunError                  a failure of the run itself, not of one tool
    ├── UsageLimitExceeded      a budget (LLM calls, tokens, tool calls) ran out
    └── ModelError              a model provider failed in a way retries did not fix
```
"""

from __future__ import annotations

__all__ = (
    'ControlFlowSignal',
    'DuplicateToolError',
    'ExitEarly',
    'ModelError',
    'PlanValidationError',
    'RunError',
    'ToolConfigurationError',
    'ToolNameError',
    'ToolweaveError',
    'UnknownToolError',
    'UsageLimitExceeded',
    'UserError',
)


class ToolweaveError(Exception):
    """Base class of every error toolweave raises."""


class UserError(ToolweaveError, ValueError):
    """A developer mistake: a bad name, a bad signature, a misuse of a builder."""


class ToolConfigurationError(UserError):
    """A tool is misconfigured in a way only a developer can fix (for example, it requires approval but no
    review handler is configured). Unlike every other exception, it propagates out of `Tool.call`."""


class ToolNameError(UserError):
    """A tool name is blank, too long or has characters outside `[A-Za-z0-9_-]`."""


class DuplicateToolError(UserError):
    """Two tools in one toolset have the same name."""


class UnknownToolError(UserError, LookupError):
    """A tool was looked up by a name that does not exist. The message lists the names that do."""

    def __init__(self, name: str, available: list[str]) -> None:
        self.name = name
        self.available = available
        listing = ', '.join(available) if available else '(none)'
        super().__init__(f'Unknown tool {name!r}. Available tools: {listing}.')


class PlanValidationError(UserError):
    """A plan failed validation; `problems` holds every problem found, each naming its step and field."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__('Plan validation failed:\n' + '\n'.join(f'  - {p}' for p in problems))


class ControlFlowSignal(ToolweaveError):
    """Base of the signals that stop normal flow on purpose. Tools, pipelines, plans and agents re-raise
    them unchanged instead of turning them into failure results."""


class ExitEarly(ControlFlowSignal):
    """Stop the whole run now (a reviewer chose "exit early", or a tool decided the task is over)."""


class RunError(ToolweaveError):
    """A failure of the run as a whole."""


class UsageLimitExceeded(RunError):
    """A budget of the run (LLM calls, tokens, tool calls) was exhausted."""

    process: object = None
    """The stopped `AgentProcess` (history, usage, blackboard) when an agent run raised it, else `None`."""


class ModelError(RunError):
    """A model provider request failed after retries, or failed in a way retrying cannot fix."""
