"""Images without a registry: resolve a sandbox's image, and build the offline base image.

Resolution order: the local image; else a pull (a short one: air-gapped sites have no
registry); else a build from the given Dockerfile; else an error naming the image and what
was tried. The base image is made from Debian packages with debootstrap and ``docker import``,
using the mirror from this machine's own apt configuration.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import docker.errors

from agentenv.log import get_logger
from agentenv.sandbox.engine import Engine
from agentenv.sandbox.errors import ImageUnavailable, SandboxError

log = get_logger(__name__)

BASE_IMAGE = "agentenv/base:bookworm"
BASE_SUITE = "bookworm"
BASE_PACKAGES = (
    "bash",
    "coreutils",
    "procps",
    "python3",
    "git",
    "ca-certificates",
    "tini",
    # what the bundled tasks and their verifiers need: tests, a C toolchain, charts
    "python3-pytest",
    "gcc",
    "libc6-dev",
    "make",
    "python3-pil",
    "gnuplot-nox",
)
PACKAGES_LABEL = "agentenv.base.packages"
CONTEXT_LABEL = "agentenv.context"  # digest of the build context an image was built from


def packages_digest(packages: tuple[str, ...] = BASE_PACKAGES) -> str:
    """A short digest of the package list; stored on the image to know when to rebuild."""
    return hashlib.sha256(" ".join(sorted(packages)).encode()).hexdigest()[:16]


async def resolve_image(engine: Engine, image: str, dockerfile: Path | None = None) -> str:
    """Make ``image`` present locally and return its name: local, pulled, or built."""
    tried = []
    try:
        found = await engine.run(engine.api.inspect_image, image)
        if dockerfile is None or _labels(found).get(CONTEXT_LABEL) == context_digest(dockerfile):
            return image
        # built from a Dockerfile whose folder changed since: the image is stale
        log.info("image.stale", image=image, dockerfile=str(dockerfile))
        await build_from_dockerfile(engine, image, dockerfile)
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
        await build_from_dockerfile(engine, image, dockerfile)
        return image
    tried.append("no Dockerfile given to build it from")
    hint = ""
    if image == BASE_IMAGE:
        hint = " Build it offline with `agentenv images build-base`."
    raise ImageUnavailable(f"image {image!r} is unavailable: {'; '.join(tried)}.{hint}")


def dockerfile_image(image: str, dockerfile: Path, name: str) -> str:
    """The name a task's Dockerfile is built as: the repository of ``image`` (or
    ``agentenv/task-<name>`` when ``image`` is the base image, which must never be
    overwritten) tagged with the build context's digest. Copies of one task in different
    folders share one image; tasks whose contexts differ never take each other's tag (and
    never rebuild it back and forth)."""
    if image == BASE_IMAGE:
        repo = "agentenv/task-" + (re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip(".-_") or "x")
    else:
        last = image.rsplit("/", 1)[-1]
        repo = image.rsplit(":", 1)[0] if ":" in last else image
    return f"{repo}:ctx-{context_digest(dockerfile)}"


def context_digest(dockerfile: Path) -> str:
    """A digest of the Dockerfile's folder (its build context): names and contents."""
    folder = Path(dockerfile).resolve().parent
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def _labels(image: dict[str, Any]) -> dict[str, str]:
    return (image.get("Config") or {}).get("Labels") or {}


async def build_from_dockerfile(engine: Engine, tag: str, dockerfile: Path) -> None:
    """``docker build`` with the Dockerfile's folder as context; never pulls a newer base."""
    dockerfile = Path(dockerfile).resolve()
    if not dockerfile.is_file():
        raise ImageUnavailable(f"cannot build {tag!r}: Dockerfile {dockerfile} does not exist")
    log.info("image.build", image=tag, dockerfile=str(dockerfile))
    try:
        await engine.run(
            engine.client.images.build,
            path=str(dockerfile.parent),
            dockerfile=dockerfile.name,
            tag=tag,
            labels={CONTEXT_LABEL: context_digest(dockerfile)},
            pull=False,
            rm=True,
            forcerm=True,
        )
    except docker.errors.BuildError as e:
        lines = [str(c.get("stream", c.get("error", ""))).rstrip() for c in e.build_log]
        tail = "\n".join(line for line in lines if line)[-2000:]
        raise ImageUnavailable(f"building {tag!r} from {dockerfile} failed: {e.msg}\n{tail}") from e
    except docker.errors.APIError as e:
        raise ImageUnavailable(f"building {tag!r} from {dockerfile} failed: {e}") from e


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


