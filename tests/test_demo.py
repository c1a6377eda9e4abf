"""`toolweave demo`, the demo scenarios, and `toolweave chat` (through the CLI, with no API key)."""

from __future__ import annotations

import json
import re
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import toolweave.models
from toolweave.cli._app import app
from toolweave.testing.scenarios import MODES, SCENARIOS, resolve_refs, run_scenario

runner = CliRunner()


def test_demo_prints_every_scenario_with_numbers_and_timelines() -> None:
    result = runner.invoke(app, ['demo', '--speed', '40', '--width', '120'])
    assert result.exit_code == 0, result.output
    out = result.output
    assert 'no API key' in out and '400 ms per LLM call' in out and '100 ms per tool call' in out
    for scenario in SCENARIOS:
        assert scenario.title in out
    # per scenario: LLM calls tool by tool vs 2 with a plan
    llm_rows = re.findall(r'LLM calls\s+│\s+(\d+) │\s+(\d+) │', out)
    assert llm_rows == [('4', '2'), ('5', '2'), ('6', '2'), ('12', '2')]
    assert out.count('input tokens (est.)') == 4 and out.count('wall time') >= 4
    assert 'Answer: cpu_usage is 87.5%, above the 80% threshold.' in out
    assert 'Best mover ASML, worst AAPL' in out
    assert 'All scenarios' in out and 'differently' not in out
    assert 'summary' in out and 'asml' in out  # the fan-out plan's timeline rows


def test_demo_one_scenario_without_timeline() -> None:
    result = runner.invoke(app, ['demo', '-s', 'chain', '--speed', '50', '--no-timeline', '--width', '100'])
    assert result.exit_code == 0, result.output
    assert 'A 5-step chain' in result.output and 'Weather' not in result.output
    assert 'All scenarios' not in result.output and 'fetch    0' not in result.output


def test_demo_rejects_an_unknown_scenario_and_bad_speed() -> None:
    result = runner.invoke(app, ['demo', '-s', 'nope'])
    assert result.exit_code == 2 and 'unknown scenario' in result.output
    assert runner.invoke(app, ['demo', '--speed', '0']).exit_code == 2


@pytest.mark.anyio
@pytest.mark.parametrize('scenario', SCENARIOS, ids=lambda s: s.name)
async def test_every_mode_gives_the_same_answer(scenario: Any) -> None:
    runs = {mode: await run_scenario(scenario, mode, llm_latency=0, tool_latency=0) for mode in MODES}
    assert len({run.result.output for run in runs.values()}) == 1
    plan = runs['plan']
    assert plan.llm_calls == 2 and plan.model_tool_calls == 1 and plan.result.plan_runs[0].ok
    by_tool = runs['tool_by_tool']
    assert by_tool.llm_calls == len(scenario.steps) + 1 and by_tool.model_tool_calls == len(scenario.steps)
    assert plan.tool_calls == by_tool.tool_calls == len(scenario.steps)
    # the scripted tool-by-tool model re-sends a growing history: input tokens per request increase
    assert by_tool.input_tokens > 0 and plan.input_tokens > 0


@pytest.mark.anyio
async def test_chain_and_fanout_meet_the_targets() -> None:
    chain = {m: await run_scenario(SCENARIOS[2], m, llm_latency=0, tool_latency=0) for m in ('tool_by_tool', 'plan')}
    assert chain['plan'].input_tokens <= 0.40 * chain['tool_by_tool'].input_tokens
    fan = {m: await run_scenario(SCENARIOS[3], m, llm_latency=0.05, tool_latency=0.0125)
           for m in ('tool_by_tool', 'plan')}
    assert fan['tool_by_tool'].wall_time >= 3 * fan['plan'].wall_time


def test_resolve_refs_reads_paths() -> None:
    results = {'a': {'items': [{'n': 1}, {'n': 2}]}, 'b': 'text'}
    assert resolve_refs({'x': '$ref:a.items[-1].n', 'y': ['$ref:b'], 'z': 'plain'}, results) == {
        'x': 2, 'y': ['text'], 'z': 'plain'}


