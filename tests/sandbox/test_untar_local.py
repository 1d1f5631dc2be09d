"""The executor's untar on this host's own interpreter (a CPython build where an mtime past
``time_t`` raises ``OverflowError`` instead of being clamped): an archive of odd times,
non-UTF-8 names and many deep entries is extracted or refused with a reply, and the
executor answers the next request. No sandbox: the executor runs here, as in one."""

from __future__ import annotations

import io
import os
import sys
import tarfile
from pathlib import Path

import anyio
import anyio.abc
import pytest

from agentenv.sandbox.channel import EXECUTOR_ARGV, ExecutorChannel, StreamClosed

pytestmark = [pytest.mark.anyio, pytest.mark.no_docker]


class Piped:
    """A ByteStream over a local process's pipes."""

    def __init__(self, process: anyio.abc.Process):
        self.process = process
        self.stderr = bytearray()
        self._buf = bytearray()

    async def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        try:
            await self.process.stdin.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as e:
            raise StreamClosed(str(e)) from e

    async def read_stdout(self, n: int) -> bytes:
        assert self.process.stdout is not None
        while len(self._buf) < n:
            try:
                self._buf += await self.process.stdout.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError) as e:
                raise StreamClosed("end of stream") from e
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def close(self) -> None:
        self.process.kill()


def _tar(entries: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


async def test_odd_archives_get_a_reply_and_the_executor_lives_on(tmp_path: Path) -> None:
    argv = [sys.executable, "-I", "-c", *EXECUTOR_ARGV[-2:]]
    async with await anyio.open_process(argv) as process:
        channel = await ExecutorChannel.open(Piped(process))
        far = tarfile.TarInfo("far.txt")
        far.mtime = 2**63 - 1  # what tmpfs lets an agent set; a float past time_t here
        latin = tarfile.TarInfo("caf\udce9.txt")  # a Latin-1 byte, not UTF-8
        data = _tar([(far, b"x"), (latin, b"y")])
        await channel.untar(str(tmp_path), io.BytesIO(data), len(data), make=False)
        assert (tmp_path / "far.txt").read_bytes() == b"x"
        assert b"caf\xe9.txt" in os.listdir(bytes(tmp_path))
        # deep and many: one descriptor per folder on the current path, not a walk per entry
        deep = "/".join(["d"] * 100)
        many = [(tarfile.TarInfo(f"{deep}/f{i}"), b"") for i in range(2000)]
        data = _tar(many)
        with anyio.fail_after(60):
            await channel.untar(str(tmp_path), io.BytesIO(data), len(data), make=False)
        assert len(os.listdir(tmp_path.joinpath(*deep.split("/")))) == 2000
        reply, _ = await channel.request({"op": "ping"})
        assert reply["type"] == "result"
        channel.close()
