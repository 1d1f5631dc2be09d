"""A harness image on the engine of a backend: its id, whether a tag is there with our
label, and building it from a Dockerfile through the backend's own build (its timeout and
context label). Docker and Podman; other backends are refused by name."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from agentenv.harnesses.fetch import HarnessInstallError
from agentenv.sandbox.errors import ImageUnavailable

DIGEST_LABEL = "agentenv.harness.digest"


async def image_info(backend: str, image: str) -> tuple[str, str, dict[str, str]] | None:
    """``(id, its USER, labels)`` of ``image`` on the backend's engine; ``None`` if absent."""
    if backend == "docker":
        import docker.errors

        from agentenv.sandbox.docker.engine import get_engine

        engine = await get_engine()
        try:
            found = await engine.run(engine.api.inspect_image, image)
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.APIError as e:
            raise ImageUnavailable(f"image {image!r}: {e.explanation or e}") from e
        config = found.get("Config") or {}
        return str(found["Id"]), str(config.get("User") or ""), dict(config.get("Labels") or {})
    if backend == "podman":
        from agentenv.sandbox.podman.cli import NoSuchObject, podman

        try:
            out = json.loads(await podman("image", "inspect", image))
        except NoSuchObject:
            return None
        info = out[0] if isinstance(out, list) else out
        config = info.get("Config") or {}
        labels = info.get("Labels") or config.get("Labels") or {}
        return str(info["Id"]), str(config.get("User") or info.get("User") or ""), dict(labels)
    raise HarnessInstallError(
        f"installing a harness needs the docker or podman backend, not {backend!r}"
    )


async def build(backend: str, tag: str, dockerfile: Path, *, timeout_s: float | None) -> None:
    """Build ``tag`` from ``dockerfile`` (its folder the context) with the backend's build,
    never pulling; past ``timeout_s``, :class:`BuildTimedOut`."""
    if backend == "docker":
        from agentenv.sandbox.docker.engine import get_engine
        from agentenv.sandbox.docker.images import build_from_dockerfile

        await build_from_dockerfile(await get_engine(), tag, dockerfile, timeout_s=timeout_s)
    elif backend == "podman":
        from agentenv.sandbox.podman.images import resolve_image

        await resolve_image(tag, dockerfile, build_timeout_s=timeout_s)
    else:
        raise HarnessInstallError(
            f"installing a harness needs the docker or podman backend, not {backend!r}"
        )


async def remove_image(backend: str, image: str) -> None:
    """Remove a harness image (one built on a snapshot keeps the snapshot from going); an
    image already gone, or still used by a container, is left as it is."""
    if backend == "docker":
        import docker.errors

        from agentenv.sandbox.docker.engine import get_engine

        engine = await get_engine()
        with contextlib.suppress(docker.errors.APIError):
            await engine.run(engine.api.remove_image, image)
    elif backend == "podman":
        from agentenv.sandbox.errors import SandboxError
        from agentenv.sandbox.podman.cli import podman

        with contextlib.suppress(SandboxError):
            await podman("rmi", image)
