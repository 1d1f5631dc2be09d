"""mini-swe-agent, installed in the sandbox, driven through the gateway by a scripted model:
the scripted solution writes the answer, the null script does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.harnesses import harness
from agentenv.harnesses.run import run_harness
from agentenv.testing import ScriptedTurn
from tests.harnesses.conftest import ANSWER, INSTRUCTION, NULL_SCRIPT, episode, tool

pytestmark = [pytest.mark.anyio, pytest.mark.on_docker]

SOLVE = [
    ScriptedTurn(
        reasoning="Write the answer.", tool_calls=[tool("bash", command=f"echo 42 > {ANSWER}")]
    ),
    ScriptedTurn(
        reasoning="Done.",
        tool_calls=[tool("bash", command="echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")],
    ),
]


async def test_the_scripted_solution_writes_the_answer(mini_image: str, socket_dir: Path) -> None:
    async with episode(mini_image, SOLVE, socket_dir) as (box, gateway, trajectory, server):
        run = await run_harness(box, harness("mini-swe-agent"), INSTRUCTION, gateway, timeout_s=300)
        assert run.exit_code == 0, run.log
        assert run.stopped is None
        assert (await box.read_file(ANSWER)).decode().strip() == "42"
    assert len(trajectory.turns) == 2
    assert trajectory.turns[0].completion.tool_calls[0].name == "bash"
    assert run.wall_s >= run.model_s > 0
    assert "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in run.log  # its own trajectory file
    assert server.requests[0]["model"] == "kimi-k3"


async def test_the_null_script_writes_nothing(mini_image: str, socket_dir: Path) -> None:
    async with episode(mini_image, NULL_SCRIPT, socket_dir) as (box, gateway, trajectory, _):
        run = await run_harness(box, harness("mini-swe-agent"), INSTRUCTION, gateway, timeout_s=300)
        with pytest.raises(FileNotFoundError):
            await box.read_file(ANSWER)
    assert run.stopped is None, run.log
    assert trajectory.turns, "it asked the model"
