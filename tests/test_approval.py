"""Approval gates: requests and decisions, timeouts, nested reviewers, the handlers, `requires_approval` and the
approval log (the console handler and its lock are driven through a pseudo-terminal in `test_console_review.py`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from time import perf_counter
from typing import Any

import anyio
import pytest

from toolweave import (
    GLOBAL_METRICS,
    ApprovalRule,
    AutoApproveHandler,
    CallbackReviewHandler,
    ConsoleReviewHandler,
    ExitEarly,
    ReviewDecision,
    ReviewHandler,
    ReviewRequest,
    RuleBasedReviewHandler,
    TextTool,
    Tool,
    ToolCallContext,
    ToolConfigurationError,
    ToolPipeline,
    ToolResult,
    Toolset,
    UserError,
    record_approvals,
    request_approval,
    requires_approval,
    tool,
    use_review_handler,
)
from toolweave.approval import DEFAULT_ON_TIMEOUT, DEFAULT_TIMEOUT
from toolweave.testing import RecordingReviewHandler

pytestmark = pytest.mark.anyio


class Recorder(RecordingReviewHandler):
    """The shipped recording reviewer under a short name (the approval log records handlers by class name)."""




class ActionTool(TextTool):
    """Asks for approval from its body (before one dangerous branch, say), then does its work."""

    def __init__(self, name: str = 'action_tool', action: str = 'test action') -> None:
        super().__init__(name, 'asks before acting')
        self.action = action
        self.ran_with: list[str] = []

    async def run(self, text: str) -> ToolResult | str:
        decision = await request_approval(f'{self.action}: {text}', tool_name=self.name, arguments=text)
        if decision.kind == 'exit_early':
            return ToolResult.failure(f'Rejected by reviewer: {text}')
        if decision.kind == 'edit':
            assert isinstance(decision.revised, str)
            text = decision.revised
        self.ran_with.append(text)
        return f'edited: {text}' if decision.kind == 'edit' else 'done'


def gated_echo(name: str = 'write_file') -> Tool:
    return TextTool.from_function(name, 'writes', lambda text: f'wrote {text}', requires_approval=True)


async def test_a_body_request_with_no_reviewer_is_a_configuration_error_that_propagates() -> None:
    action = ActionTool()
    with pytest.raises(ToolConfigurationError, match="Tool 'action_tool' asked for approval .* no ReviewHandler"):
        await action.call('my input')
    with pytest.raises(ToolConfigurationError, match='no ReviewHandler is configured'):  # through a pipeline too
        await ToolPipeline.of(action).call('x')
    assert action.ran_with == []
    with use_review_handler(AutoApproveHandler()):  # approving everything is a choice made explicitly
        assert (await action.call('my input')).output == 'done'


async def test_continue_runs_with_the_original_input() -> None:
    action = ActionTool()
    with use_review_handler(Recorder()):
        assert (await action.call('my input')).output == 'done'
    assert action.ran_with == ['my input']
    gated = gated_echo()
    with use_review_handler(Recorder()):
        assert (await gated.call('{"input": "notes.txt"}')).output == 'wrote notes.txt'


async def test_request_carries_description_timing_and_defaults() -> None:
    handler = Recorder()
    with use_review_handler(handler):
        await ActionTool().call('my input', {'tenant': 'acme'})
        await gated_echo().call({'input': 'a.txt'})
    body, gate = handler.requests
    assert (body.description, body.timing, body.timeout, body.on_timeout) == (
        'test action: my input', 'during_execution', DEFAULT_TIMEOUT, DEFAULT_ON_TIMEOUT)
    assert (DEFAULT_TIMEOUT, DEFAULT_ON_TIMEOUT) == (300.0, 'exit_early')
    assert (gate.tool_name, gate.description, gate.arguments) == ('write_file', 'write_file: {"input":"a.txt"}',
                                                                  {'input': 'a.txt'})
    assert (gate.timing, gate.timeout, gate.on_timeout) == ('during_execution', 300.0, 'exit_early')


async def test_edit_uses_the_revised_input() -> None:
    action = ActionTool()
    with use_review_handler(Recorder(ReviewDecision.edit('revised content'))):
        assert (await action.call('original')).output == 'edited: revised content'
        gated = await gated_echo().call('{"input": "original"}')
    assert gated.output == 'wrote revised content'


async def test_edit_of_typed_arguments() -> None:
    @tool(requires_approval=True)
    def transfer(account: str, amount: int) -> str:
        """Move money."""
        return f'{amount} to {account}'

    with use_review_handler(Recorder(ReviewDecision.edit({'account': 'savings', 'amount': 5}))):
        assert (await transfer.call({'account': 'x', 'amount': 500})).output == '5 to savings'
    with use_review_handler(Recorder(ReviewDecision.edit('{"account": "y"}'))):
        invalid = await transfer.call({'account': 'x', 'amount': 1})
    assert not invalid.ok and 'amount' in (invalid.error or '')  # the tool validates what the reviewer typed


async def test_exit_early_is_a_rejection_failure() -> None:
    action = ActionTool()
    with use_review_handler(Recorder(ReviewDecision.reject())):
        result = await action.call('my input')
        gated = await gated_echo().call('{"input": "secrets.txt"}')
    assert 'rejected' in (result.error or '').lower() and action.ran_with == []
    assert gated.error == 'Rejected by reviewer: {"input": "secrets.txt"}'
    with use_review_handler(Recorder(ReviewDecision.reject('too risky'))):
        reasoned = await gated_echo().call({'input': 'x'})
    assert reasoned.text == 'Error: Rejected by reviewer: {"input":"x"} (too risky)'


async def test_custom_timeout_and_action_reach_the_handler() -> None:
    handler = Recorder()
    with use_review_handler(handler):
        await request_approval('wire money: 5', timeout=12.5, on_timeout='continue')
        await requires_approval(gated_echo('slow_gate'), timeout=7, on_timeout='continue').call('x')
    assert [(r.timeout, r.on_timeout) for r in handler.requests] == [(12.5, 'continue'), (7, 'continue')]


async def test_tool_that_never_asks_never_calls_the_handler() -> None:
    handler = Recorder()
    plain = TextTool.from_function('plain', 'no gate', str.upper)
    with use_review_handler(handler):
        assert (await plain.call('x')).output == 'X'
    assert handler.requests == []


async def test_gated_tool_without_handler_is_a_configuration_error() -> None:
    message = "Tool 'write_file' requires approval but no ReviewHandler is configured"
    with pytest.raises(ToolConfigurationError, match=message):
        await gated_echo().call('x')
    with pytest.raises(ToolConfigurationError, match=message):  # through a pipeline, under either strategy
        await ToolPipeline.of(TextTool.from_function('first', 'f', lambda t: t.strip()), gated_echo()).call('x')
    with pytest.raises(ToolConfigurationError, match=message):  # through a toolset lookup
        await Toolset([gated_echo()]).get('write_file').call('x')


async def test_wrong_handler_type_is_a_configuration_error() -> None:
    with pytest.raises(ToolConfigurationError, match='must be an instance of ReviewHandler'):
        with use_review_handler(object()):  # type: ignore[arg-type]
            pass  # pragma: no cover
    with pytest.raises(ToolConfigurationError, match="Tool 'p' is misconfigured: review_handler must be an instance"):
        ToolPipeline([gated_echo()], name='p', review_handler='console')  # type: ignore[arg-type]
    with pytest.raises(ToolConfigurationError, match='misconfigured: review_handler must be an instance'):
        RuleBasedReviewHandler([], default=42)  # type: ignore[arg-type]


class BadAnswer:
    async def review(self, request: ReviewRequest) -> Any:
        return 'yes'


async def test_handler_returning_something_else_is_a_configuration_error() -> None:
    with use_review_handler(BadAnswer()), pytest.raises(ToolConfigurationError, match="returned 'yes'"):
        await gated_echo().call('x')


async def test_value_error_in_a_gated_body_is_a_failure() -> None:
    def broken(text: str) -> str:
        raise ValueError('illegal state in body')

    gated = TextTool.from_function('fragile', 'raises', broken, requires_approval=True)
    with use_review_handler(AutoApproveHandler()):
        result = await gated.call('x')
    assert (result.ok, result.error) == (False, 'illegal state in body')


@pytest.mark.parametrize('anyio_backend', ['asyncio', 'trio'])
async def test_non_console_handlers_run_concurrently(anyio_backend: str) -> None:
    handler = Recorder(delay=0.3)
    gated = gated_echo()
    start = perf_counter()
    with use_review_handler(handler):
        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(gated.call, f'file{i}')
    assert perf_counter() - start < 0.8  # three 0.3 s reviews overlap
    assert len(handler.requests) == 3


async def test_rejection_stops_a_fail_fast_pipeline() -> None:
    after = TextTool.from_function('after', 'never', lambda t: pytest.fail('must not run'))
    pipeline = ToolPipeline.of(TextTool.from_function('prepare', 'p', lambda t: t + '.txt'), gated_echo(), after)
    handler = Recorder(ReviewDecision.reject())
    with use_review_handler(handler):
        result = await pipeline.call('report')
    assert result.error == 'Rejected by reviewer: {"input":"report.txt"}'
    assert handler.requests[0].arguments == {'input': 'report.txt'}  # the step's resolved input


async def test_timeout_applies_the_on_timeout_action() -> None:
    hanging = Recorder(delay=30)
    with use_review_handler(hanging), record_approvals() as log:
        rejected = await requires_approval(gated_echo('reject_gate'), timeout=0.1).call('x')
        approved = await requires_approval(gated_echo('allow_gate'), timeout=0.1, on_timeout='continue').call('y')
    assert rejected.error == 'Rejected by reviewer: x (no decision within 0.1 s)'
    assert approved.output == 'wrote y'
    assert [(r.tool_name, r.outcome) for r in log] == [('reject_gate', 'timed out, rejected'),
                                                       ('allow_gate', 'timed out, approved')]


class Raising:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        raise self.exc


async def test_handler_errors_fail_closed_and_signals_propagate() -> None:
    with use_review_handler(Raising(ConnectionError('webhook down'))):
        result = await gated_echo().call('x')
    assert result.error == 'Rejected by reviewer: x (review handler failed: ConnectionError: webhook down)'
    with use_review_handler(Raising(ExitEarly('stop everything'))), pytest.raises(ExitEarly, match='stop everything'):
        await ToolPipeline.of(gated_echo(), TextTool.from_function('n', 'n', str.upper)).call('x')


async def test_callback_handler_async_sync_and_bool() -> None:
    async def async_reviewer(request: ReviewRequest) -> ReviewDecision:
        return ReviewDecision.edit('from async')

    def sync_reviewer(request: ReviewRequest) -> bool:
        return request.tool_name != 'write_file'

    with use_review_handler(CallbackReviewHandler(async_reviewer)):
        assert (await gated_echo().call('x')).output == 'wrote from async'
    with use_review_handler(CallbackReviewHandler(sync_reviewer)):
        assert (await gated_echo().call('x')).error == 'Rejected by reviewer: x'
        assert (await gated_echo('other').call('x')).output == 'wrote x'
    with use_review_handler(CallbackReviewHandler(lambda request: None)), pytest.raises(  # type: ignore[arg-type, return-value]
            ToolConfigurationError, match=r'Review callback .*<lambda> returned None .* Return a ReviewDecision'):
        await gated_echo().call('x')
    with pytest.raises(UserError, match='needs a callable'):
        CallbackReviewHandler('nope')  # type: ignore[arg-type]
    assert isinstance(CallbackReviewHandler(async_reviewer), ReviewHandler)


async def test_rule_based_handler() -> None:
    def under_etc(args: Mapping[str, Any]) -> bool:
        return str(args.get('input', '')).startswith('/etc')

    handler = RuleBasedReviewHandler([
        ApprovalRule.allow('read_*'),
        ApprovalRule.deny('write_*', when=under_etc, reason='system file'),
        ApprovalRule.allow('write_*'),
    ])
    with use_review_handler(handler):
        assert (await gated_echo('read_notes').call('/etc/passwd')).ok
        assert (await gated_echo('write_file').call('/etc/passwd')).error == (
            'Rejected by reviewer: /etc/passwd (system file)')
        assert (await gated_echo('write_file').call({'input': '/home/me'})).output == 'wrote /home/me'
        unmatched = await gated_echo('delete_all').call('x')
    assert unmatched.error == 'Rejected by reviewer: x (no approval rule matched)'


async def test_rule_based_default_approve_and_fallback_handler() -> None:
    with use_review_handler(RuleBasedReviewHandler([ApprovalRule.deny('rm')], default='approve')):
        assert (await gated_echo('ls').call('x')).ok
        assert (await gated_echo('rm').call('x')).error == "Rejected by reviewer: x (denied by rule 0 (reject 'rm'))"
    fallback = Recorder(ReviewDecision.edit('checked'))
    with use_review_handler(RuleBasedReviewHandler([ApprovalRule.allow('safe_*')], default=fallback)):
        assert (await gated_echo('safe_read').call('x')).output == 'wrote x'
        assert (await gated_echo('unsafe').call('x')).output == 'wrote checked'
    assert [r.tool_name for r in fallback.requests] == ['unsafe']
    slow = Recorder(delay=30)
    with use_review_handler(RuleBasedReviewHandler([], default=slow)):  # the fallback gets the timeout too
        timed_out = await requires_approval(gated_echo('late'), timeout=0.1).call('x')
    assert timed_out.error == 'Rejected by reviewer: x (no decision within 0.1 s)'


async def test_rule_predicate_that_raises_rejects() -> None:
    def broken(args: Mapping[str, Any]) -> bool:
        raise KeyError('path')

    with use_review_handler(RuleBasedReviewHandler([ApprovalRule.allow('*', when=broken)], default='approve')):
        result = await gated_echo().call('x')
    assert result.error == "Rejected by reviewer: x (rule 0 (approve '*' when " \
        "test_rule_predicate_that_raises_rejects.<locals>.broken) failed: KeyError: 'path')"


@pytest.mark.parametrize(('build', 'error', 'message'), [
    (lambda: ApprovalRule(''), UserError, 'non-empty glob'),
    (lambda: ApprovalRule('x', action='maybe'), UserError, "'approve' or 'reject'"),  # type: ignore[arg-type]
    (lambda: ApprovalRule('x', when='yes'), UserError, 'function of the arguments'),  # type: ignore[arg-type]
    (lambda: RuleBasedReviewHandler(['allow *']), UserError, 'Rule at index 0'),  # type: ignore[list-item]
    (lambda: RuleBasedReviewHandler([], default='ask'), UserError, "default must be 'approve'"),  # type: ignore[arg-type]
    (lambda: ReviewDecision('maybe'), UserError, 'kind must be one of'),  # type: ignore[arg-type]
    (lambda: ReviewDecision('edit'), UserError, 'needs the revised input'),
    (lambda: requires_approval(gated_echo(), timeout=-1), ToolConfigurationError, 'must be a number of seconds > 0'),
    (lambda: requires_approval(gated_echo(), on_timeout='wait'), ToolConfigurationError,  # type: ignore[call-overload]
     'on_timeout'),
    (lambda: requires_approval(42), UserError, 'needs a Tool or a function'),  # type: ignore[call-overload]
    (lambda: ConsoleReviewHandler(max_chars=0), UserError, 'max_chars of ConsoleReviewHandler must be an int >= 1'),
])
def test_bad_configuration_is_rejected(build: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        build()


async def test_requires_approval_wraps_any_tool_and_gates_once() -> None:
    plain = TextTool.from_function('archive', 'archives', lambda text: f'archived {text}')
    gated = requires_approval(plain)
    assert gated.definition.metadata.requires_approval and not plain.definition.metadata.requires_approval
    assert (gated.name, gated.definition.parameters) == (plain.name, plain.definition.parameters)
    handler = Recorder()
    with use_review_handler(handler):
        assert (await gated.call('x')).output == 'archived x'
    assert len(handler.requests) == 1
    assert GLOBAL_METRICS.stats('archive').calls == 1  # recorded once, under the tool's own name
    assert requires_approval(gated) is gated
    assert repr(gated).startswith('requires_approval(TextTool(')


async def test_requires_approval_as_decorator_and_on_functions() -> None:
    @requires_approval
    @tool
    def purge(days: int) -> str:
        """Purge old rows."""
        return f'purged {days}'

    @requires_approval(timeout=5)
    def compact(level: int) -> str:
        """Compact the store."""
        return f'compacted {level}'

    handler = Recorder()
    with use_review_handler(handler):
        assert (await purge.call({'days': 3})).output == 'purged 3'
        assert (await compact.call({'level': 2})).output == 'compacted 2'
    assert [(r.tool_name, r.timeout) for r in handler.requests] == [('purge', 300.0), ('compact', 5)]

    @tool(requires_approval=True)
    def drop(table: str) -> str:
        """Drop a table."""
        return table

    assert drop.definition.metadata.requires_approval
    with pytest.raises(ToolConfigurationError):
        await drop.call({'table': 't'})


def test_call_sync_sees_the_installed_handler() -> None:
    handler = Recorder()
    with use_review_handler(handler):
        assert gated_echo().call_sync('x').output == 'wrote x'
    assert len(handler.requests) == 1


async def test_every_decision_is_logged_and_recorded(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger='toolweave.approval')
    with record_approvals() as outer:
        with use_review_handler(Recorder(ReviewDecision.edit('safe'))), record_approvals() as inner:
            await gated_echo('editor').call('risky')
        with use_review_handler(Recorder(ReviewDecision.reject('nope'))):
            await gated_echo('rejecter').call('x')
    assert [r.outcome for r in inner] == ['edited']
    assert [(r.tool_name, r.outcome, r.handler) for r in outer] == [('editor', 'edited', 'Recorder'),
                                                                    ('rejecter', 'rejected', 'Recorder')]
    first = outer.to_list()[0]
    assert (first['tool'], first['arguments'], first['revised'], first['decision']) == ('editor', 'risky', 'safe',
                                                                                         'edit')
    assert first['seconds'] >= 0 and first['decided_at'].endswith('+00:00')
    assert outer.for_tool('rejecter')[0].decision.reason == 'nope'
    messages = [r.getMessage() for r in caplog.records if r.name == 'toolweave.approval']
    assert messages[0].startswith("Review of 'editor' by Recorder: edited in ") and 'revised: safe' in messages[0]
    assert messages[1].startswith("Review of 'rejecter' by Recorder: rejected in ") and 'reason: nope' in messages[1]
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == 'toolweave.approval')


async def test_context_reaches_the_reviewer() -> None:
    handler = Recorder()
    with use_review_handler(handler):
        await gated_echo().call('x', ToolCallContext.of(user='ada'))
    assert handler.requests[0].context['user'] == 'ada'


async def test_cancelled_review_cancels_the_call() -> None:
    gated = gated_echo()
    with use_review_handler(Recorder(delay=30)), anyio.move_on_after(0.1) as scope:
        await gated.call('x')
    assert scope.cancelled_caught


async def test_agent_runs_gated_tools_through_its_handler_and_ap9_propagates() -> None:
    from toolweave import Agent
    from toolweave.testing import ScriptedModel

    gated = gated_echo()
    pipeline = ToolPipeline.of('save_report', 'Tidy and write a report',
                               TextTool.from_function('tidy', 'tidies', lambda t: t.strip()), gated)
    script: list[str | dict[str, Any]] = [{'tool': 'save_report', 'arguments': {'input': '  q3.txt '}}, 'Saved.']
    handler = Recorder()
    with record_approvals() as log:
        result = await Agent(ScriptedModel(script), tools=[pipeline], review_handler=handler).run('save it')
    assert 'Saved.' in str(result.output)
    assert [r.arguments for r in handler.requests] == [{'input': 'q3.txt'}]
    assert [r.outcome for r in log] == ['approved']
    with pytest.raises(ToolConfigurationError, match="Tool 'write_file' requires approval"):
        await Agent(ScriptedModel(script), tools=[pipeline]).run('save it')


async def test_wrapper_keeps_the_call_behaviour_of_the_tool_it_wraps() -> None:
    from toolweave import DelegatingTool

    class Counting(DelegatingTool):
        calls = 0

        async def execute(self, arguments: Any, context: ToolCallContext) -> ToolResult:
            Counting.calls += 1
            return await super().execute(arguments, context)

    gated = requires_approval(Counting(TextTool.from_function('counted', 'c', str.upper)))
    with use_review_handler(Recorder()):
        assert (await gated.call('x')).output == 'X'
    with use_review_handler(Recorder(ReviewDecision.reject())):
        assert not (await gated.call('y')).ok
    assert Counting.calls == 1  # approved once; the rejected call never reached the tool
    assert (GLOBAL_METRICS.stats('counted').successes, GLOBAL_METRICS.stats('counted').failures) == (1, 1)


async def test_rewrapping_a_gated_tool_sets_its_options_without_a_second_gate() -> None:
    handler = Recorder()
    twice = requires_approval(requires_approval(gated_echo('opt'), timeout=9), timeout=4, on_timeout='continue')
    with use_review_handler(handler):
        assert (await twice.call('x')).output == 'wrote x'
    assert [(r.timeout, r.on_timeout) for r in handler.requests] == [(4, 'continue')]  # outermost options win
    assert twice.definition.metadata.extra['approval'] == {'timeout': 4, 'on_timeout': 'continue'}


async def test_gated_pipeline_still_gates_a_step_with_the_same_name() -> None:
    handler = Recorder()
    gated = requires_approval(ToolPipeline.of(gated_echo('solo')))
    assert gated.name == 'solo'
    with use_review_handler(handler):
        assert (await gated.call('x')).output == 'wrote x'
    assert len(handler.requests) == 2  # the pipeline's gate and its step's own gate


async def test_approval_records_are_json_data_even_for_odd_arguments() -> None:
    import json
    from datetime import date

    class Odd:
        def __repr__(self) -> str:
            return 'Odd()'

    with record_approvals() as log, use_review_handler(Recorder()):
        await request_approval('export', tool_name='export', arguments={'day': date(2026, 1, 2), 'obj': Odd()})
    row = json.loads(json.dumps(log.to_list()))[0]
    assert row['arguments'] == {'day': '2026-01-02', 'obj': 'Odd()'} and row['outcome'] == 'approved'
    assert repr(log) == 'ApprovalLog(1 records)'


async def test_plain_def_review_is_accepted() -> None:
    class SyncReviewer:
        def review(self, request: ReviewRequest) -> ReviewDecision:
            return ReviewDecision.edit('from sync')

    with use_review_handler(SyncReviewer()):  # type: ignore[arg-type]
        assert (await gated_echo().call('x')).output == 'wrote from sync'


async def test_requires_approval_on_method_tools_keeps_binding_and_discovery() -> None:
    from toolweave import FunctionTool, tools_from

    class Files:
        def __init__(self) -> None:
            self.deleted: list[str] = []

        @requires_approval(timeout=30)
        @tool
        def delete(self, path: str) -> str:
            """Delete a file."""
            self.deleted.append(path)
            return f'deleted {path}'

    files = Files()
    (found,) = tools_from(files)
    assert isinstance(found, FunctionTool) and found.definition.metadata.requires_approval
    # `requires_approval(timeout=...)` is typed to return a plain Tool; the method is still a FunctionTool.
    assert isinstance(files.delete, FunctionTool)
    assert files.delete('/direct') == 'deleted /direct'  # still callable as the method
    handler = Recorder()
    with use_review_handler(handler):
        assert (await found.call({'path': '/a'})).output == 'deleted /a'
    assert files.deleted == ['/direct', '/a'] and [r.timeout for r in handler.requests] == [30]
    with pytest.raises(ToolConfigurationError, match="Tool 'delete' requires approval"):
        await found.call({'path': '/b'})


# --- the gate sees the tool the model called -----------------------------------------------------------------


async def test_gating_a_prefixed_tool_reviews_the_prefixed_name_with_its_timeout() -> None:
    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        return f'deleted {path}'

    gated = requires_approval(Toolset([delete]).prefixed('fs').get('fs_delete'), timeout=5)
    handler = Recorder()
    with use_review_handler(handler):
        assert (await gated.call({'path': '/tmp/x'})).output == 'deleted /tmp/x'
    [request] = handler.requests
    assert (request.tool_name, request.timeout) == ('fs_delete', 5)
    assert request.description == 'fs_delete: {"path":"/tmp/x"}'


# --- nested reviewers: the stricter decision wins ------------------------------------------------------------


async def test_a_pipelines_own_auto_approver_does_not_override_a_rejecting_reviewer() -> None:
    pipeline = ToolPipeline([gated_echo('write')], name='writer', review_handler=AutoApproveHandler())
    outer = Recorder(ReviewDecision.reject('not today'))
    with use_review_handler(outer):
        result = await pipeline.call('x')
    assert not result.ok and 'Rejected by reviewer' in (result.error or '')
    assert [r.tool_name for r in outer.requests] == ['write']


async def test_a_plans_own_auto_approver_does_not_override_a_rejecting_reviewer() -> None:
    from toolweave import run_plan

    plan = {'steps': [{'id': 'a', 'tool': 'write', 'arguments': {'input': 'x'}}]}
    with use_review_handler(Recorder(ReviewDecision.reject())):
        run = await run_plan(plan, [gated_echo('write')], review_handler=AutoApproveHandler())
    assert run.steps[0].status == 'failed' and 'Rejected by reviewer' in (run.steps[0].error or '')


async def test_asking_from_a_tool_body_with_no_reviewer_is_a_configuration_error() -> None:
    with pytest.raises(ToolConfigurationError, match='no ReviewHandler is configured'):
        await request_approval('send email: hello', tool_name='send_email')


async def test_nested_reviewers_review_innermost_first_and_an_edit_reaches_the_next() -> None:
    outer, inner = Recorder(), Recorder(ReviewDecision.edit('safer.txt'))
    with record_approvals() as log, use_review_handler(outer), use_review_handler(inner):
        assert (await gated_echo().call('notes.txt')).output == 'wrote safer.txt'
    assert [r.arguments for r in inner.requests] == ['notes.txt']
    assert [(r.arguments, r.description) for r in outer.requests] == [('safer.txt', 'write_file: safer.txt')]
    assert [(r.handler, r.outcome) for r in log] == [('Recorder', 'edited'), ('Recorder', 'approved')]


async def test_an_inner_rejection_stops_before_the_outer_reviewer_is_asked() -> None:
    outer, inner = Recorder(), Recorder(ReviewDecision.reject('policy'))
    with use_review_handler(outer), use_review_handler(inner):
        assert (await gated_echo().call('x')).error == 'Rejected by reviewer: x (policy)'
    assert outer.requests == []


async def test_a_sub_agents_own_auto_approver_does_not_override_the_parents_rejecting_reviewer() -> None:
    from toolweave import Agent
    from toolweave.testing import ScriptedModel

    gated = gated_echo('write')
    child = Agent(ScriptedModel([{'tool': 'write', 'arguments': {'input': 'x'}}, 'child done']), tools=[gated],
                  name='child', review_handler=AutoApproveHandler())
    parent_reviewer = Recorder(ReviewDecision.reject('not from a sub-agent'))
    parent = Agent(ScriptedModel([{'tool': 'child', 'arguments': {'prompt': 'write it'}}, 'parent done']),
                   tools=[child.as_tool()], review_handler=parent_reviewer)
    result = await parent.run('go')
    decisions = [(record.handler, record.outcome) for record in result.approvals if record.tool_name == 'write']
    assert decisions == [('AutoApproveHandler', 'approved'), ('Recorder', 'rejected')]  # innermost first
    assert [r.tool_name for r in parent_reviewer.requests] == ['write']


async def test_a_reviewer_installed_again_inside_its_own_block_reviews_once() -> None:
    from toolweave import Agent
    from toolweave.testing import FunctionModel

    reviewer = Recorder()
    with use_review_handler(reviewer), use_review_handler(reviewer):
        assert (await gated_echo().call('x')).ok
    assert len(reviewer.requests) == 1

    def reply(messages: list[Any], tools: list[Any]) -> Any:  # the top run asks itself; the nested run writes
        if messages[-1].role == 'tool':
            return 'done'
        if messages[-1].content == 'nested':
            return {'tool': 'write_file', 'arguments': {'input': 'x'}}
        return {'tool': 'me', 'arguments': {'prompt': 'nested'}}

    agent = Agent(FunctionModel(reply), tools=[gated_echo()], name='me', review_handler=reviewer)
    agent.toolset.add(agent.as_tool())
    await agent.run('go')  # the nested run installs the same reviewer again: it reviews the write once
    assert [r.tool_name for r in reviewer.requests] == ['write_file', 'write_file']  # the block above, then this


async def test_the_current_reviewers_are_listed_outermost_first() -> None:
    from toolweave.approval import current_review_handlers

    first, second = Recorder(), AutoApproveHandler()
    assert current_review_handlers() == ()
    with use_review_handler(first), use_review_handler(None), use_review_handler(second):
        assert current_review_handlers() == (first, second)
