"""The stdio transport of a served MCP server: JSON-RPC lines on stdin and stdout, stoppable at any moment.

Two daemon threads carry the bytes, one reading a duplicate of fd 0 and one writing a duplicate of fd 1, so:
- a cancellation (SIGTERM, SIGINT) stops the server even while the client keeps stdin open and idle (a read in
  an anyio worker thread would hold the cancellation until a line arrived), and the interpreter can exit with
  the reader still blocked (it reads with `os.read`, never through `sys.stdin`, whose lock a blocked reader
  would hold at shutdown: a fatal error);
- a response costs one queue put, not two worker-thread round trips (write, flush) as in the SDK's transport.
While serving, fd 0 reads the null device and fd 1 writes to stderr, so a stray `print` or a child process
cannot corrupt the wire; both are restored at the end. A line the SDK cannot read is answered by the reader itself
(see `_wire`), and a line longer than `MAX_MESSAGE_BYTES` is not kept in memory: it is skipped and answered.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectSendStream

from toolweave.mcp._wire import MAX_MESSAGE_BYTES, misread, oversized, rejection

__all__ = ('stdio_streams',)

_BUFFER = 16


@asynccontextmanager
async def stdio_streams() -> AsyncIterator[tuple[Any, Any]]:
    """`(read_stream, write_stream)` of SDK `SessionMessage`s over this process's stdin and stdout."""
    from mcp.shared.message import SessionMessage

    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    incoming_send, incoming = anyio.create_memory_object_stream[Any](_BUFFER)
    outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](_BUFFER)
    lines: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
    token = anyio.lowlevel.current_token()
    reader = threading.Thread(target=_read, args=(os.dup(wire_in), incoming_send, token, lines),
                              name='toolweave stdin', daemon=True)
    reader.start()
    writer = threading.Thread(target=_write, args=(wire_out, lines), name='toolweave stdout', daemon=True)
    writer.start()
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_serialize, outgoing_receive, lines)
            try:
                yield incoming, outgoing
            finally:
                group.cancel_scope.cancel()
    finally:
        lines.put(None)
        with anyio.CancelScope(shield=True):  # what was answered reaches the client, even when cancelled
            await anyio.to_thread.run_sync(writer.join, 5.0)
        os.dup2(wire_out, 1)  # the reader thread may still be blocked on its own duplicate of fd 0
        os.dup2(wire_in, 0)
        os.close(wire_out)
        os.close(wire_in)


async def _serialize(messages: Any, lines: queue.SimpleQueue[bytes | None]) -> None:
    async with messages:
        async for message in messages:
            lines.put(message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b'\n')


def _write(fd: int, lines: queue.SimpleQueue[bytes | None]) -> None:
    while (line := lines.get()) is not None:
        view = memoryview(line)
        try:
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            return  # the client went away


def _parse(line: bytes, answers: queue.SimpleQueue[bytes | None]) -> Any:
    """The JSON-RPC message a line holds, or `None` when it holds none (and its answer is queued)."""
    import mcp_types as types

    answer = None
    if len(line) > MAX_MESSAGE_BYTES:
        answer = oversized(line[:65536], len(line))
    else:
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:
            answer = rejection(line, str(exc))
        else:
            answer = misread(line, message)
            if answer is None:
                return message
    if answer is not None:
        answers.put(answer.body + b'\n')
    return None


def _read(fd: int, send: MemoryObjectSendStream[Any], token: Any, answers: queue.SimpleQueue[bytes | None]) -> None:
    """Parse each line into a `SessionMessage` for the loop; answer a line the SDK cannot read on the spot."""
    from mcp.shared.message import SessionMessage

    def deliver(line: bytes) -> None:
        message = _parse(line, answers)
        if message is None:
            return
        item = SessionMessage(message)
        try:  # the cheap hand-off; a full buffer waits for the loop to catch up
            anyio.from_thread.run_sync(send.send_nowait, item, token=token)
        except anyio.WouldBlock:
            anyio.from_thread.run(send.send, item, token=token)

    try:
        buffer = bytearray()
        skipped: int | None = None  # bytes of a line too long to keep, while its end is read past
        head = b''  # the start of that line (where its id is)
        while chunk := os.read(fd, 65536):
            if skipped is not None:
                end = chunk.find(b'\n')
                if end < 0:
                    skipped += len(chunk)
                    continue
                answer = oversized(head, skipped + end)
                answers.put(answer.body + b'\n')
                skipped, chunk = None, chunk[end + 1:]
            buffer += chunk
            start = 0
            while (end := buffer.find(b'\n', start)) >= 0:
                line = bytes(buffer[start:end])
                start = end + 1
                if line.strip():
                    deliver(line)
            del buffer[:start]
            if len(buffer) > MAX_MESSAGE_BYTES:
                head, skipped = bytes(buffer[:65536]), len(buffer)
                buffer.clear()
        if buffer.strip():
            deliver(bytes(buffer))
        anyio.from_thread.run_sync(send.close, token=token)
    except (RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass  # the event loop or the server is gone: the process is ending
    finally:
        os.close(fd)
