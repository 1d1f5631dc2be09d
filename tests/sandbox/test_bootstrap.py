"""The executor's bootstrap runs the code compiled on the host when the sandbox's Python
reads that bytecode (the same magic number), and compiles the source sent with it when not.
Run here with this host's interpreter, as a sandbox would run it (no sandbox needed)."""

from __future__ import annotations

import json
import marshal
import struct
import subprocess
import sys

import pytest

from agentenv.sandbox import channel
from agentenv.sandbox.channel import EXECUTOR_ARGV

pytestmark = pytest.mark.no_docker

GOOD = channel._SOURCE
BROKEN = b"this is not python ("


def _start(magic: bytes, source: bytes) -> subprocess.CompletedProcess[bytes]:
    """Start an executor from a payload made like the host's, ask it to ping, close."""
    code = marshal.dumps(compile(GOOD, "agentenv-executor", "exec"))
    payload = magic + struct.pack(">II", len(code), len(source)) + code + source
    ping = json.dumps({"op": "ping"}).encode()
    request = struct.pack(">II", len(ping), 0) + ping
    argv = [sys.executable, "-I", "-c", *EXECUTOR_ARGV[-2:]]
    return subprocess.run(argv, input=payload + request, capture_output=True, timeout=30)


def _answered(done: subprocess.CompletedProcess[bytes]) -> bool:
    return done.returncode == 0 and b'"type": "result"' in done.stdout


def test_the_hosts_payload_starts_an_executor() -> None:
    argv = [sys.executable, "-I", "-c", *EXECUTOR_ARGV[-2:]]
    ping = json.dumps({"op": "ping"}).encode()
    done = subprocess.run(
        argv,
        input=channel._executor_payload() + struct.pack(">II", len(ping), 0) + ping,
        capture_output=True,
        timeout=30,
    )
    assert _answered(done), done


def test_the_same_magic_runs_the_compiled_code() -> None:
    from importlib.util import MAGIC_NUMBER

    assert _answered(_start(MAGIC_NUMBER, BROKEN))  # the source was never compiled


def test_another_magic_compiles_the_source() -> None:
    other = b"\x00\x00\r\n"
    assert _answered(_start(other, GOOD))
    failed = _start(other, BROKEN)  # and it is the source that runs then
    assert not _answered(failed) and b"SyntaxError" in failed.stderr
