"""The gateway's configuration: the `mcpServers` file MCP clients already use, plus toolweave's own keys.

```json
{
  "mcpServers": {
    "git": {"command": "uvx", "args": ["mcp-server-git"], "toolweave": {"requireApproval": ["git_commit"]}},
    "docs": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${env:DOCS_TOKEN}"}}
  },
  "toolweave": {"mode": "search"}
}
```

Each server is a subprocess (`command`, `args`, `env`, `cwd`) or a URL (`url`, `headers`; `"type": "sse"` for the
older SSE transport). VS Code's top-level `servers` key is read like `mcpServers`, and `"disabled": true` leaves a
server out. `${env:NAME}` in a command, argument, environment value, URL or header is replaced by that
environment variable. toolweave's keys live in a `"toolweave"` object, per server and at the top, so the rest of
an entry stays what the client reads; they are checked strictly.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from toolweave.exceptions import UserError
from toolweave.tools._definition import NAME_PATTERN

__all__ = ('GatewayConfig', 'GatewayMode', 'PrefixPolicy', 'ServerConfig')

logger = logging.getLogger('toolweave.mcp.gateway')

GatewayMode: TypeAlias = Literal['tools', 'search']
"""`tools`: list every upstream tool plus `execute_tool_plan`; `search`: list only `search_tools`,
`describe_tools` and `execute_tool_plan`, a surface that never changes."""
PrefixPolicy: TypeAlias = Literal['onCollision', 'always']
"""When upstream tool names get the server's prefix: only when two servers offer the same name, or always."""

DEFAULT_CALL_TIMEOUT = 120.0
DEFAULT_PLAN_TIMEOUT = 600.0
DEFAULT_START_TIMEOUT = 60.0

_TRANSPORT_KEYS = frozenset({'command', 'args', 'env', 'cwd', 'url', 'headers', 'type', 'disabled'})
_SERVER_KEYS = {'prefix': 'prefix', 'allowTools': 'allow_tools', 'denyTools': 'deny_tools',
                'requireApproval': 'require_approval', 'trustTools': 'trust_tools',
                'forwardContext': 'forward_context', 'timeout': 'timeout', 'startTimeout': 'start_timeout',
                'approvalFallback': 'approval_fallback'}
_GATEWAY_KEYS = {'mode': 'mode', 'prefixTools': 'prefix_tools', 'approvalFallback': 'approval_fallback',
                 'callTimeout': 'call_timeout', 'planTimeout': 'plan_timeout',
                 'maxPlansPerClient': 'max_plans_per_client', 'bearerTokens': 'bearer_tokens'}
