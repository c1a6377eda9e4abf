"""Serving over this process's stdin and stdout, in a way a cancellation (a signal) can stop at any moment.

The SDK's `stdio_server` reads stdin in an anyio worker thread; a cancellation waits for that read to return,
so a server whose client keeps stdin open but idle could not be stopped by SIGTERM. Here stdin is read by a
daemon thread that hands each line to the event loop: cancelling the reader abandons the thread (which ends
with the process). stdout stays the SDK's (it moves fd 1 aside so stray prints cannot corrupt the wire).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, BinaryIO

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectSendStream

__all__ = ('stdio_streams',)


class _Lines:
    """Stdin's lines as an async iterator, read by a daemon thread (started on first use)."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._send, self._receive = anyio.create_memory_object_stream[bytes](16)
        self._thread: threading.Thread | None = None

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        if self._thread is None:
            token = anyio.lowlevel.current_token()
            self._thread = threading.Thread(target=_pump, args=(self._stream, self._send, token),
                                            name='toolweave stdin', daemon=True)
            self._thread.start()
        try:
            line = await self._receive.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None
        return line.decode('utf-8', errors='replace')


def _pump(stream: BinaryIO, send: MemoryObjectSendStream[bytes], token: Any) -> None:
    try:
        for line in iter(stream.readline, b''):
            anyio.from_thread.run(send.send, line, token=token)
        anyio.from_thread.run_sync(send.close, token=token)
    except (RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError, ValueError):
        pass  # the event loop or the reader is gone: the process is ending


@asynccontextmanager
async def stdio_streams() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport streams, reading stdin with `_Lines`."""
    from mcp.server.stdio import stdio_server

    async with stdio_server(stdin=_Lines(sys.stdin.buffer)) as streams:  # type: ignore[arg-type]
        yield streams
