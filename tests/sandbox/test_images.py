"""Image resolution without a registry, the offline base image's apt mirror, and the
fallback exec path on an image without python3."""

from __future__ import annotations

import os
from pathlib import Path

import docker.errors
import pytest

from agentenv.sandbox import ImageUnavailable, SandboxError, SandboxSpec
from agentenv.sandbox.docker import DockerSandbox, get_engine
from agentenv.sandbox.docker.images import resolve_image
from agentenv.sandbox.images import (
    BASE_IMAGE,
    BASE_PACKAGES,
    PACKAGES_LABEL,
    apt_mirror,
    packages_digest,
)

pytestmark = pytest.mark.anyio


async def test_image_without_python_falls_back_to_docker_exec(no_python_image: str) -> None:
    async with await DockerSandbox.create(SandboxSpec(image=no_python_image)) as box:
        assert box.exec_mode == "docker-exec"
        assert (await box.exec("command -v python3 || echo none")).stdout == "none\n"
        await box.write_file("/workspace/x.txt", b"via docker exec")
        assert await box.read_file("/workspace/x.txt") == b"via docker exec"


async def test_failing_dockerfile_reports_the_build_error(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nRUN echo about-to-fail && exit 7\n")
    engine = await get_engine()
    with pytest.raises(ImageUnavailable) as info:
        await resolve_image(engine, "agentenv-test/broken:1", tmp_path / "Dockerfile")
    assert "agentenv-test/broken:1" in str(info.value)
    assert "about-to-fail" in str(info.value)


async def test_missing_dockerfile_is_named(tmp_path: Path) -> None:
    engine = await get_engine()
    with pytest.raises(ImageUnavailable, match="does not exist"):
        await resolve_image(engine, "agentenv-test/absent:1", tmp_path / "Dockerfile")


async def test_base_image_has_what_tasks_need() -> None:
    engine = await get_engine()
    info = await engine.run(engine.api.inspect_image, BASE_IMAGE)
    assert info["Config"]["Labels"][PACKAGES_LABEL] == packages_digest(BASE_PACKAGES)
    async with await DockerSandbox.create() as box:
        tools = await box.exec(
            "for t in bash python3 git ps tini update-ca-certificates;"
            " do command -v $t >/dev/null || echo missing $t; done"
        )
        assert tools.stdout == ""


def test_apt_mirror_reads_both_source_formats(tmp_path: Path) -> None:
    apt = tmp_path / "etc/apt"
    (apt / "sources.list.d").mkdir(parents=True)
    (apt / "sources.list").write_text(
        "# comment\n"
        "deb [arch=amd64] http://security.example/debian-security bookworm-security main\n"
    )
    (apt / "sources.list.d/debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb deb-src\n# a comment\nURIs: http://mirror.example/debian/\n"
        "Suites: bookworm bookworm-updates\nComponents: main\n"
    )
    assert apt_mirror("bookworm", root=tmp_path) == "http://mirror.example/debian"
    (apt / "sources.list").write_text("deb http://old.example/debian bookworm main\n")
    assert apt_mirror("bookworm", root=tmp_path) == "http://old.example/debian"


def test_apt_mirror_missing_says_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "etc/apt").mkdir(parents=True)
    with pytest.raises(SandboxError, match="--mirror"):
        apt_mirror("bookworm", root=tmp_path)


async def test_an_image_built_from_a_changed_dockerfile_folder_is_rebuilt(tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("one\n")
    (tmp_path / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nCOPY data.txt /data.txt\n")
    spec = SandboxSpec(image="agentenv-test/context:1", dockerfile=tmp_path / "Dockerfile")
    engine = await get_engine()
    try:
        async with await DockerSandbox.create(spec) as box:
            assert (await box.exec("cat /data.txt")).stdout == "one\n"
        first = (await engine.run(engine.api.inspect_image, "agentenv-test/context:1"))["Id"]
        (tmp_path / "data.txt").write_text("two\n")
        async with await DockerSandbox.create(spec) as box:
            assert (await box.exec("cat /data.txt")).stdout == "two\n"
        with pytest.raises(docker.errors.ImageNotFound):  # the stale one is not left dangling
            await engine.run(engine.api.inspect_image, first)
    finally:
        await engine.run(engine.api.remove_image, "agentenv-test/context:1", force=True)


async def test_uploaded_files_belong_to_root_in_the_sandbox(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x")
    os.chown(tmp_path / "f.txt", 1234, 1234)
    async with await DockerSandbox.create() as box:
        await box.upload(tmp_path, "/workspace/up")
        assert (await box.exec("stat -c %u:%g /workspace/up/f.txt")).stdout == "0:0\n"


async def test_task_images_are_named_by_their_build_context(tmp_path: Path) -> None:
    # two copies of one task (same image name, same Dockerfile folder) share one image; a
    # copy whose folder differs gets its own tag instead of rebuilding the shared one back
    # and forth; a task naming no image never overwrites the base image
    from agentenv.runner.episode import prepare, release
    from agentenv.tasks import load_task

    def task(name: str, data: str, image: str | None = "agentenv-test/copies:1") -> Path:
        folder = tmp_path / name / "same-task"
        (folder / "env").mkdir(parents=True)
        (folder / "env" / "data.txt").write_text(data)
        (folder / "env" / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nCOPY data.txt /data.txt\n")
        (folder / "instruction.md").write_text("Look at /data.txt.\n")
        line = f'image = "{image}"\n' if image else ""
        (folder / "task.toml").write_text(f'{line}dockerfile = "env/Dockerfile"\n')
        return folder

    engine = await get_engine()
    base = (await engine.run(engine.api.inspect_image, BASE_IMAGE))["Id"]
    names: dict[str, str] = {}
    try:
        for copy, data, image in (
            ("a", "one\n", "agentenv-test/copies:1"),
            ("b", "one\n", "agentenv-test/copies:1"),
            ("c", "two\n", "agentenv-test/copies:1"),
            ("d", "one\n", None),
        ):
            prepared = await prepare(load_task(task(copy, data, image)))
            try:
                names[copy] = prepared.image
                async with await DockerSandbox.create(SandboxSpec(image=prepared.image)) as box:
                    assert (await box.exec("cat /data.txt")).stdout == data
            finally:
                await release(prepared)
        assert names["a"] == names["b"] != names["c"]
        assert names["a"].startswith("agentenv-test/copies:ctx-")
        assert names["d"].startswith("agentenv/task-same-task:ctx-")
        assert (await engine.run(engine.api.inspect_image, BASE_IMAGE))["Id"] == base
    finally:
        for name in set(names.values()):
            await engine.run(engine.api.remove_image, name, force=True)