TOKEN_VARIABLE = 'TOOLWEAVE_GATEWAY_TOKEN'
"""The environment variable whose value, when set, is a bearer token (of the client named `token`)."""
DEFAULT_MAX_PLANS_PER_CLIENT = 4
_VARIABLE = re.compile(r'\$\{([^}]*)\}')
_BAD_CHARS = re.compile(r'[^A-Za-z0-9_-]')


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One upstream MCP server and what the gateway does with its tools."""

    name: str
    """The key of the server's entry; also the default prefix for its tool names."""
    command: str | None = None
    """The program to start (stdio servers)."""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict[str, str])
    """Added to a small safe environment (PATH, HOME, ...), as MCP clients do."""
    cwd: str | None = None
    url: str | None = None
    """The server's endpoint (streamable HTTP, or SSE with `transport='sse'`)."""
    headers: Mapping[str, str] = field(default_factory=dict[str, str])
    transport: Literal['stdio', 'http', 'sse'] = 'stdio'
    prefix: str | None = None
    """The prefix for this server's tool names (default: the server's name, made to fit the name rule)."""
    allow_tools: tuple[str, ...] | None = None
    """Only tools whose server-side name matches one of these globs (`None`: every tool)."""
    deny_tools: tuple[str, ...] = ()
    """Never tools whose server-side name matches one of these globs."""
    require_approval: tuple[str, ...] = ()
    """Tools (globs) that need approval whatever their hints say; `["*"]` gates them all."""
    trust_tools: tuple[str, ...] = ()
    """Tools (globs) that run without approval although their server does not mark them read-only or not
    destructive (MCP reads a tool without annotations as possibly destructive). A tool marked
    `destructiveHint: true` is still asked about."""
    forward_context: tuple[str, ...] = ()
    """The call-context keys sent to this server as `_meta`; nothing else is sent."""
    timeout: float | None = DEFAULT_CALL_TIMEOUT
    """Seconds one call may take (`None`: no limit)."""
    start_timeout: float = DEFAULT_START_TIMEOUT
    """Seconds the server may take to start and list its tools."""
    approval_fallback: Literal['deny', 'allow'] | None = None
    """Overrides the gateway's `approval_fallback` for this server's tools."""

    @property
    def tool_prefix(self) -> str:
        """The prefix used when this server's tool names are prefixed."""
        return self.prefix or (_BAD_CHARS.sub('_', self.name)[:30] or 'server')

    @property
    def label(self) -> str:
        return repr(self.name)


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """Everything `toolweave gateway` needs: the servers and the gateway's own options.

    ```python
    config = GatewayConfig.parse({'mcpServers': {'time': {'command': 'mcp-server-time'}},
                                  'toolweave': {'mode': 'search'}})
    print(config.mode, [s.name for s in config.servers], config.servers[0].transport)
    #> search ['time'] stdio
    ```
    """

    servers: tuple[ServerConfig, ...]
    mode: GatewayMode = 'tools'
    prefix_tools: PrefixPolicy = 'onCollision'
    approval_fallback: Literal['deny', 'allow'] = 'deny'
    """What a call that needs approval gets when the client cannot be asked (no elicitation support)."""
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT
    """The default of each server's `timeout`."""
    plan_timeout: float | None = DEFAULT_PLAN_TIMEOUT
    """Seconds a whole plan may take (approvals included)."""
    max_plans_per_client: int = DEFAULT_MAX_PLANS_PER_CLIENT
    """Plans one client may run at once; one more is refused at once with an error result."""
    bearer_tokens: Mapping[str, str] = field(default_factory=dict[str, str])
    """Over HTTP, the tokens clients must send (`Authorization: Bearer ...`), by client name."""

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> GatewayConfig:
        """Read a config file. Raises `UserError` saying what is wrong, where, and how to fix it."""
        where = os.fspath(path)
        try:
            text = Path(where).read_text(encoding='utf-8')
        except OSError as exc:
            raise UserError(f'Cannot read the gateway config {where}: {exc.strerror or exc}. Pass the path of a '
                            'JSON file with an "mcpServers" object.') from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f'{where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}.') from None
        return cls.parse(data, source=where)

    @classmethod
    def parse(cls, data: Any, *, source: str = 'the gateway config',
              environ: Mapping[str, str] | None = None) -> GatewayConfig:
        """Build a config from parsed JSON. `environ` (default `os.environ`) fills `${env:NAME}`."""
        return _Parser(source, os.environ if environ is None else environ).config(data)


