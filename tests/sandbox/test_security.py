"""The security defaults hold inside a real container, on the backend the suite runs on
(Docker, or Podman with AGENTENV_BACKEND=podman: `.ci/run` runs this module on both)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from agentenv.runner.episode import CHECKER_CPU_SHARES, checker_spec
from agentenv.sandbox import Sandbox, SandboxSpec, create, get_backend
from agentenv.sandbox.docker import DockerSandbox, get_engine
from agentenv.sandbox.labels import EXPIRES, KIND, OWNER, RUN
from agentenv.tasks import load_task

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def box() -> AsyncIterator[Sandbox]:
    async with await create() as sandbox:
        yield sandbox


async def test_no_network_route_out(box: Sandbox) -> None:
    routes = await box.exec("tail -n +2 /proc/net/route")
    assert routes.stdout.strip() == ""
    interfaces = await box.exec("ls /sys/class/net")
    assert interfaces.stdout.split() == ["lo"]
    probe = await box.exec(
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)\"",
        timeout=20,
    )
    assert probe.exit_code != 0
    assert "unreachable" in probe.stderr.lower()


async def test_no_docker_socket(box: Sandbox) -> None:
    result = await box.exec(
        "ls /var/run/docker.sock /run/docker.sock 2>&1;"
        " find / -name docker.sock -not -path '/proc/*' 2>/dev/null"
    )
    assert "No such file" in result.stdout
    assert "docker.sock\n" not in result.stdout.replace("No such file", "")


async def test_no_capabilities_and_no_new_privileges(box: Sandbox) -> None:
    status = (
        await box.exec("grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status")
    ).stdout
    fields = dict(line.split(":\t") for line in status.strip().splitlines())
    assert fields["CapEff"] == fields["CapPrm"] == fields["CapBnd"] == "0000000000000000"
    assert fields["NoNewPrivs"] == "1"
    # root without CAP_CHOWN cannot give files away
    assert (await box.exec("touch /tmp/f && chown nobody /tmp/f")).exit_code != 0


async def test_added_capability_is_the_only_one() -> None:
    async with await create(SandboxSpec(cap_add=("CHOWN",))) as sandbox:
        assert (await sandbox.exec("touch /tmp/f && chown nobody /tmp/f")).exit_code == 0
        eff = (await sandbox.exec("grep CapEff /proc/self/status")).stdout.split()[1]
        assert int(eff, 16) == 1 << 0  # CAP_CHOWN is bit 0


async def test_init_is_pid_1_and_reaps_orphans(box: Sandbox) -> None:
    init = (await box.exec("cat /proc/1/comm")).stdout.strip()
    assert init in {"docker-init", "tini", "podman-init", "catatonit"}, init
    # The orphan's parent exits at once; if nobody reaped it, it would stay a zombie.
    await box.exec("sh -c 'sleep 0.2 &' ; sleep 0.6")
    zombies = await box.exec("ps -eo stat,args | awk '$1 ~ /^Z/' ")
    assert zombies.stdout.strip() == ""


async def test_limits_hold_inside_and_the_sandbox_is_labelled(box: Sandbox) -> None:
    # what the kernel enforces, read from inside (cgroup v1 here, v2 where it is unified)
    script = (
        "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max;"
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null"
        " || cat /sys/fs/cgroup/memory.max;"
        "q=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null);"
        "p=$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us 2>/dev/null);"
        'if [ -n "$q" ]; then echo "$q $p"; else cat /sys/fs/cgroup/cpu.max; fi;'
        "grep NoNewPrivs /proc/self/status"
    )
    pids, memory, cpu, nnp = (await box.exec(script)).stdout.splitlines()
    assert int(pids) == box.spec.pids_limit
    assert int(memory) == box.spec.memory
    quota, period = (int(x) for x in cpu.split())
    assert quota / period == box.spec.cpus
    assert nnp.split() == ["NoNewPrivs:", "1"]
    row = {r.id: r for r in get_backend(box.spec.backend).leftovers()}[box.id]
    assert row.kind == "sandbox" and row.run and row.owner and row.expires > time.time()


async def test_a_checker_yields_contended_cores_to_agents() -> None:
    # the weight as the kernel holds it: cpu.shares (v1), or the engine's conversion of it to
    # cpu.weight (v2: 1 + (shares - 2) * 9999 / 262142)
    spec = SandboxSpec(cpu_shares=CHECKER_CPU_SHARES)
    async with await create(spec) as box:
        read = "cat /sys/fs/cgroup/cpu/cpu.shares 2>/dev/null || cat /sys/fs/cgroup/cpu.weight"
        weight = int((await box.exec(read)).stdout)
        v2 = 1 + (CHECKER_CPU_SHARES - 2) * 9999 // 262142
        assert weight in (CHECKER_CPU_SHARES, v2)
    task = load_task(Path(__file__).parents[2] / "environments" / "duration-parser")
    checker = checker_spec(task.image, task, spec.backend)
    assert checker.cpu_shares == CHECKER_CPU_SHARES < SandboxSpec().cpu_shares == 1024


@pytest.mark.on_docker
async def test_docker_sets_what_it_was_asked_to() -> None:
    """The Docker backend's container, as the engine records it."""
    box = await DockerSandbox.create(SandboxSpec(backend="docker"))
    async with box:
        engine = await get_engine()
        info = await engine.run(engine.api.inspect_container, box.id)
        host = info["HostConfig"]
        assert host["NetworkMode"] == "none"
        assert host["CapDrop"] == ["ALL"]
        assert host["SecurityOpt"] == ["no-new-privileges"]
        assert host["PidsLimit"] == box.spec.pids_limit
        assert host["Memory"] == box.spec.memory
        assert host["NanoCpus"] == int(box.spec.cpus * 1e9)
        assert host["Init"] is True
        assert not host.get("Binds") and not info.get("Mounts")
        labels = info["Config"]["Labels"]
        assert labels[KIND] == "sandbox" and labels[RUN] and labels[OWNER] and labels[EXPIRES]


