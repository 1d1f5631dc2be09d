"""The services beside ``main`` on a Docker engine, through the SDK (no ``docker compose``
binary): a private network of the group's own (``internal``, no route out, unless the task
allows the internet), its named volumes, its images built or found, its containers started
in dependency order (waiting for ``service_started``, ``service_healthy`` or
``service_completed_successfully`` as the file says), frozen and thawed together, and
removed together. Everything carries agentenv's labels, so ``agentenv gc`` collects what a
killed runner left (the containers first, then the network and the volumes).

Side services get Docker's default capabilities (images such as databases switch users),
with ``no-new-privileges``, bounded pids and memory, never the host's network or the host's
files (only binds inside the task's ``environment/`` folder: :mod:`.model`)."""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import docker.errors
import docker.types

from agentenv.log import get_logger
from agentenv.sandbox import cgroup
from agentenv.sandbox.compose.model import Build, Compose, Condition, Service
from agentenv.sandbox.container.freezing import FrozenBy, freeze, thaw, thaw_before_removal
from agentenv.sandbox.docker.engine import Engine
from agentenv.sandbox.docker.images import build_image
from agentenv.sandbox.errors import ImageUnavailable, SandboxError
from agentenv.sandbox.images import CONTEXT_LABEL, context_digest
from agentenv.sandbox.labels import GROUP, labels_for
from agentenv.sandbox.spec import SandboxSpec

log = get_logger(__name__)

SERVICE = "agentenv.compose.service"
"""The label naming a container's service."""

SIDE_MEMORY = 2 << 30  # a side service without mem_limit
SIDE_PIDS = 1024
POLL_S = 0.1  # how often a health or completion is looked at


