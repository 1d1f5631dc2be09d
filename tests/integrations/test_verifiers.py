"""agentenv as a verifiers environment (agentenv.integrations.verifiers), driven by the
verifiers package's own ``Environment.evaluate`` against the scripted K3 server, in a venv of
its own (verifiers pins mcp<2, agentenv[dev] mcp>=2.3): scripts/verifiers_venv.sh builds it
once (a stamp makes later runs free), and tests/integrations/verifiers_driver.py runs there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from agentenv.sandbox import get_backend
from agentenv.sandbox.docker import connect
from agentenv.sandbox.labels import RUN
from tests.rl.test_rollouts import make_task

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("verifiers_driver.py")
BUILD = "bash scripts/verifiers_venv.sh"


@pytest.fixture(scope="module")
def vf_python() -> Path:
    """The verifiers venv's python (built now if it is not, or is stale)."""
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "verifiers_venv.sh")],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(
            f"the verifiers venv did not build; build it with `{BUILD}` (it runs "
            f"`pip install -e . verifiers==0.3.1` in .venv-verifiers/):\n{done.stderr[-3000:]}"
        )
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.mark.no_docker
def test_without_verifiers_the_import_names_the_install_command(tmp_path: Path) -> None:
    # this checkout's agentenv alone on the path (its root also holds a verifiers/ folder of
    # checker programs, which would stand in for the package): verifiers is not installed
    (tmp_path / "agentenv").symlink_to(ROOT / "agentenv")
    done = subprocess.run(
        [sys.executable, "-c", "import agentenv.integrations.verifiers"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "ImportError" in done.stderr
    assert "pip install 'verifiers==0.3.1'" in done.stderr


def run_driver(python: Path, folder: Path, broken: Path, run_id: str) -> dict[str, Any]:
    """The driver's JSON, from outside the checkout (its verifiers/ would shadow the
    package), its sandboxes labelled with ``run_id``."""
    done = subprocess.run(
        [str(python), str(DRIVER), str(folder), str(broken)],
        cwd=folder.parent,
        env={
            **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            "AGENTENV_RUN_ID": run_id,
        },
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def remove_run(run_id: str) -> None:
    """Remove what the driver's run left (nothing, when the test passes)."""
    api = connect().api
    for c in api.containers(all=True, filters={"label": f"{RUN}={run_id}"}):
        api.remove_container(c["Id"], force=True)
    for image in api.images(filters={"label": f"{RUN}={run_id}"}):
        api.remove_image(image["Id"], force=True)


@pytest.mark.on_docker
@pytest.mark.slow
def test_verifiers_evaluate_rolls_out_frozen_agentenv_episodes_rewarded_by_the_verifier(
    tmp_path: Path, vf_python: Path
) -> None:
    task = make_task(tmp_path)
    broken = make_task(tmp_path, "broken", setup="echo no setup here >&2; exit 3")
    run_id = f"vf-{uuid.uuid4().hex[:8]}"
    try:
        out = run_driver(vf_python, Path(str(task.folder)), Path(str(broken.folder)), run_id)
        left = [x for x in get_backend("docker").leftovers() if x.run == run_id]
    finally:
        remove_run(run_id)

    solve, wrong, fail = out["solve"], out["wrong"], out["fail"]
    # the scripted solution is rewarded by the hidden verifier, through verifiers' rubric
    assert solve["reward"] == 1.0 and solve["error"] is None
    assert solve["outcome"]["stop_reason"] == "submitted"
    assert solve["metrics"]["hidden_verifier"] == 1.0
    # the call to a tool that does not exist was answered to the model as an error
    roles = [m["role"] for m in solve["completion"]]
    assert roles == ["assistant", "tool"] * 3
    assert "unknown tool 'nope'" in solve["completion"][1]["content"]
    # at every model request the episode's sandbox was frozen
    assert solve["states_at_requests"] == [["paused"]] * 3
    assert wrong["states_at_requests"] == [["paused"]] * 2
    assert fail["states_at_requests"] == [["paused"]]  # its sandbox was up when it failed
    # a wrong answer scores 0.0
    assert wrong["reward"] == 0.0 and wrong["error"] is None
    assert wrong["outcome"]["stop_reason"] == "submitted"
    # the endpoint failing mid-rollout: recorded as the rollout's error, scored 0.0, closed
    assert fail["error"]["error"] == "ModelError" and fail["stop_condition"] == "has_error"
    assert fail["reward"] == 0.0 and fail["outcome"]["reward"] is None
    # a group of 2 at once (verifiers' run_group): each its own sandbox, both rewarded
    group = out["group"]
    assert group["rewards"] == [1.0, 1.0]
    # (not all frozen at each request: the other rollout may be running its tools then)
    # a task whose setup fails: that rollout's error (EpisodeFailed), the model never called
    broke = out["broken"]
    assert broke["error"]["error"] == "EpisodeFailed" and broke["reward"] == 0.0
    assert "exit 3" in broke["error"]["error_chain_repr"]
    assert broke["states_at_requests"] == []
    # every episode closed, and nothing of the run is left on the engine
    assert [s["open_after"] for s in (solve, wrong, fail, group, broke)] == [0] * 5
    assert left == []
