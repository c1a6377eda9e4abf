"""Every public toolweave error, in three families.

```
ToolweaveError
├── UserError                 a developer mistake, found as early as possible (usually at build time)
│   ├── ToolConfigurationError  also raised at call time; the only error that escapes `Tool.call`
│   ├── ToolNameError           a tool name breaks the name rule
│   ├── DuplicateToolError      two tools resolve to the same name
│   ├── UnknownToolError        a lookup by a name that does not exist
│   ├── PlanValidationError     a plan that cannot run (raised by `run_plan`; the meta-tool returns text)
│   ├── UnknownRunError         a stored plan run looked up by an id the store does not have
│   ├── PlanMismatchError       a run id given again with a different plan
│   └── DecisionError           a decision for a step that is not waiting for one
├── ControlFlowSignal         raised on purpose to stop normal flow; propagates through every layer unchanged
│   ├── ExitEarly               a reviewer or tool asks the whole run to stop now
│   └── ApprovalPending         a reviewer cannot answer now: a plan step parks until a decision arrives
└── RunError                  a failure of the run itself, not of one tool
    ├── UsageLimitExceeded      a budget (LLM calls, tokens, tool calls) ran out
    ├── ModelError              a model provider failed in a way retries did not fix
    ├── PlanStoreError          a plan store could not be opened, or failed while a run wrote to it
    ├── RunInUseError           another live process is running the stored plan run
    └── RunCancelledError       the stored plan run was cancelled: it never runs again
```
"""

from __future__ import annotations

from typing import Any

__all__ = (
    'ApprovalPending',
    'ControlFlowSignal',
    'DecisionError',
    'DuplicateToolError',
    'ExitEarly',
    'ModelError',
    'PlanMismatchError',
    'PlanStoreError',
    'PlanValidationError',
    'RunCancelledError',
    'RunError',
    'RunInUseError',
    'ToolConfigurationError',
    'ToolNameError',
    'ToolweaveError',
    'UnknownRunError',
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
    """A plan failed validation; `problems` holds every problem found, each naming its step and field. `ran` is
    the record (a `PlanRun`) of the steps that had already run when the plan failed, if any had: the read-only
    steps of a plan that started while the model was still writing it."""

    def __init__(self, problems: list[str], ran: Any = None) -> None:
        self.problems = problems
        self.ran = ran
        super().__init__('Plan validation failed:\n' + '\n'.join(f'  - {p}' for p in problems))


class UnknownRunError(UserError, LookupError):
    """A stored plan run was looked up (resumed, shown, decided on) by an id the store does not have."""


class PlanMismatchError(UserError):
    """`run_plan(..., run_id=...)` was given an id the store already holds for a different plan: resuming it with
    this plan could run steps the stored ones never had. Use a new run id, or `resume_plan` to go on with the stored
    plan."""


class DecisionError(UserError):
    """A decision was given for a step that is not waiting for one (it is not parked, or no step has that id)."""


class ControlFlowSignal(ToolweaveError):
    """Base of the signals that stop normal flow on purpose. Tools, pipelines, plans and agents re-raise
    them unchanged instead of turning them into failure results."""


class ExitEarly(ControlFlowSignal):
    """Stop the whole run now (a reviewer chose "exit early", or a tool decided the task is over)."""


class ApprovalPending(ControlFlowSignal):
    """A reviewer cannot decide now (a person in another interface, a web hook): raised from `review` or
    `review_plan`. A plan step parks (status `parked`) while the rest of the plan runs on; a stored run is resumed
    once the decision arrives. Outside a plan it stops the run like any control-flow signal."""

    request: object = None
    """The `ReviewRequest` nobody could answer yet (set by the gate as the signal passes it)."""

    def __init__(self, reason: str = 'waiting for a decision') -> None:
        self.reason = reason
        super().__init__(reason)


class RunError(ToolweaveError):
    """A failure of the run as a whole."""


class UsageLimitExceeded(RunError):
    """A budget of the run (LLM calls, tokens, tool calls) was exhausted."""

    process: object = None
    """The stopped `AgentProcess` (history, usage, blackboard) when an agent run raised it, else `None`."""


class ModelError(RunError):
    """A model provider request failed after retries, or failed in a way retrying cannot fix."""


class PlanStoreError(RunError):
    """A plan store could not be opened, or failed while a run wrote to it (the database went away, the disk is
    full). A run that cannot record its steps stops: what it recorded before stays consistent, and `resume_plan`
    goes on from there once the store is back."""


class RunInUseError(RunError):
    """A stored plan run is being run by another live process (it holds the run's lease). Wait for it to end, or
    resume the run after that process stopped."""


class RunCancelledError(RunError):
    """A stored plan run was cancelled (`cancel_run`, `toolweave runs cancel`), or a cancel is on its way: a resume
    is refused, and the run never runs again. Start the plan under a new run id instead."""
