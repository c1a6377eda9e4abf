"""What an MCP client gets through a gateway: the same probes through `toolweave gateway` and FastMCP's proxy.

    python -m benchmarks.compare_gateways --fastmcp-python /tmp/fastmcp-venv/bin/python

The official SDK client (this environment's `mcp`) talks over stdio, once with the initialize handshake
(2025-11-25) and once with 2026-07-28 where the gateway offers it, to each gateway in front of the same servers:
`@modelcontextprotocol/server-everything` and `server-filesystem` (npm, `.mcp-npm` or `.mcp-npm-extra`),
`mcp-server-time`, and the SDK fixture of the gateway tests (for logging and cancellation, which
server-everything cannot show on demand). Each probe records what came through: progress notifications, log
messages, whether a cancelled call was cancelled upstream, prompts, resources and templates listed, a resource
link read, a completion, the servers' elicitation, sampling and roots requests answered by the client's person,
the task-augmented tool called, approval questions before `write_file` (and whether the file was written), raw
malformed requests answered, and whether multi-call plans are offered. FastMCP's proxy (install it outside the
repository: `python -m venv /tmp/fastmcp-venv && /tmp/fastmcp-venv/bin/pip install fastmcp`) runs as
`create_proxy(config).run()`; without `--fastmcp-python` only toolweave is measured. Prints a table and writes
`benchmarks/results/compare_gateways.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / 'benchmarks' / 'results'
FIXTURE = ROOT / 'tests' / 'gateway_upstream.py'
BIN = Path(sys.executable).parent
ERAS = ('legacy', 'auto')
MALFORMED = [
    b'[{"jsonrpc":"2.0","id":101,"method":"tools/list"}]',
    b'{"jsonrpc":"1.0","id":102,"method":"tools/list"}',
    b'{"jsonrpc":"2.0","id":103,"method":"tools/list","params":[1]}',
    b'{"jsonrpc":"2.0","id":104,"method":"tools/list","params":{"x":"\xff"}}',
    b'{"jsonrpc":"2.0","id":105,"method":"tools/call","params":{"name":"echo","arguments":{"a":' + b'[' * 100_000
    + b']' * 100_000 + b'}}}',
    b'{"jsonrpc":"2.0","id":106,"method":"tools/li',
]
FASTMCP_LAUNCHER = """
import json, sys
from fastmcp.server import create_proxy
create_proxy(json.load(open(sys.argv[1]))).run()
"""


def npm_entry(package: str) -> Path | None:
    for prefix in (ROOT / '.mcp-npm', ROOT / '.mcp-npm-extra'):
        entry = prefix / 'node_modules/@modelcontextprotocol' / package / 'dist/index.js'
        if entry.is_file():
            return entry
    return None


def servers(work: Path) -> dict[str, Any]:
    node = shutil.which('node')
    everything, filesystem = npm_entry('server-everything'), npm_entry('server-filesystem')
    time_server = shutil.which('mcp-server-time', path=str(BIN))
    if node is None or everything is None or filesystem is None or time_server is None:
        raise SystemExit('Needs node, @modelcontextprotocol/server-everything and server-filesystem (npm install '
                         '--prefix .mcp-npm-extra ...) and mcp-server-time (pip install mcp-server-time).')
    return {'everything': {'command': node, 'args': [str(everything), 'stdio']},
            'files': {'command': node, 'args': [str(filesystem), str(work)]},
            'time': {'command': time_server, 'args': ['--local-timezone', 'UTC']},
            'fixture': {'command': sys.executable, 'args': [str(FIXTURE), 'sdk'],
                        'env': {'GATEWAY_UPSTREAM_CANCELLED': str(work / 'cancelled.txt')}}}


class Person:
    """The client's person and model: answers everything, counts the questions."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def elicit(self, context: Any, params: Any) -> Any:
        import mcp_types as types

        self.asked.append('approval' if params.message.startswith('Allow this') else 'elicitation')
        content = {'approve': True} if params.message.startswith('Allow this') else {'name': 'Ada',
                                                                                     'interpretation': 'technical'}
        return types.ElicitResult(action='accept', content=content)

    async def sample(self, context: Any, params: Any) -> Any:
        import mcp_types as types

        self.asked.append('sampling')
        return types.CreateMessageResult(role='assistant', content=types.TextContent(text='sampled'), model='m')

    async def roots(self, context: Any) -> Any:
        import mcp_types as types

        self.asked.append('roots')
        return types.ListRootsResult(roots=[types.Root(uri=Path(tempfile.gettempdir()).as_uri(), name='tmp')])


