"""The install layer: built on the task's image from packages the host downloaded, every file
root's and not writable by the agent, outside its workdir; found again at once by its digest;
what it needs and lacks named with the command that provides it."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from agentenv.harnesses import HARNESS_ROOT, harness
from agentenv.harnesses.fetch import HarnessInstallError, Platform, npm_tree
from agentenv.harnesses.images import build
from agentenv.harnesses.install import harness_image
from agentenv.sandbox.backend import sandbox
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.sandbox.spec import SandboxSpec

pytestmark = [pytest.mark.anyio, pytest.mark.on_docker]


async def test_the_layer_is_roots_and_outside_the_workdir(mini_image: str) -> None:
    spec = SandboxSpec(image=mini_image, backend="docker", user="1000:1000", read_only=True)
    async with sandbox(spec) as box:
        # files not root's, or writable by group or others: none
        odd = await box.exec(
            ["find", HARNESS_ROOT, "(", "!", "-user", "root", "-o", "-perm", "/022", ")",
             "!", "-type", "l", "-print", "-quit"]
        )  # fmt: skip
        write = await box.exec(["sh", "-c", f"touch {HARNESS_ROOT}/mini-swe-agent/x"])
        workdir = await box.exec(["ls", "-A", "/workspace"])
        count = await box.exec(["sh", "-c", f"find {HARNESS_ROOT} -name '*.pyc' | head -n 1"])
    assert odd.exit_code == 0 and odd.stdout == "", odd.stdout
    assert write.exit_code != 0  # the agent cannot change its harness
    assert workdir.stdout == ""  # nothing of the harness in the agent's folder
    assert count.stdout.strip(), "its bytecode was compiled at build time"


async def test_a_second_call_finds_the_image(mini_image: str) -> None:
    started = time.monotonic()
    again = await harness_image(BASE_IMAGE, harness("mini-swe-agent"), backend="docker")
    assert again == mini_image
    assert time.monotonic() - started < 5  # no download, no build


async def test_an_image_not_on_the_engine_is_named() -> None:
    with pytest.raises(Exception, match="agentenv/no-such-image:x"):
        await harness_image("agentenv/no-such-image:x", harness("codex"), backend="docker")


async def test_a_backend_other_than_docker_or_podman_is_refused() -> None:
    with pytest.raises(HarnessInstallError, match="docker or podman backend"):
        await harness_image(BASE_IMAGE, harness("codex"), backend="k8s")


def test_npm_missing_on_the_host_names_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without npm
    platform = Platform(debian=True, arch="x86_64")
    with pytest.raises(HarnessInstallError, match="apt-get install npm"):
        npm_tree(("@openai/codex@0.171.0",), tmp_path / "tree", platform, timeout_s=5)


async def test_a_non_debian_image_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\nRUN rm /etc/debian_version /usr/bin/apt-get\n"
    )
    image = "agentenv/test-harness-not-debian:1"
    await build("docker", image, tmp_path / "Dockerfile", timeout_s=300)
    try:
        with pytest.raises(HarnessInstallError, match="Debian-like"):
            await harness_image(image, harness("codex"), backend="docker")
    finally:
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True)
