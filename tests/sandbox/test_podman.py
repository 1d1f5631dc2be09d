"""The Podman backend passes the same conformance suite as Docker's (pause and resume
included), and is what a spec naming it gets. Marked ``podman``: `.ci/run` runs these, and a
subset of the eval, RL and refactor tests, with Podman in a stage of its own
(``scripts/test.sh --podman``); without Podman installed they are skipped unless
``AGENTENV_REQUIRE_PODMAN=1``."""

from __future__ import annotations

import io
import subprocess
import tarfile
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from agentenv.sandbox import Sandbox, SandboxError, SandboxSpec, create, get_backend
from agentenv.testing.conformance import *  # noqa: F403

pytestmark = [pytest.mark.anyio, pytest.mark.podman]


def podman_spec(**fields: object) -> SandboxSpec:
    return SandboxSpec(backend="podman", **fields)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
async def sandbox() -> AsyncIterator[Sandbox]:
    async with await create(podman_spec()) as box:
        assert type(box).__name__ == "PodmanSandbox"
        yield box


@pytest.fixture
def make_sandbox() -> Callable[[], Awaitable[Sandbox]]:
    return lambda: create(podman_spec())


async def test_a_read_only_sandbox_for_an_unprivileged_user() -> None:
    async with await create(podman_spec(read_only=True, user="1000:1000")) as box:
        me = await box.exec("id -u; stat -c %u .; touch /etc/x 2>&1 || true")
        assert me.stdout.splitlines()[:2] == ["1000", "1000"], me
        assert "Read-only file system" in me.stdout
        await box.write_file("/workspace/a.txt", b"mine")
        await box.pause()
        tar = await box.download("/workspace")  # frozen: read through the namespace
        await box.resume()
        assert b"mine" in tar


def _members(tar: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        return {m.name: m for m in t.getmembers()}


async def test_reads_through_the_namespace_never_reach_the_host() -> None:
    # A root agent points the workdir, and a link in it, at places that exist on the host
    # too; the frozen read (done by host root, see nsop.py) must see the container's.
    async with await create(podman_spec()) as box:
        done = await box.exec(
            "echo planted > /etc/agentenv-marker && mkdir -p /w && ln -s /etc/hostname /w/h"
            " && ln -s /etc /w/etc && rm -rf /workspace && ln -s /etc /workspace"
        )
        assert done.ok, done
        await box.pause()
        top = _members(await box.download("/workspace"))
        assert list(top) == ["workspace"] and top["workspace"].issym()  # stored, not followed
        links = _members(await box.download("/w"))
        assert links["w/h"].issym() and links["w/etc"].issym() and len(links) == 3
        with tarfile.open(fileobj=io.BytesIO(await box.download("/etc/hostname"))) as t:
            name = t.extractfile("hostname")
            assert name is not None and name.read().strip() == b"sandbox"  # not the host's
        marker = await box.download("/etc/agentenv-marker")
        assert b"planted" in marker
        await box.resume()


async def test_snapshot_fork_and_the_leftovers_are_podmans() -> None:
    backend = get_backend("podman")
    async with await create(podman_spec()) as box:
        await box.write_file("/workspace/kept.txt", b"kept")
        snap = await box.snapshot()
    assert snap.backend == "podman"
    forks = await backend.fork(snap, 2)
    try:
        seen = [(await f.exec("cat /workspace/kept.txt")).stdout for f in forks]
        assert seen == ["kept", "kept"]
        ids = {row.id for row in backend.leftovers()}
        assert {f.id for f in forks} <= ids
    finally:
        for f in forks:
            await f.close()
        await backend.remove_snapshot(snap)
    assert snap.ref not in {row.id for row in backend.leftovers()}


async def test_what_podman_cannot_do_is_refused_clearly() -> None:
    with pytest.raises(SandboxError, match="executor only"):
        await create(podman_spec(executor="docker-exec"))
    with pytest.raises(SandboxError, match="no option 'gpus'"):
        await create(podman_spec(options={"gpus": "all"}))
    with pytest.raises(SandboxError, match="runtime must be the name"):
        await create(podman_spec(options={"runtime": "/tmp/planted-runtime"}))
    with pytest.raises(SandboxError, match="not in Podman's storage"):
        await create(podman_spec(image="agentenv-test/absent:1"))


async def test_an_engine_answer_its_own_state_contradicts_does_not_fail_the_sandbox() -> None:
    async with await create(podman_spec()) as box:
        subprocess.run(["podman", "pause", box.id], check=True, capture_output=True)
        await box.pause()  # "already paused": it is, so that is done
        assert box.paused
        subprocess.run(["podman", "unpause", box.id], check=True, capture_output=True)
        await box.resume()
        assert (await box.exec("echo alive")).stdout == "alive\n"


LEASE = """
import fcntl, os, time
fd = os.open("leased.txt", os.O_RDONLY)
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
open("ready", "w").close()
time.sleep(600)
"""


async def test_a_file_leased_by_a_frozen_process_is_left_out_not_a_failure() -> None:
    # An agent holding a write lease makes every other open of that file wait for the lease
    # to break (or fail, non-blocking): the frozen read must still give the rest, so that
    # the agent cannot turn its own grade into an infrastructure error.
    async with await create(podman_spec()) as box:
        await box.write_file("/workspace/leased.txt", b"secret answer")
        await box.write_file("/workspace/other.txt", b"kept")
        await box.write_file("/workspace/lease.py", LEASE.encode())
        await box.exec("nohup python3 lease.py >/dev/null 2>&1 &")
        await box.exec("for i in $(seq 50); do [ -e ready ] && break; sleep 0.1; done")
        await box.pause()
        names = _members(await box.download("/workspace"))
        await box.resume()
    assert "workspace/other.txt" in names and "workspace/leased.txt" not in names


async def test_the_hosts_proxy_settings_stay_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # Podman copies http_proxy and the like (credentials included) into every container
    # unless told not to; Docker's backend never does.
    monkeypatch.setenv("http_proxy", "http://user:secret@proxy.example:3128")
    monkeypatch.setenv("HTTPS_PROXY", "http://user:secret@proxy.example:3128")
    async with await create(podman_spec()) as box:
        seen = await box.exec("env | grep -i proxy || true")
    assert seen.stdout == "", seen.stdout