def find(names: Sequence[str], server: str, tool: str) -> str | None:
    """A tool's name through a gateway: its own, or prefixed with its server's name."""
    for candidate in (tool, f'{server}_{tool}'):
        if candidate in names:
            return candidate
    return None


async def probe(command: list[str], mode: str, work: Path) -> dict[str, Any]:
    """Every probe through one gateway (started by `command`) with the client in `mode`."""
    import warnings

    import mcp_types as types
    from mcp import Client, StdioServerParameters
    from mcp.shared.exceptions import MCPDeprecationWarning

    warnings.simplefilter('ignore', MCPDeprecationWarning)
    person, logged, progress = Person(), [], []

    async def log(params: Any) -> None:
        logged.append(params.logger)

    async def report(progress_value: float, total: float | None, message: str | None) -> None:
        progress.append(progress_value)

    parameters = StdioServerParameters(command=command[0], args=command[1:], cwd=str(work))
    found: dict[str, Any] = {}
    async with Client(parameters, mode=mode, elicitation_callback=person.elicit, sampling_callback=person.sample,
                      list_roots_callback=person.roots, logging_callback=log,
                      log_level='debug' if mode != 'legacy' else None) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        found['protocol'] = client.protocol_version
        found['tools listed'] = len(names)
        found['plans in one call'] = 'execute_tool_plan' in names

        async def call(server: str, tool: str, arguments: dict[str, Any], **options: Any) -> Any:
            name = find(names, server, tool)
            if name is None:
                return None
            try:
                with anyio.fail_after(60):
                    return await client.call_tool(name, arguments, **options)
            except Exception as exc:
                return exc

        long = await call('everything', 'trigger-long-running-operation', {'duration': 0.6, 'steps': 3},
                          progress_callback=report)
        found['progress notifications of a call (3 sent)'] = len(progress) if long is not None else None
        if mode == 'legacy':
            await client.session.set_logging_level('debug')
        await call('fixture', 'log', {})
        await anyio.sleep(0.5)
        found['log messages of a call (4 sent)'] = logged.count('fixture')
        found['call cancelled upstream'] = await _cancelled(client, names, work, 70 + len(mode))
        found['prompts'] = len((await client.list_prompts()).prompts) if client.server_capabilities.prompts else 0
        resources = (await client.list_resources()).resources if client.server_capabilities.resources else []
        found['resources'] = len(resources)
        found['resource templates'] = len((await client.list_resource_templates()).resource_templates) \
            if client.server_capabilities.resources else 0
        found['resource link read'] = await _link_read(client, call)
        found['completion'] = await _completion(client, names)
        for tool, arguments, label in (('trigger-elicitation-request', {}, 'elicitation'),
                                       ('trigger-sampling-request', {'prompt': 'hi'}, 'sampling'),
                                       ('get-roots-list', {}, 'roots')):
            result = await call('everything', tool, arguments)
            answered = isinstance(result, types.CallToolResult) and not result.is_error
            found[f'{label} relayed'] = 'tool hidden' if result is None else answered and label in person.asked or (
                label == 'roots' and answered)
        task = await call('everything', 'simulate-research-query', {'topic': 'python'})
        found['task-augmented tool'] = 'tool hidden' if task is None else (
            isinstance(task, types.CallToolResult) and not task.is_error)
        target = work / f'written-{mode}.txt'
        before = person.asked.count('approval')
        await call('files', 'write_file', {'path': str(target), 'content': 'x'})
        found['approval questions before write_file'] = person.asked.count('approval') - before
        found['write_file ran'] = target.exists()
    found['malformed requests answered'] = await anyio.to_thread.run_sync(_malformed, command, work)
    return found


async def _cancelled(client: Any, names: Sequence[str], work: Path, seconds: int) -> bool | None:
    """Whether cancelling a call reached the server (its handler was cancelled): the fixture notes it on disk."""
    slow = find(names, 'fixture', 'slow')
    if slow is None:
        return None
    with anyio.move_on_after(3):  # time for a gateway that starts its servers per request to reach the call
        await client.call_tool(slow, {'seconds': seconds})
    record = work / 'cancelled.txt'
    for _ in range(30):
        if record.exists() and str(float(seconds)) in record.read_text().split():
            return True
        await anyio.sleep(0.1)
    return False


