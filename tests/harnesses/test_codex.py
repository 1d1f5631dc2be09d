"""Codex CLI, installed in the sandbox, driven through the gateway's Responses dialect by a
scripted model: the scripted solution writes the answer, the null script does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.harnesses import harness
from agentenv.harnesses.run import run_harness
from agentenv.testing import ScriptedTurn
from tests.harnesses.conftest import ANSWER, INSTRUCTION, NULL_SCRIPT, episode, tool

pytestmark = [pytest.mark.anyio, pytest.mark.on_docker]

SOLVE = [  # exec_command is the shell tool Codex 0.171 offers
    ScriptedTurn(
        reasoning="Write the answer.",
        tool_calls=[tool("exec_command", cmd=f"echo 42 > {ANSWER}")],
    ),
    ScriptedTurn(reasoning="Written.", content="The answer is in place."),
]


async def test_the_scripted_solution_writes_the_answer(codex_image: str, socket_dir: Path) -> None:
    async with episode(codex_image, SOLVE, socket_dir) as (box, gateway, trajectory, server):
        run = await run_harness(box, harness("codex"), INSTRUCTION, gateway, timeout_s=300)
        assert run.exit_code == 0, run.log
        assert run.stopped is None
        assert (await box.read_file(ANSWER)).decode().strip() == "42"
    assert len(trajectory.turns) == 2
    assert trajectory.turns[0].completion.tool_calls[0].name == "exec_command"
    assert "exec_command" in {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert run.wall_s >= run.model_s > 0


async def test_the_null_script_writes_nothing(codex_image: str, socket_dir: Path) -> None:
    async with episode(codex_image, NULL_SCRIPT, socket_dir) as (box, gateway, trajectory, _):
        run = await run_harness(box, harness("codex"), INSTRUCTION, gateway, timeout_s=300)
        with pytest.raises(FileNotFoundError):
            await box.read_file(ANSWER)
    assert run.exit_code == 0, run.log
    assert len(trajectory.turns) == 1
