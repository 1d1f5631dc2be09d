"""Images in Podman's local storage: resolve a sandbox's image (present, or built from its
Dockerfile, never pulled: an offline host has no registry), and put the offline base image
there (copied from a local Docker engine when it has it, else built with debootstrap)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import anyio

from agentenv.log import get_logger
from agentenv.sandbox import images as shared
from agentenv.sandbox.errors import BuildTimedOut, ImageUnavailable, SandboxError
from agentenv.sandbox.podman.cli import (
    NoSuchObject,
    podman,
    podman_cwd,
    podman_path,
    podman_sync,
)

log = get_logger(__name__)


async def _labels(image: str) -> dict[str, str] | None:
    """The image's labels, or ``None`` when there is no such image."""
    try:
        found = json.loads(await podman("image", "inspect", image))
    except NoSuchObject:
        return None
    info = found[0] if isinstance(found, list) else found
    return dict(info.get("Labels") or (info.get("Config") or {}).get("Labels") or {})


async def resolve_image(
    image: str, dockerfile: Path | None = None, *, build_timeout_s: float | None = None
) -> str:
    """Make ``image`` present and return its name: present, or built from ``dockerfile``
    (in at most ``build_timeout_s``: past it ``podman build`` is killed and
    :class:`BuildTimedOut` raised)."""
    labels = await _labels(image)
    if labels is not None and (
        dockerfile is None or labels.get(shared.CONTEXT_LABEL) == shared.context_digest(dockerfile)
    ):
        return image
    if dockerfile is None:
        hint = " Put it there with `agentenv doctor --fix --backend podman`."
        hint = hint if image == shared.BASE_IMAGE else ""
        raise ImageUnavailable(
            f"image {image!r} is not in Podman's storage and no Dockerfile was given to "
            f"build it (the podman backend never pulls).{hint}"
        )
    dockerfile = Path(dockerfile).resolve()
    if not dockerfile.is_file():
        raise ImageUnavailable(f"cannot build {image!r}: Dockerfile {dockerfile} does not exist")
    log.info("image.build", image=image, dockerfile=str(dockerfile))
    failed = f"building {image!r} from {dockerfile} failed"
    args = (
        "build", "--pull=never", "--quiet", "--tag", image,
        "--label", f"{shared.CONTEXT_LABEL}={shared.context_digest(dockerfile)}",
        "--file", str(dockerfile), str(dockerfile.parent),
    )  # fmt: skip
    try:
        if build_timeout_s is None:
            await podman(*args)
        else:
            await _build_within(args, build_timeout_s)
    except TimeoutError as e:
        stopped = f"{failed}: stopped after {build_timeout_s:g} s (its build timeout)"
        raise BuildTimedOut(stopped, build_timeout_s) from e
    except SandboxError as e:
        raise ImageUnavailable(f"{failed}: {e}") from e
    return image


async def _build_within(args: tuple[str, ...], timeout_s: float) -> None:
    """``podman ARGS`` (a build) stopped past ``timeout_s`` (:class:`TimeoutError`). Podman
    has no daemon to cancel it, and a killed ``podman build`` leaves its RUN step running:
    it is sent SIGTERM, on which it removes its build container, and killed only if it has
    not gone ``_STOP_GRACE_S`` later."""
    with tempfile.TemporaryFile() as err:  # a file, not a pipe: no reader needed to drain it
        process = await anyio.open_process(
            [podman_path(), *args], cwd=podman_cwd(), stdout=subprocess.DEVNULL, stderr=err
        )
        with anyio.move_on_after(timeout_s) as waited:
            await process.wait()
        if waited.cancelled_caught:
            process.terminate()
            with anyio.move_on_after(_STOP_GRACE_S):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            raise TimeoutError
        if process.returncode != 0:
            err.seek(0)
            said = err.read().decode(errors="replace").strip()[-2000:]
            raise SandboxError(f"podman build failed (exit {process.returncode}): {said}")


_STOP_GRACE_S = 10.0


def base_image_state() -> tuple[bool, str]:
    """Whether Podman has the base image, built from today's package list, in words."""
    try:
        found = json.loads(podman_sync("image", "inspect", shared.BASE_IMAGE))
    except NoSuchObject:
        return False, "missing"
    labels = (found[0] if isinstance(found, list) else found).get("Labels") or {}
    if labels.get(shared.PACKAGES_LABEL) == shared.packages_digest():
        return True, "present"
    return False, "present but outdated (package list changed)"


def put_base_image(*, mirror: str | None = None) -> str:
    """Put the base image into Podman's storage: from a local Docker engine that has it
    up to date (``docker save | podman load``, seconds), else built with debootstrap and
    ``podman import`` (minutes). Blocking."""
    docker = shutil.which("docker")
    if docker is not None:
        probe = subprocess.run(
            [docker, "image", "inspect", "--format",
             f'{{{{index .Config.Labels "{shared.PACKAGES_LABEL}"}}}}', shared.BASE_IMAGE],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if probe.returncode == 0 and probe.stdout.strip() == shared.packages_digest():
            save = subprocess.Popen([docker, "save", shared.BASE_IMAGE], stdout=subprocess.PIPE)
            load = subprocess.run(
                [podman_path(), "load", "--quiet"], stdin=save.stdout, capture_output=True
            )
            save.wait()
            if load.returncode == 0 and save.returncode == 0:
                return shared.BASE_IMAGE
            log.info("image.copy_failed", error=load.stderr.decode(errors="replace")[-500:])
    with tempfile.TemporaryDirectory(prefix="agentenv-base-") as tmp:
        tarball = shared.base_rootfs(Path(tmp), mirror=mirror, packages=shared.BASE_PACKAGES)
        changes = [a for c in shared.base_changes(shared.BASE_PACKAGES) for a in ("--change", c)]
        podman_sync("import", "--quiet", *changes, str(tarball), shared.BASE_IMAGE)
    return shared.BASE_IMAGE
