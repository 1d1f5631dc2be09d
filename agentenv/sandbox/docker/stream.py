"""A non-blocking reader/writer for a Docker attached stream (``exec_start(socket=True)``).

Without a TTY, Docker multiplexes the process's stdout and stderr onto one connection as
frames of ``[stream, 0, 0, 0, size:uint32be] + data``. We read the socket directly from the
event loop (``anyio.wait_readable``) rather than from a worker thread: a round trip then costs
no thread hand-offs, and no pipe is ever left undrained (SWE-ReX#261).
"""

from __future__ import annotations

import contextlib
import functools
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from agentenv.sandbox.channel import StreamClosed

T = TypeVar("T")
_HEADER = struct.Struct(">BxxxI")
STDOUT, STDERR = 1, 2


class DockerStream:
    """One attached exec stream: write to the process's stdin, read its stdout and stderr
    (a :class:`~agentenv.sandbox.channel.ByteStream`)."""

    def __init__(self, sock: Any):
        # docker-py returns a SocketIO wrapper for unix sockets; we want the socket itself.
        self._holder = sock  # keeps the HTTP response (and so the connection) alive
        self.sock: socket.socket = getattr(sock, "_sock", sock)
        self.sock.setblocking(False)
        self._raw = bytearray()
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.closed = False

    async def _io(self, op: Callable[[], T], wait: Callable[[socket.socket], Awaitable[None]]) -> T:
        """Run a non-blocking socket operation, waiting on the event loop until it can."""
        while True:
            try:
                return op()
            except BlockingIOError:
                try:
                    await wait(self.sock)
                except (anyio.ClosedResourceError, OSError) as e:  # closed under us
                    raise StreamClosed("closed") from e
            except OSError as e:
                raise StreamClosed(str(e)) from e

    async def send(self, data: bytes) -> None:
        """Write all of ``data`` to the process's stdin."""
        view = memoryview(data)
        while view:
            sent = await self._io(functools.partial(self.sock.send, view), anyio.wait_writable)
            view = view[sent:]

    def shutdown_stdin(self) -> None:
        """Close the process's stdin (half-close: its output can still be read)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    async def receive(self) -> int:
        """Wait for more output; returns the number of bytes that arrived. Raises
        :class:`StreamClosed` at end of stream."""
        data = await self._io(lambda: self.sock.recv(1 << 18), anyio.wait_readable)
        if not data:
            raise StreamClosed("end of stream")
        self._raw += data
        self._demux()
        return len(data)

    def _demux(self) -> None:
        raw = self._raw
        pos = 0
        while len(raw) - pos >= _HEADER.size:
            kind, size = _HEADER.unpack_from(raw, pos)
            if len(raw) - pos - _HEADER.size < size:
                break
            start = pos + _HEADER.size
            (self.stderr if kind == STDERR else self.stdout).extend(raw[start : start + size])
            pos = start + size
        del raw[:pos]

    async def read_stdout(self, n: int) -> bytes:
        """Exactly ``n`` bytes of stdout."""
        while len(self.stdout) < n:
            await self.receive()
        out = bytes(self.stdout[:n])
        del self.stdout[:n]
        return out

    async def receive_stdout(self) -> bytes:
        """Whatever stdout has, at least one byte; ``b""`` at the end of the stream."""
        while not self.stdout:
            try:
                await self.receive()
            except StreamClosed:
                return b""
        out = bytes(self.stdout)
        self.stdout.clear()
        return out

    def close(self) -> None:
        """Close the connection; the process sees end of file on its stdin."""
        if self.closed:
            return
        self.closed = True
        try:
            # Wakes a task waiting on this socket (a concurrent close() of the sandbox);
            # closing under it alone would leave it waiting forever.
            anyio.notify_closing(self.sock)
            self.sock.close()
        finally:
            close = getattr(self._holder, "close", None)
            if close is not None:
                with contextlib.suppress(OSError):
                    close()
