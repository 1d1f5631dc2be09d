"""An RL rollout offers and tells the model what run_task does (agentenv.runner.offer): the
task's MCP servers' tools beside agentenv's own, and the skills block after the instruction.
Before, a Rollout offered the task's own tools only and no skills: an RL rollout of a
Harbor task with ``mcp_servers`` or ``skills_dir`` was silently a different task.

The tasks are tests/agent/test_mcp_stdio.py's stdio server (its image, FROM the offline base)
with a skills folder in the image: one step, and two steps (Harbor's ``[[steps]]``). A
rollout suspended and resumed from JSON still offers the server (a new process: the offer
closes on suspend) and says the skills read at its start, not read again."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.rl.rollout import SuspendedRollout, resume, rollout, start
from agentenv.tasks import load_task
from agentenv.testing import K3Server
from tests.agent.test_mcp_stdio import SECRET, TOML, stdio_image, stdio_task
from tests.formats.test_harbor_steps_offer import (
    BLOCK,
    offered_tools,
    opening,
    steps_task,
    turn,
    with_skills,
)
from tests.helpers import chat_model

pytestmark = pytest.mark.anyio

__all__ = ["stdio_image"]  # the fixture, imported (built once per module)


def offer_task(root: Path) -> Path:
    """The stdio server's task (one step) with a skills folder in its image."""
    toml = TOML.replace("[environment]\n", '[environment]\nskills_dir = "/skills"\n')
    return with_skills(stdio_task(root, toml))


async def test_a_rollout_offers_the_mcp_tools_and_tells_the_skills(
    stdio_image: str, tmp_path: Path
) -> None:
    task = load_task(offer_task(tmp_path))
    script = [
        turn("box__count"),
        turn("box__count"),
        turn("bash", command=f"printf {SECRET} > /app/secret.txt"),
        turn("submit"),
    ]
    server = K3Server(script)
    traj = await rollout(task, chat_model(server, "in-process"))
    assert traj.error is None, traj.error
    for request in server.requests:  # before: bash, read_file, ... and no box__*
        assert {"bash", "submit", "box__count"} <= offered_tools(request)
        said = opening(request)
        assert said.startswith("Write hello") and said.count(BLOCK) == 1, said
    results = [(r.name, r.error, r.output) for t in traj.turns for r in t.tool_results]
    assert results[:2] == [("box__count", False, "1"), ("box__count", False, "2")], results
    assert traj.reward == 1.0


async def test_a_resumed_rollout_is_offered_the_same_and_skills_are_read_once(
    stdio_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agentenv.runner.offer as offer

    reads: list[str] = []
    real = offer.read_skills

    async def counted(box, skills_dir):  # type: ignore[no-untyped-def]
        reads.append(skills_dir)
        return await real(box, skills_dir)

    monkeypatch.setattr(offer, "read_skills", counted)
    task = load_task(steps_task(tmp_path))
    script = [
        turn("box__count"),  # step one, then suspended
        turn("bash", command="echo one > /app/one.txt"),  # resumed: a new server process
        turn("submit"),
        turn("box__count"),  # step two
        turn("bash", command="echo two > /app/two.txt"),
        turn("submit"),
    ]
    server = K3Server(script)
    model = chat_model(server, "in-process")
    partial = await start(task, model)
    assert not await partial.step()
    state = SuspendedRollout.model_validate_json((await partial.suspend()).model_dump_json())
    again = await resume(state, model)
    while not await again.step():
        pass
    traj = await again.finish()
    assert reads == ["/skills"], reads  # once, at the start
    assert state.skills is not None and BLOCK in state.skills  # carried across the resume
    assert len(server.requests) == len(script)
    for request in server.requests:  # both steps, before and after the resume
        assert "box__count" in offered_tools(request)
        assert opening(request).count(BLOCK) == 1, opening(request)
    assert opening(server.requests[3]).startswith("Write two to /app/two.txt.\n\n<available")
    results = [(r.name, r.output) for t in traj.turns for r in t.tool_results]
    assert results[0] == ("box__count", "1") and results[3] == ("box__count", "1"), results
    assert traj.score is not None, traj.error
    assert [(s.name, s.reward) for s in traj.score.steps] == [("one", 1.0), ("two", 1.0)]
