"""Replay recorded provider payloads through a mock HTTP transport; block every real model request.

The lead may make `block_model_requests` global by moving it to `tests/conftest.py`.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest

import toolweave.models
from toolweave.models import RetryPolicy

CASSETTES = Path(__file__).parent / 'cassettes'

# Provider environment that must not leak into (or out of) these tests.
_PROVIDER_ENV = (
    'OPENAI_API_KEY',
    'OPENAI_BASE_URL',
    'OPENAI_ORG_ID',
    'OPENAI_PROJECT_ID',
    'OPENAI_ADMIN_KEY',
    'OPENAI_CUSTOM_HEADERS',
    'ANTHROPIC_API_KEY',
    'ANTHROPIC_AUTH_TOKEN',
    'ANTHROPIC_BASE_URL',
    'ANTHROPIC_PROFILE',
    'ANTHROPIC_CONFIG_DIR',
    'ANTHROPIC_CUSTOM_HEADERS',
    'OLLAMA_BASE_URL',
    'VLLM_BASE_URL',
    'LLAMACPP_BASE_URL',
)


@pytest.fixture(autouse=True)
def block_model_requests(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test here may reach a real provider, or read the developer's keys and credential files."""
    monkeypatch.setattr(toolweave.models, 'ALLOW_MODEL_REQUESTS', False)
    for name in _PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv('ANTHROPIC_CONFIG_DIR', str(tmp_path / 'anthropic-config'))


@pytest.fixture
def allow_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(toolweave.models, 'ALLOW_MODEL_REQUESTS', True)


def load_cassette(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CASSETTES / name).read_text())
    return data


@dataclass
class Sent:
    """One request the adapter sent, as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


Reply = dict[str, Any] | Exception | Callable[[], Exception]


@dataclass
class Replay:
    """A fake provider: answers each request with the next recorded response and keeps what was sent."""

    replies: list[Reply]
    sent: list[Sent] = field(default_factory=list[Sent])

    @classmethod
    def from_cassette(cls, name: str) -> Replay:
        return cls([item['response'] for item in load_cassette(name)['interactions']])

    def _answer(
        self, method: str, url: str, headers: dict[str, str], content: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        self.sent.append(Sent(method, url, headers, json.loads(content) if content else None))
        index = len(self.sent) - 1
        if index >= len(self.replies):
            # 418 is not retried, so a test that sends too many requests fails with this message.
            body = {'error': {'message': f'test replay: unexpected request #{index + 1} to {url}'}}
            return 418, {'content-type': 'application/json'}, json.dumps(body).encode()
        reply = self.replies[index]
        if callable(reply):
            reply = reply()
        if isinstance(reply, Exception):
            raise reply
        headers_out = {'content-type': 'application/json', **reply.get('headers', {})}
        body = reply['body']
        raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        return int(reply['status']), headers_out, raw

    def httpx2_client(self) -> httpx2.AsyncClient:
        def handler(request: httpx2.Request) -> httpx2.Response:
            status, headers, raw = self._answer(request.method, request.url.path, dict(request.headers), request.read())
            return httpx2.Response(status, headers=headers, content=raw)

        return httpx2.AsyncClient(transport=httpx2.MockTransport(handler))

    def httpx_client(self) -> httpx.AsyncClient:
        def handler(request: httpx.Request) -> httpx.Response:
            status, headers, raw = self._answer(request.method, request.url.path, dict(request.headers), request.read())
            return httpx.Response(status, headers=headers, content=raw)

        return httpx.AsyncClient(transport=httpx.MockTransport(handler))


@dataclass
class Sleeps:
    """Records the waits of a `RetryPolicy` instead of sleeping; jitter pinned to its midpoint (factor 1)."""

    waits: list[float] = field(default_factory=list[float])

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    def policy(self, max_retries: int = 3, **kwargs: Any) -> RetryPolicy:
        return RetryPolicy(max_retries=max_retries, sleep=self.sleep, random=lambda: 0.5, **kwargs)


@pytest.fixture
def sleeps() -> Iterator[Sleeps]:
    yield Sleeps()


@dataclass
class LocalServer:
    """A real HTTP server on 127.0.0.1 answering with recorded replies (exercises the adapters' own clients)."""

    base_url: str
    replay: Replay


@pytest.fixture
def local_server() -> Iterator[LocalServer]:
    replay = Replay([])

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            content = self.rfile.read(int(self.headers.get('content-length', 0)))
            status, headers, raw = replay._answer(
                'POST', self.path, {k.lower(): v for k, v in self.headers.items()}, content
            )
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header('content-length', str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield LocalServer(f'http://127.0.0.1:{server.server_address[1]}', replay)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
