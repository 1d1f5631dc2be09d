"""``DockerSandbox``: the Docker implementation of the :class:`Sandbox` protocol.

Lifecycle: resolve the image, create the container with the security defaults (behind the
engine's creation limiter), start it, then start the in-sandbox executor. Commands go to the
executor (fast path) or, for images without ``python3``, to one ``docker exec`` each.
``pause``/``resume`` use the cgroup freezer (written directly where this host may);
``snapshot`` commits the filesystem to an image that :func:`fork` starts new sandboxes from.
"""

from __future__ import annotations

import errno
import functools
import io
import os
import tarfile
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal

import anyio
import docker.errors
import docker.types

from agentenv.log import get_logger
from agentenv.sandbox import cgroup
from agentenv.sandbox.channel import EXECUTOR_ARGV, ExecutorChannel, ExecutorGone, StreamClosed
from agentenv.sandbox.container import (
    KEEPALIVE,
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
from agentenv.sandbox.docker import exec as docker_exec
from agentenv.sandbox.docker.engine import Engine, get_engine
from agentenv.sandbox.docker.images import resolve_image
from agentenv.sandbox.docker.stream import DockerStream
from agentenv.sandbox.errors import (
    ArchiveTooLarge,
    EngineUnavailable,
    ExecUserError,
    FileTooLarge,
    SandboxClosed,
    SandboxError,
    SandboxPaused,
    SandboxUnavailable,
)
from agentenv.sandbox.executors import FILE_GUARD_S, Executors, check_exec_args, untars
from agentenv.sandbox.files import numeric_owner, raise_file_error, tmpfs_owner, write_tar
from agentenv.sandbox.labels import OWNER, SNAPSHOT_REPOSITORY, labels_for
from agentenv.sandbox.protocol import DEFAULT_MAX_OUTPUT, ExecResult, OutputCallback, Snapshot
from agentenv.sandbox.spec import SandboxSpec

log = get_logger(__name__)
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


@functools.cache
def _read_by_engine(reason: str) -> None:
    """Say once per reason that frozen sandboxes are read by the engine."""
    log.info("sandbox.read_by_engine", reason=reason[-300:])


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
        self._executors = Executors(self._new_channel, self._unavailable)
        self._paused = False
        self._frozen_by: FrozenBy = "engine"  # when paused: who thaws it
        self._closed = False
        self._executor_pending = False  # attached while paused: start it on resume
        self._init_pid: int | None = None  # the host pid of its PID 1, once asked

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
        frozen_by = who_froze(box.id, bool(state.get("Paused")))
        if frozen_by is None:
            await box._start_executor()
        else:
            box._paused = box._executor_pending = True
            box._frozen_by = frozen_by
        return box

    async def _start_executor(self) -> None:
        if self.spec.executor == "docker-exec":
            return
        try:
            await self._executors.prime()
        except ExecutorGone as e:
            state = await self._state()
            if state is None or not (state.get("Running") or state.get("Paused")):
                raise await self._unavailable(e) from e  # it stopped under us: not the user
            if self.spec.user:  # the executor may not have started because the user is bad
                try:
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
                except docker.errors.APIError as gone:  # 409 "is not running", say
                    raise await self._unavailable(gone) from gone
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
        try:
            exec_id = await self._engine.run(
                self._engine.api.exec_create,
                self.id,
                EXECUTOR_ARGV,
                stdin=True,
                user=self.spec.user or "",
                workdir=self.spec.workdir,
            )
            sock = await self._engine.run(self._engine.api.exec_start, exec_id, socket=True)
        except docker.errors.APIError as e:  # 409 "is not running": it stopped under us
            raise await self._unavailable(e) from e
        return await ExecutorChannel.open(DockerStream(sock))

    def detach(self) -> None:
        """Let go of the sandbox without removing it (a suspended rollout that another
        handle or process will :meth:`attach` to); this object refuses further calls."""
        self._closed = True
        self._executors.close()

    async def close(self) -> None:
        """Remove the container (and everything running in it). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._executors.close()
        with anyio.CancelScope(shield=True):
            thaw_before_removal(self.id)  # frozen behind the engine's back: let it kill
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
        in the middle and sets ``truncated``. ``user`` (a name or ``uid[:gid]``) runs it as
        another user: the executor drops to it, which needs CAP_SETUID and CAP_SETGID; the
        docker-exec path asks the engine (see :meth:`Sandbox.exec` for the errors)."""
        self._check_usable()
        check_exec_args(cmd, env, timeout)
        if self.exec_mode == "docker-exec":
            if user:
                await self._check_user(user)
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
            if result.exit_code == 126 and isinstance(cmd, list):
                said = result.stderr_bytes.strip()
                if said == docker_exec.CANNOT_EXECUTE:
                    raise PermissionError(errno.EACCES, "Permission denied", cmd[0])
                if user and said.startswith(b"unable to find user"):  # the engine's words
                    raise ExecUserError(
                        f"cannot run as {user!r}: {said.decode(errors='replace')}", user=user
                    )
            return result
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

    async def _check_user(self, user: str) -> None:
        """Refuse, as :class:`ExecUserError`, a user or group name the sandbox does not
        know, before ``docker exec`` is asked (the engine's own refusal is sometimes lost
        from the stream under load). The names are looked up in the container's
        /etc/passwd and /etc/group read by the engine, never by running anything in it."""
        name, _, group = user.partition(":")
        for wanted, table in ((name, "/etc/passwd"), (group, "/etc/group")):
            if not wanted or wanted.isdigit():
                continue
            names = await self._names_in(table)
            if names is not None and wanted not in names:
                kind = "user" if table == "/etc/passwd" else "group"
                raise ExecUserError(
                    f"agentenv: unable to find {kind} {wanted}: no such {kind} in the sandbox",
                    user=user,
                )

    async def _names_in(self, table: str) -> set[str] | None:
        """The names in a colon-separated table file of the sandbox (``None``: unreadable,
        not a regular file, or over 4 MiB: left to the engine to judge)."""

        def fetch() -> bytes | None:
            chunks, _ = self._engine.api.get_archive(self.id, table, chunk_size=1 << 20)
            buf = io.BytesIO()
            try:
                for chunk in chunks:
                    buf.write(chunk)
                    if buf.tell() > 4 << 20:
                        return None
            finally:
                chunks.close()
            buf.seek(0)
            with tarfile.open(fileobj=buf) as tar:
                member = tar.next()
                if member is None or not member.isfile():
                    return None
                file = tar.extractfile(member)
                return file.read() if file is not None else None

        try:
            data = await self._engine.run(fetch)
        except docker.errors.NotFound:
            return set()
        except (docker.errors.APIError, tarfile.TarError):
            return None
        if data is None:
            return None
        return {line.split(b":", 1)[0].decode(errors="replace") for line in data.splitlines()}

    async def _raise_if_stopped(self) -> None:
        error = await self._unavailable(StreamClosed("killed"))
        if isinstance(error, SandboxUnavailable):
            raise error

    async def _unavailable(self, cause: BaseException) -> SandboxError:
        """The error for a failed call (see :func:`explain_failure`)."""

        return await explain_failure(
            self.id,
            cause,
            closed=self._closed,
            paused=self._paused,
            inspect=self._state,
            describe=_describe,
        )

    # -- files -----------------------------------------------------------------------------

    async def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """The file's bytes (see :meth:`Sandbox.read_file`): ``FileNotFoundError``,
        ``IsADirectoryError``, ``PermissionError`` as for a local file; :class:`FileTooLarge`
        past ``max_bytes``, before anything is read."""
        self._check_usable()
        if self.exec_mode == "fast":
            return await self._executors.read_file(path, max_bytes)
        limit = "" if max_bytes is None else str(max_bytes)
        # read at most one byte past the limit: the file may have grown (or been swapped
        # for a link to a bigger one) since its size was taken
        result = await self.exec(
            ["/bin/sh", "-c", _READ, "agentenv-read", path, limit],
            timeout=FILE_GUARD_S,
            max_output=1 << 62 if max_bytes is None else max_bytes + 1,
        )
        if result.timed_out:
            raise SandboxError(f"reading {path} took over {FILE_GUARD_S:g} s (a FIFO?)")
        if max_bytes is not None and len(result.stdout_bytes) > max_bytes:
            raise FileTooLarge(
                f"{path} is larger than {max_bytes} bytes (it grew while read)",
                path=path,
                size=len(result.stdout_bytes),
                limit=max_bytes,
            )
        if result.exit_code == _TOO_LARGE:
            size = result.stderr.strip()
            raise FileTooLarge(
                f"{path} is larger than {max_bytes} bytes ({size})",
                path=path,
                size=int(size) if size.isdigit() else 0,
                limit=max_bytes or 0,
            )
        raise_file_error(result, path, _FILE_ERRNO)
        return result.stdout_bytes

    async def write_file(self, path: str, data: bytes, mode: int | None = None) -> None:
        """Create ``path`` (parents created, renamed into place) or rewrite it in place (see
        :meth:`Sandbox.write_file`)."""
        self._check_usable()
        if self.exec_mode == "fast":
            await self._executors.write_file(path, data, mode)
            return
        wanted = "" if mode is None else f"{mode:o}"
        result = await self.exec(
            ["/bin/sh", "-c", _WRITE, "agentenv-write", path, wanted],
            stdin=data,
            timeout=FILE_GUARD_S,
        )
        if result.timed_out:
            raise SandboxError(f"writing {path} took over {FILE_GUARD_S:g} s (a FIFO?)")
        raise_file_error(result, path, _FILE_ERRNO)

    async def upload(self, src: Path, dest: str) -> None:
        """Copy the host folder ``src``'s contents (or the file ``src``) into the folder
        ``dest``, created if missing."""
        self._check_usable()
        src = Path(src)
        if not src.exists():
            raise FileNotFoundError(2, "no such file or folder to upload", str(src))
        owner = numeric_owner(self.spec.user)
        if self._upload_by_executor():
            with tempfile.TemporaryFile() as file:
                await anyio.to_thread.run_sync(write_tar, file, src, owner)
                file.seek(0)
                await self._executors.untar(file, dest, make=True)
            return
        made = await self.exec(["mkdir", "-p", "--", dest], timeout=60)
        raise_file_error(made, dest, {})

        def send() -> None:
            # Built in an unnamed file and sent from it in chunks, in a worker thread: a
            # big folder would stall the event loop, and must not be held in memory.
            with tempfile.TemporaryFile() as file:
                write_tar(file, src, owner)
                file.seek(0)
                self._engine.api.put_archive(self.id, dest, file)

        try:
            await self._engine.run(send)
        except docker.errors.APIError as e:
            raise await self._unavailable(e) from e

    def _upload_by_executor(self) -> bool:
        # AGENTENV_UPLOADS=engine: the engine's archive upload, as before executors could
        # untar (an operator's way back, and the benchmarks' previous path)
        return (
            self.exec_mode == "fast"
            and untars(self.spec)
            and os.environ.get("AGENTENV_UPLOADS") != "engine"
        )

    async def upload_tar(self, data: bytes | os.PathLike[str], dest: str) -> None:
        """Extract a tar archive (its bytes, or a host tar file's path: sent in chunks) into
        the existing folder ``dest``, keeping every entry inside it: by an executor (see
        :meth:`Executors.untar`), else by the engine."""
        self._check_usable()
        if self._upload_by_executor():
            await self._executors.untar(data, dest)
            return

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
        if await self._read_frozen(path, out, max_bytes):
            return

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

    async def _read_frozen(self, path: str, out: IO[bytes], max_bytes: int | None) -> bool:
        """Read a sandbox this host froze from the host, inside its mount namespace (see
        ``nsop.py``): the engine would start a process of its own per archive (~70 ms of
        CPU, twice this). ``False`` (``out`` left empty) where it cannot: not frozen here,
        ``AGENTENV_DOWNLOADS=engine`` (the operator's way back), or the read failed (not
        root, say: logged once); then the engine reads it."""
        if not (self._paused and self._frozen_by == "cgroup"):
            return False
        if os.environ.get("AGENTENV_DOWNLOADS") == "engine":
            return False
        try:
            if self._init_pid is None:
                info = await self._engine.run(self._engine.api.inspect_container, self.id)
                self._init_pid = int((info.get("State") or {}).get("Pid") or 0)
            left_out = await read_in_namespace(self._init_pid, self.id, path, out, max_bytes)
        except ArchiveTooLarge:
            raise  # the caller's limit: the engine would read as far, to the same end
        except (SandboxError, docker.errors.APIError) as e:
            _read_by_engine(str(e))
            out.seek(0)
            out.truncate()
            return False
        if left_out:  # entries left out (a lease held by a frozen process, say)
            log.info("sandbox.download_left_out", id=self.id[:12], detail=left_out[-500:])
        return True

    # -- freezing and saving ---------------------------------------------------------------

    @property
    def paused(self) -> bool:
        """Whether the sandbox is frozen."""
        return self._paused

    async def pause(self) -> None:
        """Freeze all processes (the cgroup freezer: written from this host where it may, see
        ``SandboxSpec.freezer``, else by the engine): no CPU is used until :meth:`resume`."""
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
        api = self._engine.api
        call = api.pause if want else api.unpause
        try:
            await set_frozen(
                want,
                lambda: self._engine.run(call, self.id),
                self._state,
                freeze_conflict,
            )
        except docker.errors.APIError as e:
            raise await self._unavailable(e) from e

    async def _state(self) -> dict[str, Any] | None:
        """The container's ``State`` (``None``: it is gone)."""
        try:
            info = await self._engine.run(self._engine.api.inspect_container, self.id)
        except docker.errors.NotFound:
            return None
        except EngineUnavailable as e:
            raise SandboxUnavailable(f"sandbox {self.id[:12]}: {e}") from e
        return dict(info.get("State") or {})

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
            info = await self._engine.run(self._engine.api.inspect_container, self.id)
            init_pid = int((info.get("State") or {}).get("Pid") or 0)
        except (SandboxError, OSError, docker.errors.APIError) as e:
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
        conf = {"Labels": snapshot_labels(self.spec, keep_s)}
        try:
            # a paused sandbox is frozen already; the engine's own pause-for-commit would
            # thaw it afterwards if it was frozen through its cgroup
            result = await self._engine.run(
                self._engine.api.commit,
                self.id,
                repository=SNAPSHOT_REPOSITORY,
                tag=tag,
                conf=conf,
                pause=not self._paused,
            )
        except docker.errors.APIError as e:
            raise await self._unavailable(e) from e
        image_id = str(result["Id"])
        spec = self.spec.model_copy(update={"image": image_id, "dockerfile": None})
        return Snapshot(
            ref=image_id,
            backend=self.spec.backend,
            tag=f"{SNAPSHOT_REPOSITORY}:{tag}",
            spec=spec,
            source_id=self.id,
        )


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
    try:
        created = await engine.run(
            api.create_container,
            image,
            command=[],
            entrypoint=KEEPALIVE,
            hostname="sandbox",
            # init and its keep-alive run as root (without capabilities) so that a sandbox
            # user cannot kill them and take the container, and its workdir, down with them;
            # every command runs as the spec's user
            user="0:0" if spec.user else "",
            environment=spec.env,
            working_dir=spec.workdir,
            labels=sandbox_labels(spec),
            host_config=host_config,
            use_config_proxy=False,
        )
    except docker.errors.APIError as e:
        raise SandboxError(f"cannot create a sandbox from {image!r}: {e.explanation or e}") from e
    return str(created["Id"])


# The docker-exec path's file commands (no python3 in the image): plain sh, exit codes the
# host maps to errno (_FILE_ERRNO), so both paths raise the same OSErrors. Unlike the
# executor they leave the mode check to the kernel: with CAP_DAC_OVERRIDE added, root may
# read and write files whose mode denies it here.
_READ = r"""
p=$1
if [ -d "$p" ]; then exit 4; fi
if [ ! -e "$p" ]; then exit 3; fi
if [ ! -f "$p" ]; then exit 5; fi
if [ ! -r "$p" ]; then exit 6; fi
if [ -n "$2" ]; then
  n=$(wc -c < "$p") || exit 6
  if [ "$n" -gt "$2" ]; then echo "$n" >&2; exit 7; fi
  exec head -c "$(($2 + 1))" -- "$p"
fi
exec cat -- "$p"
"""
_WRITE = r"""
p=$1; m=$2
if [ -d "$p" ]; then exit 4; fi
if [ -e "$p" ]; then
  [ -f "$p" ] || exit 5
  [ -w "$p" ] || exit 6
  if [ -n "$m" ]; then chmod "$m" -- "$p" 2>/dev/null || exit 6; fi
  exec cat > "$p"
fi
mkdir -p -- "$(dirname -- "$p")" || exit 1
t="$p.agentenv-$$.tmp"
if cat > "$t" && chmod "${m:-644}" -- "$t" && mv -f -- "$t" "$p"; then exit 0; fi
rm -f -- "$t"; exit 1
"""
_TOO_LARGE = 7
_FILE_ERRNO = {3: errno.ENOENT, 4: errno.EISDIR, 5: errno.EINVAL, 6: errno.EACCES}


def _describe(e: BaseException) -> str:
    if isinstance(e, docker.errors.APIError) and e.explanation:
        return str(e.explanation)
    return f"{type(e).__name__}: {e}"
