"""The host end of the executor's protocol trusts nothing on the stream: a sandbox whose
executor was replaced (a root agent can swap the image's python3, then kill the executor)
controls every byte the next one sends. Spoken to here through a scripted stream."""

from __future__ import annotations

import json
import struct

import anyio
import pytest

from agentenv.sandbox import channel as channel_module
from agentenv.sandbox.channel import ExecutorChannel, ExecutorGone, StreamClosed, handshake_s
from agentenv.sandbox.errors import SandboxError
from agentenv.sandbox.executors import Executors

pytestmark = [pytest.mark.anyio, pytest.mark.no_docker]

EXEC = {"shell": "true", "timeout": 5, "cwd": None, "env": {}, "max_output": 1024, "user": None}


class Scripted:
    """A ByteStream whose output is given in advance."""

    def __init__(self, output: bytes):
        self.output = bytearray(output)
        self.stderr = bytearray()
        self.closed = False

    async def send(self, data: bytes) -> None:
        if self.closed:
            raise StreamClosed("closed")

    async def read_stdout(self, n: int) -> bytes:
        if len(self.output) < n:
            raise StreamClosed("end of stream")
        data = bytes(self.output[:n])
        del self.output[:n]
        return data

    def close(self) -> None:
        self.closed = True


class Silent(Scripted):
    """A ByteStream to a process that never answers (a frozen sandbox's, or a starved one)."""

    def __init__(self) -> None:
        super().__init__(b"")

    async def read_stdout(self, n: int) -> bytes:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


def frame(header: bytes, payload_len: int, payload: bytes = b"") -> bytes:
    return struct.pack(">II", len(header), payload_len) + header + payload


@pytest.mark.parametrize(
    ("output", "said"),
    [
        # 4 GiB announced: refused before a byte of it is read (it would be buffered whole)
        (frame(b'{"type": "result"}', (4 << 30) - 1), "announced a reply"),
        (struct.pack(">II", 64 << 20, 0), "announced a reply"),  # a 64 MiB header
        (frame(b"not json", 0), "not JSON"),
        (frame(b"[1, 2]", 0), "not an object"),
        (frame(json.dumps({"type": "result", "exit_code": "x"}).encode(), 0), "malformed"),
        (frame(json.dumps({"type": "result"}).encode(), 0), "malformed"),
    ],
)
async def test_a_forged_reply_is_the_executor_gone_never_a_crash(output: bytes, said: str) -> None:
    stream = Scripted(output)
    channel = ExecutorChannel(stream)
    with pytest.raises(ExecutorGone, match=said):
        await channel.exec(EXEC, None, None)
    assert channel.broken and stream.closed  # never reused


async def test_an_exec_reply_within_its_bound_is_read() -> None:
    header = {
        "type": "result",
        "exit_code": 0,
        "stdout_len": 3,
        "duration_s": 0.1,
        "timed_out": False,
        "truncated": False,
    }
    channel = ExecutorChannel(Scripted(frame(json.dumps(header).encode(), 3, b"ok\n")))
    result = await channel.exec(EXEC, None, None)
    assert result.stdout == "ok\n" and result.exit_code == 0


def test_the_wait_for_a_new_executor_grows_with_the_hosts_load() -> None:
    # 300 sandboxes starting on two cores put the load average near 36: a process's start
    # then waits that much longer for a core, and the wait must not fail the episode
    assert handshake_s(load=0.5, cores=2) == channel_module.HANDSHAKE_S
    assert handshake_s(load=36.0, cores=2) == 18 * channel_module.HANDSHAKE_S


async def test_an_executor_that_never_answers_is_a_sandbox_error_saying_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a bare TimeoutError out of a sandbox's creation was classified a crash (the episode
    # lost, never retried); explained, it is the sandbox's error, which a job retries
    monkeypatch.setattr(channel_module, "HANDSHAKE_S", 0.2)
    stream = Silent()
    explained: list[BaseException] = []

    async def explain(cause: BaseException) -> SandboxError:
        explained.append(cause)
        return SandboxError(f"sandbox x: {type(cause).__name__}: {cause}")

    executors = Executors(lambda: ExecutorChannel.open(stream), explain)
    with pytest.raises(SandboxError, match="a new executor did not answer within"):
        await executors.prime()
    assert isinstance(explained[0], TimeoutError) and stream.closed
