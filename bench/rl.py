"""RL benchmark: what a forked group saves over n full setups, and how much of a rollout's
time its sandbox spends paused when many run at once.

Measures, in one run, two figures of the RL API (``agentenv/rl/rollout.py``):

1. Setup once and fork n vs n full setups. A task whose ``setup`` builds a small C project
   (``make``: a Python script generates four C files, gcc compiles them at -O2 one after the
   other and links a shared library; about 2 s of real CPU in one sandbox, which has one
   CPU) and whose verifier wants ``answer.txt`` to say ``ok``. The policy is in-process
   and fast: one command that writes ``ok`` only if the setup's library is there (so a
   fork that lost the setup scores 0). ``rollout_group(task, policy, n)`` with
   ``share_setup=True`` (prepare and set up one sandbox, snapshot it, fork n) against the
   baseline measured in the same run, ``share_setup=False`` (n sandboxes each running the
   setup, concurrently, competing for the host's cores as real setups would): the wall
   time of each group, and the phases its ``timings`` report. ``GroupTimings`` only splits
   a group into the part before the episodes (for a shared group: prepare, setup, snapshot
   and fork) and the episodes, so the shared group's first part is split further by
   running the same steps again by hand (``prepare``: a sandbox, the setup and a snapshot;
   then ``start_sandbox`` n times). Every reward must be 1.0.
2. Throughput of many concurrent rollouts. N workers (``--concurrent``, 50) each run
   ``rollout()`` after ``rollout()`` until N x ``--rounds`` (6) are done, against the local
   K3-compatible server (in a process of its own, as a remote endpoint is) with a time
   to first token of 1 s, through one shared
   ``OpenAIChatModel`` whose ``AdaptiveLimit`` starts at 128 (so every request is in
   flight at once). The model answers from the number of assistant messages in the
   request: first a ``bash`` command, then ``write_file answer.txt`` and ``submit``. Run
   twice in one run: today's path (inside one ``recycling()`` block: an episode's agent
   and checker sandboxes are recycled for the next; the direct cgroup freezer) against
   the previous path as the baseline (every sandbox created and removed, every pause and
   upload and frozen download the engine's: ``AGENTENV_FREEZER=engine``,
   ``AGENTENV_UPLOADS=engine``, ``AGENTENV_DOWNLOADS=engine``; the
   checker's lower CPU weight is today's on both). Reported for both: rollouts per second over
   the whole batch, sum(paused_s) / sum(wall_s), end-to-end p50, pause + resume per turn,
   and that every rollout earned 1.0.

Usage: ``.venv/bin/python bench/rl.py [--quick] [--concurrent N] [--rounds R]
[--only group|concurrent] [--json PATH]``.

The RL API creates its sandboxes itself (no spec to label), so this run sets
``AGENTENV_RUN_ID`` to its run id: everything it creates carries ``agentenv.run=<run id>``
and whatever is still there when the run ends (error, Ctrl-C) is removed by that label, and
only by it.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from multiprocessing.connection import Connection
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

from agentenv.agent import policies
from agentenv.agent.loop import Trajectory
from agentenv.model.client import OpenAIChatModel
from agentenv.model.limit import AdaptiveLimit
from agentenv.model.types import ChatModel
from agentenv.rl.rollout import GroupTimings, rollout, rollout_group
from agentenv.runner.episode import prepare, release, start_sandbox
from agentenv.sandbox import Sandbox, recycling
from agentenv.sandbox import labels as agentenv_labels
from agentenv.sandbox.docker import get_engine
from agentenv.tasks import Task, load_task
from agentenv.testing.k3server import K3Server, ScriptedToolCall, ScriptedTurn

TTFT_S = 1.0
LIMIT_INITIAL, LIMIT_MAX = 128, 256

# -- the tasks -------------------------------------------------------------------------------

# The build task's workspace: a generator and a Makefile. ``make`` runs serially, so one
# setup keeps one core busy (a sandbox has one CPU) for about 2 s on this kind of host.
GEN_PY = r'''"""Generate the project's C sources, as a build step would."""
import os

UNITS, FUNCS = 4, 180
os.makedirs("build", exist_ok=True)
for m in range(UNITS):
    with open(f"build/unit{m}.c", "w") as f:
        for j in range(FUNCS):
            f.write(
                f"int f{m}_{j}(int x) {{ int s = 0; "
                f"for (int k = 0; k < x; k++) s += (k * {j}) ^ (s >> 3); return s + {j}; }}\n"
            )
        calls = " + ".join(f"f{m}_{j}(x)" for j in range(FUNCS))
        f.write(f"int unit{m}(int x) {{ return {calls}; }}\n")
