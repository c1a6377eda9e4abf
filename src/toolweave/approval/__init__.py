"""Human approval gates: a tool marked `requires_approval` asks the run's reviewers before it runs.

- A tool requires approval when any of its layers says so: `@tool(requires_approval=True)`, `TextTool(...,
  requires_approval=True)`, `ToolMetadata(requires_approval=True)`, or `requires_approval(tool)` (which also sets
  the review's own `timeout` and `on_timeout`). `Tool.call` asks before anything of the tool runs, once per call,
  under the name the model called.
- Reviewers are ambient (`use_review_handler`; an Agent's, a plan's or a pipeline's `review_handler`), so a gated
  tool deep inside a pipeline inside a plan is reviewed with its resolved arguments. Nested reviewers all review,
  innermost first; the stricter decision wins. No reviewer installed -> `ToolConfigurationError`, which propagates
  out of every layer: a gated call never runs unreviewed.
- A reviewer receives a `ReviewRequest` (`<tool>: <arguments>`, timing, timeout, on-timeout action) and returns a
  `ReviewDecision`: continue (run as is), edit (run with revised arguments) or exit early (the call becomes the
  failure `Rejected by reviewer: <input>`). A reviewer that does not answer in time gets the on-timeout action; one
  that raises `ExitEarly` stops the whole run; one that raises anything else rejects the call (fail closed); one
  that returns something other than a decision is a `ToolConfigurationError`.
- Reviewers: `AutoApproveHandler`, `ConsoleReviewHandler` (a person at the terminal; concurrent prompts are
  serialised by one process-wide lock), `CallbackReviewHandler` (a function), `RuleBasedReviewHandler` (tool name
  globs and argument predicates), or any object with `async review(request)`.
- A tool body may ask on its own with `request_approval(description)`.
- Plans may instead be reviewed whole (`review_mode='whole_plan'`): after validation and before any step runs,
  each reviewer gets a `PlanReviewRequest` (every step, arguments as written, dependencies, the gated steps
  marked) and answers once with a `PlanReviewDecision` (approve all, approve some, edit, park, reject the plan).
  Handlers with `review_plan` answer it whole; others are asked about each gated step in turn.
- A reviewer that cannot answer now raises `ApprovalPending`: the plan step parks and the rest runs on.
- `ApprovedCalls` stands for a person who approved one call or one plan elsewhere (a framework's approval flow):
  it approves exactly what they saw, once, and abstains from every other review (the other reviewers decide it;
  with none, `ToolConfigurationError`).
- Every decision is logged (logger `toolweave.approval`, INFO) and appended to the `ApprovalLog`s installed with
  `record_approvals()`, which plans and agents attach to their run records.
"""

from __future__ import annotations

from toolweave._public import present as _present
from toolweave.approval._approved import ApprovedCalls
from toolweave.approval._console import ConsoleReviewHandler, console_lock
from toolweave.approval._gate import (
    current_review_handlers,
    decide_call,
    preset_review,
    request_approval,
    review_options,
    use_review_handler,
)
from toolweave.approval._handlers import (
    ApprovalRule,
    AutoApproveHandler,
    CallbackReviewHandler,
    PlanReviewHandler,
    ReviewHandler,
    RuleBasedReviewHandler,
    ask_plan,
    check_review_handler,
)
from toolweave.approval._log import ApprovalLog, ApprovalRecord, current_approval_log, record_approvals
from toolweave.approval._model import (
    DEFAULT_ON_TIMEOUT,
    DEFAULT_TIMEOUT,
    OnTimeout,
    PlannedStep,
    PlanReviewDecision,
    PlanReviewRequest,
    ReviewDecision,
    ReviewRequest,
    ReviewTiming,
    describe_arguments,
)
from toolweave.approval._plan_review import review_plan
from toolweave.approval._wrapper import ApprovalRequiredTool, requires_approval

__all__ = (
    'ApprovalLog',
    'ApprovalRecord',
    'ApprovalRequiredTool',
    'ApprovalRule',
    'ApprovedCalls',
    'ask_plan',
    'AutoApproveHandler',
    'CallbackReviewHandler',
    'check_review_handler',
    'console_lock',
    'ConsoleReviewHandler',
    'current_approval_log',
    'current_review_handlers',
    'decide_call',
    'DEFAULT_ON_TIMEOUT',
    'DEFAULT_TIMEOUT',
    'describe_arguments',
    'OnTimeout',
    'PlannedStep',
    'PlanReviewDecision',
    'PlanReviewHandler',
    'PlanReviewRequest',
    'preset_review',
    'record_approvals',
    'request_approval',
    'requires_approval',
    'review_options',
    'review_plan',
    'ReviewDecision',
    'ReviewHandler',
    'ReviewRequest',
    'ReviewTiming',
    'RuleBasedReviewHandler',
    'use_review_handler',
)

_present('toolweave.approval', __all__, globals())
