"""Recycling: a sandbox a hostile agent used, once recycled, cannot be told from a new one
(its processes, every place it may write, System V IPC, the owners and modes of its mounts);
what cannot be made so is closed, never handed out; a recycler hands the same container to
the next episode of the spec. On whichever backend the run uses."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentenv.sandbox import (
    Sandbox,
    SandboxClosed,
    SandboxSpec,
    create,
    get_backend,
    hand_back,
    recycling,
    reuse_or_create,
)
from agentenv.sandbox.images import BASE_IMAGE

pytestmark = pytest.mark.anyio

AGENT = SandboxSpec(user="1000:1000", read_only=True, labels={"test.recycling": "yes"})

# What an agent could see of the sandbox's state: every process but its own interpreter
# (and ours, the executor: also python3), everything under each place it may write, the
# System V IPC tables.
FINGERPRINT = r"""
import json, os
procs = []
for p in os.listdir("/proc"):
    if not p.isdigit() or int(p) == os.getpid():
        continue
    try:
        lines = open("/proc/%s/status" % p).read().splitlines()
    except OSError:
        continue
    st = dict(line.split(":", 1) for line in lines if ":" in line)
    if st["Name"].strip() != "python3":
        procs.append([st["Name"].strip(), st["Uid"].split()[0]])
files = {}
for top in ("/workspace", "/tmp", "/dev/shm", "/dev/mqueue"):
    for root, dirs, names in os.walk(top):
        for path in [root] + [os.path.join(root, n) for n in dirs + names]:
            s = os.lstat(path)
            files[path] = [s.st_uid, s.st_gid, oct(s.st_mode)]
ipc = {k: open("/proc/sysvipc/" + k).read().splitlines()[1:] for k in ("shm", "sem", "msg")}
print(json.dumps({"procs": sorted(procs), "files": files, "ipc": ipc}, sort_keys=True))
"""

# Processes that hide (setsid, double fork, ignoring signals, respawning), files where it
# may write with modes that resist removal, a symlink out, a deep tree, a locked workdir.
HOSTILE = r"""
cd /workspace
nohup sleep 1000 >/dev/null 2>&1 &
setsid sh -c 'trap "" TERM HUP INT; while :; do sleep 1; done' >/dev/null 2>&1 &
sh -c '(sleep 999 &) &'
nohup sh -c 'while :; do (sleep 100 &); sleep 0.01; done' >/dev/null 2>&1 &
mkdir -p locked/deep && echo x > locked/deep/f && chmod 000 locked/deep locked
echo planted > /tmp/sitecustomize.py; mkdir /tmp/d; chmod 000 /tmp/d
echo y > /dev/shm/shared; ln -s /etc/passwd /tmp/link
python3 -c "
import os
p = '/tmp/deep'
os.makedirs(p)
for _ in range(400):
    p = os.path.join(p, 'd'); os.mkdir(p)
