"""How the executor waits for a command's exit: with a pidfd where the kernel and Python
have one, by polling where not (Python < 3.9, a seccomp profile without ``pidfd_open``).
Both ways must give the same results; run here, in this process, on the executor's own
functions (no sandbox needed)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agentenv.guest import executor as executor_server

pytestmark = pytest.mark.no_docker


class _Host:
    """The executor's input: a pipe nobody writes to (the host is waiting)."""

    def __init__(self) -> None:
        self.read_end, self.write_end = os.pipe()
        self.inp = executor_server._Input(self.read_end)

    def close(self) -> None:
        os.close(self.read_end)
        os.close(self.write_end)


@pytest.fixture(params=["pidfd", "polling"])
def run(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    if request.param == "polling":
        monkeypatch.setattr(executor_server, "_exit_fd", lambda pid: None)
    elif executor_server._exit_fd(os.getpid()) is None:
        pytest.fail("this host has no pidfd: the pidfd path is not tested")
    frames: list[tuple[dict[str, Any], bytes]] = []
    monkeypatch.setattr(
        executor_server,
        "_write_frame",
        lambda header, payload=b"": frames.append((header, payload)),
    )
    host = _Host()
    opened = set(os.listdir("/proc/self/fd"))

    def exec_(req: dict[str, Any]) -> tuple[dict[str, Any], bytes, float]:
        started = time.monotonic()
        executor_server.do_exec(req, b"", host.inp)
        header, payload = frames.pop()
        return header, payload, time.monotonic() - started

    yield exec_
    host.close()
    assert set(os.listdir("/proc/self/fd")) <= opened, "the executor left a descriptor open"


def test_exit_code_and_output(run: Any) -> None:
    for _ in range(20):  # the exit races the pipes' end: many times, each way
        header, payload, _ = run({"shell": "echo out; echo err >&2; exit 3"})
        assert header["exit_code"] == 3
        assert payload == b"out\nerr\n" and header["stdout_len"] == 4


def test_background_child_keeps_pipes(run: Any) -> None:
    header, payload, took = run({"shell": "sleep 5 & echo started"})
    assert header["exit_code"] == 0 and payload == b"started\n"
    assert took < 4, "waited for the background child that holds the pipes"


def test_output_closed_early_then_exit(run: Any) -> None:
    header, payload, took = run({"shell": "exec >&- 2>&-; sleep 0.3; exit 7"})
    assert header["exit_code"] == 7 and payload == b""
    assert took >= 0.3


def test_timeout_kills(run: Any) -> None:
    header, _, took = run({"shell": "sleep 30", "timeout": 0.5})
    assert header["timed_out"] and header["exit_code"] == 124
    assert took < 10
