"""``PodmanSandbox``: the :class:`~agentenv.sandbox.protocol.Sandbox` protocol on Podman
(rootful, daemonless), driven through the ``podman`` command.

The same security defaults as Docker's (no network, no capabilities, no new privileges, an
init as PID 1, bounded pids, memory and CPU; a read-only root with bounded tmpfs workdir and
``/tmp``), and the same fast path: the in-sandbox executor, spoken to over the pipes of one
``podman exec -i`` (:class:`~agentenv.sandbox.executors.Executors`). Where Podman differs,
the code says so; ``docs/backends.md`` lists the differences.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import tarfile
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import anyio

from agentenv.log import get_logger
from agentenv.sandbox import cgroup
from agentenv.sandbox.channel import EXECUTOR_ARGV, ExecutorChannel, ExecutorGone
from agentenv.sandbox.container import (
    KEEPALIVE,
    NSOP,
    FrozenBy,
    explain_failure,
    freeze,
    read_in_namespace,
    recycle,
    sandbox_labels,
    set_frozen,
    snapshot_labels,
    thaw,
    thaw_before_removal,
    who_froze,
    writable_mounts,
)
from agentenv.sandbox.errors import (
    ArchiveTooLarge,
    SandboxClosed,
    SandboxError,
    SandboxPaused,
    SandboxUnavailable,
)
from agentenv.sandbox.executors import Executors, check_exec_args, untars
from agentenv.sandbox.files import numeric_owner, raise_file_error, write_tar
from agentenv.sandbox.labels import OWNER, SNAPSHOT_REPOSITORY
from agentenv.sandbox.podman.cli import NoSuchObject, podman, podman_path
from agentenv.sandbox.podman.images import resolve_image
from agentenv.sandbox.podman.stream import ProcessStream
from agentenv.sandbox.protocol import DEFAULT_MAX_OUTPUT, ExecResult, OutputCallback, Snapshot
from agentenv.sandbox.spec import SandboxSpec

log = get_logger(__name__)

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


class PodmanSandbox:
    """A sandbox in a Podman container. Made by :class:`PodmanBackend`; an async context
    manager that removes it on exit."""

    def __init__(self, container_id: str, spec: SandboxSpec, image: str):
        self.id = container_id
        self.spec = spec
        self.image = image
        self.exec_mode = "fast"
        self._executors = Executors(self._new_channel, self._unavailable)
        self._paused = False
        self._frozen_by: FrozenBy = "engine"  # when paused: who thaws it
        self._closed = False
        self._executor_pending = False  # attached while paused: start it on resume

    # -- lifecycle -------------------------------------------------------------------------

    @classmethod
    async def create(cls, spec: SandboxSpec, limiter: anyio.CapacityLimiter) -> PodmanSandbox:
        """Create and start a sandbox; the caller must ``close()`` it."""
        if spec.executor == "docker-exec":
            raise SandboxError(
                "the podman backend runs commands through the in-sandbox executor only "
                "(executor='auto' or 'fast'; the image needs python3)"
            )
        image = await resolve_image(spec.image, spec.dockerfile)
        started = time.monotonic()
        with anyio.CancelScope(shield=True):  # a cancellation here would leak the container
            async with limiter:
                container_id = (await podman(*_create_args(spec, image))).decode().strip()
                box = cls(container_id, spec, image)
                try:
                    await podman("start", container_id)
                    await box._make_folders()
                    await box._start_executor()
                except BaseException:
                    await box.close()
                    raise
        log.debug("sandbox.created", id=box.id[:12], s=time.monotonic() - started)
        return box

    @classmethod
    async def attach(cls, container_id: str, spec: SandboxSpec) -> PodmanSandbox:
        """Take over a sandbox made before (running or paused); see the backend."""
        try:
            info = await _inspect(container_id)
        except NoSuchObject as e:
            raise SandboxUnavailable(f"sandbox {container_id[:12]} no longer exists") from e
        labels = (info.get("Config") or {}).get("Labels") or {}
        if OWNER not in labels:
            raise SandboxError(f"container {container_id[:12]} is not an agentenv sandbox")
        state = info.get("State") or {}
        if not (state.get("Running") or state.get("Paused")):  # Podman: paused is not running
            raise SandboxUnavailable(
                f"sandbox {container_id[:12]} is {state.get('Status', 'not running')}"
            )
        box = cls(str(info["Id"]), spec, str(info.get("ImageName") or spec.image))
        frozen_by = who_froze(box.id, bool(state.get("Paused")))
        if frozen_by is None:
            await box._start_executor()
        else:
            box._paused = box._executor_pending = True
            box._frozen_by = frozen_by
        return box

    async def _make_folders(self) -> None:
        """Make the workdir (and scratch folders) where the image lacks them (Docker makes
        the workdir; Podman refuses to exec in a missing one), and give a read-only
        sandbox's tmpfs folders to a numeric sandbox user (Podman's tmpfs mounts take no
        owner); a writable root folder gets Docker's mode. Done from the host inside the
        container's mount namespace (``nsop.py``): no process in the sandbox ever gets a
        privilege for it."""
        uid, gid = numeric_owner(self.spec.user) if self.spec.read_only else (0, 0)
        folders = [self.spec.workdir, *self.spec.scratch]
        root = "keep" if self.spec.read_only else "open"
        argv = [*NSOP, "layout", str(await self._pid()), self.id, root]
        done = await anyio.run_process([*argv, f"{uid}:{gid}", *folders], check=False)
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip()[-500:]
            raise SandboxError(f"cannot lay out the sandbox: {said}")

    async def _pid(self) -> int:
        """The host pid of the container's PID 1."""
        pid = int(((await _inspect(self.id)).get("State") or {}).get("Pid") or 0)
        if pid <= 0:
            raise await self._unavailable(SandboxError("the container has no process"))
        return pid

    async def _start_executor(self) -> None:
        try:
            await self._executors.prime()
        except ExecutorGone as e:
            said = e.stderr.decode(errors="replace").strip()
            if self.spec.user and "unable to find user" in said.lower():
                raise SandboxError(
                    f"image {self.image!r}: {said}; a user name must be in the image's "
                    "/etc/passwd, a numeric uid[:gid] need not"
                ) from e
            raise SandboxError(
                f"image {self.image!r} cannot run the executor (it needs python3): {said or e}"
            ) from e

    async def _new_channel(self) -> ExecutorChannel:
        argv = [podman_path(), "exec", "-i", "--workdir", self.spec.workdir]
        if self.spec.user:
            argv += ["--user", self.spec.user]
        stream = await ProcessStream.start([*argv, self.id, *EXECUTOR_ARGV])
        return await ExecutorChannel.open(stream)

    def detach(self) -> None:
        """Let go of the sandbox without removing it; this object refuses further calls."""
        self._closed = True
        self._executors.close()

    async def close(self) -> None:
        """Remove the container and everything running in it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._executors.close()
        with anyio.CancelScope(shield=True):
            thaw_before_removal(self.id)  # frozen behind Podman's back: let it kill
            try:
                await podman("rm", "--force", "--time", "0", "--volumes", self.id)
            except NoSuchObject:
                pass
            except SandboxError as e:  # left for `agentenv gc` (it is labelled)
                log.warning("sandbox.close_failed", id=self.id[:12], error=str(e))

    async def __aenter__(self) -> PodmanSandbox:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- commands and files ----------------------------------------------------------------

    def _check_usable(self, *, paused_ok: bool = False) -> None:
        if self._closed:
            raise SandboxClosed(f"sandbox {self.id[:12]} is closed")
        if self._paused and not paused_ok:
            raise SandboxPaused(f"sandbox {self.id[:12]} is paused; call resume() first")

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
        """Run ``cmd`` in the sandbox (see :meth:`Sandbox.exec`)."""
        self._check_usable()
        check_exec_args(cmd, env, timeout)
        return await self._executors.exec(
            cmd,
            timeout=timeout,
            cwd=cwd,
            env=env,
            stdin=stdin,
            max_output=max_output,
            on_output=on_output,
            user=user,
        )

    async def _unavailable(self, cause: BaseException) -> SandboxError:
        """The error for a failed call (see :func:`explain_failure`)."""

        return await explain_failure(
            self.id, cause, closed=self._closed, paused=self._paused, inspect=self._state
        )

    async def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """The file's bytes (see :meth:`Sandbox.read_file`)."""
        self._check_usable()
        return await self._executors.read_file(path, max_bytes)

    async def write_file(self, path: str, data: bytes, mode: int | None = None) -> None:
        """Create or rewrite ``path`` (see :meth:`Sandbox.write_file`)."""
        self._check_usable()
        await self._executors.write_file(path, data, mode)

    async def upload(self, src: Path, dest: str) -> None:
        """Copy the host folder ``src``'s contents (or the file ``src``) into ``dest``."""
        self._check_usable()
        src = Path(src)
        if not src.exists():
            raise FileNotFoundError(2, "no such file or folder to upload", str(src))
        if untars(self.spec):
            with tempfile.TemporaryFile() as file:
                await anyio.to_thread.run_sync(write_tar, file, src, numeric_owner(self.spec.user))
                file.seek(0)
                await self._executors.untar(file, dest, make=True)
            return
        made = await self.exec(["mkdir", "-p", "--", dest], timeout=60)
        raise_file_error(made, dest, {})
        with tempfile.TemporaryFile() as file:
            await anyio.to_thread.run_sync(write_tar, file, src, numeric_owner(self.spec.user))
            file.seek(0)
            await self._copy_in(file, dest)

    async def upload_tar(self, data: bytes | os.PathLike[str], dest: str) -> None:
        """Extract a tar archive (its bytes, or a host tar file) into the folder ``dest``: by
        an executor where it can (see :func:`~agentenv.sandbox.executors.untars`), else by
        ``podman cp``."""
        self._check_usable()
        if untars(self.spec):
            await self._executors.untar(data, dest)
            return
        if isinstance(data, bytes):
            with tempfile.TemporaryFile() as file:
                file.write(data)
                file.seek(0)
                await self._copy_in(file, dest)
            return
        with open(data, "rb") as file:
            await self._copy_in(file, dest)

    async def _copy_in(self, file: IO[bytes], dest: str) -> None:
        # --archive=false keeps the tar's owners (the default makes everything root's)
        argv = [podman_path(), "cp", "--archive=false", "-", f"{self.id}:{dest}"]
        # Podman stops reading at the end-of-archive blocks and then fails on the padding
        # still being written ("read/write on closed pipe"; Python pads to 10 KiB): send the
        # archive up to its last member, then the two end blocks, and no more.
        end = await anyio.to_thread.run_sync(_archive_end, file)
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
            raise await self._unavailable(SandboxError(f"podman cp into {dest}: {said}"))

    async def download(self, path: str) -> bytes:
        """A tar archive of ``path`` (a file or a folder, under its own name); works paused."""
        with tempfile.TemporaryFile() as file:
            await self._fetch(path, file, None)
            file.seek(0)
            return file.read()

    async def download_to(
        self, path: str, file: os.PathLike[str], *, max_bytes: int | None = None
    ) -> None:
        """Write a tar archive of ``path`` to the host ``file`` in chunks; works paused.
        Raises :class:`ArchiveTooLarge` past ``max_bytes``."""
        self._check_usable(paused_ok=True)
        with open(file, "wb") as out:
            await self._fetch(path, out, max_bytes)

    async def _fetch(self, path: str, out: IO[bytes], max_bytes: int | None) -> None:
        """Read through the container's mount namespace (see ``nsop.py``): ``podman cp``
        does not see a tmpfs workdir while the container is frozen."""
        self._check_usable(paused_ok=True)
        try:
            left_out = await read_in_namespace(await self._pid(), self.id, path, out, max_bytes)
        except ArchiveTooLarge:
            raise  # the caller's limit, not the sandbox's failure
        except SandboxError as e:
            raise await self._unavailable(e) from e
        if left_out:  # entries left out (a lease held by a frozen process, say)
            log.info("sandbox.download_left_out", id=self.id[:12], detail=left_out[-500:])

    # -- freezing and saving ---------------------------------------------------------------

    @property
    def paused(self) -> bool:
        """Whether the sandbox is frozen."""
        return self._paused

    async def pause(self) -> None:
        """Freeze every process (the cgroup freezer: written from this host where it may,
        see ``SandboxSpec.freezer``, else ``podman pause``)."""
        if self._closed:
            raise SandboxClosed(f"sandbox {self.id[:12]} is closed")
        if self._paused:
            return
        self._executors.trim()
        self._frozen_by = await freeze(self.id, self.spec, self._set_frozen)
        self._paused = True

    async def resume(self) -> None:
        """Thaw the sandbox after :meth:`pause`."""
        if self._closed:
            raise SandboxClosed(f"sandbox {self.id[:12]} is closed")
        if not self._paused:
            return
        await thaw(self.id, self._frozen_by, self._set_frozen)
        self._paused = False
        if self._executor_pending:
            self._executor_pending = False
            await self._start_executor()

    async def _set_frozen(self, want: bool) -> None:
        conflicts = ("freez", "improper", "already paused", "not paused")
        try:
            await set_frozen(
                want,
                lambda: podman("pause" if want else "unpause", self.id),
                self._state,
                lambda e: isinstance(e, SandboxError) and any(w in str(e) for w in conflicts),
            )
        except SandboxError as e:
            raise await self._unavailable(e) from e

    async def _state(self) -> dict[str, Any] | None:
        """The container's ``State`` (``None``: it is gone)."""
        try:
            return dict((await _inspect(self.id)).get("State") or {})
        except NoSuchObject:
            return None
        except SandboxError as e:
            raise SandboxUnavailable(f"sandbox {self.id[:12]}: {e}") from e

    async def recycle(self) -> bool:
        """Make the sandbox as a new one of its spec would be, for another episode (see
        :func:`~agentenv.sandbox.container.recycle`): ``True`` if it now is, running;
        ``False`` if it cannot be (not read-only, not frozen here, something left), and
        then the caller closes it. Only for a sandbox whose untrusted code ran unprivileged:
        a root process could have tampered with the keep-alive that is kept."""
        if self._closed or (self._paused and self._frozen_by != "cgroup"):
            return False
        self._executors.close()
        self._executors = Executors(self._new_channel, self._unavailable)
        self._executor_pending = False
        try:
            info = await _inspect(self.id)
            init_pid = int((info.get("State") or {}).get("Pid") or 0)
        except (SandboxError, OSError) as e:
            log.info("sandbox.recycle_failed", id=self.id[:12], error=str(e))
            return False
        self._paused = False  # the kill thaws it (or, failing, leaves it to be closed)
        ok = await recycle(
            self.id,
            self.spec,
            init_pid,
            writable_mounts(info),
            self._start_executor,
            lambda argv: self.exec(argv, timeout=120),
        )
        return ok and self.exec_mode == "fast"

    async def cpu_usage_ns(self) -> int:
        """CPU time used by everything in the sandbox so far, in ns (the cgroup's counter)."""
        if self._closed:
            raise SandboxClosed(f"sandbox {self.id[:12]} is closed")
        usage = cgroup.cpu_usage_ns(self.id)
        if usage is None:
            raise SandboxError("the podman backend reads CPU use from the host's cgroups only")
        return usage

    async def snapshot(self, tag: str | None = None, *, keep_s: float | None = None) -> Snapshot:
        """Commit the filesystem to a labelled image for forks (see the Docker backend)."""
        if self._closed:
            raise SandboxClosed(f"sandbox {self.id[:12]} is closed")
        tag = tag or f"{self.id[:12]}-{int(time.time() * 1000)}"
        labels = snapshot_labels(self.spec, keep_s)
        changes = [a for k, v in labels.items() for a in ("--change", f"LABEL {k}={json.dumps(v)}")]
        name = f"{SNAPSHOT_REPOSITORY}:{tag}"
        try:
            out = await podman("commit", "--quiet", "--pause=false", *changes, self.id, name)
        except SandboxError as e:
            raise await self._unavailable(e) from e
        image_id = out.decode().strip().splitlines()[-1]
        spec = self.spec.model_copy(update={"image": image_id, "dockerfile": None})
        return Snapshot(
            ref=image_id, backend=self.spec.backend, tag=name, spec=spec, source_id=self.id
        )


