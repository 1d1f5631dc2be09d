"""Harness benchmark (issue 32): an installed agent harness frozen while it waits for a slow
model, against the built-in loop and against the same harness left running, in one run.

A scripted K3-compatible server (:class:`~agentenv.testing.k3server.K3Server`, in a process
of its own as a remote endpoint is) plays a slow model: every call streams its answer after
a time to first token (``--call-s``, 2 s; ``--tps`` adds a decode speed). The script looks
around ``--looks`` times (``ls``, ``cat notes.txt``, ...), writes the answer, then ends the
episode the way the player ends one (the built-in loop: ``submit``; mini-swe-agent: its
submit command; Codex CLI, Claude Code: an answer without a tool call). The task: read
``notes.txt``, write ``42`` to ``answer.txt``, graded by a hidden file check; every episode
must earn 1.0.

Each episode runs the lifecycle an ``agentenv.rl`` rollout runs (``prepare``, once here:
the task has no setup; then ``episode`` → ``play_episode`` → ``conclude``, inside
``recycling()``) with the harness (``--agent``, mini-swe-agent by default: it starts
fastest) or the built-in loop. The bench drives those steps itself, the same way for every
figure (``rollout_group(..., agent=, pause=)`` runs the same steps), so that each
episode's model can be wrapped in a probe that reads that episode's sandbox's cgroup CPU
counter when each call leaves and when its answer comes back (a policy shared by a group
cannot tell whose call it is answering).

1. **Share of an episode spent frozen**, ``sum(paused_s) / sum(wall_s)`` over ``--episodes``
   episodes one at a time, the harness against the built-in loop on the same task and model
   (target ≥ 90%, as the built-in loop). The harness's time that is not frozen is split from
   the gateway's accounting: start-up (from the gateway opening to the harness's first
   call: starting the harness, its imports), tool time (the harness's own time between an
   answer and its next call: running the command, its own bookkeeping), and exit (after the
   last answer until the harness has ended).
2. **Rollouts/s with ``--concurrency`` (50) harness episodes at once**, frozen during each
   model call (the gateway's ``pause=True``) against the same harness left running while it
   waits (``pause=False``), same task, model and code path, in the same run. The frozen
   batch runs before and after the unfrozen one and its figure is their mean: the host may
   be shared, and a drift over the run then counts on both sides.
3. **CPU seconds the sandboxes used while their model calls were out**, frozen against
   unfrozen (from (2); the cgroup's counter read at each call's start and end): what freezing
   is for.

Usage: ``.venv/bin/python bench/harness.py [--quick] [--agent mini-swe-agent|codex|claude-code]
[--concurrency 50] [--episodes 3] [--looks 3] [--call-s 2] [--tps N]
[--only share|concurrent] [--json PATH]``.

Everything the run creates carries ``agentenv.run=<run id>`` (``AGENTENV_RUN_ID``) and is
removed by that label when it ends, however it ends. The harness's image is built (or taken
from the cache) before any timing.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import anyio
from common import (
    RUN_ID,
    Report,
    Row,
    arg_parser,
    describe,
    fmt,
    fmt_ratio,
    print_table,
    relative_row,
    run_benchmark,
    run_sections,
    start_report,
    step,
    summary,
)
from rl import sweep_run

from agentenv.agent.loop import new_trajectory
from agentenv.agent.trajectory import Trajectory
from agentenv.harnesses.base import Harness
from agentenv.harnesses.install import harness_image
from agentenv.model.client import EventCallback, OpenAIChatModel
from agentenv.model.limit import AdaptiveLimit
from agentenv.model.types import Completion
from agentenv.runner.episode import Prepared, episode, play_episode, prepare, release
from agentenv.runner.harness import resolve_agent
from agentenv.sandbox import Sandbox, recycling
from agentenv.sandbox import labels as agentenv_labels
from agentenv.sandbox.docker import get_engine
from agentenv.tasks import Task, load_task
from agentenv.testing.k3server import K3Server, ScriptedToolCall, ScriptedTurn

BACKEND = "docker"
LIMIT_INITIAL, LIMIT_MAX = 128, 256  # every call of the concurrent batch in flight at once

# -- the task and the model's script ---------------------------------------------------------

TASK_TOML = """\
id = "bench-harness"
description = "Read the notes, write the answer."

