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
from agentenv.sandbox.errors import SandboxClosed, SandboxError, SandboxPaused, SandboxUnavailable
from agentenv.sandbox.protocol import ExecResult, Sandbox
from agentenv.sandbox.spec import GATEWAY_MOUNT

log = get_logger(__name__)

FORWARD = (Path(__file__).parent.parent / "guest" / "forward.py").read_text()
LOG_TAIL_BYTES = 64 << 10  # of each log, kept on the trajectory
CRASH_CODES = (126, 127)  # the shell's "cannot execute" and "not found"
FREEZE_WAIT_S = 3600.0  # how long a command waits for the gateway to thaw the sandbox
CHECK_TIMEOUT_S = 30.0  # one check's: a wait step is 5 s of the sandbox's own time
# Waits for the status in steps of at most 5 s of the sandbox's own time (exit 4: not yet;
# 3: its supervisor is gone, killed by the agent: no status will come). It reads no file of
# the state folder, which the agent may have swapped for a FIFO or a huge file: the
# supervisor's pid is the host's, from the start. A step that does not answer (the sandbox
# frozen by the gateway meanwhile, or a binary the agent replaced) counts as "not yet".
_WAIT = (
    'i=0; while [ ! -e "$0/status" ]; do '
    'if [ -n "$1" ]; then kill -0 "$1" 2>/dev/null || exit 3; fi; '
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
    supervisor: int | None = None  # the relay's pid in the sandbox (None: it did not start)
    group: int | None = None  # the harness's process group


async def _exec(sandbox: Sandbox, argv: list[str], **kw: Any) -> ExecResult:
    """``sandbox.exec``, waiting out a freeze of the gateway's (a model call in flight, bounded
    by the model client's own timeout)."""
    for _ in range(int(FREEZE_WAIT_S / 0.1)):
        try:
            return await sandbox.exec(argv, **kw)
        except SandboxPaused:
            await anyio.sleep(0.1)
    return await sandbox.exec(argv, **kw)


async def _check(sandbox: Sandbox, argv: list[str]) -> ExecResult | None:
    """A short command on the harness's state, bounded: ``None`` when it did not answer in
    time (frozen meanwhile, or stuck on something of the agent's)."""
    try:
        return await _exec(sandbox, argv, timeout=CHECK_TIMEOUT_S)
    except (SandboxClosed, SandboxUnavailable):
        raise
    except SandboxError as e:
        log.info("harness.check.unanswered", error=str(e))
        return None


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
    pids = result.stdout.split()
    if result.exit_code != 0:  # the relay never started: the harness is a crash
        await sandbox.write_file(
            f"{state}/status",
            json.dumps({"error": f"the relay did not start: {result.stderr[-2000:]}"}).encode(),
        )
    # no pids but a clean start: the relay failed before the harness ran, and says why in
    # its status
    supervisor, group = (int(pids[0]), int(pids[1])) if len(pids) == 2 else (None, None)
    log.info("harness.started", harness=harness.name, state=state, port=port)
    return HarnessProcess(
        name=harness.name,
        version=harness.version,
        state=state,
        logs=launch.logs,
        started=started,
        model_s_at_start=gateway.model_s,
        supervisor=supervisor,
        group=group,
    )


async def _stop(sandbox: Sandbox, process: HarnessProcess) -> None:
    """Kill the harness's process group (through its supervisor, which writes the status)."""
    if process.supervisor is None or process.group is None:
        return  # nothing was started
    # the group too: it outlives a supervisor the agent killed
    script = '{ kill -TERM "$0"; kill -KILL "-$1"; } 2>/dev/null; true'
    await _check(sandbox, ["sh", "-c", script, str(process.supervisor), str(process.group)])


async def _wait(sandbox: Sandbox, process: HarnessProcess, timeout_s: float | None) -> bool:
    """Whether the harness ended (its status written, or its supervisor gone) within
    ``timeout_s`` of the host's clock (a step in flight when it passes is let finish)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    supervisor = "" if process.supervisor is None else str(process.supervisor)
    while True:
        result = await _check(sandbox, ["sh", "-c", _WAIT, process.state, supervisor])
        if result is not None and result.exit_code in (0, 3):
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        if result is None or result.exit_code != 4:
            await anyio.sleep(1.0)  # a step that failed at once is not retried in a spin


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
        if not await _wait(sandbox, process, remaining):
            stopped = stopped or "timeout"
            await _stop(sandbox, process)
            await _wait(sandbox, process, 60)
        await _stop(sandbox, process)  # whatever of its group is left (supervisor killed)
        group.cancel_scope.cancel()
    wall_s = time.time() - process.started
    return await _collect(sandbox, process, gateway, stopped, wall_s, log_tail_bytes)


async def _read_tail(sandbox: Sandbox, path: str, limit: int) -> str:
    """The end of a file the agent may have swapped: a regular file only, bounded in time."""
    script = '[ -f "$0" ] && [ ! -L "$0" ] && exec tail -c "$1" "$0" 2>/dev/null'
    result = await _check(sandbox, ["sh", "-c", script, path, str(limit)])
    return "" if result is None else str(result.stdout)


async def _own_logs(sandbox: Sandbox, paths: tuple[str, ...], limit: int) -> str:
    """The harness's own log files (under each folder: its newest files), capped."""
    parts = []
    for path in paths:
        script = 'find "$0" -type f 2>/dev/null | sort | tail -n 5'
        found = await _check(sandbox, ["sh", "-c", script, path])
        for file in "" if found is None else found.stdout.split("\n"):
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
