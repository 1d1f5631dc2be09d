"""The channel: inside the sandbox the relay on 127.0.0.1 reaches the gateway's socket, and
nothing else of the host is reachable; no upstream key or host address is visible inside."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from agentenv.harnesses.run import join_harness, run_harness, start_harness
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.testing import ScriptedTurn
from tests.harnesses.conftest import INSTRUCTION, UPSTREAM_KEY, episode, scripted

pytestmark = [pytest.mark.anyio, pytest.mark.on_docker]

ANSWER = [ScriptedTurn(reasoning="Hello.", content="hello from the model")]

CALL = """
import json, sys, urllib.request
req = urllib.request.Request(sys.argv[1] + "/v1/chat/completions",
    json.dumps({"model": "kimi-k3", "messages": [{"role": "user", "content": "hi"}]}).encode(),
    {"Authorization": "Bearer " + sys.argv[2], "Content-Type": "application/json"})
print(json.load(urllib.request.urlopen(req, timeout=60))["choices"][0]["message"]["content"])
"""

CONNECT = """
import socket, sys
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, int(port)))
        print("REACHED", target)
    except OSError as e:
        print("refused", target, e)
"""


def host_addresses() -> list[str]:
    """This host's IPv4 addresses (loopback, its interfaces, Docker's bridge)."""
    found = {"127.0.0.1", "172.17.0.1"}
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: only the route is chosen
            found.add(s.getsockname()[0])
    except OSError:
        pass
    return sorted(found)


async def test_the_relay_reaches_the_gateway(socket_dir: Path) -> None:
    harness = scripted("python3", "-c", CALL, "{base_url}", "{token}")
    async with episode(BASE_IMAGE, ANSWER, socket_dir) as (box, gateway, trajectory, _):
        run = await run_harness(box, harness, INSTRUCTION, gateway, timeout_s=120)
    assert run.exit_code == 0, run.log
    assert "hello from the model" in run.log
    assert len(trajectory.turns) == 1


async def test_nothing_else_of_the_host_is_reachable(socket_dir: Path) -> None:
    async with episode(BASE_IMAGE, ANSWER, socket_dir) as (box, _, _, server):
        port = urlsplit(server.base_url).port
        targets = [f"{a}:{p}" for a in host_addresses() for p in (port, 22, 2375, 80)]
        result = await box.exec(["python3", "-c", CONNECT, *targets], timeout=120)
    assert result.exit_code == 0, result.stderr
    assert "REACHED" not in result.stdout, result.stdout
    assert sum(line.startswith("refused ") for line in result.stdout.splitlines()) == len(targets)


async def test_no_key_or_host_address_is_visible_inside(socket_dir: Path) -> None:
    harness = scripted("sleep", "1000")  # running, so its environment and files are there
    async with episode(BASE_IMAGE, ANSWER, socket_dir) as (box, gateway, _, server):
        process = await start_harness(box, harness, INSTRUCTION, gateway)
        port = str(urlsplit(server.base_url).port)
        secrets = [UPSTREAM_KEY, server.base_url, f"127.0.0.1:{port}", str(socket_dir)]
        # every process's environment and command line, the harness's state, /run, home, /tmp
        look = (
            "cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n'; "
            "find /tmp /run /workspace /etc -type f 2>/dev/null | xargs cat 2>/dev/null; "
            "ls -la /run/agentenv/gateway"
        )
        seen = await box.exec(["sh", "-c", look], timeout=120)
        listing = await box.exec(["ls", "/run/agentenv/gateway"])
        run = await join_harness(box, process, gateway, timeout_s=1)
    assert run.stopped == "timeout"
    assert seen.stdout, seen.stderr
    for secret in secrets:
        assert secret not in seen.stdout, secret
    assert listing.stdout.split() == [gateway.socket_path.name]  # the socket, nothing else
