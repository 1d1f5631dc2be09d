"""Environment-server benchmark: how many frozen sessions one ``agentenv serve-env`` holds
while the policy thinks, its steps per second against ``rollout`` in-process, and its
memory per idle session.

Measures, in one run, against one ``agentenv serve-env`` child process (``python -m
agentenv serve-env TASK --port 0 --max-concurrent-envs N --session-ttl 0``) serving a
one-file task (write ``ok`` into answer.txt; a file verifier). The client is this process,
speaking OpenEnv's WebSocket frames over raw ``websockets`` connections (one per session),
as ``openenv-core``'s clients do:

1. **Held sessions** (``--sessions`` N, 1000): N sessions opened, ``--open-at-once`` (8)
   resets at a time (each reset makes a sandbox). Once all are open and idle, the server's
   RSS is read (figure 3 below), then the sandboxes' cgroup CPU counters are read twice,
   ``--idle-s`` (10) apart: the CPU the frozen sandboxes used meanwhile (0 when frozen).
   Then every session plays its episode as a policy thinking ``--think-s`` (14) s per step
   would: it waits a random part of one think, then ``bash true``, a think, ``bash
   true``, a think, ``submit``. All N are open throughout. Reported: sessions held, steps
   answered without an error (of 3 N), rewards of 1.0, reset and step latency p50/p99,
   the sandboxes' CPU over the whole thinking phase as a share of the phase's wall time.
2. **Steps/s** through the server vs ``rollout`` in-process (the baseline, same run,
   before it): ``--episodes`` K (48) episodes, ``--concurrency`` C (8) at once, each
   ``--steps`` M (3) ``bash true`` then a ``submit``, no think time. In-process:
   ``rollout(task, ScriptedModel)`` inside one ``recycling()`` block (as the server
   recycles); through the server: the same actions as ``call_tool`` steps, each episode a
   reset on one of C connections. Steps/s = K (M + 1) / wall time, resets and verification
   included on both sides.
3. **Server memory per idle session**: (RSS with N sessions open and idle - RSS before the
   first of them, after a warm-up episode prepared the task) / N. A frozen sandbox's own
   memory is the engine's, reported apart: the mean of the sandboxes' cgroup
   memory use.

Usage: ``.venv/bin/python bench/envserver.py [--quick] [--sessions N] [--think-s S]
[--episodes K] [--steps M] [--concurrency C] [--only held|steps] [--json PATH]``.

The server's sandboxes carry ``agentenv.run=<this run's id>`` (set in its environment);
what is still there when the run ends is removed by that label, and only by it.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import docker
import docker.errors
from common import (
    RUN_ID,
    Report,
    arg_parser,
    console,
    describe,
    fmt,
    fmt_ratio,
    plain_row,
    print_table,
    relative_row,
    remove_container,
    run_benchmark,
    run_sections,
    start_report,
    step,
    summary,
)
from websockets.asyncio.client import ClientConnection, connect

from agentenv.agent.policies import ScriptedModel
from agentenv.model.types import Completion, ToolCall
from agentenv.rl.rollout import rollout
from agentenv.sandbox import cgroup, recycling
from agentenv.sandbox import labels as agentenv_labels
from agentenv.sandbox.docker import get_engine
from agentenv.tasks import Task, load_task

MIB = 1 << 20

# -- the task --------------------------------------------------------------------------------


def write_task(root: Path) -> Task:
    """The one-file task: write ``ok`` into answer.txt (a file verifier)."""
    folder = root / "note"
    (folder / "workspace").mkdir(parents=True)
    (folder / "workspace" / "README").write_text("write ok into answer.txt\n")
    (folder / "instruction.md").write_text("Write ok into answer.txt.\n")
    (folder / "task.toml").write_text(
        '[verifier]\nkind = "file"\npath = "answer.txt"\nequals = "ok"\n'
    )
    return load_task(folder)


# -- configuration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """How big each measurement is."""

    sessions: int
    think_s: float
    open_at_once: int
    idle_s: float
    episodes: int
    steps: int
    concurrency: int
    json_path: Path | None
    only: str | None = None

    @classmethod
    def from_args(cls, argv: list[str] | None = None) -> Config:
        """Parse the command line."""
        parser = arg_parser(__doc__)
        parser.add_argument("--sessions", type=int, help="sessions held at once (1000)")
        parser.add_argument("--think-s", type=float, help="the policy's think per step (14)")
        parser.add_argument("--open-at-once", type=int, default=8, help="resets at once (8)")
        parser.add_argument("--idle-s", type=float, help="frozen window for CPU (10)")
        parser.add_argument("--episodes", type=int, help="episodes for steps/s (48)")
        parser.add_argument("--steps", type=int, help="bash steps per episode (3)")
        parser.add_argument("--concurrency", type=int, help="episodes at once (8)")
        parser.add_argument("--only", choices=("held", "steps"), help="one section")
        args = parser.parse_args(argv)
        q = args.quick
        return cls(
            sessions=args.sessions or (4 if q else 1000),
            think_s=args.think_s if args.think_s is not None else (0.5 if q else 14.0),
            open_at_once=args.open_at_once,
            idle_s=args.idle_s if args.idle_s is not None else (1.0 if q else 10.0),
            episodes=args.episodes or (4 if q else 48),
            steps=args.steps or (1 if q else 3),
            concurrency=args.concurrency or (2 if q else 8),
            json_path=args.json,
            only=args.only,
        )


# -- the server, in a process of its own -----------------------------------------------------


@dataclass
class Served:
    """A running ``serve-env`` child: its pid and WebSocket URL."""

    pid: int
    ws_url: str
    process: subprocess.Popen[str] = field(repr=False)


@asynccontextmanager
async def serve_env(task_root: Path, max_envs: int) -> AsyncIterator[Served]:
    """``python -m agentenv serve-env`` on a free port, its sandboxes labelled with this
    run; stopped by SIGTERM (which closes every session's episode) when the block ends."""
    env = {**os.environ, "AGENTENV_RUN_ID": RUN_ID}
    argv = [
        sys.executable, "-m", "agentenv", "serve-env", str(task_root), "--port", "0",
        "--max-concurrent-envs", str(max_envs), "--session-ttl", "0",
    ]  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert process.stdout is not None
        first = await anyio.to_thread.run_sync(process.stdout.readline)
        if "listening on http://" not in first:
            raise RuntimeError(f"serve-env did not start: {first!r} (exit {process.poll()})")
        url = first.split("listening on ", 1)[1].split()[0]
        yield Served(process.pid, "ws" + url.removeprefix("http") + "/ws", process)
    finally:
        process.terminate()
        try:
            await anyio.to_thread.run_sync(lambda: process.wait(120))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def rss_mib(pid: int) -> float:
    """A process's resident set, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def run_containers() -> list[str]:
    """The ids of the sandboxes of this run (the server's)."""
    client = docker.from_env(version="auto")
    try:
        label = f"{agentenv_labels.RUN}={RUN_ID}"
        return [c["Id"] for c in client.api.containers(filters={"label": label})]
    finally:
        client.close()


def cpu_ns(ids: list[str]) -> int:
    """The summed cgroup CPU counters of containers ``ids`` (0 for any not readable)."""
    return sum(cgroup.cpu_usage_ns(i) or 0 for i in ids)


def memory_mib(ids: list[str]) -> float | None:
    """The mean cgroup memory use of containers ``ids`` (v2 ``memory.current``, v1
    ``memory.usage_in_bytes``), in MiB."""
    found = []
    for i in ids:
        paths = [cgroup.ROOT / place / "memory.current" for place in cgroup.places(i)] + [
            cgroup.ROOT / "memory" / place / "memory.usage_in_bytes" for place in cgroup.places(i)
        ]
        for path in paths:
            if path.exists():
                with suppress(OSError, ValueError):
                    found.append(int(path.read_text()) / MIB)
                break
    return sum(found) / len(found) if found else None


# -- the client: OpenEnv's frames over raw websockets ----------------------------------------


class Failed(RuntimeError):
    """The server answered a frame with an error."""


async def ask(ws: ClientConnection, frame: dict[str, Any]) -> dict[str, Any]:
    """Send one frame; the data of the one frame that answers it (an error raised)."""
    await ws.send(json.dumps(frame))
    reply = json.loads(await ws.recv())
    if reply.get("type") == "error":
        raise Failed(f"{reply['data'].get('code')}: {reply['data'].get('message')}")
    return dict(reply["data"])


def call_tool(name: str, **arguments: Any) -> dict[str, Any]:
    """A ``call_tool`` step frame, as ``MCPToolClient`` sends it."""
    action = {"type": "call_tool", "tool_name": name, "arguments": arguments}
    return {"type": "step", "data": action}


RESET: dict[str, Any] = {"type": "reset", "data": {}}
SUBMIT_SCRIPT = "echo ok > answer.txt"


@dataclass
class Tally:
    """What the sessions saw."""

    reset_s: list[float] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)
    answered: int = 0
    rewarded: int = 0
    errors: list[str] = field(default_factory=list)


async def timed(ws: ClientConnection, frame: dict[str, Any], into: list[float]) -> dict[str, Any]:
    """:func:`ask`, its round trip appended to ``into``."""
    t0 = time.perf_counter()
    data = await ask(ws, frame)
    into.append(time.perf_counter() - t0)
    return data


async def play(ws: ClientConnection, tally: Tally, bash_steps: int, think_s: float) -> None:
    """The episode after its reset: ``bash_steps`` steps (the last writes the answer),
    then ``submit``, thinking ``think_s`` before each (the first think a random part of
    one, so that the sessions' steps spread out)."""
    for k in range(bash_steps + 1):
        if think_s:
            await anyio.sleep(random.uniform(0, think_s) if k == 0 else think_s)
        if k < bash_steps:
            command = SUBMIT_SCRIPT if k == bash_steps - 1 else "true"
            await timed(ws, call_tool("bash", command=command), tally.step_s)
            tally.answered += 1
        else:
            data = await timed(ws, call_tool("submit"), tally.step_s)
            tally.answered += 1
            if not data.get("done"):
                raise Failed("submit did not end the episode")
            tally.rewarded += data.get("reward") == 1.0


# -- 1 and 3. sessions held while the policy thinks; memory per idle session -----------------


async def bench_held(cfg: Config, task_root: Path, report: Report) -> None:
    """N sessions open and frozen at once, then each plays its episode with think time."""
    n = cfg.sessions
    async with serve_env(task_root, n + 1) as server:
        step(f"held: serve-env pid {server.pid}; a warm-up episode prepares the task")
        warm = Tally()
        async with connect(server.ws_url, compression=None, max_size=None) as ws:
            await timed(ws, RESET, warm.reset_s)
            await play(ws, warm, 1, 0)
        await anyio.sleep(1)
        rss_before = rss_mib(server.pid)
        tally = Tally()
        opened: list[ClientConnection] = []
        gate = anyio.Semaphore(cfg.open_at_once)
        step(f"held: opening {n} sessions, {cfg.open_at_once} resets at a time")
        started = time.perf_counter()

        async def open_one() -> None:
            async with gate:
                try:
                    ws = await connect(
                        server.ws_url, compression=None, max_size=None, open_timeout=600,
                        ping_interval=None,
                    )  # fmt: skip
                    await timed(ws, RESET, tally.reset_s)
                    opened.append(ws)
                except Exception as e:
                    tally.errors.append(f"open/reset: {describe(e)}")
                if len(tally.reset_s) % 100 == 0 and tally.reset_s:
                    step(f"  {len(tally.reset_s)} open")

        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(open_one)
        open_s = time.perf_counter() - started
        held = len(opened)
        step(f"held: {held} open in {open_s:.0f} s; frozen for {cfg.idle_s:g} s")
        await anyio.sleep(1)
        rss_idle = rss_mib(server.pid)
        ids = await anyio.to_thread.run_sync(run_containers)
        box_mib = await anyio.to_thread.run_sync(memory_mib, ids)
        cpu0 = await anyio.to_thread.run_sync(cpu_ns, ids)
        await anyio.sleep(cfg.idle_s)
        cpu1 = await anyio.to_thread.run_sync(cpu_ns, ids)
        step(f"held: every session plays 2 bash steps and a submit, thinking {cfg.think_s:g} s")
        before_play = time.perf_counter()
        cpu2 = await anyio.to_thread.run_sync(cpu_ns, ids)

        async def one(ws: ClientConnection) -> None:
            try:
                await play(ws, tally, 2, cfg.think_s)
            except Exception as e:
                tally.errors.append(f"step: {describe(e)}")

        async def progress() -> None:  # a long phase under load: show it moves
            while True:
                await anyio.sleep(30)
                step(f"  {tally.answered} of {3 * len(opened)} steps answered")

        async with anyio.create_task_group() as tg:
            tg.start_soon(progress)
            async with anyio.create_task_group() as players:
                for ws in opened:
                    players.start_soon(one, ws)
            tg.cancel_scope.cancel()
        play_s = time.perf_counter() - before_play
        cpu3 = await anyio.to_thread.run_sync(cpu_ns, ids)
        rss_end = rss_mib(server.pid)
        for ws in opened:
            with suppress(Exception):
                await ws.close()
        step("held: closing; the server stops (its sandboxes removed)")

    idle_cpu_s = (cpu1 - cpu0) / 1e9
    play_cpu_s = (cpu3 - cpu2) / 1e9
    per_session_kib = (rss_idle - rss_before) * 1024 / held if held else 0.0
    report.details["held"] = {
        "sessions": n,
        "held": held,
        "think_s": cfg.think_s,
        "open_s": open_s,
        "play_s": play_s,
        "answered": tally.answered,
        "rewarded": tally.rewarded,
        "errors": tally.errors[:20],
        "error_count": len(tally.errors),
        "reset": summary(tally.reset_s) if tally.reset_s else None,
        "step": summary(tally.step_s) if tally.step_s else None,
        "server_rss_mib": {"before": rss_before, "idle": rss_idle, "end": rss_end},
        "server_kib_per_idle_session": per_session_kib,
        "sandbox_memory_mib_mean": box_mib,
        "sandboxes_seen": len(ids),
        "frozen_cpu_s": idle_cpu_s,
        "idle_window_s": cfg.idle_s,
        "play_cpu_s": play_cpu_s,
    }
    steps_total = 3 * held
    clean = not tally.errors and held == n and tally.answered == steps_total
    reset, stepped = (report.details["held"][k] for k in ("reset", "step"))
    report.rows += [
        plain_row(
            f"sessions held at once, every step answered (think {cfg.think_s:g} s)",
            "",
            held if clean else held - len(tally.errors),
            "≥ 1,000",
            clean and held >= 1000,
        ),
        plain_row(
            f"  steps answered (of {steps_total}), errors {len(tally.errors)}", "", tally.answered
        ),
        plain_row(f"  rewards of 1.0 (of {held})", "", tally.rewarded),
        plain_row("  reset p50", "ms", reset["p50_ms"] if reset else 0.0),
        plain_row("  reset p99", "ms", reset["p99_ms"] if reset else 0.0),
        plain_row(
            "  step p50 (thaw, run, freeze; submit: verify)",
            "ms",
            stepped["p50_ms"] if stepped else 0.0,
        ),
        plain_row("  step p99", "ms", stepped["p99_ms"] if stepped else 0.0),
        plain_row(f"  opening {held} sessions ({cfg.open_at_once} at a time)", "s", open_s),
        plain_row(
            f"  sandboxes' CPU while all frozen, {cfg.idle_s:g} s",
            "ms",
            idle_cpu_s * 1e3,
            "≈ 0",
            idle_cpu_s < 0.05 * held / 1000 + 0.01,
        ),
        plain_row(
            "  sandboxes' CPU / wall while playing (cores)",
            "",
            play_cpu_s / play_s if play_s else 0.0,
        ),
        relative_row(
            f"server RSS with {held} sessions idle",
            "MiB",
            rss_idle,
            rss_before,
            "x (base: before any)",
        ),
        plain_row("server memory per idle session", "KiB", per_session_kib),
        plain_row("  a frozen sandbox's own memory (cgroup, mean)", "MiB", box_mib or 0.0),
    ]
    if tally.errors:
        raise RuntimeError(f"{len(tally.errors)} session errors, first: {tally.errors[:3]}")


# -- 2. steps per second: the server vs rollout in-process -----------------------------------


def scripted(bash_steps: int) -> ScriptedModel:
    """The policy: ``bash_steps`` turns of one bash call (the last writes the answer), then
    a turn that submits."""

    def turn(i: int, name: str, **arguments: Any) -> Completion:
        call = ToolCall(id=f"functions.{name}:{i}", name=name, arguments=json.dumps(arguments))
        return Completion(content="", finish_reason="tool_calls", tool_calls=[call])

    turns = [
        turn(i, "bash", command=SUBMIT_SCRIPT if i == bash_steps - 1 else "true")
        for i in range(bash_steps)
    ]
    return ScriptedModel([*turns, turn(bash_steps, "submit")], "bench")


async def in_process(task: Task, cfg: Config) -> tuple[float, int, list[str]]:
    """K rollouts, C at once, in one recycling block: wall time, rewards, errors."""
    left = [cfg.episodes]
    rewarded, errors = [0], []

    async def worker() -> None:
        while left[0] > 0:
            left[0] -= 1
            traj = await rollout(task, scripted(cfg.steps))
            if traj.error:
                errors.append(str(traj.error))
            rewarded[0] += traj.reward == 1.0

    started = time.perf_counter()
    async with recycling(), anyio.create_task_group() as tg:
        for _ in range(cfg.concurrency):
            tg.start_soon(worker)
    return time.perf_counter() - started, rewarded[0], errors


async def through_server(task_root: Path, cfg: Config) -> tuple[float, int, list[str], float]:
    """K episodes over C connections to the server: wall time, rewards, errors, the server's
    CPU seconds over them."""
    left = [cfg.episodes]
    tally = Tally()
    async with serve_env(task_root, cfg.concurrency + 1) as server:
        async with connect(server.ws_url, compression=None, max_size=None) as ws:
            await ask(ws, RESET)  # prepares the task, as rollout's warm-up did
            await play(ws, Tally(), 1, 0)

        async def worker() -> None:
            async with connect(server.ws_url, compression=None, max_size=None) as ws:
                while left[0] > 0:
                    left[0] -= 1
                    try:
                        await timed(ws, RESET, tally.reset_s)
                        await play(ws, tally, cfg.steps, 0)
                    except Exception as e:
                        tally.errors.append(describe(e))

        cpu0 = server_cpu_s(server.pid)
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(cfg.concurrency):
                tg.start_soon(worker)
        wall = time.perf_counter() - started
        cpu = server_cpu_s(server.pid) - cpu0
    return wall, tally.rewarded, tally.errors, cpu


def server_cpu_s(pid: int) -> float:
    """A process's user + system CPU so far, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def bench_steps(cfg: Config, task_root: Path, task: Task, report: Report) -> None:
    """The same episodes in-process (baseline) and through the server, back to back."""
    k, m, c = cfg.episodes, cfg.steps, cfg.concurrency
    per = m + 1
    step(f"steps/s: warm-up rollout, then {k} rollouts in-process, {c} at once, {per} steps each")
    await rollout(task, scripted(m))  # the image and first sandbox, as the server's warm-up
    base_wall, base_ok, base_errors = await in_process(task, cfg)
    step(f"steps/s: {k} episodes through serve-env over {c} connections")
    wall, ok, errors, server_cpu = await through_server(task_root, cfg)
    base_rate, rate = k * per / base_wall, k * per / wall
    report.details["steps"] = {
        "episodes": k,
        "steps_per_episode": per,
        "concurrency": c,
        "in_process": {
            "wall_s": base_wall,
            "steps_per_s": base_rate,
            "rewarded": base_ok,
            "errors": base_errors[:5],
        },
        "server": {
            "wall_s": wall,
            "steps_per_s": rate,
            "rewarded": ok,
            "errors": errors[:5],
            "server_cpu_s": server_cpu,
        },
    }
    report.rows += [
        plain_row(
            f"steps/s, rollout() in-process ({k} episodes x {per}, {c} at once)", "/s", base_rate
        ),
        relative_row(
            "steps/s through serve-env (same episodes, /ws)",
            "/s",
            rate,
            base_rate,
            "x in-process",
            "≥ 0.8×",
            rate >= 0.8 * base_rate,
        ),
        plain_row(
            f"  rewards of 1.0 (of {k}, each way)",
            "",
            min(ok, base_ok),
            f"= {k}",
            ok == base_ok == k,
        ),
        plain_row("  server process CPU per step", "ms", server_cpu / (k * per) * 1e3),
    ]
    if errors or base_errors or ok != k or base_ok != k:
        raise RuntimeError(
            f"in-process {base_ok}/{k} rewarded {base_errors[:2]}; "
            f"server {ok}/{k} rewarded {errors[:2]}"
        )


# -- output ----------------------------------------------------------------------------------


def show(report: Report) -> None:
    """The result table, with what the baselines are."""
    print_table(
        report,
        "envserver",
        fmt,
        fmt_ratio,
        "Held sessions: one serve-env child process, raw websockets clients in this one; "
        "CPU = the sandboxes' cgroup counters. Server RSS baseline = the server's RSS after "
        "a warm-up episode, before the sessions. Steps/s baseline = rollout() in-process "
        "with the same scripted actions, same run, just before.",
    )


# -- main ------------------------------------------------------------------------------------


async def run_all(cfg: Config) -> Report:
    """Every section of this benchmark, in order."""
    report = await start_report(await get_engine())
    report.details["load_before"] = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="agentenv-bench-envserver-") as tmp:
        root = Path(tmp)
        task = write_task(root)
        sections = [
            ("steps", lambda: bench_steps(cfg, root, task, report)),
            ("held", lambda: bench_held(cfg, root, report)),
        ]
        await run_sections(report, [s for s in sections if cfg.only in (None, s[0])])
    report.details["load_after"] = os.getloadavg()
    return report


def sweep_run() -> None:
    """Remove every container carrying this run's ``agentenv.run`` label. Blocking."""
    client = docker.from_env(version="auto")
    try:
        label = f"{agentenv_labels.RUN}={RUN_ID}"
        found = [c["Id"] for c in client.api.containers(all=True, filters={"label": label})]
        for container_id in found:
            remove_container(client, container_id)
        if found:
            console.print(f"[yellow]cleanup: removed {len(found)} leftover sandboxes[/yellow]")
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    cfg = Config.from_args(argv)
    os.environ["AGENTENV_RUN_ID"] = RUN_ID  # rollout's sandboxes too: the sweep finds them
    # Docker's, here and in the server (inherited): the sweep, labels and cgroups read Docker
    os.environ["AGENTENV_BACKEND"] = "docker"
    agentenv_labels.run_id.cache_clear()
    try:
        return run_benchmark(cfg, lambda: run_all(cfg), show)
    finally:
        sweep_run()


if __name__ == "__main__":
    sys.exit(main())
