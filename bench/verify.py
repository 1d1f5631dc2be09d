"""Verification benchmark: what verifying in a new checker sandbox costs per episode, against
verifying in the sandbox at hand, measured in one run.

Since the verdict must not trust anything the agent's processes touched, an episode now ends
with: freeze the agent's sandbox and take its workdir as a tar (``finish``), then create a
checker sandbox from the task's prepared state, lay out the hidden tests, checkers and the
workspace, run the checks and remove it (``verify_final``). The baseline is the old way,
measured in the same run on the same tasks: ``verify`` in a sandbox that already holds the
workspace (it was the agent's; its creation is the episode's, not the verifier's), i.e. the
layout and the checks alone. A third way is what episodes do: the checker sandbox is made
(and paused) while the agent works, so verification waits for no container creation. For
each bundled task in ``TASKS`` (function outputs, a command check, a composite of both), the
oracle's final state is taken once; then the three ways alternate, ``--n`` times each. All
must give reward 1.0 every time.

Usage: ``.venv/bin/python bench/verify.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path

from common import (
    RUN_ID,
    Report,
    arg_parser,
    fmt,
    fmt_ratio,
    p50,
    print_table,
    relative_row,
    run_benchmark,
    run_sections,
    start_report,
    step,
    summary,
)

from agentenv.agent import policies
from agentenv.agent.loop import run_episode
from agentenv.runner.episode import (
    CheckerAhead,
    Final,
    Prepared,
    checker_spec,
    finish,
    prepare,
    release,
    start_sandbox,
    verify_final,
)
from agentenv.sandbox.docker import DockerSandbox, get_engine
from agentenv.tasks import Task, load_task
from agentenv.verify import Workspace, verify

os.environ.setdefault("AGENTENV_RUN_ID", RUN_ID)  # everything created is swept by this label
ROOT = Path(__file__).resolve().parents[1]
TASKS = ["text-stats", "top-error-ips", "config-validator"]


@dataclass(frozen=True)
class Config:
    """How many verifications of each kind per task, and where to write the numbers."""

    n: int
    json_path: Path | None


async def final_state(task: Task, prepared: Prepared) -> Final:
    """The oracle's final state of ``task``."""
    assert task.solution is not None
    async with await start_sandbox(prepared) as box:
        await run_episode(policies.oracle(task.solution.read_text()), box, task.instruction)
        return await finish(box, prepared)


async def in_place(prepared: Prepared, final: Final) -> tuple[float, float]:
    """The baseline: ``verify`` in a sandbox already holding the workspace. Seconds, reward."""
    task = prepared.task
    assert task.verifier is not None
    ws = Workspace(archive=final.workspace, workdir=task.workdir, agent_user=prepared.agent_user)
    async with await DockerSandbox.create(checker_spec(prepared.image, task, "docker")) as box:
        await box.upload_tar(final.workspace, task.workdir)  # there before the clock starts
        started = time.perf_counter()
        score = await verify(box, task.verifier, ws, tests=task.tests)
        return time.perf_counter() - started, score.reward


async def fresh(prepared: Prepared, final: Final) -> tuple[float, float]:
    """agentenv now: a new checker sandbox from the prepared state. Seconds, reward."""
    started = time.perf_counter()
    score = await verify_final(prepared, final)
    assert score is not None
    return time.perf_counter() - started, score.reward


async def made_ahead(prepared: Prepared, final: Final) -> tuple[float, float]:
    """agentenv's episodes: the checker sandbox was made (and paused) while the agent
    worked, so only thawing, the layout, the checks and the removal are waited for."""
    ahead = CheckerAhead(prepared)
    await ahead.make()  # during the episode: not on the clock
    started = time.perf_counter()
    score = await verify_final(prepared, final, ahead=ahead)
    assert score is not None
    return time.perf_counter() - started, score.reward


async def bench_task(cfg: Config, report: Report, name: str) -> None:
    task = load_task(ROOT / "environments" / name)
    prepared = await prepare(task)
    try:
        final = await final_state(task, prepared)
        # the agent's side of the new way: freeze and take the workdir (once is typical)
        async with await start_sandbox(prepared) as box:
            started = time.perf_counter()
            await finish(box, prepared)
            finish_s = time.perf_counter() - started
        await fresh(prepared, final)  # warm-up: image caches, first executor
        old: list[float] = []
        new: list[float] = []
        warm: list[float] = []
        for i in range(cfg.n):
            step(f"{name}: {i + 1}/{cfg.n}")
            for runner, samples in ((in_place, old), (fresh, new), (made_ahead, warm)):
                seconds, reward = await runner(prepared, final)
                if reward != 1.0:
                    raise RuntimeError(f"{name}: {runner.__name__} gave reward {reward}")
                samples.append(seconds)
    finally:
        await release(prepared)
    report.details[name] = {
        "in_place": summary(old),
        "fresh": summary(new),
        "made_ahead": summary(warm),
        "finish_s": finish_s,
    }
    report.rows.append(
        relative_row(
            f"verify {name} (p50): new checker sandbox, made then",
            "ms",
            p50(new) * 1e3 + finish_s * 1e3,
            p50(old) * 1e3,
            "× in place",
        )
    )
    report.rows.append(
        relative_row(
            f"verify {name} (p50): new checker sandbox, made ahead",
            "ms",
            p50(warm) * 1e3 + finish_s * 1e3,
            p50(old) * 1e3,
            "× in place",
        )
    )


async def run_all(cfg: Config) -> Report:
    report = await start_report(await get_engine())
    await run_sections(report, [(n, functools.partial(bench_task, cfg, report, n)) for n in TASKS])
    return report


def show(report: Report) -> None:
    print_table(
        report,
        "verify",
        fmt,
        fmt_ratio,
        "new: finish (freeze, take the workdir) + a checker sandbox made (then, or ahead while "
        "the agent works, as episodes do), laid out, checked and removed; in place (the old "
        "way): the layout and the checks in a sandbox already there",
    )


def main() -> int:
    args = arg_parser(__doc__).parse_args()
    cfg = Config(n=3 if args.quick else 10, json_path=args.json)
    return run_benchmark(cfg, lambda: run_all(cfg), show)


if __name__ == "__main__":
    raise SystemExit(main())
