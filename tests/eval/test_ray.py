"""The Ray executor on a local two-node cluster (a head and one worker node, started here):
episodes run on the nodes, each with the Docker engine it finds, and come back as plain data
that the driver records as usual; a job stopped on the driver stops them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from agentenv.eval import ray_executor
from agentenv.eval.jobs import run_eval
from agentenv.runner.results import load_results
from agentenv.sandbox import get_backend
from agentenv.tasks import load_tasks
from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))
PORT = "6411"


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    common = ["--num-cpus=2", "--disable-usage-stats"]
    subprocess.run(
        [RAY, "start", "--head", f"--port={PORT}", "--include-dashboard=false", *common],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    try:
        subprocess.run(
            [RAY, "start", f"--address=127.0.0.1:{PORT}", *common],
            env=env,
            check=True,
            capture_output=True,
            timeout=120,
        )
        yield f"127.0.0.1:{PORT}"
    finally:
        import ray

        ray.shutdown()
        subprocess.run([RAY, "stop", "--force"], env=env, capture_output=True, timeout=120)


async def test_eval_on_a_ray_cluster(cluster: str, tmp_path: Path) -> None:
    tasks = load_tasks(
        [ROOT / "environments" / "text-stats", ROOT / "environments" / "top-error-ips"]
    )
    on_cluster = ray_executor.runner(address=cluster)
    rows = await run_eval(tasks, "oracle", out=tmp_path, samples=3, executor=on_cluster)
    assert rows[-1].pass_at_1 == 1.0 and rows[-1].episodes == 6
    results = load_results(tmp_path)
    nodes = {r.node for r in results.values()}
    assert None not in nodes and len(nodes) == 2  # both nodes took episodes
    for r in results.values():
        assert r.trajectory is not None and (tmp_path / r.trajectory).is_file()


async def test_ray_episodes_prepare_and_verify_like_every_other_driver(
    cluster: str, tmp_path: Path
) -> None:
    from agentenv.agent.loop import Trajectory
    from tests.runner.test_lifecycle import VIEW, make_task

    task = make_task(tmp_path)
    on_cluster = ray_executor.runner(address=cluster)
    await run_eval([task], "oracle", out=tmp_path / "job", executor=on_cluster)
    (result,) = load_results(tmp_path / "job").values()
    traj = Trajectory.model_validate_json((tmp_path / "job" / str(result.trajectory)).read_text())
    assert traj.score is not None and traj.score.error is None and traj.reward == 1.0
    assert f"VIEW {VIEW}" in traj.score.checks[0].detail


async def test_a_stopped_job_stops_its_episodes_on_the_cluster(
    cluster: str, tmp_path: Path
) -> None:
    from tests.eval.test_eval import make_task

    def busy(body: dict[str, object]) -> ScriptedTurn:  # never submits: turns until stopped
        call = ScriptedToolCall(name="bash", arguments='{"command": "true"}')
        return ScriptedTurn(reasoning="Again.", tool_calls=[call])

    tasks = load_tasks([make_task(tmp_path / "tasks", "slow")])
    out = tmp_path / "job"
    on_cluster = ray_executor.runner(address=cluster)
    before = {r.id for r in get_backend().leftovers()}
    with K3Server(busy, ttft_s=0.5) as server:
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    lambda: run_eval(
                        tasks, server.base_url, out=out, samples=2, executor=on_cluster
                    )
                )
                while len(server.requests) < 6:  # the episodes are taking turns
                    await anyio.sleep(0.1)
                tg.cancel_scope.cancel()  # the job stops (Ctrl-C, a deadline)
        asked = len(server.requests)
        await anyio.sleep(5)  # ten more turns each, had they gone on
        assert len(server.requests) <= asked + 2  # at most the turns already asked for
    # the interrupted episodes remove their own sandboxes (a bound, not a figure: CI once
    # took over 60 s here with the host's two cores loaded by other work)
    with anyio.fail_after(180):
        while {r.id for r in get_backend().leftovers()} - before:
            await anyio.sleep(0.5)