class _Parser:
    def __init__(self, source: str, environ: Mapping[str, str]) -> None:
        self.source = source
        self.environ = environ

    def fail(self, where: str, problem: str) -> UserError:
        return UserError(f'{self.source}: {where} {problem}')

    def config(self, data: Any) -> GatewayConfig:
        if not isinstance(data, dict):
            raise self.fail('the top level', f'must be a JSON object, got {_kind(data)}. Write {{"mcpServers": '
                            '{"name": {"command": "...", "args": [...]}}}.')
        key = 'mcpServers' if 'mcpServers' in data else 'servers' if 'servers' in data else None
        if key is None:
            raise self.fail('the top level', 'has no "mcpServers" object. Write {"mcpServers": {"name": '
                            '{"command": "...", "args": [...]}}} (VS Code\'s "servers" works too).')
        entries = data[key]
        if not isinstance(entries, dict):
            raise self.fail(f'"{key}"', f'must be an object of servers by name, got {_kind(entries)}.')
        options = self.own_keys(data.get('toolweave'), 'toolweave', _GATEWAY_KEYS)
        gateway = self.gateway_options(options)
        servers = []
        for name, entry in entries.items():
            server = self.server(name, entry, f'{key}.{name}', gateway)
            if server is not None:
                servers.append(server)
        return GatewayConfig(tuple(servers), **gateway)

    def gateway_options(self, options: dict[str, Any]) -> dict[str, Any]:
        where = 'toolweave.'
        found: dict[str, Any] = {}
        if 'mode' in options:
            found['mode'] = self.choice(options['mode'], where + 'mode', ('tools', 'search'))
        if 'prefix_tools' in options:
            found['prefix_tools'] = self.choice(options['prefix_tools'], where + 'prefixTools',
                                                ('onCollision', 'always'))
        if 'approval_fallback' in options:
            found['approval_fallback'] = self.choice(options['approval_fallback'], where + 'approvalFallback',
                                                     ('deny', 'allow'))
        for name, key in (('call_timeout', 'callTimeout'), ('plan_timeout', 'planTimeout')):
            if name in options:
                found[name] = self.seconds(options[name], where + key, allow_none=True)
        if 'max_plans_per_client' in options:
            value = options['max_plans_per_client']
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise self.fail(where + 'maxPlansPerClient', f'must be a whole number of at least 1, got '
                                f'{json.dumps(value)}.')
            found['max_plans_per_client'] = value
        tokens = self.tokens(options.get('bearer_tokens'), where + 'bearerTokens')
        if self.environ.get(TOKEN_VARIABLE):
            tokens.setdefault('token', self.environ[TOKEN_VARIABLE])
        if tokens:
            found['bearer_tokens'] = tokens
        return found

    def tokens(self, value: Any, where: str) -> dict[str, str]:
        if value is None:
            return {}
        tokens = self.text_map(value, where)
        for name, token in tokens.items():
            if len(token) < 16:
                raise self.fail(f'{where}.{name}', 'must be at least 16 characters long: use a random token, '
                                'such as `python -c "import secrets; print(secrets.token_urlsafe(32))"`, in an '
                                'environment variable: "${env:NAME}".')
        return tokens

    def server(self, name: str, entry: Any, where: str, gateway: dict[str, Any]) -> ServerConfig | None:
        if not isinstance(entry, dict):
            raise self.fail(where, f'must be an object with "command" (and "args") or "url", got {_kind(entry)}.')
        if entry.get('disabled') is True:
            return None
        for key in entry:
            if key not in _TRANSPORT_KEYS and key != 'toolweave':
                self.foreign_key(key, where)
        fields: dict[str, Any] = self.transport(entry, where)
        options = self.own_keys(entry.get('toolweave'), f'{where}.toolweave', _SERVER_KEYS)
        fields.update(self.server_options(options, f'{where}.toolweave.'))
        if 'timeout' not in fields and 'call_timeout' in gateway:
            fields['timeout'] = gateway['call_timeout']
        return ServerConfig(name, **fields)

    def transport(self, entry: dict[str, Any], where: str) -> dict[str, Any]:
        kind = entry.get('type')
        if kind is not None and kind not in ('stdio', 'http', 'streamable-http', 'streamableHttp', 'sse'):
            raise self.fail(f'{where}.type', f'must be "stdio", "http" or "sse", got {kind!r}.')
        has_command, has_url = 'command' in entry, 'url' in entry
        if has_command == has_url:
            problem = 'has both "command" and "url"' if has_command else 'has neither "command" nor "url"'
            raise self.fail(where, f'{problem}. Give "command" (and "args") for a server the gateway starts, or '
                            '"url" for one that is already running.')
        if has_command:
            if kind not in (None, 'stdio'):
                raise self.fail(f'{where}.type', f'is {kind!r}, but the server has a "command" (stdio).')
            found: dict[str, Any] = {'command': self.text(entry['command'], f'{where}.command')}
            if 'args' in entry:
                found['args'] = tuple(self.texts(entry['args'], f'{where}.args'))
            if 'env' in entry:
                found['env'] = self.text_map(entry['env'], f'{where}.env')
            if 'cwd' in entry:
                found['cwd'] = self.text(entry['cwd'], f'{where}.cwd')
            return found
        url = self.text(entry['url'], f'{where}.url')
        if not url.startswith(('http://', 'https://')):
            raise self.fail(f'{where}.url', f'must start with http:// or https://, got {url!r}.')
        found = {'url': url, 'transport': 'sse' if kind == 'sse' else 'http'}
        if 'headers' in entry:
            found['headers'] = self.text_map(entry['headers'], f'{where}.headers')
        return found

    def server_options(self, options: dict[str, Any], where: str) -> dict[str, Any]:
        found: dict[str, Any] = {}
        if 'prefix' in options:
            prefix = options['prefix']
            if not isinstance(prefix, str) or not NAME_PATTERN.fullmatch(prefix) or len(prefix) > 30:
                raise self.fail(where + 'prefix', f'must be up to 30 letters, digits, _ or -, got {prefix!r}.')
            found['prefix'] = prefix
        for name, key in (('allow_tools', 'allowTools'), ('deny_tools', 'denyTools'),
                          ('require_approval', 'requireApproval'), ('trust_tools', 'trustTools'),
                          ('forward_context', 'forwardContext')):
            if name in options:
                found[name] = tuple(self.texts(options[name], where + key, expand=False))
        if 'timeout' in options:
            found['timeout'] = self.seconds(options['timeout'], where + 'timeout', allow_none=True)
        if 'start_timeout' in options:
            found['start_timeout'] = self.seconds(options['start_timeout'], where + 'startTimeout', allow_none=False)
        if 'approval_fallback' in options:
            found['approval_fallback'] = self.choice(options['approval_fallback'], where + 'approvalFallback',
                                                     ('deny', 'allow'))
        return found

    def own_keys(self, value: Any, where: str, known: dict[str, str]) -> dict[str, Any]:
        """toolweave's keys, renamed to field names; an unknown key is an error that suggests the right one."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(where, f'must be an object, got {_kind(value)}.')
        found: dict[str, Any] = {}
        for key, item in value.items():
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = f' Did you mean "{close[0]}"?' if close else ''
                raise self.fail(f'{where}.{key}', f'is not a toolweave option.{hint} Options here: '
                                f'{", ".join(known)}.')
            found[known[key]] = item
        return found

    def foreign_key(self, key: str, where: str) -> None:
        close = difflib.get_close_matches(key, [*_SERVER_KEYS, 'toolweave'], n=1, cutoff=0.8)
        if close:
            raise self.fail(f'{where}.{key}', f'looks like toolweave\'s "{close[0]}"; toolweave\'s options go in '
                            f'{where}.toolweave, for example "toolweave": {{"{close[0]}": ...}}.')
        logger.info('%s: %s.%s is not used by the gateway; left as it is', self.source, where, key)

    def text(self, value: Any, where: str, *, expand: bool = True) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(where, f'must be a non-empty string, got {value!r}.')
        return self.expand(value, where) if expand else value

    def texts(self, value: Any, where: str, *, expand: bool = True) -> list[str]:
        if not isinstance(value, list):
            shown = f' Write [{json.dumps(value)}].' if isinstance(value, str) else ''
            raise self.fail(where, f'must be a list of strings, got {_kind(value)}.{shown}')
        return [self.text(item, f'{where}[{index}]', expand=expand) for index, item in enumerate(value)]

    def text_map(self, value: Any, where: str) -> dict[str, str]:
        if not isinstance(value, dict):
            raise self.fail(where, f'must be an object of strings, got {_kind(value)}.')
        found: dict[str, str] = {}
        for key, item in value.items():
            if not isinstance(item, str):
                raise self.fail(f'{where}.{key}', f'must be a string, got {_kind(item)}. Quote it: "{item}".')
            found[key] = self.expand(item, f'{where}.{key}')
        return found

    def expand(self, text: str, where: str) -> str:
        def replace(match: re.Match[str]) -> str:
            variable = match.group(1)
            if not variable.startswith('env:'):
                raise self.fail(where, f'uses ${{{variable}}}; only ${{env:NAME}} (an environment variable) is '
                                'replaced. Put the value in an environment variable.')
            name = variable[4:]
            if name not in self.environ:
                raise self.fail(where, f'uses ${{env:{name}}}, and the environment variable {name} is not set.')
            return self.environ[name]

        return _VARIABLE.sub(replace, text)

    def choice(self, value: Any, where: str, allowed: tuple[str, ...]) -> Any:
        if value not in allowed:
            raise self.fail(where, f'must be one of {", ".join(map(json.dumps, allowed))}, got {json.dumps(value)}.')
        return value

    def seconds(self, value: Any, where: str, *, allow_none: bool) -> float | None:
        if value is None and allow_none:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            none = ' or null (no limit)' if allow_none else ''
            raise self.fail(where, f'must be a number of seconds > 0{none}, got {json.dumps(value)}.')
        return float(value)


def _kind(value: Any) -> str:
    names = {dict: 'an object', list: 'a list', str: 'a string', bool: 'a boolean', type(None): 'null'}
    return f'{names.get(type(value), type(value).__name__)} {json.dumps(value)[:60]}'
