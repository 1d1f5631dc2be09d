"""Pausing freezes a sandbox: its CPU counter stops while paused and moves again after, on
both ways of freezing (``SandboxSpec.freezer``: straight through the container's cgroup, or
by the engine), and whoever lists sandboxes sees it paused either way."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from agentenv.sandbox import Sandbox, SandboxPaused, SandboxSpec, cgroup, create, get_backend

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module", params=["auto", "engine"])
async def busy(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    async with await create(SandboxSpec(freezer=request.param)) as box:
        await box.exec("nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &")
        yield box


async def _cpu_over(box: Sandbox, seconds: float) -> int:
    before = await box.cpu_usage_ns()
    await anyio.sleep(seconds)
    return await box.cpu_usage_ns() - before


def _status(box: Sandbox) -> str:
    return {r.id: r.status for r in get_backend(box.spec.backend).leftovers()}[box.id]


async def test_paused_busy_loop_uses_no_cpu_and_resumes(busy: Sandbox) -> None:
    running = await _cpu_over(busy, 0.5)
    # the loop really spins (a share of a core even on a loaded host; paused, exactly 0)
    assert running > 20_000_000

    await busy.pause()
    assert busy.paused
    paused = await _cpu_over(busy, 1.0)
    assert paused == 0

    await busy.resume()
    assert not busy.paused
    assert await _cpu_over(busy, 0.5) > 20_000_000


async def test_commands_refused_while_paused(busy: Sandbox) -> None:
    await busy.pause()
    await busy.pause()  # idempotent
    try:
        with pytest.raises(SandboxPaused, match="resume"):
            await busy.exec("true")
        with pytest.raises(SandboxPaused):
            await busy.read_file("/etc/hostname")
    finally:
        await busy.resume()
    await busy.resume()  # idempotent
    assert (await busy.exec("echo back")).stdout == "back\n"


async def test_others_see_it_paused_whoever_froze_it(busy: Sandbox) -> None:
    await busy.pause()
    try:
        assert _status(busy) == "paused"  # `agentenv sandbox ls`, gc
        path = cgroup.freezer(busy.id)
        assert path is not None and cgroup.is_frozen(path)
    finally:
        await busy.resume()
    assert _status(busy) == "running"
    assert not cgroup.is_frozen(path)


@pytest.mark.on_docker
async def test_an_engine_answer_its_own_state_contradicts_does_not_fail_the_sandbox() -> None:
    # The engine answers 409 ("already paused", "not paused") when the container is already
    # as asked, as it also does under load with a stale view: the container's real state
    # decides, so neither is an error (it was SandboxUnavailable, and failed CI once).
    from agentenv.sandbox.docker import DockerSandbox, get_engine

    engine = await get_engine()
    async with await DockerSandbox.create(SandboxSpec(freezer="engine")) as box:
        await engine.run(engine.api.pause, box.id)  # behind the sandbox's back
        await box.pause()
        assert box.paused
        await engine.run(engine.api.unpause, box.id)
        await box.resume()
        assert not box.paused
        assert (await box.exec("echo alive")).stdout == "alive\n"


def test_a_stale_engine_answer_from_containerd_is_a_conflict_to_reconcile() -> None:
    # Docker 20.10 under load (CI, beside the fault suite): dockerd still thought the container
    # paused after an unpause behind the sandbox's back, and its containerd shim refused with
    # a 500 the sandbox raised instead of looking at the container's real state
    import docker

    from agentenv.sandbox.docker.driver import freeze_conflict

    seen = (
        "Cannot unpause container 8ea8eb8b393f: cannot resume a running process: unknown",
        "Cannot pause container 8ea8eb8b393f: cannot pause a paused container: unknown",
        "Container 8ea8eb8b393f is not paused",
        "Cannot pause container 8ea8eb8b393f: OCI runtime pause failed: unable to freeze: unknown",
    )
    for text in seen:
        assert freeze_conflict(docker.errors.APIError(text)), text
    assert not freeze_conflict(docker.errors.APIError("No such container: 8ea8eb8b393f"))
    assert not freeze_conflict(RuntimeError("cannot resume a running process"))


async def test_pausing_closes_the_executors_a_burst_opened(busy: Sandbox) -> None:
    # each holds ~5 MiB, for as long as the sandbox stays paused
    count = "grep -l 'agentenv-execut[o]r' /proc/[0-9]*/cmdline 2>/dev/null | wc -l"
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(busy.exec, "sleep 0.5")
    assert int((await busy.exec(count)).stdout) >= 3
    await busy.pause()
    await busy.resume()
    with anyio.fail_after(10):
        while int((await busy.exec(count)).stdout) != 1:
            await anyio.sleep(0.05)
