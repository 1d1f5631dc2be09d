"""A refactor job played by a real harness (`agent="codex"`): Codex CLI, installed into the
repo's image, renames the helper with the commands a scripted K3-compatible model gives it
through the gateway; the job verifies the patch with the repo's own tests as for the
built-in loop, and the trajectory keeps the harness's run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentenv.agent.trajectory import Trajectory
from agentenv.refactor.job import run_refactor
from agentenv.refactor.repos import load_repo_list
from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn
from tests.refactor.test_refactor import RENAME, build_module

pytestmark = [pytest.mark.anyio, pytest.mark.on_docker]

RENAME_ALL = "git grep -lz fetch_json | xargs -0 -r sed -i 's/fetch_json/get_json/g'"


def exec_command(cmd: str) -> ScriptedToolCall:
    """A call of Codex's own shell tool."""
    return ScriptedToolCall(name="exec_command", arguments=json.dumps({"cmd": cmd}))


async def test_codex_plays_a_refactor_and_its_patch_is_verified(tmp_path: Path) -> None:
    build_module().build(tmp_path / "repos")
    entries = [e for e in load_repo_list(tmp_path / "repos") if e.name == "billing"]
    script = [
        ScriptedTurn(reasoning="Rename it everywhere.", tool_calls=[exec_command(RENAME_ALL)]),
        ScriptedTurn(reasoning="Done.", content="Renamed fetch_json to get_json."),
    ]
    with K3Server(script) as server:
        (result,) = await run_refactor(
            entries, RENAME, server.base_url, out=tmp_path / "job", agent="codex"
        )
    assert result.outcome == "changed-green", result
    assert result.patch is not None
    patch = (tmp_path / "job" / result.patch).read_text()
    assert "+def get_json" in patch and "+from http_util import get_json" in patch
    traj = Trajectory.model_validate_json(
        (tmp_path / "job" / "trajectories" / "billing.json").read_text()
    )
    assert traj.harness is not None and traj.harness.name == "codex"
    assert traj.harness.exit_code == 0 and traj.stop_reason == "harness_exited"
    assert len(traj.turns) == 2 == len(server.requests)
    assert "model: kimi-k3" in traj.harness.log  # the model's name, not an object's repr
    assert "played by codex" in (tmp_path / "job" / "summary.md").read_text()
