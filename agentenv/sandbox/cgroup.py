"""Reading a container's cgroup counters straight from the host's cgroup filesystem.

Only possible when the engine runs on this machine and we may read /sys/fs/cgroup; callers
fall back to the engine's API otherwise."""

from __future__ import annotations

from pathlib import Path

_ROOT = Path("/sys/fs/cgroup")


def _candidates(container_id: str, root: Path) -> list[tuple[Path, str]]:
    """(file, format) pairs for Docker's and Podman's cgroupfs and systemd drivers, cgroup
    v1 and v2."""
    places = (
        f"docker/{container_id}",
        f"system.slice/docker-{container_id}.scope",
        f"libpod_parent/libpod-{container_id}",
        f"machine.slice/libpod-{container_id}.scope",
    )
    v1 = [root / c / p / "cpuacct.usage" for c in ("cpuacct", "cpu,cpuacct") for p in places]
    v2 = [root / p / "cpu.stat" for p in places]
    return [(f, "v1") for f in v1] + [(f, "v2") for f in v2]


def cpu_usage_ns(container_id: str, root: Path = _ROOT) -> int | None:
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
