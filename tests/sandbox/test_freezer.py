"""The cgroup freezer written without the engine (issue 14's direct path, not yet what
``Sandbox.pause`` uses): a sandbox frozen this way uses no CPU, thaws, and is still
removed promptly while frozen behind the engine's back. On whichever backend the run uses."""

from __future__ import annotations

import anyio
import pytest

from agentenv.sandbox import SandboxSpec, cgroup, create

pytestmark = pytest.mark.anyio


async def _cpu_over(box_id: str, seconds: float) -> int:
    before = cgroup.cpu_usage_ns(box_id)
    await anyio.sleep(seconds)
    after = cgroup.cpu_usage_ns(box_id)
    assert before is not None and after is not None
    return after - before


async def test_a_direct_freeze_stops_a_busy_loop_and_a_frozen_sandbox_still_closes() -> None:
    box = await create(SandboxSpec())
    closed = False
    try:
        await box.exec("nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &")
        path = cgroup.freezer(box.id)
        assert path is not None, "the engine is local: its cgroups are this machine's"
        assert await _cpu_over(box.id, 0.3) > 100_000_000  # ~0.3 CPU-seconds of the loop
        await cgroup.set_frozen(path, True)
        assert cgroup.is_frozen(path)
        assert await _cpu_over(box.id, 0.5) == 0
        await cgroup.set_frozen(path, False)
        assert not cgroup.is_frozen(path)
        assert await _cpu_over(box.id, 0.3) > 100_000_000
        # frozen behind the engine's back, the sandbox is still removed, without a hang
        await cgroup.set_frozen(path, True)
        with anyio.fail_after(30):
            await box.close()
        closed = True
        assert cgroup.freezer(box.id) is None
    finally:
        if not closed:
            path = cgroup.freezer(box.id)
            if path is not None:
                await cgroup.set_frozen(path, False)
            await box.close()


@pytest.mark.no_docker
def test_no_freezer_for_an_unknown_container() -> None:
    assert cgroup.freezer("0" * 64) is None
