"""The trainer's script in docs/openenv.md runs as written: taken from the doc, pointed at
`serve-env` (in this process) and at a scripted OpenAI-compatible policy server, it plays
four episodes at once to reward 1.0."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn
from tests.envserver.test_server import running
from tests.rl.test_rollouts import make_task

pytestmark = pytest.mark.on_docker

ROOT = Path(__file__).resolve().parents[2]
ENV_URL = "http://127.0.0.1:8000"
POLICY_URL = "http://127.0.0.1:8001/v1"

TURNS = [
    ScriptedTurn(
        reasoning="Write it.",
        tool_calls=[
            ScriptedToolCall(
                name="write_file", arguments=json.dumps({"path": "answer.txt", "content": "ok\n"})
            )
        ],
    ),
    ScriptedTurn(reasoning="Done.", tool_calls=[ScriptedToolCall(name="submit", arguments="{}")]),
]


def solve(body: dict[str, Any]) -> ScriptedTurn:
    """The policy: each episode's turn follows from its own conversation."""
    return TURNS[min(sum(m["role"] == "assistant" for m in body["messages"]), 1)]


def _trainer_script() -> str:
    doc = (ROOT / "docs" / "openenv.md").read_text()
    section = doc.split("\n## A trainer's code\n", 1)[1].split("\n## ", 1)[0]
    script: str = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    assert ENV_URL in script and POLICY_URL in script
    return script


def test_the_trainer_script_in_the_doc_runs(tmp_path: Path) -> None:
    with K3Server(solve) as policy, running([make_task(tmp_path)]) as env:
        path = tmp_path / "trainer.py"
        script = _trainer_script().replace(ENV_URL, env.url)
        path.write_text(script.replace(POLICY_URL, policy.base_url))
        done = subprocess.run(
            [sys.executable, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300
        )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 4 and all(line.startswith("reward 1.0 submitted") for line in lines)
