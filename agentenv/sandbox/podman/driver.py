"""Podman's :class:`~agentenv.sandbox.container.driver.Driver`: the engine primitives the
container state machine runs on, through the ``podman`` command (rootful, daemonless).
Where Podman differs from Docker, the code says so; ``docs/backends.md`` lists the
differences."""

from __future__ import annotations

import contextlib
import json
import resource
import tarfile
import tempfile
from typing import IO, Any

import anyio

from agentenv.sandbox.channel import ByteStream
from agentenv.sandbox.container.config import main_process, sandbox_labels
from agentenv.sandbox.container.driver import Explain, Pacer
from agentenv.sandbox.container.namespace import lay_out
from agentenv.sandbox.errors import SandboxError
from agentenv.sandbox.podman.cli import NoSuchObject, podman, podman_path
from agentenv.sandbox.podman.images import resolve_image
from agentenv.sandbox.podman.stream import ProcessStream
from agentenv.sandbox.spec import GATEWAY_MOUNT, SandboxSpec

_CHUNK = 1 << 20
# Podman asks for more open files and processes than a container under a lowered hard limit
# (this CI's) may have, and then cannot start it; ask for what this host allows instead.
_NPROC_CAP = 32768


def _ulimits() -> list[str]:
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    nofile = 1 << 20 if nofile == resource.RLIM_INFINITY else min(nofile, 1 << 20)
    nproc = _NPROC_CAP if nproc == resource.RLIM_INFINITY else min(nproc, _NPROC_CAP)
    return ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"]


_FREEZE_CONFLICTS = ("freez", "improper", "already paused", "not paused")


class PodmanDriver:
    """The primitives of the ``podman`` command. ``creations`` paces creation (the
    backend's limiter; none for a sandbox only attached to)."""

    name = "podman"
    failures: tuple[type[Exception], ...] = (SandboxError,)
    executor_starts_in_creation = True
    reads_archives = False  # `podman cp` does not see a tmpfs workdir while it is frozen

    def __init__(self, creations: Pacer | None = None):
        self.creations: Pacer = creations or contextlib.nullcontext()

    def describe(self, error: BaseException) -> str:
        """The error's type and words."""
        return f"{type(error).__name__}: {error}"

    def is_freeze_conflict(self, error: Exception) -> bool:
        """What ``podman pause``/``unpause`` say when its view lags the container's."""
        return isinstance(error, SandboxError) and any(w in str(error) for w in _FREEZE_CONFLICTS)

    async def resolve_image(self, spec: SandboxSpec) -> str:
        """Present, or built from the spec's Dockerfile; never pulled."""
        return await resolve_image(
            spec.image, spec.dockerfile, build_timeout_s=spec.build_timeout_s
        )

    async def create(self, spec: SandboxSpec, image: str) -> str:
        """``podman create`` (see :func:`_create_args`)."""
        return (await podman(*_create_args(spec, image))).decode().strip()

    async def start(self, container_id: str, spec: SandboxSpec, image: str) -> None:
        """``podman start``, then the folders laid out from the host (Docker makes the
        workdir; Podman refuses to exec in a missing one, and its tmpfs mounts take no
        owner)."""
        await podman("start", container_id)
        info = await self.inspect(container_id)
        pid = int(((info or {}).get("State") or {}).get("Pid") or 0)
        if pid <= 0:
            raise SandboxError(f"sandbox {container_id[:12]}: the container has no process")
        await lay_out(pid, container_id, spec)

    async def inspect(self, container_id: str) -> dict[str, Any] | None:
        """``podman container inspect``; ``None`` when the container is gone."""
        try:
            found = json.loads(await podman("container", "inspect", container_id))
        except NoSuchObject:
            return None
        info: dict[str, Any] = found[0] if isinstance(found, list) else found
        return info

    async def process_stream(
        self, container_id: str, spec: SandboxSpec, argv: list[str], env: dict[str, str]
    ) -> ByteStream:
        """The pipes of one ``podman exec -i`` of ``argv``."""
        cli = [podman_path(), "exec", "-i", "--workdir", spec.workdir]
        if spec.user:
            cli += ["--user", spec.user]
        for key, value in env.items():
            cli += ["--env", f"{key}={value}"]
        return await ProcessStream.start([*cli, container_id, *argv])

    def direct_exec(
        self, container_id: str, spec: SandboxSpec, image: str, explain: Explain
    ) -> None:
        """None: commands run through the executor only (the image needs python3)."""
        return None

    async def set_paused(self, container_id: str, paused: bool) -> None:
        """``podman pause`` / ``podman unpause``."""
        await podman("pause" if paused else "unpause", container_id)

    async def put_archive(self, container_id: str, data: IO[bytes] | bytes, dest: str) -> None:
        """``podman cp`` of the tar."""
        if not isinstance(data, bytes):
            await self._copy_in(container_id, data, dest)
            return
        with tempfile.TemporaryFile() as file:
            file.write(data)
            file.seek(0)
            await self._copy_in(container_id, file, dest)

    async def _copy_in(self, container_id: str, file: IO[bytes], dest: str) -> None:
        # --archive=false keeps the tar's owners (the default makes everything root's)
        argv = [podman_path(), "cp", "--archive=false", "-", f"{container_id}:{dest}"]
        # Podman stops reading at the end-of-archive blocks and then fails on the padding
        # still being written ("read/write on closed pipe"; Python pads to 10 KiB): send the
        # archive up to its last member, then the two end blocks, and no more.
        end = await anyio.to_thread.run_sync(_archive_end, file)
        if end == 0:
            return  # nothing in it (an empty workdir's), and `podman cp` refuses such a tar
        async with await anyio.open_process(argv) as proc:
            assert proc.stdin is not None and proc.stderr is not None
            with contextlib.suppress(anyio.BrokenResourceError):  # it failed: said below
                file.seek(0)
                left = end
                while left > 0:
                    chunk = file.read(min(_CHUNK, left))
                    if not chunk:
                        break
                    await proc.stdin.send(chunk)
                    left -= len(chunk)
                await proc.stdin.send(bytes(1024))
            await proc.stdin.aclose()
            said_bytes = b""
            with contextlib.suppress(anyio.EndOfStream):
                said_bytes = await proc.stderr.receive(1 << 16)
            code = await proc.wait()
        if code != 0:
            said = said_bytes.decode(errors="replace").strip().removeprefix("Error: ")
            if "no such file or directory" in said.lower() or "must be a directory" in said:
                raise FileNotFoundError(2, "no such folder in the sandbox", dest)
            raise SandboxError(f"podman cp into {dest}: {said}")

    async def get_archive(
        self, container_id: str, path: str, out: IO[bytes], max_bytes: int | None
    ) -> None:
        """Not Podman's: see :attr:`reads_archives`."""
        raise NotImplementedError("podman sandboxes are read through their mount namespace")

    async def commit(
        self, container_id: str, name: str, labels: dict[str, str], *, pause: bool
    ) -> str:
        """``podman commit``, never pausing (``pause`` is not asked for)."""
        changes = [a for k, v in labels.items() for a in ("--change", f"LABEL {k}={json.dumps(v)}")]
        out = await podman("commit", "--quiet", "--pause=false", *changes, container_id, name)
        return out.decode().strip().splitlines()[-1]

    async def cpu_usage_ns(self, container_id: str) -> int | None:
        """None: read from the host's cgroups only."""
        return None

    async def remove(self, container_id: str) -> None:
        """``podman rm --force`` with its volumes, at once."""
        with contextlib.suppress(NoSuchObject):
            await podman("rm", "--force", "--time", "0", "--volumes", container_id)


