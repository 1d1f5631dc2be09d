"""Images on a Docker engine without a registry: resolve a sandbox's image, and build the
offline base image (its recipe is :mod:`agentenv.sandbox.images`).

Resolution order: the local image; else a pull (a short one: air-gapped sites have no
registry); else a build from the given Dockerfile; else an error naming the image and what
was tried. The base image is made from Debian packages with debootstrap and ``docker import``,
using the mirror from this machine's own apt configuration.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import docker.errors
import requests
import urllib3

from agentenv.log import get_logger
from agentenv.sandbox.docker.engine import Engine
from agentenv.sandbox.errors import BuildTimedOut, ImageUnavailable
from agentenv.sandbox.images import (
    BASE_IMAGE,
    BASE_PACKAGES,
    CONTEXT_LABEL,
    PACKAGES_LABEL,
    base_changes,
    base_rootfs,
    context_digest,
    packages_digest,
)

log = get_logger(__name__)


async def resolve_image(
    engine: Engine,
    image: str,
    dockerfile: Path | None = None,
    *,
    build_timeout_s: float | None = None,
) -> str:
    """Make ``image`` present locally and return its name: local, pulled, or built (in at
    most ``build_timeout_s``, else :class:`BuildTimedOut`)."""
    tried = []
    try:
        found = await engine.run(engine.api.inspect_image, image)
        if dockerfile is None or _labels(found).get(CONTEXT_LABEL) == context_digest(dockerfile):
            return image
        # built from a Dockerfile whose folder changed since: the image is stale
        log.info("image.stale", image=image, dockerfile=str(dockerfile))
        await build_from_dockerfile(engine, image, dockerfile, timeout_s=build_timeout_s)
        with contextlib.suppress(docker.errors.APIError):  # still in use: leave it be
            await engine.run(engine.api.remove_image, found["Id"])
        return image
    except docker.errors.ImageNotFound:
        tried.append("not present locally")
    except docker.errors.APIError as e:  # e.g. "invalid reference format"
        raise ImageUnavailable(f"image {image!r}: {e.explanation or e}") from e
    try:
        await engine.run(engine.client.images.pull, image)
        return image
    except docker.errors.DockerException as e:
        tried.append(f"pull failed ({_first_line(e)})")
    if dockerfile is not None:
        await build_from_dockerfile(engine, image, dockerfile, timeout_s=build_timeout_s)
        return image
    tried.append("no Dockerfile given to build it from")
    hint = ""
    if image == BASE_IMAGE:
        hint = " Build it offline with `agentenv images build-base`."
    raise ImageUnavailable(f"image {image!r} is unavailable: {'; '.join(tried)}.{hint}")


def _labels(image: dict[str, Any]) -> dict[str, str]:
    return (image.get("Config") or {}).get("Labels") or {}


async def build_from_dockerfile(
    engine: Engine, tag: str, dockerfile: Path, *, timeout_s: float | None = None
) -> None:
    """``docker build`` with the Dockerfile's folder as context; never pulls a newer base;
    stopped past ``timeout_s``."""
    dockerfile = Path(dockerfile).resolve()
    if not dockerfile.is_file():
        raise ImageUnavailable(f"cannot build {tag!r}: Dockerfile {dockerfile} does not exist")
    log.info("image.build", image=tag, dockerfile=str(dockerfile))
    await build_image(
        engine,
        f"building {tag!r} from {dockerfile} failed",
        timeout_s=timeout_s,
        path=str(dockerfile.parent),
        dockerfile=dockerfile.name,
        tag=tag,
        labels={CONTEXT_LABEL: context_digest(dockerfile)},
    )


async def build_image(
    engine: Engine, failed: str, *, timeout_s: float | None = None, **build: Any
) -> None:
    """``docker build`` with ``build``'s arguments, never pulling a newer base; a failure
    is :class:`ImageUnavailable` opening with ``failed`` and ending with the build log's tail.
    Past ``timeout_s`` the build is stopped (its stream closed: the engine then cancels it)
    and :class:`BuildTimedOut` raised."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s

    def run() -> None:
        # the low-level stream, read here: the high-level build reads it to its end, and
        # a build that outlives its deadline must be let go of. The deadline is checked at
        # each line of output; the socket's read timeout (the whole allowance) bounds a
        # step that prints nothing (``RUN sleep``), so a build is stopped at most twice its
        # allowance after it started.
        stream = engine.api.build(
            pull=False, rm=True, forcerm=True, decode=True, timeout=timeout_s, **build
        )
        events: list[dict[str, Any]] = []
        built = False
        try:
            for chunk in stream:
                if "error" in chunk:
                    raise docker.errors.BuildError(str(chunk["error"]), [*events, chunk])
                line = str(chunk.get("stream", ""))
                events.append(chunk)
                built = built or bool(_BUILT.search(line.strip()))
                if deadline is not None and time.monotonic() > deadline:
                    raise _Late()
        finally:
            stream.close()  # drops the response, so the engine's connection closes
        if not built:
            raise docker.errors.BuildError("no image came out of the build", events)

    try:
        await engine.run(run)
    except (_Late, requests.exceptions.ConnectionError, urllib3.exceptions.HTTPError) as e:
        # a read of the raw stream that timed out is urllib3's ReadTimeoutError
        if deadline is None or time.monotonic() < deadline - 0.5 or not _timed_out(e):
            raise ImageUnavailable(f"{failed}: {e}") from e
        raise BuildTimedOut(
            f"{failed}: stopped after {timeout_s:g} s (its build timeout)", timeout_s
        ) from e
    except docker.errors.BuildError as e:
        lines = [str(c.get("stream", c.get("error", ""))).rstrip() for c in e.build_log]
        tail = "\n".join(line for line in lines if line)[-2000:]
        raise ImageUnavailable(f"{failed}: {e.msg}\n{tail}") from e
    except docker.errors.APIError as e:
        raise ImageUnavailable(f"{failed}: {e}") from e


