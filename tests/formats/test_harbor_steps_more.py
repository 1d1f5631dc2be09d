"""Multi-step tasks beyond tests/formats/test_harbor_steps.py: the oracle on an image whose
``USER`` is not root (each step's ``solution/`` laid out at ``/solution`` by root as the step
begins, as Harbor uploads it; before, the oracle wrote it through tool calls as the image's
user, who may not write ``/``); a step's ``artifacts`` collected into the episode's
artifacts folder under ``steps/<name>/`` (refused at load before). The task is the two-step
task of test_harbor_steps.py (the cookbook's shape) FROM the offline base image."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.rl.rollout import rollout
from agentenv.runner.episode import run_task
from agentenv.runner.steps import steps_oracle
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.tasks import load_task
from agentenv.verify import Score
from tests.formats.test_harbor_steps import two_steps

pytestmark = pytest.mark.anyio

NON_ROOT = (
    f"FROM {BASE_IMAGE}\nRUN useradd -m app && mkdir /app && chown app:app /app\n"
    "USER app\nWORKDIR /app\n"
)


def _steps(score: Score | None) -> list[tuple[str, float, bool]]:
    assert score is not None
    return [(s.name, s.reward, s.stopped) for s in score.steps]


async def test_the_oracle_lays_each_step_out_as_root_on_a_non_root_image(tmp_path: Path) -> None:
    folder = two_steps(tmp_path, "app")
    (folder / "environment" / "Dockerfile").write_text(NON_ROOT)
    task = load_task(folder)
    traj, _ = await run_task(task, steps_oracle(task))
    assert traj.score is not None and traj.score.error is None, traj.score
    assert _steps(traj.score) == [("one", 1.0, False), ("two", 1.0, False)]
    # the same step machinery in an RL rollout
    rolled = await rollout(task, steps_oracle)
    assert rolled.error is None and rolled.reward == 1.0, rolled.score
