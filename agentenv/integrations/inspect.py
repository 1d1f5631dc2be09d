"""agentenv as an Inspect AI sandbox provider: ``sandbox="agentenv"`` (or ``("agentenv",
config)``) in an Inspect task runs each sample in an agentenv sandbox.

Installed with ``pip install 'agentenv[inspect]'``, which registers this module under Inspect's
``inspect_ai`` entry-point group: Inspect imports it when it looks a sandbox type up, and the
import registers the provider (``@sandboxenv(name="agentenv")``) and a hook that pauses a
sample's sandboxes while its model generates. This is the only module of agentenv that
imports Inspect, and ``import agentenv`` does not import it.

It stands on agentenv's sandbox seam only (:func:`agentenv.sandbox.create` and the
:class:`~agentenv.sandbox.Sandbox` protocol), so any agentenv backend (Docker, Podman, a
registered one) serves Inspect. ``docs/inspect.md`` has the config mapping and what is not
supported.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
from pathlib import Path, PurePosixPath
from typing import Any, Literal, overload

import anyio
from inspect_ai.hooks import BeforeModelGenerate, Hooks, hooks
from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxConnection,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    SandboxUnavailableError,
    SandboxUserUnsupportedError,
    sandboxenv,
)
from inspect_ai.util._sandbox.context import sandbox_environments_context_var
from pydantic import BaseModel

from agentenv.sandbox import (
    ExecUserError,
    FileTooLarge,
    Sandbox,
    SandboxClosed,
    SandboxSpec,
    SandboxUnavailable,
    create,
    get_backend,
)
from agentenv.sandbox.gc import collect
from agentenv.sandbox.images import BASE_IMAGE

__all__ = ["DEFAULT_CAPS", "AgentenvSandboxEnvironment", "default_spec", "spec_for"]

DEFAULT_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID")
"""Capabilities the default sandbox's root keeps (every other one is dropped), each for what
Inspect asks of a root sandbox: SETUID and SETGID for ``exec(user=...)`` (and Inspect's
root-access probe); CHOWN, FOWNER and DAC_OVERRIDE for a root that administers its own
sandbox as Inspect's tasks expect of root (``adduser`` chowns a new home, sets its mode and
copies files into it). Left out, among others: NET_RAW and NET_BIND_SERVICE (there is no
network), KILL (root signals its own processes without it), MKNOD, SYS_CHROOT, SETFCAP,
SETPCAP, AUDIT_WRITE (Docker's other defaults, which no Inspect sandbox operation needs).
``no-new-privileges`` still holds, so no setuid binary can add any back."""

LABEL_TASK = "inspect_ai.task"
"""The label each sandbox carries naming its Inspect task (next to agentenv's own)."""

_COMPOSE = re.compile(r"(^|[-.])compose[^/]*\.ya?ml$|^docker-compose[^/]*\.ya?ml$")


def default_spec() -> SandboxSpec:
    """The sandbox a task gets without a config: agentenv's offline base image, as root (as
    Inspect's sandboxes are) with :data:`DEFAULT_CAPS`, and agentenv's other defaults: no
    network, no new privileges, bounded pids, memory and CPU, workdir ``/workspace``."""
    return SandboxSpec(image=BASE_IMAGE, cap_add=DEFAULT_CAPS)


def spec_for(config: SandboxEnvironmentConfigType | None) -> SandboxSpec:
    """The :class:`SandboxSpec` for an Inspect sandbox config: ``None`` (the default spec), a
    :class:`SandboxSpec` (used as given), a ``Dockerfile`` path (the default spec, its
    image built from that file, context its folder) or a ``.json`` file of spec fields.
    Compose files are refused, naming the file."""
    if config is None:
        return default_spec()
    if isinstance(config, SandboxSpec):
        return config
    if isinstance(config, str):
        path = Path(config).expanduser()
        name = path.name.lower()
        if _COMPOSE.search(name):
            raise ValueError(
                f"sandbox config {config!r}: agentenv runs one container per sample and does "
                "not read compose files; give a Dockerfile or an agentenv SandboxSpec"
            )
        if not path.is_file():
            raise FileNotFoundError(2, "no such sandbox config file", str(path))
        if name.endswith(".json"):
            return SandboxSpec.model_validate_json(path.read_text())
        if "dockerfile" in name:
            path = path.resolve()
            folder = re.sub(r"[^a-z0-9_.-]+", "-", path.parent.name.lower()).strip("-.")
            digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
            image = f"agentenv-inspect/{folder or 'task'}:{digest}"
            return default_spec().model_copy(update={"image": image, "dockerfile": path})
        raise ValueError(
            f"sandbox config {config!r}: expected a Dockerfile, a .json SandboxSpec or an "
            "agentenv SandboxSpec"
        )
    if isinstance(config, BaseModel):
        raise TypeError(
            f"sandbox config of type {type(config).__name__}: agentenv takes a SandboxSpec "
            "(compose configurations are not supported)"
        )
    raise TypeError(f"sandbox config {config!r}: expected a SandboxSpec or a file path")


# Images being built for a spec: the first sample builds, the others wait for it instead of
# building the same image at once.
_built: set[str] = set()
_build_lock = anyio.Lock()


@sandboxenv(name="agentenv")
class AgentenvSandboxEnvironment(SandboxEnvironment):
    """One Inspect sandbox environment: one agentenv :class:`~agentenv.sandbox.Sandbox`.

    Paused while the sample's model generates (the ``agentenv`` hook) and resumed by the
    next call that needs it; removed at sample cleanup, and collected by ``agentenv gc``
    (it carries agentenv's labels) if the process dies first."""

    def __init__(self, sandbox: Sandbox) -> None:
        super().__init__()
        self.sandbox = sandbox
        """The agentenv sandbox behind this environment."""
        self._lock = anyio.Lock()

    # -- lifecycle -----------------------------------------------------------------------

    @classmethod
    def config_files(cls) -> list[str]:
        """Files Inspect finds next to a task: a Dockerfile (compose files are not ours)."""
        return ["Dockerfile"]

    @classmethod
    def is_docker_compatible(cls) -> bool:
        """No: a docker-compatible provider is handed compose configurations."""
        return False

    @classmethod
    def default_concurrency(cls) -> int | None:
        """Sandboxes at once by default: two per CPU, as Inspect's Docker provider."""
        return 2 * (os.cpu_count() or 1)

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        """A :class:`SandboxSpec` from its fields (as Inspect stores it in an eval log)."""
        return SandboxSpec.model_validate(config)

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        """Check the config early: a bad one fails the task before any sample starts."""
        spec_for(config)

    @classmethod
    async def sample_init(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        metadata: dict[str, str],
    ) -> dict[str, SandboxEnvironment]:
        """Create the sample's sandbox (its image resolved or built once per process)."""
        spec = spec_for(config)
        spec = spec.model_copy(update={"labels": {**spec.labels, LABEL_TASK: task_name[:200]}})
        key = f"{spec.backend}:{spec.image}"
        if key in _built:
            box = await create(spec)
        else:
            async with _build_lock:
                box = await create(spec)
                _built.add(key)
        return {"default": cls(box)}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        """Remove the sample's sandboxes (interrupted or not: nothing is kept)."""
        for env in environments.values():
            if isinstance(env, cls):
                await env.sandbox.close()

    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        """``inspect sandbox cleanup agentenv [ID]``: remove that sandbox (one of agentenv's:
        its id, or an unambiguous prefix of at least 6 characters), or, without an ID, what
        ``agentenv gc`` removes (sandboxes whose process is gone). Raises ``ValueError``
        for an ID that names no sandbox or several."""
        backend = get_backend()

        def clean() -> None:
            if id is None:
                collect(backend)
                return
            if len(id) < 6:
                raise ValueError(f"sandbox id {id!r}: give at least 6 characters of it")
            rows = [r for r in backend.leftovers() if r.kind == "sandbox" and r.id.startswith(id)]
            if len(rows) != 1:
                found = "no agentenv sandbox" if not rows else f"{len(rows)} sandboxes"
                raise ValueError(f"sandbox id {id!r} names {found}")
            backend.remove(rows[0])

        await anyio.to_thread.run_sync(clean)

    # -- commands and files --------------------------------------------------------------

    async def _ready(self) -> Sandbox:
        """The sandbox, resumed if the model's turn paused it."""
        if self.sandbox.paused:
            async with self._lock:
                if self.sandbox.paused:
                    await self.sandbox.resume()
        return self.sandbox

    async def pause(self) -> None:
        """Freeze the sandbox (the model is thinking); the next call resumes it."""
        async with self._lock:
            await self.sandbox.pause()

    def _path(self, file: str) -> str:
        path = PurePosixPath(file)
        if not path.is_absolute():
            path = PurePosixPath(self.sandbox.spec.workdir) / path
        return str(path)

    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        """Run ``cmd`` (its program found through the sandbox's PATH by the executor: no
        wrapper of ours runs before it). A timeout kills the command's whole tree and raises
        ``TimeoutError``; output past Inspect's limit raises ``OutputLimitExceededError``
        with what was kept (head and tail). ``timeout_retry`` and ``concurrency`` do not
        apply: a timeout here is the command's, never a daemon's hang."""
        limit = SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE
        stdin = input.encode() if isinstance(input, str) else input
        try:
            box = await self._ready()
            result = await box.exec(
                list(cmd),
                timeout=float(timeout) if timeout is not None else None,
                cwd=self._path(cwd) if cwd is not None else None,
                env=env,
                stdin=stdin,
                max_output=limit,
                user=user,
            )
        except ExecUserError as e:
            if e.reason == "not_permitted":
                raise SandboxUserUnsupportedError(str(e)) from e
            # no such user: the command's failure, as `docker exec --user` reports it
            return ExecResult(success=False, returncode=126, stdout="", stderr=f"{e}\n")
        except (SandboxUnavailable, SandboxClosed) as e:
            raise SandboxUnavailableError(str(e)) from e
        if result.timed_out:
            error = TimeoutError(f"Command timed out after {timeout} seconds")
            partial = result.stdout + result.stderr
            if partial:
                error.truncated_output = partial  # type: ignore[attr-defined]
            raise error
        if result.truncated:
            raise OutputLimitExceededError(
                SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE_STR,
                truncated_output=result.stdout + result.stderr,
            )
        return ExecResult(
            success=result.exit_code == 0,
            returncode=result.exit_code,
            stdout=result.stdout,
            stderr=result.stderr,
        )

    async def write_file(self, file: str, contents: str | bytes) -> None:
        """Write a file (relative to the workdir; parents made). ``PermissionError`` for a
        read-only file, ``IsADirectoryError`` for a folder."""
        data = contents.encode() if isinstance(contents, str) else contents
        box = await self._ready()
        await box.write_file(self._path(file), data)

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        """Read a file (relative to the workdir); past Inspect's read limit it raises
        ``OutputLimitExceededError`` having transferred nothing (the size is checked in
        the sandbox). Text is UTF-8 with its newlines as they are."""
        box = await self._ready()
        try:
            data = await box.read_file(
                self._path(file), max_bytes=SandboxEnvironmentLimits.MAX_READ_FILE_SIZE
            )
        except FileTooLarge as e:
            raise OutputLimitExceededError(
                SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR, truncated_output=None
            ) from e
        return data.decode("utf-8") if text else data

    async def connection(self, *, user: str | None = None) -> SandboxConnection:
        """A shell in the sandbox, for Docker and Podman sandboxes (``docker exec -it``)."""
        engine = self.sandbox.spec.backend
        if engine not in ("docker", "podman"):
            raise NotImplementedError(f"no connection command for the {engine!r} backend")
        command = [engine, "exec", "-it", *(["--user", user] if user else [])]
        command += [self.sandbox.id, "bash", "-l"]
        return SandboxConnection(
            type="agentenv", command=shlex.join(command), container=self.sandbox.id
        )

    def default_polling_interval(self) -> float:
        """Commands cost about a millisecond here: poll as often as Inspect's Docker."""
        return 0.2


@hooks(name="agentenv", description="Pauses agentenv sandboxes while the model generates")
class PauseWhileGenerating(Hooks):
    """Before a sample's model call, freeze that sample's agentenv sandboxes: nothing in them
    uses CPU while the model thinks. The next sandbox call (a tool, the scorer) resumes
    them; Inspect has no hook after the call, and needs none."""

    async def on_before_model_generate(self, data: BeforeModelGenerate) -> None:
        """Pause the current sample's agentenv sandboxes (none outside a sample)."""
        environments = sandbox_environments_context_var.get(None) or {}
        for proxy in environments.values():
            try:  # Inspect hands samples its proxy (which records events) around ours
                env = proxy.as_type(AgentenvSandboxEnvironment)
            except TypeError:
                continue
            if not env.sandbox.paused:
                # gone or closed: the next call says so, where it can be handled
                with contextlib.suppress(SandboxUnavailable, SandboxClosed):
                    await env.pause()
