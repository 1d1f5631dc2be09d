"""The fast path any backend reuses: a sandbox's executor processes, kept open and shared.

A backend gives :class:`Executors` two things: how to start one executor (an exec of
:data:`~agentenv.sandbox.channel.EXECUTOR_ARGV` as the sandbox's user, wrapped in an
:class:`~agentenv.sandbox.channel.ExecutorChannel`) and how to explain a failure (what
became of the sandbox). Commands, file reads and writes then go through idle executors, a new
one opening when all are busy so that commands run concurrently.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import IO, Any

import anyio

from agentenv.sandbox.channel import MAX_PAYLOAD, ExecutorChannel, ExecutorGone, StreamClosed
from agentenv.sandbox.errors import FileTooLarge, SandboxError
from agentenv.sandbox.protocol import ExecResult, OutputCallback
from agentenv.sandbox.spec import SandboxSpec

# How long past a command's own timeout we wait for the executor before suspecting it.
_EXEC_GRACE_S = 15.0
_MAX_IDLE = 4
FILE_GUARD_S = 300.0
"""A file transfer that takes longer is stuck (an executor, or a FIFO swapped in)."""
_SLOWEST_UPLOAD = 5e6  # bytes/s: an upload slower than this (past FILE_GUARD_S) is stuck

StartExecutor = Callable[[], Awaitable[ExecutorChannel]]
ExplainFailure = Callable[[BaseException], Awaitable[SandboxError]]


_LAYING_OUT = frozenset({"CHOWN", "DAC_OVERRIDE", "FOWNER"})


def untars(spec: SandboxSpec) -> bool:
    """Whether uploads into a sandbox of ``spec`` go through its executor (see
    :meth:`Executors.untar`): when its writable places are the ones agentenv made (read-only
    root: the workdir and scratch folders start empty, owned by its user), or its user is a
    root that may lay files out anywhere. Not in a writable image's folders for a user who
    may not write them (a root without capabilities, the image's files owned by another
    uid), where only the engine can put the files."""
    return spec.read_only or set(spec.cap_add) >= _LAYING_OUT


def check_exec_args(
    cmd: str | list[str], env: dict[str, str] | None, timeout: float | None
) -> None:
    """Refuse arguments no backend can run (raised before anything is sent)."""
    if isinstance(cmd, list) and (not cmd or not all(isinstance(a, str) for a in cmd)):
        raise TypeError(f"cmd must be a string or a non-empty list of strings, got {cmd!r}")
    if env and not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise TypeError(f"env keys and values must be strings, got {env!r}")
    if timeout is not None and timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")


class Executors:
    """The executors of one sandbox. ``start`` opens a new one; ``explain`` turns a failure
    into the error to raise (the sandbox died, was closed, or only the executor did)."""

    def __init__(self, start: StartExecutor, explain: ExplainFailure):
        self._start = start
        self._explain = explain
        self._idle: list[ExecutorChannel] = []
        self._busy: set[ExecutorChannel] = set()
        self._closed = False

    async def prime(self) -> None:
        """Start the first executor now; raises :class:`ExecutorGone` if none can run, and
        the explained error (a :class:`SandboxError`) if it does not answer in time."""
        try:
            self._idle.append(await self._start())
        except TimeoutError as e:  # not the image's fault (ExecutorGone): the sandbox's
            raise await self._explain(e) from e

    def trim(self) -> None:
        """Close idle executors but one: the extras a burst of concurrent commands opened
        would each hold ~5 MiB for as long as the sandbox stays paused (call it before
        freezing: they exit on end of input, or at the latest once thawed)."""
        while len(self._idle) > 1:
            self._idle.pop().close()

    def close(self) -> None:
        """Close every executor (each kills what it was running); later calls fail."""
        self._closed = True
        for channel in [*self._idle, *self._busy]:
            channel.close()
        self._idle.clear()

    @asynccontextmanager
    async def _channel(self) -> AsyncIterator[ExecutorChannel]:
        """An idle executor, or a new one when all are busy."""
        try:
            channel = self._idle.pop() if self._idle else await self._start()
        except SandboxError:
            raise
        except (ExecutorGone, StreamClosed, OSError) as e:
            raise await self._explain(e) from e
        self._busy.add(channel)
        try:
            yield channel
        except ExecutorGone as e:
            raise await self._explain(e) from e
        finally:
            self._busy.discard(channel)
            if channel.broken or self._closed or len(self._idle) >= _MAX_IDLE:
                channel.close()
            else:
                self._idle.append(channel)

    async def exec(
        self,
        cmd: str | list[str],
        *,
        timeout: float | None,
        cwd: str | None,
        env: dict[str, str] | None,
        stdin: bytes | None,
        max_output: int,
        on_output: OutputCallback | None,
        user: str | None,
    ) -> ExecResult:
        """Run one command in an executor (see :meth:`Sandbox.exec`)."""
        header: dict[str, Any] = {
            "timeout": timeout,
            "cwd": cwd,
            "env": env or {},
            "max_output": max_output,
            "user": user,
        }
        header["shell" if isinstance(cmd, str) else "argv"] = cmd
        guard = timeout + _EXEC_GRACE_S if timeout is not None else None
        async with self._channel() as channel:
            with anyio.move_on_after(guard):
                return await channel.exec(header, stdin, on_output)
            channel.close()
            raise await self._explain(TimeoutError(f"executor silent {guard:.0f}s after start"))

    async def read_file(self, path: str, max_bytes: int | None = None) -> bytes:
        """A file's bytes, read by an executor; :class:`FileTooLarge` past ``max_bytes`` (and
        past what one reply may carry), checked in the sandbox before anything is sent."""
        limit = MAX_PAYLOAD if max_bytes is None else min(max_bytes, MAX_PAYLOAD)
        async with self._channel() as channel:
            with anyio.move_on_after(FILE_GUARD_S):
                try:
                    _, data = await channel.request(
                        {"op": "read", "path": path, "max_bytes": limit}
                    )
                except FileTooLarge as e:
                    e.limit = limit
                    raise
                return data
            raise await self._explain(TimeoutError(f"read_file({path!r}) got no answer"))

    async def untar(
        self, data: bytes | os.PathLike[str] | IO[bytes], dest: str, *, make: bool = False
    ) -> None:
        """Extract a tar (its bytes, a host file's path, or an open file from where it is:
        streamed in chunks) into the folder ``dest`` (made first with ``make``), by an
        executor: what the engine's archive upload does (entries kept inside ``dest``, no
        symlink followed, modes and times; owners when the executor is root, else the
        executor's user owns them) without an engine call or a process started: an engine
        upload costs ~65 ms of host CPU (it starts a process), this a few."""
        with contextlib.ExitStack() as stack:
            if isinstance(data, bytes):
                source: IO[bytes] = io.BytesIO(data)
                size = len(data)
            else:
                if isinstance(data, os.PathLike):
                    source = stack.enter_context(open(data, "rb"))
                else:
                    source = data
                size = os.fstat(source.fileno()).st_size - source.tell()
            guard = FILE_GUARD_S + size / _SLOWEST_UPLOAD
            async with self._channel() as channel:
                with anyio.move_on_after(guard):
                    await channel.untar(dest, source, size, make=make)
                    return
                raise await self._explain(TimeoutError(f"upload to {dest!r} got no answer"))

    async def write_file(self, path: str, data: bytes, mode: int | None) -> None:
        """Create or replace a file by an executor (see :meth:`Sandbox.write_file`)."""
        async with self._channel() as channel:
            with anyio.move_on_after(FILE_GUARD_S):
                await channel.request({"op": "write", "path": path, "mode": mode}, data)
                return
            raise await self._explain(TimeoutError(f"write_file({path!r}) got no answer"))
