"""A checker sandbox lost to the host (an engine restart kills the checker made ahead while
it waits, paused) is the host's trouble: the final state is verified again in a new checker,
not blamed on the agent. (What the agent's final state breaks is its failure: the battery in
tests/security/test_agent_failures.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.runner.episode import Episode, episode, prepare, release
from agentenv.sandbox.docker import connect
from agentenv.tasks import Task, load_task

pytestmark = pytest.mark.anyio


def make_task(root: Path, check: str) -> Task:
    folder = root / "note"
    (folder / "workspace").mkdir(parents=True)
    (folder / "instruction.md").write_text("Write ok into answer.txt.\n")
    (folder / "task.toml").write_text(f'[verifier]\nkind = "command"\ncommand = "{check}"\n')
    return load_task(folder)


async def _kill_checker_ahead(ep: Episode) -> None:
    ahead = ep.ahead
    assert ahead is not None
    await ahead._made.wait()  # the checker made ahead, paused until the agent is done
    assert ahead._box is not None
    connect().api.kill(ahead._box.id)  # what an engine restart does to it


async def test_a_checker_killed_by_the_host_is_made_again_and_the_agent_graded(
    tmp_path: Path,
) -> None:
    prepared = await prepare(make_task(tmp_path, "test $(cat answer.txt) = ok"))
    try:
        async with episode(prepared) as ep:
            result = await ep.sandbox.exec("echo ok > answer.txt")
            assert result.exit_code == 0, result
            await _kill_checker_ahead(ep)
            _, score = await ep.conclude()
    finally:
        await release(prepared)
    assert score is not None
    assert score.passed and score.reward == 1.0, score
