"""MCP gateway benchmark: what search mode saves in tool definitions, and what the gateway adds to each call.

Tool-definition tokens. The gateway runs in front of three real servers (`mcp-server-time` and `mcp-server-git`
from PyPI, `@modelcontextprotocol/server-everything` from npm when it is installed in `.mcp-npm`), once in
`tools` mode and once in `search` mode, and an SDK client lists its tools. Each list is counted two ways with the
project's documented estimate `ceil(chars / 4)`:
- *model view*: what a client hands its model, `{name, description, parameters}` per tool as compact JSON
  (`toolweave.testing._models.serialize_tools`, the agent benchmark's format);
- *wire view*: the whole `tools/list` entries as compact JSON (titles, output schemas, annotations too).
`tools` mode lists every upstream tool plus `execute_tool_plan`; `search` mode lists `search_tools`,
`describe_tools` and `execute_tool_plan` whatever the servers offer. Also shown: the search pair alone against
the upstream tools alone (both modes carry the same `execute_tool_plan`). Goal: search <= 10% of tools mode.

Added latency per proxied call. A one-tool MCP server (`benchmarks/_mcp_echo.py`, stdio) is called with the
official `mcp` SDK client, sequentially, three ways, interleaved in rounds so machine noise hits all alike:
- `direct`: client -> echo server;
- `gateway (stdio)`: client -> `toolweave gateway` process -> echo server (how MCP clients deploy it);
- `gateway (in-process)`: client -> `McpGateway` in the client's process -> echo server (the gateway's own
  work plus the SDK server dispatch, without the second stdio hop).
Reported: median and p90 wall microseconds per call, and each gateway path minus direct (the added latency).
Wall times on a shared machine swing with its load, so CPU time per call is reported too, which load barely
moves: this process's (client, plus the whole gateway for the in-process path) and, for the stdio path, the
gateway process's (from /proc). The in-process path's CPU minus direct's is the gateway's own work per call.

Run: `python -m benchmarks.bench_gateway [--quick] [--calls N] [--rounds N] [--output PATH]` (about 25 s;
`--quick` about 10 s).
Writes `benchmarks/results/gateway.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from benchmarks._tool_search import CATALOG
from toolweave.mcp import McpGateway, McpTool, McpToolset
from toolweave.testing._models import CHARS_PER_TOKEN, estimate_tokens

__all__ = ('main',)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / 'results' / 'gateway.json'
BIN = Path(sys.executable).parent
NPM_PREFIXES = [Path(p) for p in (os.environ.get('TOOLWEAVE_MCP_NPM_PREFIX'),) if p] + [ROOT / '.mcp-npm',
                                                                                       ROOT / '.mcp-npm-extra']
"""Where the npm servers are looked for (`npm install --prefix .mcp-npm-extra @modelcontextprotocol/<server>`)."""
SERVERS = ('time', 'git', 'everything', 'filesystem')
ECHO = [sys.executable, '-m', 'benchmarks._mcp_echo']
GOAL = 0.10


def _servers(repo: str) -> dict[str, Any]:
    servers: dict[str, Any] = {}
    time_server, git_server, node = (shutil.which('mcp-server-time', path=str(BIN)),
                                     shutil.which('mcp-server-git', path=str(BIN)), shutil.which('node'))
    if time_server:
        servers['time'] = {'command': time_server, 'args': ['--local-timezone', 'UTC']}
    if git_server:
        servers['git'] = {'command': git_server, 'args': ['--repository', repo]}
    everything, filesystem = npm_server('server-everything'), npm_server('server-filesystem')
    if node and everything:
        servers['everything'] = {'command': node, 'args': [str(everything), 'stdio']}
    if node and filesystem:
        servers['filesystem'] = {'command': node, 'args': [str(filesystem), repo]}
    return servers


def npm_server(package: str) -> Path | None:
    """The entry point of `@modelcontextprotocol/<package>` in the first npm prefix that has it, or `None`."""
    for prefix in NPM_PREFIXES:
        path = prefix / 'node_modules/@modelcontextprotocol' / package / 'dist/index.js'
        if path.is_file():
            return path
    return None


def _model_view(tools: Sequence[Any]) -> str:
    data = [{'name': t.name, 'description': t.description or '', 'parameters': t.input_schema} for t in tools]
    return json.dumps(data, separators=(',', ':'), ensure_ascii=False)


def _wire_view(tools: Sequence[Any]) -> str:
    data = [t.model_dump(by_alias=True, exclude_none=True, mode='json') for t in tools]
    return json.dumps(data, separators=(',', ':'), ensure_ascii=False)


def _count(tools: Sequence[Any]) -> dict[str, int]:
    return {'tools': len(tools), 'model_tokens': estimate_tokens(_model_view(tools)),
            'wire_tokens': estimate_tokens(_wire_view(tools))}


async def _listing(servers: dict[str, Any], mode: str, logs: str) -> tuple[list[Any], str, dict[str, str]]:
    config = {'mcpServers': servers, 'toolweave': {'mode': mode}}
    async with McpGateway(config, log_dir=logs) as gateway:
        origin = {t.name: str(t.definition.metadata.extra.get('mcp_server')) for t in gateway.tools}
        async with Client(gateway.server()) as client:
            tools = list((await client.list_tools()).tools)
            return tools, client.instructions or '', origin


async def _tokens(logs: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as repo:
        await anyio.run_process(['git', 'init', '-q', repo])
        servers = _servers(repo)
        full, full_instructions, origin = await _listing(servers, 'tools', logs)
        search, search_instructions, _ = await _listing(servers, 'search', logs)
    upstream = [t for t in full if t.name in origin]
    pair = [t for t in search if t.name != 'execute_tool_plan']
    per_server = {name: _count([t for t in upstream if origin[t.name] == name]) for name in servers}
    tools_mode, search_mode, upstream_only, pair_only = _count(full), _count(search), _count(upstream), _count(pair)
    return {
        'servers': list(servers), 'missing': [s for s in SERVERS if s not in servers],
        'per_server': per_server, 'tools_mode': tools_mode, 'search_mode': search_mode,
        'upstream_only': upstream_only, 'search_pair_only': pair_only,
        'ratio_model': search_mode['model_tokens'] / tools_mode['model_tokens'],
        'ratio_wire': search_mode['wire_tokens'] / tools_mode['wire_tokens'],
        'pair_vs_upstream_model': pair_only['model_tokens'] / upstream_only['model_tokens'],
        'instructions_tokens': {'tools': estimate_tokens(full_instructions),
                                'search': estimate_tokens(search_instructions)},
    }


def _versions() -> dict[str, str]:
    """The installed version of each server's package."""
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str] = {}
    for server, package in (('time', 'mcp-server-time'), ('git', 'mcp-server-git')):
        try:
            found[server] = f'{package} {version(package)}'
        except PackageNotFoundError:
            pass
    for server in ('everything', 'filesystem'):
        entry = npm_server(f'server-{server}')
        if entry is not None:
            data = json.loads((entry.parent.parent / 'package.json').read_text(encoding='utf-8'))
            found[server] = f'{data["name"]} {data["version"]}'
    return found


