"""Harbor overhead benchmark: what a Harbor task costs per episode against the same task in
agentenv's own format, and what each place Harbor's ``test.sh`` can run costs, in one run.

The tasks are written by the benchmark into a temporary folder, all from one
Dockerfile (agentenv's base image, ``WORKDIR /app``) and one piece of check
logic (``/app/answer.txt`` must hold ``42``; the oracle writes it):

- ``native``: agentenv's format, the file checked by a ``command`` check (verified in a new
  sandbox of the prepared state plus the agent's workdir, agentenv's default);
- ``harbor-final``: Harbor's format, ``tests/test.sh`` writing ``reward.txt``, verified where
  agentenv verifies a Harbor task by default: a new container of the agent's final
  filesystem;
- ``harbor-shared``: the same with ``[verifier] environment_mode = "shared"`` (test.sh in the
  agent's own container, Harbor's own default);
- ``harbor-separate``: ``environment_mode = "separate"``, the answer declared as an artifact
  (a fresh container of the task's image, the artifact copied in).

After a warm-up (the null agent must score 0 on each, the oracle 1.0), each round runs one
oracle episode of each, alternating, through the runner every driver
uses (:func:`agentenv.runner.episode.run_task`: prepare, create, the loop, finish, verify,
teardown); every reward must be 1.0. The table gives p50s over rounds: Harbor's against the
native task's (prepare, create, the verdict's wait, the episode's wall time), then
``shared`` and ``separate`` against ``final``. The verdict's wait is finish + verify: in
``shared`` mode test.sh runs inside ``finish``, in the agent's sandbox before it is frozen.

Usage: ``.venv/bin/python bench/harbor_overhead.py [--n 5] [--quick] [--json PATH]``.
"""

from __future__ import annotations

import functools
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import anyio
import docker
from common import (
    IMAGE,
    RUN_ID,
    Report,
    arg_parser,
    fmt,
    fmt_ratio,
    p50,
    print_table,
    relative_row,
    remove_container,
    run_benchmark,
    run_sections,
    start_report,
    step,
    summary,
)

from agentenv.runner.episode import run_task
from agentenv.runner.policy import Policies
from agentenv.sandbox.docker import get_engine
from agentenv.tasks import Task, load_task
from agentenv.verify.kinds.harbor import HarborCheck

os.environ.setdefault("AGENTENV_RUN_ID", RUN_ID)  # every sandbox agentenv makes is labelled
AGENTENV_RUN_LABEL = "agentenv.run"

DOCKERFILE = f"FROM {IMAGE}\nWORKDIR /app\nRUN echo 'write 42 to answer.txt' > /app/README\n"
SOLVE = "#!/bin/bash\necho 42 > /app/answer.txt\n"
INSTRUCTION = "Write the number 42 to /app/answer.txt.\n"
# the one check, in each format's words
CHECK = 'test "$(cat /app/answer.txt 2>/dev/null)" = 42'
TEST_SH = (
    f"#!/bin/bash\nif {CHECK}; then echo 1 > /logs/verifier/reward.txt\n"
    "else echo 0 > /logs/verifier/reward.txt; fi\n"
)
NATIVE_TOML = f"""description = "write 42 (agentenv's format)"
dockerfile = "image/Dockerfile"
workdir = "/app"

[verifier]
kind = "command"
command = '{CHECK}'
timeout_s = 60
"""
HARBOR_TOML = """version = "1.0"
{top}
[agent]
timeout_sec = 600.0

[verifier]
timeout_sec = 60.0
{verifier}
[environment]
cpus = 1
memory_mb = 1024
"""
MODES = {
    "harbor-final": ("", ""),
    "harbor-shared": ('environment_mode = "shared"\n', ""),
    "harbor-separate": ('environment_mode = "separate"\n', 'artifacts = ["/app/answer.txt"]\n'),
}
KINDS = ("native", *MODES)


@dataclass(frozen=True)
class Config:
    """Rounds (one episode of each kind per round) and where to write the numbers."""

    n: int
    json_path: Path | None


def write_tasks(root: Path) -> dict[str, Path]:
    """The four task folders under ``root``, by kind."""
    folders: dict[str, Path] = {}
    for kind in KINDS:
        folder = folders[kind] = root / kind
        # an environment/ folder is what makes a folder Harbor's: the native task's
        # Dockerfile (the same file) is elsewhere
        context = folder / ("image" if kind == "native" else "environment")
        context.mkdir(parents=True)
        (context / "Dockerfile").write_text(DOCKERFILE)
        (folder / "instruction.md").write_text(INSTRUCTION)
        if kind == "native":
            (folder / "task.toml").write_text(NATIVE_TOML)
            (folder / "solution.sh").write_text(SOLVE)
            continue
        verifier, top = MODES[kind]
        (folder / "task.toml").write_text(HARBOR_TOML.format(verifier=verifier, top=top))
        for sub, name, text in (("tests", "test.sh", TEST_SH), ("solution", "solve.sh", SOLVE)):
            (folder / sub).mkdir()
            (folder / sub / name).write_text(text)
    return folders


