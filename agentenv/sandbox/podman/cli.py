"""Running the ``podman`` command: the Podman backend's only way to its engine (there is no
daemon to talk to). Failures become agentenv's errors here, and nowhere else."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import anyio

from agentenv.sandbox.errors import EngineUnavailable, SandboxError

INSTALL_HINT = (
    "install it with `agentenv doctor --fix --backend podman` (Debian's podman and "
    "catatonit, as root) or `apt-get install podman catatonit`"
)


class NoSuchObject(SandboxError):
    """Podman says the container or image does not exist."""


def podman_path() -> str:
    """Where ``podman`` is; :class:`EngineUnavailable` when it is not installed."""
    found = os.environ.get("AGENTENV_PODMAN") or shutil.which("podman")
    if not found:
        raise EngineUnavailable(f"podman is not installed here: {INSTALL_HINT}")
    return found


def podman_cwd() -> str:
    """The working directory ``podman`` runs in: conmon writes an empty file ``oom`` into
    its caller's working directory when a container's process is OOM-killed, which would
    litter whatever folder the user ran agentenv from."""
    folder = os.path.join(tempfile.gettempdir(), f"agentenv-podman-{os.getuid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def _error(args: list[str], code: int, stderr: bytes) -> SandboxError:
    said = stderr.decode(errors="replace").strip().removeprefix("Error: ")
    if "no such container" in said or "no such image" in said or "image not known" in said:
        return NoSuchObject(said)
    return SandboxError(f"podman {args[0]} failed (exit {code}): {said[-2000:]}")


async def podman(*args: str, input: bytes | None = None, check: bool = True) -> bytes:
    """Run ``podman ARGS`` and return its stdout. Raises :class:`NoSuchObject`,
    :class:`SandboxError` (it failed), :class:`EngineUnavailable` (not installed)."""
    cmd = [podman_path(), *args]
    try:
        done = await anyio.run_process(cmd, input=input, check=False, cwd=podman_cwd())
    except OSError as e:
        raise EngineUnavailable(f"cannot run podman: {e}") from e
    if check and done.returncode != 0:
        raise _error(list(args), done.returncode, done.stderr)
    return done.stdout


def podman_sync(*args: str, check: bool = True) -> bytes:
    """:func:`podman` for blocking code (``gc``)."""
    done = subprocess.run(
        [podman_path(), *args], capture_output=True, check=False, cwd=podman_cwd()
    )
    if check and done.returncode != 0:
        raise _error(list(args), done.returncode, done.stderr)
    return done.stdout
