"""Scale-out on Ray (``pip install agentenv[ray]``): ``agentenv serve-env --ray ADDRESS``
runs one environment server per node of the cluster, each on that node's own container
engine, behind one front (:mod:`agentenv.envserver.front`) whose URL a trainer uses as it
would a single server's.

Per alive node a Ray actor, pinned there (``NodeAffinitySchedulingStrategy``), runs
``agentenv serve-env TASKS --host 0.0.0.0 --port 0`` as a child process, reads the port the
child bound from its ``listening on`` line and reports ``http://NODE_IP:PORT`` with the
node's capacity. The child dies with the actor (a parent-death signal, so even an actor
killed outright takes its server along). A node whose server does not start is named in a
warning and left out; only when none starts does :func:`start_node_servers` fail, naming
each node and why.

Task folders given as paths travel with the actors as tars (as the eval executor's do), so
nodes need no shared storage; every node needs agentenv installed and its engine running.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from agentenv.envserver.front import NodeServer, open_front
from agentenv.errors import AgentenvError
from agentenv.log import get_logger

__all__ = [
    "NodeServers",
    "NodeServersFailed",
    "serve_on_ray",
    "start_node_servers",
]

log = get_logger(__name__)
LISTENING = re.compile(r"listening on https?://\S+?:(?P<port>\d+)\b(?: \((?P<tasks>\d+) tasks?)?")
START_TIMEOUT_S = 600.0  # a fresh node may build the task images before it listens
LOG_TAIL = 2000  # characters of a failed server's output quoted in its error


class NodeServersFailed(AgentenvError):
    """No node's environment server started; the message names each node and why."""


def serve_env_command() -> list[str]:
    """The command a node runs: this Python's ``agentenv serve-env``."""
    return [sys.executable, "-m", "agentenv", "serve-env"]


# Run first in the child: the kernel sends it SIGTERM when the actor's process ends (Linux
# prctl PR_SET_PDEATHSIG, kept across exec), then it becomes the server. A launcher rather
# than a preexec_fn, which is unsafe in a process with threads (a Ray worker has many); an
# actor gone before the prctl took hold is seen in getppid, and the server never starts.
_LAUNCH = """
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
except (OSError, AttributeError):  # not Linux: the actor's stop() and __del__ remain
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit("the actor that started serve-env is gone")
os.execvp(sys.argv[2], sys.argv[2:])
"""


