"""Docker's :class:`~agentenv.sandbox.container.driver.Driver`: the engine primitives the
container state machine runs on, through the Docker API (every blocking call in a worker
thread, through :meth:`Engine.run`)."""

from __future__ import annotations

import contextlib
from typing import IO, Any

import anyio
import docker.errors
import docker.types

from agentenv.sandbox.channel import ByteStream
from agentenv.sandbox.container.config import main_process, sandbox_labels
from agentenv.sandbox.container.driver import Explain, Pacer
from agentenv.sandbox.docker.direct import DockerExec
from agentenv.sandbox.docker.egress import GATEWAYS, Gateway, proxy_env
from agentenv.sandbox.docker.engine import Engine
from agentenv.sandbox.docker.images import resolve_image
from agentenv.sandbox.docker.stream import DockerStream
from agentenv.sandbox.errors import ArchiveTooLarge, SandboxError
from agentenv.sandbox.files import tmpfs_owner
from agentenv.sandbox.labels import labels_for
from agentenv.sandbox.spec import GATEWAY_MOUNT, SandboxSpec

# what an engine answers when its view of paused/running lags the container's: dockerd's 409
# "already paused", 20.10's 500 "is not paused", containerd's shim behind a stale dockerd, and
# runc's cgroup-v1 freezer giving up while processes start
_FREEZE_CONFLICTS = (
    "unable to freeze",
    "already paused",
    "not paused",
    "cannot resume a running process",
    "cannot pause a paused container",
)


def freeze_conflict(error: Exception) -> bool:
    """Whether ``error`` from a pause/unpause is one the container's real state may
    contradict (then :func:`~agentenv.sandbox.container.set_frozen` looks at it)."""
    return isinstance(error, docker.errors.APIError) and (
        error.status_code == 409 or any(w in str(error) for w in _FREEZE_CONFLICTS)
    )


class DockerDriver:
    """The primitives on one Docker :class:`Engine`."""

    name = "docker"
    failures: tuple[type[Exception], ...] = (docker.errors.APIError,)
    executor_starts_in_creation = False
    reads_archives = True

    def __init__(self, engine: Engine):
        self.engine = engine
        self.creations: Pacer = engine.creations

    def describe(self, error: BaseException) -> str:
        """The engine's own explanation, where it gave one."""
        if isinstance(error, docker.errors.APIError) and error.explanation:
            return str(error.explanation)
        return f"{type(error).__name__}: {error}"

    def is_freeze_conflict(self, error: Exception) -> bool:
        """See :func:`freeze_conflict`."""
        return freeze_conflict(error)

    async def resolve_image(self, spec: SandboxSpec) -> str:
        """Local, pulled, or built from the spec's Dockerfile."""
        return await resolve_image(
            self.engine, spec.image, spec.dockerfile, build_timeout_s=spec.build_timeout_s
        )

    async def create(self, spec: SandboxSpec, image: str) -> str:
        """A new container (see :func:`_create_container`); with network ``allowlist``, on
        the internal network of a new :class:`~agentenv.sandbox.docker.egress.Gateway`."""
        if spec.network != "allowlist":
            return await _create_container(self.engine, spec, image)
        gateway = await Gateway.start(self.engine, spec)
        try:
            container_id = await _create_container(self.engine, gateway.sandbox_spec(), image)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await gateway.remove()
            raise
        GATEWAYS[container_id] = gateway
        return container_id

    async def start(self, container_id: str, spec: SandboxSpec, image: str) -> None:
        """Start it (the engine makes the workdir and owns the tmpfs volumes)."""
        try:
            await self.engine.run(self.engine.api.start, container_id)
        except docker.errors.APIError as e:
            raise SandboxError(
                f"cannot start a sandbox from {image!r}: {e.explanation or e}"
            ) from e

    async def inspect(self, container_id: str) -> dict[str, Any] | None:
        """``docker inspect``; ``None`` when the container is gone."""
        try:
            info = await self.engine.run(self.engine.api.inspect_container, container_id)
        except docker.errors.NotFound:
            return None
        return dict(info)

    async def process_stream(
        self, container_id: str, spec: SandboxSpec, argv: list[str], env: dict[str, str]
    ) -> ByteStream:
        """An attached ``docker exec`` (its stdin open) of ``argv``."""
        api = self.engine.api
        exec_id = await self.engine.run(
            api.exec_create,
            container_id,
            argv,
            stdin=True,
            user=spec.user or "",
            workdir=spec.workdir,
            environment=env or None,
        )
        return DockerStream(await self.engine.run(api.exec_start, exec_id, socket=True))

    def direct_exec(
        self, container_id: str, spec: SandboxSpec, image: str, explain: Explain
    ) -> DockerExec:
        """One ``docker exec`` per command."""
        return DockerExec(self.engine, container_id, spec, image, explain)

    async def set_paused(self, container_id: str, paused: bool) -> None:
        """``docker pause`` / ``docker unpause``."""
        api = self.engine.api
        await self.engine.run(api.pause if paused else api.unpause, container_id)

    async def put_archive(self, container_id: str, data: IO[bytes] | bytes, dest: str) -> None:
        """The engine's archive upload."""
        try:
            await self.engine.run(self.engine.api.put_archive, container_id, dest, data)
        except docker.errors.NotFound as e:
            raise FileNotFoundError(2, "no such folder in the sandbox", dest) from e

    async def get_archive(
        self, container_id: str, path: str, out: IO[bytes], max_bytes: int | None
    ) -> None:
        """The engine's archive download, in chunks."""

        def fetch() -> None:
            chunks, _ = self.engine.api.get_archive(container_id, path, chunk_size=1 << 20)
            written = 0
            try:
                for chunk in chunks:
                    written += len(chunk)
                    if max_bytes is not None and written > max_bytes:
                        raise ArchiveTooLarge(
                            f"the archive of {path} is larger than {max_bytes} bytes"
                        )
                    out.write(chunk)
            finally:
                chunks.close()  # drops the engine's response, read or not

        try:
            await self.engine.run(fetch)
        except docker.errors.NotFound as e:
            raise FileNotFoundError(2, "no such file or folder in the sandbox", path) from e

    async def commit(
        self, container_id: str, name: str, labels: dict[str, str], *, pause: bool
    ) -> str:
        """``docker commit``."""
        repository, _, tag = name.rpartition(":")
        conf: dict[str, Any] = {"Labels": labels}
        if container_id in GATEWAYS:  # its proxy variables name a gateway that goes with it:
            conf["Env"] = [f"{k}=" for k in proxy_env("")]  # blanked (a key given wins)
        result = await self.engine.run(
            self.engine.api.commit,
            container_id,
            repository=repository,
            tag=tag,
            conf=conf,
            pause=pause,
        )
        return str(result["Id"])

    async def cpu_usage_ns(self, container_id: str) -> int | None:
        """From the stats API (it answers at its next once-a-second sample)."""
        stats = await self.engine.run(
            self.engine.api.stats, container_id, stream=False, one_shot=True
        )
        return int(stats["cpu_stats"]["cpu_usage"]["total_usage"])

    async def remove(self, container_id: str) -> None:
        """Force-remove it with its volumes."""
        with contextlib.suppress(docker.errors.NotFound):
            await self.engine.run(
                self.engine.api.remove_container, container_id, force=True, v=True
            )
        gateway = GATEWAYS.pop(container_id, None)
        if gateway is not None:  # after the sandbox: a network with members cannot go
            await gateway.remove()