# --- toolweave chat ------------------------------------------------------------------------------------------------


@pytest.fixture
def chat_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / 'chatfixture.py').write_text(textwrap.dedent("""
        from toolweave import current_process, tool
        from toolweave.testing import FakeTool, ScriptedModel

        @tool
        async def notify() -> str:
            '''Tell the user something while working.'''
            current_process().report_progress('working on it')
            current_process().send_message('Heads up: this takes a moment.')
            return 'notified'

        MODEL = ScriptedModel([
            [{'tool': 'lookup', 'arguments': {'q': 'x'}}, {'tool': 'notify', 'arguments': {}}],
            'It is 42.',
            'You asked about x.',
        ])
        PLAN_MODEL = ScriptedModel([
            {'tool': 'execute_tool_plan', 'arguments': {'steps': [
                {'id': 'a', 'tool': 'lookup', 'arguments': '{"q": "x"}'},
                {'id': 'b', 'tool': 'nope', 'arguments': '{}'}]}},
            {'tool': 'execute_tool_plan', 'arguments': {'steps': [
                {'id': 'a', 'tool': 'lookup', 'arguments': '{"q": "x"}'}]}},
            'Planned.',
        ])
        TOOLS = [FakeTool('lookup', '42'), notify]
        NOT_A_MODEL = 7
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, 'chatfixture', raising=False)  # fresh scripted models for every test
    return 'chatfixture'


def test_chat_reads_prompts_until_end_of_input(chat_module: str) -> None:
    result = runner.invoke(app, ['chat', '--model', f'{chat_module}:MODEL', '--tools', f'{chat_module}:TOOLS'],
                           input='What is it?\n\nAnd what did I ask?\n')
    assert result.exit_code == 0, result.output
    out = result.output
    assert '-> lookup({"q":"x"})' in out and '<- lookup' in out and ': 42' in out
    assert 'assistant> It is 42.' in out and 'assistant> You asked about x.' in out
    assert '.. working on it' in out and 'assistant (from a tool)> Heads up: this takes a moment.' in out
    assert '2 LLM calls' in out and '1 LLM calls' in out and '2 tool calls' in out


def test_chat_shows_plan_steps_and_plan_errors(chat_module: str) -> None:
    result = runner.invoke(app, ['chat', '--model', f'{chat_module}:PLAN_MODEL', '--tools', f'{chat_module}:TOOLS',
                                 '--plan'], input='Plan it\n')
    assert result.exit_code == 0, result.output
    out = result.output
    assert 'tools: lookup, notify, execute_tool_plan' in out
    assert 'Plan execution failed' in out and "unknown tool 'nope'" in out.lower()
    assert 'step a (lookup) succeeded: 42' in out
    assert 'assistant> Planned.' in out


def test_chat_rejects_bad_models_and_tools(chat_module: str) -> None:
    bad_provider = runner.invoke(app, ['chat', '--model', 'nonsense:model'], input='')
    assert bad_provider.exit_code == 2 and 'Unknown model provider' in bad_provider.output
    not_model = runner.invoke(app, ['chat', '--model', f'{chat_module}:NOT_A_MODEL'], input='')
    assert not_model.exit_code == 2 and 'not a Model' in not_model.output
    bad_tools = runner.invoke(app, ['chat', '--model', f'{chat_module}:MODEL', '--tools', 'no_such_module:X'],
                              input='')
    assert bad_tools.exit_code == 2 and 'no_such_module' in bad_tools.output


class _ChatCompletions(BaseHTTPRequestHandler):
    """A local OpenAI-compatible server: a tool call first, then a text answer (the real wire format; server-sent
    events when the request asks to stream)."""

    bodies: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        type(self).bodies.append(body)
        if not any(m['role'] == 'tool' for m in body['messages']):
            message: dict[str, Any] = {'role': 'assistant', 'content': None, 'tool_calls': [
                {'id': 'call_a', 'type': 'function', 'function': {'name': 'lookup', 'arguments': '{"q":"x"}'}}]}
            finish = 'tool_calls'
        else:
            message, finish = {'role': 'assistant', 'content': 'The answer is 42.'}, 'stop'
        usage = {'prompt_tokens': 50, 'completion_tokens': 7, 'total_tokens': 57}
        if body.get('stream'):
            head = {'id': 'chatcmpl-1', 'object': 'chat.completion.chunk', 'created': 1763791200,
                    'model': 'local-model'}
            calls = [{'index': i, **call} for i, call in enumerate(message.get('tool_calls', []))]
            delta = {'role': 'assistant', 'content': message['content'], **({'tool_calls': calls} if calls else {})}
            chunks = [{**head, 'choices': [{'index': 0, 'delta': delta, 'finish_reason': None}]},
                      {**head, 'choices': [{'index': 0, 'delta': {}, 'finish_reason': finish}]},
                      {**head, 'choices': [], 'usage': usage}]
            data = b''.join(b'data: ' + json.dumps(chunk).encode() + b'\n\n' for chunk in chunks) + b'data: [DONE]\n\n'
            content_type = 'text/event-stream'
        else:
            payload = {'id': 'chatcmpl-1', 'object': 'chat.completion', 'created': 1763791200,
                       'model': 'local-model', 'choices': [{'index': 0, 'message': message, 'finish_reason': finish}],
                       'usage': usage}
            data, content_type = json.dumps(payload).encode(), 'application/json'
        self.send_response(200)
        self.send_header('Content-Type', content_type)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def local_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(toolweave.models, 'ALLOW_MODEL_REQUESTS', True)
    monkeypatch.setenv('OPENAI_API_KEY', 'sk-local-test')
    for proxy in ('HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'all_proxy'):
        monkeypatch.delenv(proxy, raising=False)  # the server is on localhost
    _ChatCompletions.bodies = []
    server = HTTPServer(('127.0.0.1', 0), _ChatCompletions)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f'http://127.0.0.1:{server.server_port}/v1'
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_chat_with_a_real_openai_compatible_server(chat_module: str, local_server: str) -> None:
    result = runner.invoke(app, ['chat', '--model', f'openai-compatible:local-model@{local_server}',
                                 '--tools', f'{chat_module}:TOOLS'], input='What is it?\n')
    assert result.exit_code == 0, result.output
    assert 'assistant> The answer is 42.' in result.output
    assert '2 LLM calls, 100 in / 14 out tokens, 1 tool calls' in result.output  # provider-reported usage
    first, second = _ChatCompletions.bodies
    assert first['stream'] is True and first['tool_choice'] == 'auto'
    assert first['tools'][0]['function']['name'] == 'lookup'
    assert second['messages'][-1]['role'] == 'tool' and second['messages'][-1]['content'] == '42'


def test_chat_with_plan_offers_the_meta_tool(chat_module: str, local_server: str) -> None:
    result = runner.invoke(app, ['chat', '--model', f'openai-compatible:local-model@{local_server}',
                                 '--tools', f'{chat_module}:TOOLS', '--plan'], input='Hi\n')
    assert result.exit_code == 0, result.output
    names = [t['function']['name'] for t in _ChatCompletions.bodies[0]['tools']]
    assert names == ['lookup', 'notify', 'execute_tool_plan']
    assert '# Tool Planning' in _ChatCompletions.bodies[0]['messages'][0]['content']



def test_example_program_runs_a_custom_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    from examples.demo_scenarios import INVENTORY, main

    runs = main(['--speed', '200'])
    assert {run.scenario for run in runs} == {s.name for s in SCENARIOS} | {INVENTORY.name}
    custom = [run for run in runs if run.scenario == 'inventory']
    assert [run.llm_calls for run in custom] == [5, 3, 2]
    assert 'inventory: Reorder: SKU-DESK-120.' in capsys.readouterr().out
