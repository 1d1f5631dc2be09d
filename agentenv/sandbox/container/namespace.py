"""Work on a container's files from the host, inside its mount namespace (``nsop.py``, run
as host root): reading a frozen sandbox's files, and laying out the folders an engine leaves
unmade. Nothing runs in the sandbox for either, and no process in it gets a privilege."""

from __future__ import annotations

import sys
import tempfile
from typing import IO

import anyio

from agentenv import guest
from agentenv.sandbox.errors import ArchiveTooLarge, SandboxError
from agentenv.sandbox.files import numeric_owner
from agentenv.sandbox.spec import SandboxSpec

NSOP = [sys.executable, "-I", "-S", guest.path("nsop")]
"""Runs ``guest/nsop.py`` (work on a container's files from the host, inside its mount namespace)
with this Python: add the operation and its arguments."""
_READ_GUARD_S = 900.0  # reading a bounded workdir takes less; more means something hangs


async def read_in_namespace(
    pid: int, sandbox_id: str, path: str, out: IO[bytes], max_bytes: int | None
) -> str:
    """Write a tar of ``path`` (under its own name, as the engines give it) to ``out``, read
    by host root inside the mount namespace of the sandbox's PID 1 ``pid`` (``nsop.py``):
    for a frozen sandbox, whose processes cannot change it meanwhile. Returns what was left
    out (a file a frozen process holds a lease on), empty if nothing. Raises
    :class:`FileNotFoundError` (no ``path``), :class:`ArchiveTooLarge` (past ``max_bytes``,
    reading stops) and :class:`SandboxError` (the read failed or took over 15 minutes)."""
    written = 0
    # stderr to a file: a pipe nobody reads while stdout is read would fill and stall it
    with tempfile.TemporaryFile() as errors:
        argv = [*NSOP, "tar", str(pid), sandbox_id, path]
        async with await anyio.open_process(argv, stdin=None, stderr=errors) as proc:
            assert proc.stdout is not None
            try:
                with anyio.fail_after(_READ_GUARD_S):
                    async for chunk in proc.stdout:
                        written += len(chunk)
                        if max_bytes is not None and written > max_bytes:
                            raise ArchiveTooLarge(
                                f"the archive of {path} is larger than {max_bytes} bytes"
                            )
                        out.write(chunk)
                    code = await proc.wait()
            except BaseException as e:
                proc.kill()
                if isinstance(e, TimeoutError):
                    raise SandboxError(f"reading {path} took over {_READ_GUARD_S:.0f} s") from e
                raise
        errors.seek(0)
        said = errors.read(1 << 16).decode(errors="replace").strip()
    if code == 3:
        raise FileNotFoundError(2, "no such file or folder in the sandbox", path)
    if code != 0:
        raise SandboxError(f"reading {path}: {said}")
    return said


async def lay_out(pid: int, sandbox_id: str, spec: SandboxSpec) -> None:
    """Make the workdir (and scratch folders) where the image lacks them, and give a
    read-only sandbox's tmpfs folders to a numeric sandbox user; a writable root folder gets
    Docker's mode (for an engine that neither makes the workdir nor owns its tmpfs mounts:
    Podman). Done from the host in the mount namespace of the sandbox's PID 1 ``pid``."""
    uid, gid = numeric_owner(spec.user) if spec.read_only else (0, 0)
    folders = [spec.workdir, *spec.scratch]
    root = "keep" if spec.read_only else "open"
    argv = [*NSOP, "layout", str(pid), sandbox_id, root]
    done = await anyio.run_process([*argv, f"{uid}:{gid}", *folders], check=False)
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip()[-500:]
        raise SandboxError(f"cannot lay out the sandbox: {said}")
