"""The three drivers (an eval job, an RL rollout, a refactor job) end their episodes through
the one lifecycle of :mod:`agentenv.runner.episode`: a rule written there reaches all three.

The rule checked is the final-snapshot one: a task verified in its final state is snapshotted
for its checker, and the snapshot is removed once verified (the RL path used to keep it while
eval removed it). Every driver must pass through :meth:`Episode.teardown`, and leave no image
of this process behind.
"""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

import agentenv
from agentenv.agent import policies
from agentenv.eval.jobs import run_eval
from agentenv.refactor.job import run_refactor
from agentenv.refactor.repos import RepoEntry
from agentenv.runner.episode import Episode
from agentenv.sandbox.docker import connect
from agentenv.sandbox.labels import RUN, run_id
from agentenv.tasks import Task, load_task
from tests.refactor.test_refactor_verdicts import make_repo

pytestmark = pytest.mark.anyio

SOLVE = "echo 'hello' > greeting.txt && touch /opt/installed\n"


def final_state_task(root: Path) -> Task:
    """A root task whose outcome lies outside the workdir: only its final state shows it."""
    folder = root / "final"
    (folder / "workspace").mkdir(parents=True)
    (folder / "instruction.md").write_text("Install it.\n")
    (folder / "solution.sh").write_text(SOLVE)
    (folder / "task.toml").write_text(
        'user = "root"\nverify_in = "final"\n[verifier]\nkind = "command"\n'
        "command = 'test -f /opt/installed && test -f greeting.txt'\n"
    )
    return load_task(folder)


def images() -> set[str]:
    engine = connect()
    return {i["Id"] for i in engine.api.images(filters={"label": f"{RUN}={run_id()}"})}


def image_exists(ref: str) -> bool:
    try:
        connect().api.inspect_image(ref)
    except docker.errors.ImageNotFound:
        return False
    return True


async def test_every_driver_ends_through_the_same_teardown_and_keeps_no_final_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, str | None]] = []
    real = Episode.teardown

    async def teardown(self: Episode) -> None:
        snapshot = self.final.snapshot if self.final is not None else None
        seen.append((self.prepared.task.id, snapshot.ref if snapshot else None))
        await real(self)

    monkeypatch.setattr(Episode, "teardown", teardown)
    task = final_state_task(tmp_path / "tasks")
    before = images()

    # an eval job
    rows = await run_eval([task], "oracle", out=tmp_path / "eval")
    assert rows[-1].pass_at_1 == 1.0
    eval_refs = [ref for _, ref in seen if ref]
    assert eval_refs, seen  # verified in a final snapshot, through the lifecycle's teardown

    # an RL rollout
    seen.clear()
    assert task.solution is not None
    traj = await agentenv.rollout(task, policies.oracle(task.solution.read_text()))
    assert traj.reward == 1.0, traj.error
    rl_refs = [ref for _, ref in seen if ref]
    assert rl_refs, seen

    # a refactor job (its tests run on the patch: no final snapshot, the same teardown)
    seen.clear()
    repo = make_repo(
        tmp_path / "repo",
        {"lib.txt": "old\n", "test.sh": "grep -q old lib.txt && echo '1 passed'\n"},
    )
    entry = RepoEntry(path=repo, name="repo", test="bash test.sh")
    codemod = "command:sed -i s/old/older/ lib.txt"
    (result,) = await run_refactor([entry], "rename old", codemod, out=tmp_path / "refactor")
    assert result.outcome == "changed-green", result
    assert [task_id for task_id, _ in seen] == ["repo"], seen

    # the rule holds for each: no final snapshot, nor any image of this process, is kept
    for ref in [*eval_refs, *rl_refs]:
        assert not image_exists(ref), ref
    assert images() == before
