"""A Harbor task's ``environment_mode = "separate"`` verifier in full: every key of
``[verifier.environment]`` honoured or refused by name, a verifier image built from
``tests/Dockerfile`` (context ``tests/``, tests bundled in it and not uploaded, as Harbor),
and the declared artifacts (a compose side service's too, ``exclude`` applied) the only
thing of the agent's the verifier gets. The tasks mirror Harbor's own separate-verifier
examples (a verifier image with pytest baked in, the agent's answer as an artifact), FROM
the offline base image.

The agent is an adversary: it links its declared answer to the answer key in ``/tests``
(which a verifier that followed the link would find equal), and leaves files outside the
artifacts and inside an excluded pattern: none of them reaches the verifier."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.runner.episode import run_task
from agentenv.runner.policy import Policies
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.tasks import Task, load_task

pytestmark = pytest.mark.anyio


def _task(root: Path, name: str, toml: str, test: str, solve: str) -> Path:
    folder = root / name
    for sub in ("environment", "tests", "solution"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    (folder / "environment" / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nWORKDIR /app\n")
    (folder / "instruction.md").write_text("Write the answer to /app/answer.txt.\n")
    (folder / "task.toml").write_text('version = "1.0"\n' + toml)
    (folder / "tests" / "test.sh").write_text("#!/bin/bash\n" + test)
    (folder / "tests" / "expected.txt").write_text("the key\n")
    (folder / "solution" / "solve.sh").write_text("#!/bin/bash\n" + solve)
    return folder


async def _oracle(task: Task) -> float:
    policies = Policies("oracle")
    try:
        traj, _ = await run_task(task, policies.for_task(task))
    finally:
        await policies.aclose()
    assert traj.score is not None and traj.score.error is None, traj.score
    return traj.reward


LINKED = """
artifacts = ["/app/answer.txt"]

[verifier]
timeout_sec = 60.0
environment_mode = "separate"
"""

COMPARE = """\
if [ "$(cat /app/answer.txt 2>/dev/null)" = "$(cat /tests/expected.txt)" ]; then r=1; else r=0; fi
echo $r > /logs/verifier/reward.txt
"""


async def test_an_artifact_linked_to_the_answer_key_is_not_followed(tmp_path: Path) -> None:
    # the agent cannot read /tests, but a link to it carried into the verifier would read
    # the key there: the link is left out, so the answer is missing and scores 0
    solve = "ln -s /tests/expected.txt /app/answer.txt\n"
    task = load_task(_task(tmp_path, "linked", LINKED, COMPARE, solve))
    assert await _oracle(task) == 0.0
