"""The Docker backend: :class:`DockerBackend` makes :class:`DockerSandbox` objects on a
Docker engine (``DOCKER_HOST``, else the local socket) and is the only place, with the
modules beside it, that speaks the Docker API or sees ``docker.errors``."""

from __future__ import annotations

import contextlib
from pathlib import Path

import docker.errors
import requests

from agentenv.sandbox import labels as L
from agentenv.sandbox.backend import Leftover, check_options, fork_by_creating
from agentenv.sandbox.container.freezing import seen_status, thaw_before_removal
from agentenv.sandbox.docker.engine import Engine, connect, get_engine
from agentenv.sandbox.docker.images import build_from_dockerfile
from agentenv.sandbox.docker.sandbox import DockerSandbox
from agentenv.sandbox.errors import EngineUnavailable, ImageUnavailable, SandboxError
from agentenv.sandbox.gc import leftover
from agentenv.sandbox.image_store import ImageFacts
from agentenv.sandbox.protocol import Sandbox, Snapshot
from agentenv.sandbox.spec import SandboxSpec

OPTIONS = frozenset({"runtime", "egress_network"})  # egress_network: see sandbox/docker/egress.py
"""The ``SandboxSpec.options`` Docker understands: ``runtime``, the engine's OCI runtime."""


class DockerBackend:
    """Sandboxes as Docker containers, snapshots as images. Give it an :class:`Engine` to
    use one other than the default (the tests' private engines do)."""

    name = "docker"

    def __init__(self, engine: Engine | None = None):
        self._engine = engine

    async def _get_engine(self) -> Engine:
        return self._engine or await get_engine()

    async def create(self, spec: SandboxSpec) -> Sandbox:
        """A new running container sandbox (see :meth:`DockerSandbox.create`)."""
        check_options(spec, OPTIONS)
        return await DockerSandbox.create(spec, engine=await self._get_engine())

    async def attach(self, sandbox_id: str, spec: SandboxSpec) -> Sandbox:
        """Take over a container sandbox (see :meth:`DockerSandbox.attach`)."""
        return await DockerSandbox.attach(sandbox_id, spec, engine=await self._get_engine())

    async def fork(self, snapshot: Snapshot, n: int) -> list[Sandbox]:
        """``n`` containers from the snapshot's image, created at once; all or none."""
        return await fork_by_creating(self, snapshot, n)

    async def remove_snapshot(self, snapshot: Snapshot) -> None:
        """Delete the snapshot's image; :class:`SandboxError` when the engine refuses (a
        container still uses it)."""
        engine = await self._get_engine()
        try:
            await engine.run(engine.api.remove_image, snapshot.ref, force=True)
        except docker.errors.ImageNotFound:
            pass
        except docker.errors.APIError as e:
            raise SandboxError(f"snapshot {snapshot.ref}: {e.explanation or e}") from e

    async def image_facts(self, image: str) -> ImageFacts | None:
        """The image's id, USER and labels; ``None`` when the engine lacks it."""
        engine = await self._get_engine()
        try:
            found = await engine.run(engine.api.inspect_image, image)
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.APIError as e:
            raise ImageUnavailable(f"image {image!r}: {e.explanation or e}") from e
        config = found.get("Config") or {}
        return ImageFacts(
            id=str(found["Id"]),
            user=str(config.get("User") or ""),
            labels=dict(config.get("Labels") or {}),
        )

    async def build_image(self, tag: str, dockerfile: Path, *, timeout_s: float | None) -> None:
        """``docker build`` of ``tag`` from ``dockerfile``, never pulling."""
        await build_from_dockerfile(await self._get_engine(), tag, dockerfile, timeout_s=timeout_s)

    async def remove_image(self, image: str) -> None:
        """Remove ``image`` unless it is gone or a container still uses it."""
        engine = await self._get_engine()
        with contextlib.suppress(docker.errors.APIError):
            await engine.run(engine.api.remove_image, image)

    def leftovers(self) -> list[Leftover]:
        """Our containers, snapshot images and orphaned workdir volumes. Blocking. Raises
        :class:`EngineUnavailable` when the engine stops answering midway, and
        :class:`SandboxError` when it refuses to list."""
        try:
            return self._leftovers()
        except requests.exceptions.RequestException as e:
            raise EngineUnavailable(f"lost the Docker engine while listing: {e}") from e
        except docker.errors.DockerException as e:
            raise SandboxError(f"the Docker engine would not list our objects: {e}") from e

    def _leftovers(self) -> list[Leftover]:
        api = (self._engine or connect()).api
        rows = []
        for c in api.containers(all=True, filters={"label": L.OWNER}):
            name = (c.get("Names") or ["?"])[0].lstrip("/")
            status = seen_status(c["Id"], c.get("State", "?"))
            rows.append(leftover("sandbox", c["Id"], name, status, c["Labels"] or {}))
        for image in api.images(filters={"label": f"{L.KIND}=snapshot"}):
            tags = [t for t in image.get("RepoTags") or [] if t != "<none>:<none>"]
            if tags and not any(t.startswith(f"{L.SNAPSHOT_REPOSITORY}:") for t in tags):
                continue  # built FROM a snapshot by someone: it inherited our labels
            name = (tags or ["<untagged>"])[0]
            rows.append(leftover("snapshot", image["Id"], name, "image", image["Labels"] or {}))
        # a read-only sandbox's workdir volume goes with its container; one whose container
        # was removed without it (by hand, or by an engine that died) is always collectable
        found = api.volumes(filters={"label": L.OWNER, "dangling": True}) or {}
        for volume in found.get("Volumes") or []:
            name = volume["Name"]
            if L.GROUP in (volume.get("Labels") or {}):
                continue  # a compose group's: listed below by its own labels
            row = leftover("volume", name, name[:12], "unused", volume.get("Labels") or {})
            rows.append(row.model_copy(update={"stale": row.stale or "its sandbox is gone"}))
        # a compose group's named volumes and network go with it (after its containers)
        grouped = api.volumes(filters={"label": L.GROUP}) or {}
        for volume in grouped.get("Volumes") or []:
            name, labels = volume["Name"], volume.get("Labels") or {}
            rows.append(leftover("volume", name, name[:40], "compose", labels))
        for net in api.networks(filters={"label": L.OWNER}):
            rows.append(leftover("network", net["Id"], net["Name"], "network", net["Labels"] or {}))
        return rows

    def remove(self, leftover: Leftover) -> bool:
        """Remove a container (with its volumes), a volume, a network or an image.
        Blocking."""
        api = (self._engine or connect()).api
        try:
            if leftover.kind == "sandbox":
                thaw_before_removal(leftover.id)
                api.remove_container(leftover.id, force=True, v=True)
            elif leftover.kind == "volume":
                api.remove_volume(leftover.id)
            elif leftover.kind == "network":
                api.remove_network(leftover.id)
            else:
                api.remove_image(leftover.id, force=True)
        except docker.errors.NotFound:
            return True
        except docker.errors.APIError:
            return False  # an image still used by someone else's container: kept
        except requests.exceptions.ReadTimeout:
            # the engine answers but not for this one (a container it left "Dead" after
            # running out of files): kept, and the others still go
            return False
        except requests.exceptions.ConnectionError as e:
            raise EngineUnavailable(f"lost the Docker engine while removing: {e}") from e
        return True


backend = DockerBackend()
"""The default Docker backend (``get_backend("docker")``)."""