[limits]
max_turns = 20
wall_time_s = 900

[verifier]
kind = "file"
path = "answer.txt"
equals = "42"
"""
INSTRUCTION = "Read notes.txt and write the answer it asks for to answer.txt.\n"
NOTES = "The answer is 42.\n"
LOOKS = ("ls -la", "cat notes.txt", "wc -l notes.txt", "grep -n answer notes.txt", "pwd")
SOLVE = "echo 42 > answer.txt"
MINI_SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # how mini-swe-agent is told it is done
SHELL_TOOLS = ("bash", "shell", "Bash", "shell_command", "exec_command", "local_shell")


def write_task(folder: Path) -> Task:
    """The task folder (``task.toml``, ``instruction.md``, ``workspace/notes.txt``), loaded."""
    (folder / "workspace").mkdir(parents=True)
    (folder / "task.toml").write_text(TASK_TOML)
    (folder / "instruction.md").write_text(INSTRUCTION)
    (folder / "workspace" / "notes.txt").write_text(NOTES)
    return load_task(folder)


def shell_call(tools: dict[str, dict[str, Any]], command: str) -> ScriptedToolCall:
    """``command`` through whichever shell tool the player offers, in that tool's shape (its
    ``cmd`` or ``command`` argument; a string, or an argv list where it is an array)."""
    for name in SHELL_TOOLS:
        if name in tools:
            props = (tools[name].get("parameters") or {}).get("properties") or {}
            key = "cmd" if "cmd" in props else "command"  # Codex's exec_command: cmd
            kind = (props.get(key) or {}).get("type")
            value: Any = ["bash", "-lc", command] if kind == "array" else command
            return ScriptedToolCall(name=name, arguments=json.dumps({key: value}))
    raise ValueError(f"no shell tool among the offered ones: {sorted(tools)}")


def scripted(body: dict[str, Any], *, looks: int, agent: str) -> ScriptedTurn:
    """The model's answer, from how far the conversation has got (concurrent episodes
    interleave): ``looks`` commands, the answer, then the player's way of ending."""
    tools = {
        t["function"]["name"]: t["function"] for t in body.get("tools") or [] if "function" in t
    }
    answered = sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")
    if answered < looks:
        look = LOOKS[answered % len(LOOKS)]
        return ScriptedTurn(reasoning="Look around first.", tool_calls=[shell_call(tools, look)])
    if answered == looks:
        return ScriptedTurn(reasoning="The notes say 42.", tool_calls=[shell_call(tools, SOLVE)])
    if "submit" in tools:  # the built-in loop
        done = ScriptedToolCall(name="submit", arguments=json.dumps({"summary": "wrote 42"}))
        return ScriptedTurn(reasoning="Done.", tool_calls=[done])
    if agent == "mini-swe-agent":
        return ScriptedTurn(reasoning="Done.", tool_calls=[shell_call(tools, MINI_SUBMIT)])
    return ScriptedTurn(reasoning="Done.", content="answer.txt holds 42.")


def _serve(conn: Connection, call_s: float, tps: float | None, looks: int, agent: str) -> None:
    """The K3 server's process: says where it listens, serves until told to stop, then says
    how many requests it answered."""
    script = partial(scripted, looks=looks, agent=agent)
    with K3Server(script, ttft_s=call_s, tokens_per_s=tps) as server:
        conn.send(server.base_url)
        conn.recv()
        conn.send(len(server.requests))


