"""``DockerSandbox``: the Docker implementation of the :class:`Sandbox` protocol.

Lifecycle: resolve the image, create the container with the security defaults (behind the
engine's creation limiter), start it, then start the in-sandbox executor. Commands go to the
executor (fast path) or, for images without ``python3``, to one ``docker exec`` each.
``pause``/``resume`` use the cgroup freezer; ``snapshot`` commits the filesystem to an image
that :func:`fork` starts new sandboxes from.
"""

from __future__ import annotations

import contextlib
import io
import os
import tarfile
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal

import anyio
import docker.errors
import docker.types

from agentenv.log import get_logger
from agentenv.sandbox import cgroup, docker_exec
from agentenv.sandbox.channel import (
    ExecutorChannel,
    ExecutorGone,
)
from agentenv.sandbox.engine import Engine, get_engine
from agentenv.sandbox.errors import (
    ArchiveTooLarge,
    EngineUnavailable,
    SandboxClosed,
    SandboxError,
    SandboxPaused,
    SandboxUnavailable,
)
from agentenv.sandbox.images import resolve_image
from agentenv.sandbox.labels import KEPT, OWNER, SNAPSHOT_REPOSITORY, labels_for
from agentenv.sandbox.protocol import DEFAULT_MAX_OUTPUT, ExecResult, OutputCallback, Snapshot
from agentenv.sandbox.spec import SandboxSpec
from agentenv.sandbox.stream import StreamClosed

log = get_logger(__name__)

# How long past a command's own timeout we wait for the executor before suspecting it.
_EXEC_GRACE_S = 15.0
# PID 1 is Docker's init (tini), which reaps orphans; this is its one child, idling (by
# absolute paths: nothing of ours runs through the sandbox's PATH). The
# executor is not started here: PID 1 holds the container's stdin and stdout, which any
# process in the sandbox can open through /proc/1/fd, so they cannot carry the protocol.
_KEEPALIVE = ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do /bin/sleep 3600 & wait $!; done"]
_MAX_IDLE_CHANNELS = 4
_PAUSE_ATTEMPTS = 6
_FILE_GUARD_S = 300.0  # a file transfer that takes longer means the executor is stuck


