"""Snapshots keep the filesystem; forks start from it and are isolated from each other."""

from __future__ import annotations

import anyio
import pytest

from agentenv.sandbox import fork, remove_snapshot
from agentenv.sandbox.docker import DockerSandbox, get_engine
from agentenv.sandbox.labels import KIND, OWNER

pytestmark = pytest.mark.anyio


async def test_forks_share_the_snapshot_and_nothing_else() -> None:
    async with await DockerSandbox.create() as source:
        await source.write_file("/workspace/setup-done.txt", b"prepared")
        await source.exec("mkdir -p /opt/deps && seq 1 1000 > /opt/deps/list")
        snap = await source.snapshot()
        # The source sandbox keeps working after a snapshot.
        assert (await source.exec("cat /workspace/setup-done.txt")).stdout == "prepared"
        await source.write_file("/workspace/after.txt", b"later")

    forks = await fork(snap, 4)
    try:
        assert len({f.id for f in forks}) == 4
        for i, box in enumerate(forks):
            await box.write_file(f"/workspace/fork-{i}.txt", str(i).encode())
        for i, box in enumerate(forks):
            listing = set((await box.exec(["ls", "/workspace"])).stdout.split())
            assert listing == {"setup-done.txt", f"fork-{i}.txt"}
            assert (await box.exec("wc -l < /opt/deps/list")).stdout.strip() == "1000"
    finally:
        async with anyio.create_task_group() as tg:
            for box in forks:
                tg.start_soon(box.close)
        await remove_snapshot(snap)


async def test_snapshot_image_is_labelled_and_removable() -> None:
    engine = await get_engine()
    async with await DockerSandbox.create() as box:
        snap = await box.snapshot(tag="labelled")
    labels = (await engine.run(engine.api.inspect_image, snap.ref))["Config"]["Labels"]
    assert labels[KIND] == "snapshot"
    assert labels[OWNER]
    assert snap.tag == "agentenv/snapshot:labelled"
    await remove_snapshot(snap)
    import docker.errors

    with pytest.raises(docker.errors.ImageNotFound):
        await engine.run(engine.api.inspect_image, snap.ref)


async def test_fork_needs_a_positive_count() -> None:
    async with await DockerSandbox.create() as box:
        snap = await box.snapshot()
    try:
        with pytest.raises(ValueError):
            await fork(snap, 0)
    finally:
        await remove_snapshot(snap)
