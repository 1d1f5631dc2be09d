"""The host's side of installing a harness: its npm and PyPI packages downloaded here, from
the registries this machine reaches, for the sandbox image's platform, into folders a build
copies into the image. Nothing is fetched inside the sandbox, and no package's install
script runs on the host (npm's are ignored; PyPI's are wheels only)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel

from agentenv.sandbox.errors import ImageUnavailable

NPM_ARCH = {"x86_64": "x64", "aarch64": "arm64"}
WHEEL_ARCH = {"x86_64": "x86_64", "aarch64": "aarch64"}


class HarnessInstallError(ImageUnavailable):
    """A harness could not be installed into an image: what is missing and the command
    that provides it, or the package manager's own error."""


class Platform(BaseModel):
    """What the image runs, as probed in a sandbox of it."""

    debian: bool  # /etc/debian_version and apt-get are there
    arch: str  # uname -m
    python: tuple[int, int] | None = None  # python3's version, when it has one
    glibc: tuple[int, int] | None = None  # the C library's version, when it is glibc
    user: str = ""  # the image's own USER (restored after the build's root steps)


def _run(cmd: list[str], what: str, *, timeout_s: float) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise HarnessInstallError(f"{what}: `{' '.join(cmd)}` took over {timeout_s:g} s") from e
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout)[-2000:]
        raise HarnessInstallError(f"{what}: `{' '.join(cmd)}` failed ({proc.returncode}):\n{tail}")


def npm_tree(
    packages: tuple[str, ...], dest: Path, platform: Platform, *, timeout_s: float
) -> None:
    """``npm install`` of ``packages`` (name@version) with their dependencies into
    ``dest/node_modules``, choosing optional platform packages for the image (Linux, its CPU,
    glibc), install scripts off."""
    npm = shutil.which("npm")
    if npm is None:
        raise HarnessInstallError(
            "npm is not installed on this host (it downloads the harness's packages): "
            "`apt-get install npm` (or install Node.js from nodejs.org)"
        )
    cpu = NPM_ARCH.get(platform.arch)
    if cpu is None:
        raise HarnessInstallError(f"no npm packages for the image's CPU {platform.arch!r}")
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        npm, "install", "--prefix", str(dest), "--ignore-scripts", "--no-audit", "--no-fund",
        "--omit=dev", "--no-package-lock", "--os=linux", f"--cpu={cpu}", "--libc=glibc",
        *packages,
    ]  # fmt: skip
    _run(cmd, f"downloading npm packages {', '.join(packages)}", timeout_s=timeout_s)


def pip_tree(
    packages: tuple[str, ...], dest: Path, platform: Platform, *, timeout_s: float
) -> None:
    """``pip install --target dest`` of ``packages`` as wheels built for the image's Python
    and platform (no sdist is built, nothing is compiled on the host)."""
    if platform.python is None:
        raise HarnessInstallError(
            "the image has no python3, which this harness runs on: add it to the image "
            "(`apt-get install python3` in its Dockerfile)"
        )
    try:
        import pip  # noqa: F401  (only asking whether it is there)
    except ImportError as e:
        raise HarnessInstallError(
            f"pip is not installed for {sys.executable} on this host (it downloads the "
            f"harness's wheels): `{sys.executable} -m ensurepip`"
        ) from e
    arch = WHEEL_ARCH.get(platform.arch)
    if arch is None or platform.glibc is None:
        raise HarnessInstallError(
            f"no wheels for the image's platform ({platform.arch}, "
            f"{'glibc' if platform.glibc else 'not glibc'})"
        )
    major, minor = platform.python
    tags = [f"manylinux_2_{m}_{arch}" for m in range(17, platform.glibc[1] + 1)]
    cmd = [
        sys.executable, "-m", "pip", "install", "--target", str(dest), "--only-binary=:all:",
        "--python-version", f"{major}.{minor}", "--implementation", "cp",
        "--abi", f"cp{major}{minor}", "--abi", "abi3", "--abi", "none",
        *(x for tag in [*tags, f"manylinux2014_{arch}"] for x in ("--platform", tag)),
        "--no-compile", "--disable-pip-version-check", "--no-warn-script-location", "--quiet",
        *packages,
    ]  # fmt: skip
    _run(cmd, f"downloading PyPI packages {', '.join(packages)}", timeout_s=timeout_s)
    # its console scripts name the host's Python: of no use in the image
    shutil.rmtree(dest / "bin", ignore_errors=True)
