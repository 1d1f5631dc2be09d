"""A child process's pipes as a :class:`~agentenv.sandbox.channel.ByteStream`: how the
executor's channel talks through ``podman exec -i``."""

from __future__ import annotations

import asyncio
import contextlib

from agentenv.sandbox.channel import StreamClosed
from agentenv.sandbox.podman.cli import podman_cwd

_KILL_AFTER_S = 5.0  # a child that outlives closing its stdin this long is killed
_REAPING: set[asyncio.Future[None]] = set()  # strong references to the reapers


class ProcessStream:
    """Write to a child's stdin, read its stdout; its stderr is kept for error messages."""

    def __init__(self, process: asyncio.subprocess.Process):
        self._process = process
        self.stderr = bytearray()
        self._stderr_reader = asyncio.ensure_future(self._keep_stderr())
        self.closed = False

    @classmethod
    async def start(cls, argv: list[str]) -> ProcessStream:
        """Start ``argv`` with its three streams piped."""
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=1 << 20,
            cwd=podman_cwd(),  # podman's conmon may write a file there
        )
        return cls(process)

    async def _keep_stderr(self) -> None:
        assert self._process.stderr is not None
        while chunk := await self._process.stderr.read(1 << 16):
            self.stderr += chunk[: max(0, (1 << 16) - len(self.stderr))]

    async def send(self, data: bytes) -> None:
        """Write all of ``data`` to the child's stdin."""
        stdin = self._process.stdin
        if self.closed or stdin is None or stdin.is_closing():
            raise StreamClosed("closed")
        try:
            stdin.write(data)
            await stdin.drain()
        except (ConnectionError, OSError) as e:
            raise StreamClosed(str(e)) from e

    async def read_stdout(self, n: int) -> bytes:
        """Exactly ``n`` bytes of the child's stdout."""
        assert self._process.stdout is not None
        if self.closed:
            raise StreamClosed("closed")
        try:
            return await self._process.stdout.readexactly(n)
        except asyncio.IncompleteReadError as e:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._stderr_reader), 1.0)
            raise StreamClosed("end of stream") from e

    async def receive_stdout(self) -> bytes:
        """Whatever the child's stdout has, at least one byte; ``b""`` at its end."""
        assert self._process.stdout is not None
        if self.closed:
            return b""
        data = await self._process.stdout.read(1 << 16)
        if not data:  # its stderr says why it ended, if it failed to start
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._stderr_reader), 1.0)
        return data

    def close(self) -> None:
        """Close the child's stdin (the executor then kills what it runs and exits, and a
        reader waiting on its stdout sees the end); kill the child if it has not gone a few
        seconds later."""
        if self.closed:
            return
        self.closed = True
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            _REAPING.add(asyncio.ensure_future(self._reap()))
        except RuntimeError:  # no event loop any more: now, then
            self._kill()

    async def _reap(self) -> None:
        """Wait for the child (its transports close with it), killing it if it lingers."""
        try:
            await asyncio.wait_for(self._process.wait(), _KILL_AFTER_S)
        except TimeoutError:
            self._kill()
            await self._process.wait()
        finally:
            self._stderr_reader.cancel()
            _REAPING.discard(asyncio.current_task())  # type: ignore[arg-type,unused-ignore]

    def _kill(self) -> None:
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