def _archive_end(file: IO[bytes]) -> int:
    """Where the tar in ``file`` ends: after its last member's data (headers are read,
    data skipped). Blocking."""
    file.seek(0)
    with tarfile.open(fileobj=file, mode="r:") as tar:
        for _ in tar:
            pass
        return int(tar.offset)


def _create_args(spec: SandboxSpec, image: str) -> list[str]:
    if spec.network == "allowlist":  # refused by name rather than run with another network
        raise SandboxError("a network allowlist needs the docker backend (not podman yet)")
    if spec.volumes:  # refused by name rather than run without what the task shares
        raise SandboxError("named volumes (spec.volumes) need the docker backend (not podman yet)")
    args = [
        "create",
        "--network", spec.network,
        "--cap-drop", "all",
        "--security-opt", "no-new-privileges",
        "--pids-limit", str(spec.pids_limit),
        "--memory", str(spec.memory),
        "--memory-swap", str(spec.memory),  # no swap: a memory hog is OOM-killed
        "--cpus", str(spec.cpus),
        "--cpu-shares", str(spec.cpu_shares),
        "--init",
        "--http-proxy=false",  # Podman copies the host's proxy variables in by default
        "--hostname", "sandbox",
        # a sandbox printing to PID 1's stdout must not fill the host's disk
        "--log-driver", "k8s-file", "--log-opt", "max-size=1mb",
        *_ulimits(),
    ]  # fmt: skip
    entrypoint, command, user = main_process(spec)  # commands run as the spec's user
    if entrypoint is not None:
        args += ["--entrypoint", json.dumps(entrypoint)]
    if user:
        args += ["--user", user]
    for cap in spec.cap_add:
        args += ["--cap-add", cap]
    for key, value in spec.env.items():
        args += ["--env", f"{key}={value}"]
    for key, value in sandbox_labels(spec).items():
        args += ["--label", f"{key}={value}"]
    if "runtime" in spec.options:
        args += ["--runtime", spec.options["runtime"]]
    if spec.gateway_dir is not None:  # the model gateway's socket folder, and nothing else
        args += ["--volume", f"{spec.gateway_dir}:{GATEWAY_MOUNT}:ro"]
    if spec.read_only:
        # Podman's tmpfs mounts copy the image's folder in unless told not to; Docker's
        # start empty, and so do ours on both (the workspace is uploaded into them)
        args += ["--read-only", "--read-only-tmpfs=false"]
        common = "rw,exec,nosuid,nodev,notmpcopyup"
        args += ["--tmpfs", f"/tmp:{common},size={spec.tmp_size},mode=1777"]
        for target in (spec.workdir, *spec.scratch):
            args += ["--tmpfs", f"{target}:{common},size={spec.disk},mode=0755"]
    return [*args, image, *command]
