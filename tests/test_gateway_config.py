"""The gateway's config: the `mcpServers` format MCP clients use plus toolweave's keys, every mistake reported with
where it is and how to fix it, and the snippets in docs/gateway.md parsed as users will copy them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from toolweave import UserError
from toolweave.mcp import GatewayConfig, McpGateway, ServerConfig

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / 'docs' / 'gateway.md'


def test_a_full_config() -> None:
    config = GatewayConfig.parse({
        'mcpServers': {
            'git': {'command': 'uvx', 'args': ['mcp-server-git', '--repository', '${env:REPO}'],
                    'env': {'GIT_AUTHOR_NAME': 'Ada'}, 'cwd': '/srv',
                    'toolweave': {'prefix': 'g', 'allowTools': ['git_*'], 'denyTools': ['git_reset'],
                                  'requireApproval': ['git_commit'], 'forwardContext': ['tenantId'],
                                  'timeout': 30, 'startTimeout': 5, 'approvalFallback': 'allow'}},
            'docs': {'type': 'http', 'url': 'https://example.com/mcp',
                     'headers': {'Authorization': 'Bearer ${env:TOKEN}'}},
            'old': {'type': 'sse', 'url': 'http://localhost:9000/sse'},
            'off': {'command': 'never-started', 'disabled': True},
        },
        'toolweave': {'mode': 'search', 'prefixTools': 'always', 'approvalFallback': 'deny', 'callTimeout': 60,
                      'planTimeout': None},
    }, environ={'REPO': '/srv/repo', 'TOKEN': 't0k'})
    assert (config.mode, config.prefix_tools, config.approval_fallback) == ('search', 'always', 'deny')
    assert (config.call_timeout, config.plan_timeout) == (60.0, None)
    git, docs, old = config.servers
    assert git == ServerConfig(
        'git', command='uvx', args=('mcp-server-git', '--repository', '/srv/repo'), env={'GIT_AUTHOR_NAME': 'Ada'},
        cwd='/srv', prefix='g', allow_tools=('git_*',), deny_tools=('git_reset',), require_approval=('git_commit',),
        forward_context=('tenantId',), timeout=30.0, start_timeout=5.0, approval_fallback='allow')
    assert (docs.transport, docs.url, dict(docs.headers)) == ('http', 'https://example.com/mcp',
                                                              {'Authorization': 'Bearer t0k'})
    assert (docs.timeout, docs.tool_prefix) == (60.0, 'docs')  # the gateway's callTimeout is each server's default
    assert (old.transport, old.url) == ('sse', 'http://localhost:9000/sse')


def test_defaults_and_vs_code_servers_key() -> None:
    config = GatewayConfig.parse({'servers': {'my server.v2': {'command': 'x'}}})
    (server,) = config.servers
    assert (config.mode, config.prefix_tools, config.approval_fallback) == ('tools', 'onCollision', 'deny')
    assert (server.timeout, server.start_timeout, server.forward_context, server.allow_tools) == (120.0, 60.0, (), None)
    assert server.tool_prefix == 'my_server_v2'  # made to fit the tool name rule


def test_load_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / 'mcp.json'
    path.write_text(json.dumps({'mcpServers': {'time': {'command': 'mcp-server-time'}}}))
    assert GatewayConfig.load(path).servers[0].command == 'mcp-server-time'
    with pytest.raises(UserError, match=r'Cannot read the gateway config .*missing\.json: No such file'):
        GatewayConfig.load(tmp_path / 'missing.json')
    path.write_text('{"mcpServers": {')
    with pytest.raises(UserError, match=r'mcp\.json is not valid JSON: Expecting .* at line 1 column 17\.$'):
        GatewayConfig.load(path)


def test_unknown_client_keys_are_left_alone_but_near_misses_of_ours_are_errors() -> None:
    config = GatewayConfig.parse({'mcpServers': {'a': {'command': 'x', 'autoApprove': [], 'alwaysAllow': []}}})
    assert config.servers[0].command == 'x'
    with pytest.raises(UserError, match=r'mcpServers\.a\.denytools looks like toolweave\'s "denyTools"; toolweave\'s '
                                        r'options go in mcpServers\.a\.toolweave'):
        GatewayConfig.parse({'mcpServers': {'a': {'command': 'x', 'denytools': ['y']}}})


@dataclass
class Bad:
    data: Any
    message: str
    environ: dict[str, str] | None = None


BAD = [
    Bad([], r'the top level must be a JSON object, got a list \[\]'),
    Bad({'tools': {}}, r'the top level has no "mcpServers" object\. Write \{"mcpServers"'),
    Bad({'mcpServers': []}, r'"mcpServers" must be an object of servers by name, got a list'),
    Bad({'mcpServers': {'a': 'npx x'}}, r'mcpServers\.a must be an object with "command" .* got a string "npx x"'),
    Bad({'mcpServers': {'a': {}}}, r'mcpServers\.a has neither "command" nor "url"\. Give "command"'),
    Bad({'mcpServers': {'a': {'command': 'x', 'url': 'http://h'}}}, r'mcpServers\.a has both "command" and "url"'),
    Bad({'mcpServers': {'a': {'command': ''}}}, r'mcpServers\.a\.command must be a non-empty string, got \'\''),
    Bad({'mcpServers': {'a': {'command': 'x', 'args': '--port 3'}}},
        r'mcpServers\.a\.args must be a list of strings, got a string "--port 3"\. Write \["--port 3"\]'),
    Bad({'mcpServers': {'a': {'command': 'x', 'args': ['-p', 3]}}}, r'mcpServers\.a\.args\[1\] must be a non-empty'),
    Bad({'mcpServers': {'a': {'command': 'x', 'env': {'PORT': 3}}}},
        r'mcpServers\.a\.env\.PORT must be a string, got a number 3|mcpServers\.a\.env\.PORT must be a string'),
    Bad({'mcpServers': {'a': {'command': 'x', 'type': 'http'}}}, r'mcpServers\.a\.type is \'http\', but the server'),
    Bad({'mcpServers': {'a': {'url': 'h', 'type': 'websocket'}}}, r'mcpServers\.a\.type must be "stdio", "http" or'),
    Bad({'mcpServers': {'a': {'url': 'localhost:8000/mcp'}}}, r'mcpServers\.a\.url must start with http:// or'),
    Bad({'mcpServers': {'a': {'command': '${env:NOPE}'}}}, r'uses \$\{env:NOPE\}, and the environment variable NOPE '
                                                          r'is not set', {}),
    Bad({'mcpServers': {'a': {'command': 'x', 'args': ['${input:token}']}}},
        r'mcpServers\.a\.args\[0\] uses \$\{input:token\}; only \$\{env:NAME\}'),
    Bad({'mcpServers': {'a': {'command': 'x', 'toolweave': []}}}, r'mcpServers\.a\.toolweave must be an object'),
    Bad({'mcpServers': {'a': {'command': 'x', 'toolweave': {'denyTool': ['y']}}}},
        r'mcpServers\.a\.toolweave\.denyTool is not a toolweave option\. Did you mean "denyTools"\?'),
    Bad({'mcpServers': {'a': {'command': 'x', 'toolweave': {'denyTools': 'git_reset'}}}},
        r'denyTools must be a list of strings, got a string "git_reset"\. Write \["git_reset"\]'),
    Bad({'mcpServers': {'a': {'command': 'x', 'toolweave': {'prefix': 'has space'}}}},
        r'toolweave\.prefix must be up to 30 letters, digits, _ or -, got \'has space\''),
    Bad({'mcpServers': {'a': {'command': 'x', 'toolweave': {'timeout': 0}}}},
        r'toolweave\.timeout must be a number of seconds > 0 or null \(no limit\), got 0'),
    Bad({'mcpServers': {'a': {'command': 'x', 'toolweave': {'startTimeout': None}}}},
        r'toolweave\.startTimeout must be a number of seconds > 0, got null'),
    Bad({'mcpServers': {'a': {'command': 'x', 'toolweave': {'timeout': True}}}}, r'timeout must be a number'),
    Bad({'mcpServers': {'a': {'command': 'x', 'toolweave': {'approvalFallback': 'ask'}}}},
        r'approvalFallback must be one of "deny", "allow", got "ask"'),
    Bad({'mcpServers': {}, 'toolweave': {'mode': 'all'}}, r'toolweave\.mode must be one of "tools", "search", '
                                                          r'got "all"'),
    Bad({'mcpServers': {}, 'toolweave': {'prefixTools': 'never'}}, r'prefixTools must be one of "onCollision"'),
    Bad({'mcpServers': {}, 'toolweave': {'planTimeout': -5}}, r'planTimeout must be a number of seconds > 0'),
    Bad({'mcpServers': {}, 'toolweave': {'modes': 'x'}}, r'toolweave\.modes is not a toolweave option\. Did you '
                                                          r'mean "mode"\?'),
]


@pytest.mark.parametrize('case', BAD, ids=[case.message[:40] for case in BAD])
def test_every_mistake_says_where_and_how_to_fix_it(case: Bad) -> None:
    with pytest.raises(UserError, match=r'^config\.json: .*' + case.message):
        GatewayConfig.parse(case.data, source='config.json', environ=case.environ)


def test_two_servers_cannot_share_a_prefix() -> None:
    config = GatewayConfig.parse({'mcpServers': {'a.b': {'command': 'x'}, 'a_b': {'command': 'y'}}})
    with pytest.raises(UserError, match=r"MCP servers 'a\.b' and 'a_b' would both prefix their tool names with "
                                        r"'a_b'\. Give one of them its own"):
        McpGateway(config)


def _doc_blocks(language: str) -> list[str]:
    return re.findall(rf'^```{language}\n(.*?)^```', DOCS.read_text(), re.MULTILINE | re.DOTALL)


def test_the_docs_config_snippets_parse() -> None:
    blocks = [json.loads(block) for block in _doc_blocks('json')]
    assert blocks, 'docs/gateway.md has no ```json blocks'
    clients = [block for block in blocks if 'toolweave' in json.dumps(block) and 'gateway' in json.dumps(block)]
    assert clients, 'docs/gateway.md shows no client entry that starts the gateway'
    for block in blocks:
        servers = block.get('mcpServers', block.get('servers'))
        assert isinstance(servers, dict)
        for entry in servers.values():
            args = entry.get('args', [])
            if entry.get('command') == 'toolweave' or args[:1] == ['gateway']:  # a client entry starting us
                assert args[0] == 'gateway' and '--config' in args
        GatewayConfig.parse(block, environ={'GITHUB_TOKEN': 'x', 'HOME': '/home/me', 'LAPTOP_TOKEN': 'l' * 32,
                                            'CI_TOKEN': 'c' * 32})
