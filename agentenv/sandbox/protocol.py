"""The seam between sandboxes and everything that uses them: :class:`Sandbox`,
:class:`ExecResult` and :class:`Snapshot`. Backends (see :mod:`agentenv.sandbox.backend`)
implement the protocol; the agent loop, verifiers and runners only ever see this."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from agentenv.sandbox.spec import SandboxSpec

if TYPE_CHECKING:  # the channel imports this module
    from agentenv.sandbox.channel import ByteStream

DEFAULT_MAX_OUTPUT = 512 * 1024
"""Default cap per stream on what ``exec`` returns; head and tail are kept."""

OutputCallback = Callable[[Literal["stdout", "stderr"], bytes], Awaitable[None] | None]
"""Receives output chunks as they arrive, when passed to ``exec(on_output=...)``."""


class ExecResult(BaseModel):
    """What a command did. ``stdout``/``stderr`` decode the raw bytes as UTF-8 (invalid
    bytes replaced); ``stdout_bytes``/``stderr_bytes`` are exact."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    exit_code: int
    stdout_bytes: bytes = b""
    stderr_bytes: bytes = b""
    duration_s: float = 0.0
    timed_out: bool = False
    truncated: bool = False
    oom_killed: bool = False

    @property
    def stdout(self) -> str:
        """Standard output as text."""
        return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        """Standard error as text."""
        return self.stderr_bytes.decode("utf-8", "replace")

    @property
    def ok(self) -> bool:
        """Exited 0 without timing out."""
        return self.exit_code == 0 and not self.timed_out


class Snapshot(BaseModel):
    """A sandbox's filesystem, saved by its backend; ``fork`` starts new sandboxes from it.
    Running processes and memory are not kept (CRIU does not work on these kernels)."""

    ref: str
    """The backend's own reference to it (an image id for Docker and Podman): opaque."""
    backend: str
    """The name of the backend that made it, and only that can fork or remove it."""
    tag: str
    """A name people can read (``agentenv-snapshot:<tag>``)."""
    spec: SandboxSpec
    """The spec sandboxes forked from it get: the source's, starting from ``ref``."""
    source_id: str
    """The id of the sandbox it was taken from."""


@runtime_checkable
class Sandbox(Protocol):
    """An isolated place to run an episode's commands. All methods are async; one sandbox
    per episode. Implementations pass ``agentenv.testing.conformance``."""

    id: str
    """The backend's id for it (a container id): what :meth:`SandboxBackend.attach` takes."""
    spec: SandboxSpec
    """What it was made from."""
    image: str
    """The image it started from, as the backend resolved it (built, pulled, or given)."""

    @property
    def paused(self) -> bool:
        """Whether it is frozen."""
        ...

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
        """Run ``cmd`` (a shell string, or an argv list) and return what it did. A timeout
        kills the command's whole process tree inside the sandbox.

        ``user`` (``name``, ``uid``, ``name:group`` or ``uid:gid``) runs this one command as
        another user: a name is looked up in the sandbox's /etc/passwd (its groups in
        /etc/group) and gets its HOME; a bare uid gets gid = uid. On the fast path this needs
        a sandbox allowed to switch (a root user, CAP_SETUID and CAP_SETGID).

        What could not start is an error, never the command's output: an argv whose program
        is not executable raises ``PermissionError``; a user that does not exist, or that
        the sandbox may not become, :class:`ExecUserError` (nothing ran). A program that
        is not there is exit code 127, as a shell reports it. Also raises
        :class:`SandboxClosed`, :class:`SandboxPaused`, :class:`SandboxUnavailable` (the
        container died), :class:`SandboxError`."""
        ...

    async def stream(self, argv: list[str], *, env: dict[str, str] | None = None) -> ByteStream:
        """Start ``argv`` in the sandbox (as its user, in its workdir, with its environment
        and ``env`` over it) and hand back its stdin and stdout as they flow: a long-lived
        process spoken to through its pipes (a stdio MCP server), over the engine's exec
        with stdin attached, so the sandbox needs no network. The process is frozen with
        the sandbox and goes on after :meth:`resume`; closing the stream closes its stdin.
        A program that cannot start is seen as the stream ending, with the engine's reason
        in its ``stderr``. Raises :class:`SandboxClosed`, :class:`SandboxPaused`,
        :class:`SandboxUnavailable`."""
        ...

    async def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """The file's bytes. ``FileNotFoundError``, ``IsADirectoryError`` and
        ``PermissionError`` as for a local file, but a file whose mode denies its reader read
        access is refused even to a root that could override it; ``OSError`` for what is not
        a regular file (a FIFO never hangs the call). Past ``max_bytes`` it raises
        :class:`FileTooLarge`, checked in the sandbox before anything is transferred."""
        ...

    async def write_file(self, path: str, data: bytes, mode: int | None = None) -> None:
        """Create a file (parents created; written aside and renamed into place, mode
        ``mode`` or 0644) or rewrite an existing one in place, as ``open(path, "w")`` does:
        through symlinks, keeping its owner and mode (``mode`` given: set). A file whose mode
        marks it read-only for the writer raises ``PermissionError`` (even for a root that
        could override it), a folder ``IsADirectoryError``, anything else not a regular
        file ``OSError``."""
        ...

    async def upload(self, src: Path, dest: str) -> None:
        """Copy a host folder's contents (or one file) into ``dest``."""
        ...

    async def download(self, path: str) -> bytes:
        """A tar archive of ``path`` (a file or a folder); works while paused."""
        ...

    async def download_to(
        self, path: str, file: os.PathLike[str], *, max_bytes: int | None = None
    ) -> None:
        """Write a tar archive of ``path`` to the host ``file``, in chunks (nothing like its
        size is held in memory); works while paused. Raises :class:`ArchiveTooLarge` once
        the archive passes ``max_bytes``."""
        ...

    async def upload_tar(self, data: bytes | os.PathLike[str], dest: str) -> None:
        """Extract a tar archive into the folder ``dest`` (which must exist): ``data`` is
        its bytes, or the path of a tar file on the host, sent in chunks."""
        ...

    async def pause(self) -> None:
        """Freeze every process: no CPU is used until ``resume``."""
        ...

    async def resume(self) -> None:
        """Thaw a paused sandbox."""
        ...

    async def snapshot(self, tag: str | None = None, *, keep_s: float | None = None) -> Snapshot:
        """Save the filesystem so that ``fork`` can start sandboxes from it; with ``keep_s``
        it outlives this process for that long."""
        ...

    async def cpu_usage_ns(self) -> int:
        """CPU time used by everything in the sandbox so far, in nanoseconds."""
        ...

    def detach(self) -> None:
        """Let go of the sandbox without removing it (another handle or process will
        attach to it); this object refuses further calls."""
        ...

    async def close(self) -> None:
        """Remove the sandbox. Idempotent."""
        ...

    async def __aenter__(self) -> Sandbox:
        """``async with await create(spec) as box:`` closes it when the block ends."""
        ...

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close it, whatever ended the block (cancellation included)."""
        ...