class ServiceGroup:
    """The running side services of one compose environment and what they stand on."""

    def __init__(self, engine: Engine, project: str, spec: SandboxSpec):
        self.engine = engine
        self.project = project
        self.spec = spec  # main's: the freezer choice, the TTL
        self.network: str | None = None
        self.host_link: str | None = None  # a network only the services the host calls join
        self.volumes: list[str] = []
        self.containers: dict[str, str] = {}  # service → container id
        self.running: set[str] = set()  # services meant to run on (not one-shots)
        self._frozen: dict[str, FrozenBy] = {}
        self.holders = 1  # the sandbox it was made for; a verdict from its snapshot adds one

    @classmethod
    async def start(
        cls, compose: Compose, spec: SandboxSpec, *, project: str, internet: bool, engine: Engine
    ) -> ServiceGroup:
        """The network, the volumes and every side service up, with main's dependencies
        met; on any failure, everything made so far is removed and :class:`SandboxError`
        (:class:`ImageUnavailable` for an image) says which service failed."""
        group = cls(engine, project, spec)
        try:
            with anyio.CancelScope(shield=True):  # made objects are recorded before a cancel
                await group._network(internet)
                await group._volumes(compose.volumes)
            await group._services(compose)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await group.remove()
            raise
        return group

    def _labels(self, kind: str, service: str | None = None) -> dict[str, str]:
        extra = {GROUP: self.project, **({SERVICE: service} if service else {})}
        return labels_for(kind, self.spec.ttl_s, extra)

    async def _network(self, internet: bool) -> None:
        api = self.engine.api
        made = await self.engine.run(
            api.create_network,
            self.project,
            driver="bridge",
            internal=not internet,  # no route out: the services reach only each other
            labels=self._labels("network"),
            # an internal bridge still gives the host an address on it, where the host's
            # own listening ports answer: none, so the services reach only each other
            options={} if internet else {"com.docker.network.bridge.inhibit_ipv4": "true"},
        )
        self.network = str(made["Id"])

    async def _volumes(self, names: list[str]) -> None:
        for name in names:
            made = await self.engine.run(
                self.engine.api.create_volume,
                name=f"{self.project}_{name}",
                labels=self._labels("volume"),
            )
            self.volumes.append(str(made["Name"]))

    async def _services(self, compose: Compose) -> None:
        """Each side service started once what it depends on is as its file says."""
        started = {s.name: anyio.Event() for s in compose.side}
        failed: dict[str, BaseException] = {}
        waited = {
            dep: cond
            for s in [*compose.side, compose.main]
            for dep, cond in s.depends_on.items()
        }  # fmt: skip

        async def one(service: Service) -> None:
            try:
                for dep, condition in service.depends_on.items():
                    await started[dep].wait()
                    if dep in failed:
                        return
                    await self.reach(dep, condition)
                await self._start(service, waited.get(service.name))
            except BaseException as e:
                failed[service.name] = e
                raise
            finally:
                started[service.name].set()

        async with anyio.create_task_group() as tg:
            for service in compose.side:
                tg.start_soon(one, service)

    async def _start(self, service: Service, waited_for: Condition | None) -> None:
        image = await self._image(service)
        api = self.engine.api
        host_config = api.create_host_config(
            network_mode=self.project,
            mounts=[self._mount(m) for m in service.volumes] or None,
            security_opt=["no-new-privileges"],
            pids_limit=SIDE_PIDS,
            mem_limit=service.memory or SIDE_MEMORY,
            memswap_limit=service.memory or SIDE_MEMORY,
            nano_cpus=int((service.cpus or self.spec.cpus) * 1e9),
            init=service.init,
            restart_policy={"Name": service.restart} if service.restart != "no" else None,
            log_config=docker.types.LogConfig(
                type="json-file", config={"max-size": "1m", "max-file": "1"}
            ),
        )
        endpoint = api.create_endpoint_config(aliases=[service.name, *service.aliases])
        health = service.healthcheck
        try:
            made = await self.engine.run(
                api.create_container,
                image,
                command=service.command,
                entrypoint=service.entrypoint,
                environment=service.environment,
                working_dir=service.working_dir,
                user=service.user,
                hostname=service.name,
                labels=self._labels("sandbox", service.name),
                ports=[p.split("/")[0] for p in service.expose] or None,
                healthcheck=None if health is None else _healthcheck(health),
                host_config=host_config,
                networking_config=api.create_networking_config({self.project: endpoint}),
                use_config_proxy=False,
            )
            self.containers[service.name] = str(made["Id"])
            await self.engine.run(api.start, made["Id"])
        except docker.errors.APIError as e:
            raise SandboxError(
                f"compose service {service.name!r} did not start: {e.explanation or e}"
            ) from e
        if waited_for != "service_completed_successfully":
            self.running.add(service.name)

    def _mount(self, mount: Any) -> docker.types.Mount:
        if mount.kind == "volume":
            source = f"{self.project}_{mount.source}"
            return docker.types.Mount(
                mount.target, source, type="volume", read_only=mount.read_only
            )
        return docker.types.Mount(
            mount.target, mount.source, type="bind", read_only=mount.read_only
        )

    async def _image(self, service: Service) -> str:
        if service.build is not None:
            return await _build(self.engine, service.name, service.build)
        assert service.image is not None
        try:
            await self.engine.run(self.engine.api.inspect_image, service.image)
            return service.image
        except docker.errors.ImageNotFound:
            pass
        try:
            await self.engine.run(self.engine.client.images.pull, service.image)
            return service.image
        except docker.errors.DockerException as e:
            raise ImageUnavailable(
                f"compose service {service.name!r}: image {service.image!r} is not here and "
                f"could not be pulled ({str(e).strip()[:200]})"
            ) from e

    async def reach(self, service: str, condition: Condition) -> None:
        """Wait until ``service`` is as ``condition`` says: started, healthy (its
        healthcheck's own timing bounds the wait), or exited 0."""
        cid = self.containers[service]
        deadline = time.monotonic() + 600.0
        while True:
            info = await self.engine.run(self.engine.api.inspect_container, cid)
            state = info.get("State") or {}
            status = state.get("Status")
            if condition == "service_started" and status in ("running", "exited"):
                return
            if condition == "service_completed_successfully" and status == "exited":
                if state.get("ExitCode") == 0:
                    return
                raise SandboxError(
                    f"compose service {service!r} exited {state.get('ExitCode')}, not 0"
                )
            if condition == "service_healthy":
                health = (state.get("Health") or {}).get("Status")
                if health == "healthy":
                    return
                if health == "unhealthy" or status in ("exited", "dead"):
                    logs = (state.get("Health") or {}).get("Log") or [{}]
                    said = str(logs[-1].get("Output", "")).strip()[-500:]
                    raise SandboxError(f"compose service {service!r} is {health or status}: {said}")
            if time.monotonic() > deadline:
                raise SandboxError(f"compose service {service!r} not {condition} in 600 s")
            await anyio.sleep(POLL_S)

    async def freeze(self) -> None:
        """Freeze every running side service (each through its cgroup where this host may,
        as a single sandbox is: :func:`~agentenv.sandbox.container.freezing.freeze`)."""

        async def one(name: str) -> None:
            cid = self.containers[name]
            try:
                self._frozen[name] = await freeze(cid, self.spec, self._engine_freeze(cid))
            except docker.errors.APIError as e:
                if e.status_code != 409:  # 409: it is not running (it exited: the agent
                    raise  # may have stopped it through its port); nothing to freeze
                log.info("compose.service_not_running", service=name, said=str(e)[:200])
                self.running.discard(name)

        await _each(one, [n for n in self.running if n not in self._frozen])

    async def thaw(self) -> None:
        """Thaw what :meth:`freeze` froze."""

        async def one(name: str) -> None:
            cid = self.containers[name]
            await thaw(cid, self._frozen[name], self._engine_freeze(cid))
            del self._frozen[name]

        await _each(one, list(self._frozen))

    def _engine_freeze(self, cid: str) -> Callable[[bool], Awaitable[None]]:
        async def call(want: bool) -> None:
            api = self.engine.api
            await self.engine.run(api.pause if want else api.unpause, cid)

        return call

    async def join(self, container: str, alias: str) -> None:
        """Make ``container`` (already on the group's network) reachable by the services
        under ``alias`` (``main``): the engine sets aliases only when it connects one."""
        api = self.engine.api
        await self.engine.run(api.disconnect_container_from_network, container, self.project)
        await self.engine.run(
            api.connect_container_to_network, container, self.project, aliases=[alias]
        )

    async def host_address(self, service: str) -> str:
        """The address at which the host reaches ``service`` (an MCP server the loop
        calls): the group's own network gives the host no address (so ``main`` cannot dial
        the host's ports), so the service alone also joins a network of the group's where
        the host has one; ``main`` never joins it."""
        api = self.engine.api
        if self.host_link is None:
            made = await self.engine.run(
                api.create_network,
                f"{self.project}-host",
                driver="bridge",
                internal=True,
                labels=self._labels("network"),
            )
            self.host_link = str(made["Id"])
        cid = self.containers[service]
        info = await self.engine.run(api.inspect_container, cid)
        networks = (info.get("NetworkSettings") or {}).get("Networks") or {}
        if f"{self.project}-host" not in networks:
            await self.engine.run(api.connect_container_to_network, cid, self.host_link)
            info = await self.engine.run(api.inspect_container, cid)
            networks = (info.get("NetworkSettings") or {}).get("Networks") or {}
        address = (networks.get(f"{self.project}-host") or {}).get("IPAddress")
        if not address:
            raise SandboxError(f"compose service {service!r} has no address the host reaches")
        return str(address)

    async def release(self) -> None:
        """One holder lets go; the last removes the group (:meth:`remove`)."""
        self.holders -= 1
        if self.holders == 0:
            await self.remove()

    def cpu_usage_ns(self) -> int:
        """CPU time the side services used so far (what this host can read of it)."""
        return sum(cgroup.cpu_usage_ns(cid) or 0 for cid in self.containers.values())

    async def remove(self) -> None:
        """Remove the containers, then the network and the volumes; what cannot go now is
        left to ``agentenv gc`` (labelled), never an error."""
        api = self.engine.api

        async def container(name: str) -> None:
            cid = self.containers[name]
            thaw_before_removal(cid)
            with contextlib.suppress(docker.errors.NotFound):
                await self.engine.run(api.remove_container, cid, force=True, v=True)

        try:
            await _each(container, list(self.containers))
            for network in (self.network, self.host_link):
                if network is not None:
                    with contextlib.suppress(docker.errors.NotFound):
                        await self.engine.run(api.remove_network, network)
            for volume in self.volumes:
                with contextlib.suppress(docker.errors.NotFound):
                    await self.engine.run(api.remove_volume, volume, force=True)
        except docker.errors.APIError as e:
            log.warning("compose.remove_failed", project=self.project, error=str(e))