"
python3 -c "b = bytearray(200 << 20); b[::4096] = b'x' * len(b[::4096])"
chmod 0700 /workspace
"""

PEAK = "cat /sys/fs/cgroup/memory/memory.max_usage_in_bytes 2>/dev/null || echo 0"

SYSV_SHM = (
    "import ctypes; libc = ctypes.CDLL(None); "
    "print(libc.shmget(0x5eed, 4096, 0o1000 | 0o600))"  # IPC_CREAT: a segment that outlives it
)


async def _fingerprint(box: Sandbox) -> dict[str, Any]:
    done = await box.exec(["python3", "-c", FINGERPRINT])
    assert done.ok, done.stderr
    return dict(json.loads(done.stdout))


@pytest.fixture
async def fresh() -> AsyncIterator[Sandbox]:
    async with await create(AGENT) as box:
        yield box


def _ours() -> set[str]:
    return {r.id for r in get_backend(AGENT.backend).leftovers()}


async def test_a_recycled_sandbox_cannot_be_told_from_a_new_one(fresh: Sandbox) -> None:
    new = await _fingerprint(fresh)
    assert new["procs"] and new["files"]  # it sees something: the comparison means something
    async with await create(AGENT) as used:
        done = await used.exec(HOSTILE, timeout=60)
        assert done.ok, done.stderr
        dirty = await _fingerprint(used)
        assert dirty != new and len(dirty["procs"]) > len(new["procs"])
        assert int((await used.exec(PEAK)).stdout) > 150 << 20  # (cgroup v1's counter)
        await used.pause()  # as an episode hands it back: frozen
        assert await used.recycle()  # type: ignore[attr-defined]
        assert await _fingerprint(used) == new
        # the memory high-water mark it could have signalled with is zeroed
        assert int((await used.exec(PEAK)).stdout) < 100 << 20
        # and it works as a new one does
        assert (await used.exec("echo hi > /workspace/a && cat /workspace/a")).stdout == "hi\n"


async def test_what_cannot_be_made_clean_is_closed_not_kept() -> None:
    # a System V segment outlives every process: recycle() says no, and the recycler closes
    async with recycling() as recycler:
        box = await reuse_or_create(AGENT)
        made = await box.exec(["python3", "-c", SYSV_SHM])
        assert made.ok and int(made.stdout) >= 0, made.stderr
        assert await box.recycle() is False  # type: ignore[attr-defined]
        await hand_back(box)
        assert recycler.idle == 0 and recycler.refused == 1
        assert box.id not in _ours()
        # a writable root filesystem is never recycled
        writable = await reuse_or_create(AGENT.model_copy(update={"read_only": False}))
        await hand_back(writable)
        assert recycler.idle == 0 and writable.id not in _ours()


async def test_the_next_episode_of_the_spec_gets_the_same_container() -> None:
    async with recycling() as recycler:
        first = await reuse_or_create(AGENT)
        await first.exec(HOSTILE, timeout=60)
        await hand_back(first)
        assert recycler.idle == 1
        again = await reuse_or_create(AGENT)
        assert again.id == first.id and not again.paused and recycler.reused == 1
        assert (await again.exec("ls -A /workspace /tmp")).stdout == "/tmp:\n\n/workspace:\n"
        # the last episode's handle cannot reach into this one
        with pytest.raises(SandboxClosed):
            await first.exec("true")
        await hand_back(first)  # handed back twice: nothing happens to the new episode's
        assert recycler.idle == 0 and (await again.exec("echo ok")).stdout == "ok\n"
        # another spec does not get it
        other = await reuse_or_create(AGENT.model_copy(update={"workdir": "/srv"}))
        assert other is not first
        await hand_back(other, reusable=False)  # e.g. a root agent's checker: closed
        assert other.id not in _ours()
        await hand_back(again)
        idle_id = again.id
        assert idle_id in _ours()
    assert idle_id not in _ours()  # the block's end removes what is idle


async def test_idle_sandboxes_are_kept_up_to_what_the_block_had_or_max_idle() -> None:
    # a burst of episodes ending together: every clean one is kept for the next burst
    # (they were all running a moment before); with max_idle, the rest are closed
    for cap, kept in ((None, 3), (1, 1)):
        async with recycling(max_idle=cap) as recycler:
            boxes = [await reuse_or_create(AGENT) for _ in range(3)]
            for box in boxes:
                await hand_back(box)
            assert recycler.idle == kept and recycler.refused == 3 - kept
            assert sum(box.id in _ours() for box in boxes) == kept


async def test_outside_a_recycling_block_hand_back_closes() -> None:
    box = await reuse_or_create(AGENT)
    await hand_back(box)
    assert box.id not in _ours()


async def test_an_agent_python3_on_the_path_is_not_what_wipes(tmp_path: Path) -> None:
    # a task image whose PATH starts in the workdir (a venv there, say): the agent's own
    # python3 would report "clean" and leave a spy running, if the wipe went through PATH
    path = "/workspace/.venv/bin:/usr/local/bin:/usr/bin:/bin"
    spec = AGENT.model_copy(update={"env": {"PATH": path}})
    async with await create(spec) as fresh:
        new = await _fingerprint(fresh)
    async with await create(spec) as used:
        planted = await used.exec(
            "mkdir -p /workspace/.venv/bin && printf '%s\\n' '#!/bin/sh' "
            "'setsid /usr/bin/sleep 1000 >/dev/null 2>&1 &' 'echo clean' "
            "> /workspace/.venv/bin/python3 && chmod +x /workspace/.venv/bin/python3 "
            "&& command -v python3"
        )
        assert planted.stdout.strip() == "/workspace/.venv/bin/python3", planted.stderr
        await used.pause()
        assert await used.recycle()  # type: ignore[attr-defined]
        assert await _fingerprint(used) == new


async def test_an_image_volume_is_never_recycled(tmp_path: Path) -> None:
    # an image's VOLUME is writable even in a read-only sandbox, and not a place recycling
    # empties: such a sandbox is closed, not kept
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        f"FROM {BASE_IMAGE}\nRUN mkdir -p /var/cache/app && chmod 1777 /var/cache/app\n"
        "VOLUME /var/cache/app\n"
    )
    spec = AGENT.model_copy(update={"image": "agentenv-test/volume:recycling"})
    spec = spec.model_copy(update={"dockerfile": dockerfile})
    async with await create(spec) as box:
        assert (await box.exec("echo planted > /var/cache/app/note")).ok
        await box.pause()
        assert await box.recycle() is False  # type: ignore[attr-defined]
