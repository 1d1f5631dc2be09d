"""Images a backend keeps, as a seam of its own: what an image is (:class:`ImageFacts`),
building one from a Dockerfile and removing one. Code that layers something onto a task's
image (a harness) asks :func:`image_store` for the backend by name and never speaks an
engine's API. A backend that keeps no images (one that runs sandboxes elsewhere) simply
lacks these methods, and :func:`image_store` says so by name."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from agentenv.sandbox.backend import get_backend
from agentenv.sandbox.errors import SandboxError


class ImageFacts(BaseModel):
    """What is known of an image on a backend's engine."""

    id: str
    user: str = ""  # its USER ("" for root)
    labels: dict[str, str] = {}


@runtime_checkable
class ImageStore(Protocol):
    """A backend that builds, inspects and removes images on its own engine."""

    name: str

    async def image_facts(self, image: str) -> ImageFacts | None:
        """The image's :class:`ImageFacts`; ``None`` when it is not on the engine. Raises
        :class:`~agentenv.sandbox.errors.ImageUnavailable` for a name the engine refuses."""
        ...

    async def build_image(self, tag: str, dockerfile: Path, *, timeout_s: float | None) -> None:
        """Build ``tag`` from ``dockerfile`` (its folder the context), never pulling; past
        ``timeout_s``, :class:`~agentenv.sandbox.errors.BuildTimedOut`; a failed build is
        :class:`~agentenv.sandbox.errors.ImageUnavailable`."""
        ...

    async def remove_image(self, image: str) -> None:
        """Remove ``image``; one already gone, or still used by a container, is left."""
        ...


def image_store(backend: str | None = None) -> ImageStore:
    """The backend called ``backend`` as an :class:`ImageStore`; :class:`SandboxError`
    naming it when it keeps no images (or nobody provides it)."""
    found = get_backend(backend)
    if not isinstance(found, ImageStore):
        raise SandboxError(f"the {found.name} backend keeps no images (docker and podman do)")
    return found
