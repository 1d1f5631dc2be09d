"""Claude Code, installed in the sandbox, driven through the gateway's Anthropic Messages
dialect by a scripted model: the scripted solution writes the answer, the null script does
not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentenv.harnesses import harness
from agentenv.harnesses.run import run_harness
from agentenv.testing import ScriptedTurn
from tests.harnesses.conftest import ANSWER, INSTRUCTION, NULL_SCRIPT, episode, tool

pytestmark = [pytest.mark.anyio, pytest.mark.on_docker]

SOLVE = [  # Bash is Claude Code's shell tool
    ScriptedTurn(
        reasoning="Write the answer.",
        tool_calls=[tool("Bash", command=f"echo 42 > {ANSWER}", description="Write the answer")],
    ),
    ScriptedTurn(reasoning="Written.", content="The answer is in place."),
]


def main_calls(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The agent loop's calls (those offering the Bash tool), not its side calls (titles)."""
    return [r for r in requests if "Bash" in {t["function"]["name"] for t in r.get("tools", [])}]


async def test_the_scripted_solution_writes_the_answer(claude_image: str, socket_dir: Path) -> None:
    async with episode(claude_image, SOLVE, socket_dir) as (box, gateway, trajectory, server):
        run = await run_harness(box, harness("claude-code"), INSTRUCTION, gateway, timeout_s=300)
        assert run.exit_code == 0, run.log
        assert run.stopped is None
        assert (await box.read_file(ANSWER)).decode().strip() == "42"
    assert main_calls(server.requests), "it offered its Bash tool"
    assert any(t.completion.tool_calls for t in trajectory.turns)
    assert run.wall_s >= run.model_s > 0


async def test_the_null_script_writes_nothing(claude_image: str, socket_dir: Path) -> None:
    async with episode(claude_image, NULL_SCRIPT, socket_dir) as (box, gateway, trajectory, _):
        run = await run_harness(box, harness("claude-code"), INSTRUCTION, gateway, timeout_s=300)
        with pytest.raises(FileNotFoundError):
            await box.read_file(ANSWER)
    assert run.exit_code == 0, run.log
    assert trajectory.turns