async def _dump_catalog(path: Path) -> int:
    """Write the tools the four servers list (asked directly by the SDK client) as the search fixture."""
    with tempfile.TemporaryDirectory() as repo:
        await anyio.run_process(['git', 'init', '-q', repo])
        servers = _servers(repo)
        missing = [s for s in SERVERS if s not in servers]
        if missing:
            raise SystemExit(f'Cannot dump the catalog: {", ".join(missing)} not installed (see the module docstring)')
        entries = []
        with open(os.devnull, 'w') as quiet:
            for name, entry in servers.items():
                async with McpToolset.stdio(entry['command'], entry['args'], errlog=quiet) as toolset:
                    listed = [tool.mcp_definition for tool in toolset.tools if isinstance(tool, McpTool)]
                entries += [{'server': name, 'tool': t.model_dump(by_alias=True, exclude_none=True, mode='json')}
                            for t in listed]
    data = {'about': 'The tools four real MCP servers list (tools/list, asked directly); written by '
                     '`python -m benchmarks.bench_gateway --dump-catalog`.',
            'servers': _versions(), 'tools': entries}
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + '\n', encoding='utf-8')
    return len(entries)


async def _time_calls(client: Client, calls: int) -> tuple[list[float], float]:
    """Wall microseconds of each call, and this process's CPU seconds for all of them."""
    samples = []
    cpu = time.process_time()
    for index in range(calls):
        started = time.perf_counter()
        await client.call_tool('echo', {'text': f'call {index}'})
        samples.append((time.perf_counter() - started) * 1e6)
    return samples, time.process_time() - cpu


