"""A loopback Chat Completions server as strict as the strictest real ones, so wire regressions fail without a model.

What it enforces, and where each rule comes from:

- The request body is validated with the same shapes as llama-cpp-python's server (`llama_cpp/llama_types.py`):
  `content` is a string (an assistant message may leave it out, but never send `null`), tool calls carry string
  ids and string arguments, `tool_choice` is `'none' | 'auto' | 'required'` or a named function. A body that does
  not validate gets llama-cpp-python's answer: HTTP 500, `internal_server_error`, with pydantic's error list.
- `tool_choice` means what llama-cpp-python's `chatml-function-calling` makes of it: missing or `'none'` is a
  text reply (the model echoes the question, as the real one did), `'required'` crashes with an empty 500, a named
  tool forces a call of that tool (and a 500 when it is not offered), `'auto'` lets the script decide. Streaming a
  tool call chosen under `'auto'` is refused with llama-cpp-python's 500 unless `streams_auto_tool_calls` is set
  (as llama.cpp's own server, vLLM and OpenAI do).
- OpenAI's and Ollama's conversation rules, answered with HTTP 400 `invalid_request_error`: `tool_choice` only with
  tools; every tool message answers a call of the assistant message before it, and every call is answered before
  the conversation goes on; tool call arguments in the history are a JSON object (Ollama parses them).
- Streaming is server-sent events in llama.cpp's shape (a role chunk, content pieces, a finish chunk, the usage
  chunk when `stream_options.include_usage` asks for it, `[DONE]`), sent with chunked transfer encoding so that a
  fault (`cut_at`, `malformed_at`, `hang_at`) looks on the wire exactly like a real broken stream.
- llama.cpp's `llama-server` (`flavour='llama-server'`) takes a GBNF `grammar`, as its `server-common.cpp` says:
  not with `json_schema` or `response_format` (which it compiles to a grammar itself), not with tools unless
  `tool_choice` is `'none'`. The grammar is parsed (`gbnf.Grammar`: a grammar llama.cpp cannot parse is a 400),
  and a scripted text reply must be in its language, as a constrained model's reply can only be.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired

from pydantic import BaseModel, ValidationError
from typing_extensions import TypedDict

from .gbnf import Grammar, GrammarError

Script = list[str | dict[str, Any] | list[dict[str, Any]]]
"""One entry per reply: text, a tool call `{'tool': name, 'arguments': {...} or 'raw text'}`, or a list of calls."""


class _Function(TypedDict):
    name: str
    arguments: str


class _ToolCall(TypedDict):
    id: str
    type: Literal['function']
    function: _Function


class _SystemMessage(TypedDict):
    role: Literal['system']
    content: str | None


class _UserMessage(TypedDict):
    role: Literal['user']
    content: str | list[dict[str, Any]] | None


class _AssistantMessage(TypedDict):
    role: Literal['assistant']
    content: NotRequired[str]
    tool_calls: NotRequired[list[_ToolCall]]


class _ToolMessage(TypedDict):
    role: Literal['tool']
    content: str | None
    tool_call_id: str


class _ToolFunction(TypedDict):
    name: str
    description: NotRequired[str]
    parameters: dict[str, Any]


class _Tool(TypedDict):
    type: Literal['function']
    function: _ToolFunction


class _NamedChoiceFunction(TypedDict):
    name: str


class _NamedChoice(TypedDict):
    type: Literal['function']
    function: _NamedChoiceFunction


class _Request(BaseModel):
    model: str | None = None
    messages: list[_SystemMessage | _UserMessage | _AssistantMessage | _ToolMessage] = []
    tools: list[_Tool] | None = None
    tool_choice: Literal['none', 'auto', 'required'] | _NamedChoice | None = None
    max_tokens: int | None = None
    temperature: float = 0.2
    stream: bool = False


class _EmptyStream(Exception):
    """Answer with the headers of a stream and no event."""


class _Reject(Exception):
    def __init__(self, status: int, message: str, kind: str) -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind


@dataclass
class StrictServer:
    """The server's state: the script it answers from, the faults to inject, and what it received."""

    script: Script
    streams_auto_tool_calls: bool = True
    refusal: Literal['empty', 'error'] = 'empty'
    """How a tool call that cannot be streamed is refused: an empty stream, or an error before the stream."""
    flavour: Literal['llama-cpp-python', 'llama-server'] = 'llama-cpp-python'
    """Whose `tool_choice` semantics to follow. `llama-server` (llama.cpp's own, with `--jinja`): a named choice is
    ignored (its `json_value` falls back to `"auto"` with a log line), `'required'` forces a call, `'auto'` lets the
    script decide, streaming any of them works, and `response_format` is accepted."""
    chunk_delay: float = 0.0
    """Seconds between two stream events."""
    cut_at: int | None = None
    """Close the connection abruptly before stream event number `cut_at` (0-based)."""
    malformed_at: int | None = None
    """Send broken JSON as stream event number `malformed_at`."""
    hang_at: int | None = None
    """Stop sending before stream event number `hang_at`, until the server shuts down."""
    end_early_at: int | None = None
    """End the stream cleanly (no finish chunk, no `[DONE]`) before event number `end_early_at`."""
    requests: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    statuses: list[int] = field(default_factory=list[int])
    base_url: str = ''
    closing: threading.Event = field(default_factory=threading.Event)
    grammar: Grammar | None = None
    """The grammar of the request being answered, if it sent one."""

    # --- validation --------------------------------------------------------------------------------------------

    def check(self, body: Any) -> _Request:
        try:
            request = _Request.model_validate(body)
        except ValidationError as exc:
            errors = [{**error, 'loc': ('body', *error['loc'])} for error in exc.errors(include_url=False)]
            count = len(errors)
            listing = '\n'.join(f'  {error!r}' for error in errors)
            raise _Reject(500, f'{count} validation error{"s" if count != 1 else ""}:\n{listing}',
                          'internal_server_error') from None
        self.grammar = None
        if 'grammar' in body:
            self._check_grammar(request, body)
        if request.tool_choice is not None and not request.tools:
            raise _Reject(400, "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
                               'specified.', 'invalid_request_error')
        pending: set[str] = set()
        for index, message in enumerate(body['messages']):
            role = message['role']
            if role == 'tool':
                if message['tool_call_id'] not in pending:
                    raise _Reject(400, f"Invalid parameter: messages with role 'tool' must be a response to a "
                                       f"preceding message with 'tool_calls' (messages[{index}]).",
                                  'invalid_request_error')
                pending.discard(message['tool_call_id'])
                continue
            if pending:
                raise _Reject(400, f"An assistant message with 'tool_calls' must be followed by tool messages "
                                   f'responding to each tool_call_id; missing {sorted(pending)} before '
                                   f'messages[{index}].', 'invalid_request_error')
            for call in message.get('tool_calls') or ():
                try:
                    arguments = json.loads(call['function']['arguments'])
                except ValueError:
                    arguments = None
                if not isinstance(arguments, dict):
                    raise _Reject(400, f'invalid tool call arguments in messages[{index}]: '
                                       f'{call["function"]["arguments"]!r}', 'invalid_request_error')
                pending.add(call['id'])
        return request

    def _check_grammar(self, request: _Request, body: Mapping[str, Any]) -> None:
        if self.flavour != 'llama-server':
            raise _Reject(500, '1 validation error:\n  grammar: llama-cpp-python takes a grammar in this test server '
                               'only as llama-server does', 'internal_server_error')
        grammar = body['grammar']
        if not isinstance(grammar, str):
            raise _Reject(400, '[json.exception.type_error.302] type must be string, but is ' + type(grammar).__name__,
                          'invalid_request_error')
        if 'json_schema' in body or 'response_format' in body:
            raise _Reject(400, 'Cannot use both json_schema and grammar', 'invalid_request_error')
        if request.tools and request.tool_choice != 'none':
            raise _Reject(400, 'Cannot use custom grammar constraints with tools.', 'invalid_request_error')
        try:
            self.grammar = Grammar(grammar)
        except GrammarError as exc:
            raise _Reject(400, f'Failed to parse grammar: {exc}', 'invalid_request_error') from None

    # --- replies -----------------------------------------------------------------------------------------------

    def reply(self, request: _Request, body: Mapping[str, Any]) -> tuple[str | None, list[dict[str, str]]]:
        """The reply's text and tool calls (`{'id', 'name', 'arguments'}`), as llama-cpp-python would decide."""
        if not self.script:
            raise _Reject(500, 'strict test server: the script has no reply left', 'internal_server_error')
        entry = self.script.pop(0)
        calls = _calls(entry, len(self.requests))
        choice = request.tool_choice
        if self.flavour == 'llama-server':
            if self.grammar is not None:
                grammar, self.grammar = self.grammar, None
                if calls or not grammar.matches(str(entry)):
                    raise _Reject(500, f"strict test server: the script's reply {str(entry)[:200]!r} is outside "
                                       "the request's grammar", 'internal_server_error')
            if choice == 'required' and not calls:
                raise _Reject(500, 'strict test server: tool_choice=required, but the script has text',
                              'internal_server_error')
            return (None, calls) if calls and choice != 'none' else (str(entry) if not calls else '', [])
        if choice is None or choice == 'none' or not request.tools:
            if calls:  # the function-calling prompt is not even rendered: the model just continues the chat
                last = next((m for m in reversed(body['messages']) if m['role'] == 'user'), {'content': ''})
                return str(last['content']).lower(), []
            return str(entry), []
        if choice == 'required':
            raise _Reject(500, '', 'internal_server_error')  # an `assert tool_choice == "auto"` fails
        if isinstance(choice, dict):
            name = choice['function']['name']
            if name not in {tool['function']['name'] for tool in request.tools}:
                raise _Reject(500, f"Tool with name '{name}' not found in tools", 'internal_server_error')
            forced = [call for call in calls if call['name'] == name][:1]
            return None, forced or [{'id': f'call__0_{name}', 'name': name, 'arguments': '{}'}]
        if calls and request.stream and not self.streams_auto_tool_calls:
            if self.refusal == 'error':
                raise _Reject(500, 'Automatic streaming tool choice is not supported', 'internal_server_error')
            raise _EmptyStream
        return (None, calls) if calls else (str(entry), [])

    def completion(self, body: Mapping[str, Any], text: str | None, calls: list[dict[str, str]]) -> dict[str, Any]:
        message: dict[str, Any] = {'role': 'assistant', 'content': text}
        if calls:
            message['tool_calls'] = [
                {'id': c['id'], 'type': 'function', 'function': {'name': c['name'], 'arguments': c['arguments']}}
                for c in calls
            ]
        return {**self._head(body, 'chat.completion'), 'usage': self._usage(body, text, calls),
                'choices': [{'index': 0, 'message': message, 'logprobs': None,
                             'finish_reason': 'tool_calls' if calls else 'stop'}]}

    def events(self, body: Mapping[str, Any], text: str | None, calls: list[dict[str, str]]) -> Iterator[str]:
        head = self._head(body, 'chat.completion.chunk')

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            return json.dumps({**head, 'choices': [{'index': 0, 'delta': delta, 'logprobs': None,
                                                    'finish_reason': finish}]})

        yield chunk({'role': 'assistant'})
        for start in range(0, len(text or ''), 3):
            yield chunk({'content': (text or '')[start:start + 3]})
        for index, call in enumerate(calls):
            yield chunk({'tool_calls': [{'index': index, 'id': call['id'], 'type': 'function',
                                         'function': {'name': call['name'], 'arguments': ''}}]})
            for start in range(0, len(call['arguments']), 5):
                piece = call['arguments'][start:start + 5]
                yield chunk({'tool_calls': [{'index': index, 'function': {'arguments': piece}}]})
        yield chunk({}, 'tool_calls' if calls else 'stop')
        if (body.get('stream_options') or {}).get('include_usage'):
            yield json.dumps({**head, 'choices': [], 'usage': self._usage(body, text, calls)})
        yield '[DONE]'

    def _head(self, body: Mapping[str, Any], kind: str) -> dict[str, Any]:
        return {'id': f'chatcmpl-{len(self.requests)}', 'object': kind, 'created': 1763800000,
                'model': str(body.get('model') or 'strict-model')}

    @staticmethod
    def _usage(body: Mapping[str, Any], text: str | None, calls: list[dict[str, str]]) -> dict[str, int]:
        prompt = len(json.dumps(body['messages'])) // 4
        completion = (len(text or '') + sum(len(c['arguments']) for c in calls)) // 4 + 1
        return {'prompt_tokens': prompt, 'completion_tokens': completion, 'total_tokens': prompt + completion}


