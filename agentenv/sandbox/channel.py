"""The host side of the in-sandbox executor: start it, send requests, read replies.

One channel is one executor process and carries one request at a time; a sandbox keeps a few
and opens another when two commands must run at once. A channel whose request was cancelled
or failed part-way is closed, never reused: closing its stream makes the executor kill what it
was running and exit.
"""

from __future__ import annotations

import inspect
import json
import struct
from pathlib import Path
from typing import Any

import anyio

from agentenv.sandbox.engine import Engine
from agentenv.sandbox.protocol import ExecResult, OutputCallback
from agentenv.sandbox.stream import DockerStream, StreamClosed

_FRAME = struct.Struct(">II")
_SOURCE = (Path(__file__).parent / "executor_server.py").read_bytes()
SOURCE_SIZE = str(len(_SOURCE))
NO_PYTHON = "agentenv: no python3 in this image"
EXECUTOR_EXITED = "agentenv: the executor exited"
# Reads the executor's source from stdin and runs it: nothing is written into the image, and
# `ps` in the sandbox shows a short command line.
BOOTSTRAP = (
    "import os,sys\n"
    "n=int(sys.argv[1]);b=b''\n"
    "while len(b)<n:\n"
    " c=os.read(0,n-len(b))\n"
    " if not c:sys.exit(3)\n"
    " b+=c\n"
    "exec(compile(b,'agentenv-executor','exec'))\n"
)
# The container's entrypoint, under Docker's init: start the executor on the container's
# stdin when the environment carries the bootstrap and python3 exists, then idle. The
# executor runs in the background so that killing it does not stop the container; when it
# exits, the shell says so on stderr, which ends the attached channel (Docker's init keeps
# the container's stdout open, so the stream itself never ends). The bootstrap comes by
# environment so that `pkill -f python` in a command cannot match this shell.
ENTRYPOINT = [
    "/bin/sh",
    "-c",
    "trap 'exit 0' TERM\n"
    "exec 3<&0 0</dev/null\n"
    'if [ -n "$AGENTENV_BOOT" ]; then\n'
    '  if command -v "$AGENTENV_PY" >/dev/null 2>&1; then\n'
    '    "$AGENTENV_PY" -c "$AGENTENV_BOOT" "$AGENTENV_SIZE" 0<&3 3<&- &\n'
    "    exec 3<&-\n"
    "    wait $!\n"
    f'    echo "{EXECUTOR_EXITED}" >&2\n'
    f'  else echo "{NO_PYTHON}" >&2; fi\n'
    "fi\n"
    "exec 3<&-\n"
    "while :; do sleep 3600 & wait $!; done",
]
ENTRYPOINT_ENV = {
    "AGENTENV_BOOT": BOOTSTRAP,
    "AGENTENV_PY": "python3",
    "AGENTENV_SIZE": SOURCE_SIZE,
}
"""Set on the container for :data:`ENTRYPOINT`; the executor removes it from its commands'
environment."""
_CANCEL = json.dumps({"op": "cancel"}).encode()
_OS_ERRORS: dict[str, type[OSError]] = {
    "FileNotFoundError": FileNotFoundError,
    "IsADirectoryError": IsADirectoryError,
    "NotADirectoryError": NotADirectoryError,
    "PermissionError": PermissionError,
    "FileExistsError": FileExistsError,
}


class ExecutorGone(Exception):
    """The executor stopped answering: its stream ended (container stopped, process killed)."""

    def __init__(self, message: str, stderr: bytes = b""):
        super().__init__(message)
        self.stderr = stderr