_BUILT = re.compile(r"(^Successfully built |sha256:)([0-9a-f]+)$")


class _Late(Exception):
    """The build went on past its deadline (raised in the reading thread)."""


def _timed_out(e: BaseException) -> bool:
    return isinstance(e, _Late) or "timed out" in str(e).lower()


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__


def base_image_state(engine: Engine) -> tuple[bool, str]:
    """Whether the offline base image is present and built from today's package list, and
    that in words ("present", "missing", "present but outdated …")."""
    try:
        found = engine.api.inspect_image(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        return False, "missing"
    if _labels(found).get(PACKAGES_LABEL) == packages_digest():
        return True, "present"
    return False, "present but outdated (package list changed)"


def build_base(
    engine: Engine,
    *,
    tag: str = BASE_IMAGE,
    mirror: str | None = None,
    packages: tuple[str, ...] = BASE_PACKAGES,
    force: bool = False,
) -> str:
    """Build the offline base image with debootstrap and ``docker import``; returns its id.
    Blocking (minutes). Skipped when ``tag`` exists with the same package list, unless
    ``force``."""
    if not force:
        try:
            found = engine.api.inspect_image(tag)
            if _labels(found).get(PACKAGES_LABEL) == packages_digest(packages):
                return str(found["Id"])
        except docker.errors.ImageNotFound:
            pass
    with tempfile.TemporaryDirectory(prefix="agentenv-base-") as tmp:
        tarball = base_rootfs(Path(tmp), mirror=mirror, packages=packages)
        repo, _, version = tag.rpartition(":")
        result = engine.api.import_image_from_file(
            str(tarball),
            repository=repo or tag,
            tag=version or "latest",
            changes=base_changes(packages),
        )
    image = engine.api.inspect_image(tag)
    log.info("image.built", image=tag, id=image["Id"], result=str(result)[-200:])
    return str(image["Id"])