@contextmanager
def k3_elsewhere(call_s: float, tps: float | None, looks: int, agent: str) -> Iterator[str]:
    """The scripted server in a process of its own (in this one, 50 streaming threads would
    share the interpreter lock with the event loop). Yields its base URL."""
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(theirs, call_s, tps, looks, agent), daemon=True)
    server.start()
    try:
        if not ours.poll(60):
            raise RuntimeError("the K3 server's process did not start")
        yield str(ours.recv())
        ours.send("stop")
        ours.poll(30)
    finally:
        server.terminate()
        server.join(10)


# -- one episode, watched --------------------------------------------------------------------


class Probe:
    """A :class:`ChatModel` in front of the real one for one episode: reads the sandbox's
    CPU counter as each call leaves and as its answer comes back (the gateway and the
    built-in loop freeze before calling the model and thaw after)."""

    def __init__(self, inner: OpenAIChatModel, sandbox: Sandbox, started: float):
        self.inner = inner
        self.model = inner.model  # the name the gateway tells the harness
        self.sandbox = sandbox
        self.started = started
        self.cpu_in_calls_ns = 0
        self.first_call_s: float | None = None  # from the episode's start

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        on_event: EventCallback | None = None,
    ) -> Completion:
        """The inner model's answer, with the sandbox's CPU used meanwhile counted."""
        if self.first_call_s is None:
            self.first_call_s = time.monotonic() - self.started
        before = await self.sandbox.cpu_usage_ns()
        try:
            return await self.inner.complete(messages, tools, on_event=on_event)
        finally:
            self.cpu_in_calls_ns += await self.sandbox.cpu_usage_ns() - before


@dataclass
class Watched:
    """One episode's trajectory and what the probe saw."""

    traj: Trajectory
    cpu_in_calls_s: float = 0.0
    cpu_episode_s: float = 0.0  # the agent's sandbox, from its start to the end of play
    first_call_s: float | None = None
    end_to_end_s: float = 0.0  # sandbox made, played, graded, handed back


async def watched_episode(
    prepared: Prepared, model: OpenAIChatModel, harness: Harness | None, *, pause: bool
) -> Watched:
    """One episode of ``prepared`` played by ``harness`` (the built-in loop for ``None``),
    as ``rollout_group``'s episodes run; a failure is in the trajectory, not raised."""
    t0 = time.monotonic()
    try:
        async with episode(prepared, harness=harness) as ep:
            cpu0 = await ep.sandbox.cpu_usage_ns()
            probe = Probe(model, ep.sandbox, time.monotonic())
            traj = await play_episode(ep, probe, pause=pause)
            cpu1 = await ep.sandbox.cpu_usage_ns()
            _, traj.score = await ep.conclude()
        return Watched(
            traj,
            cpu_in_calls_s=probe.cpu_in_calls_ns / 1e9,
            cpu_episode_s=(cpu1 - cpu0) / 1e9,
            first_call_s=probe.first_call_s,
            end_to_end_s=time.monotonic() - t0,
        )
    except Exception as e:
        traj = new_trajectory(prepared.task.instruction, task_id=prepared.task.id)
        traj.error = describe(e)
        return Watched(traj, end_to_end_s=time.monotonic() - t0)


# -- configuration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """How big each measurement is."""

    agent: str
    concurrency: int
    episodes: int
    looks: int
    call_s: float
    tps: float | None
    only: str | None
    json_path: Path | None

    @classmethod
    def from_args(cls, argv: list[str] | None = None) -> Config:
        """From the command line; ``--quick`` shrinks what was not given."""
        parser = arg_parser(__doc__)
        parser.add_argument("--agent", default="mini-swe-agent", help="the harness")
        parser.add_argument("--concurrency", type=int, default=None, help="episodes at once")
        parser.add_argument("--episodes", type=int, default=None, help="one at a time, each way")
        parser.add_argument("--looks", type=int, default=3, help="commands before the answer")
        parser.add_argument("--call-s", type=float, default=2.0, help="time to first token")
        parser.add_argument("--tps", type=float, default=None, help="decode tokens/s")
        parser.add_argument("--only", choices=("share", "concurrent"), default=None)
        a = parser.parse_args(argv)
        return cls(
            agent=a.agent,
            concurrency=a.concurrency or (4 if a.quick else 50),
            episodes=a.episodes or (1 if a.quick else 3),
            looks=a.looks,
            call_s=a.call_s,
            tps=a.tps,
            only=a.only,
            json_path=a.json,
        )