'''
MAKEFILE = (
    "UNITS := $(patsubst %,build/unit%.o,0 1 2 3)\n"
    "\n"
    "build/libproj.so: $(UNITS)\n"
    "\tgcc -shared -o $@ $^\n"
    "\n"
    "build/unit%.o: build/unit%.c\n"
    "\tgcc -O2 -fPIC -c $< -o $@\n"
    "\n"
    "build/unit%.c: gen.py\n"
    "\tpython3 gen.py\n"
    "\n"
    ".SECONDARY:\n"
)
BUILD_TOML = """\
id = "bench-rl-build"
description = "Check that the project was built (the setup builds it)."
setup = "make -s"

[verifier]
kind = "file"
path = "answer.txt"
equals = "ok"
"""
BUILD_INSTRUCTION = "If build/libproj.so exists, write `ok` to answer.txt.\n"
BUILD_COMMAND = "test -f build/libproj.so && echo ok > answer.txt"

MANY_TOML = """\
id = "bench-rl-many"
description = "Read the notes, write the answer."

[verifier]
kind = "file"
path = "answer.txt"
equals = "42"
"""
MANY_INSTRUCTION = "Read notes.txt and write the answer it asks for to answer.txt.\n"
NOTES = "The answer is 42.\n"
LOOK = "ls -la && cat notes.txt"


def write_task(folder: Path, toml: str, instruction: str, files: dict[str, str]) -> Task:
    """A task folder (``task.toml``, ``instruction.md``, ``workspace/``), loaded."""
    (folder / "workspace").mkdir(parents=True)
    (folder / "task.toml").write_text(toml)
    (folder / "instruction.md").write_text(instruction)
    for name, text in files.items():
        (folder / "workspace" / name).write_text(text)
    return load_task(folder)


# -- configuration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """How big each measurement is."""

    group_n: int
    concurrent: int
    rounds: int
    json_path: Path | None
    only: str | None = None  # one section

    @classmethod
    def from_args(cls, argv: list[str] | None = None) -> Config:
        """Parse the command line."""
        parser = arg_parser(__doc__)
        parser.add_argument("--concurrent", type=int, help="rollouts at once (default 50)")
        parser.add_argument("--rounds", type=int, help="rollouts per worker (default 3)")
        parser.add_argument("--only", choices=("group", "concurrent"), help="one section")
        args = parser.parse_args(argv)
        return cls(
            group_n=4 if args.quick else 8,
            concurrent=args.concurrent or (20 if args.quick else 50),
            rounds=args.rounds or (2 if args.quick else 6),
            json_path=args.json,
            only=args.only,
        )


def check_rewards(trajs: list[Trajectory], n: int, what: str) -> None:
    """Fail loudly unless there are ``n`` trajectories, each with reward 1.0."""
    rewards = [t.reward for t in trajs]
    if len(trajs) != n or any(r != 1.0 for r in rewards):
        stops = [t.stop_reason for t in trajs]
        raise RuntimeError(f"{what}: expected {n} rewards of 1.0, got {rewards} (stops {stops})")


# -- 1. setup once and fork n vs n full setups -----------------------------------------------


def build_policy(task: Task) -> ChatModel:
    """One command: ``ok`` into answer.txt if the setup's library is there."""
    return policies.command(BUILD_COMMAND)


async def timed_group(
    task: Task, n: int, share_setup: bool
) -> tuple[float, GroupTimings, list[Trajectory]]:
    """One ``rollout_group`` of ``n``: its wall time, its timings, its trajectories."""
    timings: list[GroupTimings] = []
    started = time.perf_counter()
    group = await rollout_group(task, build_policy, n, share_setup=share_setup, timings=timings)
    wall = time.perf_counter() - started
    check_rewards(group, n, f"rollout_group(share_setup={share_setup})")
    return wall, timings[0], group


async def phases_by_hand(task: Task, n: int) -> dict[str, float]:
    """What ``rollout_group(share_setup=True)`` does before its episodes, step by step:
    prepare the task's state (a root sandbox, its setup, a snapshot), then start ``n``
    agent sandboxes from it. Seconds per phase."""
    boxes: list[Sandbox] = []
    t0 = time.perf_counter()
    prepared = await prepare(task, share=True)
    try:
        t1 = time.perf_counter()

        async def one() -> None:
            boxes.append(await start_sandbox(prepared))

        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(one)
        t2 = time.perf_counter()
    finally:
        for box in boxes:
            await box.close()
        await release(prepared)
    return {"prepare_s": t1 - t0, "fork_s": t2 - t1, "total_s": t2 - t0}


async def bench_group(cfg: Config, report: Report) -> None:
    """``rollout_group`` with a shared setup vs a setup per sandbox."""
    n = cfg.group_n
    with tempfile.TemporaryDirectory(prefix="agentenv-bench-rl-") as tmp:
        task = write_task(
            Path(tmp) / "build",
            BUILD_TOML,
            BUILD_INSTRUCTION,
            {"gen.py": GEN_PY, "Makefile": MAKEFILE},
        )
        step(f"forked group: one rollout with its setup alone (warm-up and reference), n={n}")
        started = time.perf_counter()
        alone = await rollout(task, build_policy)
        alone_s = time.perf_counter() - started
        check_rewards([alone], 1, "rollout() alone")
        step(f"forked group: rollout_group n={n}, share_setup=False (baseline), then True")
        base_wall, base_t, unshared = await timed_group(task, n, share_setup=False)
        fork_wall, fork_t, group = await timed_group(task, n, share_setup=True)
        step(f"forked group: prepare, setup, snapshot, fork {n} by hand (the phase split)")
        phases = await phases_by_hand(task, n)

    episodes = [t.wall_s for t in group]
    runs = 1 + len(unshared) + len(group)  # each already checked: all 1.0, or it raised
    rewarded = sum(1 for t in [alone, *unshared, *group] if t.reward == 1.0)
    report.details["group"] = {
        "n": n,
        "rollout_alone_s": alone_s,
        "unshared": {"wall_s": base_wall, **base_t.model_dump()},
        "shared": {"wall_s": fork_wall, **fork_t.model_dump()},
        "shared_episode_wall": summary(episodes),
        "phases_by_hand": phases,
    }
    label = f"x {n} setups"
    report.rows += [
        plain_row(f"group of {n}, a setup in each (baseline)", "s", base_wall),
        relative_row(
            f"group of {n}, setup once + snapshot + fork", "s", fork_wall, base_wall, label
        ),
        relative_row(
            "  setup phase: prepare, setup, snapshot, fork",
            "s",
            fork_t.setup_s,
            base_wall,
            label,
        ),
        relative_row(f"  episodes ({n} concurrent)", "s", fork_t.episodes_s, base_wall, label),
        plain_row("  by hand: prepare (sandbox, setup, snapshot)", "s", phases["prepare_s"]),
        plain_row(f"  by hand: start {n} sandboxes from it", "s", phases["fork_s"]),
        plain_row("1 rollout with its setup, alone", "s", alone_s),
        plain_row(f"rewards of 1.0 (of {runs})", "", rewarded, f"= {runs}", rewarded == runs),
    ]


# -- 2. fraction of time paused with many concurrent rollouts --------------------------------


def two_turns(body: dict[str, Any]) -> ScriptedTurn:
    """The model's answer, from how far the conversation has got: a look around, then the
    answer and a submit."""
    answered = sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")
    if answered == 0:
        return ScriptedTurn(
            reasoning="Let me read the notes first.",
            tool_calls=[ScriptedToolCall(name="bash", arguments=json.dumps({"command": LOOK}))],
        )
    return ScriptedTurn(
        reasoning="The notes say 42.",
        tool_calls=[
            ScriptedToolCall(
                name="write_file", arguments=json.dumps({"path": "answer.txt", "content": "42\n"})
            ),
            ScriptedToolCall(name="submit", arguments=json.dumps({"summary": "wrote 42"})),
        ],
    )


def _serve(conn: Connection, ttft_s: float) -> None:
    """The K3 server's process: says where it listens, serves until told to stop, then says
    how many requests it answered."""
    with K3Server(two_turns, ttft_s=ttft_s) as server:
        conn.send(server.base_url)
        conn.recv()
        conn.send(len(server.requests))


@contextmanager
def k3_elsewhere(ttft_s: float) -> Iterator[tuple[str, list[int]]]:
    """The local K3 server in a process of its own, as a real endpoint is: in this one, its
    50 streaming threads would share the interpreter lock with the runner's event loop.
    Yields its base URL and a list that gets the number of requests it answered."""
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(theirs, ttft_s), daemon=True)
    server.start()
    answered: list[int] = []
    try:
        if not ours.poll(60):
            raise RuntimeError("the K3 server's process did not start")
        yield str(ours.recv()), answered
        ours.send("stop")
        if ours.poll(30):
            answered.append(int(ours.recv()))
    finally:
        server.terminate()
        server.join(10)


async def concurrent_batch(
    n: int, total: int, *, recycle: bool
) -> tuple[list[tuple[Trajectory, float]], list[str], float, int]:
    """``total`` rollouts, ``n`` at a time (each of ``n`` workers starts the next as its
    last ends), against a model with a 1 s time to first token. With ``recycle``, inside
    one :func:`~agentenv.sandbox.recycling` block and with the direct freezer (today's
    path); without, every sandbox created and removed, every pause, upload and frozen
    download the engine's (the previous path)."""
    done: list[tuple[Trajectory, float]] = []
    failures: list[str] = []
    left = [total]
    switches = ("AGENTENV_FREEZER", "AGENTENV_UPLOADS", "AGENTENV_DOWNLOADS")
    previous = {name: os.environ.pop(name, None) for name in switches}
    if not recycle:  # the path before issue 14: the engine freezes and uploads
        os.environ["AGENTENV_FREEZER"] = "engine"
        os.environ["AGENTENV_UPLOADS"] = "engine"
        os.environ["AGENTENV_DOWNLOADS"] = "engine"
    try:
        with tempfile.TemporaryDirectory(prefix="agentenv-bench-rl-") as tmp:
            task = write_task(Path(tmp) / "many", MANY_TOML, MANY_INSTRUCTION, {"notes.txt": NOTES})
            with k3_elsewhere(TTFT_S) as (base_url, answered):
                model = OpenAIChatModel(
                    base_url=base_url,
                    api_key="x",
                    limit=AdaptiveLimit(LIMIT_INITIAL, maximum=LIMIT_MAX),
                )

                async def worker() -> None:
                    while left[0] > 0:
                        left[0] -= 1
                        t0 = time.perf_counter()
                        try:
                            traj = await rollout(task, model)
                        except Exception as e:
                            failures.append(describe(e))
                            continue
                        done.append((traj, time.perf_counter() - t0))

                try:
                    started = time.perf_counter()
                    reuse = recycling() if recycle else nullcontext()
                    async with reuse as recycler, anyio.create_task_group() as tg:
                        for _ in range(n):
                            tg.start_soon(worker)
                    batch_s = time.perf_counter() - started
                    if recycler is not None:
                        step(
                            f"  sandboxes: {recycler.created} created, {recycler.reused} "
                            f"reused, {recycler.refused} closed when handed back"
                        )
                finally:
                    await model.aclose()
            requests = answered[0] if answered else -1
    finally:
        for name, value in previous.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value
    return done, failures, batch_s, requests


def _p50_ms(figures: dict[str, Any], key: str) -> float:
    found = figures.get(key)
    return float(found["p50_ms"]) if found else 0.0


async def bench_concurrent(cfg: Config, report: Report) -> None:
    """``cfg.concurrent`` rollouts at once, several rounds of them, today's path against
    the previous one in the same run."""
    n, total = cfg.concurrent, cfg.concurrent * cfg.rounds
    figures: dict[str, dict[str, Any]] = {}
    for mode in ("previous", "recycled"):
        step(
            f"concurrent rollouts ({mode}): {total} rollout() calls, {n} at once, 2 turns, "
            f"model ttft {TTFT_S:g} s"
        )
        done, failures, batch_s, requests = await concurrent_batch(
            n, total, recycle=mode == "recycled"
        )
        trajs = [t for t, _ in done]
        turns = [turn for t in trajs for turn in t.turns]
        # model_s = pause + queue + the call + resume: what the call itself does not explain
        freeze_thaw = [
            turn.model_s - turn.completion.latency_s - turn.completion.queued_s for turn in turns
        ]
        wall = sum(t.wall_s for t in trajs)
        figures[mode] = {
            "completed": len(trajs),
            "rewarded": sum(1 for t in trajs if t.reward == 1.0),
            "failures": failures,
            "requests": requests,
            "batch_s": batch_s,
            "per_s": len(trajs) / batch_s,
            "paused_fraction": sum(t.paused_s for t in trajs) / wall if wall else 0.0,
            "episode_wall": summary([t.wall_s for t in trajs]) if trajs else None,
            "rollout_end_to_end": summary([s for _, s in done]) if done else None,
            "pause_resume_per_turn": summary(freeze_thaw) if turns else None,
        }
    report.details["concurrent"] = {"n": n, "total": total, "ttft_s": TTFT_S, **figures}
    new, old = figures["recycled"], figures["previous"]
    label = "x"  # today's figure over the previous path's
    report.rows += [
        relative_row(
            f"throughput, {n} at once ({total} rollouts)",
            "/s",
            new["per_s"],
            old["per_s"],
            label,
            "≥ 2×",
            new["per_s"] >= 2 * old["per_s"],
        ),
        relative_row(
            "  time paused: sum(paused_s) / sum(wall_s)",
            "%",
            new["paused_fraction"] * 100,
            old["paused_fraction"] * 100,
            label,
            "≥ 90%",
            new["paused_fraction"] >= 0.9,
        ),
        relative_row(
            "  episode wall p50 (2 model calls)",
            "s",
            _p50_ms(new, "episode_wall") / 1e3,
            _p50_ms(old, "episode_wall") / 1e3,
            label,
        ),
        relative_row(
            "  pause + resume per turn p50 (with the event loop's lag)",
            "ms",
            _p50_ms(new, "pause_resume_per_turn"),
            _p50_ms(old, "pause_resume_per_turn"),
            label,
        ),
        plain_row(
            f"rollouts with reward 1.0 (of {total}, each way)",
            "",
            min(new["rewarded"], old["rewarded"]),
            f"= {total}",
            new["rewarded"] == old["rewarded"] == total,
        ),
    ]
    bad = [m for m, f in figures.items() if f["failures"] or f["rewarded"] != total]
    if bad:
        raise RuntimeError(
            "; ".join(
                f"{m}: {len(figures[m]['failures'])} failed, {figures[m]['rewarded']}/{total} "
                f"rewarded: {figures[m]['failures'][:2]}"
                for m in bad
            )
        )


# -- output ----------------------------------------------------------------------------------


def show(report: Report) -> None:
    """The result table, with what the baselines are."""
    print_table(
        report,
        "rl",
        fmt,
        fmt_ratio,
        "baseline = rollout_group(share_setup=False) in the same run: every sandbox runs the "
        "setup (make, ~2 s of CPU) itself, concurrently. 'by hand' rows repeat the shared "
        "group's steps one at a time (GroupTimings does not split them). Concurrent rows: "
        "baseline = the previous path in the same run (no recycling; the engine pauses and "
        "uploads and downloads: AGENTENV_FREEZER=engine, AGENTENV_UPLOADS=engine, "
        "AGENTENV_DOWNLOADS=engine).",
    )


# -- main ------------------------------------------------------------------------------------


async def run_all(cfg: Config) -> Report:
    """Every section of this benchmark, in order, on the engine's host."""
    report = await start_report(await get_engine())
    sections = [
        ("group", lambda: bench_group(cfg, report)),
        ("concurrent", lambda: bench_concurrent(cfg, report)),
    ]
    await run_sections(report, [s for s in sections if cfg.only in (None, s[0])])
    return report


def sweep_run() -> None:
    """Remove every container and snapshot image carrying this run's ``agentenv.run`` label
    (the RL API's own sandboxes). Blocking; used after the event loop has ended."""
    client = docker.from_env(version="auto")
    try:
        label = f"{agentenv_labels.RUN}={RUN_ID}"
        found = [c["Id"] for c in client.api.containers(all=True, filters={"label": label})]
        for container_id in found:
            remove_container(client, container_id)
        images = client.api.images(filters={"label": label}, quiet=True)
        for image_id in images:
            with suppress(docker.errors.NotFound):
                client.api.remove_image(image_id, force=True)
        if found or images:
            console.print(
                f"[yellow]cleanup: removed {len(found)} leftover sandboxes and {len(images)} "
                f"snapshot images of run {RUN_ID}[/yellow]"
            )
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    cfg = Config.from_args(argv)
    # The RL API labels its sandboxes with agentenv's run id: make it ours, so that the
    # sweep finds them (``run_id`` is cached: forget any value taken before).
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
