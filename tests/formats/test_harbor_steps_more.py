"""Multi-step tasks beyond tests/formats/test_harbor_steps.py: the oracle on an image whose
``USER`` is not root (each step's ``solution/`` laid out at ``/solution`` by root as the step
begins, as Harbor uploads it; before, the oracle wrote it through tool calls as the image's
user, who may not write ``/``); a step's ``artifacts`` collected into the episode's
artifacts folder under ``steps/<name>/`` (refused at load before). The task is the two-step
task of test_harbor_steps.py (the cookbook's shape) FROM the offline base image."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from agentenv.errors import TaskError
from agentenv.rl.rollout import rollout
from agentenv.runner.artifacts import write_artifacts
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


COOKBOOK = Path(__file__).parent / "harbor_tasks" / "cookbook.tar.gz"


def _cookbook(root: Path) -> Path:
    with tarfile.open(COOKBOOK) as tar:
        tar.extractall(root, filter="data")
    folder = root / "multi-step"
    # its image is ubuntu:24.04 with apt-get (no registry, no internet here)
    (folder / "environment" / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nWORKDIR /app\n")
    return folder


async def test_the_cookbook_task_keeps_each_steps_artifacts(tmp_path: Path) -> None:
    # Harbor's cookbook multi-step task: task-level artifacts = ["/app/greet.sh"], its last
    # step's own ["/app/README.md"] (refused at load before: "collecting a step's artifacts")
    task = load_task(_cookbook(tmp_path))
    assert task.multi_step is not None
    names = [s.name for s in task.multi_step.steps]
    assert names == ["scaffold", "implement", "document"]
    assert [a.source for a in task.multi_step.steps[2].artifacts] == ["/app/README.md"]
    traj, final = await run_task(task, steps_oracle(task))
    assert traj.score is not None and traj.score.error is None and traj.score.reward == 1.0
    assert _steps(traj.score) == [(n, 1.0, False) for n in names]
    assert final.artifacts is not None
    out = tmp_path / "job" / "artifacts"
    write_artifacts(final.artifacts, out)  # as the job writes an episode's
    for name in names:  # each step's greet.sh as that step left it, and its manifest
        manifest = json.loads((out / "steps" / name / "manifest.json").read_text())
        sources = {e["source"]: e["status"] for e in manifest["entries"]}
        assert sources["/app/greet.sh"] == "ok", manifest
        assert (out / "steps" / name / "app" / "greet.sh").is_file()
    assert sources["/app/README.md"] == "ok"  # the last step's own, after the task's
    assert (out / "steps" / "document" / "app" / "README.md").is_file()
    assert not (out / "steps" / "scaffold" / "app" / "README.md").exists()


def test_a_step_artifact_leaving_the_folder_is_refused_by_name(tmp_path: Path) -> None:
    folder = two_steps(tmp_path, "bad")
    toml = folder / "task.toml"
    text = toml.read_text().replace(
        'name = "two"\n',
        'name = "two"\nartifacts = [{ source = "/app/b.txt", destination = "../b" }, 3]\n',
    )
    toml.write_text(text)
    with pytest.raises(TaskError) as e:
        load_task(folder)
    assert "steps[1].artifacts[0].destination: '../b' must not contain '..'" in str(e.value)
    assert "steps[1].artifacts[1]: 3 is not a path or a table" in str(e.value)
