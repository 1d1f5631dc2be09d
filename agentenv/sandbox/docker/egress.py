"""A sandbox's network allowlist, enforced outside it (Docker).

The sandbox joins an ``internal`` network of its own: no route out, whatever the agent does
to its processes, variables or routes. The network's only other member is a gateway
container of agentenv's (labelled like the sandbox, so ``agentenv gc`` collects it; no
capabilities, not root, read-only) that is also on a normal bridge and runs the filtering
forward proxy of :mod:`agentenv.guest.egress`. The sandbox's processes get
``HTTP(S)_PROXY`` pointing at it; unsetting them gains nothing, as nothing else has a route.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from pathlib import Path

import anyio
import docker.errors

from agentenv.guest import egress as proxy
from agentenv.log import get_logger
from agentenv.sandbox.container.config import sandbox_labels
from agentenv.sandbox.docker.engine import Engine
from agentenv.sandbox.errors import SandboxError
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.sandbox.spec import SandboxSpec

log = get_logger(__name__)

OUTSIDE_OPTION = "egress_network"
"""``SandboxSpec.options`` key: the network the gateway reaches the world through
(default Docker's ``bridge``; tests put it on a network of their own servers)."""
READY_TIMEOUT_S = 20.0
_SOURCE = Path(proxy.__file__).read_text()

GATEWAYS: dict[str, Gateway] = {}
"""Sandbox container id → its gateway, for every driver of this process (a handle is
rebuilt around a container more than once); removed with the sandbox. A sandbox attached
from another process leaves its gateway to ``agentenv gc`` (same labels and expiry)."""


def proxy_env(url: str) -> dict[str, str]:
    """The variables that send a sandbox's HTTP clients through the gateway at ``url``."""
    names = ("http_proxy", "https_proxy", "all_proxy")
    env = {k: url for name in names for k in (name, name.upper())}
    env.update(no_proxy="localhost,127.0.0.1,::1", NO_PROXY="localhost,127.0.0.1,::1")
    return env


async def _ipam(engine: Engine, network: str) -> list[dict[str, str]]:
    """The address ranges (``Subnet``, ``Gateway``) of ``network``."""
    info = await engine.run(engine.api.inspect_network, network)
    return list((info.get("IPAM") or {}).get("Config") or [])


class Gateway:
    """The internal network and the proxy container of one allowlisted sandbox."""

    def __init__(self, engine: Engine, spec: SandboxSpec):
        self.engine = engine
        self.spec = spec
        self.network: str | None = None  # id of the internal network
        self.container: str | None = None
        self.url = ""
        self.name = ""  # of the internal network: the sandbox's network_mode

    @classmethod
    async def start(cls, engine: Engine, spec: SandboxSpec) -> Gateway:
        """Network and proxy up and listening; on failure everything made is removed and
        :class:`SandboxError` says why."""
        gateway = cls(engine, spec)
        try:
            with anyio.CancelScope(shield=True):  # what is made is recorded before a cancel
                await gateway._make()
            await gateway._wait_ready()
        except BaseException as e:
            with anyio.CancelScope(shield=True):
                await gateway.remove()
            if isinstance(e, docker.errors.APIError):
                raise SandboxError(f"cannot set up the network allowlist: {e}") from e
            raise
        return gateway

    async def _make(self) -> None:
        api, run = self.engine.api, self.engine.run
        name = f"agentenv-egress-{uuid.uuid4().hex[:12]}"
        labels = sandbox_labels(self.spec)
        # inhibit_ipv4: the host has no address on this bridge, so nothing (the host's own
        # services included) is reachable from the sandbox but the gateway beside it
        options = {"com.docker.network.bridge.inhibit_ipv4": "true"}
        made = await run(
            api.create_network, name, driver="bridge", internal=True, labels=labels, options=options
        )
        self.network = str(made["Id"])
        outside = self.spec.options.get(OUTSIDE_OPTION, "bridge")
        # never reached by a name (only by an IP/CIDR entry): the sandbox's own side, and
        # the host's address on the outside network (a wildcard name such as
        # 172-17-0-1.some-dns-service.test would otherwise lead to the host's services)
        inside = [c["Subnet"] for c in await _ipam(self.engine, self.network) if "Subnet" in c]
        inside += [c["Gateway"] for c in await _ipam(self.engine, outside) if "Gateway" in c]
        config = {"allow": list(self.spec.allowed_hosts or []), "inside": inside}
        host_config = api.create_host_config(
            network_mode=name,
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            pids_limit=256,
            mem_limit=256 << 20,
            init=True,
        )
        created = await run(
            api.create_container,
            BASE_IMAGE,
            command=["python3", "-c", _SOURCE],
            user="65534:65534",  # nobody: binds a port above 1024, needs nothing else
            environment={"AGENTENV_EGRESS": json.dumps(config)},
            labels={**labels, "agentenv.egress": name},
            host_config=host_config,
            use_config_proxy=False,
        )
        self.container = str(created["Id"])
        await run(api.connect_container_to_network, self.container, outside)
        await run(api.start, self.container)
        state = await run(api.inspect_container, self.container)
        address = state["NetworkSettings"]["Networks"][name]["IPAddress"]
        self.url = f"http://{address}:{proxy.PORT}"
        self.name = name

    async def _wait_ready(self) -> None:
        api, deadline = self.engine.api, time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            out = await self.engine.run(api.logs, self.container, stdout=True, stderr=True)
            if proxy.READY.encode() in out:
                return
            state = await self.engine.run(api.inspect_container, self.container)
            if not state["State"]["Running"]:
                raise SandboxError(f"the egress gateway exited: {out.decode(errors='replace')}")
            await anyio.sleep(0.05)
        raise SandboxError(f"the egress gateway did not listen within {READY_TIMEOUT_S:.0f} s")

    def sandbox_spec(self) -> SandboxSpec:
        """The sandbox's spec on the internal network, with the proxy variables (the task's
        own variables of the same names win: they can only point at what has no route)."""
        env = {**proxy_env(self.url), **self.spec.env}
        return self.spec.model_copy(update={"network": self.name, "env": env})

    async def remove(self) -> None:
        """The gateway container, then the network; what cannot go now is left to
        ``agentenv gc`` (labelled), never an error."""
        api = self.engine.api
        try:
            if self.container is not None:
                with contextlib.suppress(docker.errors.NotFound):
                    await self.engine.run(api.remove_container, self.container, force=True)
            if self.network is not None:
                with contextlib.suppress(docker.errors.NotFound):
                    await self.engine.run(api.remove_network, self.network)
        except docker.errors.APIError as e:
            log.warning("egress.remove_failed", network=self.network, error=str(e))