class DockerSandbox:
    """A sandbox in a Docker container. Create with :meth:`create` (or :func:`sandbox` for an
    ``async with`` block); it is also an async context manager that removes it on exit,
    including on cancellation and Ctrl-C."""

    def __init__(self, engine: Engine, container_id: str, spec: SandboxSpec, image: str):
        self._engine = engine
        self.id = container_id
        self.spec = spec
        self.image = image
        self.exec_mode: Literal["fast", "docker-exec"] = "docker-exec"
        self._idle: list[ExecutorChannel] = []
        self._busy: set[ExecutorChannel] = set()
        self._paused = False
        self._closed = False
        self._executor_pending = False  # attached while paused: start it on resume

    # -- lifecycle -------------------------------------------------------------------------

    @classmethod
    async def create(
        cls, spec: SandboxSpec | None = None, *, engine: Engine | None = None
    ) -> DockerSandbox:
        """Create and start a sandbox; the caller must ``close()`` it."""
        spec = spec or SandboxSpec()
        engine = engine or await get_engine()
        image = await resolve_image(engine, spec.image, spec.dockerfile)
        started = time.monotonic()
        with anyio.CancelScope(shield=True):
            # Shielded: a cancellation between create and return would leak the container.
            async with engine.creations:
                container_id = await _create_container(engine, spec, image)
                box = cls(engine, container_id, spec, image)
                try:
                    await engine.run(engine.api.start, container_id)
                except docker.errors.APIError as e:
                    await box.close()
                    raise SandboxError(
                        f"cannot start a sandbox from {image!r}: {e.explanation or e}"
                    ) from e
                except BaseException:
                    await box.close()
                    raise
            try:
                await box._start_executor()
            except BaseException:
                await box.close()
                raise
        log.debug(
            "sandbox.created", id=box.id[:12], mode=box.exec_mode, s=time.monotonic() - started
        )
        return box

    @classmethod
    async def attach(
        cls, container_id: str, spec: SandboxSpec, *, engine: Engine | None = None
    ) -> DockerSandbox:
        """Take over a sandbox another process (or an earlier part of this one) created,
        running or paused, e.g. to resume a suspended rollout. Refuses containers without
        agentenv's labels; a stopped or missing one is :class:`SandboxUnavailable`."""
        engine = engine or await get_engine()
        try:
            info = await engine.run(engine.api.inspect_container, container_id)
        except docker.errors.NotFound as e:
            raise SandboxUnavailable(f"sandbox {container_id[:12]} no longer exists") from e
        labels = (info.get("Config") or {}).get("Labels") or {}
        if OWNER not in labels:
            raise SandboxError(f"container {container_id[:12]} is not an agentenv sandbox")
        state = info.get("State") or {}
        if not state.get("Running"):
            raise SandboxUnavailable(
                f"sandbox {container_id[:12]} is {state.get('Status', 'not running')}"
            )
        box = cls(engine, str(info["Id"]), spec, str(info["Config"]["Image"]))
        if state.get("Paused"):
            box._paused = True
            box._executor_pending = True
        else:
            await box._start_executor()
        return box

    async def _start_executor(self) -> None:
        if self.spec.executor == "docker-exec":
            return
        try:
            self._idle.append(await self._new_channel())
        except ExecutorGone as e:
            if self.spec.user:  # the executor may not have started because the user is bad
                probe = await docker_exec.run(
                    self._engine,
                    self.id,
                    ["/bin/sh", "-c", "exit 0"],
                    user=self.spec.user,
                    workdir=self.spec.workdir,
                    timeout=30,
                    cwd=None,
                    env=None,
                    stdin=None,
                    max_output=4096,
                    on_output=None,
                )
                if not probe.ok:
                    # Docker often drops its own message ("unable to find user …") from the
                    # stream under load; the failed exit is what it reliably gives.
                    said = (probe.stdout + probe.stderr).strip() or (
                        f"the engine could not start a process as user {self.spec.user!r} "
                        f"(exit {probe.exit_code}); a user name must be in the image's "
                        "/etc/passwd, a numeric uid[:gid] need not"
                    )
                    raise SandboxError(f"image {self.image!r}: {said}") from e
            if self.spec.executor == "fast":
                raise SandboxError(
                    f"image {self.image!r} cannot run the fast executor (it needs python3): "
                    f"{e.stderr.decode(errors='replace').strip() or e}; use executor='auto'"
                ) from e
            log.info(
                "sandbox.fallback", id=self.id[:12], reason="no python3: docker exec per command"
            )
            return
        self.exec_mode = "fast"

    async def _new_channel(self) -> ExecutorChannel:
        return await ExecutorChannel.start(
            self._engine, self.id, user=self.spec.user, workdir=self.spec.workdir
        )

    def detach(self) -> None:
        """Let go of the sandbox without removing it (a suspended rollout that another
        handle or process will :meth:`attach` to); this object refuses further calls."""
        self._closed = True
        for channel in [*self._idle, *self._busy]:
            channel.close()
        self._idle.clear()

    async def close(self) -> None:
        """Remove the container (and everything running in it). Idempotent."""
        if self._closed:
            return
        self._closed = True
        for channel in [*self._idle, *self._busy]:
            channel.close()
        self._idle.clear()
        with anyio.CancelScope(shield=True):
            try:
                await self._engine.run(
                    self._engine.api.remove_container, self.id, force=True, v=True
                )
            except docker.errors.NotFound:
                pass
            except (docker.errors.APIError, EngineUnavailable) as e:
                # Left for `agentenv gc` (it is labelled); closing must not fail an episode.
                log.warning("sandbox.close_failed", id=self.id[:12], error=str(e))

    async def __aenter__(self) -> DockerSandbox:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- commands --------------------------------------------------------------------------

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
        """Run ``cmd`` (shell string, or argv list). A timeout kills the command's whole
        process tree and sets ``timed_out``; output past ``max_output`` per stream is elided
        in the middle and sets ``truncated``. ``user`` (``uid[:gid]``) runs it as another
        user: the executor drops to it, which needs CAP_SETUID and CAP_SETGID."""
        self._check_usable()
        if isinstance(cmd, list) and (not cmd or not all(isinstance(a, str) for a in cmd)):
            raise TypeError(f"cmd must be a string or a non-empty list of strings, got {cmd!r}")
        if env and not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise TypeError(f"env keys and values must be strings, got {env!r}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        if self.exec_mode == "docker-exec":
            try:
                result = await docker_exec.run(
                    self._engine,
                    self.id,
                    cmd,
                    user=user or self.spec.user,
                    workdir=self.spec.workdir,
                    timeout=timeout,
                    cwd=cwd,
                    env=env,
                    stdin=stdin,
                    max_output=max_output,
                    on_output=on_output,
                )
            except (docker.errors.APIError, StreamClosed) as e:
                raise await self._unavailable(e) from e
            if result.exit_code == 137 and not result.timed_out:
                # Killed: by the OOM killer or the like (a result), or with its container?
                await self._raise_if_stopped()
            return result
        header: dict[str, Any] = {
            "timeout": timeout,
            "cwd": cwd,
            "env": env or {},
            "max_output": max_output,
            "user": user,
        }
        header["shell" if isinstance(cmd, str) else "argv"] = cmd
        guard = timeout + _EXEC_GRACE_S if timeout is not None else None
        async with self._channel() as channel:
            with anyio.move_on_after(guard):
                return await channel.exec(header, stdin, on_output)
            channel.close()
            raise await self._unavailable(TimeoutError(f"executor silent {guard:.0f}s after start"))

    @asynccontextmanager
    async def _channel(self) -> AsyncIterator[ExecutorChannel]:
        """An idle executor, or a new one when all are busy (commands run concurrently)."""
        try:
            channel = self._idle.pop() if self._idle else await self._new_channel()
        except (ExecutorGone, docker.errors.APIError) as e:
            raise await self._unavailable(e) from e
        self._busy.add(channel)
        try:
            yield channel
        except ExecutorGone as e:
            raise await self._unavailable(e) from e
        finally:
            self._busy.discard(channel)
            if channel.broken or self._closed or len(self._idle) >= _MAX_IDLE_CHANNELS:
                channel.close()
            else:
                self._idle.append(channel)

    async def _raise_if_stopped(self) -> None:
        error = await self._unavailable(StreamClosed("killed"))
        if isinstance(error, SandboxUnavailable):
            raise error

    async def _unavailable(self, cause: BaseException) -> SandboxError:
        """The error for a failed call: :class:`SandboxClosed` if we closed it, else
        :class:`SandboxUnavailable` saying what happened to the container, else (it is
        alive) a :class:`SandboxError` carrying the cause."""
        if self._closed:
            return SandboxClosed(f"sandbox {self.id[:12]} was closed")
        # An executor's stream can end a moment before the engine records the container as
        # stopped: then look again for a little while before blaming the executor alone.
        looks = 20 if isinstance(cause, (ExecutorGone, StreamClosed)) else 1
        for look in range(looks):
            try:
                info = await self._engine.run(self._engine.api.inspect_container, self.id)
            except docker.errors.NotFound:
                return SandboxUnavailable(f"sandbox {self.id[:12]}: its container was removed")
            except EngineUnavailable as e:
                return SandboxUnavailable(f"sandbox {self.id[:12]}: {e}")
            state = info.get("State") or {}
            if not state.get("Running"):
                why = (
                    "OOM-killed" if state.get("OOMKilled") else f"exit code {state.get('ExitCode')}"
                )
                return SandboxUnavailable(
                    f"sandbox {self.id[:12]}: its container stopped ({why}, "
                    f"status {state.get('Status')})"
                )
            if state.get("Paused") and not self._paused:
                return SandboxUnavailable(f"sandbox {self.id[:12]} was paused by someone else")
            if look + 1 < looks:
                await anyio.sleep(0.1)
        if isinstance(cause, ExecutorGone):
            # Killed by a command, or OOM-killed; the next call starts a new executor.
            return SandboxError(
                f"sandbox {self.id[:12]}: the command's executor died ({cause}); "
                "the sandbox is still running"
            )
        return SandboxError(f"sandbox {self.id[:12]}: {_describe(cause)}")

    # -- files -----------------------------------------------------------------------------

    async def read_file(self, path: str) -> bytes:
        """The file's bytes. ``FileNotFoundError``/``IsADirectoryError``/``PermissionError``
        as for a local file."""
        self._check_usable()
        if self.exec_mode == "fast":
            async with self._channel() as channel:
                with anyio.move_on_after(_FILE_GUARD_S):
                    _, data = await channel.request({"op": "read", "path": path})
                    return data
                raise await self._unavailable(TimeoutError(f"read_file({path!r}) got no answer"))
        script = (
            'if [ ! -e "$1" ]; then exit 3; elif [ -d "$1" ]; then exit 4; '
            'elif [ ! -f "$1" ]; then echo "not a regular file" >&2; exit 5; fi; exec cat -- "$1"'
        )
        result = await self.exec(
            ["/bin/sh", "-c", script, "sh", path], timeout=None, max_output=1 << 62
        )
        _raise_file_error(result, path, {3: FileNotFoundError, 4: IsADirectoryError})
        return result.stdout_bytes

    async def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Create or replace ``path`` (parents created) with ``data``, atomically."""
        self._check_usable()
        if self.exec_mode == "fast":
            async with self._channel() as channel:
                with anyio.move_on_after(_FILE_GUARD_S):
                    await channel.request({"op": "write", "path": path, "mode": mode}, data)
                    return
                raise await self._unavailable(TimeoutError(f"write_file({path!r}) got no answer"))
        script = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1" && chmod "$2" "$1"'
        result = await self.exec(
            ["/bin/sh", "-c", script, "sh", path, f"{mode:o}"], stdin=data, timeout=None
        )
        _raise_file_error(result, path, {})

    async def upload(self, src: Path, dest: str) -> None:
        """Copy the host folder ``src``'s contents (or the file ``src``) into the folder
        ``dest``, created if missing."""
        self._check_usable()
        src = Path(src)
        if not src.exists():
            raise FileNotFoundError(2, "no such file or folder to upload", str(src))
        made = await self.exec(["mkdir", "-p", "--", dest], timeout=60)
        _raise_file_error(made, dest, {})
        owner = _numeric_owner(self.spec.user)

        def send() -> None:
            # Built in an unnamed file and sent from it in chunks, in a worker thread: a
            # big folder would stall the event loop, and must not be held in memory.
            with tempfile.TemporaryFile() as file:
                _write_tar(file, src, owner)
                file.seek(0)
                self._engine.api.put_archive(self.id, dest, file)

        try:
            await self._engine.run(send)
        except docker.errors.APIError as e:
            raise await self._unavailable(e) from e

    async def upload_tar(self, data: bytes | os.PathLike[str], dest: str) -> None:
        """Extract a tar archive (its bytes, or a host tar file's path: sent in chunks) into
        the existing folder ``dest``; the engine keeps every entry inside the sandbox's
        filesystem."""
        self._check_usable()

        def send() -> None:
            if isinstance(data, bytes):
                self._engine.api.put_archive(self.id, dest, data)
                return
            with open(data, "rb") as file:
                self._engine.api.put_archive(self.id, dest, file)

        try:
            await self._engine.run(send)
        except docker.errors.NotFound as e:
            raise FileNotFoundError(2, "no such folder in the sandbox", dest) from e
        except docker.errors.APIError as e:
            raise await self._unavailable(e) from e

    async def download(self, path: str) -> bytes:
        """A tar archive of ``path`` (a file or a folder, under its own name). Works on a
        paused sandbox too: nothing in it can change the files while they are read."""
        buf = io.BytesIO()
        await self._fetch(path, buf)
        return buf.getvalue()

    async def download_to(
        self, path: str, file: os.PathLike[str], *, max_bytes: int | None = None
    ) -> None:
        """Write a tar archive of ``path`` (as :meth:`download` gives it) to the host
        ``file``, in chunks: a workspace of any size costs no more memory than one chunk.
        Past ``max_bytes`` it stops reading and raises :class:`ArchiveTooLarge`."""
        self._check_usable(paused_ok=True)  # before the file is made
        with open(file, "wb") as out:
            await self._fetch(path, out, max_bytes)

    async def _fetch(self, path: str, out: IO[bytes], max_bytes: int | None = None) -> None:
        self._check_usable(paused_ok=True)

        def fetch() -> None:
            chunks, _ = self._engine.api.get_archive(self.id, path, chunk_size=1 << 20)
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
            await self._engine.run(fetch)
        except docker.errors.NotFound as e:
            raise FileNotFoundError(2, "no such file or folder in the sandbox", path) from e
        except docker.errors.APIError as e:
            raise await self._unavailable(e) from e

    # -- freezing and saving ---------------------------------------------------------------

    @property
    def paused(self) -> bool:
        """Whether the sandbox is frozen."""
        return self._paused

    async def pause(self) -> None:
        """Freeze all processes (cgroup freezer): no CPU is used until :meth:`resume`."""
        if self._closed:
            raise SandboxClosed(f"sandbox {self.id[:12]} is closed")
        if self._paused:
            return
        for attempt in range(_PAUSE_ATTEMPTS):
            try:
                await self._engine.run(self._engine.api.pause, self.id)
                break
            except docker.errors.APIError as e:
                # runc's cgroup-v1 freezer sometimes gives up while a sandbox's processes
                # are still starting ("unable to freeze", runc#2753); a retry succeeds.
                if "unable to freeze" not in str(e) or attempt + 1 == _PAUSE_ATTEMPTS:
                    raise await self._unavailable(e) from e
                log.debug("sandbox.pause_retry", id=self.id[:12], attempt=attempt + 1)
                await anyio.sleep(0.01 * 2**attempt)
        self._paused = True

    async def resume(self) -> None:
        """Thaw the sandbox after :meth:`pause`."""
        if self._closed:
            raise SandboxClosed(f"sandbox {self.id[:12]} is closed")
        if not self._paused:
            return
        try:
            await self._engine.run(self._engine.api.unpause, self.id)
        except docker.errors.APIError as e:
            raise await self._unavailable(e) from e
        self._paused = False
        if self._executor_pending:
            self._executor_pending = False
            await self._start_executor()

    async def cpu_usage_ns(self) -> int:
        """CPU time used by everything in the sandbox so far (the cgroup's counter), in ns."""
        if self._closed:
            raise SandboxClosed(f"sandbox {self.id[:12]} is closed")
        # The cgroup's own counter when the engine is local: exact at the moment of the call.
        # Docker's stats API answers only at its next once-a-second sample.
        usage = cgroup.cpu_usage_ns(self.id)
        if usage is not None:
            return usage
        try:
            stats = await self._engine.run(
                self._engine.api.stats, self.id, stream=False, one_shot=True
            )
        except docker.errors.APIError as e:
            raise await self._unavailable(e) from e
        return int(stats["cpu_stats"]["cpu_usage"]["total_usage"])

    async def snapshot(self, tag: str | None = None, *, keep_s: float | None = None) -> Snapshot:
        """Commit the filesystem to an image (labelled, collectable) for :func:`fork`.

        By default ``agentenv gc`` may remove it once this process is gone; with ``keep_s``
        it outlives the process (kept results) and only its expiry, ``keep_s`` from now,
        lets gc remove it."""
        if self._closed:
            raise SandboxClosed(f"sandbox {self.id[:12]} is closed")
        tag = tag or f"{self.id[:12]}-{int(time.time() * 1000)}"
        labels = labels_for("snapshot", keep_s or self.spec.ttl_s, self.spec.labels)
        if keep_s is not None:
            labels[OWNER] = KEPT  # no owner process: only the expiry applies
        conf = {"Labels": labels}
        try:
            result = await self._engine.run(
                self._engine.api.commit, self.id, repository=SNAPSHOT_REPOSITORY, tag=tag, conf=conf
            )
        except docker.errors.APIError as e:
            raise await self._unavailable(e) from e
        image_id = str(result["Id"])
        spec = self.spec.model_copy(update={"image": image_id, "dockerfile": None})
        return Snapshot(
            image_id=image_id, tag=f"{SNAPSHOT_REPOSITORY}:{tag}", spec=spec, source_id=self.id
        )


def _sandbox_labels(spec: SandboxSpec) -> dict[str, str]:
    labels = labels_for("sandbox", spec.ttl_s, spec.labels)
    if spec.outlive_owner:
        labels[OWNER] = KEPT  # no owner process: only the expiry applies
    return labels


async def _create_container(engine: Engine, spec: SandboxSpec, image: str) -> str:
    api = engine.api
    mounts: list[docker.types.Mount] = []
    tmpfs: dict[str, str] = {}
    if spec.read_only:
        # The only writable places, both bounded: the workdir, a tmpfs-backed volume that
        # the engine fills from the image's workdir and that `docker cp` (upload, download)
        # reaches, and /tmp. Counted against the memory limit, as tmpfs is.
        owner = _tmpfs_owner(spec.user)
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
        init=True,
    )
    try:
        created = await engine.run(
            api.create_container,
            image,
            command=[],
            entrypoint=_KEEPALIVE,
            hostname="sandbox",
            # init and its keep-alive run as root (without capabilities) so that a sandbox
            # user cannot kill them and take the container, and its workdir, down with them;
            # every command runs as the spec's user
            user="0:0" if spec.user else "",
            environment=spec.env,
            working_dir=spec.workdir,
            labels=_sandbox_labels(spec),
            host_config=host_config,
            use_config_proxy=False,
        )
    except docker.errors.APIError as e:
        raise SandboxError(f"cannot create a sandbox from {image!r}: {e.explanation or e}") from e
    return str(created["Id"])


def _tmpfs_owner(user: str | None) -> str:
    """Mount options making a numeric ``uid[:gid]`` own the workdir volume's root."""
    if not user:
        return ""
    uid, _, gid = user.partition(":")
    if not uid.isdigit() or (gid and not gid.isdigit()):
        return ""  # a name: the engine resolves it, we cannot; the owner is fixed on upload
    return f",uid={uid},gid={gid or uid}"


def _numeric_owner(user: str | None) -> tuple[int, int]:
    """The uid and gid uploaded files get: the sandbox's user when numeric, else root (the
    host user's uid means nothing in the sandbox, and makes git refuse the repo)."""
    uid, _, gid = (user or "0").partition(":")
    if not uid.isdigit() or (gid and not gid.isdigit()):
        return 0, 0
    return int(uid), int(gid or uid)


def _write_tar(file: IO[bytes], src: Path, owner: tuple[int, int] = (0, 0)) -> None:
    def own(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid, info.gid = owner
        info.uname = info.gname = ""
        return info

    with tarfile.open(fileobj=file, mode="w") as tar:
        if src.is_dir():
            for child in sorted(src.iterdir()):
                tar.add(child, arcname=child.name, filter=own)
        else:
            tar.add(src, arcname=src.name, filter=own)


def _describe(e: BaseException) -> str:
    if isinstance(e, docker.errors.APIError) and e.explanation:
        return str(e.explanation)
    return f"{type(e).__name__}: {e}"


def _raise_file_error(result: ExecResult, path: str, codes: dict[int, type[OSError]]) -> None:
    if result.exit_code == 0:
        return
    message = result.stderr.strip() or f"exit code {result.exit_code}"
    error = codes.get(result.exit_code)
    if error is None:
        error = PermissionError if "ermission denied" in message else OSError
    raise error(result.exit_code, message, path)


@asynccontextmanager
async def sandbox(
    spec: SandboxSpec | None = None, *, engine: Engine | None = None
) -> AsyncIterator[DockerSandbox]:
    """``async with sandbox(spec) as sb:`` — a sandbox removed when the block ends."""
    box = await DockerSandbox.create(spec, engine=engine)
    async with box:
        yield box


async def fork(snapshot: Snapshot, n: int, *, engine: Engine | None = None) -> list[DockerSandbox]:
    """Start ``n`` independent sandboxes from ``snapshot``; all or none."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    engine = engine or await get_engine()
    boxes: list[DockerSandbox | None] = [None] * n

    async def one(i: int) -> None:
        boxes[i] = await DockerSandbox.create(snapshot.spec, engine=engine)

    try:
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
    except BaseException:
        with anyio.CancelScope(shield=True):
            for box in boxes:
                if box is not None:
                    await box.close()
        raise
    return [box for box in boxes if box is not None]


async def remove_snapshot(snapshot: Snapshot, *, engine: Engine | None = None) -> None:
    """Delete a snapshot's image (sandboxes forked from it must be closed first)."""
    engine = engine or await get_engine()
    with contextlib.suppress(docker.errors.ImageNotFound):
        await engine.run(engine.api.remove_image, snapshot.image_id, force=True)
