"""Making a used read-only container sandbox as a new one of its spec would be, for another
episode: every process killed but init and keep-alive, its writable folders emptied and
checked (:data:`WIPE`), its memory peaks zeroed. Any engine's: this works from the host's
cgroup files and the sandbox's own executor."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from agentenv import guest
from agentenv.log import get_logger
from agentenv.sandbox import cgroup
from agentenv.sandbox.channel import PYTHON_ARGV
from agentenv.sandbox.container.config import KEEPALIVE
from agentenv.sandbox.errors import SandboxError
from agentenv.sandbox.files import numeric_owner
from agentenv.sandbox.spec import SandboxSpec

log = get_logger(__name__)

_SLEEP = ["/bin/sleep", "3600"]


def _proc(pid: int) -> tuple[int, bool, list[str]] | None:
    """A host process's parent pid, whether every one of its uids is root, and its argv
    (``None``: gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    ppid = int(fields.get("PPid", "0").strip() or 0)
    root = all(u == "0" for u in fields.get("Uid", "x").split())
    return ppid, root, [a.decode(errors="replace") for a in argv]


def _ours(pids: list[int], init_pid: int) -> set[int]:
    """The processes a new sandbox has: its init, the keep-alive (root, by its exact argv,
    a child of init) and the keep-alive's sleep (or its fork about to become one)."""
    keep = {init_pid}
    info = {pid: _proc(pid) for pid in pids}
    grew = True
    while grew:
        grew = False
        for pid, seen in info.items():
            if pid in keep or seen is None:
                continue
            ppid, root, argv = seen
            if root and ppid in keep and argv in (KEEPALIVE, _SLEEP):
                keep.add(pid)
                grew = True
    return keep


async def kill_all_but_ours(sandbox_id: str, init_pid: int, *, timeout_s: float = 5.0) -> bool:
    """Kill every process in the container but its init and keep-alive, from this host,
    with the container frozen meanwhile (nothing can fork away from the kill); ``True``
    once only those are left. ``False`` where this host cannot see its cgroup, or if
    another process survives."""
    path = cgroup.freezer(sandbox_id)
    if path is None or init_pid <= 0:
        return False
    procs = path.parent / "cgroup.procs"

    def listed() -> list[int]:
        return [int(p) for p in procs.read_text().split()]

    try:
        await cgroup.set_frozen(path, True)
        try:
            pids = listed()
            keep = _ours(pids, init_pid)
            for pid in pids:
                if pid not in keep:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        finally:
            await cgroup.set_frozen(path, False)
        with anyio.move_on_after(timeout_s):
            while True:
                pids = listed()
                if set(pids) <= _ours(pids, init_pid):
                    return True
                await anyio.sleep(0.005)
    except (OSError, TimeoutError) as e:
        log.info("sandbox.recycle_failed", id=sandbox_id[:12], error=str(e))
    return False


WIPE = guest.source("wipe").decode()
"""The source of ``guest/wipe.py``, run as the sandbox's user (``[*PYTHON_ARGV, WIPE,
"UID:GID|FIXED|SHARED"]``) once only init and keep-alive are left: empties the folders a
read-only sandbox may write (``FIXED``, the workdir and scratch folders, given back to
``UID:GID`` at 0755; ``SHARED``, /tmp, /dev/shm and /dev/mqueue, root's at 1777) and prints
``clean`` only if they are as a new sandbox's, with no System V IPC object and no other
process left."""


def writable_mounts(info: dict[str, Any]) -> list[str]:
    """Where an engine's container description (``inspect``) says a writable mount is:
    Docker's and Podman's ``Mounts`` (volumes, binds; not the ``--tmpfs`` ones)."""
    return [str(m.get("Destination")) for m in info.get("Mounts") or [] if m.get("RW")]


def _reset_peaks(sandbox_id: str) -> None:
    """Zero the memory cgroup's high-water mark and failure count, which the last episode
    set and the next could read (best effort: v1 files; v2's peak resets only on kernels
    that allow writing it)."""
    for place in cgroup.places(sandbox_id):
        for name in ("memory.max_usage_in_bytes", "memory.failcnt", "memory.peak"):
            for root in (cgroup.ROOT / "memory" / place, cgroup.ROOT / place):
                with contextlib.suppress(OSError):
                    (root / name).write_text("0")


async def recycle(
    sandbox_id: str,
    spec: SandboxSpec,
    init_pid: int,
    writable: list[str],
    restart: Callable[[], Awaitable[None]],
    run: Callable[[list[str]], Awaitable[Any]],
) -> bool:
    """Make a read-only sandbox as a new one of ``spec`` would be: every process killed
    but init and keep-alive (:func:`kill_all_but_ours`), its memory peaks zeroed, its
    executor started again (``restart``), and its writable folders emptied and checked by
    :data:`WIPE`, run as its user through ``run``. ``False`` (the caller must close it)
    where any step fails or cannot be done here: a sandbox of another runtime, or with a
    writable mount (``writable``, from :func:`writable_mounts`) other than its workdir and
    scratch folders, or one started by its image's entrypoint."""
    if not spec.read_only or spec.options.get("runtime"):
        return False  # another runtime's processes may not be the host's to see and kill
    if spec.image_entrypoint:
        return False  # what the image's entrypoint started would not be started again
    extra = [m for m in writable if m not in (spec.workdir, *spec.scratch)]
    if extra:  # an image's VOLUME: writable, and not among the places emptied
        log.info("sandbox.recycle_refused", id=sandbox_id[:12], said=f"writable {extra}")
        return False
    if not await kill_all_but_ours(sandbox_id, init_pid):
        return False
    _reset_peaks(sandbox_id)
    uid, gid = numeric_owner(spec.user)
    fixed = ",".join((spec.workdir, *spec.scratch))
    try:
        await restart()
        done = await run([*PYTHON_ARGV, WIPE, f"{uid}:{gid}|{fixed}|{_SHARED_PLACES}"])
    except (SandboxError, OSError) as e:
        log.info("sandbox.recycle_failed", id=sandbox_id[:12], error=str(e))
        return False
    said = (done.stdout + done.stderr).strip()
    if done.exit_code != 0 or said != "clean":
        log.info("sandbox.recycle_refused", id=sandbox_id[:12], said=said[-500:])
        return False
    return True


_SHARED_PLACES = "/tmp,/dev/shm,/dev/mqueue"