def _gateway_cpu() -> float | None:
    """CPU seconds used so far by the `toolweave gateway` child of this process (Linux /proc), or `None`."""
    ticks = os.sysconf('SC_CLK_TCK') if hasattr(os, 'sysconf') else 100
    for stat in Path('/proc').glob('[0-9]*/stat'):
        try:
            fields = stat.read_text().rsplit(')', 1)[1].split()
            command = (stat.parent / 'cmdline').read_bytes().split(b'\0')
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and b'gateway' in command:
            return (int(fields[11]) + int(fields[12])) / ticks
    return None


async def _latency(rounds: int, calls: int, logs: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / 'mcp.json'
        config.write_text(json.dumps({'mcpServers': {'echo': {'command': ECHO[0], 'args': ECHO[1:],
                                                              'env': {'PYTHONPATH': str(ROOT)}}}}))
        toolweave = shutil.which('toolweave', path=str(BIN)) or 'toolweave'
        direct_server = StdioServerParameters(command=ECHO[0], args=ECHO[1:], env={'PYTHONPATH': str(ROOT)})
        gateway_server = StdioServerParameters(command=toolweave, args=['gateway', '--config', str(config),
                                                                        '--log-dir', logs])
        names = ('direct', 'gateway (stdio)', 'gateway (in-process)')
        samples: dict[str, list[float]] = {name: [] for name in names}
        cpu = dict.fromkeys(names, 0.0)
        gateway_cpu = 0.0
        async with Client(direct_server) as direct, Client(gateway_server) as via_stdio, \
                McpGateway(config, log_dir=logs) as gateway, Client(gateway.server()) as in_process:
            clients = dict(zip(names, (direct, via_stdio, in_process), strict=True))
            for client in clients.values():
                await _time_calls(client, 20)  # warm up imports, caches and the processes
            for _ in range(rounds):
                for name, client in clients.items():
                    before = _gateway_cpu() if name == 'gateway (stdio)' else None
                    walls, seconds = await _time_calls(client, calls)
                    samples[name].extend(walls)
                    cpu[name] += seconds
                    after = _gateway_cpu() if before is not None else None
                    if before is not None and after is not None:
                        gateway_cpu += after - before
    paths: dict[str, dict[str, float]] = {}
    for name, values in samples.items():
        paths[name] = {'median_us': statistics.median(values), 'p90_us': statistics.quantiles(values, n=10)[-1],
                       'calls': len(values), 'cpu_us': cpu[name] / len(values) * 1e6}
    paths['gateway (stdio)']['gateway_process_cpu_us'] = gateway_cpu / len(samples['gateway (stdio)']) * 1e6
    base = paths['direct']
    return {'paths': paths,
            'added_us': {name: paths[name]['median_us'] - base['median_us'] for name in names[1:]},
            'added_cpu_us': {'gateway (stdio)': paths['gateway (stdio)']['gateway_process_cpu_us'],
                             'gateway (in-process)': paths['gateway (in-process)']['cpu_us'] - base['cpu_us']}}


def _print(report: dict[str, Any]) -> None:
    tokens = report['tokens']
    print(f'\nTool-definition tokens (ceil(chars/{CHARS_PER_TOKEN})), servers: {", ".join(tokens["servers"])}'
          + (f' (missing: {", ".join(tokens["missing"])})' if tokens['missing'] else ''))
    print(f'{"listing":<34} {"tools":>6} {"model view":>11} {"wire view":>10}')
    rows = [('tools mode (upstream + plan)', tokens['tools_mode']), ('search mode (search, describe, plan)',
                                                                    tokens['search_mode']),
            ('upstream tools only', tokens['upstream_only']), ('search pair only', tokens['search_pair_only'])]
    rows += [(f'  server {name}', counts) for name, counts in tokens['per_server'].items()]
    for label, counts in rows:
        print(f'{label:<34} {counts["tools"]:>6} {counts["model_tokens"]:>11} {counts["wire_tokens"]:>10}')
    print(f'search / tools mode: {tokens["ratio_model"]:.1%} (model view), {tokens["ratio_wire"]:.1%} (wire view); '
          f'search pair / upstream tools: {tokens["pair_vs_upstream_model"]:.1%}; goal <= {GOAL:.0%}')
    print(f'server instructions: {tokens["instructions_tokens"]["tools"]} tokens (tools mode), '
          f'{tokens["instructions_tokens"]["search"]} (search mode)')
    latency = report['latency']
    print(f'\nLatency per call (sequential, {latency["paths"]["direct"]["calls"]} calls per path)')
    print(f'{"path":<22} {"median us":>10} {"p90 us":>9} {"added us":>9} {"cpu us":>7} {"added cpu us":>13}')
    for name, stats in latency['paths'].items():
        added, added_cpu = latency['added_us'].get(name), latency['added_cpu_us'].get(name)
        shown = '' if added is None else f'{added:.0f}'
        shown_cpu = '' if added_cpu is None else f'{added_cpu:.0f}'
        print(f'{name:<22} {stats["median_us"]:>10.0f} {stats["p90_us"]:>9.0f} {shown:>9} {stats["cpu_us"]:>7.0f} '
              f'{shown_cpu:>13}')
    print('cpu us: this process per call; added cpu us: the gateway process (stdio), or in-process minus direct')


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the tables and write the JSON report; returns the report."""
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_gateway', description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='2 rounds of 10 calls per path (about 10 s)')
    parser.add_argument('--calls', type=int, default=None, help='calls per path per round (default 100)')
    parser.add_argument('--rounds', type=int, default=None, help='rounds (default 10)')
    parser.add_argument('--output', type=Path, default=RESULTS, help=f'JSON report path (default {RESULTS})')
    parser.add_argument('--dump-catalog', action='store_true',
                        help=f'write the live servers\' tools to {CATALOG.relative_to(ROOT)} and stop')
    args = parser.parse_args(argv)
    if args.dump_catalog:
        count = anyio.run(_dump_catalog, CATALOG)
        print(f'wrote {count} tools to {CATALOG}')
        return {'catalog': str(CATALOG), 'tools': count}
    calls = args.calls or (10 if args.quick else 100)
    rounds = args.rounds or (2 if args.quick else 10)
    if calls < 1 or rounds < 1:
        parser.error(f'--calls and --rounds must be >= 1, got {calls} and {rounds}')
    os.environ.setdefault('PYTHONPATH', str(ROOT))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as logs:
        report: dict[str, Any] = {
            'mode': 'quick' if args.quick else 'full', 'python': platform.python_version(),
            'platform': platform.platform(), 'cpus': os.cpu_count(),
            'tokens': anyio.run(_tokens, logs), 'latency': anyio.run(_latency, rounds, calls, logs),
        }
    report['elapsed_s'] = round(time.perf_counter() - started, 2)
    _print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + '\n', encoding='utf-8')
    print(f'wrote {args.output}')
    return report


if __name__ == '__main__':
    main(sys.argv[1:])
