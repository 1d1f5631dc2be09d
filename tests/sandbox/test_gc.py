"""A runner killed with SIGKILL leaves labelled containers and snapshots; `agentenv gc`
removes exactly those, and nothing without our labels or with a live owner."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import docker.errors
import pytest

from agentenv import scratch
from agentenv.archive import Archive
from agentenv.sandbox import SandboxSpec, gc
from agentenv.sandbox.docker import DockerBackend, DockerSandbox, connect
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.sandbox.labels import JOB, RUN, job_scope, labels_for, stale_reason
from agentenv.scratch import collect_leftovers
from tests.helpers import start_script

LEAKER = """
    import json, anyio
    from agentenv.sandbox.docker import DockerSandbox

    async def main():
        boxes = [await DockerSandbox.create() for _ in range(2)]
        snap = await boxes[0].snapshot()
        print(json.dumps({"containers": [b.id for b in boxes], "image": snap.ref}), flush=True)
        await anyio.sleep(600)

    anyio.run(main)
"""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentenv", *args], capture_output=True, text=True)


def test_gc_removes_what_a_killed_runner_left_and_nothing_else() -> None:
    engine = connect()
    run = f"leak-{os.getpid()}"
    proc, line = start_script(LEAKER, run)
    leaked = json.loads(line)
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    # Still there after the kill: nothing cleaned up after a SIGKILL.
    for cid in leaked["containers"]:
        assert engine.api.inspect_container(cid)["State"]["Running"]
    # Someone builds on the snapshot: the image inherits our labels but is not ours.
    derived = f"agentenv-test/derived:{run}"
    dockerfile = io.BytesIO(f"FROM {leaked['image']}\nRUN touch /derived\n".encode())
    engine.client.images.build(fileobj=dockerfile, tag=derived, rm=True)
    stranger = engine.api.create_container(
        "agentenv/base:bookworm", ["sleep", "300"], labels={"other": "app"}
    )
    engine.api.start(stranger["Id"])
    try:
        listed = _cli("sandbox", "ls", "--json")
        assert listed.returncode == 0, listed.stderr
        rows = {row["id"]: row for row in map(json.loads, listed.stdout.splitlines())}
        for cid in leaked["containers"]:
            assert rows[cid]["stale"] == "owner gone"
        assert rows[leaked["image"]]["kind"] == "snapshot"
        assert stranger["Id"] not in rows

        dry = _cli("gc", "--dry-run", "--json")
        assert dry.returncode == 0, dry.stderr
        doomed = {json.loads(line)["id"] for line in dry.stdout.splitlines()}
        assert set(leaked["containers"]) | {leaked["image"]} <= doomed
        assert engine.api.inspect_container(leaked["containers"][0])  # dry run removed nothing

        done = _cli("gc")
        assert done.returncode == 0, done.stderr
        for cid in leaked["containers"]:
            with pytest.raises(docker.errors.NotFound):
                engine.api.inspect_container(cid)
        assert engine.api.inspect_container(stranger["Id"])["State"]["Running"]
        assert engine.api.inspect_image(derived)  # built FROM a snapshot: kept
        # ...and Docker keeps the snapshot as its parent; once the child goes, gc takes it.
        engine.api.remove_image(derived, force=True)
        assert _cli("gc").returncode == 0
        with pytest.raises(docker.errors.ImageNotFound):
            engine.api.inspect_image(leaked["image"])
        assert engine.api.containers(all=True, filters={"label": f"{RUN}={run}"}) == []
    finally:
        engine.api.remove_container(stranger["Id"], force=True)
        with contextlib.suppress(docker.errors.ImageNotFound):
            engine.api.remove_image(derived, force=True)


def test_live_owner_is_kept_and_expiry_is_honoured() -> None:
    mine = labels_for("sandbox", ttl_s=3600)
    assert stale_reason(mine) is None
    assert stale_reason(mine, now=float(mine["agentenv.expires"]) + 1) == "expired"
    dead = {**mine, "agentenv.owner": mine["agentenv.owner"].rsplit(":", 2)[0] + ":999999999:1"}
    assert stale_reason(dead) == "owner gone"
    reused = {**mine, "agentenv.owner": mine["agentenv.owner"].rsplit(":", 1)[0] + ":1"}
    assert stale_reason(reused) == "owner gone"  # same pid, another process: pid was reused
    elsewhere = {**mine, "agentenv.owner": "another-host:1:1"}
    assert stale_reason(elsewhere) is None  # cannot tell: only the expiry applies


@pytest.mark.anyio
async def test_gc_takes_a_workdir_volume_whose_sandbox_is_gone_and_no_one_elses() -> None:
    engine = connect()
    box = await DockerSandbox.create(SandboxSpec(user="1000", read_only=True))
    box.detach()  # leave it, as a killed runner would
    cid = box.id
    (mount,) = [m for m in engine.api.inspect_container(cid)["Mounts"] if m["Type"] == "volume"]
    engine.api.remove_container(cid, force=True)  # without its volumes, as `docker rm -f` does
    stranger = engine.api.create_volume(labels={"other": "app"})
    try:
        rows = {r.id: r for r in DockerBackend(engine).leftovers()}
        assert rows[mount["Name"]].kind == "volume" and rows[mount["Name"]].stale
        assert stranger["Name"] not in rows
        gc.collect(DockerBackend(engine))
        names = {v["Name"] for v in engine.api.volumes()["Volumes"] or []}
        assert mount["Name"] not in names and stranger["Name"] in names
    finally:
        engine.api.remove_volume(stranger["Name"])


def test_a_job_collects_only_its_own_dead_runs_leftovers() -> None:
    """What a resumed job removes: its objects whose runner is gone; not its live runner's,
    not another job's (even a dead one's: that is `agentenv gc`'s to take)."""
    engine = connect()
    host = socket.gethostname()
    made = {}
    for name, job, owner in (
        ("dead", "job-a", f"{host}:999999999:1"),
        ("live", "job-a", None),  # this process: alive
        ("other", "job-b", f"{host}:999999999:1"),
        ("elsewhere", "job-a", "another-host:1:1"),  # cannot tell: left alone
    ):
        with job_scope(job):
            labels = labels_for("sandbox", ttl_s=600)
        assert labels[JOB] == job
        if owner is not None:
            labels["agentenv.owner"] = owner
        made[name] = engine.api.create_container(BASE_IMAGE, ["true"], labels=labels)["Id"]
    assert JOB not in labels_for("sandbox", ttl_s=600)  # outside the scope: no job label
    try:
        removed = gc.collect(DockerBackend(engine), job="job-a")
        assert [r.id for r in removed] == [made["dead"]] and removed[0].job == "job-a"
        with pytest.raises(docker.errors.NotFound):
            engine.api.inspect_container(made["dead"])
        for name in ("live", "other", "elsewhere"):
            assert engine.api.inspect_container(made[name])
    finally:
        for cid in made.values():
            with contextlib.suppress(docker.errors.NotFound):
                engine.api.remove_container(cid, force=True)