async def _link_read(client: Any, call: Any) -> bool | None:
    import mcp_types as types

    result = await call('everything', 'get-resource-links', {'count': 1})
    if result is None or isinstance(result, Exception):
        return None
    link = next((block for block in result.content if isinstance(block, types.ResourceLink)), None)
    if link is None:
        return False
    try:
        read = await client.read_resource(str(link.uri))
    except Exception:
        return False
    return bool(read.contents)


async def _completion(client: Any, names: Sequence[str]) -> str | None:
    import mcp_types as types

    if not client.server_capabilities.completions:
        return None
    prompts = [prompt.name for prompt in (await client.list_prompts()).prompts]
    name = next((p for p in prompts if p.endswith('completable-prompt')), None)
    if name is None:
        return None
    try:
        completed = await client.complete(types.PromptReference(name=name), {'name': 'department', 'value': 'E'})
    except Exception as exc:
        return f'error: {exc}'
    return ','.join(completed.completion.values)


def _malformed(command: list[str], work: Path) -> str:
    """Raw malformed requests on stdio after a handshake: how many got an answer naming their id."""
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               cwd=str(work))
    assert process.stdin is not None and process.stdout is not None
    try:
        def send(raw: bytes) -> None:
            assert process.stdin is not None
            process.stdin.write(raw + b'\n')
            process.stdin.flush()

        def answer(seconds: float) -> Any:
            assert process.stdout is not None
            ready, _, _ = select.select([process.stdout], [], [], seconds)
            return json.loads(process.stdout.readline()) if ready else None

        send(json.dumps({'jsonrpc': '2.0', 'id': 0, 'method': 'initialize', 'params': {
            'protocolVersion': '2025-11-25', 'capabilities': {}, 'clientInfo': {'name': 'probe', 'version': '1'}}}
        ).encode())
        if answer(120) is None:
            return 'no handshake'
        send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        answered = 0
        for raw in MALFORMED:
            send(raw)
            got = answer(5)
            expected = json.loads(raw[raw.index(b'"id":') + 5:].split(b',')[0]) if b'"id":' in raw[:60] else None
            items = got if isinstance(got, list) else [got]
            if got is not None and any(isinstance(i, dict) and i.get('id') == expected and 'error' in i
                                       for i in items):
                answered += 1
        return f'{answered} of {len(MALFORMED)}'
    finally:
        process.kill()
        process.wait()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--fastmcp-python', help='a Python with fastmcp installed (its proxy is measured too)')
    parser.add_argument('--output', default=str(RESULTS / 'compare_gateways.json'))
    args = parser.parse_args(argv)
    report: dict[str, Any] = {'conditions': {'python': sys.version.split()[0], 'platform': sys.platform}}
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        config = work / 'mcp.json'
        config.write_text(json.dumps({'mcpServers': servers(work)}))
        toolweave = shutil.which('toolweave', path=str(BIN)) or 'toolweave'
        targets = {'toolweave gateway': [toolweave, 'gateway', '--config', str(config), '--log-dir',
                                         str(work / 'logs')]}
        if args.fastmcp_python:
            launcher = work / 'fastmcp_proxy.py'
            launcher.write_text(FASTMCP_LAUNCHER)
            targets['FastMCP proxy'] = [args.fastmcp_python, str(launcher), str(config)]
            version = subprocess.run([args.fastmcp_python, '-c', 'import fastmcp; print(fastmcp.__version__)'],
                                     capture_output=True, text=True).stdout.strip()
            report['conditions']['fastmcp'] = version
        from importlib.metadata import version as installed

        report['conditions']['mcp'] = installed('mcp')
        report['conditions']['toolweave'] = installed('toolweave')
        results: dict[str, dict[str, Any]] = {}
        for name, command in targets.items():
            for mode in ERAS:
                started = time.perf_counter()
                results[f'{name} ({mode})'] = anyio.run(probe, command, mode, work)
                print(f'{name} ({mode}): {time.perf_counter() - started:.1f} s', file=sys.stderr, flush=True)
        report['results'] = results
    _print_table(results)
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2, default=str))
    return report


def _print_table(results: dict[str, dict[str, Any]]) -> None:
    columns = list(results)
    rows = list(next(iter(results.values())))
    print('| probe | ' + ' | '.join(columns) + ' |')
    print('| --- |' + ' --- |' * len(columns))
    for row in rows:
        print(f'| {row} | ' + ' | '.join(str(results[column].get(row)) for column in columns) + ' |')


if __name__ == '__main__':
    os.environ.setdefault('PYTHONWARNINGS', 'ignore')
    main()
