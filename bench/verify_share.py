"""Verification share benchmark: how much of an episode's time goes to verification, on the
main job, for a baseline revision and the working tree, measured in one run.

The main job is ``agentenv eval environments/ --model oracle`` (the bundled tasks, one oracle
episode each). Each revision runs it with its own code and its own tasks: the baseline
(``--baseline REV``, checked out with ``git worktree add`` into a temporary folder) and the
working tree, each as a subprocess with ``PYTHONPATH`` at its tree, both against the same
Docker engine and images. The two alternate, ``--n`` jobs each (baseline first in odd
rounds, working tree first in even ones), so a change in the machine's load hits both.

**Verification** is the episode's time from the agent's end to the verdict, as
``results.jsonl`` splits it: ``finish`` (freeze the agent's sandbox, take its workdir) plus
every phase named ``verif…`` (``verify``: take the checker sandbox made ahead, lay it out,
run the checks, hand it back). The agent's sandbox's removal between the two is counted by
the runner as ``teardown`` and is not in it. **Episode time** is ``wall_s``. The **share**
is the job's verification over its episodes' time; ``agentenv eval`` prints the ``verify``
phase's share of all phases (the issue's "59%"), shown too. Result lines are read as plain
JSON, so revisions whose results have other fields compare all the same.

With ``--trace`` (the default) each job runs under ``bench/traced_eval.py``, which times
every outermost sandbox operation on the verdict path; a table then says where
verification goes, by operation (execs by what they run, uploads, thawing, hand-back) and
by task. ``--units N`` adds the unit costs of those operations in one checker sandbox.
``--what-if`` measures a change without making it, on the working tree's side only
(``shares=N``: the checker sandboxes' CPU weight; ``dedupe-stop``: no ``stop_agent`` when
nothing could have started a process of the agent's user since the last one;
``hand-back-later``: the checker handed back after the verdict; ``dedupe-reset``: no fresh
workspace before a leaf when only read-only checks ran since the last; ``reap-fast``:
``call_function.py`` polling for a case's exit every 0.1 ms; see ``traced_eval.what_if``).

Usage: ``.venv/bin/python bench/verify_share.py [--baseline REV] [--n N] [--quick] [--json
PATH]``.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import docker
from common import (
    RUN_ID,
    Report,
    arg_parser,
    console,
    fmt,
    fmt_ratio,
    p50,
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
from rich.table import Table

from agentenv.sandbox.docker import get_engine

ROOT = Path(__file__).resolve().parents[1]
TRACER = Path(__file__).resolve().parent / "traced_eval.py"
PYTHON = sys.executable
SIDES = ("baseline", "work")
TARGET_SHARE = 1 / 3
AGENTENV_RUN_LABEL = "agentenv.run"  # every sandbox agentenv makes carries its run id


@dataclass(frozen=True)
class Config:
    """Which revision to compare with, how many jobs of each, and how."""

    baseline: str
    n: int
    concurrency: int | None
    trace: bool
    units: int
    what_if: str  # changes tried on the working tree's side only (see traced_eval.what_if)
    json_path: Path | None


@dataclass
class Job:
    """One job's numbers: per task, verification and episode seconds; and its trace."""

    side: str
    round: int
    wall_s: float
    verification: dict[str, float] = field(default_factory=dict)
    episode: dict[str, float] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)  # summed over its episodes
    rewards: dict[str, float | None] = field(default_factory=dict)
    trace: list[dict[str, Any]] = field(default_factory=list)

    @property
    def share(self) -> float:
        """Verification over episode time, the job's episodes together."""
        return sum(self.verification.values()) / (sum(self.episode.values()) or 1.0)

    @property
    def cli_share(self) -> float:
        """The ``verify`` phase over all phases: what ``agentenv eval`` prints."""
        return self.phases.get("verify", 0.0) / (sum(self.phases.values()) or 1.0)


# -- reading a job ---------------------------------------------------------------------------


def is_verification(phase: str) -> bool:
    """Whether a phase of ``results.jsonl`` is on the way from the agent's end to the
    verdict."""
    return phase == "finish" or phase.startswith("verif")


