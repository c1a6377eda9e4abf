"""The gateway always answers: malformed JSON-RPC sent as raw bytes to the `toolweave gateway` process over stdio
and streamable HTTP (both protocol eras) gets a JSON-RPC error naming the request's id; a line or body over the
size limit is skipped and answered; SIGINT and SIGTERM of `gateway --http` with a call in flight and an open
event stream exit with status 0 and no traceback."""

from __future__ import annotations

import json
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolweave.mcp._wire import MAX_MESSAGE_BYTES, rejection

UPSTREAM = str(Path(__file__).with_name('gateway_upstream.py'))
TOOLWEAVE = shutil.which('toolweave', path=str(Path(sys.executable).parent)) or 'toolweave'
DEEP = 100_000


@dataclass(frozen=True)
class Case:
    name: str
    raw: bytes
    answer: Any
    """The expected answer: one error `(id, code, start of message)`, or a list of them (a batch)."""


CASES = [
    Case('batch', b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":"two","method":"ping"},'
                  b'{"jsonrpc":"2.0","method":"notifications/initialized"}]',
         [(1, -32600, 'Invalid Request: batches are not supported'),
          ('two', -32600, 'Invalid Request: batches are not supported')]),
    Case('jsonrpc 1.0', b'{"jsonrpc":"1.0","id":3,"method":"tools/list"}',
         (3, -32600, 'Invalid Request: "jsonrpc" must be "2.0", got "1.0".')),
    Case('params an array', b'{"jsonrpc":"2.0","id":4,"method":"tools/list","params":[1]}',
         (4, -32602, 'Invalid params: MCP params must be a JSON object, got an array.')),
    Case('params a string', b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":"x"}',
         (5, -32602, 'Invalid params: MCP params must be a JSON object, got "x".')),
    Case('invalid UTF-8', b'{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"x":"\xff\xfe"}}',
         (6, -32700, 'Parse error: the message is not valid UTF-8 (byte 61).')),
    Case('a 100,000-deep plan', b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":'
                                b'"execute_tool_plan","arguments":{"steps":' + b'[' * DEEP + b']' * DEEP + b'}}}',
         (7, -32700, 'Parse error: the message is nested too deeply')),
    Case('the id after a deep value', b'{"jsonrpc":"2.0","method":"tools/call","params":{"a":' + b'[' * 5000
         + b']' * 5000 + b'},"id":"late"}', ('late', -32700, 'Parse error: the message is nested too deeply')),
    Case('cut short', b'{"jsonrpc":"2.0","id":8,"method":"tools/li',
         (8, -32700, 'Parse error: the message is not JSON')),
    Case('not an object', b'42', (None, -32600, 'Invalid Request: a message must be a JSON object, got int.')),
    Case('an id of the wrong type', b'{"jsonrpc":"2.0","id":{"x":1},"method":"tools/list"}',
         (None, -32600, 'Invalid Request: "id" must be a string or a number.')),
]


def check(answer: Any, expected: Any) -> None:
    if isinstance(expected, list):
        assert isinstance(answer, list) and len(answer) == len(expected)
        for one, want in zip(answer, expected, strict=True):
            check(one, want)
        return
    request_id, code, start = expected
    assert answer['jsonrpc'] == '2.0' and answer['id'] == request_id
    assert answer['error']['code'] == code and answer['error']['message'].startswith(start), answer


def test_messages_without_an_id_get_no_answer() -> None:
    assert rejection(b'{"jsonrpc":"1.0","method":"notifications/initialized"}') is None
    assert rejection(b'[{"jsonrpc":"2.0","method":"notifications/initialized"}]') is None
    assert rejection(b'{"jsonrpc":"2.0","id":1,"result":{}}') is None


def config(tmp_path: Path) -> Path:
    path = tmp_path / 'mcp.json'
    path.write_text(json.dumps({'mcpServers': {'alpha': {'command': sys.executable, 'args': [UPSTREAM, 'sdk']}}}))
    return path


# stdio


class StdioGateway:
    """A gateway process spoken to in raw lines."""

    def __init__(self, tmp_path: Path) -> None:
        self.process = subprocess.Popen([TOOLWEAVE, 'gateway', '--config', str(config(tmp_path)), '--log-dir',
                                         str(tmp_path / 'logs')], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)

    def send(self, raw: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(raw + b'\n')
        self.process.stdin.flush()

    def answer(self, seconds: float = 20) -> Any:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], seconds)
        assert ready, 'no answer'
        return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture(scope='module')
def stdio_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioGateway]:
    gateway = StdioGateway(tmp_path_factory.mktemp('stdio'))
    try:
        initialize = {'jsonrpc': '2.0', 'id': 0, 'method': 'initialize', 'params': {
            'protocolVersion': '2025-11-25', 'capabilities': {}, 'clientInfo': {'name': 't', 'version': '1'}}}
        gateway.send(json.dumps(initialize).encode())
        assert gateway.answer(60)['id'] == 0
        gateway.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        yield gateway
    finally:
        gateway.close()


