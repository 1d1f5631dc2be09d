"""``ContainerSandbox``: the :class:`~agentenv.sandbox.protocol.Sandbox` protocol over any
container engine's :class:`~agentenv.sandbox.container.driver.Driver`, written once.

Lifecycle: resolve the image, create the container with the security defaults (behind the
engine's creation limiter), start it, then start the in-sandbox executor. Commands go to the
executor (fast path) or, for images without ``python3`` where the engine has a way
(:class:`~agentenv.sandbox.container.driver.DirectExec`), to one engine exec each.
``pause``/``resume`` use the cgroup freezer (written directly where this host may, else by
the engine); ``recycle`` makes a used sandbox as new; ``snapshot`` commits the filesystem
to an image that :func:`fork` starts new sandboxes from.
"""

from __future__ import annotations

import functools
import io
import os
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal, Self

import anyio

from agentenv.log import get_logger
from agentenv.sandbox import cgroup
from agentenv.sandbox.channel import EXECUTOR_ARGV, ByteStream, ExecutorChannel, ExecutorGone
from agentenv.sandbox.container import namespace
from agentenv.sandbox.container.config import snapshot_labels
from agentenv.sandbox.container.driver import Driver
from agentenv.sandbox.container.failure import explain_failure
from agentenv.sandbox.container.freezing import (
    FrozenBy,
    freeze,
    set_frozen,
    thaw,
    thaw_before_removal,
    who_froze,
)
from agentenv.sandbox.container.renew import recycle, writable_mounts
from agentenv.sandbox.errors import (
    ArchiveTooLarge,
    EngineUnavailable,
    ExecUserError,
    SandboxClosed,
    SandboxError,
    SandboxPaused,
    SandboxUnavailable,
)
from agentenv.sandbox.executors import Executors, check_exec_args, untars
from agentenv.sandbox.files import numeric_owner, raise_file_error, write_tar
from agentenv.sandbox.labels import OWNER, SNAPSHOT_REPOSITORY
from agentenv.sandbox.protocol import DEFAULT_MAX_OUTPUT, ExecResult, OutputCallback, Snapshot
from agentenv.sandbox.spec import SandboxSpec

log = get_logger(__name__)


@functools.cache
def _read_by_engine(reason: str) -> None:
    """Say once per reason that frozen sandboxes are read by the engine."""
    log.info("sandbox.read_by_engine", reason=reason[-300:])


def _alive(state: dict[str, Any] | None) -> bool:
    # Podman: a paused container is not running; Docker: it is both
    return state is not None and bool(state.get("Running") or state.get("Paused"))


def _init_pid(info: dict[str, Any] | None) -> int:
    return int(((info or {}).get("State") or {}).get("Pid") or 0)


