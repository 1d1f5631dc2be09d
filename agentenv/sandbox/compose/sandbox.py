""":class:`ComposeSandbox`: a compose environment as one
:class:`~agentenv.sandbox.protocol.Sandbox`. Commands and files go to ``main`` (an ordinary
Docker sandbox of the task's image, on the group's private network, where the side services
are reached by their names); ``pause``/``resume`` freeze and thaw ``main`` and every side
service together; ``close`` removes them all with their network and volumes.

A snapshot of it is ``main``'s filesystem, and keeps the side services as the agent left
them (their state is the task's outcome: a database the agent filled) for the verdict:
:func:`services_kept` hands them over, and :meth:`KeptServices.create` starts a new
``main`` from the snapshot beside them. The group goes once both the sandbox and the
verdict have let go of it."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType

import anyio

from agentenv.sandbox.channel import ByteStream
from agentenv.sandbox.compose.group import ServiceGroup
from agentenv.sandbox.compose.model import MAIN, Compose, ComposeError, read_compose
from agentenv.sandbox.docker import exec as docker_exec
from agentenv.sandbox.docker.driver import DockerDriver
from agentenv.sandbox.docker.engine import get_engine
from agentenv.sandbox.docker.sandbox import DockerSandbox
from agentenv.sandbox.errors import SandboxError
from agentenv.sandbox.protocol import DEFAULT_MAX_OUTPUT, ExecResult, OutputCallback, Snapshot
from agentenv.sandbox.spec import NamedVolume, SandboxSpec


class ComposeSandbox:
    """``main`` and the services beside it. Made by :func:`create_compose`."""

    def __init__(
        self,
        main: DockerSandbox,
        group: ServiceGroup,
        main_env: Mapping[str, str] | None = None,
        main_volumes: tuple[NamedVolume, ...] = (),
    ):
        self.main = main
        self.group = group
        self.main_env = dict(main_env or {})  # what the compose file gives main
        self.main_volumes = main_volumes  # the group's volumes it mounts (the snapshot lacks)
        self.id = main.id
        self.spec = main.spec
        self.image = main.image
        self._closed = False

    @property
    def paused(self) -> bool:
        """Whether the group is frozen."""
        return self.main.paused

    async def exec(
        self,
        cmd: str | list[str],
        *,
        timeout: float | None = 60.0,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        stdin: bytes | None = None,
        max_output: int = DEFAULT_MAX_OUTPUT,
        on_output: OutputCallback | None = None,
        user: str | None = None,
    ) -> ExecResult:
        """Run ``cmd`` in ``main`` (see :meth:`Sandbox.exec`)."""
        return await self.main.exec(
            cmd, timeout=timeout, cwd=cwd, env=env, stdin=stdin, max_output=max_output,
            on_output=on_output, user=user,
        )  # fmt: skip

    async def stream(self, argv: list[str], *, env: dict[str, str] | None = None) -> ByteStream:
        """Start ``argv`` in ``main``, its stdio streamed (see :meth:`Sandbox.stream`)."""
        return await self.main.stream(argv, env=env)

    async def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """A file of ``main``."""
        return await self.main.read_file(path, max_bytes=max_bytes)

    async def write_file(self, path: str, data: bytes, mode: int | None = None) -> None:
        """Write a file in ``main``."""
        await self.main.write_file(path, data, mode)

    async def upload(self, src: Path, dest: str) -> None:
        """Copy host files into ``main``."""
        await self.main.upload(src, dest)

    async def download(self, path: str) -> bytes:
        """A tar of ``path`` in ``main``."""
        return await self.main.download(path)

    async def download_to(
        self, path: str, file: os.PathLike[str], *, max_bytes: int | None = None
    ) -> None:
        """A tar of ``path`` in ``main``, written to the host ``file``."""
        await self.main.download_to(path, file, max_bytes=max_bytes)

    async def service_exec(
        self, service: str, command: str, *, timeout: float, user: str | None
    ) -> ExecResult:
        """Run the task's shell ``command`` in the side service ``service`` (a Harbor
        ``[[verifier.collect]]``); :class:`KeyError` when there is no such service."""
        return await docker_exec.run(
            self.group.engine, self.group.containers[service], command, user=user or "",
            workdir="/", timeout=timeout, cwd=None, env=None, stdin=None,
            max_output=DEFAULT_MAX_OUTPUT, on_output=None,
        )  # fmt: skip

    async def service_download_to(
        self, service: str, path: str, file: os.PathLike[str], *, max_bytes: int | None
    ) -> None:
        """A tar of ``path`` in the side service ``service`` (read by the engine, frozen or
        not), written to the host ``file``; :class:`KeyError` when there is no such service."""
        container = self.group.containers[service]
        with open(file, "wb") as out:
            await DockerDriver(self.group.engine).get_archive(container, path, out, max_bytes)

    async def upload_tar(self, data: bytes | os.PathLike[str], dest: str) -> None:
        """Extract a tar into ``dest`` in ``main``."""
        await self.main.upload_tar(data, dest)

    async def pause(self) -> None:
        """Freeze ``main`` and every side service at once: no service answers ``main``
        meanwhile, none uses CPU."""
        if self.main.paused:
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.group.freeze)
            tg.start_soon(self.main.pause)

    async def resume(self) -> None:
        """Thaw them all together."""
        if not self.main.paused:
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.group.thaw)
            tg.start_soon(self.main.resume)

    async def snapshot(self, tag: str | None = None, *, keep_s: float | None = None) -> Snapshot:
        """``main``'s filesystem; the side services, as they are, stay up for whoever takes
        them by the snapshot's ref (:func:`services_kept`) even once this sandbox closes."""
        snapshot = await self.main.snapshot(tag, keep_s=keep_s)
        if not self._closed:
            self.group.holders += 1
            _KEPT[snapshot.ref] = KeptServices(self.group, self.main_env, self.main_volumes)
        return snapshot

    async def cpu_usage_ns(self) -> int:
        """CPU time of ``main`` and the side services."""
        return await self.main.cpu_usage_ns() + self.group.cpu_usage_ns()

    def detach(self) -> None:
        """Not possible: the group lives and dies with this process."""
        raise SandboxError("a compose environment cannot be detached (it is not resumable)")

    async def close(self) -> None:
        """Remove ``main``, the side services, their network and volumes. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self.main.close()
            await self.group.release()  # removed now unless a verdict still holds it

    async def __aenter__(self) -> ComposeSandbox:
        """``async with``: closed when the block ends."""
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close it, whatever ended the block."""
        await self.close()


