from __future__ import annotations

import logging

import pytest

from toolweave import (
    GLOBAL_METRICS,
    ExitEarly,
    Tool,
    ToolCallContext,
    ToolConfigurationError,
    ToolDefinition,
    ToolNameError,
    ToolResult,
)
from toolweave.tools import ToolArguments

pytestmark = pytest.mark.anyio


class Body(Tool):
    def __init__(self, name: str, behaviour: BaseException | ToolResult) -> None:
        self._definition = ToolDefinition(name, 'test tool')
        self.behaviour = behaviour
        self.seen: list[ToolCallContext] = []

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        self.seen.append(context)
        if isinstance(self.behaviour, BaseException):
            raise self.behaviour
        return self.behaviour


async def test_exception_becomes_failure_with_its_message() -> None:
    result = await Body('boom', RuntimeError('Service unavailable')).call('{}')
    assert (result.ok, result.error, result.raised, result.text) == (
        False, 'Service unavailable', True, 'Error: Service unavailable')


async def test_exception_without_message_is_normalised() -> None:
    result = await Body('boom', RuntimeError()).call()
    assert result.text == 'Error: Tool execution failed with no message'


@pytest.mark.parametrize('signal', [ToolConfigurationError('bad config'), ExitEarly('stop')])
async def test_configuration_errors_and_signals_propagate(signal: Exception) -> None:
    with pytest.raises(type(signal)):
        await Body('sig', signal).call()


async def test_context_defaults_to_empty_and_mappings_are_wrapped() -> None:
    tool = Body('ctx', ToolResult.success('ok'))
    await tool.call()
    await tool.call(None, {'tenant': 'acme'})
    assert tool.seen[0] is ToolCallContext.EMPTY
    assert tool.seen[1] == ToolCallContext.of(tenant='acme')


async def test_metrics_and_logging(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger='toolweave.tools')
    await Body('good', ToolResult.success('fine')).call('{"x": 1}')
    await Body('bad', ToolResult.failure('nope')).call('{"x": 2}')
    assert (GLOBAL_METRICS.stats('good').successes, GLOBAL_METRICS.stats('bad').failures) == (1, 1)
    levels = [(r.levelname, r.getMessage().split(' |')[0]) for r in caplog.records]
    assert levels[0][0] == 'INFO' and "Tool 'good' succeeded in" in levels[0][1]
    assert levels[1][0] == 'WARNING' and "Tool 'bad' failed in" in levels[1][1]


def test_call_sync() -> None:
    assert Body('s', ToolResult.success('x')).call_sync().output == 'x'


@pytest.mark.parametrize('name', ['', '  ', 'web search', 'a.b', '名前', 'x' * 65])
def test_bad_names_rejected_with_rule(name: str) -> None:
    with pytest.raises(ToolNameError, match=r'\^\[A-Za-z0-9_-\]\{1,64\}\$'):
        ToolDefinition(name)


@pytest.mark.parametrize('name', ['web_search', 'calc2', '_x', 'web-search', 'x' * 64])
def test_good_names_accepted(name: str) -> None:
    assert ToolDefinition(name).name == name


# --- the seam: one call per call, at the outermost layer ----------------------------------------------------------


def test_a_tool_that_overrides_call_is_rejected_when_its_class_is_defined() -> None:
    from toolweave import UserError

    with pytest.raises(UserError, match='overrides `Tool.call`.*override `execute'):
        class Sneaky(Tool):
            @property
            def definition(self) -> ToolDefinition:
                return ToolDefinition('sneaky')

            async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
                return ToolResult.success()

            async def call(self, arguments: ToolArguments = None, context: object = None) -> ToolResult:  # type: ignore[misc]
                return await self.execute(arguments, ToolCallContext.EMPTY)


async def test_an_execute_that_returns_something_else_is_a_configuration_error() -> None:
    class Sloppy(Tool):
        @property
        def definition(self) -> ToolDefinition:
            return ToolDefinition('sloppy')

        async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
            return 'done'  # type: ignore[return-value]

    with pytest.raises(ToolConfigurationError, match=r'Sloppy.execute returned str .* must return a ToolResult'):
        await Sloppy().call()


async def test_layers_are_seen_through_and_a_call_is_recorded_once_under_the_outer_name() -> None:
    from toolweave import AutoApproveHandler, DelegatingTool, requires_approval, use_metrics, use_review_handler
    from toolweave.testing import FakeTool, RecordingReviewHandler

    inner = requires_approval(FakeTool('delete', 'deleted'))
    outer = DelegatingTool(inner).with_description('Deletes, carefully.')
    assert [type(layer).__name__ for layer in outer.layers()] == [
        '_RedefinedTool', 'DelegatingTool', 'ApprovalRequiredTool', 'FakeTool']
    assert outer.layer(FakeTool) is inner.layer(FakeTool) and outer.layer(ExitEarly) is None
    assert outer.requires_approval and not FakeTool('plain').requires_approval
    reviewer = RecordingReviewHandler()
    with use_metrics() as metrics, use_review_handler(reviewer):
        assert (await outer.call('{}')).output == 'deleted'
    assert len(reviewer.requests) == 1 and metrics.snapshot().keys() == {'delete'}
    assert metrics.stats('delete').calls == 1
    with pytest.raises(ToolConfigurationError, match="Tool 'delete' requires approval"):
        await DelegatingTool(inner).call('{}')  # a plain wrapper cannot hide the gate
    with use_review_handler(AutoApproveHandler()):
        assert (await DelegatingTool(inner).call('{}')).ok