def read_results(path: Path) -> dict[str, dict[str, Any]]:
    """The last result line of each episode (by task and sample), as plain JSON."""
    lines: dict[str, dict[str, Any]] = {}
    for raw in path.read_text().splitlines():
        with suppress(ValueError):
            line = json.loads(raw)
            if isinstance(line, dict):
                task = str(line.get("task_id") or line.get("task") or "?")
                sample = line.get("sample", 0)
                lines[task if not sample else f"{task}#{sample}"] = line
    return lines


def read_job(side: str, round_: int, folder: Path, wall_s: float, trace: Path | None) -> Job:
    """A finished job's numbers from its folder (and its trace, if any)."""
    job = Job(side, round_, wall_s)
    for key, line in read_results(folder / "results.jsonl").items():
        phases = {k: float(v) for k, v in (line.get("phases") or {}).items()}
        job.verification[key] = sum(v for k, v in phases.items() if is_verification(k))
        job.episode[key] = float(line.get("wall_s") or sum(phases.values()))
        job.rewards[key] = line.get("reward")
        for name, seconds in phases.items():
            job.phases[name] = job.phases.get(name, 0.0) + seconds
    if trace is not None and trace.exists():
        job.trace = json.loads(trace.read_text()).get("episodes", [])
    return job


# -- running jobs ----------------------------------------------------------------------------


@contextmanager
def baseline_tree(rev: str) -> Iterator[Path]:
    """``rev`` checked out in a temporary folder (a detached git worktree), removed after."""
    with tempfile.TemporaryDirectory(prefix="verify-share-") as tmp:
        where = Path(tmp) / "baseline"
        git = ["git", "-C", str(ROOT)]
        subprocess.run(
            [*git, "worktree", "add", "--detach", str(where), rev], check=True, capture_output=True
        )
        try:
            yield where
        finally:
            subprocess.run(
                [*git, "worktree", "remove", "--force", str(where)],
                check=False,
                capture_output=True,
            )


