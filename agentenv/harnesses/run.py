"""Running an installed harness in its sandbox: :func:`run_harness` starts
``guest/forward.py`` there (the relay from ``127.0.0.1:PORT`` to the gateway's socket,
detached, supervising the harness), then waits for the harness to end, stopping it when the
gateway refused a call over budget, at the timeout, or when its output floods. The harness's
own failure is never raised: it is in the :class:`HarnessRun`.

The harness outlives the host process that started it (it runs detached in the sandbox): a
partial rollout resumed in another process calls :func:`join_harness` with the
:class:`HarnessProcess` that :func:`start_harness` returned."""

from __future__ import annotations

import json
import random
import time
import uuid
from pathlib import Path
from typing import Any, Protocol

import anyio
from pydantic import BaseModel

from agentenv.agent.trajectory import HarnessRun, HarnessStop
from agentenv.harnesses.base import Harness, Launch
from agentenv.log import get_logger
from agentenv.sandbox.errors import SandboxPaused
from agentenv.sandbox.protocol import ExecResult, Sandbox
from agentenv.sandbox.spec import GATEWAY_MOUNT

log = get_logger(__name__)

FORWARD = (Path(__file__).parent.parent / "guest" / "forward.py").read_text()
LOG_TAIL_BYTES = 64 << 10  # of each log, kept on the trajectory
CRASH_CODES = (126, 127)  # the shell's "cannot execute" and "not found"
FREEZE_WAIT_S = 3600.0  # how long a command waits for the gateway to thaw the sandbox
# Waits for the status in steps of at most 5 s of the sandbox's own time (exit 4: not yet;
# 3: its supervisor is gone, killed by the agent: no status will come). Run with no exec
# timeout: a freeze of the gateway's in the middle just makes the step longer, where an exec
# timeout would fire on the host while the executor is frozen and cannot answer.
_WAIT = (
    'i=0; while [ ! -e "$0/status" ]; do '
    'if [ -s "$0/pid" ]; then read -r sup child < "$0/pid"; '
    'kill -0 "$sup" 2>/dev/null || exit 3; fi; '
    'i=$((i+1)); [ "$i" -ge 25 ] && exit 4; sleep 0.2; done'
)


class GatewayLike(Protocol):
    """What running a harness needs of the episode's gateway (agentenv.gateway.Gateway)."""

    socket_path: Path
    token: str
    stopped: anyio.Event
    model_s: float


class HarnessProcess(BaseModel):
    """A harness started in a sandbox: enough to join it from another process."""

    name: str
    version: str
    state: str  # its folder in the sandbox: pid, log, status
    logs: tuple[str, ...] = ()  # the harness's own log files or folders
    started: float  # time.time() at its start
    model_s_at_start: float = 0.0  # the gateway's model time then


async def _exec(sandbox: Sandbox, argv: list[str], **kw: Any) -> ExecResult:
    """``sandbox.exec``, waiting out a freeze of the gateway's (a model call in flight, bounded
    by the model client's own timeout)."""
    for _ in range(int(FREEZE_WAIT_S / 0.1)):
        try:
            return await sandbox.exec(argv, **kw)
        except SandboxPaused:
            await anyio.sleep(0.1)
    return await sandbox.exec(argv, **kw)


async def _home(sandbox: Sandbox, state: str) -> str:
    """The agent user's home if it may write there, else a folder of ours."""
    probe = 'if [ -n "$HOME" ] && [ "$HOME" != / ] && [ -w "$HOME" ]; then echo "$HOME"; fi'
    result = await _exec(sandbox, ["sh", "-c", probe], timeout=30)
    home = result.stdout.strip()
    if not home:
        home = f"{state}/home"
        await _exec(sandbox, ["mkdir", "-p", home], timeout=30)
    return home


async def start_harness(
    sandbox: Sandbox,
    harness: Harness,
    instruction: str,
    gateway: GatewayLike,
    *,
    model: str = "kimi-k3",
    max_log_bytes: int = 1 << 20,
) -> HarnessProcess:
    """Write its files, start the relay and the harness (detached), and return at once."""
    state = f"/tmp/.agentenv-harness-{uuid.uuid4().hex[:12]}"
    await _exec(sandbox, ["mkdir", "-p", "-m", "0700", state], timeout=30)
    home = await _home(sandbox, state)
    port = random.randint(20000, 60000)  # the sandbox's own loopback: nobody else is there
    launch: Launch = harness.launch(
        instruction,
        base_url=f"http://127.0.0.1:{port}",
        token=gateway.token,
        model=model,
        workdir=sandbox.spec.workdir,
        home=home,
    )
    for path, text in launch.files.items():
        await sandbox.write_file(path, text.encode())
    socket = f"{GATEWAY_MOUNT}/{gateway.socket_path.name}"
    argv = ["python3", "-I", "-c", FORWARD, state, str(port), socket, str(max_log_bytes)]
    started = time.time()
    result = await _exec(
        sandbox,
        [*argv, "--", *launch.argv],
        env={"HOME": home, **launch.env},
        cwd=sandbox.spec.workdir,
        timeout=60,
    )
    if result.exit_code != 0:  # the relay never started: the harness is a crash
        await sandbox.write_file(
            f"{state}/status",
            json.dumps({"error": f"the relay did not start: {result.stderr[-2000:]}"}).encode(),
        )
    log.info("harness.started", harness=harness.name, state=state, port=port)
    return HarnessProcess(
        name=harness.name,
        version=harness.version,
        state=state,
        logs=launch.logs,
        started=started,
        model_s_at_start=gateway.model_s,
    )


