"""A task's image with a harness in it: :func:`harness_image` builds, once, a layer on top
of the image holding the harness under ``/opt/agentenv-harness/<name>`` (root-owned, outside
any workdir), from packages the host downloaded (:mod:`agentenv.harnesses.fetch`); never at
episode time. The result is tagged by a digest of the harness and the image's id, so a
second call finds it and returns at once."""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import importlib.util
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from agentenv import scratch
from agentenv.harnesses.base import Harness
from agentenv.harnesses.fetch import HarnessInstallError, Platform, npm_tree, pip_tree
from agentenv.harnesses.images import DIGEST_LABEL, build, image_info
from agentenv.log import get_logger
from agentenv.sandbox.backend import sandbox
from agentenv.sandbox.errors import ImageUnavailable
from agentenv.sandbox.spec import SandboxSpec

log = get_logger(__name__)

RECIPE = 1  # bump when the Dockerfile below changes: every harness image is rebuilt
HARNESS_LABEL = "agentenv.harness"
DEFAULT_BUILD_TIMEOUT_S = 1200.0

_locks: dict[tuple[int, str], anyio.Lock] = {}


def check_host(harness: Harness, *, backend: str) -> None:
    """Fail fast, before any episode and without building: :class:`HarnessInstallError`
    naming the command that provides what installing ``harness`` needs on this host (npm,
    pip) or the backend it needs (docker or podman)."""
    if backend not in ("docker", "podman"):
        raise HarnessInstallError(
            f"installing a harness needs the docker or podman backend, not {backend!r}"
        )
    if harness.npm and shutil.which("npm") is None:
        raise HarnessInstallError(
            f"harness {harness.name!r} is installed with npm, which this host lacks: "
            "`apt-get install npm` (or install Node.js from nodejs.org)"
        )
    if harness.pip and importlib.util.find_spec("pip") is None:
        raise HarnessInstallError(
            f"harness {harness.name!r} is installed with pip, which {sys.executable} lacks: "
            f"`{sys.executable} -m ensurepip`"
        )


def harness_digest(harness: Harness, image_id: str) -> str:
    """What a harness image is made from, as a short digest: the harness's packages, this
    module's recipe and the id of the image under it."""
    what = {
        "name": harness.name,
        "version": harness.version,
        "npm": harness.npm,
        "pip": harness.pip,
        "apt": harness.apt,
        "recipe": RECIPE,
        "image": image_id,
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


def _lock(tag: str) -> anyio.Lock:
    key = (id(asyncio.get_running_loop()), tag)
    return _locks.setdefault(key, anyio.Lock())


@asynccontextmanager
async def _host_lock(tag: str) -> AsyncIterator[None]:
    """Held while ``tag`` is built, by one process of this host at a time (CI warms the
    images while tests ask for them: the second waits, then finds the first's image)."""
    name = hashlib.sha256(tag.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f".agentenv-harness-build-{name}.lock"
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await anyio.sleep(0.5)
        yield
    finally:
        os.close(fd)  # releases the lock


async def harness_image(
    image: str,
    harness: Harness,
    *,
    backend: str,
    build_timeout_s: float | None = DEFAULT_BUILD_TIMEOUT_S,
) -> str:
    """The name of ``image`` with ``harness`` installed, built on ``backend``'s engine
    (docker or podman) the first time and found after. ``image`` must be present (resolve
    it first, e.g. by creating a sandbox from it). Raises :class:`HarnessInstallError` naming
    what is missing (npm or pip on the host, a non-Debian image, no python3 for a PyPI
    harness) and :class:`ImageUnavailable` / :class:`BuildTimedOut` for a failed build."""
    info = await image_info(backend, image)
    if info is None:
        raise ImageUnavailable(f"image {image!r} is not on the {backend} engine: resolve it first")
    image_id, user, _ = info
    digest = harness_digest(harness, image_id)
    tag = f"agentenv/harness-{harness.name}:{digest}"
    async with _lock(tag), _host_lock(tag):
        found = await image_info(backend, tag)
        if found is not None and found[2].get(DIGEST_LABEL) == digest:
            return tag
        started = time.monotonic()
        platform = await probe(image_id, backend, user)
        with scratch.folder("harness") as tmp:
            dockerfile = await anyio.to_thread.run_sync(
                _context, Path(tmp), harness, platform, image_id, digest
            )
            await build(backend, tag, dockerfile, timeout_s=build_timeout_s)
        log.info(
            "harness.image.built",
            harness=harness.name,
            image=image,
            tag=tag,
            seconds=round(time.monotonic() - started, 1),
        )
    return tag


_PROBE = r"""
if [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; then echo debian=1; fi
echo arch=$(uname -m)
python3 -c 'import sys; print("python=%d.%d" % sys.version_info[:2])' 2>/dev/null
getconf GNU_LIBC_VERSION 2>/dev/null | sed 's/^glibc /glibc=/'
true
"""


async def probe(image: str, backend: str, user: str = "") -> Platform:
    """The image's platform, read in a throwaway sandbox of it (no network)."""
    spec = SandboxSpec(image=image, backend=backend, network="none", memory="256m")
    async with sandbox(spec) as box:
        result = await box.exec(["sh", "-c", _PROBE], timeout=60)
    seen = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line.strip())

    def version(key: str) -> tuple[int, int] | None:
        parts = seen.get(key, "").strip().split(".")
        if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
            return None
        return int(parts[0]), int(parts[1])

    return Platform(
        debian=seen.get("debian") == "1",
        arch=seen.get("arch", "").strip(),
        python=version("python"),
        glibc=version("glibc"),
        user=user,
    )


def _context(tmp: Path, harness: Harness, platform: Platform, image_id: str, digest: str) -> Path:
    """Download the harness's packages and write the Dockerfile that installs them;
    returns the Dockerfile's path. Blocking (minutes on a cold npm/pip cache)."""
    if not platform.debian:
        raise HarnessInstallError(
            f"harness {harness.name!r} installs only into Debian-like images (with "
            "/etc/debian_version and apt-get); base the task's image on debian or ubuntu "
            "(`FROM agentenv/base:bookworm`)"
        )
    tree = tmp / "tree"
    tree.mkdir()
    if harness.npm:
        npm_tree(harness.npm, tree, platform, timeout_s=900)
    if harness.pip:
        pip_tree(harness.pip, tree / "lib", platform, timeout_s=900)
    home = harness.home
    lines = [
        f"FROM {image_id}",
        "USER root",
        # COPY makes every file root's, with the modes npm and pip gave (no group/other write)
        f"COPY tree/ {home}/",
    ]
    if harness.apt:
        packages = " ".join(shlex.quote(p) for p in harness.apt)
        lines.append(
            "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "
            f"--no-install-recommends {packages} && rm -rf /var/lib/apt/lists/*"
        )
    if harness.pip:
        # bytecode made once here: the agent's user cannot write it in a root-owned folder
        lines.append(f"RUN python3 -m compileall -q -j 0 {home}/lib >/dev/null || true")
    lines.append(
        f"LABEL {HARNESS_LABEL}={json.dumps(f'{harness.name}@{harness.version}')} "
        f"{DIGEST_LABEL}={digest}"
    )
    if platform.user:
        lines.append(f"USER {platform.user}")
    dockerfile = tmp / "Dockerfile"
    dockerfile.write_text("\n".join(lines) + "\n")
    return dockerfile