def _archive_end(file: IO[bytes]) -> int:
    """Where the tar in ``file`` ends: after its last member's data (headers are read,
    data skipped). Blocking."""
    file.seek(0)
    with tarfile.open(fileobj=file, mode="r:") as tar:
        for _ in tar:
            pass
        return int(tar.offset)


async def _inspect(container_id: str) -> dict[str, Any]:
    found = json.loads(await podman("container", "inspect", container_id))
    info: dict[str, Any] = found[0] if isinstance(found, list) else found
    return info


def _create_args(spec: SandboxSpec, image: str) -> list[str]:
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
        "--entrypoint", json.dumps(KEEPALIVE),
        *_ulimits(),
    ]  # fmt: skip
    for cap in spec.cap_add:
        args += ["--cap-add", cap]
    if spec.user:
        args += ["--user", "0:0"]  # init and keep-alive as root; commands as the spec's user
    for key, value in spec.env.items():
        args += ["--env", f"{key}={value}"]
    for key, value in sandbox_labels(spec).items():
        args += ["--label", f"{key}={value}"]
    if "runtime" in spec.options:
        args += ["--runtime", spec.options["runtime"]]
    if spec.read_only:
        # Podman's tmpfs mounts copy the image's folder in unless told not to; Docker's
        # start empty, and so do ours on both (the workspace is uploaded into them)
        args += ["--read-only", "--read-only-tmpfs=false"]
        common = "rw,exec,nosuid,nodev,notmpcopyup"
        args += ["--tmpfs", f"/tmp:{common},size={spec.tmp_size},mode=1777"]
        for target in (spec.workdir, *spec.scratch):
            args += ["--tmpfs", f"{target}:{common},size={spec.disk},mode=0755"]
    return [*args, image]