async def _stop(sandbox: Sandbox, process: HarnessProcess) -> None:
    """Kill the harness's process group (through its supervisor, which writes the status)."""
    # the group too: it outlives a supervisor the agent killed
    script = (
        'read -r sup child < "$0/pid" 2>/dev/null && '
        '{ kill -TERM "$sup"; kill -KILL "-$child"; } 2>/dev/null; true'
    )
    await _exec(sandbox, ["sh", "-c", script, process.state], timeout=None)


async def _wait(sandbox: Sandbox, state: str, timeout_s: float | None) -> bool:
    """Whether the harness ended (its status written, or its supervisor gone) within
    ``timeout_s`` of the host's clock (a step in flight when it passes is let finish)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        result = await _exec(sandbox, ["sh", "-c", _WAIT, state], timeout=None)
        if result.exit_code != 4:
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False


async def join_harness(
    sandbox: Sandbox,
    process: HarnessProcess,
    gateway: GatewayLike,
    *,
    timeout_s: float | None,
    log_tail_bytes: int = LOG_TAIL_BYTES,
) -> HarnessRun:
    """Wait for a started harness to end (``timeout_s`` counted from its start), stopping
    it when ``gateway.stopped`` is set or at the timeout; then read what it left."""
    stopped: HarnessStop | None = None
    remaining = None if timeout_s is None else max(0.0, timeout_s - (time.time() - process.started))
    async with anyio.create_task_group() as group:

        async def on_gateway_stop() -> None:
            nonlocal stopped
            await gateway.stopped.wait()
            stopped = stopped or "budget"
            await _stop(sandbox, process)

        group.start_soon(on_gateway_stop)
        if not await _wait(sandbox, process.state, remaining):
            stopped = stopped or "timeout"
            await _stop(sandbox, process)
            await _wait(sandbox, process.state, 60)
        await _stop(sandbox, process)  # whatever of its group is left (supervisor killed)
        group.cancel_scope.cancel()
    wall_s = time.time() - process.started
    return await _collect(sandbox, process, gateway, stopped, wall_s, log_tail_bytes)


async def _read_tail(sandbox: Sandbox, path: str, limit: int) -> str:
    script = 'tail -c "$1" "$0" 2>/dev/null'
    result = await _exec(sandbox, ["sh", "-c", script, path, str(limit)], timeout=60)
    return str(result.stdout)


async def _own_logs(sandbox: Sandbox, paths: tuple[str, ...], limit: int) -> str:
    """The harness's own log files (under each folder: its newest files), capped."""
    parts = []
    for path in paths:
        script = 'find "$0" -type f 2>/dev/null | sort | tail -n 5'
        found = await _exec(sandbox, ["sh", "-c", script, path], timeout=60)
        for file in found.stdout.split("\n"):
            if file.strip():
                parts.append(f"==> {file} <==\n{await _read_tail(sandbox, file, limit)}")
    return "\n".join(parts)


async def _collect(
    sandbox: Sandbox,
    process: HarnessProcess,
    gateway: GatewayLike,
    stopped: HarnessStop | None,
    wall_s: float,
    limit: int,
) -> HarnessRun:
    status_text = await _read_tail(sandbox, f"{process.state}/status", 1 << 16)
    try:
        status: dict[str, Any] = json.loads(status_text)
    except ValueError:
        status = {"error": "the harness left no status (its supervisor was killed)"}
    exit_code = status.get("exit_code")
    if stopped is None:
        if status.get("flood"):
            stopped = "output_flood"
        elif status.get("error") or status.get("signal") or exit_code in CRASH_CODES:
            stopped = "crashed"
    if exit_code is None and status.get("signal") and stopped == "crashed":
        exit_code = 128 + int(status["signal"])  # as a shell reports a signal's death
    output = await _read_tail(sandbox, f"{process.state}/log", limit)
    own = await _own_logs(sandbox, process.logs, limit)
    # its own logs first: the tail kept is its output and why it ended, the most telling
    parts = (own, output and f"==> output <==\n{output}", str(status.get("error") or ""))
    text = "\n".join(p for p in parts if p)
    model_s = max(0.0, gateway.model_s - process.model_s_at_start)
    return HarnessRun(
        name=process.name,
        version=process.version,
        exit_code=exit_code if stopped in (None, "crashed") else None,
        stopped=stopped,
        log=text[-limit:],
        wall_s=wall_s,
        model_s=model_s,
        harness_s=max(0.0, wall_s - model_s),
    )


async def run_harness(
    sandbox: Sandbox,
    harness: Harness,
    instruction: str,
    gateway: GatewayLike,
    *,
    model: str = "kimi-k3",
    timeout_s: float | None,
    max_log_bytes: int = 1 << 20,
) -> HarnessRun:
    """Run ``harness`` on ``instruction`` in ``sandbox`` (an image from
    :func:`~agentenv.harnesses.install.harness_image`, with the gateway's folder as its
    ``gateway_dir``) until it ends or is stopped; never raises for the harness's own failure
    (crash, hang, flood: see :attr:`HarnessRun.stopped` and ``exit_code``)."""
    process = await start_harness(
        sandbox, harness, instruction, gateway, model=model, max_log_bytes=max_log_bytes
    )
    return await join_harness(sandbox, process, gateway, timeout_s=timeout_s)


__all__ = ["GatewayLike", "HarnessProcess", "join_harness", "run_harness", "start_harness"]