def _pack(path: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(path, arcname=path.name)
    return buf.getvalue()


class _NodeServer:
    """The actor on one node: its ``serve-env`` child and where it listens."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir = tempfile.mkdtemp(prefix="agentenv-serve-env-")

    def start(
        self,
        command: list[str],
        tasks_args: list[str],
        packed: dict[int, bytes],
        max_concurrent_envs: int,
        extra_args: list[str],
        timeout_s: float,
    ) -> NodeServer:
        """Start the child and wait for its ``listening on`` line; the server it reports."""
        args = list(tasks_args)
        for i, data in packed.items():  # task folders sent from the driver, unpacked here
            into = Path(self._dir) / f"tasks-{i}"
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
                tar.extractall(into, filter="data")
            (args[i],) = [str(p) for p in into.iterdir()]
        out_path = Path(self._dir) / "serve-env.log"
        argv = [
            *command,
            *args,
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--max-concurrent-envs",
            str(max_concurrent_envs),
            *extra_args,
        ]
        with out_path.open("wb") as out:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _LAUNCH, str(os.getpid()), *argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self._dir,
            )
        deadline = time.monotonic() + timeout_s
        while True:
            text = out_path.read_text(errors="replace")
            found = LISTENING.search(text)
            if found:
                break
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"`{' '.join(argv)}` exited {self._proc.returncode} before listening:\n"
                    + text[-LOG_TAIL:]
                )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"`{' '.join(argv)}` did not listen within {timeout_s:.0f} s:\n"
                    + text[-LOG_TAIL:]
                )
            time.sleep(0.1)
        ip = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        node = ray.get_runtime_context().get_node_id()
        return NodeServer(
            url=f"http://{ip}:{found['port']}",
            max_concurrent_envs=max_concurrent_envs,
            name=f"{socket.gethostname()}:{node[:12]}",
            pid=self._proc.pid,
            tasks=int(found["tasks"]) if found["tasks"] else None,
        )

    def stop(self) -> None:
        """End the child (SIGTERM, then SIGKILL after 10 s) and remove the actor's files."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __del__(self) -> None:
        self.stop()


# one actor per node, costing no CPU of the node's quota (the server's sandboxes do the work)
_Actor: Any = ray.remote(num_cpus=0, max_restarts=0)(_NodeServer)


class NodeServers:
    """The servers started on the cluster's nodes (those that started), the Ray actors that
    hold them (one a server, in the same order), and the nodes left out (name -> why);
    :meth:`stop` ends them all. So does the driver's exit, or killing an actor: the actor
    goes, and its server with it."""

    def __init__(self, servers: list[NodeServer], actors: list[Any], failed: dict[str, str]):
        self.servers = servers
        self.actors = actors
        self.failed = failed

    def stop(self) -> None:
        """Stop every node's server (SIGTERM: it closes its episodes) and its actor."""
        for actor in self.actors:
            try:
                ray.get(actor.stop.remote(), timeout=30)
            except Exception as e:  # the node or the actor is gone already
                log.info("ray.node_server_stop", error=str(e)[:200])
            ray.kill(actor)
        self.actors = []


def start_node_servers(
    tasks_args: Sequence[str],
    max_concurrent_envs: int,
    *,
    extra_args: Sequence[str] = (),
    command: Sequence[str] | None = None,
    ship_tasks: bool = True,
    start_timeout_s: float = START_TIMEOUT_S,
) -> NodeServers:
    """On every alive node of the connected cluster, start ``serve-env`` (``command``,
    by default :func:`serve_env_command`) with ``tasks_args`` and ``extra_args``; each
    ``tasks_args`` entry that is a path here is sent to the nodes when ``ship_tasks``.
    Nodes that fail are left out (named in ``failed``); :class:`NodeServersFailed` when
    none starts."""
    if not ray.is_initialized():
        raise RuntimeError("start_node_servers needs ray.init() first (serve_on_ray does it)")
    args = [str(a) for a in tasks_args]
    packed = {i: _pack(Path(a)) for i, a in enumerate(args) if ship_tasks and Path(a).exists()}
    packed_ref = ray.put(packed)
    nodes = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
    starts: list[tuple[str, Any, Any]] = []
    for n in nodes:
        name = f"{n.get('NodeManagerHostname', '?')}:{n['NodeID'][:12]}"
        actor = _Actor.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)
        ).remote()
        ref = actor.start.remote(
            list(command or serve_env_command()),
            args,
            packed_ref,
            max_concurrent_envs,
            list(extra_args),
            start_timeout_s,
        )
        starts.append((name, actor, ref))
    servers, actors, failed = [], [], {}
    for name, actor, ref in starts:
        try:
            servers.append(ray.get(ref, timeout=start_timeout_s + 60))
            actors.append(actor)
        except Exception as e:  # this node's server did not start: the others go on
            cause = getattr(e, "cause", None) or e
            failed[name] = f"{type(cause).__name__}: {cause}"
            log.warning("ray.node_server_failed", node=name, error=failed[name][:500])
            ray.kill(actor)
    if not servers:
        detail = "\n".join(f"- node {k}: {v}" for k, v in failed.items()) or "- no alive node"
        raise NodeServersFailed(f"no node of the Ray cluster started serve-env:\n{detail}")
    return NodeServers(servers, actors, failed)


def serve_on_ray(
    address: str | None,
    tasks_args: Sequence[str],
    host: str = "127.0.0.1",
    port: int = 8000,
    max_concurrent_envs: int = 1,
    extra_args: Sequence[str] = (),
    *,
    command: Sequence[str] | None = None,
    start_timeout_s: float = START_TIMEOUT_S,
) -> None:
    """``agentenv serve-env --ray ADDRESS``: a server per node of the Ray cluster at
    ``address`` (``None``: start or join a local one), each taking ``max_concurrent_envs``
    sessions, behind one front on ``host:port`` (``0``: a free port), until interrupted.
    Prints a line per node, then ``agentenv serve-env listening on http://HOST:PORT
    (N tasks)`` as the single server does (N the tasks a node serves)."""
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    nodes = start_node_servers(
        tasks_args,
        max_concurrent_envs,
        extra_args=extra_args,
        command=command,
        start_timeout_s=start_timeout_s,
    )
    try:
        for name, why in nodes.failed.items():
            print(f"agentenv serve-env: node {name} left out: {why}", file=sys.stderr, flush=True)
        for s in nodes.servers:
            print(
                f"agentenv serve-env: node {s.name} serves at {s.url} "
                f"({s.max_concurrent_envs} sessions)",
                flush=True,
            )
        counts = {s.tasks for s in nodes.servers}
        n = counts.pop() if len(counts) == 1 else None
        tasks = "? tasks" if n is None else f"{n} task{'s' if n != 1 else ''}"
        asyncio.run(_serve_front(nodes.servers, host, port, tasks))
    finally:
        nodes.stop()


async def _serve_front(servers: list[NodeServer], host: str, port: int, tasks: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with open_front(servers, host, port) as (_front, server):
        bound = server.sockets[0].getsockname()[1]
        print(f"agentenv serve-env listening on http://{host}:{bound} ({tasks})", flush=True)
        await stop.wait()