async def one_episode(task: Task, policies: Policies, expect: float = 1.0) -> dict[str, float]:
    """One episode of ``task``: its phases' seconds and ``wall``; raises unless the reward
    is ``expect``."""
    phases: dict[str, float] = {}
    started = time.perf_counter()
    traj, _ = await run_task(task, policies.for_task(task), phases=phases)
    phases["wall"] = time.perf_counter() - started
    reward = traj.score.reward if traj.score is not None else None
    if reward != expect:
        detail = traj.score.checks if traj.score is not None else "no score"
        raise RuntimeError(f"{task.id}: {policies.spec} scored {reward}, not {expect}: {detail}")
    phases["verdict"] = phases.get("finish", 0.0) + phases.get("verify", 0.0)
    return phases


async def bench_episodes(cfg: Config, report: Report, root: Path) -> None:
    """Warm up each kind once (its image built), then ``cfg.n`` rounds of one episode each."""
    tasks = {kind: load_task(folder) for kind, folder in write_tasks(root).items()}
    modes = {k: t.verifier.mode for k, t in tasks.items() if isinstance(t.verifier, HarborCheck)}
    assert modes == {k: k.removeprefix("harbor-") for k in MODES}, modes
    policies = Policies("oracle")
    for task in tasks.values():  # builds the image; the check fails an agent doing nothing
        await one_episode(task, Policies("null"), expect=0.0)
        await one_episode(task, policies)
    found: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
    for i in range(cfg.n):
        step(f"round {i + 1}/{cfg.n}")
        order = KINDS if i % 2 == 0 else tuple(reversed(KINDS))  # neither always goes first
        for kind in order:
            found[kind].append(await one_episode(tasks[kind], policies))
    summarize(report, found)


PHASES = ("prepare", "create", "loop", "finish", "verify", "teardown", "verdict", "wall")


def summarize(report: Report, found: dict[str, list[dict[str, float]]]) -> None:
    """The rows: Harbor (final) against native, then each Harbor mode against final."""
    per = {
        kind: {ph: [e.get(ph, 0.0) for e in eps] for ph in PHASES} for kind, eps in found.items()
    }
    report.details["episodes"] = {
        kind: {ph: summary(v) for ph, v in phases.items()} for kind, phases in per.items()
    }

    def ms(kind: str, phase: str) -> float:
        return p50(per[kind][phase]) * 1e3

    for phase, what in (
        ("prepare", "prepare (image cached; workdir read)"),
        ("create", "create the agent's sandbox"),
        ("verdict", "finish + verify (the verdict's wait)"),
        ("wall", "episode wall time"),
    ):
        report.rows.append(
            relative_row(
                f"harbor (final) vs native: {what}",
                "ms",
                ms("harbor-final", phase),
                ms("native", phase),
                "× native",
            )
        )
    for kind in ("harbor-shared", "harbor-separate"):
        for phase, what in (("verdict", "finish + verify"), ("wall", "episode wall time")):
            report.rows.append(
                relative_row(
                    f"{kind.removeprefix('harbor-')} vs final: {what}",
                    "ms",
                    ms(kind, phase),
                    ms("harbor-final", phase),
                    "× final",
                )
            )


def sweep_agentenv() -> None:
    """Remove what a failed episode of this run left (agentenv labels it with our run id)."""
    client = docker.from_env(version="auto")
    try:
        label = f"{AGENTENV_RUN_LABEL}={RUN_ID}"
        for c in client.api.containers(all=True, filters={"label": label}):
            remove_container(client, c["Id"])
    finally:
        client.close()


async def run_all(cfg: Config) -> Report:
    report = await start_report(await get_engine())
    with tempfile.TemporaryDirectory(prefix="harbor-overhead-") as tmp:
        try:
            await run_sections(
                report, [("episodes", functools.partial(bench_episodes, cfg, report, Path(tmp)))]
            )
        finally:
            await anyio.to_thread.run_sync(sweep_agentenv)
    return report


def show(report: Report) -> None:
    episodes = report.details.get("episodes", {})
    if episodes:
        header = "".join(f"{ph:>10}" for ph in PHASES)
        print(f"p50 ms per phase, over rounds\n{'':18}{header}")
        for kind, phases in episodes.items():
            print(f"{kind:18}" + "".join(f"{phases[ph]['p50_ms']:10.0f}" for ph in PHASES))
    print_table(
        report,
        "harbor overhead",
        fmt,
        fmt_ratio,
        "one oracle episode of each kind per round, alternating (run_task: prepare, create, "
        "loop, finish, verify, teardown); verdict = finish + verify; p50 over rounds",
    )


def main() -> int:
    parser = arg_parser(__doc__)
    parser.add_argument("--n", type=int, default=None, help="rounds (5; 2 with --quick)")
    args = parser.parse_args()
    cfg = Config(n=args.n or (2 if args.quick else 5), json_path=args.json)
    return run_benchmark(cfg, lambda: run_all(cfg), show)


if __name__ == "__main__":
    raise SystemExit(main())
