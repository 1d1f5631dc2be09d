"""Viewer benchmark: `agentenv view` on a job of 1,000 episodes.

Measures, in one run, on a job folder written with the runner's own models (500 tasks x 2
samples, 10 turns each: 2 KB of reasoning, a tool call and 200 lines of output per turn,
~250 MB of trajectories):

1. building the site (``build_site``; target: under 10 s), against reading the same job
   (``load_job`` and parsing every trajectory, which the build must do anyway) as the
   baseline in the same run;
2. opening the job page in Debian's chromium, headless (selenium; target: under 2 s from
   navigation to the load event), against a blank page of ours in the same browser;
3. filtering the 1,000-row table (the status filter, measured inside the page).

Usage: ``.venv/bin/python bench/view.py [--quick] [--json PATH]`` (``--quick``: 100
episodes). Needs ``chromium`` and ``chromedriver`` (``AGENTENV_WITH_BROWSER=1 bash
scripts/setup.sh``). Everything is written under a temporary folder, removed at the end.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import Report, arg_parser, console, fmt, fmt_ratio, plain_row, print_table, relative_row
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from agentenv.agent.loop import new_trajectory
from agentenv.agent.tools import ToolResult
from agentenv.agent.trajectory import Turn
from agentenv.model.types import Completion, ToolCall, Usage
from agentenv.runner.journal import write_json
from agentenv.runner.results import EpisodeResult, JobConfig, append_result
from agentenv.verify import CheckResult, Score
from agentenv.view import build_site
from agentenv.view.job import load_job, load_trajectory

TURNS = 10
OUTPUT = "\n".join(f"line {i}: " + "x" * 60 for i in range(200))
REASONING = "Let me think about what the failing test says and where to look next. " * 28


def write_job(folder: Path, tasks: int, samples: int) -> None:
    """A finished eval job as the runner writes it."""
    folder.mkdir(parents=True)
    ids = [f"task-{i:04d}" for i in range(tasks)]
    tags = {t: [("easy", "medium", "hard")[i % 3]] for i, t in enumerate(ids)}
    config = JobConfig(model="kimi-k3", samples=samples, tasks=dict.fromkeys(ids, "d"), tags=tags)
    write_json(folder / "config.json", config.model_dump())
    for i, task in enumerate(ids):
        for sample in range(samples):
            traj = new_trajectory(f"Fix the failing test of {task}.", task_id=task)
            for n in range(TURNS):
                call = ToolCall(id=f"c{n}", name="bash", arguments='{"command": "pytest -x"}')
                done = Completion(
                    reasoning_content=REASONING,
                    content="",
                    tool_calls=[call],
                    usage=Usage(
                        prompt_tokens=4000 + 800 * n,
                        cached_tokens=3800 + 800 * n,
                        completion_tokens=300,
                    ),
                    cost_usd=0.006,
                )
                out = ToolResult(
                    call_id=f"c{n}",
                    name="bash",
                    text=OUTPUT,
                    output=OUTPUT,
                    exit_code=1,
                    duration_s=0.8,
                )
                traj.turns.append(
                    Turn(
                        completion=done, tool_results=[out], model_s=4.0, tools_s=0.8, paused_s=4.0
                    )
                )
            passed = (i + sample) % 3 == 0
            traj.score = Score(
                reward=float(passed),
                passed=passed,
                checks=[
                    CheckResult(
                        name="tests", score=float(passed), passed=passed, detail=OUTPUT[:2000]
                    )
                ],
            )
            relative = f"trajectories/{task}/{sample}.json"
            (folder / relative).parent.mkdir(parents=True, exist_ok=True)
            (folder / relative).write_text(traj.model_dump_json())
            append_result(folder, EpisodeResult(
                task_id=task, sample=sample, outcome="graded", reward=traj.reward,
                passed=passed, turns=TURNS, wall_s=60.0, trajectory=relative, score=traj.score,
                prompt_tokens=76000, cached_tokens=72000, completion_tokens=3000, cost_usd=0.06,
                phases={"model": 40.0, "tools": 8.0, "verify": 12.0},
            ))  # fmt: skip


def browser() -> webdriver.Chrome:
    """Debian's chromium, headless."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        sys.exit("needs chromium and chromedriver: AGENTENV_WITH_BROWSER=1 bash scripts/setup.sh")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(driver), options=options)


LOAD = "const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd;"
FILTER = (
    "const s = document.getElementById('status'); const t = performance.now();"
    "s.value = 'failed'; s.dispatchEvent(new Event('change'));"
    "const shown = document.getElementById('shown').textContent;"
    "const ms = performance.now() - t; s.value = ''; s.dispatchEvent(new Event('change'));"
    "return [ms, shown];"
)


def opened_ms(chrome: webdriver.Chrome, page: Path, times: int) -> list[float]:
    out = []
    for _ in range(times):
        chrome.get(page.as_uri())
        out.append(float(chrome.execute_script(LOAD)))
    return out


def main() -> int:
    args = arg_parser(__doc__).parse_args()
    tasks = 50 if args.quick else 500
    report = Report()
    with tempfile.TemporaryDirectory(prefix="agentenv-bench-view-") as tmp:
        job = Path(tmp) / "job"
        started = time.perf_counter()
        write_job(job, tasks, 2)
        size = sum(p.stat().st_size for p in job.rglob("*.json"))
        console.print(f"job of {tasks * 2} episodes written: {size / 1e6:.0f} MB of trajectories "
                      f"({time.perf_counter() - started:.1f} s)")  # fmt: skip
        started = time.perf_counter()
        loaded = load_job(job)
        for episode in loaded.episodes:
            assert episode.trajectory is not None
            load_trajectory(episode.trajectory, episode.name or "")
        read_s = time.perf_counter() - started
        started = time.perf_counter()
        index = build_site(job)
        build_s = time.perf_counter() - started
        pages = len(list(index.parent.glob("episodes/*.html")))
        blank = index.parent / "blank.html"
        blank.write_text("<!doctype html><title>blank</title><p>blank</p>")
        with browser() as chrome:
            opened_ms(chrome, index, 1)  # the browser's own first start out of the figures
            job_ms = opened_ms(chrome, index, 5)
            blank_ms = opened_ms(chrome, blank, 5)
            chrome.get(index.as_uri())
            filter_ms, shown = chrome.execute_script(FILTER)
            first = sorted(index.parent.glob("episodes/*.html"))[0]
            episode_ms = opened_ms(chrome, first, 5)
        report.rows += [
            relative_row(f"build the site of {tasks * 2} episodes ({pages} pages)", "s", build_s,
                         read_s, "x reading the job", "< 10 s", build_s < 10),
            relative_row("open the job page (navigation to load event, p50)", "ms",
                         statistics.median(job_ms), statistics.median(blank_ms),
                         "x a blank page", "< 2,000 ms", statistics.median(job_ms) < 2000),
            plain_row(f"filter the table to failed episodes ({shown})", "ms", filter_ms),
            plain_row("open an episode page (10 turns, p50)", "ms", statistics.median(episode_ms)),
        ]  # fmt: skip
        report.details.update(read_s=read_s, build_s=build_s, job_ms=job_ms, blank_ms=blank_ms,
                              episode_ms=episode_ms, filter_ms=filter_ms, bytes=size)  # fmt: skip
    print_table(report, "view", fmt, fmt_ratio,
                "baselines in the same run: reading and parsing the job (which building must "
                "do too); a blank page in the same browser.")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(report.details, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