def _calls(entry: object, request_number: int) -> list[dict[str, str]]:
    specs = entry if isinstance(entry, list) else [entry] if isinstance(entry, dict) else []
    calls = []
    for index, spec in enumerate(specs):
        arguments = spec.get('arguments', {})
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        calls.append({'id': f'call_{request_number}_{index}', 'name': spec['tool'], 'arguments': text})
    return calls


def _handler(server: StrictServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get('content-length', 0)))
            body = json.loads(raw)
            server.requests.append(body)
            if self.path != '/v1/chat/completions':
                self._json(404, {'error': {'message': f'Not Found: {self.path}', 'type': 'not_found_error'}})
                return
            try:
                request = server.check(body)
                text, calls = server.reply(request, body)
            except _EmptyStream:
                self._stream(iter(()))
                return
            except _Reject as exc:
                self._json(exc.status, {'error': {'message': exc.message, 'type': exc.kind, 'param': None,
                                                  'code': None}})
                return
            if request.stream:
                self._stream(server.events(body, text, calls))
            else:
                self._json(200, server.completion(body, text, calls))

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            server.statuses.append(status)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header('content-type', 'application/json')
            self.send_header('content-length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, events: Iterator[str]) -> None:
            server.statuses.append(200)
            self.send_response(200)
            self.send_header('content-type', 'text/event-stream; charset=utf-8')
            self.send_header('transfer-encoding', 'chunked')
            self.send_header('connection', 'close')  # it closes after a stream: said, so no client reuses it
            self.end_headers()
            if _send_events(server, events, self._chunk):
                self._chunk(b'')  # the end of a chunked body
            else:
                self.wfile.write(b'5\r\ndata:')  # half a chunk, then the connection drops
                self.wfile.flush()
            self.close_connection = True

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f'{len(data):x}\r\n'.encode() + data + b'\r\n')
            self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


def _send_events(server: StrictServer, events: Iterator[str], send: Callable[[bytes], None]) -> bool:
    """Send the events as server-sent events, with the server's faults; `False` when the stream is to be cut."""
    for number, data in enumerate(events):
        if number == server.hang_at:
            server.closing.wait(30)
            return True
        if number == server.cut_at:
            return False
        if number == server.end_early_at:
            return True
        if number == server.malformed_at:
            data = '{"id": "chatcmpl-x", "choices": [{"delta": {"content": "a'
        send(f'data: {data}\n\n'.encode())
        if server.chunk_delay:
            time.sleep(server.chunk_delay)
    return True


def serve(state: StrictServer) -> Iterator[StrictServer]:
    """Run `state` on 127.0.0.1 (a free port) for the duration of the generator; `state.base_url` ends in `/v1`."""
    httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _handler(state))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state.base_url = f'http://127.0.0.1:{httpd.server_address[1]}/v1'
    try:
        yield state
    finally:
        state.closing.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
