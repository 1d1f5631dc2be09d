"""The agent's sandbox as tasks get it by default: an unprivileged user on a read-only root
filesystem whose only writable places (the workdir and /tmp) are bounded; and the checker
sandbox's ability to run a command as that user."""

from __future__ import annotations

import io
import tarfile
from collections.abc import AsyncIterator

import anyio
import pytest

from agentenv.sandbox import ExecUserError, SandboxError, SandboxSpec
from agentenv.sandbox.docker import DockerSandbox, get_engine

pytestmark = pytest.mark.anyio

AGENT = "1000:1000"


@pytest.fixture(scope="module")
async def box() -> AsyncIterator[DockerSandbox]:
    spec = SandboxSpec(user=AGENT, read_only=True, disk="64m", tmp_size="32m")
    async with await DockerSandbox.create(spec) as sandbox:
        yield sandbox


async def test_runs_as_the_agent_without_privileges(box: DockerSandbox) -> None:
    ids = (await box.exec("id -u; id -g; id -G")).stdout.split()
    assert ids == ["1000", "1000", "1000"]
    status = (await box.exec("grep -E '^(CapEff|NoNewPrivs)' /proc/self/status")).stdout
    assert "0000000000000000" in status and "NoNewPrivs:\t1" in status


async def test_root_filesystem_is_read_only(box: DockerSandbox) -> None:
    for path in ("/usr/bin/python3", "/etc/ld.so.preload", "/usr/local/bin/pytest", "/var/tmp/x"):
        r = await box.exec(f"echo x > {path}")
        assert r.exit_code != 0, path
        assert "Read-only file system" in r.stderr or "Permission denied" in r.stderr
    # not even the files the image left world-writable
    assert (await box.exec("find / -xdev -writable -type f 2>/dev/null | head -3")).stdout == ""


async def test_workdir_and_tmp_are_writable_and_bounded(box: DockerSandbox) -> None:
    assert (await box.exec("echo hi > /workspace/a && echo hi > /tmp/a")).ok
    full = await box.exec("head -c 100M /dev/zero > /workspace/big", timeout=60)
    assert full.exit_code != 0 and "No space left" in full.stderr
    assert (await box.exec("head -c 100M /dev/zero > /tmp/big", timeout=60)).exit_code != 0
    await box.exec("rm -f /workspace/big /tmp/big")


async def test_container_log_is_capped(box: DockerSandbox) -> None:
    engine = await get_engine()
    info = await engine.run(engine.api.inspect_container, box.id)
    log = info["HostConfig"]["LogConfig"]
    assert log["Type"] == "json-file" and log["Config"]["max-size"] == "1m"


async def test_upload_tar_and_download_reach_the_workdir_volume(box: DockerSandbox) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = b"print('hi')\n"
        info = tarfile.TarInfo("pkg/mod.py")
        info.size, info.uid, info.gid = len(data), 1000, 1000
        tar.addfile(info, io.BytesIO(data))
    await box.upload_tar(buf.getvalue(), "/workspace")
    assert (await box.exec("python3 pkg/mod.py && echo more >> pkg/mod.py")).stdout == "hi\n"
    await box.pause()
    try:
        archive = await box.download("/workspace/pkg")  # readable while frozen
    finally:
        await box.resume()
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        assert "pkg/mod.py" in tar.getnames()


async def test_switching_user_needs_the_capabilities() -> None:
    # the agent's own sandbox cannot become anyone else
    spec = SandboxSpec(user=AGENT, read_only=True)
    async with await DockerSandbox.create(spec) as agent:
        with pytest.raises(ExecUserError) as refused:
            await agent.exec("id -u", user="0:0")
        assert refused.value.reason == "not_permitted"
    # a checker sandbox (root that may drop) runs one command as the agent
    spec = SandboxSpec(user="0:0", cap_add=("SETUID", "SETGID"))
    async with await DockerSandbox.create(spec) as checker:
        r = await checker.exec("id -u; id -G; grep CapEff /proc/self/status", user=AGENT)
        lines = r.stdout.split("\n")
        assert lines[0] == "1000" and lines[1] == "1000"
        assert lines[2].split()[1] == "0000000000000000"
        assert (await checker.exec("id -u")).stdout.strip() == "0"
        with pytest.raises(ExecUserError) as unknown:  # no such name in the image
            await checker.exec("true", user="agent")
        assert unknown.value.reason == "unknown"
        named = await checker.exec("id -u; id -G", user="nobody")  # names resolve in the image
        assert named.stdout.split() == ["65534", "65534"]


async def test_the_agent_cannot_take_the_sandbox_down() -> None:
    spec = SandboxSpec(user=AGENT, read_only=True)
    async with await DockerSandbox.create(spec) as agent:
        owners = (await agent.exec("ps -o user=,pid= -p 1; ps -o user= --ppid 1")).stdout.split()
        assert owners[0] == "root" and owners[1] == "1" and set(owners[2:]) == {"root"}
        # kill everything it may signal: its own processes, the executor running this included
        with pytest.raises(SandboxError, match="executor died"):
            await agent.exec("kill -9 1; kill -9 -1; sleep 5", timeout=30)
        assert (await agent.exec("echo still here")).stdout == "still here\n"


async def test_a_new_executor_never_imports_from_the_workdir() -> None:
    # a module in the workdir shadowing one the executor imports must not run in it
    spec = SandboxSpec(user=AGENT, read_only=True)
    async with await DockerSandbox.create(spec) as box:
        for name in ("json", "select", "subprocess", "struct"):
            await box.write_file(f"/workspace/{name}.py", b"import os\nos._exit(9)\n")
        out: dict[str, str] = {}

        async def run(word: str, delay: float) -> None:
            out[word] = (await box.exec(f"sleep {delay} && echo {word}")).stdout

        async with anyio.create_task_group() as tg:  # two at once: a second executor starts
            tg.start_soon(run, "a", 1.0)
            tg.start_soon(run, "b", 0.1)
        assert out == {"a": "a\n", "b": "b\n"}
