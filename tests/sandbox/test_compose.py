"""A compose environment is one sandbox: commands run in ``main``, which reaches the other
services by name on a network of their own with no route out; pause freezes every service
(their cgroups, read from the host), resume thaws them all; close removes them, their
network and their volumes; ``agentenv gc`` collects what a killed runner left of one."""

from __future__ import annotations

import json
import os
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import docker.errors
import pytest

from agentenv.sandbox import SandboxSpec, cgroup, gc
from agentenv.sandbox.compose.sandbox import ComposeSandbox, create_compose
from agentenv.sandbox.docker import DockerBackend, connect
from agentenv.sandbox.labels import GROUP, OWNER
from tests.formats.test_harbor_compose import write_environment
from tests.helpers import start_script

pytestmark = pytest.mark.anyio

SPEC = SandboxSpec(workdir="/app", image_entrypoint=True)


@pytest.fixture(scope="module")
async def group(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ComposeSandbox]:
    path = write_environment(tmp_path_factory.mktemp("compose"))
    box = await create_compose(SPEC, path, {})
    try:
        yield box
    finally:
        await box.close()


def _frozen(cid: str) -> bool:
    path = cgroup.freezer(cid)
    assert path is not None, "no cgroup freezer on this host"
    return cgroup.is_frozen(path)


async def test_main_reaches_the_services_by_name_and_nothing_outside(group: ComposeSandbox) -> None:
    done = await group.exec(
        "python3 -c \"import os, urllib.request as u; print(u.urlopen(os.environ['API_URL'] + "
        "'/token', timeout=5).read().decode())\" && getent hosts cache >/dev/null && echo cache"
    )
    assert done.ok and done.stdout.split() == ["blue-42", "cache"], done
    out = await group.exec(
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)\""
    )
    assert not out.ok  # the group's network is internal: no route out


async def test_the_host_is_out_of_reach_of_main(group: ComposeSandbox) -> None:
    """The agent in ``main`` dials a port the host listens on, at the group network's
    gateway address: an ``internal`` Docker network still gives the host an address there,
    unless the bridge is made without one."""
    with socket.create_server(("0.0.0.0", 0)) as listener:
        port = listener.getsockname()[1]
        route = (await group.exec("awk 'NR==2{print $3}' /proc/net/route")).stdout.strip()
        dial = f"import socket; socket.create_connection(('{_gateway(route)}', {port}), timeout=2)"
        assert not (await group.exec(f'python3 -c "{dial}"', timeout=30)).ok


def _gateway(route: str) -> str:
    """The dotted address of /proc/net/route's hex gateway (or destination) field; with
    no host address on the bridge the table has no gateway, so the network's own subnet
    start is dialled instead (still the host's, were it there)."""
    if not route or int(route, 16) == 0:
        return "0.0.0.0"
    return ".".join(str(int(route[i : i + 2], 16)) for i in (6, 4, 2, 0))


async def test_pause_freezes_every_service_and_resume_thaws_them_all(
    group: ComposeSandbox,
) -> None:
    ids = [group.id, *group.group.containers.values()]
    assert len(ids) == 3
    await group.pause()
    try:
        assert group.paused and all(_frozen(cid) for cid in ids)
    finally:
        await group.resume()
    assert not group.paused and not any(_frozen(cid) for cid in ids)
    assert (await group.exec("true")).ok


async def test_everything_is_labelled_and_removed_together(tmp_path: Path) -> None:
    engine = connect()
    box = await create_compose(SPEC, write_environment(tmp_path), {})
    project = box.group.project
    containers = [box.id, *box.group.containers.values()]
    for cid in box.group.containers.values():
        labels = engine.api.inspect_container(cid)["Config"]["Labels"]
        assert labels[GROUP] == project and OWNER in labels
    (network,) = engine.api.networks(filters={"label": f"{GROUP}={project}"})
    assert network["Internal"] and OWNER in network["Labels"]
    await box.close()
    for cid in containers:
        with pytest.raises(docker.errors.NotFound):
            engine.api.inspect_container(cid)
    assert not engine.api.networks(filters={"label": f"{GROUP}={project}"})
    assert not (engine.api.volumes(filters={"label": f"{GROUP}={project}"}) or {}).get("Volumes")


async def test_a_service_that_exited_does_not_stop_the_group_pausing(tmp_path: Path) -> None:
    # the agent can stop a service through its port (an MCP server's shutdown tool, say):
    # pausing the group then freezes what still runs, and the episode goes on
    box = await create_compose(SPEC, write_environment(tmp_path), {})
    try:
        gone = next(iter(box.group.containers.values()))
        connect().api.kill(gone)
        await box.pause()
        await box.resume()
        assert (await box.exec("true")).ok
    finally:
        await box.close()


LEAKER = """
    import json, sys, anyio
    from pathlib import Path
    from agentenv.sandbox import SandboxSpec
    from agentenv.sandbox.compose.sandbox import create_compose
    from agentenv.sandbox.labels import job_scope

    async def main():
        with job_scope(sys.argv[1]):
            spec = SandboxSpec(workdir="/app", image_entrypoint=True)
            box = await create_compose(spec, Path(sys.argv[2]), {})
        await box.pause()  # killed while frozen, as a runner between model turns
        ids = [box.id, *box.group.containers.values()]
        print(json.dumps({"containers": ids, "project": box.group.project}), flush=True)
        await anyio.sleep(600)

    anyio.run(main)
"""


def test_gc_removes_every_container_and_the_network_a_killed_runner_left(tmp_path: Path) -> None:
    engine = connect()
    job = f"compose-gc-{os.getpid()}"
    path = write_environment(tmp_path)
    script = LEAKER.replace("anyio.run(main)", "sys.argv[1:] = [%r, %r]\n    anyio.run(main)")
    proc, line = start_script(script % (job, str(path)), f"leak-{os.getpid()}")
    leaked = json.loads(line)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    for cid in leaked["containers"]:
        assert engine.api.inspect_container(cid)["State"]["Running"]
    removed = gc.collect(DockerBackend(), job=job)
    kinds = sorted(row.kind for row in removed)
    assert kinds == ["network", "sandbox", "sandbox", "sandbox", "volume"], removed
    for cid in leaked["containers"]:
        with pytest.raises(docker.errors.NotFound):
            engine.api.inspect_container(cid)
    assert not engine.api.networks(filters={"label": f"{GROUP}={leaked['project']}"})
