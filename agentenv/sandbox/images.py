"""Image names and the offline base image's recipe, the same for every backend: which
packages, the Debian mirror, the debootstrap root filesystem, and the names that tasks'
Dockerfiles are built as. Each backend imports and builds with its own engine."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from agentenv.log import get_logger
from agentenv.sandbox.errors import SandboxError

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


def base_rootfs(tmp: Path, *, mirror: str | None, packages: tuple[str, ...]) -> Path:
    """Make the base image's root filesystem with debootstrap in ``tmp`` and return a tar
    of it, for an engine to import. Blocking (minutes); needs root and debootstrap."""
    if shutil.which("debootstrap") is None:
        raise SandboxError(
            "debootstrap is not installed: `apt-get install debootstrap` (or run "
            "`bash scripts/setup.sh`, which does it)"
        )
    if os.geteuid() != 0:
        raise SandboxError("building the base image needs root (debootstrap creates device files)")
    mirror = mirror or apt_mirror()
    rootfs = tmp / "rootfs"
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
    tarball = tmp / "rootfs.tar"
    subprocess.run(
        ["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(tarball), "."], check=True
    )
    return tarball


def base_changes(packages: tuple[str, ...]) -> list[str]:
    """The Dockerfile instructions an engine applies when importing the base rootfs."""
    return [
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ENV LANG=C.UTF-8",
        "WORKDIR /workspace",
        'CMD ["/bin/bash"]',
        f"LABEL {PACKAGES_LABEL}={packages_digest(packages)} agentenv.kind=base",
    ]