class ContainerSandbox:
    """A sandbox in a container of the engine ``driver`` drives. Made by a backend's
    subclass (the Docker backend's ``create``, say); an async context manager that removes
    it on exit, including on cancellation and Ctrl-C."""

    def __init__(self, driver: Driver, container_id: str, spec: SandboxSpec, image: str):
        self._driver = driver
        self.id = container_id
        self.spec = spec
        self.image = image
        self.exec_mode: Literal["fast", "docker-exec"] = "docker-exec"
        self._direct = driver.direct_exec(container_id, spec, image, self._unavailable)
        if self._direct is None:
            self.exec_mode = "fast"  # the only way it has
        self._executors = Executors(self._new_channel, self._unavailable)
        self._paused = False
        self._frozen_by: FrozenBy = "engine"  # when paused: who thaws it
        self._closed = False
        self._executor_pending = False  # attached while paused: start it on resume
        self._init_pid: int | None = None  # the host pid of its PID 1, once asked

    # -- lifecycle -------------------------------------------------------------------------

    @classmethod
    def _made(cls, driver: Driver, container_id: str, spec: SandboxSpec, image: str) -> Self:
        """A handle on a container the driver made or found (a backend's subclass keeps
        its own constructor's arguments)."""
        return cls(driver, container_id, spec, image)

    @classmethod
    async def _create(cls, driver: Driver, spec: SandboxSpec) -> Self:
        """Create and start a sandbox; the caller must ``close()`` it."""
        image = await driver.resolve_image(spec)
        started = time.monotonic()
        with anyio.CancelScope(shield=True):
            # Shielded: a cancellation between create and return would leak the container.
            async with driver.creations:
                container_id = await driver.create(spec, image)
                box = cls._made(driver, container_id, spec, image)
                await box._closing_on_failure(driver.start(container_id, spec, image))
                if driver.executor_starts_in_creation:
                    await box._closing_on_failure(box._start_executor())
            if not driver.executor_starts_in_creation:
                await box._closing_on_failure(box._start_executor())
        log.debug(
            "sandbox.created", id=box.id[:12], mode=box.exec_mode, s=time.monotonic() - started
        )
        return box

    async def _closing_on_failure(self, step: Awaitable[None]) -> None:
        try:
            await step
        except BaseException:
            await self.close()
            raise

    @classmethod
    async def _attach(cls, driver: Driver, container_id: str, spec: SandboxSpec) -> Self:
        """Take over a sandbox another process (or an earlier part of this one) created,
        running or paused, e.g. to resume a suspended rollout. Refuses containers without
        agentenv's labels; a stopped or missing one is :class:`SandboxUnavailable`."""
        info = await driver.inspect(container_id)
        if info is None:
            raise SandboxUnavailable(f"sandbox {container_id[:12]} no longer exists")
        config = info.get("Config") or {}
        if OWNER not in (config.get("Labels") or {}):
            raise SandboxError(f"container {container_id[:12]} is not an agentenv sandbox")
        state = info.get("State") or {}
        if not _alive(state):
            raise SandboxUnavailable(
                f"sandbox {container_id[:12]} is {state.get('Status', 'not running')}"
            )
        # Podman names the image it was made from apart; Docker only in its Config
        image = info.get("ImageName") or config.get("Image") or spec.image
        box = cls._made(driver, str(info["Id"]), spec, str(image))
        frozen_by = who_froze(box.id, bool(state.get("Paused")))
        if frozen_by is None:
            await box._start_executor()
        else:
            box._paused = box._executor_pending = True
            box._frozen_by = frozen_by
        return box

    async def _start_executor(self) -> None:
        if self.spec.executor == "docker-exec" and self._direct is not None:
            return
        try:
            await self._executors.prime()
        except ExecutorGone as e:
            await self._no_executor(e)
            log.info(
                "sandbox.fallback", id=self.id[:12], reason="no python3: docker exec per command"
            )
            return
        self.exec_mode = "fast"

    async def _no_executor(self, e: ExecutorGone) -> None:
        """Raise why the executor could not start, unless commands may go another way."""
        said = e.stderr.decode(errors="replace").strip()
        if self._direct is None:  # no other way: the reason is the image's or the user's
            if self.spec.user and "unable to find user" in said.lower():
                raise SandboxError(
                    f"image {self.image!r}: {said}; a user name must be in the image's "
                    "/etc/passwd, a numeric uid[:gid] need not"
                ) from e
            raise SandboxError(
                f"image {self.image!r} cannot run the executor (it needs python3): {said or e}"
            ) from e
        if not _alive(await self._state()):
            raise await self._unavailable(e) from e  # it stopped under us: not the user
        if self.spec.user:  # the executor may not have started because the user is bad
            await self._direct.check_user_runs(e)
        if self.spec.executor == "fast":
            raise SandboxError(
                f"image {self.image!r} cannot run the fast executor (it needs python3): "
                f"{said or e}; use executor='auto'"
            ) from e

    async def _new_channel(self) -> ExecutorChannel:
        try:
            stream = await self._driver.process_stream(self.id, self.spec, EXECUTOR_ARGV, {})
        except self._driver.failures as e:  # "is not running": it stopped under us
            raise await self._unavailable(e) from e
        return await ExecutorChannel.open(stream)

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
                await self._driver.remove(self.id)
            except self._failures_or(EngineUnavailable) as e:
                # Left for `agentenv gc` (it is labelled); closing must not fail an episode.
                log.warning("sandbox.close_failed", id=self.id[:12], error=str(e))

    async def __aenter__(self) -> Self:
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

    async def stream(self, argv: list[str], *, env: dict[str, str] | None = None) -> ByteStream:
        """Start ``argv`` with its stdin and stdout streamed (see :meth:`Sandbox.stream`)."""
        self._check_usable()
        check_exec_args(argv, env, None)
        try:
            return await self._driver.process_stream(self.id, self.spec, list(argv), env or {})
        except self._driver.failures as e:  # "is not running": it stopped under us
            raise await self._unavailable(e) from e

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
        direct path asks the engine (see :meth:`Sandbox.exec` for the errors)."""
        self._check_usable()
        check_exec_args(cmd, env, timeout)
        run = run_fast = self._executors.exec
        if self.exec_mode != "fast" and self._direct is not None:
            run = self._direct.exec
        args: dict[str, Any] = dict(timeout=timeout, cwd=cwd, env=env, stdin=stdin)
        args |= dict(max_output=max_output, on_output=on_output, user=user)
        try:
            return await run(cmd, **args)
        except ExecUserError as e:
            # a sandbox made to switch users (root, CAP_SETUID/SETGID in its spec) whose
            # executor still may not: an image whose USER is not root leaves even a root
            # exec's capabilities empty. The engine can, and nothing ran, so the command goes
            # that way. Any other sandbox (the agent's) keeps refusing
            if e.reason != "not_permitted" or not self._may_switch() or run != run_fast:
                raise
            assert self._direct is not None
            return await self._direct.exec(cmd, **args)

    def _may_switch(self) -> bool:
        """Whether this sandbox was made to run commands as other users (root by default,
        with the capabilities to drop), and the engine can do it for it."""
        caps = {c.upper().removeprefix("CAP_") for c in self.spec.cap_add}
        root = (self.spec.user or "").split(":")[0] in ("0", "root")
        return root and {"SETUID", "SETGID"} <= caps and self._direct is not None

    def _failures_or(self, *more: type[Exception]) -> tuple[type[Exception], ...]:
        """The driver's failures and ``more``: what an ``except`` that handles both names."""
        return (*self._driver.failures, *more)

    async def _unavailable(self, cause: BaseException) -> SandboxError:
        """The error for a failed call (see :func:`explain_failure`)."""
        return await explain_failure(
            self.id,
            cause,
            closed=self._closed,
            paused=self._paused,
            inspect=self._state,
            describe=self._driver.describe,
        )

    # -- files -----------------------------------------------------------------------------

    async def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """The file's bytes (see :meth:`Sandbox.read_file`): ``FileNotFoundError``,
        ``IsADirectoryError``, ``PermissionError`` as for a local file; :class:`FileTooLarge`
        past ``max_bytes``, before anything is read."""
        self._check_usable()
        if self.exec_mode != "fast" and self._direct is not None:
            return await self._direct.read_file(path, max_bytes)
        return await self._executors.read_file(path, max_bytes)

    async def write_file(self, path: str, data: bytes, mode: int | None = None) -> None:
        """Create ``path`` (parents created, renamed into place) or rewrite it in place (see
        :meth:`Sandbox.write_file`)."""
        self._check_usable()
        if self.exec_mode != "fast" and self._direct is not None:
            await self._direct.write_file(path, data, mode)
            return
        await self._executors.write_file(path, data, mode)

    def _upload_by_executor(self) -> bool:
        # AGENTENV_UPLOADS=engine: the engine's archive upload, as before executors could
        # untar (an operator's way back, and the benchmarks' previous path)
        return (
            self.exec_mode == "fast"
            and untars(self.spec)
            and os.environ.get("AGENTENV_UPLOADS") != "engine"
        )

    async def upload(self, src: Path, dest: str) -> None:
        """Copy the host folder ``src``'s contents (or the file ``src``) into the folder
        ``dest``, created if missing."""
        self._check_usable()
        src = Path(src)
        if not src.exists():
            raise FileNotFoundError(2, "no such file or folder to upload", str(src))
        by_executor = self._upload_by_executor()
        if not by_executor:
            made = await self.exec(["mkdir", "-p", "--", dest], timeout=60)
            raise_file_error(made, dest, {})
        # Built in an unnamed file and sent from it in chunks, in a worker thread: a big
        # folder would stall the event loop, and must not be held in memory.
        with tempfile.TemporaryFile() as file:
            await anyio.to_thread.run_sync(write_tar, file, src, numeric_owner(self.spec.user))
            file.seek(0)
            if by_executor:
                await self._executors.untar(file, dest, make=True)
            else:
                await self._put_archive(file, dest)

    async def upload_tar(self, data: bytes | os.PathLike[str], dest: str) -> None:
        """Extract a tar archive (its bytes, or a host tar file's path: sent in chunks) into
        the existing folder ``dest``, keeping every entry inside it: by an executor (see
        :meth:`Executors.untar`), else by the engine."""
        self._check_usable()
        if self._upload_by_executor():
            await self._executors.untar(data, dest)
            return
        if isinstance(data, bytes):
            await self._put_archive(data, dest)
            return
        with open(data, "rb") as file:
            await self._put_archive(file, dest)

    async def _put_archive(self, data: IO[bytes] | bytes, dest: str) -> None:
        try:
            await self._driver.put_archive(self.id, data, dest)
        except self._driver.failures as e:
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
        if not self._driver.reads_archives:
            await self._read_in_namespace(path, out, max_bytes)
            return
        if await self._read_frozen(path, out, max_bytes):
            return
        try:
            await self._driver.get_archive(self.id, path, out, max_bytes)
        except self._driver.failures as e:
            raise await self._unavailable(e) from e

    async def _read_in_namespace(self, path: str, out: IO[bytes], max_bytes: int | None) -> None:
        """Read through the container's mount namespace (see ``nsop.py``), the only way an
        engine without archives has (its copy does not see a frozen tmpfs workdir)."""
        try:
            left_out = await namespace.read_in_namespace(
                await self._pid(), self.id, path, out, max_bytes
            )
        except ArchiveTooLarge:
            raise  # the caller's limit, not the sandbox's failure
        except self._failures_or(SandboxError) as e:
            raise await self._unavailable(e) from e
        if left_out:  # entries left out (a lease held by a frozen process, say)
            log.info("sandbox.download_left_out", id=self.id[:12], detail=left_out[-500:])

    async def _pid(self) -> int:
        """The host pid of the container's PID 1 (:class:`SandboxError`: it has none)."""
        pid = _init_pid(await self._driver.inspect(self.id))
        if pid <= 0:
            raise SandboxError("the container has no process")
        return pid

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
                self._init_pid = await self._pid()
            read = namespace.read_in_namespace
            left_out = await read(self._init_pid, self.id, path, out, max_bytes)
        except ArchiveTooLarge:
            raise  # the caller's limit: the engine would read as far, to the same end
        except self._failures_or(SandboxError) as e:
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
        try:
            await set_frozen(
                want,
                lambda: self._driver.set_paused(self.id, want),
                self._state,
                self._driver.is_freeze_conflict,
            )
        except self._driver.failures as e:
            raise await self._unavailable(e) from e

    async def _state(self) -> dict[str, Any] | None:
        """The container's ``State`` (``None``: it is gone)."""
        try:
            info = await self._driver.inspect(self.id)
        except self._failures_or(EngineUnavailable) as e:
            raise SandboxUnavailable(f"sandbox {self.id[:12]}: {e}") from e
        return None if info is None else dict(info.get("State") or {})

    async def recycle(self) -> bool:
        """Make the sandbox as a new one of its spec would be, for another episode (see
        :func:`~agentenv.sandbox.container.renew.recycle`): ``True`` if it now is, running;
        ``False`` if it cannot be (not read-only, not frozen here, something left), and
        then the caller closes it. Only for a sandbox whose untrusted code ran unprivileged:
        a root process could have tampered with the keep-alive that is kept."""
        if self._closed or (self._paused and self._frozen_by != "cgroup"):
            return False
        self._executors.close()
        self._executors = Executors(self._new_channel, self._unavailable)
        self._executor_pending = False
        try:
            info = await self._driver.inspect(self.id)
            if info is None:
                raise SandboxUnavailable(f"sandbox {self.id[:12]}: its container was removed")
        except self._failures_or(SandboxError, OSError) as e:
            log.info("sandbox.recycle_failed", id=self.id[:12], error=str(e))
            return False
        self._paused = False  # the kill thaws it (or, failing, leaves it to be closed)
        ok = await recycle(
            self.id,
            self.spec,
            _init_pid(info),
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
            usage = await self._driver.cpu_usage_ns(self.id)
        except self._driver.failures as e:
            raise await self._unavailable(e) from e
        if usage is None:
            raise SandboxError(
                f"the {self._driver.name} backend reads CPU use from the host's cgroups only"
            )
        return usage

    async def snapshot(self, tag: str | None = None, *, keep_s: float | None = None) -> Snapshot:
        """Commit the filesystem to an image (labelled, collectable) for :func:`fork`.

        By default ``agentenv gc`` may remove it once this process is gone; with ``keep_s``
        it outlives the process (kept results) and only its expiry, ``keep_s`` from now,
        lets gc remove it."""
        if self._closed:
            raise SandboxClosed(f"sandbox {self.id[:12]} is closed")
        tag = tag or f"{self.id[:12]}-{int(time.time() * 1000)}"
        name = f"{SNAPSHOT_REPOSITORY}:{tag}"
        labels = snapshot_labels(self.spec, keep_s)
        try:
            # a paused sandbox is frozen already; the engine's own pause-for-commit would
            # thaw it afterwards if it was frozen through its cgroup
            image_id = await self._driver.commit(self.id, name, labels, pause=not self._paused)
        except self._driver.failures as e:
            raise await self._unavailable(e) from e
        spec = self.spec.model_copy(update={"image": image_id, "dockerfile": None})
        return Snapshot(
            ref=image_id, backend=self.spec.backend, tag=name, spec=spec, source_id=self.id
        )