@pytest.mark.parametrize('case', CASES, ids=[case.name for case in CASES])
def test_every_malformed_request_is_answered_over_stdio(stdio_gateway: StdioGateway, case: Case) -> None:
    stdio_gateway.send(case.raw)
    check(stdio_gateway.answer(), case.answer)
    stdio_gateway.send(b'{"jsonrpc":"2.0","id":"after","method":"ping"}')  # and the connection goes on
    assert stdio_gateway.answer() == {'jsonrpc': '2.0', 'id': 'after', 'result': {}}


def test_a_line_over_the_limit_is_skipped_and_answered_over_stdio(stdio_gateway: StdioGateway) -> None:
    huge = b'{"jsonrpc":"2.0","id":"huge","method":"tools/call","params":{"name":"echo","arguments":{"text":"' + \
        b'x' * (MAX_MESSAGE_BYTES + 10) + b'"}}}'
    stdio_gateway.send(huge)
    check(stdio_gateway.answer(), ('huge', -32600, f'Invalid Request: the message has {len(huge):,} bytes'))
    stdio_gateway.send(b'{"jsonrpc":"2.0","id":"next","method":"ping"}')
    assert stdio_gateway.answer() == {'jsonrpc': '2.0', 'id': 'next', 'result': {}}


# streamable HTTP


@contextmanager
def http_gateway(tmp_path: Path, *extra: str, environment: dict[str, str] | None = None) -> Iterator[
        tuple[subprocess.Popen[str], str]]:
    process = subprocess.Popen([TOOLWEAVE, 'gateway', '--config', str(config(tmp_path)), '--log-dir',
                                str(tmp_path / 'logs'), '--http', '127.0.0.1:0', *extra], stderr=subprocess.PIPE,
                               text=True, env=environment)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert line.startswith('toolweave gateway: serving MCP at'), line
        yield process, line.rsplit(' ', 1)[1].strip()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


HEADERS = {'Accept': 'application/json, text/event-stream', 'Content-Type': 'application/json'}


def legacy_session(url: str) -> dict[str, str]:
    """Initialize a session with the handshake; the headers its requests carry."""
    answer = httpx.post(url, headers=HEADERS, json={'jsonrpc': '2.0', 'id': 0, 'method': 'initialize', 'params': {
        'protocolVersion': '2025-11-25', 'capabilities': {}, 'clientInfo': {'name': 't', 'version': '1'}}})
    session = {**HEADERS, 'mcp-session-id': answer.headers['mcp-session-id'], 'mcp-protocol-version': '2025-11-25'}
    httpx.post(url, headers=session, json={'jsonrpc': '2.0', 'method': 'notifications/initialized'})
    return session


@pytest.fixture(scope='module')
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with http_gateway(tmp_path_factory.mktemp('http')) as (_, url):
        yield url


@pytest.mark.parametrize('era', ['2025-11-25', '2026-07-28'])
@pytest.mark.parametrize('case', CASES, ids=[case.name for case in CASES])
def test_every_malformed_request_is_answered_over_http(http_url: str, case: Case, era: str) -> None:
    headers = legacy_session(http_url) if era == '2025-11-25' else {
        **HEADERS, 'mcp-protocol-version': era, 'mcp-method': 'tools/list'}
    answer = httpx.post(http_url, headers=headers, content=case.raw, timeout=20)
    assert answer.status_code == 400
    check(answer.json(), case.answer)


def test_a_body_over_the_limit_is_answered_over_http(http_url: str) -> None:
    huge = b'{"jsonrpc":"2.0","id":"huge","method":"ping","params":{"x":"' + b'x' * MAX_MESSAGE_BYTES + b'"}}'
    answer = httpx.post(http_url, headers=legacy_session(http_url), content=huge, timeout=20)
    assert answer.status_code == 413
    check(answer.json(), ('huge', -32600, 'Invalid Request: the message has'))


@pytest.mark.parametrize('how', [signal.SIGTERM, signal.SIGINT])
def test_stopping_the_http_gateway_with_calls_and_streams_open_is_clean(tmp_path: Path, how: int) -> None:
    with http_gateway(tmp_path) as (process, url):
        session = legacy_session(url)
        events = threading.Thread(target=_read_events, args=(url, session), daemon=True)  # the standalone stream
        events.start()
        call = threading.Thread(target=_post_quietly, args=(url, session, {
            'jsonrpc': '2.0', 'id': 9, 'method': 'tools/call', 'params': {'name': 'slow', 'arguments': {
                'seconds': 60}}}), daemon=True)
        call.start()
        time.sleep(1)  # the call is in flight upstream, the stream open
        process.send_signal(how)
        code = process.wait(timeout=30)
        assert process.stderr is not None
        stderr = process.stderr.read()
    assert code == 0 and 'Traceback' not in stderr and 'ERROR' not in stderr, stderr


def _read_events(url: str, session: dict[str, str]) -> None:
    try:
        with httpx.stream('GET', url, headers={**session, 'Accept': 'text/event-stream'}, timeout=60) as stream:
            for _ in stream.iter_lines():
                pass
    except httpx.HTTPError:
        pass


def _post_quietly(url: str, session: dict[str, str], message: dict[str, Any]) -> None:
    try:
        httpx.post(url, headers=session, json=message, timeout=60)
    except httpx.HTTPError:
        pass