@dataclass
class Setting:
    """What every section shares: the task prepared once, the harness, the model."""

    prepared: Prepared
    harness: Harness
    model: OpenAIChatModel
    details: dict[str, Any] = field(default_factory=dict)


def _check(name: str, runs: list[Watched]) -> None:
    """Every episode must have earned 1.0: a figure over failed episodes means nothing."""
    bad = [w.traj.error or f"reward {w.traj.reward}" for w in runs if w.traj.reward != 1.0]
    if bad:
        raise RuntimeError(f"{name}: {len(bad)}/{len(runs)} episodes not rewarded: {bad[:2]}")


def _frozen_share(runs: list[Watched]) -> float:
    wall = sum(w.traj.wall_s for w in runs)
    return sum(w.traj.paused_s for w in runs) / wall if wall else 0.0


def split(runs: list[Watched]) -> dict[str, float]:
    """Where the episodes' wall time went (sums over them, seconds), from the turns: the
    model's calls (frozen), start-up before the first call, the player's own time between
    an answer and its next call, and the time after the last answer until the end. For a
    harness, ``around`` is agentenv's part outside the harness's process (its state folder
    and config files, starting the relay, collecting its log): ``wall_s - harness.wall_s``,
    most of it before the harness starts."""
    keys = ("wall", "model", "paused", "startup", "around", "between", "exit")
    out = dict.fromkeys(keys, 0.0)
    for w in runs:
        t = w.traj
        model = sum(turn.model_s for turn in t.turns)
        tools = [turn.tools_s for turn in t.turns]
        out["wall"] += t.wall_s
        out["model"] += model
        out["paused"] += t.paused_s
        out["between"] += sum(tools[:-1])
        out["exit"] += tools[-1] if tools else 0.0
        out["startup"] += t.wall_s - model - sum(tools)
        out["around"] += t.wall_s - t.harness.wall_s if t.harness is not None else 0.0
    return out


def side_by_side(what: str, unit: str, ours: float, base: float) -> Row:
    """A row with the baseline's figure beside ours but no ratio (a part near zero on one
    side makes a ratio meaningless)."""
    return Row(what, unit, ours, base)


# -- 1. share of an episode spent frozen -----------------------------------------------------


async def bench_share(cfg: Config, s: Setting, report: Report) -> None:
    """``cfg.episodes`` episodes one at a time, built-in loop and harness alternating."""
    step(
        f"frozen share: {cfg.episodes} episode(s) each of the built-in loop and {cfg.agent}, "
        f"one at a time, {cfg.looks + 2} model calls of {cfg.call_s:g} s each"
    )
    runs: dict[str, list[Watched]] = {"builtin": [], "harness": []}
    for _ in range(cfg.episodes):
        runs["builtin"].append(await watched_episode(s.prepared, s.model, None, pause=True))
        runs["harness"].append(await watched_episode(s.prepared, s.model, s.harness, pause=True))
    for name, done in runs.items():
        _check(f"share ({name})", done)
    loop, harn = (_frozen_share(runs[k]) for k in ("builtin", "harness"))
    parts = {k: split(v) for k, v in runs.items()}
    report.details["share"] = {
        k: {
            "frozen_share": _frozen_share(v),
            "split_s": parts[k],
            "episode_wall": summary([w.traj.wall_s for w in v]),
            "first_call_s": [w.first_call_s for w in v],
            "harness_runs": [w.traj.harness.model_dump() if w.traj.harness else None for w in v],
        }
        for k, v in runs.items()
    }
    label = "x"  # the harness's figure over the built-in loop's
    n = cfg.episodes
    h, b = parts["harness"], parts["builtin"]
    report.rows += [
        relative_row(
            f"frozen share of an episode: {cfg.agent} (vs built-in loop)",
            "%",
            harn * 100,
            loop * 100,
            label,
            "≥ 90%",
            harn >= 0.9,
        ),
        relative_row("  episode wall, mean", "s", h["wall"] / n, b["wall"] / n, label),
        side_by_side("  frozen (model calls), mean", "s", h["paused"] / n, b["paused"] / n),
        side_by_side("  not frozen: start-up to 1st call", "s", h["startup"] / n, b["startup"] / n),
        side_by_side("    of which agentenv around the harness", "s", h["around"] / n, 0.0),
        side_by_side(
            "    of which the harness starting (≈)", "s", (h["startup"] - h["around"]) / n, 0.0
        ),
        side_by_side(
            "  not frozen: between calls (tools)", "s", h["between"] / n, b["between"] / n
        ),
        side_by_side("  not frozen: after last answer (exit)", "s", h["exit"] / n, b["exit"] / n),
    ]