class KeptServices:
    """The side services a snapshot of a compose sandbox kept, as the agent left them."""

    def __init__(
        self,
        group: ServiceGroup,
        main_env: Mapping[str, str],
        main_volumes: tuple[NamedVolume, ...] = (),
    ):
        self.group = group
        self.main_env = dict(main_env)
        self.main_volumes = main_volumes

    async def create(self, spec: SandboxSpec) -> DockerSandbox:
        """A new ``main`` of ``spec`` (the snapshot's image) on the services' network,
        reached by them as ``main``, with the environment the compose file gives main and
        the group's volumes mounted where it says (a snapshot holds none of their contents:
        test.sh reads what the services wrote there); the services thawed (the agent's
        ``main`` stays frozen, or is gone). The caller closes it; the services stay."""
        await self.group.thaw()
        env = {**self.main_env, **spec.env}
        # a spec of the snapshot's may name them already (a snapshot's spec is its sandbox's)
        volumes = tuple(dict.fromkeys((*spec.volumes, *self.main_volumes)))
        box = await DockerSandbox.create(
            spec.model_copy(update={"network": self.group.project, "env": env, "volumes": volumes}),
            engine=self.group.engine,
        )
        try:
            await self.group.join(box.id, MAIN)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await box.close()
            raise
        return box


_KEPT: dict[str, KeptServices] = {}
"""Side services kept by a snapshot (by its ref), until :func:`services_kept` takes them."""


@asynccontextmanager
async def services_kept(snapshot: str) -> AsyncIterator[KeptServices | None]:
    """``async with services_kept(ref) as kept:`` the side services the snapshot ``ref``
    of a compose sandbox kept (``None`` for any other snapshot, or one already taken);
    let go of when the block ends (removed if their sandbox is closed by then)."""
    kept = _KEPT.pop(snapshot, None)
    try:
        yield kept
    finally:
        if kept is not None:
            with anyio.CancelScope(shield=True):
                await kept.group.release()


def project_name() -> str:
    """A new group's name: its network's, its volumes' prefix, ``${COMPOSE_PROJECT_NAME}``."""
    return f"agentenv-{uuid.uuid4().hex[:12]}"


async def create_compose(
    spec: SandboxSpec, path: Path, variables: Mapping[str, str]
) -> ComposeSandbox:
    """The side services of the compose file ``path`` up (its templates filled from
    ``variables`` and ``COMPOSE_PROJECT_NAME``), then ``main`` from ``spec`` on their
    network (its environment and dependencies from the file); all removed again if one
    fails. :class:`ComposeError` (a :class:`SandboxError`) for what the file holds that
    agentenv does not run.
    ``spec.network`` ``"bridge"`` lets the group reach the internet, ``"none"`` not.
    Docker only: another backend raises :class:`SandboxError`."""
    if spec.backend != "docker":
        raise SandboxError(f"compose environments need the docker backend, not {spec.backend!r}")
    if spec.network == "allowlist":  # its services would need a gateway each
        raise SandboxError("a network allowlist is not supported for compose environments yet")
    if spec.outlive_owner:
        raise SandboxError("a compose environment cannot outlive its process (not resumable)")
    project = project_name()
    try:
        compose = read_compose(path, {**variables, "COMPOSE_PROJECT_NAME": project})
    except ComposeError as e:
        raise SandboxError(f"{path}: {e}") from e
    engine = await get_engine()
    internet = spec.network == "bridge"
    group = await ServiceGroup.start(
        compose, spec, project=project, internet=internet, engine=engine
    )
    try:
        for dep, condition in compose.main.depends_on.items():
            await group.reach(dep, condition)
        env = {**compose.main.environment, **spec.env}
        volumes = main_volumes(compose, project)
        main_spec = spec.model_copy(
            update={"network": group.project, "env": env, "volumes": (*spec.volumes, *volumes)}
        )
        main = await DockerSandbox.create(main_spec, engine=engine)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await group.remove()
        raise
    return ComposeSandbox(main, group, compose.main.environment, volumes)


def main_volumes(compose: Compose, project: str) -> tuple[NamedVolume, ...]:
    """The group's named volumes ``main`` mounts, as the file says (read-only or not; a
    bind into main is refused when the file is read)."""
    return tuple(
        NamedVolume(name=f"{project}_{m.source}", target=m.target, read_only=m.read_only)
        for m in compose.main.volumes
        if m.kind == "volume"
    )
