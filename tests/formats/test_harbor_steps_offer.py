"""A multi-step task (Harbor's ``[[steps]]``) is offered and told what a single-step one is
(agentenv.runner.offer): each step's model is offered the task's MCP servers' tools beside
agentenv's own and told the skills after the step's instruction. Before, run_steps gave
the skills but no MCP tools: a multi-step task with MCP servers silently got none.

The server is tests/agent/test_mcp_stdio.py's stdio server (its image, imported); one
process for the trial, so its count goes on from one step to the next."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentenv.runner.episode import run_task
from agentenv.tasks import load_task
from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn
from tests.agent.test_mcp_stdio import IMAGE, stdio_image
from tests.helpers import chat_model

pytestmark = pytest.mark.anyio

__all__ = ["stdio_image"]  # the fixture, imported (built once per module)

SKILL = "---\nname: greet\ndescription: How to greet in this task.\n---\nSay hello.\n"
BLOCK = "<location>/skills/greet/SKILL.md</location>"

STEPS_TOML = """\
schema_version = "1.1"
[verifier]
timeout_sec = 60.0
[environment]
cpus = 1
memory_mb = 1024
skills_dir = "/skills"

[[environment.mcp_servers]]
name = "box"
transport = "stdio"
command = "python3"
args = ["/opt/box-tools/server.py"]

[[steps]]
name = "one"

[[steps]]
name = "two"
"""

STEP_TEST = """#!/bin/bash
[ "$(cat /app/{name}.txt 2>/dev/null)" = {name} ] && echo 1 > /logs/verifier/reward.txt \\
  || echo 0 > /logs/verifier/reward.txt
"""


def steps_task(root: Path) -> Path:
    """Two steps over the stdio server's image, each writing its name to /app/<name>.txt."""
    folder = root / "two-steps"
    (folder / "environment").mkdir(parents=True)
    (folder / "task.toml").write_text(STEPS_TOML)
    for name in ("one", "two"):
        step = folder / "steps" / name
        (step / "tests").mkdir(parents=True)
        (step / "instruction.md").write_text(f"Write {name} to /app/{name}.txt.\n")
        (step / "tests" / "test.sh").write_text(STEP_TEST.format(name=name))
    return with_skills(folder)


def with_skills(folder: Path) -> Path:
    """``folder``'s image: the stdio server's, with a skills folder at /skills."""
    skill = folder / "environment" / "skills" / "greet" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(SKILL)
    (folder / "environment" / "Dockerfile").write_text(
        f"FROM {IMAGE}\nCOPY skills/ /skills/\nWORKDIR /app\n"
    )
    return folder


def turn(name: str, **arguments: object) -> ScriptedTurn:
    """One turn calling one tool."""
    return ScriptedTurn(
        reasoning="r", tool_calls=[ScriptedToolCall(name=name, arguments=json.dumps(arguments))]
    )


def offered_tools(request: dict[str, object]) -> set[str]:
    """The tool names a chat request offered."""
    return {t["function"]["name"] for t in request["tools"]}  # type: ignore[attr-defined,index]


def opening(request: dict[str, object]) -> str:
    """A chat request's first user message."""
    return str(request["messages"][1]["content"])  # type: ignore[index]


@pytest.mark.on_docker
async def test_each_step_is_offered_the_mcp_tools_and_told_the_skills(
    stdio_image: str, tmp_path: Path
) -> None:
    task = load_task(steps_task(tmp_path))
    assert task.multi_step is not None and task.mcp_servers and task.skills_dir == "/skills"
    script = [
        turn("box__count"),
        turn("bash", command="echo one > /app/one.txt"),
        turn("submit"),
        turn("box__count"),
        turn("bash", command="echo two > /app/two.txt"),
        turn("submit"),
    ]
    server = K3Server(script)
    # the stdio server's image is built on Docker (test_mcp_stdio), whatever the suite's backend
    traj, _ = await run_task(task, chat_model(server, "in-process"), backend="docker")
    assert len(server.requests) == len(script)
    for request in server.requests:  # before: no box__* tools in any step
        assert {"bash", "submit", "box__count"} <= offered_tools(request)
        assert opening(request).count(BLOCK) == 1, opening(request)
    assert opening(server.requests[0]).startswith("Write one to /app/one.txt.\n\n<available")
    assert opening(server.requests[3]).startswith("Write two to /app/two.txt.\n\n<available")
    results = [(r.name, r.error, r.output) for t in traj.turns for r in t.tool_results]
    counts = [out for name, _, out in results if name == "box__count"]
    assert counts == ["1", "2"], results  # one server process for the trial
    assert traj.score is not None and traj.score.error is None, traj.score
    assert [(s.name, s.reward) for s in traj.score.steps] == [("one", 1.0), ("two", 1.0)]
