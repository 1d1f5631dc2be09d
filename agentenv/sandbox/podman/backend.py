"""The Podman backend: :class:`PodmanBackend` makes :class:`PodmanSandbox` objects with the
``podman`` command (rootful, no daemon). Written from ``docs/backends.md``."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

import anyio

from agentenv.sandbox import labels as L
from agentenv.sandbox.backend import Leftover, check_options, fork_by_creating
from agentenv.sandbox.container.freezing import seen_status, thaw_before_removal
from agentenv.sandbox.errors import SandboxError
from agentenv.sandbox.gc import leftover
from agentenv.sandbox.image_store import ImageFacts
from agentenv.sandbox.podman.cli import NoSuchObject, podman, podman_sync
from agentenv.sandbox.podman.images import resolve_image
from agentenv.sandbox.podman.sandbox import PodmanSandbox
from agentenv.sandbox.protocol import Sandbox, Snapshot
from agentenv.sandbox.spec import SandboxSpec

OPTIONS = frozenset({"runtime"})
"""The ``SandboxSpec.options`` Podman understands: ``runtime``, the OCI runtime (crun, runc)."""


class PodmanBackend:
    """Sandboxes as Podman containers, snapshots as images in Podman's storage."""

    name = "podman"

    def __init__(self, creations: int = 4):
        self._creations = creations
        self._limiters: dict[int, anyio.CapacityLimiter] = {}

    def _limiter(self) -> anyio.CapacityLimiter:
        # one per event loop: a limiter belongs to the loop that made it
        loop = id(asyncio.get_running_loop())
        if loop not in self._limiters:
            self._limiters = {loop: anyio.CapacityLimiter(self._creations)}
        return self._limiters[loop]

    async def create(self, spec: SandboxSpec) -> Sandbox:
        """A new running container sandbox."""
        check_options(spec, OPTIONS)
        return await PodmanSandbox.create(spec, self._limiter())

    async def attach(self, sandbox_id: str, spec: SandboxSpec) -> Sandbox:
        """Take over a container sandbox made before, running or paused."""
        return await PodmanSandbox.attach(sandbox_id, spec)

    async def fork(self, snapshot: Snapshot, n: int) -> list[Sandbox]:
        """``n`` containers from the snapshot's image, created at once; all or none."""
        return await fork_by_creating(self, snapshot, n)

    async def remove_snapshot(self, snapshot: Snapshot) -> None:
        """Delete the snapshot's image."""
        with contextlib.suppress(NoSuchObject):
            await podman("rmi", "--force", snapshot.ref)

    async def image_facts(self, image: str) -> ImageFacts | None:
        """The image's id, USER and labels; ``None`` when Podman's storage lacks it."""
        try:
            out = json.loads(await podman("image", "inspect", image))
        except NoSuchObject:
            return None
        info = out[0] if isinstance(out, list) else out
        config = info.get("Config") or {}
        labels = info.get("Labels") or config.get("Labels") or {}
        user = config.get("User") or info.get("User") or ""
        return ImageFacts(id=str(info["Id"]), user=str(user), labels=dict(labels))

    async def build_image(self, tag: str, dockerfile: Path, *, timeout_s: float | None) -> None:
        """``podman build`` of ``tag`` from ``dockerfile``, never pulling."""
        await resolve_image(tag, dockerfile, build_timeout_s=timeout_s)

    async def remove_image(self, image: str) -> None:
        """Remove ``image`` unless it is gone or a container still uses it."""
        with contextlib.suppress(SandboxError):
            await podman("rmi", image)

    def leftovers(self) -> list[Leftover]:
        """Our containers and snapshot images. Blocking."""
        rows = []
        found = json.loads(
            podman_sync("ps", "--all", "--filter", f"label={L.OWNER}", "--format", "json") or b"[]"
        )
        for c in found or []:
            name = (c.get("Names") or ["?"])[0]
            status = seen_status(c["Id"], c.get("State", "?"))
            rows.append(leftover("sandbox", c["Id"], name, status, c.get("Labels") or {}))
        images = podman_sync("images", "--filter", f"label={L.KIND}=snapshot", "--format", "json")
        for image in json.loads(images or b"[]") or []:
            tags = image.get("Names") or []
            if tags and not any(f"{L.SNAPSHOT_REPOSITORY}:" in t for t in tags):
                continue  # built FROM a snapshot by someone: it inherited our labels
            name = (tags or ["<untagged>"])[0]
            rows.append(leftover("snapshot", image["Id"], name, "image", image.get("Labels") or {}))
        return rows

    def remove(self, leftover: Leftover) -> bool:
        """Remove a container or an image. Blocking."""
        try:
            if leftover.kind == "sandbox":
                thaw_before_removal(leftover.id)
                podman_sync("rm", "--force", "--time", "0", "--volumes", leftover.id)
            else:
                podman_sync("rmi", "--force", leftover.id)
        except NoSuchObject:
            return True
        except SandboxError:
            return False
        return True


backend = PodmanBackend()
"""The default Podman backend (``get_backend("podman")``)."""
