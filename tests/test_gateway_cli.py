"""`toolweave gateway` as MCP clients run it: a real process on stdio (the official `mcp` SDK client, the MCP
Inspector's CLI mode) or streamable HTTP, in front of `mcp-server-time` and `mcp-server-git` from PyPI and
`@modelcontextprotocol/server-everything` from npm; `--check`; config errors; and clean shutdown on EOF,
SIGINT and SIGTERM."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TOOLWEAVE = shutil.which('toolweave', path=str(BIN)) or 'toolweave'
TIME_SERVER = shutil.which('mcp-server-time', path=str(BIN))
GIT_SERVER = shutil.which('mcp-server-git', path=str(BIN))
UPSTREAM = str(Path(__file__).with_name('gateway_upstream.py'))
NPM = Path(os.environ.get('TOOLWEAVE_MCP_NPM_PREFIX', ROOT / '.mcp-npm')) / 'node_modules/@modelcontextprotocol'
EVERYTHING = NPM / 'server-everything/dist/index.js'
INSPECTOR = NPM / 'inspector/cli/build/cli.js'
NODE = shutil.which('node')
GIT_ENV = {'GIT_AUTHOR_NAME': 'T', 'GIT_AUTHOR_EMAIL': 't@example.com', 'GIT_COMMITTER_NAME': 'T',
           'GIT_COMMITTER_EMAIL': 't@example.com'}

needs_pypi_servers = pytest.mark.skipif(TIME_SERVER is None or GIT_SERVER is None or shutil.which('git') is None,
                                        reason='mcp-server-time, mcp-server-git or git is not installed')
needs_everything = pytest.mark.skipif(NODE is None or not EVERYTHING.is_file(), reason=(
    f'node or @modelcontextprotocol/server-everything is not installed (npm install --prefix .mcp-npm '
    f'@modelcontextprotocol/server-everything; looked for {EVERYTHING})'))
needs_inspector = pytest.mark.skipif(NODE is None or not INSPECTOR.is_file(), reason=(
    f'node or the MCP Inspector is not installed (npm install --prefix .mcp-npm @modelcontextprotocol/inspector; '
    f'looked for {INSPECTOR})'))


@pytest.fixture
def anyio_backend() -> str:
    return 'asyncio'


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / 'repo'
    path.mkdir()
    (path / 'notes.txt').write_text('hello\n')
    subprocess.run(['git', 'init', '-q', str(path)], check=True)
    return path


def write_config(tmp_path: Path, servers: dict[str, Any], **options: Any) -> Path:
    path = tmp_path / 'mcp.json'
    path.write_text(json.dumps({'mcpServers': servers, 'toolweave': options}))
    return path


def pypi_servers(repo: Path) -> dict[str, Any]:
    assert TIME_SERVER is not None and GIT_SERVER is not None
    return {'time': {'command': TIME_SERVER, 'args': ['--local-timezone', 'UTC']},
            'git': {'command': GIT_SERVER, 'args': ['--repository', str(repo)], 'env': GIT_ENV}}


def gateway_args(config: Path, logs: Path, *extra: str) -> list[str]:
    return ['gateway', '--config', str(config), '--log-dir', str(logs), *extra]


# the SDK client over stdio


@needs_pypi_servers
async def test_one_plan_across_time_and_git_over_stdio(tmp_path: Path, repo: Path) -> None:
    config = write_config(tmp_path, pypi_servers(repo))
    plan = {'steps': [
        {'id': 'now', 'tool': 'get_current_time', 'arguments': '{"timezone": "UTC"}'},
        {'id': 'add', 'tool': 'git_add', 'arguments': json.dumps({'repo_path': str(repo), 'files': ['notes.txt']})},
        {'id': 'commit', 'tool': 'git_commit', 'arguments': json.dumps(
            {'repo_path': str(repo), 'message': 'noted at {{$ref:now.datetime}} ({{$ref:add}})'})},
    ], 'output_steps': ['commit']}
    parameters = StdioServerParameters(command=TOOLWEAVE, args=gateway_args(config, tmp_path / 'logs'))
    async with Client(parameters) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        result = await client.call_tool('execute_tool_plan', plan)
    assert {'execute_tool_plan', 'get_current_time', 'git_commit', 'git_status'} <= set(names)
    assert not result.is_error and result.structured_content is not None
    assert result.structured_content['errors'] == {}
    subject = (await anyio.run_process(['git', '-C', str(repo), 'log', '-1', '--format=%s'])).stdout.decode().strip()
    assert subject.startswith('noted at 20') and subject.endswith('+00:00 (Files staged successfully)')
    assert (tmp_path / 'logs' / 'git.log').read_text().startswith('--- ')  # upstream stderr goes to its log


@needs_everything
async def test_server_everything_behind_the_gateway_over_stdio(tmp_path: Path) -> None:
    assert NODE is not None
    upstream = {'command': NODE, 'args': [str(EVERYTHING), 'stdio']}
    config = write_config(tmp_path, {'everything': upstream})
    direct_parameters = StdioServerParameters(command=NODE, args=[str(EVERYTHING), 'stdio'])
    # The gateway declares sampling, elicitation and roots upstream (it passes them on), so server-everything
    # lists the tools that need them: a direct client declaring the same sees the same list.
    async with Client(direct_parameters, **capable_callbacks()) as direct:
        listed = {tool.name: tool for tool in (await direct.list_tools()).tools}
        image = await direct.call_tool('get-tiny-image', {})
        structured = await direct.call_tool('get-structured-content', {'location': 'New York'})
    parameters = StdioServerParameters(command=TOOLWEAVE, args=gateway_args(config, tmp_path / 'logs'))
    async with Client(parameters) as client:
        served = {tool.name: tool for tool in (await client.list_tools()).tools}
        image_through = await client.call_tool('get-tiny-image', {})
        structured_through = await client.call_tool('get-structured-content', {'location': 'New York'})
    assert set(served) == {'execute_tool_plan', *listed}
    assert {'trigger-sampling-request', 'trigger-elicitation-request', 'get-roots-list',
            'simulate-research-query'} <= set(served)
    for name in listed:  # a task-augmented tool is listed without `execution`: the gateway makes the task calls
        assert served[name].model_copy(update={'execution': None}) == listed[name].model_copy(
            update={'execution': None}), name
        assert served[name].execution is None
    assert image_through.content == image.content and image_through.content[1].type == 'image'
    assert structured_through.structured_content == structured.structured_content is not None


def capable_callbacks() -> dict[str, Any]:
    """Client callbacks that declare sampling, elicitation and roots (none of them is called here)."""
    async def refuse(*args: Any) -> Any:
        raise AssertionError('not asked in this test')

    return {'sampling_callback': refuse, 'elicitation_callback': refuse, 'list_roots_callback': refuse}


# the MCP Inspector's CLI mode (a TypeScript SDK client)


def inspect(config: Path, logs: Path, *method: str) -> Any:
    assert NODE is not None
    command = [NODE, str(INSPECTOR), '--cli', '--', TOOLWEAVE, *gateway_args(config, logs), *method]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@needs_inspector
@needs_pypi_servers
def test_the_mcp_inspector_lists_and_calls_through_the_gateway(tmp_path: Path, repo: Path) -> None:
    config = write_config(tmp_path, pypi_servers(repo))
    listed = inspect(config, tmp_path / 'logs', '--method', 'tools/list')
    steps = json.dumps([{'id': 'now', 'tool': 'get_current_time', 'arguments': '{"timezone": "Asia/Kolkata"}'},
                        {'id': 'st', 'tool': 'git_status', 'arguments': json.dumps({'repo_path': str(repo)})}])
    called = inspect(config, tmp_path / 'logs', '--method', 'tools/call', '--tool-name', 'execute_tool_plan',
                     '--tool-arg', f'steps={steps}')
    tools = {tool['name']: tool for tool in listed['tools']}
    assert tools['get_current_time']['annotations']['readOnlyHint'] is True
    assert 'outputSchema' in tools['get_current_time']
    assert called['isError'] is False and called['structuredContent']['errors'] == {}
    assert called['structuredContent']['results']['now']['datetime'].endswith('+05:30')
    assert 'notes.txt' in called['structuredContent']['results']['st']


# streamable HTTP


async def test_serving_over_streamable_http(tmp_path: Path) -> None:
    config = write_config(tmp_path, {'alpha': {'command': sys.executable, 'args': [UPSTREAM, 'sdk']}}, mode='search')
    with running([TOOLWEAVE, *gateway_args(config, tmp_path / 'logs', '--http', '127.0.0.1:0')]) as process:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert line.startswith('toolweave gateway: serving MCP at http://127.0.0.1:'), line
        url = line.rsplit(' ', 1)[1].strip()
        for mode in ('auto', 'legacy'):
            async with Client(url, mode=mode) as client:
                names = [tool.name for tool in (await client.list_tools()).tools]
                found = await client.call_tool('search_tools', {'query': 'add numbers'})
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    assert names == ['search_tools', 'describe_tools', 'execute_tool_plan']
    assert found.structured_content is not None and found.structured_content['tools'][0]['name'] == 'add'


# shutdown


@pytest.mark.parametrize('how', ['eof', 'sigterm', 'sigint'])
def test_shutdown_is_clean(tmp_path: Path, how: str) -> None:
    config = write_config(tmp_path, {name: {'command': sys.executable, 'args': [UPSTREAM, 'legacy']}
                                     for name in ('alpha', 'beta')})
    with running([TOOLWEAVE, *gateway_args(config, tmp_path / 'logs')]) as process:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {
            'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'test', 'version': '1'}}})
            + '\n')
        process.stdin.flush()
        answer = json.loads(process.stdout.readline())
        upstreams = _children(process.pid)
        stopping = time.perf_counter()
        if how == 'eof':
            process.stdin.close()
        else:
            process.send_signal(signal.SIGTERM if how == 'sigterm' else signal.SIGINT)
        code = process.wait(timeout=30)
        assert process.stderr is not None
        stderr = process.stderr.read()
    assert answer['result']['serverInfo']['name'] == 'toolweave-gateway'
    assert code == 0 and time.perf_counter() - stopping < 15
    assert 'Traceback' not in stderr and len(upstreams) == 2
    assert not [pid for pid in upstreams if Path(f'/proc/{pid}').exists() and not _zombie(pid)]


# --check and mistakes


def test_check_reports_each_server(tmp_path: Path) -> None:
    config = write_config(tmp_path, {'alpha': {'command': sys.executable, 'args': [UPSTREAM, 'sdk'],
                                               'toolweave': {'requireApproval': ['echo', 'add']}},
                                     'broken': {'command': '/nonexistent/server'}})
    done = subprocess.run([TOOLWEAVE, *gateway_args(config, tmp_path / 'logs', '--check')], capture_output=True,
                          text=True, timeout=60, env={**os.environ, 'COLUMNS': '400'})
    assert done.returncode == 1
    assert 'alpha' in done.stdout and 'up' in done.stdout and '17: add, ask, cancelled, die, echo' in done.stdout
    assert 'greet' in done.stdout and '1 + 1 templates' in done.stdout
    assert 'broken' in done.stdout and "No such file or directory: '/nonexistent/server'" in done.stdout
    # wipe: destructiveHint; touch: no annotations, so it may be destructive
    assert 'Asked for approval before each call: add, echo, touch, wipe.' in done.stdout
    assert 'Clients see 18 tools.' in done.stdout


def test_check_of_a_config_that_starts_no_server_says_so(tmp_path: Path) -> None:
    config = write_config(tmp_path, {'off': {'command': '/nonexistent/server', 'disabled': True}})
    done = subprocess.run([TOOLWEAVE, *gateway_args(config, tmp_path / 'logs', '--check')], capture_output=True,
                          text=True, timeout=60, env={**os.environ, 'COLUMNS': '200'})
    assert done.returncode == 0
    assert 'The config starts no server: none is listed, or every one is "disabled".' in done.stdout
    assert 'Clients see 1 tool.' in done.stdout


@pytest.mark.parametrize(('arguments', 'message'), [
    (['--config', '{missing}'], 'Cannot read the gateway config'),
    (['--config', '{config}', '--mode', 'all'], '--mode must be "tools" or "search", got \'all\''),
    (['--config', '{config}', '--http', 'localhost'], '--http must be HOST:PORT, such as 127.0.0.1:8765'),
    (['--config', '{bad}'], 'mcpServers.a has neither "command" nor "url"'),
])
def test_mistakes_exit_with_status_2_and_say_why(tmp_path: Path, arguments: list[str], message: str) -> None:
    paths = {'missing': str(tmp_path / 'nope.json'), 'config': str(write_config(tmp_path, {})),
             'bad': str(tmp_path / 'bad.json')}
    Path(paths['bad']).write_text('{"mcpServers": {"a": {}}}')
    command = [TOOLWEAVE, 'gateway', *[a.format(**paths) for a in arguments], '--log-dir', str(tmp_path / 'logs')]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr and 'Traceback' not in done.stderr


class running:
    """A gateway process with pipes; killed if the test leaves it running."""

    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)

    def __enter__(self) -> subprocess.Popen[str]:
        return self.process

    def __exit__(self, *exc_info: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def _children(pid: int) -> list[str]:
    for _ in range(100):
        found = subprocess.run(['pgrep', '-P', str(pid)], capture_output=True, text=True).stdout.split()
        if found:
            return found
        time.sleep(0.05)
    return []


def _zombie(pid: str) -> bool:
    try:
        return Path(f'/proc/{pid}/stat').read_text().split()[2] == 'Z'
    except OSError:
        return False

