"""The host side of the in-sandbox executor: start it, send requests, read replies.

One channel is one executor process and carries one request at a time; a sandbox keeps a few
and opens another when two commands must run at once. A channel whose request was cancelled
or failed part-way is closed, never reused: closing its stream makes the executor kill what it
was running and exit.

The channel needs only a :class:`ByteStream` to the process started with
:data:`EXECUTOR_ARGV`: a backend whose exec gives a stream (Docker's attached exec socket,
a ``podman exec -i`` child's pipes) reuses all of it.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import json
import marshal
import os
import struct
from typing import IO, Any, Protocol

import anyio

from agentenv import guest
from agentenv.sandbox.errors import ExecUserError, FileTooLarge
from agentenv.sandbox.protocol import ExecResult, OutputCallback

_FRAME = struct.Struct(">II")
_MAX_HEADER = 1 << 20
MAX_PAYLOAD = 1 << 30
_UPLOAD_CHUNK = 1 << 20
"""The largest payload a reply may carry (a file read whole): 1 GiB."""
_SOURCE = guest.source("executor")
_NAME = "agentenv-executor"
# Reads the executor from stdin and runs it: nothing is written into the image, and `ps` in
# the sandbox shows a short command line. Sent: this interpreter's magic number, the lengths
# of the code and the source, the code compiled here, the source. A sandbox whose Python
# reads this interpreter's bytecode runs the code as it is, sparing a compile (~7 ms of the
# ~33 ms an executor's start costs inside the sandbox); any other compiles the source.
_BOOTSTRAP = (
    # undumpable before reading a byte: until then a process of the sandbox's user could
    # open our /proc/<pid>/fd and take the stream (the executor does it again, and says so
    # when it cannot)
    "try:\n import ctypes;ctypes.CDLL(None).prctl(4,0,0,0,0)\nexcept Exception:pass\n"
    "import os,sys\n"
    "def r(n):\n"
    " b=b''\n"
    " while len(b)<n:\n"
    "  c=os.read(0,n-len(b))\n"
    "  if not c:sys.exit(3)\n"
    "  b+=c\n"
    " return b\n"
    "h=r(12);c=r(int.from_bytes(h[4:8],'big'));s=r(int.from_bytes(h[8:],'big'))\n"
    "try:\n"
    " import _frozen_importlib_external as f\n"
    " if f.MAGIC_NUMBER!=h[:4]:raise ValueError\n"
    " import marshal;c=marshal.loads(c)\n"
    "except Exception:c=compile(s," + repr(_NAME) + ",'exec')\n"
    "exec(c)\n"
)


@functools.cache
def _executor_payload() -> bytes:
    """What the bootstrap reads (compiled on first use, not at import)."""
    code = marshal.dumps(compile(_SOURCE, _NAME, "exec", dont_inherit=True, optimize=0))
    magic = importlib.util.MAGIC_NUMBER
    return magic + struct.pack(">II", len(code), len(_SOURCE)) + code + _SOURCE


PYTHON_ARGV = [
    "/bin/sh",
    "-c",
    'for p in /usr/bin/python3 /usr/local/bin/python3 /bin/python3; do [ -x "$p" ] && exec "$p"'
    ' -I -c "$0" "$1"; done; echo "agentenv: no python3" >&2; exit 127',
]
"""``[*PYTHON_ARGV, CODE, ARG]`` runs Python ``CODE`` with one argument in a sandbox: the
interpreter by absolute path, never through the sandbox's PATH (an agent could put its own
python3 first), the usual places in order; isolated (-I), so the working directory (a
workspace with a json.py, say) and PYTHON* variables never reach sys.path."""
EXECUTOR_ARGV = [*PYTHON_ARGV, _BOOTSTRAP, "agentenv"]
"""The command that starts an executor in a sandbox: it reads its source from stdin."""

_OS_ERRORS: dict[str, type[OSError]] = {
    "FileNotFoundError": FileNotFoundError,
    "IsADirectoryError": IsADirectoryError,
    "NotADirectoryError": NotADirectoryError,
    "PermissionError": PermissionError,
    "FileExistsError": FileExistsError,
}


def _error(reply: dict[str, Any]) -> Exception:
    """The executor's error reply as the exception a local call would have raised (an
    ``OSError`` kind), or agentenv's own for what is not the OS's (a user to run as, a file
    past the caller's size limit)."""
    message = str(reply.get("message"))
    if reply.get("error") == "UserError":
        return ExecUserError(message, reason=str(reply.get("reason") or "unknown"))
    if reply.get("error") == "FileTooLarge":
        size = reply.get("size")
        return FileTooLarge(
            message,
            path=str(reply.get("filename") or ""),
            size=size if isinstance(size, int) else 0,
        )
    kind = _OS_ERRORS.get(reply.get("error", ""), OSError)
    if reply.get("errno") is None:
        return kind(f"{reply.get('error')}: {reply.get('message')}")
    return kind(reply["errno"], reply.get("strerror") or message, reply.get("filename"))


class StreamClosed(Exception):
    """The other end closed the stream (the process exited or the sandbox died)."""


class ByteStream(Protocol):
    """A running process's stdin (to write) and stdout (to read), with its stderr kept."""

    stderr: bytearray
    """What the process wrote to stderr so far (shown when it fails to start)."""

    async def send(self, data: bytes) -> None:
        """Write all of ``data`` to the process's stdin; :class:`StreamClosed` if gone."""
        ...

    async def read_stdout(self, n: int) -> bytes:
        """Exactly ``n`` bytes of stdout; :class:`StreamClosed` at its end."""
        ...

    async def receive_stdout(self) -> bytes:
        """Whatever stdout has (waiting for at least one byte); ``b""`` at its end (for a
        peer whose messages have no length in front, as newline-delimited JSON)."""
        ...

    def close(self) -> None:
        """Close the stream; the process sees end of file on stdin. Idempotent, and wakes a
        task waiting in :meth:`read_stdout`."""
        ...


class ExecutorGone(Exception):
    """The executor stopped answering: its stream ended (container stopped, process killed)."""

    def __init__(self, message: str, stderr: bytes = b""):
        super().__init__(message)
        self.stderr = stderr


HANDSHAKE_S = 30.0
"""How long a new executor may take to answer on an idle host (it takes ~40 ms): past it,
something in the sandbox holds it (a frozen cgroup, a python3 that never reads)."""


def handshake_s(load: float | None = None, cores: int | None = None) -> float:
    """How long to wait for a new executor's first answer: :data:`HANDSHAKE_S` times the
    host's runnable processes per core (``load``, its one-minute load average, over
    ``cores``) where there are more than one. A process starting in a sandbox waits its
    turn for a core like any other: with hundreds of sandboxes starting at once on two
    cores, an executor's ~40 ms of CPU can take longer than a fixed deadline allows, and
    the episode would fail for the host's load alone."""
    if load is None:
        load = os.getloadavg()[0]
    cores = cores or os.cpu_count() or 1
    return HANDSHAKE_S * max(1.0, load / cores)


class ExecutorChannel:
    """One running executor process in a sandbox."""

    def __init__(self, stream: ByteStream):
        self._stream = stream
        self.broken = False

    @classmethod
    async def open(cls, stream: ByteStream) -> ExecutorChannel:
        """Talk to an executor just started with :data:`EXECUTOR_ARGV` on ``stream``: send
        its source and check that it answers; raises :class:`ExecutorGone` if it cannot run
        (no ``python3`` in the image, a user the sandbox does not know)."""
        channel = cls(stream)
        await channel._handshake()
        return channel

    async def _handshake(self) -> None:
        """Send the executor its source and wait for it to answer a ping; raises
        :class:`ExecutorGone` when it cannot run (no ``python3``), and ``TimeoutError``
        saying how long it waited when it does not answer (see :func:`handshake_s`)."""
        wait_s = handshake_s()
        try:
            with anyio.move_on_after(wait_s):
                await self._stream.send(_executor_payload())
                await self._send({"op": "ping"})
                reply, _ = await self._read()
                if reply.get("type") == "result":
                    return
                raise ExecutorGone(f"unexpected answer to ping: {reply}")
            raise TimeoutError(
                f"a new executor did not answer within {wait_s:.0f} s (host load "
                f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
            )
        except StreamClosed as e:
            self.close()
            raise ExecutorGone(f"executor did not start: {e}", bytes(self._stream.stderr)) from e
        except BaseException:
            self.close()
            raise

    async def _send(self, header: dict[str, Any], payload: bytes = b"") -> None:
        data = json.dumps(header).encode()
        await self._stream.send(_FRAME.pack(len(data), len(payload)) + data)
        if payload:  # separately: no copy of a big payload
            await self._stream.send(payload)

    async def _read(self, max_payload: int = MAX_PAYLOAD) -> tuple[dict[str, Any], bytes]:
        """One reply, checked: whatever is on the other end of the stream is the sandbox's,
        so its lengths are never trusted past what the request can produce."""
        hlen, plen = _FRAME.unpack(await self._stream.read_stdout(_FRAME.size))
        if hlen > _MAX_HEADER or plen > max_payload:
            raise ExecutorGone(f"the executor announced a reply of {hlen} + {plen} bytes")
        try:
            header = json.loads(await self._stream.read_stdout(hlen))
        except ValueError as e:
            raise ExecutorGone(f"the executor's reply is not JSON: {e}") from e
        if not isinstance(header, dict):
            raise ExecutorGone(f"the executor's reply is not an object: {header!r:.200}")
        payload = await self._stream.read_stdout(plen) if plen else b""
        return header, payload

    async def _exchange(
        self,
        header: dict[str, Any],
        payload: bytes,
        on_chunk: OutputCallback | None,
        max_payload: int = MAX_PAYLOAD,
    ) -> tuple[dict[str, Any], bytes]:
        if self.broken:
            raise ExecutorGone("channel is closed")
        done = False
        try:
            await self._send(header, payload)
            while True:
                reply, data = await self._read(max_payload)
                if reply.get("type") != "chunk":
                    done = True
                    return reply, data
                if on_chunk is not None:
                    maybe = on_chunk("stdout" if reply.get("fd") == 1 else "stderr", data)
                    if inspect.isawaitable(maybe):
                        await maybe
        except StreamClosed as e:
            raise ExecutorGone(f"executor stream ended: {e}", bytes(self._stream.stderr)) from e
        finally:
            if not done:  # cancelled or failed mid-request: the stream's state is unknown
                self.close()

    async def request(
        self, header: dict[str, Any], payload: bytes = b""
    ) -> tuple[dict[str, Any], bytes]:
        """Send one request and return the reply; executor-side errors become ``OSError``s."""
        reply, data = await self._exchange(header, payload, None)
        if reply.get("type") == "error":
            raise _error(reply)
        return reply, data

    async def untar(self, dest: str, source: IO[bytes], size: int, *, make: bool) -> None:
        """Extract the next ``size`` bytes of ``source`` (a tar) into the sandbox's folder
        ``dest`` (made first with ``make``), streamed in chunks; executor-side errors become
        ``OSError``/``ValueError``s."""
        if self.broken:
            raise ExecutorGone("channel is closed")
        done = False
        try:
            await self._send({"op": "untar", "dest": dest, "size": size, "make": make})
            left = size
            while left:
                chunk = source.read(min(_UPLOAD_CHUNK, left))
                if not chunk:  # the file shrank: the executor still waits for bytes
                    raise OSError(f"the archive ended {left} bytes early")
                await self._stream.send(chunk)
                left -= len(chunk)
            reply, _ = await self._read(0)
            done = True
        except StreamClosed as e:
            raise ExecutorGone(f"executor stream ended: {e}", bytes(self._stream.stderr)) from e
        finally:
            if not done:  # cancelled or failed mid-request: the stream's state is unknown
                self.close()
        if reply.get("type") == "error":
            raise _error(reply)

    async def exec(
        self, header: dict[str, Any], stdin: bytes | None, on_output: OutputCallback | None
    ) -> ExecResult:
        """Run one command; ``header`` is the executor's exec request."""
        # head and tail of each stream, each at most max_output, and the elision marks
        most = 2 * int(header.get("max_output") or 0) + (1 << 16)
        reply, data = await self._exchange(
            {**header, "op": "exec", "stdin": stdin is not None, "stream": on_output is not None},
            stdin or b"",
            on_output,
            max_payload=most,
        )
        if reply.get("type") == "error":
            raise _error(reply)
        try:
            split = int(reply["stdout_len"])
            return ExecResult(
                exit_code=int(reply["exit_code"]),
                stdout_bytes=data[:split],
                stderr_bytes=data[split:],
                duration_s=float(reply["duration_s"]),
                timed_out=bool(reply["timed_out"]),
                truncated=bool(reply["truncated"]),
                oom_killed=bool(reply.get("oom_killed")),
            )
        except (KeyError, TypeError, ValueError) as e:
            self.close()
            raise ExecutorGone(f"malformed reply from the executor: {reply!r:.200}") from e

    def close(self) -> None:
        """Close the stream; the executor kills its running command and exits."""
        self.broken = True
        self._stream.close()
