"""serve-env scaled out on a local two-node Ray cluster (a head and a worker node, started
here as the eval executor's test does): a real ``agentenv serve-env`` per node, each on the
Docker engine it finds, behind one front; OpenEnv's own client drives sessions through the
front's one URL. Sessions spread over both nodes and are rewarded; a full cluster answers
``CAPACITY_REACHED``; a node server killed mid-session fails that session only."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openenv.core import GenericEnvClient
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

pytestmark = [pytest.mark.anyio, pytest.mark.on_docker]
ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))
PORT = "6421"  # not the eval executor test's 6411: the two may run side by side
START_BOUND_S = 600.0  # a bound for the servers to come up, not a figure


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    # `--block` keeps every process of the node in this one session, so the fixture stops
    # exactly the cluster it started (not `ray stop`, which ends every Ray on the machine)
    with log.open("wb") as out:
        return subprocess.Popen(
            [RAY, "start", "--block", *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _wait_for(pattern: str, log: Path, proc: subprocess.Popen[bytes]) -> None:
    while not re.search(pattern, log.read_text(errors="replace")):
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A head and a worker node on this machine; the nodes run this checkout's agentenv."""
    tmp = tmp_path_factory.mktemp("ray")
    env = {
        **os.environ,
        "RAY_USAGE_STATS_ENABLED": "0",
        "PYTHONPATH": str(ROOT),  # the node servers run the agentenv under test
    }
    common = ["--num-cpus=2", "--disable-usage-stats"]
    started: list[subprocess.Popen[bytes]] = []
    try:
        head = _start(
            [
                "--head",
                f"--port={PORT}",
                "--include-dashboard=false",
                f"--temp-dir={tmp}",
                *common,
            ],
            env,
            tmp / "head.log",
        )
        started.append(head)
        _wait_for("block forever", tmp / "head.log", head)
        worker = _start([f"--address=127.0.0.1:{PORT}", *common], env, tmp / "worker.log")
        started.append(worker)
        _wait_for("block forever", tmp / "worker.log", worker)
        yield f"127.0.0.1:{PORT}"
    finally:
        for proc in reversed(started):  # the worker node, then the head
            os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)  # `ray start --block` may linger on its gcs_server
            with contextlib.suppress(ProcessLookupError):  # what lingers (a gcs_server)
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def make_tasks(root: Path) -> Path:
    """A task set of one task: write ok into answer.txt (a file check)."""
    folder = root / "tasks" / "note"
    (folder / "workspace").mkdir(parents=True)
    (folder / "instruction.md").write_text("Write ok into answer.txt.\n")
    (folder / "task.toml").write_text(
        '[verifier]\nkind = "file"\npath = "answer.txt"\nequals = "ok"\n'
    )
    return root / "tasks"


class Served:
    """The front's process and its URL, and what it printed."""

    def __init__(self, proc: subprocess.Popen[str], url: str, lines: list[str]) -> None:
        self.proc, self.url, self.lines = proc, url, lines

    def health(self) -> dict[str, Any]:
        """The front's ``GET /health``, over real HTTP (503 too: it still says why)."""
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=30) as r:
                return dict(json.load(r))
        except urllib.error.HTTPError as e:
            return dict(json.load(e))

    def settled(self) -> dict[str, Any]:
        """``/health`` once the sessions closed by the client are let go by the front too
        (it hears of a close a moment after the client has moved on)."""
        deadline = time.monotonic() + 60  # a bound, not a figure
        while (health := self.health())["active_sessions"] and time.monotonic() < deadline:
            time.sleep(0.05)
        return health

    def node_of_open_session(self) -> dict[str, Any]:
        """The one node with a session open through the front."""
        nodes: list[dict[str, Any]] = self.health()["nodes"]
        (node,) = [n for n in nodes if n["active_sessions"] == 1]
        return node