def revision(tree: Path) -> str:
    """The commit checked out in ``tree``, marked when its files differ from it."""
    head = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dirty = subprocess.run(
        [
            "git",
            "-C",
            str(tree),
            "status",
            "--porcelain",
            "--",
            "agentenv",
            "verifiers",
            "environments",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return head + ("+changes" if dirty else "")


def run_job(cfg: Config, tree: Path, out: Path, trace: Path | None, what_if: str = "") -> float:
    """Run the main job with ``tree``'s code and tasks into ``out``; its wall seconds."""
    env = {**os.environ, "PYTHONPATH": str(tree), "AGENTENV_RUN_ID": RUN_ID}
    if what_if:
        env["AGENTENV_BENCH_WHATIF"] = what_if
        trace = trace or out.parent / f"{out.name}.trace.json"  # only the wrapper does it
    if trace is not None:
        env["AGENTENV_TRACE"] = str(trace)
        argv = [PYTHON, str(TRACER)]
    else:
        argv = [PYTHON, "-m", "agentenv"]
    argv += ["eval", str(tree / "environments"), "--model", "oracle", "--out", str(out)]
    if cfg.concurrency is not None:
        argv += ["--concurrency", str(cfg.concurrency)]
    started = time.perf_counter()
    with (out.parent / f"{out.name}.log").open("w") as log:
        done = subprocess.run(argv, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise RuntimeError(f"{out.name}: agentenv eval exited {done.returncode} (see {log.name})")
    return time.perf_counter() - started


def load() -> str:
    """The load averages, for the record."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


async def bench_jobs(cfg: Config, report: Report, jobs: list[Job], work: Path) -> None:
    """The rounds: baseline and working tree alternating."""
    with baseline_tree(cfg.baseline) as base:
        trees = {"baseline": base, "work": ROOT}
        report.details["revisions"] = {side: revision(tree) for side, tree in trees.items()}
        if cfg.what_if:
            report.details["revisions"]["work"] += f" what-if {cfg.what_if}"
        step(
            f"baseline {report.details['revisions']['baseline']} in {base}; working tree "
            f"{report.details['revisions']['work']}"
        )
        loads = report.details.setdefault("load", [])
        for i in range(cfg.n):
            order = SIDES if i % 2 == 0 else SIDES[::-1]
            for side in order:
                name = f"{side}-{i + 1}"
                trace = work / f"{name}.trace.json" if cfg.trace else None
                loads.append({"before": name, "load": load()})
                step(f"round {i + 1}/{cfg.n}: {side} (load {load()})")
                what_if = cfg.what_if if side == "work" else ""
                run = functools.partial(run_job, cfg, trees[side], work / name, trace, what_if)
                wall = await anyio.to_thread.run_sync(run)
                job = read_job(side, i + 1, work / name, wall, trace)
                jobs.append(job)
                step(
                    f"  {len(job.episode)} episodes in {wall:.0f} s; verification "
                    f"{sum(job.verification.values()):.1f} s of {sum(job.episode.values()):.1f} s "
                    f"({job.share:.0%}; the verify phase {job.cli_share:.0%})"
                )
        loads.append({"before": "end", "load": load()})


# -- the numbers -----------------------------------------------------------------------------


def by_side(jobs: list[Job]) -> dict[str, list[Job]]:
    """The jobs of each side, in order."""
    return {side: [j for j in jobs if j.side == side] for side in SIDES}


def per_episode(values: list[float], episodes: int) -> float:
    return p50(values) / max(episodes, 1)


def summarize(report: Report, jobs: list[Job]) -> None:
    """Table rows and details from the jobs."""
    sides = by_side(jobs)
    if not all(sides.values()):
        return
    base, work = sides["baseline"], sides["work"]
    n_base, n_work = len(base[0].episode), len(work[0].episode)
    ver = {s: [sum(j.verification.values()) for j in js] for s, js in sides.items()}
    epi = {s: [sum(j.episode.values()) for j in js] for s, js in sides.items()}
    share = {s: [j.share for j in js] for s, js in sides.items()}
    cli = {s: [j.cli_share for j in js] for s, js in sides.items()}
    wall = {s: [j.wall_s for j in js] for s, js in sides.items()}
    rows = report.rows
    v_work, v_base = per_episode(ver["work"], n_work), per_episode(ver["baseline"], n_base)
    rows.append(
        relative_row(
            "verification per episode (mean; p50 of jobs)", "s", v_work, v_base, "× baseline"
        )
    )
    rows.append(
        relative_row(
            "episode time per episode (mean; p50 of jobs)",
            "s",
            per_episode(epi["work"], n_work),
            per_episode(epi["baseline"], n_base),
            "× baseline",
        )
    )
    s_work = p50(share["work"])
    rows.append(
        relative_row(
            "verification share of episode time (p50 of jobs)",
            "%",
            100 * s_work,
            100 * p50(share["baseline"]),
            "× baseline",
            "under 33%",
            s_work < TARGET_SHARE,
        )
    )
    rows.append(
        relative_row(
            "verify phase share, as agentenv eval prints it",
            "%",
            100 * p50(cli["work"]),
            100 * p50(cli["baseline"]),
            "× baseline",
        )
    )
    rows.append(
        relative_row(
            "job wall time (p50)", "s", p50(wall["work"]), p50(wall["baseline"]), "× baseline"
        )
    )
    if len(base) > 1:  # the noise: how far one side's jobs spread
        spread = max(ver["baseline"]) / min(ver["baseline"]) if min(ver["baseline"]) else None
        rows.append(
            plain_row("baseline's own spread (max/min job verification)", "", spread or 0.0)
        )
    report.details["jobs"] = [
        {
            "side": j.side,
            "round": j.round,
            "wall_s": j.wall_s,
            "share": j.share,
            "cli_share": j.cli_share,
            "verification": j.verification,
            "episode": j.episode,
            "phases": j.phases,
            "rewards": j.rewards,
        }
        for j in jobs
    ]
    report.details["per_task"] = per_task(sides)
    if any(j.trace for j in jobs):
        report.details["breakdown"] = {s: breakdown(js) for s, js in sides.items()}
        report.details["by_task"] = {s: trace_by_task(js) for s, js in sides.items()}


def per_task(sides: dict[str, list[Job]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per task and side: p50 over jobs of verification and episode seconds, and the share."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for side, js in sides.items():
        for task in sorted({t for j in js for t in j.episode}):
            ver = [j.verification[task] for j in js if task in j.verification]
            epi = [j.episode[task] for j in js if task in j.episode]
            out.setdefault(task, {})[side] = {
                "verification_s": p50(ver),
                "episode_s": p50(epi),
                "share": sum(ver) / (sum(epi) or 1.0),
            }
    return out


def breakdown(jobs: list[Job]) -> dict[str, dict[str, float]]:
    """Per operation kind on the verdict path, per job (mean over jobs): how many, seconds,
    the commands' own seconds, Python interpreters started."""
    totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    traced = [j for j in jobs if j.trace]
    for job in traced:
        for ep in job.trace:
            for op in ep.get("ops", []):
                kind = f"{'finish' if op.get('phase') == 'finish' else 'verify'}: {op['kind']}"
                row = totals[kind]
                row["n"] += 1
                row["s"] += op["s"]
                row["cmd_s"] += op.get("cmd_s") or 0.0
                row["python"] += op.get("python") or 0
                row["bytes"] += op.get("bytes") or 0
            for phase in ("finish", "verify_final"):
                if f"{phase}_end" in ep:
                    totals[f"= {phase}"]["s"] += ep[f"{phase}_end"] - ep[f"{phase}_start"]
                    totals[f"= {phase}"]["n"] += 1
            if "finish_end" in ep and "verify_final_start" in ep:  # the agent's sandbox goes
                totals["= between (agent sandbox handed back)"]["s"] += (
                    ep["verify_final_start"] - ep["finish_end"]
                )
    count = max(len(traced), 1)
    return {k: {m: v / count for m, v in row.items()} for k, row in totals.items()}


def trace_by_task(jobs: list[Job]) -> dict[str, dict[str, float]]:
    """Per task, p50 over jobs: verify_final's seconds and its execs, interpreter starts,
    stop_agent calls and seconds, uploads and seconds, lay-out seconds, the round trips'
    overhead (execs' seconds less their commands' own) and the hand-back."""
    per: dict[str, list[dict[str, float]]] = defaultdict(list)
    for job in jobs:
        for ep in job.trace:
            ops = [o for o in ep.get("ops", []) if o.get("phase") == "verify_final"]
            execs = [o for o in ops if o["kind"].startswith("exec")]
            row = {
                "verify_s": ep.get("verify_final_end", 0.0) - ep.get("verify_final_start", 0.0),
                "execs": len(execs),
                "python": sum(o.get("python") or 0 for o in execs),
                "stop_agent_n": sum(1 for o in execs if "stop_agent" in o["kind"]),
                "stop_agent_s": sum(o["s"] for o in execs if "stop_agent" in o["kind"]),
                "uploads_n": sum(1 for o in ops if o["kind"].startswith("upload")),
                "uploads_s": sum(o["s"] for o in ops if o["kind"].startswith("upload")),
                "layout_s": sum(
                    o["s"]
                    for o in ops
                    if "lay out" in o["kind"]
                    or "empty" in o["kind"]
                    or o["kind"].startswith("upload")
                ),
                "check_s": sum(o["s"] for o in execs if _is_check(o["kind"])),
                "overhead_s": sum(o["s"] - (o.get("cmd_s") or 0.0) for o in execs),
                "hand_back_s": sum(o["s"] for o in ops if o["kind"].startswith("hand back")),
            }
            per[ep.get("task", "?")].append(row)
    return {
        task: {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        for task, rows in sorted(per.items())
    }


def _is_check(kind: str) -> bool:
    return any(w in kind for w in ("check's own", "call_function", "read_capped", "png", "pytest"))


# -- unit costs ------------------------------------------------------------------------------


async def bench_units(cfg: Config, report: Report) -> None:
    """What one of each verdict-path operation costs in a checker sandbox (the working
    tree's code), ``cfg.units`` times each: the round trips that add up above."""
    from agentenv.runner.episode import checker_spec, prepare
    from agentenv.sandbox import create
    from agentenv.tasks import load_task
    from agentenv.verify import Workspace
    from agentenv.verify.base import CHECKERS, empty_workspace
    from agentenv.verify.run import lay_out

    task = load_task(ROOT / "environments" / "text-stats")
    prepared = await prepare(task)
    ws = Workspace(archive=prepared.workspace, workdir=task.workdir, agent_user=prepared.agent_user)
    samples: dict[str, list[float]] = defaultdict(list)
    spec = checker_spec(prepared.image, task, prepared.backend)
    for _ in range(cfg.units):
        started = time.perf_counter()
        box = await create(spec)
        samples["create a checker sandbox"].append(time.perf_counter() - started)
        try:
            started = time.perf_counter()
            await lay_out(box, task.tests, ws)
            samples["lay out /agentenv + workspace (2 execs, 2 uploads)"].append(
                time.perf_counter() - started
            )
            ops: dict[str, tuple[str | list[str], str | None]] = {
                "exec true": (["true"], None),
                "exec python3 -I -c pass": (["python3", "-I", "-c", "pass"], None),
                "exec python3 -I -c pass, as the agent": (
                    ["python3", "-I", "-c", "pass"],
                    ws.agent_user,
                ),
                "exec stop_agent.py": (
                    ["python3", "-I", f"{CHECKERS}/stop_agent.py", ws.agent_user],
                    None,
                ),
                "exec empty workdir, /tmp (sh)": (empty_workspace(ws), None),
            }
            for name, (cmd, user) in ops.items():
                started = time.perf_counter()
                await box.exec(cmd, timeout=60, user=user)
                samples[name].append(time.perf_counter() - started)
            started = time.perf_counter()
            await box.upload_tar(ws.archive, ws.workdir)
            samples[f"upload the workspace ({os.path.getsize(ws.archive)} B)"].append(
                time.perf_counter() - started
            )
            started = time.perf_counter()
            await box.pause()
            await box.resume()
            samples["pause + resume"].append(time.perf_counter() - started)
        finally:
            started = time.perf_counter()
            await box.close()
            samples["close (remove) a checker sandbox"].append(time.perf_counter() - started)
    report.details["units"] = {name: summary(s) for name, s in samples.items()}
    for name, s in samples.items():
        report.rows.append(plain_row(f"unit: {name} (p50)", "ms", p50(s) * 1e3))


# -- output ----------------------------------------------------------------------------------


def show(report: Report) -> None:
    if "per_task" in report.details:
        show_tasks(report.details["per_task"])
    if "breakdown" in report.details:
        show_breakdown(report.details["breakdown"])
        show_by_task(report.details["by_task"]["work"])
    print_table(
        report,
        "verify share",
        fmt_pct,
        fmt_ratio,
        f"verification = finish + verify phases (the agent's end to the verdict, less the "
        f"agent's sandbox's removal); baseline {report.details.get('revisions', {})}; load "
        f"{[x['load'] for x in report.details.get('load', [])][:1]} → "
        f"{[x['load'] for x in report.details.get('load', [])][-1:]}",
    )


def fmt_pct(value: float | None, unit: str) -> str:
    return f"{value:.0f}%" if value is not None and unit == "%" else fmt(value, unit)


def show_tasks(per: dict[str, dict[str, dict[str, float]]]) -> None:
    table = Table(
        title="per task (p50 over jobs): verification, episode, share", title_justify="left"
    )
    for col in (
        "task",
        "verif base",
        "verif work",
        "×",
        "episode base",
        "episode work",
        "share base",
        "share work",
    ):
        table.add_column(col, justify="left" if col == "task" else "right")
    for task, sides in per.items():
        b, w = sides.get("baseline", {}), sides.get("work", {})
        ratio = w.get("verification_s", 0) / b["verification_s"] if b.get("verification_s") else 0
        table.add_row(
            task,
            f"{b.get('verification_s', 0):.2f}",
            f"{w.get('verification_s', 0):.2f}",
            f"{ratio:.2f}",
            f"{b.get('episode_s', 0):.2f}",
            f"{w.get('episode_s', 0):.2f}",
            f"{b.get('share', 0):.0%}",
            f"{w.get('share', 0):.0%}",
        )
    console.print(table)


def show_breakdown(breakdown: dict[str, dict[str, dict[str, float]]]) -> None:
    table = Table(title="where verification goes, per job (mean over jobs)", title_justify="left")
    for col in ("operation", "n base", "s base", "n work", "s work", "cmd s work", "py work"):
        table.add_column(col, justify="left" if col == "operation" else "right")
    base, work = breakdown.get("baseline", {}), breakdown.get("work", {})
    for kind in sorted(set(base) | set(work), key=lambda k: -work.get(k, {}).get("s", 0.0)):
        b, w = base.get(kind, {}), work.get(kind, {})
        table.add_row(
            kind,
            f"{b.get('n', 0):.0f}",
            f"{b.get('s', 0):.2f}",
            f"{w.get('n', 0):.0f}",
            f"{w.get('s', 0):.2f}",
            f"{w.get('cmd_s', 0):.2f}",
            f"{w.get('python', 0):.0f}",
        )
    console.print(table)


def show_by_task(by_task: dict[str, dict[str, float]]) -> None:
    table = Table(
        title="working tree, per task (p50): verify_final and its operations", title_justify="left"
    )
    cols = (
        "verify_s",
        "execs",
        "python",
        "stop_agent_n",
        "stop_agent_s",
        "uploads_n",
        "layout_s",
        "check_s",
        "overhead_s",
        "hand_back_s",
    )
    table.add_column("task")
    for col in cols:
        table.add_column(col.replace("_", " "), justify="right")
    for task, row in by_task.items():
        table.add_row(
            task, *(f"{row[c]:.2f}" if c.endswith("_s") else f"{row[c]:.0f}" for c in cols)
        )
    console.print(table)


# -- running ---------------------------------------------------------------------------------


def sweep_agentenv() -> None:
    """Remove what a killed job of this run left (agentenv labels it with our run id)."""
    client = docker.from_env(version="auto")
    try:
        label = f"{AGENTENV_RUN_LABEL}={RUN_ID}"
        for c in client.api.containers(all=True, filters={"label": label}):
            remove_container(client, c["Id"])
    finally:
        client.close()


async def run_all(cfg: Config) -> Report:
    report = await start_report(await get_engine())
    jobs: list[Job] = []
    with tempfile.TemporaryDirectory(prefix="verify-share-jobs-") as tmp:
        sections: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("jobs", functools.partial(bench_jobs, cfg, report, jobs, Path(tmp)))
        ]
        if cfg.units:
            sections.append(("units", functools.partial(bench_units, cfg, report)))
        try:
            await run_sections(report, sections)
        finally:
            await anyio.to_thread.run_sync(sweep_agentenv)
    summarize(report, jobs)
    return report


def main() -> int:
    parser = arg_parser(__doc__)
    parser.add_argument("--baseline", default="HEAD", help="the revision to compare with")
    parser.add_argument("--n", type=int, default=None, help="jobs of each (3; 1 with --quick)")
    parser.add_argument("--concurrency", type=int, default=None, help="the jobs' -c")
    parser.add_argument("--no-trace", action="store_true", help="no per-operation timing")
    parser.add_argument("--units", type=int, default=0, help="unit costs, this many each")
    parser.add_argument(
        "--what-if",
        default="",
        help="on the working tree's side only, comma-separated: shares=N, dedupe-stop, "
        "hand-back-later, dedupe-reset, reap-fast (see traced_eval.what_if)",
    )
    args = parser.parse_args()
    cfg = Config(
        baseline=args.baseline,
        n=args.n or (1 if args.quick else 3),
        concurrency=args.concurrency,
        trace=not args.no_trace,
        units=args.units,
        what_if=args.what_if,
        json_path=args.json,
    )
    return run_benchmark(cfg, lambda: run_all(cfg), show)


if __name__ == "__main__":
    raise SystemExit(main())
