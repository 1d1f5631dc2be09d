"""A multi-step task's per-step rewards reach every place a job is read: results.jsonl (the
score's ``steps``), the summary row (``Row.steps``: each step's mean reward), ``agentenv
report``'s table and the viewer's job table. The task is test_harbor_steps's two-step one
(itself the cookbook's ``multi-step`` recipe in small); its episode does step one right and
leaves step two undone, so the two steps' rewards differ (1 and 0, the trial 0.5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentenv.eval.jobs import run_eval
from agentenv.tasks import load_task
from agentenv.view.site import build_site
from tests.formats.test_harbor_steps import two_steps

STEP_ONE_ONLY = "command:echo one > /app/a.txt"


@pytest.mark.anyio
async def test_each_steps_reward_is_in_results_report_and_viewer(tmp_path: Path) -> None:
    task = load_task(two_steps(tmp_path, "two"))
    job = tmp_path / "job"
    rows = await run_eval([task], STEP_ONE_ONLY, out=job)
    line = json.loads((job / "results.jsonl").read_text().splitlines()[-1])
    assert [(s["name"], s["reward"]) for s in line["score"]["steps"]] == [
        ("one", 1.0),
        ("two", 0.0),
    ]
    assert rows[0].task_id == task.id and rows[0].mean_reward == 0.5
    figures = {name: (s.reward, s.reached) for name, s in rows[0].steps.items()}
    assert figures == {"one": (1.0, 1), "two": (0.0, 1)}  # was: no per-step figure in the row
    assert rows[-1].kind == "total" and rows[-1].steps == {}
    shown = subprocess.run(
        [sys.executable, "-m", "agentenv", "report", str(job)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
        check=True,
    ).stdout
    assert "one 1.00 · two 0.00" in shown, shown
    page = build_site(job, tmp_path / "site").read_text()
    assert "0.50 (one 1.00, two 0.00)" in page


@pytest.mark.no_docker
def test_a_step_is_averaged_over_the_episodes_that_reached_it() -> None:
    from agentenv.cli.render import step_text
    from agentenv.eval.summary import summarize
    from agentenv.runner.results import EpisodeResult
    from agentenv.verify.score import Score, StepScore

    def episode(sample: int, *steps: tuple[str, float]) -> EpisodeResult:
        done = [StepScore(name=n, reward=r, passed=r == 1.0) for n, r in steps]
        reward = sum(r for _, r in steps) / len(steps)
        score = Score(reward=reward, passed=reward == 1.0, checks=[], steps=done)
        return EpisodeResult(
            task_id="t", sample=sample, outcome="graded", reward=reward, score=score
        )

    # the second stopped at step one's gate: step two is the first's alone
    rows = summarize([episode(0, ("a", 1.0), ("b", 0.5)), episode(1, ("a", 0.0))], k=1)
    assert {n: (s.reward, s.reached) for n, s in rows[0].steps.items()} == {
        "a": (0.5, 2),
        "b": (0.5, 1),
    }
    assert step_text(rows[0]) == "a 0.50 · b 0.50 (1/2 reached)"
