"""The engine is killed under an RL pipeline's forked group: the group's snapshot taken,
its forks thinking. ``rollout_group`` returns every rollout (those that lost their sandbox
with ``error`` set and no advantage, for the trainer to drop), raises nothing, and gc leaves
nothing of the group behind, the snapshot image included; the group run again is whole."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from agentenv.testing import K3Server
from tests.faults.engine import PrivateEngine
from tests.faults.scenario import ROWS, TTFT_S, Row, gc, make_tasks, three_turns, wait_until

N = 4
GROUP = textwrap.dedent(
    """
    import json, sys, anyio
    from agentenv.model import OpenAIChatModel
    from agentenv.rl.rollout import rollout_group
    from agentenv.tasks import load_task

    async def main():
        model = OpenAIChatModel(base_url=sys.argv[2], api_key="k")
        group = await rollout_group(load_task(sys.argv[1]), model, int(sys.argv[3]))
        await model.aclose()
        print(json.dumps([
            {"error": t.error, "reward": t.reward, "advantage": t.advantage} for t in group
        ]))

    anyio.run(main)
    """
)


def _group(engine: PrivateEngine, task: Path, url: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-c", GROUP, str(task), url, str(N)]
    return subprocess.Popen(
        argv, env=engine.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_engine_killed_under_a_forked_group(engine: PrivateEngine, tmp_path: Path) -> None:
    task = make_tasks(tmp_path / "tasks", 1) / "greet-0"
    with K3Server(three_turns, ttft_s=TTFT_S) as server:
        group = _group(engine, task, server.base_url)
        wait_until(lambda: len(server.requests) >= N, what="the forks thinking")
        snapshots = engine.docker("images", "--quiet", "agentenv/snapshot").stdout.split()
        assert snapshots, "no snapshot: the group did not fork from one"
        engine.restart(signal.SIGKILL)
        stdout, stderr = group.communicate(timeout=300)
        assert group.returncode == 0, stderr[-2000:]
        first = json.loads(stdout.splitlines()[-1])
        again = _group(engine, task, server.base_url)
        stdout, stderr = again.communicate(timeout=300)
        assert again.returncode == 0, stderr[-2000:]
        second = json.loads(stdout.splitlines()[-1])
    assert len(first) == N
    failed = [r for r in first if r["error"]]
    assert failed, "the kill cost no rollout: the test would be moot"
    assert all(r["advantage"] is None and r["reward"] is None for r in failed)
    assert len(second) == N and not any(r["error"] for r in second)
    assert all(r["reward"] == 1.0 for r in second)
    collected = gc(engine)
    assert collected.returncode == 0, collected.stderr
    leaked = engine.ours()
    ROWS.append(
        Row(
            scenario="engine SIGKILL under a forked RL group",
            episodes=N, affected=len(failed), retried=len(failed), lost=N - len(first),
            duplicated=0, leaked=len(leaked), exit="0 → 0",
        )
    )  # fmt: skip
    assert not leaked, leaked


def test_the_pipeline_killed_under_a_forked_group(engine: PrivateEngine, tmp_path: Path) -> None:
    # a trainer's process OOM-killed mid-group: its forks, their checkers and the group's
    # snapshot are all left; gc removes every one, and the group run again is whole
    task = make_tasks(tmp_path / "tasks", 1) / "greet-0"
    with K3Server(three_turns, ttft_s=TTFT_S) as server:
        group = _group(engine, task, server.base_url)
        wait_until(lambda: len(server.requests) >= N + 2, what="the forks at work")
        group.send_signal(signal.SIGKILL)
        group.wait()
        left = engine.ours()
        assert any("snapshot" in item for item in left), left  # the kill left the group's
        collected = gc(engine)
        assert collected.returncode == 0, collected.stderr
        leaked = engine.ours()
        again = _group(engine, task, server.base_url)
        stdout, stderr = again.communicate(timeout=300)
    assert again.returncode == 0, stderr[-2000:]
    second = json.loads(stdout.splitlines()[-1])
    assert len(second) == N and all(r["reward"] == 1.0 for r in second)
    ROWS.append(
        Row(
            scenario="RL pipeline SIGKILLed under a forked group, then gc",
            episodes=N, affected=N, retried=N, lost=0, duplicated=0, leaked=len(leaked),
            exit="-9 → 0",
        )
    )  # fmt: skip
    assert not leaked, leaked