@pytest.fixture(scope="module")
def served(cluster: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``serve_on_ray`` on the cluster: a serve-env per node, one session each at most,
    behind a front on a free port of loopback."""
    tasks = make_tasks(tmp_path_factory.mktemp("envs"))
    code = (
        "from agentenv.envserver.ray import serve_on_ray; "
        f"serve_on_ray({cluster!r}, [{str(tasks)!r}], '127.0.0.1', 0, 1, ['--backend', 'docker'])"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert proc.stdout is not None
    lines: list[str] = []
    url = ""
    timer = threading.Timer(START_BOUND_S, proc.kill)  # a bound: never hang the suite
    timer.start()
    try:
        for line in proc.stdout:
            lines.append(line)
            found = re.search(r"listening on (http://\S+) \((\d+|\?) tasks?\)", line)
            if found:
                url = found[1]
                break
    finally:
        timer.cancel()
    assert url, f"the front did not start: {lines}"
    try:
        yield Served(proc, url, lines)
    finally:
        proc.send_signal(signal.SIGINT)  # the front stops its node servers on the way out
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def act(tool: str, **arguments: Any) -> dict[str, Any]:
    """A step's action: one tool call, in the MCP shape serve-env advertises."""
    return {"type": "call_tool", "tool_name": tool, "arguments": arguments}


async def play(env: GenericEnvClient) -> float | None:
    """The rest of an episode after reset: write the answer, submit; the reward."""
    await env.step(act("bash", command="echo ok > answer.txt"))
    last = await env.step(act("submit"))
    assert last.done
    return None if last.reward is None else float(last.reward)


async def test_sessions_through_one_url_land_on_both_nodes_and_are_rewarded(
    served: Served,
) -> None:
    assert sum("serves at http://" in line for line in served.lines) == 2  # a server a node
    assert "(1 task)" in served.lines[-1]  # what each node said it serves
    async with GenericEnvClient(base_url=served.url) as a:
        await a.reset()
        first = served.node_of_open_session()
        async with GenericEnvClient(base_url=served.url) as b:
            await b.reset()
            nodes = served.health()["nodes"]
            assert [n["active_sessions"] for n in nodes] == [1, 1]  # the free node took it
            assert await play(b) == 1.0
        assert await play(a) == 1.0
    health = served.settled()
    assert health["status"] == "healthy" and health["active_sessions"] == 0
    assert all(n["served"] >= 1 and n["alive"] for n in health["nodes"])
    assert first["url"] in {n["url"] for n in health["nodes"]}


async def test_a_full_cluster_answers_capacity_reached(served: Served) -> None:
    assert served.settled()["active_sessions"] == 0
    async with GenericEnvClient(base_url=served.url) as a:
        await a.reset()
        async with GenericEnvClient(base_url=served.url) as b:
            await b.reset()
            # a third session: accepted, one CAPACITY_REACHED error frame, a normal close
            async with connect(served.url.replace("http://", "ws://") + "/ws") as ws:
                frame = json.loads(await ws.recv())
                assert frame["type"] == "error"
                assert frame["data"]["code"] == "CAPACITY_REACHED"
                assert frame["data"]["max_sessions"] == 2
                with pytest.raises(ConnectionClosed):
                    await ws.recv()
                assert ws.close_code == 1000
            # and OpenEnv's client sees it as back-pressure (the close or the error frame)
            async with GenericEnvClient(base_url=served.url) as c:
                with pytest.raises((ConnectionClosed, RuntimeError)):
                    await c.reset()
            assert served.health()["active_sessions"] == 2  # the two sessions are whole
            assert await play(b) == 1.0


async def test_a_node_server_killed_mid_session_fails_that_session_only(
    served: Served,
) -> None:
    # runs last in this module: it leaves one node
    assert served.settled()["active_sessions"] == 0
    async with GenericEnvClient(base_url=served.url) as a:
        await a.reset()
        doomed = served.node_of_open_session()
        async with GenericEnvClient(base_url=served.url) as b:
            await b.reset()
            await b.step(act("bash", command="echo ok > answer.txt"))
            os.kill(doomed["pid"], signal.SIGKILL)  # its node's server dies mid-session
            with pytest.raises(RuntimeError, match="SESSION_ERROR") as failed:
                await a.step(act("bash", command="echo ok > answer.txt"))
            assert doomed["name"] in str(failed.value)
            last = await b.step(act("submit"))  # the other node's session goes on
            assert last.done and last.reward == 1.0
    nodes = {n["url"]: n for n in served.settled()["nodes"]}
    assert not nodes[doomed["url"]]["alive"]
    # new sessions go to the node left
    async with GenericEnvClient(base_url=served.url) as c:
        await c.reset()
        assert served.node_of_open_session()["url"] != doomed["url"]
        assert await play(c) == 1.0


BROKEN_ON_ONE_NODE = """
import os, sys
try:  # the first node to get here is the broken one; the other serves
    os.close(os.open(sys.argv[1], os.O_CREAT | os.O_EXCL))
except FileExistsError:
    from agentenv.cli import main
    sys.argv[:2] = ["agentenv"]
    main()
else:
    sys.exit("this node's agentenv is broken")
"""


def test_a_node_whose_server_does_not_start_is_named_and_the_others_serve(
    cluster: str, tmp_path: Path
) -> None:
    import ray

    from agentenv.envserver.ray import NodeServersFailed, start_node_servers

    tasks = make_tasks(tmp_path)
    ray.init(address=cluster, log_to_driver=False, logging_level=logging.WARNING)
    try:
        flag = str(tmp_path / "broken")
        command = [sys.executable, "-c", BROKEN_ON_ONE_NODE, flag, "serve-env"]
        nodes = start_node_servers(
            [str(tasks)], 1, extra_args=["--backend", "docker"], command=command
        )
        try:
            assert len(nodes.servers) == 1  # the other node serves
            ((name, why),) = nodes.failed.items()
            assert "this node's agentenv is broken" in why and "exited 1" in why
            assert name.split(":")[-1] != nodes.servers[0].name.split(":")[-1]  # the other node
            with urllib.request.urlopen(nodes.servers[0].url + "/health", timeout=30) as r:
                assert r.status == 200
            # an actor killed outright (no stop()) takes its server along
            ray.kill(nodes.actors[0])
            pid = nodes.servers[0].pid
            deadline = time.monotonic() + 60  # a bound, not a figure
            while Path(f"/proc/{pid}").exists() and _state(pid) != "Z":
                assert time.monotonic() < deadline, "the server outlived its actor"
                time.sleep(0.1)
        finally:
            nodes.stop()
        # no node starts: the error names each one and why
        with pytest.raises(NodeServersFailed) as none:
            start_node_servers([str(tmp_path / "no-such-tasks")], 1)
        assert str(none.value).count("- node ") == 2
        assert "no-such-tasks" in str(none.value)
    finally:
        ray.shutdown()


def _state(pid: int | None) -> str:
    """A process's state letter (Z: a zombie, dead but not yet reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"
