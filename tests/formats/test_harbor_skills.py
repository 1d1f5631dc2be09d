"""[environment] skills_dir: the skills in the sandbox named to the model at episode start,
as Harbor's Terminus 2 names them (an ``<available_skills>`` block after the instruction,
each skill's name, description and SKILL.md path). The task is the harbor-cookbook recipe
``skills`` (harbor_tasks/cookbook.tar.gz) with its image on the offline base (no apt-get)
and a test.sh without the network (no uvx); two skills added beside its own: one whose
SKILL.md has no front matter (left out), one a level too deep (not a skill)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from agentenv.agent.skills import front_matter
from agentenv.model import OpenAIChatModel
from agentenv.runner.episode import run_task
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.tasks import load_task
from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn

COOKBOOK = Path(__file__).parent / "harbor_tasks" / "cookbook.tar.gz"

TEST = """#!/bin/bash
if [ "$(cat /app/greeting.txt 2>/dev/null)" = "Hello from Harbor Skills!" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


def skills_task(root: Path) -> Path:
    """The cookbook's ``skills`` recipe, runnable offline (see the module)."""
    with tarfile.open(COOKBOOK) as tar:
        tar.extractall(root, members=[m for m in tar if m.name.startswith("skills/")])
    folder = root / "skills"
    (folder / "environment" / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\nCOPY skills/ /skills/\nWORKDIR /app\n"
    )
    (folder / "tests" / "test.sh").write_text(TEST)
    skills = folder / "environment" / "skills"
    (skills / "broken").mkdir()
    (skills / "broken" / "SKILL.md").write_text("# no front matter\nname: broken\n")
    (skills / "generate-greeting" / "nested").mkdir()
    (skills / "generate-greeting" / "nested" / "SKILL.md").write_text(
        "---\nname: nested\ndescription: too deep\n---\n"
    )
    return folder


def bash(command: str) -> ScriptedTurn:
    return ScriptedTurn(
        reasoning="r",
        tool_calls=[ScriptedToolCall(name="bash", arguments=json.dumps({"command": command}))],
    )


@pytest.mark.anyio
async def test_the_model_is_told_of_the_tasks_skills(tmp_path: Path) -> None:
    task = load_task(skills_task(tmp_path))
    assert task.skills_dir == "/skills"
    # the model reads the skill from the path it was given, then does what it says
    script = [
        bash("cat /skills/generate-greeting/SKILL.md"),
        bash("echo 'Hello from Harbor Skills!' > /app/greeting.txt"),
        ScriptedTurn(reasoning="r", tool_calls=[ScriptedToolCall(name="submit")]),
    ]
    with K3Server(script) as server:
        model = OpenAIChatModel(base_url=server.base_url, api_key="k")
        traj, _ = await run_task(task, model)
    first = server.requests[0]["messages"][1]["content"]
    assert first.startswith("# Hello Skills Task"), first
    assert (
        "<available_skills>\n  <skill>\n    <name>generate-greeting</name>\n"
        "    <description>Generate a greeting message and write it to a file.</description>\n"
        "    <location>/skills/generate-greeting/SKILL.md</location>\n  </skill>\n"
        "</available_skills>"
    ) in first, first
    assert "broken" not in first and "nested" not in first
    assert "Hello from Harbor Skills!" in traj.messages[3]["content"]  # cat read the skill
    assert traj.score is not None and traj.reward == 1.0, traj.score


@pytest.mark.no_docker
def test_front_matter_as_harbor_reads_it() -> None:
    assert front_matter("---\nname: a\ndescription: does b\n---\nbody") == ("a", "does b")
    assert front_matter("---\nname: a\n---\n") is None  # no description
    assert front_matter("---\nname: [a\ndescription: b\n---\n") is None  # not YAML
    assert front_matter("- a\n---\nname: a\ndescription: b\n---\n") is None  # not at the top
    assert front_matter("---\n- a\n---\n") is None  # not a mapping