# -- 2 and 3. many at once, frozen vs left running -------------------------------------------


async def batch(s: Setting, n: int, *, pause: bool) -> tuple[list[Watched], float]:
    """``n`` harness episodes at once from the one prepared state; the batch's wall time."""
    out: list[Watched] = []

    async def one() -> None:
        out.append(await watched_episode(s.prepared, s.model, s.harness, pause=pause))

    started = time.perf_counter()
    async with recycling(), anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(one)
    return out, time.perf_counter() - started


async def bench_concurrent(cfg: Config, s: Setting, report: Report) -> None:
    """``cfg.concurrency`` harness episodes at once, frozen, then left running."""
    n = cfg.concurrency
    figures: dict[str, dict[str, Any]] = {}
    for mode, pause in (("frozen", True), ("running", False), ("frozen again", True)):
        step(f"{n} {cfg.agent} episodes at once, {mode} during model calls; load {_load()}")
        done, batch_s = await batch(s, n, pause=pause)
        _check(f"concurrent ({mode})", done)
        calls = sum(len(w.traj.turns) for w in done)
        figures[mode] = {
            "batch_s": batch_s,
            "per_s": len(done) / batch_s,
            "calls": calls,
            "cpu_in_calls_s": sum(w.cpu_in_calls_s for w in done),
            "cpu_episode_s": sum(w.cpu_episode_s for w in done),
            "frozen_share": _frozen_share(done),
            "model_share": split(done)["model"] / sum(w.traj.wall_s for w in done),
            "split_s": split(done),
            "end_to_end": summary([w.end_to_end_s for w in done]),
            "load_after": _load(),
        }
    report.details["concurrent"] = {"n": n, **figures}
    fr, run, again = figures["frozen"], figures["running"], figures["frozen again"]
    # frozen before and after the unfrozen batch: a drift of the shared host over the run
    # (linear in time) counts the same on both sides of the ratio
    frozen_per_s = (fr["per_s"] + again["per_s"]) / 2
    label = "x"  # frozen over left running
    report.rows += [
        relative_row(
            f"rollouts/s, {n} {cfg.agent} episodes at once (vs left running)",
            "/s",
            frozen_per_s,
            run["per_s"],
            label,
            "≥ 1× (no slower)",
            frozen_per_s >= run["per_s"],
        ),
        relative_row("  frozen, the batch before", "/s", fr["per_s"], run["per_s"], label),
        relative_row("  frozen, the batch after", "/s", again["per_s"], run["per_s"], label),
        relative_row(
            "  end-to-end per episode, p50",
            "s",
            fr["end_to_end"]["p50_ms"] / 1e3,
            run["end_to_end"]["p50_ms"] / 1e3,
            label,
        ),
        relative_row(
            "  share of play waiting on the model",
            "%",
            fr["model_share"] * 100,
            run["model_share"] * 100,
            label,
        ),
        relative_row(
            f"sandbox CPU during model calls ({fr['calls']} calls)",
            "s",
            fr["cpu_in_calls_s"],
            run["cpu_in_calls_s"],
            label,
            "= 0 frozen",
            fr["cpu_in_calls_s"] == 0.0,
        ),
        relative_row(
            "  sandbox CPU per call",
            "ms",
            fr["cpu_in_calls_s"] / max(fr["calls"], 1) * 1e3,
            run["cpu_in_calls_s"] / max(run["calls"], 1) * 1e3,
            label,
        ),
        relative_row(
            "  sandbox CPU over the whole play",
            "s",
            fr["cpu_episode_s"],
            run["cpu_episode_s"],
            label,
        ),
    ]


