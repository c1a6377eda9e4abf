"""MCP gateway benchmark: how well search mode finds tools, what it saves in tokens, and what the gateway adds to
each call.

Search quality (offline, deterministic). `search_tools`' ranking (BM25, see `toolweave.mcp._search`) and the
word matching it replaced, over the 41 tools four real servers list (`fixtures/gateway_catalog.json`) and the
queries of `fixtures/tool_search_queries.json` (see `_tool_search`): recall@5 and MRR, per query set.

Tokens (live). The gateway runs in front of four real servers (`mcp-server-time` and `mcp-server-git` from PyPI;
`@modelcontextprotocol/server-everything` and `@modelcontextprotocol/server-filesystem` from npm, looked for in
`$TOOLWEAVE_MCP_NPM_PREFIX`, `.mcp-npm` and `.mcp-npm-extra`), once in `tools` mode and once in `search` mode, and
an SDK client lists its tools and reads its instructions. Counted with the project's estimate `ceil(chars / 4)`:
- *model view*: what a client hands its model, `{name, description, parameters}` per tool as compact JSON
  (`toolweave.testing._models.serialize_tools`, the agent benchmark's format);
- *wire view*: the whole `tools/list` entries as compact JSON (titles, output schemas, annotations too);
- the server instructions (the "# Tool Planning" section, search mode's "# Finding tools", each server's own),
  which both modes send, so the listing plus instructions is what a mode costs on every request.
Finding one task's tools (search mode): for a few tasks, the model's search query and the tools its plan needs.
*now*: one `search_tools` call (its answer carries the found tools' input schemas), then the plan: 2 requests.
*before*: the old `search_tools` answer (8 word matches, no schemas), a `describe_tools` call for the needed tools,
then the plan: 3 requests. Reported per task: the discovery tokens (the calls and their answers), and the input
tokens of every request up to the one that writes the plan, each carrying the listing and the instructions (no
prompt caching), against tools mode's one request; the user's own prompt is left out of both.

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

Run: `python -m benchmarks.bench_gateway [--quick] [--calls N] [--rounds N] [--output PATH]` (about a minute
on the shared machine; `--quick` 15–40 s, with its load; the search and token parts are the same in both).
`--dump-catalog` rewrites the fixture from the installed servers instead. Writes `benchmarks/results/gateway.json`.
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
from typing import Any, TextIO

import anyio
from mcp import Client, StdioServerParameters

from benchmarks._tool_search import CATALOG, catalog, evaluate, queries, word_match, word_match_result
from toolweave.mcp import McpGateway, McpTool, McpToolset
from toolweave.mcp._search import search
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


TASKS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ('the time in Tokyo, then in Paris', 'current time and convert between time zones',
     ('get_current_time', 'convert_time')),
    ('commit what is staged, after reading it', 'staged changes diff and commit', ('git_diff_staged', 'git_commit')),
    ('read every file of a folder tree', 'directory tree and read a text file', ('directory_tree', 'read_text_file')),
    ('find markdown files and read them', 'find files by pattern and read several files',
     ('search_files', 'read_multiple_files')),
    ('a new branch, then switch to it', 'create a branch and switch to it', ('git_create_branch', 'git_checkout')),
)
"""(task, the query a model sends to `search_tools`, the tools its plan calls)."""


def _call(name: str, arguments: dict[str, Any]) -> str:
    """A tool call as the conversation carries it (compact JSON of name and arguments)."""
    return json.dumps({'name': name, 'arguments': arguments}, separators=(',', ':'), ensure_ascii=False)


async def _text_of(client: Client, name: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(name, arguments)
    return ''.join(getattr(block, 'text', '') for block in result.content)


async def _listing(servers: dict[str, Any], mode: str, logs: str) -> dict[str, Any]:
    """What a client of the gateway in `mode` sees: tools, instructions, and (search mode) the task searches."""
    config = {'mcpServers': servers, 'toolweave': {'mode': mode}}
    async with McpGateway(config, log_dir=logs) as gateway:
        origin = {t.name: str(t.definition.metadata.extra.get('mcp_server')) for t in gateway.tools}
        definitions = [t.definition for t in gateway.tools]
        async with Client(gateway.server()) as client:
            seen: dict[str, Any] = {'tools': list((await client.list_tools()).tools),
                                    'instructions': client.instructions or '', 'origin': origin, 'tasks': []}
            if mode == 'search':
                for task, query, needed in TASKS:
                    found = json.loads(await _text_of(client, 'search_tools', {'query': query}))
                    described = await _text_of(client, 'describe_tools', {'names': list(needed)})
                    before = word_match_result(query, definitions)
                    listed_now = {row['name'] for row in found['tools']}
                    listed_before = {row['name'] for row in json.loads(before)['tools']}
                    seen['tasks'].append({
                        'task': task, 'query': query, 'needed': needed,
                        'found_now': [n for n in needed if n in listed_now],
                        'found_before': [n for n in needed if n in listed_before],
                        'now': [_call('search_tools', {'query': query}), json.dumps(found, separators=(',', ':'))],
                        'before': [_call('search_tools', {'query': query}), before,
                                   _call('describe_tools', {'names': list(needed)}), described]})
            return seen


def _flow_tokens(base: int, turns: list[list[str]]) -> dict[str, int]:
    """Input tokens of each request up to the plan: every request carries `base` (listing and instructions) and
    the conversation so far; `turns` are the (call, answer) texts of the discovery turns, in order."""
    total, history = base, 0
    for turn in turns:
        history += sum(estimate_tokens(text) for text in turn)
        total += base + history
    return {'discovery': history, 'requests': len(turns) + 1, 'input_until_plan': total}


async def _tokens(logs: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as repo:
        await anyio.run_process(['git', 'init', '-q', repo])
        servers = _servers(repo)
        full_mode = await _listing(servers, 'tools', logs)
        search_mode = await _listing(servers, 'search', logs)
    full, origin, search = full_mode['tools'], full_mode['origin'], search_mode['tools']
    upstream = [t for t in full if t.name in origin]
    pair = [t for t in search if t.name != 'execute_tool_plan']
    per_server = {name: _count([t for t in upstream if origin[t.name] == name]) for name in servers}
    tools_count, search_count = _count(full), _count(search)
    instructions = {'tools': estimate_tokens(full_mode['instructions']),
                    'search': estimate_tokens(search_mode['instructions'])}
    with_instructions = {'tools': tools_count['model_tokens'] + instructions['tools'],
                         'search': search_count['model_tokens'] + instructions['search']}
    tasks = []
    for task in search_mode['tasks']:
        now = _flow_tokens(with_instructions['search'], [task['now']])
        before = _flow_tokens(with_instructions['search'], [task['before'][:2], task['before'][2:]])
        tasks.append({key: task[key] for key in ('task', 'query', 'needed', 'found_now', 'found_before')} | {
            'now': now, 'before': before,
            'now_discovery_vs_listing': now['discovery'] / tools_count['model_tokens'],
            'before_discovery_vs_listing': before['discovery'] / tools_count['model_tokens'],
            'now_input_vs_tools_mode': now['input_until_plan'] / with_instructions['tools'],
            'before_input_vs_tools_mode': before['input_until_plan'] / with_instructions['tools']})
    return {
        'servers': list(servers), 'versions': _versions(), 'missing': [s for s in SERVERS if s not in servers],
        'per_server': per_server, 'tools_mode': tools_count, 'search_mode': search_count,
        'upstream_only': _count(upstream), 'search_pair_only': _count(pair),
        'ratio_model': search_count['model_tokens'] / tools_count['model_tokens'],
        'ratio_wire': search_count['wire_tokens'] / tools_count['wire_tokens'],
        'instructions_tokens': instructions, 'listing_and_instructions': with_instructions,
        'ratio_with_instructions': with_instructions['search'] / with_instructions['tools'],
        'tasks': tasks,
    }


def _search_quality() -> dict[str, Any]:
    """recall@5 and MRR of the ranking `search_tools` uses and of the word matching it replaced, per query set."""
    definitions = catalog()
    report: dict[str, Any] = {'tools': len(definitions), 'sets': {}}
    for kind in ('queries', 'held_out'):
        cases = queries(kind)
        report['sets'][kind] = {name: evaluate(rank, definitions, cases)
                                for name, rank in (('bm25', search), ('word match (before)', word_match))}
    return report


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


async def _dump_catalog(path: Path, errlog: TextIO) -> int:
    """Write the tools the four servers list (asked directly, their stderr to `errlog`) as the search fixture."""
    with tempfile.TemporaryDirectory() as repo:
        await anyio.run_process(['git', 'init', '-q', repo])
        servers = _servers(repo)
        missing = [s for s in SERVERS if s not in servers]
        if missing:
            raise SystemExit(f'Cannot dump the catalog: {", ".join(missing)} not installed (see the module docstring)')
        entries = []
        for name, entry in servers.items():
            async with McpToolset.stdio(entry['command'], entry['args'], errlog=errlog) as toolset:
                listed = [tool.mcp_definition for tool in toolset.tools if isinstance(tool, McpTool)]
            entries += [{'server': name, 'tool': t.model_dump(by_alias=True, exclude_none=True, mode='json')}
                        for t in listed]
    data = {'about': 'The tools four real MCP servers list (tools/list, asked directly); written by '
                     '`python -m benchmarks.bench_gateway --dump-catalog`.',
            'servers': _versions(), 'tools': entries}
    await anyio.Path(path).write_text(json.dumps(data, indent=1, ensure_ascii=False) + '\n', encoding='utf-8')
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


def _print_search(quality: dict[str, Any]) -> None:
    print(f'\nSearch quality over the {quality["tools"]} tools of {CATALOG.name} (offline)')
    print(f'{"query set":<22} {"ranking":<20} {"queries":>7} {"recall@5":>9} {"MRR":>6}')
    for kind, rankings in quality['sets'].items():
        for name, result in rankings.items():
            print(f'{kind:<22} {name:<20} {result["queries"]:>7} {result["recall_at_5"]:>9.3f} {result["mrr"]:>6.3f}')
    for kind, rankings in quality['sets'].items():
        for row in rankings['bm25']['rows']:
            missed = {name: rank for name, rank in row['ranks'].items() if rank is None or rank > 5}
            if missed:
                print(f'  bm25 miss ({kind}): {row["query"]!r}: ' + ', '.join(
                    f'{name} at {rank or ">50"}' for name, rank in missed.items()))


def _print_tokens(tokens: dict[str, Any]) -> None:
    print(f'\nTool-definition tokens (ceil(chars/{CHARS_PER_TOKEN})), servers: {", ".join(tokens["versions"].values())}'
          + (f' (missing: {", ".join(tokens["missing"])})' if tokens['missing'] else ''))
    print(f'{"listing":<36} {"tools":>6} {"model view":>11} {"wire view":>10} {"+ instructions":>15}')
    both = tokens['listing_and_instructions']
    rows = [('tools mode (upstream + plan)', tokens['tools_mode'], both['tools']),
            ('search mode (search, describe, plan)', tokens['search_mode'], both['search']),
            ('upstream tools only', tokens['upstream_only'], None), ('search pair only', tokens['search_pair_only'],
                                                                     None)]
    rows += [(f'  server {name}', counts, None) for name, counts in tokens['per_server'].items()]
    for label, counts, total in rows:
        print(f'{label:<36} {counts["tools"]:>6} {counts["model_tokens"]:>11} {counts["wire_tokens"]:>10} '
              f'{"" if total is None else total:>15}')
    print(f'search / tools mode, listing alone: {tokens["ratio_model"]:.1%} (model view), {tokens["ratio_wire"]:.1%} '
          f'(wire view); listing + instructions (model view): {tokens["ratio_with_instructions"]:.1%}; '
          f'goal for the listing <= {GOAL:.0%}')
    print(f'server instructions: {tokens["instructions_tokens"]["tools"]} tokens (tools mode), '
          f'{tokens["instructions_tokens"]["search"]} (search mode)')
    print("\nFinding one task's tools in search mode: discovery tokens (calls and answers) / the full listing, and "
          "input tokens up to the plan / tools mode's one request")
    print(f'{"task":<36} {"found":>6} {"discovery":>10} {"% listing":>10} {"requests":>9} {"input":>6} '
          f'{"% tools mode":>13}')
    for task in tokens['tasks']:
        for flow in ('now', 'before'):
            numbers = task[flow]
            label = task['task'] if flow == 'now' else '  before: 8 matches, describe_tools'
            found = f'{len(task["found_" + flow])}/{len(task["needed"])}'
            print(f'{label[:36]:<36} {found:>6} {numbers["discovery"]:>10} '
                  f'{task[flow + "_discovery_vs_listing"]:>10.1%} {numbers["requests"]:>9} '
                  f'{numbers["input_until_plan"]:>6} {task[flow + "_input_vs_tools_mode"]:>13.1%}')


def _print(report: dict[str, Any]) -> None:
    _print_search(report['search'])
    _print_tokens(report['tokens'])
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
                        help=f"write the installed servers' tools to {CATALOG.relative_to(ROOT)} and stop")
    args = parser.parse_args(argv)
    if args.dump_catalog:
        with open(os.devnull, 'w') as quiet:
            count = anyio.run(_dump_catalog, CATALOG, quiet)
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
            'search': _search_quality(), 'tokens': anyio.run(_tokens, logs),
            'latency': anyio.run(_latency, rounds, calls, logs),
        }
    report['elapsed_s'] = round(time.perf_counter() - started, 2)
    _print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + '\n', encoding='utf-8')
    print(f'wrote {args.output}')
    return report


if __name__ == '__main__':
    main(sys.argv[1:])
