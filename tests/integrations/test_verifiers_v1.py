"""agentenv as a ``verifiers.v1`` environment (agentenv.integrations.verifiers_v1): its
taskset and harness loaded by id and run by verifiers 0.4.0's own eval runner (``run_eval``,
what ``vf-eval`` runs) against the scripted K3 server, in a venv of its own (verifiers 0.4.0
pins mcp==2.0.0, agentenv[dev] mcp>=2.3): ``scripts/verifiers_venv.sh verifiers-v1`` builds
it once (a stamp makes later runs free), and tests/integrations/verifiers_v1_driver.py runs
there."""

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
from tests.integrations.test_verifiers import remove_run
from tests.rl.test_rollouts import make_task

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("verifiers_v1_driver.py")
BUILD = "bash scripts/verifiers_venv.sh verifiers-v1"


@pytest.fixture(scope="module")
def vf1_python() -> Path:
    """The verifiers-v1 venv's python (built now if it is not, or is stale)."""
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "verifiers_venv.sh"), "verifiers-v1"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(
            f"the verifiers-v1 venv did not build; build it with `{BUILD}` (it runs "
            f"`pip install -e . verifiers==0.4.0` in .venv-verifiers-v1/):\n{done.stderr[-3000:]}"
        )
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.mark.no_docker
def test_without_verifiers_v1_the_import_names_the_install_command(tmp_path: Path) -> None:
    # this checkout's agentenv alone on the path (its root also holds a verifiers/ folder of
    # checker programs, which would stand in for the package): verifiers is not installed
    (tmp_path / "agentenv").symlink_to(ROOT / "agentenv")
    done = subprocess.run(
        [sys.executable, "-c", "import agentenv.integrations.verifiers_v1"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "ImportError" in done.stderr
    assert "pip install 'verifiers==0.4.0'" in done.stderr


def run_driver(python: Path, folder: Path, broken: Path, run_id: str) -> dict[str, Any]:
    """The driver's JSON, from outside the checkout (its verifiers/ would shadow the
    package), its sandboxes labelled with ``run_id``, verifiers' run files under the
    task's parent."""
    done = subprocess.run(
        [str(python), str(DRIVER), str(folder), str(broken), str(folder.parent / "runs")],
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


@pytest.mark.on_docker
@pytest.mark.slow
def test_verifiers_v1_eval_runs_frozen_agentenv_episodes_rewarded_by_the_verifier(
    tmp_path: Path, vf1_python: Path
) -> None:
    task = make_task(tmp_path)
    broken = make_task(tmp_path, "broken", setup="echo no setup here >&2; exit 3")
    run_id = f"vf1-{uuid.uuid4().hex[:8]}"
    try:
        out = run_driver(vf1_python, Path(str(task.folder)), Path(str(broken.folder)), run_id)
        left = [x for x in get_backend("docker").leftovers() if x.run == run_id]
    finally:
        remove_run(run_id)

    solve, wrong, fail, group, broke, capped, timeout = (
        out[k] for k in ("solve", "wrong", "fail", "group", "broken", "capped", "timeout")
    )
    # the taskset's own harness played the seat (found by id in the taskset's module)
    assert {s["harness"] for s in out.values()} == {"agentenv_verifiers"}
    # the scripted solution is rewarded by the hidden verifier, the task's @vf.reward
    assert solve["reward"] == 1.0 and solve["error"] is None
    assert solve["trace_rewards"] == {"hidden_verifier": {"score": 1.0, "weight": 1.0}}
    assert solve["outcome"]["stop_reason"] == "submitted"
    # the outcome goes out with the trace (its info, in traces.jsonl): the trajectory too
    assert {"cost_usd", "turns", "stop_reason"} <= set(solve["trajectory"])
    # every model call went through verifiers' interception: each is a turn of its trace
    # (the call to a tool that does not exist included: answered to the model as an error)
    assert solve["turns"] == solve["outcome"]["acts"] == 3
    # at every model request the episode's sandbox was frozen
    assert solve["states_at_requests"] == [["paused"]] * 3
    assert wrong["states_at_requests"] == [["paused"]] * 2
    assert fail["states_at_requests"] == [["paused"]]  # its sandbox was up when it failed
    # a wrong answer scores 0.0
    assert wrong["reward"] == 0.0 and wrong["error"] is None
    assert wrong["outcome"]["stop_reason"] == "submitted"
    assert wrong["trace_rewards"]["hidden_verifier"]["score"] == 0.0
    # the endpoint failing mid-rollout: the trace's error, not scored, the episode closed
    assert fail["error"]["type"] == "ProviderError" and fail["error"]["status_code"] == 500
    assert fail["reward"] == 0 and fail["outcome"]["reward"] is None
    assert fail["outcome"]["acts"] == 1
    # 2 rollouts of one task at once: each its own sandbox, both rewarded
    assert group["rewards"] == [1.0, 1.0]
    # a task whose setup fails: that rollout's harness error, the model never called
    assert broke["error"]["type"] == "HarnessError" and "exit 3" in broke["error"]["message"]
    assert broke["reward"] == 0 and broke["states_at_requests"] == []
    # verifiers' own turn cap refuses the 2nd call: a stop, scored, the verifier never ran
    assert capped["stop_condition"] == "max_turns" and capped["error"] is None
    assert capped["reward"] == 0.0 and capped["outcome"] == {
        "reward": None,
        "stop_reason": None,
        "acts": 1,
    }
    # verifiers' rollout timeout cancels the harness mid-call: its episode closed all the same
    assert timeout["stop_condition"] == "agent_timeout" and timeout["reward"] == 0.0
    assert timeout["outcome"]["acts"] == 1 and timeout["states_at_requests"] == [["paused"]]
    # nothing of any scenario's run is left on the engine
    assert [s["left_after"] for s in out.values()] == [[]] * 7
    assert left == []