def test_gc_removes_the_temporary_files_of_killed_runners_only() -> None:
    mine = Archive.from_bytes(b"in use")
    # a runner that made an archive and was SIGKILLed before it could remove it
    child = subprocess.run(
        [sys.executable, "-c", "import os; from agentenv import scratch\n"
         "from agentenv.archive import Archive\n"
         "a = Archive.from_bytes(b'left'); print(a.path, flush=True)\n"
         "t = scratch.folder('branch'); open(t.name + '/f', 'w').write('x')\n"
         "print(t.name, flush=True)\n"
         "os._exit(0)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    left, folder = (Path(line) for line in child.stdout.split())
    assert left.exists() and left.parent == Path(tempfile.gettempdir())
    assert folder.is_dir() and folder.name.startswith("agentenv-branch-")
    assert {left, folder} <= set(collect_leftovers(dry_run=True)) and left.exists()
    with scratch.folder("branch") as live:  # this process's: alive
        gone = collect_leftovers()
        assert Path(live).is_dir()
    assert left in gone and not left.exists() and folder in gone and not folder.exists()
    assert mine.path.exists() and mine.path not in gone  # this process is alive
    # a copy sent to another process carries the contents, not a path that may vanish
    copy = pickle.loads(pickle.dumps(mine))
    assert copy.path != mine.path and copy.read_bytes() == b"in use"
