"""The cgroup freezer written without the engine (how ``Sandbox.pause`` freezes where this
host may): a sandbox frozen this way uses no CPU and thaws; frozen behind the engine's back
it is still closed, removed by a job's cancellation, seen paused and resumed by a new
process that attaches to it, and collected by gc after its owner was SIGKILLed; where its
cgroup cannot be written, pausing falls back to the engine with a log line. On whichever
backend the run uses (the fallback: Docker's, whose engine is not in the test's mount
namespace)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import anyio
import pytest

from agentenv.sandbox import SandboxSpec, cgroup, create, get_backend
from tests.helpers import start_script

pytestmark = pytest.mark.anyio

SPINNING = 10_000_000
"""CPU-ns over 0.5 s that only a running busy loop reaches (alone it takes ~0.5 CPU-s, beside
CI's other stage under 0.1; frozen it takes exactly 0)."""


async def _cpu_over(box_id: str, seconds: float) -> int:
    before = cgroup.cpu_usage_ns(box_id)
    await anyio.sleep(seconds)
    after = cgroup.cpu_usage_ns(box_id)
    assert before is not None and after is not None
    return after - before


def _rows() -> dict[str, dict[str, str]]:
    return {r.id: {"status": r.status, "stale": r.stale} for r in get_backend().leftovers()}


async def test_a_direct_freeze_stops_a_busy_loop_and_a_frozen_sandbox_still_closes() -> None:
    box = await create(SandboxSpec())
    closed = False
    try:
        await box.exec("nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &")
        path = cgroup.freezer(box.id)
        assert path is not None, "the engine is local: its cgroups are this machine's"
        assert await _cpu_over(box.id, 0.5) > SPINNING
        await cgroup.set_frozen(path, True)
        assert cgroup.is_frozen(path)
        assert await _cpu_over(box.id, 0.5) == 0
        await cgroup.set_frozen(path, False)
        assert not cgroup.is_frozen(path)
        assert await _cpu_over(box.id, 0.5) > SPINNING
        # paused the default way (directly), the sandbox is still removed, without a hang
        await box.pause()
        assert cgroup.is_frozen(path)
        with anyio.fail_after(30):
            await box.close()
        closed = True
        assert cgroup.freezer(box.id) is None
    finally:
        if not closed:
            await box.close()


async def test_a_cancelled_job_removes_its_directly_frozen_sandboxes() -> None:
    ids: list[str] = []

    async def episode() -> None:
        async with await create(SandboxSpec()) as box:
            await box.exec("nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &")
            await box.pause()  # the model "thinks" for an hour
            ids.append(box.id)
            await anyio.sleep(3600)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(episode)
            while len(ids) < 3:
                await anyio.sleep(0.05)
            assert all(_rows()[i]["status"] == "paused" for i in ids)
            tg.cancel_scope.cancel()  # Ctrl-C, or a job's deadline
    left = _rows()
    assert [i for i in ids if i in left] == []


OWNER = """
    import json, anyio
    from agentenv.sandbox import SandboxSpec, create

    async def main():
        box = await create(SandboxSpec())
        await box.exec("nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &")
        await box.pause()
        print(json.dumps({"id": box.id}), flush=True)
        await anyio.sleep(600)

    anyio.run(main)
"""

ATTACHER = """
    import json, sys, anyio
    from agentenv.sandbox import SandboxSpec, attach, cgroup

    async def main():
        box = await attach(sys.argv[1], SandboxSpec())
        seen = box.paused
        await box.resume()
        before = cgroup.cpu_usage_ns(box.id)
        await anyio.sleep(0.5)
        spun = cgroup.cpu_usage_ns(box.id) - before
        said = (await box.exec("echo alive")).stdout
        await box.pause()
        box.detach()  # left frozen again, for gc
        print(json.dumps({"paused": seen, "spun": spun, "said": said}))

    anyio.run(main)
"""


def test_a_frozen_sandbox_of_a_killed_owner_is_attached_then_collected() -> None:
    proc, line = start_script(OWNER, f"frozen-{os.getpid()}")
    box_id = json.loads(line)["id"]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    try:
        assert _rows()[box_id] == {"status": "paused", "stale": "owner gone"}
        path = cgroup.freezer(box_id)
        assert path is not None and cgroup.is_frozen(path)

        # a new process takes it over: it knows it is paused though the engine says running
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(ATTACHER), box_id],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert seen["paused"] is True and seen["said"] == "alive\n"
        assert seen["spun"] > SPINNING  # resumed: the busy loop ran again
        assert cgroup.is_frozen(path)

        gc = subprocess.run(
            [sys.executable, "-m", "agentenv", "gc", "--backend", get_backend().name],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert gc.returncode == 0, gc.stderr
        assert box_id not in _rows()
    finally:
        for row in get_backend().leftovers():
            if row.id == box_id:
                get_backend().remove(row)


FALLBACK = """
    import json, logging, subprocess, anyio
    from agentenv.sandbox import SandboxSpec, cgroup
    from agentenv.sandbox.docker import DockerSandbox, get_engine

    said = []
    class Keep(logging.Handler):
        def emit(self, record):
            said.append([record.getMessage(), getattr(record, "agentenv_fields", {})])
    logging.getLogger("agentenv").addHandler(Keep())
    logging.getLogger("agentenv").setLevel(logging.INFO)

    async def cpu(box, s):
        before = await box.cpu_usage_ns()
        await anyio.sleep(s)
        return await box.cpu_usage_ns() - before

    async def main():
        engine = await get_engine()
        async with await DockerSandbox.create(SandboxSpec()) as box:
            await box.exec("nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &")
            where = str(cgroup.freezer(box.id).parent)
            # read-only for this process only (a private mount namespace): the engine,
            # outside it, can still freeze the container
            subprocess.run(["mount", "--bind", where, where], check=True)
            subprocess.run(["mount", "-o", "remount,bind,ro", where], check=True)
            assert cgroup.freezer(box.id) is None
            await box.pause()
            state = (await engine.run(engine.api.inspect_container, box.id))["State"]
            paused_cpu = await cpu(box, 0.5)
            await box.resume()
            resumed_cpu = await cpu(box, 0.5)
            print(json.dumps({"engine_paused": state["Paused"], "paused_cpu": paused_cpu,
                              "resumed_cpu": resumed_cpu, "said": said}))

    anyio.run(main)
"""


@pytest.mark.on_docker
def test_a_cgroup_this_host_cannot_write_falls_back_to_the_engine_with_a_log_line() -> None:
    private = ["unshare", "--mount", "--propagation", "private"]
    done = subprocess.run(
        [*private, sys.executable, "-c", textwrap.dedent(FALLBACK)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["engine_paused"] is True  # the engine froze it
    # frozen: not a nanosecond; thawed: it runs (a share of a CPU, on a host CI keeps busy)
    assert seen["paused_cpu"] == 0 and seen["resumed_cpu"] > 20_000_000
    (line,) = [fields for message, fields in seen["said"] if message == "sandbox.freeze_by_engine"]
    assert "no cgroup freezer" in line["reason"]


@pytest.mark.no_docker
def test_no_freezer_for_an_unknown_container() -> None:
    assert cgroup.freezer("0" * 64) is None