async def _create_container(engine: Engine, spec: SandboxSpec, image: str) -> str:
    api = engine.api
    mounts: list[docker.types.Mount] = []
    tmpfs: dict[str, str] = {}
    if spec.read_only:
        # The only writable places, both bounded: the workdir, a tmpfs-backed volume that
        # `docker cp` (upload, download) reaches, and /tmp. Counted against the memory limit,
        # as tmpfs is. The volume starts empty: the engine copies the image's folder into it
        # at create, with the tmpfs mounted only for that, so the copy is gone at start.
        owner = tmpfs_owner(spec.user)
        for target in (spec.workdir, *spec.scratch):
            mounts.append(
                docker.types.Mount(
                    target=target,
                    source=None,
                    type="volume",
                    labels=labels_for("volume", spec.ttl_s, spec.labels),
                    driver_config=docker.types.DriverConfig(
                        "local",
                        {
                            "type": "tmpfs",
                            "device": "tmpfs",
                            "o": f"size={spec.disk},mode=0755{owner}",
                        },
                    ),
                )
            )
        tmpfs["/tmp"] = f"rw,exec,nosuid,nodev,size={spec.tmp_size},mode=1777"
    mounts += await _named_volumes(engine, spec)
    if spec.gateway_dir is not None:  # the model gateway's socket folder, and nothing else
        mounts.append(
            docker.types.Mount(
                target=GATEWAY_MOUNT, source=str(spec.gateway_dir), type="bind", read_only=True
            )
        )
    host_config = api.create_host_config(
        read_only=spec.read_only,
        mounts=mounts or None,
        tmpfs=tmpfs or None,
        # a sandbox printing to PID 1's stdout must not fill the host's disk
        log_config=docker.types.LogConfig(
            type="json-file", config={"max-size": "1m", "max-file": "1"}
        ),
        network_mode=spec.network,
        cap_drop=["ALL"],
        cap_add=list(spec.cap_add) or None,
        security_opt=["no-new-privileges"],
        pids_limit=spec.pids_limit,
        mem_limit=spec.memory,
        memswap_limit=spec.memory,  # no swap: a memory hog is OOM-killed, not slowed to a crawl
        nano_cpus=int(spec.cpus * 1e9),
        cpu_shares=spec.cpu_shares,
        init=True,
        runtime=spec.options.get("runtime"),
    )
    # what runs after init (see main_process): every command runs as the spec's user
    entrypoint, command, user = main_process(spec)
    try:
        created = await engine.run(
            api.create_container,
            image,
            command=command,
            entrypoint=entrypoint,
            hostname="sandbox",
            user=user,
            environment=spec.env,
            working_dir=spec.workdir,
            labels=sandbox_labels(spec),
            host_config=host_config,
            use_config_proxy=False,
        )
    except docker.errors.APIError as e:
        raise SandboxError(f"cannot create a sandbox from {image!r}: {e.explanation or e}") from e
    return str(created["Id"])


async def _named_volumes(engine: Engine, spec: SandboxSpec) -> list[docker.types.Mount]:
    """The spec's named volumes as mounts. Each must exist: the engine would otherwise make
    an unlabelled one that ``agentenv gc`` never finds. ``no_copy``: an empty volume is not
    seeded from the image's files at its target, so a sandbox made from an agent's snapshot
    (a verdict's) cannot fill a volume its grader reads."""
    mounts = []
    for volume in spec.volumes:
        try:
            await engine.run(engine.api.inspect_volume, volume.name)
        except docker.errors.NotFound as e:
            raise SandboxError(
                f"the volume {volume.name!r} does not exist: a sandbox mounts only volumes "
                "made for it beforehand"
            ) from e
        mounts.append(
            docker.types.Mount(
                target=volume.target,
                source=volume.name,
                type="volume",
                read_only=volume.read_only,
                no_copy=True,
            )
        )
    return mounts
