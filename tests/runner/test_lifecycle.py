"""One episode lifecycle behind every driver: each sets up and verifies identically.

The task's setup leaves a mark outside the workspace (only a prepared state made from the
setup has it); the agent solves it but also leaves a file in /tmp and a process running, as
its own user. The check prints what the checker sandbox looks like: it must be a new
sandbox made from the prepared state (the mark there, the agent's /tmp file and process
not), the checker root, the agent's programs run as uid 1000, the workspace the agent's.
Every driver must give reward 1 and the very same view.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

import agentenv
from agentenv.agent import policies
from agentenv.agent.loop import Trajectory
from agentenv.eval.jobs import EpisodeSettings, run_eval
from agentenv.model.types import ChatModel
from agentenv.runner.episode import run_task
from agentenv.runner.results import load_results
from agentenv.tasks import Task, load_task

pytestmark = pytest.mark.anyio

SOLVE = """
echo ok > answer.txt
echo planted > /tmp/agent-was-here
setsid nohup sleep 600 >/dev/null 2>&1 &
id -u > whoami.txt
"""
CHECK = r"""
set -u
view="uid=$(id -u) agent=$($AS_AGENT id -u) mark=$(cat /opt/prepared-mark 2>&1)"
view="$view setup=$(cat from-setup.txt) answer=$(cat answer.txt) ran-as=$(cat whoami.txt)"
view="$view tmp=$(ls /tmp/agent-was-here 2>/dev/null || echo clean)"
view="$view procs=$(ps -eo user:12,comm | awk '$1 != "root" && NR > 1' | wc -l)"
echo "VIEW $view"
want="uid=0 agent=1000 mark=prepared setup=from-setup answer=ok ran-as=1000 tmp=clean"
[ "$view" = "$want procs=0" ]
"""
VIEW = "uid=0 agent=1000 mark=prepared setup=from-setup answer=ok ran-as=1000 tmp=clean procs=0"


def make_task(root: Path) -> Task:
    folder = root / "lifecycle"
    (folder / "workspace").mkdir(parents=True)
    (folder / "workspace" / "README").write_text("write ok into answer.txt\n")
    (folder / "tests").mkdir()
    (folder / "tests" / "check.sh").write_text(CHECK)
    (folder / "instruction.md").write_text("Write ok into answer.txt.\n")
    (folder / "solution.sh").write_text(SOLVE)
    setup = "echo prepared > /opt/prepared-mark && echo from-setup > from-setup.txt"
    (folder / "task.toml").write_text(
        f"setup = {json.dumps(setup)}\n"
        '[verifier]\nkind = "command"\ncommand = "bash /agentenv/tests/check.sh"\n'
    )
    return load_task(folder)


def solver(task: Task) -> ChatModel:
    assert task.solution is not None
    return policies.oracle(task.solution.read_text())


async def by_run_task(task: Task, tmp: Path) -> Trajectory:
    traj, _ = await run_task(task, solver(task))
    return traj


async def by_eval(task: Task, tmp: Path) -> Trajectory:
    await run_eval([task], EpisodeSettings(model="oracle", keep_final=True), out=tmp / "job")
    (result,) = load_results(tmp / "job").values()
    return Trajectory.model_validate_json((tmp / "job" / str(result.trajectory)).read_text())


async def by_rollout(task: Task, tmp: Path) -> Trajectory:
    return await agentenv.rollout(task, solver)


async def by_forked_group(task: Task, tmp: Path) -> Trajectory:
    first, second = await agentenv.rollout_group(task, solver, 2)
    assert first.reward == second.reward and first.group_id == second.group_id
    return second


async def by_group_without_sharing(task: Task, tmp: Path) -> Trajectory:
    (traj,) = await agentenv.rollout_group(task, solver, 1, share_setup=False)
    return traj


async def by_partial_rollout(task: Task, tmp: Path) -> Trajectory:
    handle = await agentenv.start(task, solver, version=1)
    await handle.step()
    state = await handle.suspend()
    again = await agentenv.resume(type(state).model_validate_json(state.model_dump_json()), solver)
    while not await again.step():
        pass
    return await again.finish()


async def by_cli_run(task: Task, tmp: Path) -> Trajectory:
    out = tmp / "traj.json"
    done = subprocess.run(
        [sys.executable, "-m", "agentenv", "run", str(task.folder), "-m", "oracle", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return Trajectory.model_validate_json(out.read_text())


DRIVERS: dict[str, Callable[[Task, Path], Awaitable[Trajectory]]] = {
    "run_task": by_run_task,
    "eval": by_eval,
    "rollout": by_rollout,
    "rollout_group": by_forked_group,
    "rollout_group_unshared": by_group_without_sharing,
    "partial_rollout": by_partial_rollout,
    "cli_run": by_cli_run,
}


@pytest.mark.parametrize("driver", sorted(DRIVERS))
async def test_every_driver_prepares_and_verifies_alike(driver: str, tmp_path: Path) -> None:
    task = make_task(tmp_path)
    traj = await DRIVERS[driver](task, tmp_path)
    assert traj.error is None
    assert traj.score is not None and traj.score.error is None, traj.score
    (check,) = traj.score.checks
    view = re.search(r"VIEW (.*)", check.detail)
    assert view is not None, check.detail
    assert view.group(1) == VIEW
    assert traj.reward == 1.0


REPO_TEST = r"""
set -u
[ "$(id -u)" = 1000 ] || { echo "tests run as $(id -u)"; exit 1; }
[ ! -e /tmp/agent-was-here ] || { echo "the agent's /tmp reached the tests"; exit 1; }
me=$(ps -o sid= -p $$ | tr -d ' ')  # this command's own session is not the agent's
n=$(ps -eo user:12,sid | awk -v me="$me" 'NR > 1 && $1 != "root" && $2 != me' | wc -l)
[ "$n" = 0 ] || { echo "$n processes of the agent's reached the tests"; exit 1; }
grep -q new lib.txt && echo "1 passed"
"""


async def test_refactor_tests_run_in_a_new_sandbox_from_the_committed_state(
    tmp_path: Path,
) -> None:
    from agentenv.refactor.job import run_refactor
    from agentenv.refactor.repos import RepoEntry, git

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "lib.txt").write_text("old\nnew\n")
    (repo / "test.sh").write_text(REPO_TEST)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    codemod = (
        "command:sed -i s/old/older/ lib.txt && echo planted > /tmp/agent-was-here"
        " && (setsid nohup sleep 600 >/dev/null 2>&1 &)"
    )
    entry = RepoEntry(path=repo, name="repo", test="bash test.sh")
    (result,) = await run_refactor([entry], "rename old", codemod, out=tmp_path / "job")
    assert result.before is not None and result.before.green, result.before
    assert result.after is not None and result.after.green, result.after
    assert result.outcome == "changed-green" and result.after.passed == 1


class Broken:
    """A model whose endpoint fails mid-episode."""

    async def complete(self, *args: object, **kwargs: object) -> object:
        raise ConnectionError("endpoint gone")


async def test_an_episode_error_comes_out_as_itself_and_leaves_nothing(tmp_path: Path) -> None:
    from agentenv.sandbox import get_backend
    from agentenv.sandbox.labels import run_id

    task = make_task(tmp_path)

    def ours() -> set[str]:  # on the backend this suite runs on (Docker or Podman)
        return {
            r.id for r in get_backend().leftovers() if r.kind == "sandbox" and r.run == run_id()
        }

    before = ours()
    with pytest.raises(ConnectionError, match="endpoint gone"):  # not an ExceptionGroup
        await run_task(task, Broken())  # type: ignore[arg-type]
    after = ours()
    assert after <= before  # the agent's and the checker sandbox made ahead are gone
    traj = await agentenv.rollout(task, lambda t: Broken())  # type: ignore[arg-type,return-value]
    assert traj.error is not None and "endpoint gone" in traj.error and traj.reward is None
