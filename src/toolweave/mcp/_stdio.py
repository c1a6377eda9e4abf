"""The stdio transport of a served MCP server: JSON-RPC lines on stdin and stdout, stoppable at any moment.

Two daemon threads carry the bytes, one reading a duplicate of fd 0 and one writing a duplicate of fd 1, so:
- a cancellation (SIGTERM, SIGINT) stops the server even while the client keeps stdin open and idle (a read in
  an anyio worker thread would hold the cancellation until a line arrived), and the interpreter can exit with
  the reader still blocked (it reads with `os.read`, never through `sys.stdin`, whose lock a blocked reader
  would hold at shutdown: a fatal error);
- a response costs one queue put, not two worker-thread round trips (write, flush) as in the SDK's transport.
While serving, fd 0 reads the null device and fd 1 writes to stderr, so a stray `print` or a child process
cannot corrupt the wire; both are restored at the end.
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
    reader = threading.Thread(target=_read, args=(os.dup(wire_in), incoming_send, token), name='toolweave stdin',
                              daemon=True)
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


def _read(fd: int, send: MemoryObjectSendStream[Any], token: Any) -> None:
    """Parse each line into a `SessionMessage` (or the parse error, which the server answers) for the loop."""
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    def deliver(line: bytes) -> None:
        item: Any
        try:
            item = SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError as exc:
            item = exc
        try:  # the cheap hand-off; a full buffer waits for the loop to catch up
            anyio.from_thread.run_sync(send.send_nowait, item, token=token)
        except anyio.WouldBlock:
            anyio.from_thread.run(send.send, item, token=token)

    try:
        pending = b''
        while chunk := os.read(fd, 65536):
            *complete, pending = (pending + chunk).split(b'\n')
            for line in complete:
                if line.strip():
                    deliver(line)
        if pending.strip():
            deliver(pending)
        anyio.from_thread.run_sync(send.close, token=token)
    except (RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass  # the event loop or the server is gone: the process is ending
    finally:
        os.close(fd)
