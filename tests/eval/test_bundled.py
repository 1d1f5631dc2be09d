"""Every bundled task is solvable and every verifier can fail: the oracle scores 1.0 and the
null agent (does nothing) scores 0.0 on each one, through the real eval runner."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.eval.jobs import run_eval
from agentenv.runner.results import load_results
from agentenv.tasks import load_tasks

pytestmark = pytest.mark.anyio
ENVIRONMENTS = Path(__file__).resolve().parents[2] / "environments"


@pytest.mark.parametrize(("policy", "reward"), [("oracle", 1.0), ("null", 0.0)])
async def test_bundled_tasks(tmp_path: Path, policy: str, reward: float) -> None:
    tasks = load_tasks([ENVIRONMENTS])
    assert len(tasks) >= 12
    await run_eval(tasks, policy, out=tmp_path, concurrency=2)
    results = load_results(tmp_path)
    assert len(results) == len(tasks)
    wrong = {
        key: (r.outcome, r.reward, r.error, [c.detail for c in r.score.checks] if r.score else None)
        for key, r in results.items()
        if r.outcome != "graded" or r.reward != reward
    }
    assert wrong == {}
