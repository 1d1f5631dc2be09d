"""A container's cgroup straight from the host's cgroup filesystem: its CPU counter, and its
freezer (how ``Sandbox.pause`` freezes without the engine in the path; ``bench/freeze.py``
measures it against the engine's pause).

Only possible when the engine runs on this machine and we may use /sys/fs/cgroup; callers
fall back to the engine's API otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import anyio

ROOT = Path("/sys/fs/cgroup")
"""Where the host's cgroup filesystem is."""


def places(container_id: str) -> tuple[str, ...]:
    """Where Docker's and Podman's cgroupfs and systemd drivers put a container's cgroup
    (relative to a hierarchy's root)."""
    return (
        f"docker/{container_id}",
        f"system.slice/docker-{container_id}.scope",
        f"libpod_parent/libpod-{container_id}",
        f"machine.slice/libpod-{container_id}.scope",
    )


def _candidates(container_id: str, root: Path) -> list[tuple[Path, str]]:
    """(file, format) pairs for Docker's and Podman's cgroupfs and systemd drivers, cgroup
    v1 and v2."""
    found = places(container_id)
    v1 = [root / c / p / "cpuacct.usage" for c in ("cpuacct", "cpu,cpuacct") for p in found]
    v2 = [root / p / "cpu.stat" for p in found]
    return [(f, "v1") for f in v1] + [(f, "v2") for f in v2]


def cpu_usage_ns(container_id: str, root: Path = ROOT) -> int | None:
    """CPU time used by the container's processes, in ns; ``None`` if not readable here."""
    for path, kind in _candidates(container_id, root):
        try:
            text = path.read_text()
        except OSError:
            continue
        if kind == "v1":
            return int(text.strip())
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) * 1000
    return None


def freezer(container_id: str, root: Path = ROOT) -> Path | None:
    """The file that freezes the container's cgroup without the engine: cgroup v1's
    ``freezer.state`` or v2's ``cgroup.freeze``, for Docker's and Podman's cgroupfs and
    systemd drivers; ``None`` when there is none we may write here (a remote engine, a
    read-only /sys/fs/cgroup)."""
    for place in places(container_id):
        for path in (root / "freezer" / place / "freezer.state", root / place / "cgroup.freeze"):
            if path.is_file() and os.access(path, os.W_OK):
                return path
    return None


def is_frozen(path: Path) -> bool:
    """Whether the cgroup of :func:`freezer`'s ``path`` is frozen (all its tasks stopped)."""
    if path.name == "freezer.state":
        return path.read_text().strip() == "FROZEN"
    for line in (path.parent / "cgroup.events").read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "frozen":
            return value.strip() == "1"
    return False


def ask(path: Path, frozen: bool) -> None:
    """Ask the kernel to freeze (or thaw) the cgroup of :func:`freezer`'s ``path``; it
    completes asynchronously (:func:`set_frozen` waits for it)."""
    v1 = path.name == "freezer.state"
    path.write_text(("FROZEN" if frozen else "THAWED") if v1 else ("1" if frozen else "0"))


async def set_frozen(path: Path, frozen: bool, *, timeout_s: float = 5.0) -> None:
    """Freeze (or thaw) the cgroup of :func:`freezer`'s ``path`` and wait until every task
    in it is; raises ``TimeoutError`` past ``timeout_s`` (a task in uninterruptible sleep
    can hold a freeze back), leaving the cgroup asked to thaw in that case. The engine is
    not told: its idea of the container's state stays "running"."""
    ask(path, frozen)
    delay, waited = 0.0002, 0.0
    while is_frozen(path) != frozen:
        if waited > timeout_s:
            if frozen:
                ask(path, False)
            raise TimeoutError(f"{path}: not {'frozen' if frozen else 'thawed'} in {timeout_s} s")
        await anyio.sleep(delay)
        waited += delay
        delay = min(delay * 2, 0.01)