class ExecutorChannel:
    """One running executor process in a sandbox."""

    def __init__(self, stream: DockerStream, *, attached: bool = False):
        self._stream = stream
        # An attached executor (the container's own) does not see end-of-file when we hang
        # up, so a cancelled command is stopped with a cancel message instead.
        self._attached = attached
        self.broken = False

    @classmethod
    async def start(
        cls, engine: Engine, container_id: str, *, user: str | None, workdir: str
    ) -> ExecutorChannel:
        """Start an executor with ``docker exec`` and check that it answers; raises
        :class:`ExecutorGone` if it cannot run (no ``python3`` in the image)."""
        exec_id = await engine.run(
            engine.api.exec_create,
            container_id,
            ["python3", "-c", BOOTSTRAP, SOURCE_SIZE],
            stdin=True,
            user=user or "",
            workdir=workdir,
        )
        sock = await engine.run(engine.api.exec_start, exec_id, socket=True)
        channel = cls(DockerStream(sock))
        await channel.handshake()
        return channel

    @classmethod
    async def attach(cls, engine: Engine, container_id: str) -> ExecutorChannel:
        """Attach to a created, not yet started, container whose entrypoint runs
        :data:`ENTRYPOINT`; call :meth:`handshake` once it is started. Saves a
        ``docker exec`` (~50 ms) on every sandbox's creation."""
        params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        sock = await engine.run(engine.api.attach_socket, container_id, params=params)
        markers = (NO_PYTHON.encode(), EXECUTOR_EXITED.encode())
        return cls(DockerStream(sock, end_markers=markers), attached=True)

    async def handshake(self) -> None:
        """Send the executor its source and wait for it to answer a ping; raises
        :class:`ExecutorGone` when it cannot run (no ``python3``)."""
        try:
            with anyio.fail_after(30):
                await self._stream.send(_SOURCE)
                await self._send({"op": "ping"})
                reply, _ = await self._read()
            if reply.get("type") != "result":
                raise ExecutorGone(f"unexpected answer to ping: {reply}")
        except StreamClosed as e:
            self.close()
            raise ExecutorGone(f"executor did not start: {e}", bytes(self._stream.stderr)) from e
        except BaseException:
            self.close()
            raise

    async def _send(self, header: dict[str, Any], payload: bytes = b"") -> None:
        data = json.dumps(header).encode()
        await self._stream.send(_FRAME.pack(len(data), len(payload)) + data + payload)

    async def _read(self) -> tuple[dict[str, Any], bytes]:
        hlen, plen = _FRAME.unpack(await self._stream.read_stdout(_FRAME.size))
        header = json.loads(await self._stream.read_stdout(hlen))
        payload = await self._stream.read_stdout(plen) if plen else b""
        return header, payload

    async def _exchange(
        self, header: dict[str, Any], payload: bytes, on_chunk: OutputCallback | None
    ) -> tuple[dict[str, Any], bytes]:
        if self.broken:
            raise ExecutorGone("channel is closed")
        done = sent = False
        try:
            await self._send(header, payload)
            sent = True
            while True:
                reply, data = await self._read()
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
                if self._attached and sent:
                    self._stream.try_send(_FRAME.pack(len(_CANCEL), 0) + _CANCEL)
                self.close()

    async def request(
        self, header: dict[str, Any], payload: bytes = b""
    ) -> tuple[dict[str, Any], bytes]:
        """Send one request and return the reply; executor-side errors become ``OSError``s."""
        reply, data = await self._exchange(header, payload, None)
        if reply.get("type") == "error":
            error = _OS_ERRORS.get(reply.get("error", ""), OSError)
            raise error(reply.get("errno") or 0, reply.get("message", "executor error"))
        return reply, data

    async def exec(
        self, header: dict[str, Any], stdin: bytes | None, on_output: OutputCallback | None
    ) -> ExecResult:
        """Run one command; ``header`` is the executor's exec request."""
        reply, data = await self._exchange(
            {**header, "op": "exec", "stdin": stdin is not None, "stream": on_output is not None},
            stdin or b"",
            on_output,
        )
        if reply.get("type") == "error":
            raise OSError(reply.get("errno") or 0, reply.get("message", "executor error"))
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

    def close(self) -> None:
        """Close the stream; the executor kills its running command and exits."""
        self.broken = True
        self._stream.close()