async def _each(fn: Callable[[str], Coroutine[Any, Any, None]], names: list[str]) -> None:
    """``fn`` on every name at once."""
    if len(names) == 1:
        await fn(names[0])
        return
    async with anyio.create_task_group() as tg:
        for name in names:
            tg.start_soon(fn, name)


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def _healthcheck(health: Any) -> docker.types.Healthcheck:
    return docker.types.Healthcheck(
        test=health.test,
        interval=_ns(health.interval_s),
        timeout=_ns(health.timeout_s),
        retries=health.retries,
        start_period=_ns(health.start_period_s),
    )


async def _build(engine: Engine, service: str, build: Build) -> str:
    """The image of a service's ``build:``, tagged by what it is built from (the context's
    files, the Dockerfile, target and args): built once, found after."""
    key = context_digest(build.context / "Dockerfile") + repr(
        (build.dockerfile, build.target, sorted(build.args.items()))
    )
    tag = f"agentenv/compose:{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    with contextlib.suppress(docker.errors.ImageNotFound):
        await engine.run(engine.api.inspect_image, tag)
        return tag
    log.info("compose.build", service=service, image=tag, context=str(build.context))
    await build_image(
        engine,
        f"compose service {service!r}: build failed",
        path=str(build.context),
        dockerfile=build.dockerfile,
        target=build.target,
        buildargs=build.args or None,
        tag=tag,
        labels={CONTEXT_LABEL: context_digest(build.context / "Dockerfile")},
    )
    return tag
