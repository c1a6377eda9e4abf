"""Remote use of the gateway over streamable HTTP: bearer tokens (from the config or the environment, compared in
constant time), a 401 with a `WWW-Authenticate: Bearer` challenge for anyone else, a refusal to serve other
machines without tokens, and the per-client limit on concurrent plans (a client over it gets an error result at
once; other clients are not held back). The official SDK client against the `toolweave gateway` process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from toolweave.exceptions import UserError
from toolweave.mcp import GatewayConfig
from toolweave.mcp._http import BearerTokens

pytestmark = pytest.mark.anyio

UPSTREAM = str(Path(__file__).with_name('gateway_upstream.py'))
TOOLWEAVE = shutil.which('toolweave', path=str(Path(sys.executable).parent)) or 'toolweave'
ALICE, BOB, ENV_TOKEN = 'alice-token-0123456789abcdef', 'bob-token-0123456789abcdef', 'env-token-0123456789abcdef'


@pytest.fixture(scope='module')
def anyio_backend() -> str:
    return 'asyncio'


@contextmanager
def http_gateway(tmp_path: Path, options: dict[str, Any], *, environment: dict[str, str] | None = None,
                 host: str = '127.0.0.1') -> Iterator[str]:
    config = tmp_path / 'mcp.json'
    config.write_text(json.dumps({'mcpServers': {'alpha': {'command': sys.executable, 'args': [UPSTREAM, 'sdk']}},
                                  'toolweave': options}))
    process = subprocess.Popen([TOOLWEAVE, 'gateway', '--config', str(config), '--log-dir', str(tmp_path / 'logs'),
                                '--http', f'{host}:0'], stderr=subprocess.PIPE, text=True,
                               env={**os.environ, **(environment or {})})
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert line.startswith('toolweave gateway: serving MCP at'), line
        yield line.rsplit(' ', 1)[1].strip()
    finally:
        process.kill()
        process.wait()
        if process.stderr is not None:
            process.stderr.close()


@asynccontextmanager
async def client_with(url: str, token: str | None, mode: str = 'auto') -> AsyncIterator[Client]:
    headers = {'Authorization': f'Bearer {token}'} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=120.0)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            yield client


@pytest.fixture(scope='module')
def tokened(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    options = {'bearerTokens': {'alice': ALICE, 'bob': BOB}, 'maxPlansPerClient': 1}
    with http_gateway(tmp_path_factory.mktemp('remote'), options, environment={'TOOLWEAVE_GATEWAY_TOKEN': ENV_TOKEN}) \
            as url:
        yield url


@pytest.mark.parametrize('mode', ['auto', 'legacy'])
@pytest.mark.parametrize('token', [ALICE, BOB, ENV_TOKEN])
async def test_a_client_with_a_token_is_served(tokened: str, token: str, mode: str) -> None:
    async with client_with(tokened, token, mode) as client:
        result = await client.call_tool('echo', {'text': 'in'})
    assert not result.is_error and result.content[0] == types.TextContent(text='in')


@pytest.mark.parametrize('authorization', [None, 'Bearer wrong-token-0123456789abcdef', f'Basic {ALICE}',
                                           f'Bearer {ALICE}x', f'Bearer {ALICE[:-1]}', 'Bearer'])
def test_anyone_else_gets_401_and_a_bearer_challenge(tokened: str, authorization: str | None) -> None:
    headers = {'Accept': 'application/json, text/event-stream', 'Content-Type': 'application/json'}
    if authorization is not None:
        headers['Authorization'] = authorization
    answer = httpx.post(tokened, headers=headers, json={'jsonrpc': '2.0', 'id': 1, 'method': 'initialize',
                                                        'params': {'protocolVersion': '2025-11-25', 'capabilities': {},
                                                                   'clientInfo': {'name': 't', 'version': '1'}}})
    assert answer.status_code == 401
    assert answer.headers['www-authenticate'] == 'Bearer realm="toolweave-gateway", error="invalid_token"'


@pytest.mark.parametrize('mode', ['auto', 'legacy'])
async def test_a_client_over_its_plan_limit_is_refused_at_once_and_others_are_not(tokened: str, mode: str) -> None:
    slow_plan = {'steps': [{'id': 's', 'tool': 'slow', 'arguments': '{"seconds": 2}'}], 'output_steps': None}
    quick_plan = {'steps': [{'id': 'e', 'tool': 'echo', 'arguments': '{"text": "mine"}'}], 'output_steps': None}
    results: dict[str, Any] = {}
    async with client_with(tokened, ALICE, mode) as alice, client_with(tokened, BOB, mode) as bob:
        async with anyio.create_task_group() as group:
            async def first() -> None:
                results['first'] = await alice.call_tool('execute_tool_plan', slow_plan)

            group.start_soon(first)
            await anyio.sleep(0.7)  # alice's first plan is running
            results['second'] = await alice.call_tool('execute_tool_plan', quick_plan)
            results['bob'] = await bob.call_tool('execute_tool_plan', quick_plan)
        results['later'] = await alice.call_tool('execute_tool_plan', quick_plan)  # the first one has ended
    assert results['first'].structured_content == {'results': {'s': 'slept'}, 'errors': {}}
    assert results['second'].is_error and results['second'].content[0].text == (
        'Too many plans at once: this client already runs 1 (maxPlansPerClient). Wait for one to finish, or put '
        'more steps in one plan.')
    assert results['bob'].structured_content == results['later'].structured_content == {
        'results': {'e': 'mine'}, 'errors': {}}


def test_serving_other_machines_needs_tokens(tmp_path: Path) -> None:
    config = tmp_path / 'mcp.json'
    config.write_text(json.dumps({'mcpServers': {}}))
    done = subprocess.run([TOOLWEAVE, 'gateway', '--config', str(config), '--log-dir', str(tmp_path / 'logs'),
                           '--http', '0.0.0.0:0'], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != 'TOOLWEAVE_GATEWAY_TOKEN'})
    assert done.returncode == 2 and 'Traceback' not in done.stderr
    assert '--http 0.0.0.0:0 lets other machines call every tool of the gateway: give clients bearer tokens' in \
        done.stderr


def test_tokens_are_compared_whole_and_need_length() -> None:
    tokens = BearerTokens({'alice': ALICE, 'bob': BOB})
    assert tokens.client(f'Bearer {ALICE}') == 'alice' and tokens.client(f'bearer {BOB}') == 'bob'
    assert tokens.client(f'Bearer {ALICE} ') == 'alice'  # surrounding space is not part of a token
    for wrong in (None, '', 'Bearer', f'Bearer {ALICE[:-1]}', f'Bearer {ALICE}{ALICE}', f'Token {ALICE}'):
        assert tokens.client(wrong) is None
    with pytest.raises(UserError, match='at least 16 characters'):
        BearerTokens({'short': 'abc'})


def test_config_tokens_limits_and_trust() -> None:
    parsed = GatewayConfig.parse({'mcpServers': {'a': {'command': 'x', 'toolweave': {'trustTools': ['get_*']}}},
                                  'toolweave': {'bearerTokens': {'alice': '${env:ALICE}'}, 'maxPlansPerClient': 2}},
                                 environ={'ALICE': ALICE, 'TOOLWEAVE_GATEWAY_TOKEN': ENV_TOKEN})
    assert parsed.bearer_tokens == {'alice': ALICE, 'token': ENV_TOKEN} and parsed.max_plans_per_client == 2
    assert parsed.servers[0].trust_tools == ('get_*',)
    defaults = GatewayConfig.parse({'mcpServers': {}}, environ={})
    assert defaults.bearer_tokens == {} and defaults.max_plans_per_client == 4
    for options, message in (({'maxPlansPerClient': 0}, 'toolweave.maxPlansPerClient must be a whole number of at '
                                                        'least 1, got 0.'),
                             ({'bearerTokens': {'bob': 'short'}}, 'toolweave.bearerTokens.bob must be at least 16 '
                                                                  'characters long'),
                             ({'bearerTokens': ['x']}, 'toolweave.bearerTokens must be an object of strings')):
        with pytest.raises(UserError, match=message.replace('.', r'\.')):
            GatewayConfig.parse({'mcpServers': {}, 'toolweave': options}, environ={})