def apt_mirror(suite: str = BASE_SUITE, root: Path = Path("/")) -> str:
    """The Debian mirror this machine's apt uses for ``suite``'s main archive (not the
    security archive), read from sources.list and deb822 ``*.sources`` files."""
    entries: list[tuple[str, list[str]]] = []  # (uri, suites)
    apt = root / "etc/apt"
    files = [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*.list"))]
    for f in files:
        if f.is_file():
            for line in f.read_text(errors="replace").splitlines():
                parts = re.sub(r"\[[^\]]*\]", "", line.split("#", 1)[0]).split()
                if len(parts) >= 3 and parts[0] == "deb":
                    entries.append((parts[1], [parts[2]]))
    for f in sorted((apt / "sources.list.d").glob("*.sources")):
        for stanza in re.split(r"\n\s*\n", f.read_text(errors="replace")):
            fields = dict(
                (k.strip().lower(), v.strip())
                for k, _, v in (
                    ln.partition(":") for ln in stanza.splitlines() if not ln.startswith("#")
                )
                if v
            )
            if "deb" in fields.get("types", "").split() and "uris" in fields:
                entries.extend(
                    (uri, fields.get("suites", "").split()) for uri in fields["uris"].split()
                )
    for uri, suites in entries:
        if suite in suites and "security" not in uri:
            return uri.rstrip("/")
    raise SandboxError(
        f"no apt source for Debian {suite!r} found under {apt}; pass --mirror URL "
        "(a Debian mirror this machine can reach)"
    )


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
            labels = (found.get("Config") or {}).get("Labels") or {}
            if labels.get(PACKAGES_LABEL) == packages_digest(packages):
                return str(found["Id"])
        except docker.errors.ImageNotFound:
            pass
    if shutil.which("debootstrap") is None:
        raise SandboxError(
            "debootstrap is not installed: `apt-get install debootstrap` (or run "
            "`bash scripts/setup.sh`, which does it)"
        )
    if os.geteuid() != 0:
        raise SandboxError("building the base image needs root (debootstrap creates device files)")
    mirror = mirror or apt_mirror()
    with tempfile.TemporaryDirectory(prefix="agentenv-base-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        log.info("image.debootstrap", mirror=mirror, packages=packages)
        cmd = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(packages)}",
            BASE_SUITE,
            str(rootfs),
            mirror,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            logfile = rootfs / "debootstrap/debootstrap.log"
            detail = logfile.read_text(errors="replace")[-3000:] if logfile.exists() else ""
            raise SandboxError(
                f"debootstrap from {mirror} failed ({proc.returncode}):\n"
                f"{proc.stderr[-3000:]}\n{detail}"
            )
        # Smaller image, same behaviour: apt lists and caches are rebuilt on demand.
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for p in (rootfs / junk).glob("*"):
                if p.is_file():
                    p.unlink()
        tarball = Path(tmp) / "rootfs.tar"
        subprocess.run(
            ["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(tarball), "."], check=True
        )
        repo, _, version = tag.rpartition(":")
        changes = [
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "ENV LANG=C.UTF-8",
            "WORKDIR /workspace",
            'CMD ["/bin/bash"]',
            f"LABEL {PACKAGES_LABEL}={packages_digest(packages)} agentenv.kind=base",
        ]
        result = engine.api.import_image_from_file(
            str(tarball), repository=repo or tag, tag=version or "latest", changes=changes
        )
    image = engine.api.inspect_image(tag)
    log.info("image.built", image=tag, id=image["Id"], result=str(result)[-200:])
    return str(image["Id"])
