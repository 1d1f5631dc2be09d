"""The seam between the container state machine (:class:`~agentenv.sandbox.container.sandbox.
ContainerSandbox`) and an engine: the few primitives an engine must give (:class:`Driver`),
and the optional way to run commands without the executor (:class:`DirectExec`). Docker's
and Podman's drivers live in their backends' folders; everything else is written once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import IO, Any, Protocol

from agentenv.sandbox.channel import ByteStream
from agentenv.sandbox.errors import SandboxError
from agentenv.sandbox.protocol import ExecResult, OutputCallback
from agentenv.sandbox.spec import SandboxSpec

Explain = Callable[[BaseException], Awaitable[SandboxError]]
"""Turns a failed call into the error to raise (the sandbox's ``_unavailable``)."""


class Pacer(Protocol):
    """An ``async with`` that holds a place among a few (an :class:`anyio.CapacityLimiter`)."""

    async def __aenter__(self) -> Any: ...

    async def __aexit__(
        self,
        et: type[BaseException] | None,
        e: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> Any: ...


class DirectExec(Protocol):
    """Commands and file transfers of one sandbox without the in-sandbox executor (an image
    without ``python3``): one engine exec each. Errors come out explained (see
    :data:`Explain`), as the executor's do."""

    async def exec(
        self,
        cmd: str | list[str],
        *,
        timeout: float | None,
        cwd: str | None,
        env: dict[str, str] | None,
        stdin: bytes | None,
        max_output: int,
        on_output: OutputCallback | None,
        user: str | None,
    ) -> ExecResult:
        """Run ``cmd`` as :meth:`Sandbox.exec` does."""
        ...

    async def read_file(self, path: str, max_bytes: int | None) -> bytes:
        """The file's bytes, as :meth:`Sandbox.read_file` gives them."""
        ...

    async def write_file(self, path: str, data: bytes, mode: int | None) -> None:
        """Create or rewrite ``path``, as :meth:`Sandbox.write_file` does."""
        ...

    async def check_user_runs(self, cause: BaseException) -> None:
        """Raise :class:`SandboxError` saying why if the spec's user cannot run a process
        (the likely reason the executor did not start: ``cause``)."""
        ...


class Driver(Protocol):
    """An engine's primitives on its containers, all by container id. A refused call raises
    one of :attr:`failures` (the state machine explains it from the container's state) or
    :class:`~agentenv.sandbox.errors.EngineUnavailable`; a missing container or path is
    said as each primitive's docstring says."""

    name: str
    """The backend's name, for messages."""
    failures: tuple[type[Exception], ...]
    """What a primitive raises when the engine refuses a call."""
    creations: Pacer
    """Paces container creation (many simultaneous starts slow every one of them down)."""
    executor_starts_in_creation: bool
    """Whether a new sandbox's first executor starts within :attr:`creations`."""
    reads_archives: bool
    """Whether :meth:`get_archive` works; if not, every download is read through the
    container's mount namespace (the engine's copy does not see a frozen tmpfs)."""

    def describe(self, error: BaseException) -> str:
        """A failure in words, for the error raised."""
        ...

    def is_freeze_conflict(self, error: Exception) -> bool:
        """Whether a pause/unpause error is one the container's real state may contradict
        (see :func:`~agentenv.sandbox.container.freezing.set_frozen`)."""
        ...

    async def resolve_image(self, spec: SandboxSpec) -> str:
        """Make the spec's image present (built from its Dockerfile if it has one)."""
        ...

    async def create(self, spec: SandboxSpec, image: str) -> str:
        """Create (not start) a container of ``spec`` running :data:`KEEPALIVE`, with the
        security defaults and :func:`sandbox_labels`; its id. :class:`SandboxError` if the
        engine refuses."""
        ...

    async def start(self, container_id: str, spec: SandboxSpec, image: str) -> None:
        """Start it and make it ready for its executor; :class:`SandboxError` if not."""
        ...

    async def inspect(self, container_id: str) -> dict[str, Any] | None:
        """The engine's description of the container (``State``, ``Config``, ``Mounts``,
        ...); ``None`` when it is gone."""
        ...

    async def process_stream(
        self, container_id: str, spec: SandboxSpec, argv: list[str], env: dict[str, str]
    ) -> ByteStream:
        """The stdin and stdout of a new ``argv`` process in the container (the executor's
        ``EXECUTOR_ARGV``, or a stdio MCP server), run as the spec's user in its workdir
        with ``env`` over the container's environment."""
        ...

    def direct_exec(
        self, container_id: str, spec: SandboxSpec, image: str, explain: Explain
    ) -> DirectExec | None:
        """How to run commands in this container without the executor (``None``: no way)."""
        ...

    async def set_paused(self, container_id: str, paused: bool) -> None:
        """Pause or unpause the container through the engine."""
        ...

    async def put_archive(self, container_id: str, data: IO[bytes] | bytes, dest: str) -> None:
        """Extract a tar (a file positioned at its start, or bytes) into the existing
        folder ``dest``; :class:`FileNotFoundError` if there is none."""
        ...

    async def get_archive(
        self, container_id: str, path: str, out: IO[bytes], max_bytes: int | None
    ) -> None:
        """Write the engine's tar of ``path`` to ``out``: :class:`FileNotFoundError` if
        there is none, :class:`ArchiveTooLarge` past ``max_bytes``."""
        ...

    async def commit(
        self, container_id: str, name: str, labels: dict[str, str], *, pause: bool
    ) -> str:
        """Commit the container's filesystem to the image ``name`` (``repository:tag``) with
        ``labels``, pausing it meanwhile if ``pause`` and the engine can; the image's id."""
        ...

    async def cpu_usage_ns(self, container_id: str) -> int | None:
        """CPU time the container used, as the engine counts it (``None``: it cannot)."""
        ...

    async def remove(self, container_id: str) -> None:
        """Remove the container, its processes and volumes; done if it is gone already."""
        ...
