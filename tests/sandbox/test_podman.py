"""The Podman backend passes the same conformance suite as Docker's (pause and resume
included), and is what a spec naming it gets. Marked ``podman``: `.ci/run` runs these, and a
subset of the eval, RL and refactor tests, with Podman in a stage of its own
(``scripts/test.sh --podman``); without Podman installed they are skipped unless
``AGENTENV_REQUIRE_PODMAN=1``."""

from __future__ import annotations

import subprocess
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


async def test_the_hosts_proxy_settings_stay_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # Podman copies http_proxy and the like (credentials included) into every container
    # unless told not to; Docker's backend never does.
    monkeypatch.setenv("http_proxy", "http://user:secret@proxy.example:3128")
    monkeypatch.setenv("HTTPS_PROXY", "http://user:secret@proxy.example:3128")
    async with await create(podman_spec()) as box:
        seen = await box.exec("env | grep -i proxy || true")
    assert seen.stdout == "", seen.stdout
