"""A partial rollout played by a harness (mini-swe-agent): one step answers its first model
call; it is then suspended while the harness waits on its second (the sandbox frozen: its
CPU counter does not move), and resumed in another process, whose new gateway on the same
socket gets the harness's cut call sent again and answers it with the new policy version.
The verifier grades the result as for any rollout."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from agentenv.model import OpenAIChatModel
from agentenv.rl.harness_rollout import HarnessRollout
from agentenv.rl.rollout import SuspendedRollout, start
from agentenv.sandbox import cgroup, get_backend
from agentenv.tasks import load_task
from agentenv.testing import K3Server
from tests.runner.test_harness_eval import answer_task, solving

pytestmark = [pytest.mark.anyio, pytest.mark.on_docker]

RESUME = """
import json, sys, anyio
from agentenv.model import OpenAIChatModel
from agentenv.rl.rollout import SuspendedRollout, resume

async def main():
    state = SuspendedRollout.model_validate_json(open(sys.argv[1]).read())
    model = OpenAIChatModel(base_url=sys.argv[2], api_key="local")
    handle = await resume(state, model, version=2)
    box = handle.box.id
    traj = await handle.run()
    await model.aclose()
    print(json.dumps({"box": box, "traj": traj.model_dump(mode="json")}))

anyio.run(main)
"""


async def test_a_harness_rollout_suspends_on_a_model_call_and_resumes_elsewhere(
    tmp_path: Path,
) -> None:
    task = load_task(answer_task(tmp_path))
    with K3Server(solving) as server:
        model = OpenAIChatModel(base_url=server.base_url, api_key="local")
        handle = await start(task, model, version=1, agent="mini-swe-agent", backend="docker")
        assert isinstance(handle, HarnessRollout)
        box_id = handle.box.id
        assert not await handle.step()  # one call answered; the harness waits on the next
        assert len(server.requests) == 1 and len(handle.trajectory.turns) == 1
        state = await handle.suspend()
        await model.aclose()
        assert state.harness is not None and state.harness.handle is not None
        status = {r.id: r.status for r in get_backend("docker").leftovers()}
        assert status[box_id] == "paused", status.get(box_id)
        cpu = cgroup.cpu_usage_ns(box_id)
        await anyio.sleep(1.0)
        assert cgroup.cpu_usage_ns(box_id) == cpu  # frozen: the harness waits, using nothing
        (tmp_path / "state.json").write_text(state.model_dump_json())
        done = subprocess.run(
            [
                sys.executable, "-c", textwrap.dedent(RESUME),
                str(tmp_path / "state.json"), server.base_url,
            ],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        assert len(server.requests) == 2  # the cut call, sent again to the new gateway
    result = json.loads(done.stdout.strip().splitlines()[-1])
    traj = result["traj"]
    assert result["box"] == box_id  # the same sandbox, resumed
    assert [t["policy_version"] for t in traj["turns"]] == [1, 2]
    assert traj["stop_reason"] == "harness_exited", traj["harness"]
    assert traj["harness"]["exit_code"] == 0
    assert traj["score"]["reward"] == 1.0
    assert SuspendedRollout.model_validate_json((tmp_path / "state.json").read_text())
    assert box_id not in {r.id for r in get_backend("docker").leftovers()}
    assert not state.harness.gateway_dir.exists()  # the folder went with the rollout