async def test_fork_bomb_is_contained_and_sandbox_still_closes() -> None:
    sandbox = await create(SandboxSpec(pids_limit=64))
    try:
        bomb = await sandbox.exec("b() { b | b & }; b", timeout=5)
        assert bomb.exit_code is not None
        # The engine host is fine and the sandbox still answers (or at worst says why not).
        procs = await sandbox.exec("ps -e --no-headers | wc -l", timeout=20)
        # (the bomb's leftovers may still hold every pid: then the executor says it cannot fork)
        assert procs.exit_code == 0 or any(
            why in procs.stderr for why in ("fork", "Resource temporarily unavailable")
        )
        assert int(procs.stdout.strip() or 0) <= 64
    finally:
        await sandbox.close()
    assert sandbox.id not in {r.id for r in get_backend(sandbox.spec.backend).leftovers()}


async def test_memory_hog_is_oom_killed_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where the user ran agentenv: nothing is left there
    async with await create(SandboxSpec(memory="128m")) as sandbox:
        hog = await sandbox.exec("python3 -c 'b = bytearray(1 << 30); print(len(b))'", timeout=60)
        assert hog.exit_code == 137
        assert hog.oom_killed
        assert "1073741824" not in hog.stdout
        # Only the hog died: the sandbox goes on.
        assert (await sandbox.exec("echo alive")).stdout == "alive\n"
    assert list(tmp_path.iterdir()) == []  # Podman's conmon wrote an `oom` file here


async def test_cpu_limit_is_enforced() -> None:
    async with await create(SandboxSpec(cpus=0.5)) as sandbox:
        await sandbox.exec("nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &")
        before, start = await sandbox.cpu_usage_ns(), time.monotonic()
        await anyio.sleep(1.0)
        used = await sandbox.cpu_usage_ns() - before
        elapsed_ns = (time.monotonic() - start) * 1e9
        assert used / elapsed_ns < 0.75  # unlimited, the loop would take a whole core


FORGE = r"""
import json, os, struct
header = json.dumps({"type": "result", "exit_code": 0, "timed_out": False, "truncated": False,
                     "duration_s": 0.1, "stdout_len": 6}).encode()
with open("/proc/%d/fd/1" % os.getppid(), "wb") as out:
    out.write(struct.pack(">II", len(header), 6) + header + b"PASSED")
"""


async def test_commands_cannot_reach_the_executors_pipes(box: Sandbox) -> None:
    # A command that could write to the executor's stdout could forge the next result (say,
    # the verifier's); one that could read its stdin would see hidden test files go by.
    forged = await box.exec(["python3", "-c", FORGE], timeout=30)
    assert forged.exit_code != 0
    assert "Permission denied" in forged.stderr
    assert (await box.exec("echo genuine")).stdout == "genuine\n"
    peek = await box.exec("cat /proc/$PPID/fd/0 </dev/null", timeout=5)
    assert "Permission denied" in peek.stderr
