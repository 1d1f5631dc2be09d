"""A network allowlist holds against the agent in real containers (Docker): two HTTP
servers on a network of their own ("allowed", "denied"), sandboxes whose gateway reaches
them, and every way around the proxy the agent has tried."""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import AsyncIterator
from typing import Any

import docker.errors
import pytest

from agentenv.sandbox import Sandbox, SandboxSpec, create
from agentenv.sandbox.docker import get_engine
from agentenv.sandbox.docker.egress import OUTSIDE_OPTION
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.sandbox.labels import labels_for

pytestmark = pytest.mark.anyio

SERVE = (
    "mkdir -p /tmp/s && echo {name} > /tmp/s/index.html && cd /tmp/s"
    " && exec python3 -m http.server 8000"
)
GET = """
import sys, urllib.request
try:
    timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 10
    print(urllib.request.urlopen(sys.argv[1], timeout=timeout).read().decode().strip())
except Exception as e:
    print("FAILED", getattr(e, "code", ""), type(e).__name__, e)
"""
CONNECT = """
import socket, sys, os
host = os.environ["http_proxy"].split("//")[1].split(":")[0]
s = socket.create_connection((host, 3128), timeout=10)
s.sendall(("CONNECT %s:8000 HTTP/1.1\\r\\n\\r\\n" % sys.argv[1]).encode())
reply = s.recv(4096).decode()
print(reply.split("\\r\\n")[0])
if " 200 " in reply:
    s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
    data = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    print(data.decode().rsplit("\\n", 2)[-2])
"""


@pytest.fixture(scope="module")
async def servers() -> AsyncIterator[dict[str, Any]]:
    """Two HTTP servers answering their own names, on a user network (DNS by alias)."""
    engine = await get_engine()
    api = engine.api
    labels = labels_for("sandbox", 600)
    name = f"agentenv-test-egress-{os.environ.get('AGENTENV_RUN_ID', 'x')}-{os.getpid()}"
    net = await engine.run(api.create_network, name, driver="bridge", labels=labels)
    made: list[str] = []
    ips: dict[str, str] = {}
    try:
        for server, aliases in (("allowed", ["www.allowed.test"]), ("denied", ["denied.test"])):
            endpoint = api.create_endpoint_config(aliases=[server, *aliases])
            c = await engine.run(
                api.create_container,
                BASE_IMAGE,
                command=["sh", "-c", SERVE.format(name=server)],
                labels=labels,
                host_config=api.create_host_config(network_mode=name),
                networking_config=api.create_networking_config({name: endpoint}),
            )
            made.append(c["Id"])
            await engine.run(api.start, c["Id"])
            info = await engine.run(api.inspect_container, c["Id"])
            ips[server] = info["NetworkSettings"]["Networks"][name]["IPAddress"]
        yield {"network": name, "ips": ips}
    finally:
        for cid in made:
            with contextlib.suppress(docker.errors.NotFound):
                await engine.run(api.remove_container, cid, force=True)
        await engine.run(api.remove_network, net["Id"])


def _spec(servers: dict[str, Any], hosts: list[str]) -> SandboxSpec:
    return SandboxSpec(
        backend="docker",
        network="allowlist",
        allowed_hosts=hosts,
        options={OUTSIDE_OPTION: servers["network"]},
    )


@pytest.fixture(scope="module")
async def box(servers: dict[str, Any]) -> AsyncIterator[Sandbox]:
    async with await create(_spec(servers, ["allowed", "*.allowed.test"])) as sandbox:
        yield sandbox


async def _get(box: Sandbox, url: str, prefix: str = "", timeout: float = 10) -> str:
    result = await box.exec(f"{prefix} python3 -c '{GET}' {url} {timeout}", timeout=40)
    return result.stdout.strip()


async def test_allowed_name_and_wildcard_pass(box: Sandbox) -> None:
    assert await _get(box, "http://allowed:8000/") == "allowed"
    assert await _get(box, "http://www.allowed.test:8000/") == "allowed"


async def test_denied_name_is_refused_by_the_proxy(box: Sandbox) -> None:
    assert (await _get(box, "http://denied:8000/")).startswith("FAILED 403")
    assert (await _get(box, "http://denied.test:8000/")).startswith("FAILED 403")


async def test_connect_tunnel_only_to_allowed(box: Sandbox) -> None:
    ok = await box.exec(f"python3 -c '{CONNECT}' allowed", timeout=40)
    assert ok.stdout.split("\n")[:2] == ["HTTP/1.1 200 Connection established", "allowed"]
    denied = await box.exec(f"python3 -c '{CONNECT}' denied", timeout=40)
    assert denied.stdout.startswith("HTTP/1.1 403")


async def test_bypassing_the_proxy_has_no_route(box: Sandbox, servers: dict[str, Any]) -> None:
    """The agent drops the proxy variables or dials the denied server's address itself."""
    unset = "env -u http_proxy -u HTTP_PROXY -u all_proxy -u ALL_PROXY"
    for server in ("allowed", "denied"):  # even the allowed one: only the proxy may dial
        ip = servers["ips"][server]
        assert (await _get(box, f"http://{ip}:8000/", unset, timeout=2)).startswith("FAILED")


async def test_the_host_is_out_of_reach(box: Sandbox) -> None:
    """The agent dials a port the host listens on, at the sandbox network's gateway
    address (an internal Docker network still gives the host an address there)."""
    with socket.create_server(("0.0.0.0", 0)) as listener:
        port = listener.getsockname()[1]
        route = (await box.exec("awk 'NR==2{print $3}' /proc/net/route")).stdout.strip()
        ip = ".".join(str(int(route[i : i + 2], 16)) for i in (6, 4, 2, 0))
        dial = f"import socket; socket.create_connection(('{ip}', {port}), timeout=2)"
        assert (await box.exec(f'python3 -c "{dial}"', timeout=30)).exit_code != 0


async def test_cidr_entry_is_checked_on_the_resolved_address(servers: dict[str, Any]) -> None:
    cidr = f"{servers['ips']['denied']}/32"
    async with await create(_spec(servers, [cidr])) as sandbox:
        assert await _get(sandbox, "http://denied:8000/") == "denied"  # a name into the CIDR
        assert (await _get(sandbox, "http://allowed:8000/")).startswith("FAILED 403")


async def test_gateway_is_unprivileged_and_goes_with_the_sandbox(servers: dict[str, Any]) -> None:
    engine = await get_engine()
    api = engine.api
    async with await create(_spec(servers, ["allowed"])) as sandbox:
        info = await engine.run(api.inspect_container, sandbox.id)
        network = info["HostConfig"]["NetworkMode"]
        found = await engine.run(api.containers, filters={"label": f"agentenv.egress={network}"})
        (gateway,) = found
        config = await engine.run(api.inspect_container, gateway["Id"])
        assert config["HostConfig"]["CapDrop"] == ["ALL"]
        assert config["Config"]["User"] == "65534:65534"
        assert json.loads(json.dumps(config["Config"]["Labels"]))["agentenv.owner"]
        assert (await engine.run(api.inspect_network, network))["Internal"] is True
        env = dict(e.split("=", 1) for e in config["Config"]["Env"])
        outside = await engine.run(api.inspect_network, servers["network"])
        host = outside["IPAM"]["Config"][0]["Gateway"]
        assert host in json.loads(env["AGENTENV_EGRESS"])["inside"]  # no name leads there
    left = await engine.run(
        api.containers, all=True, filters={"label": f"agentenv.egress={network}"}
    )
    assert left == []
    with pytest.raises(docker.errors.NotFound):
        await engine.run(api.inspect_network, network)