# -- output ----------------------------------------------------------------------------------


def _load() -> str:
    """The host's load averages (1, 5, 15 min): the machine may be shared."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f}/{five:.1f}/{fifteen:.1f}"


def show(report: Report) -> None:
    """The result table, with what the baselines are."""
    print_table(
        report,
        "harness",
        fmt,
        fmt_ratio,
        "Frozen-share rows: baseline = agentenv's built-in loop, same task, model and run; "
        "'not frozen' rows split each episode's unfrozen time (sums / episodes). Concurrent "
        "rows: baseline = the same harness left running during its model calls (the gateway's "
        "pause=False), same run. CPU: the agent sandboxes' cgroup counter, read as each call "
        f"left and as its answer came back. Load average at the end: {_load()}.",
    )


# -- main ------------------------------------------------------------------------------------


async def run_all(cfg: Config) -> Report:
    """Every section of this benchmark, in order, on the engine's host."""
    report = await start_report(await get_engine())
    report.details["load_start"] = _load()
    step(f"load average (1/5/15 min): {_load()} on {os.cpu_count()} CPUs")
    harness = resolve_agent(cfg.agent)
    assert harness is not None
    with tempfile.TemporaryDirectory(prefix="agentenv-bench-harness-") as tmp:
        task = write_task(Path(tmp) / "task")
        # not shared: the task's image stays the base image, whose harness layer is cached
        # across runs (a snapshot of this run's would be rebuilt on, and removed, each time)
        prepared = await prepare(task, backend=BACKEND)
        try:
            started = time.perf_counter()
            await harness_image(prepared.image, harness, backend=BACKEND)
            step(f"{cfg.agent}'s image ready in {time.perf_counter() - started:.1f} s")
            with k3_elsewhere(cfg.call_s, cfg.tps, cfg.looks, cfg.agent) as base_url:
                model = OpenAIChatModel(
                    base_url=base_url,
                    api_key="x",
                    limit=AdaptiveLimit(LIMIT_INITIAL, maximum=LIMIT_MAX),
                )
                setting = Setting(prepared, harness, model)
                sections: list[tuple[str, Callable[[], Awaitable[None]]]] = [
                    ("share", lambda: bench_share(cfg, setting, report)),
                    ("concurrent", lambda: bench_concurrent(cfg, setting, report)),
                ]
                try:
                    await run_sections(report, [x for x in sections if cfg.only in (None, x[0])])
                finally:
                    await model.aclose()
        finally:
            await release(prepared)
    report.details["load_end"] = _load()
    return report


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    cfg = Config.from_args(argv)
    # everything agentenv creates carries its run id: make it ours, for the sweep
    os.environ["AGENTENV_RUN_ID"] = RUN_ID
    agentenv_labels.run_id.cache_clear()
    if agentenv_labels.run_id() != RUN_ID:
        raise RuntimeError("could not set agentenv's run id")
    try:
        return run_benchmark(cfg, lambda: run_all(cfg), show)
    finally:
        sweep_run()


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["Config", "Probe", "Watched", "main", "scripted", "shell_call", "watched_episode"]
