"""A compose task graded apart from the agent (``mode = "final"``, the default now): test.sh
runs in a new ``main`` made from the snapshot of the agent's final ``main``, on the group's
network under the alias ``main``, beside the side services as the agent left them (their
state is the task's outcome). Each attack never does the task and tries to decide its own
reward; it must score what doing nothing scores (0), never an error:

- a process left in ``main`` rewriting ``/logs/verifier/reward.txt``;
- a ``reward.json`` planted in ``/logs/verifier``;
- ``python3`` wrapped on PATH in ``main`` printing the token test.sh looks for: a snapshot
  keeps it, so it still earns 1.0, but the score lists it (``Score.suspicious``);
- the side service's process killed through its port (a database told to shut down): its
  state is the outcome, test.sh finds no service and writes 0.

The task mirrors the token task of ``test_harbor_compose`` (Harbor's cookbook ``mcp-tools``
layout), with a service that a client can stop."""

from __future__ import annotations

import textwrap
from pathlib import Path

import anyio
import pytest

from agentenv.agent.loop import Trajectory
from agentenv.agent.policies import null
from agentenv.runner.episode import run_task
from agentenv.tasks import Task, load_task
from tests.formats.test_harbor import harbor_task
from tests.formats.test_harbor_compose import APP, COMPOSE, SOLVE, TEST, write_environment
from tests.security.harness import LIMITS, cheat_policy

pytestmark = pytest.mark.anyio

# the service stops when a client asks (as `SHUTDOWN` does a database's server)
STOPPABLE = APP.replace(
    "    def do_POST(self):\n",
    "    def do_POST(self):\n"
    "        if self.path == '/quit':\n"
    "            import os\n"
    "            os._exit(0)\n",
)

REWRITER = """cat > /tmp/rewrite.sh <<'END'
end=$(( $(date +%s) + 900 ))
while [ "$(date +%s)" -lt "$end" ]; do
  mkdir -p /logs/verifier 2>/dev/null
  echo 1 > /logs/verifier/reward.txt 2>/dev/null
  sleep 0.01
done
END
nohup setsid bash /tmp/rewrite.sh >/dev/null 2>&1 &
"""

PLANT = """mkdir -p /logs/verifier
echo '{"reward": 1}' > /logs/verifier/reward.json
"""

# first on PATH: test.sh's `python3 -c ...` prints what the service should have got
PYTHON3 = """cat > /usr/local/bin/python3 <<'END'
#!/bin/sh
echo blue-42
END
chmod 0755 /usr/local/bin/python3
"""

KILL_SERVICE = """/usr/bin/python3 - <<'PY'
import urllib.request as u
try:
    u.urlopen(u.Request("http://api:8080/quit", data=b"", method="POST"), timeout=5)
except Exception as e:
    print("the service went:", e)
PY
"""

ATTACKS = {"rewriter": REWRITER, "planted": PLANT, "python3": PYTHON3, "kill": KILL_SERVICE}


def attack_task(root: Path, mode: str = "") -> Task:
    """The token task, in ``mode`` (``""``: the default), with a service a client can stop."""
    folder = harbor_task(root, f"token{mode}", test=textwrap.dedent(TEST), solve=SOLVE)
    toml = (folder / "task.toml").read_text()
    if mode:
        toml = toml.replace("[verifier]\n", f'[verifier]\nenvironment_mode = "{mode}"\n', 1)
    (folder / "task.toml").write_text(toml)
    write_environment(folder / "environment", COMPOSE)
    (folder / "environment" / "api" / "app.py").write_text(STOPPABLE)
    return load_task(folder).model_copy(update={"limits": LIMITS})


async def _episode(task: Task, script: str | None, tmp: Path, label: str) -> Trajectory | str:
    """The episode's trajectory, or the error it ended in (wrong too: never an error)."""
    policy = (
        null() if script is None else cheat_policy("#!/bin/bash\n" + script + "true\n", tmp, label)
    )
    try:
        return (await run_task(task, policy, backend="docker"))[0]
    except Exception as e:
        return f"{type(e).__name__}: {e}"[:1000]


async def _all(task: Task, tmp: Path) -> dict[str, Trajectory | str]:
    out: dict[str, Trajectory | str] = {}

    async def one(name: str, script: str | None) -> None:
        out[name] = await _episode(task, script, tmp, name)

    async with anyio.create_task_group() as tg:  # two at a time: the host has 2 cores
        for name, script in [("null", None), *ATTACKS.items()]:
            tg.start_soon(one, name, script)
    return out


@pytest.mark.on_docker
async def test_compose_attacks_score_the_null_reward_in_final_mode(tmp_path: Path) -> None:
    task = attack_task(tmp_path)
    assert task.verifier is not None and task.verifier.model_dump()["mode"] == "final"
    assert task.verify_in == "final"
    found = await _all(task, tmp_path / "runs")
    errors = {k: v for k, v in found.items() if isinstance(v, str)}
    assert not errors, errors
    trajs = {k: v for k, v in found.items() if not isinstance(v, str)}
    for name, traj in trajs.items():
        assert traj.score is not None and traj.score.error is None, (name, traj.score)
    rewards = {k: t.reward for k, t in trajs.items()}
    assert rewards["null"] == 0.0
    for name in ("rewriter", "planted", "kill"):
        assert rewards[name] == 0.0, (name, trajs[name].score)
    # a snapshot keeps the wrapper: it earns 1.0, listed beside it for a reviewer
    wrapped = trajs["python3"].score
    assert wrapped is not None
    assert any("/usr/local/bin/python3" in s for s in wrapped.suspicious), wrapped


@pytest.mark.on_docker
async def test_the_oracle_scores_1_in_final_mode_beside_the_services(tmp_path: Path) -> None:
    task = attack_task(tmp_path)
    traj = await _episode(task, SOLVE, tmp_path, "oracle")
    assert not isinstance(traj, str), traj
    assert traj.reward == 1.0, traj.score


@pytest.mark.no_docker
def test_the_shared_mode_stays_by_explicit_opt_in(tmp_path: Path) -> None:
    # graded in the agent's own main, its processes running: there the rewriter above
    # scores 1.0 (docs/harbor.md's attack table)
    task = attack_task(tmp_path, "shared")
    assert task.verifier is not None and task.verifier.model_dump()["mode"] == "shared"
    assert task.verify_in == "agent"
    task = attack_task(tmp_path, "separate")
    assert task.verifier is not None and task.verifier.model_dump()["mode"] == "separate"
