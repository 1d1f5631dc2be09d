"""Scale-out on Ray (``pip install agentenv[ray]``): each episode becomes a Ray task that
runs on some node of the cluster with that node's own Docker engine, and comes back as plain
data (the result and the trajectory as JSON) for the driver to record.

Every node needs agentenv installed and a Docker engine with the task images (or the base
image to build them from). Task folders travel with each task as a tar, so nodes need no
shared storage. Endpoint clients, and so their concurrency limits, are per node.
"""

from __future__ import annotations

import io
import logging
import socket
import tarfile
from pathlib import Path
from typing import Any

import anyio
import ray

from agentenv import scratch
from agentenv.agent.loop import Trajectory
from agentenv.errors import JobStopped
from agentenv.log import get_logger
from agentenv.runner.policy import Policies
from agentenv.runner.results import EpisodeResult
from agentenv.runner.retries import EpisodeSettings
from agentenv.tasks import Task, load_task

log = get_logger(__name__)
CANCEL_WAIT_S = 60.0  # how long a stopped job waits for its cancelled episodes to clean up


def _pack(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return buf.getvalue()


@ray.remote(max_retries=2)
def _episode(
    packed: bytes, task_json: str, sample: int, settings_json: str, out_dir: str | None
) -> tuple[str, str | None, str]:
    """On a node: unpack the task, run one episode with retries, return JSON."""
    from agentenv.runner.retries import EpisodeSettings, run_episode_with_retries

    task = Task.model_validate_json(task_json)
    settings = EpisodeSettings.model_validate_json(settings_json)
    with scratch.folder("ray") as tmp:
        with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as tar:
            tar.extractall(tmp, filter="data")
        folder = Path(tmp) / (task.folder.name if task.folder else task.id)
        local = load_task(folder).model_copy(update={"limits": task.limits})

        async def run() -> tuple[EpisodeResult, Trajectory | None]:
            policies = Policies(settings.model, reasoning_effort=settings.reasoning_effort)
            try:
                # kept finals go to out_dir: a folder the nodes share
                out = Path(out_dir) if out_dir else None
                return await run_episode_with_retries(local, sample, settings, policies, out=out)
            finally:
                await policies.aclose()

        result, traj = anyio.run(run)
    return (
        result.model_dump_json(),
        traj.model_dump_json() if traj else None,
        socket.gethostname() + ":" + ray.get_runtime_context().get_node_id()[:12],
    )


def runner(*, address: str | None, out: Path | None = None) -> Any:
    """An episode runner for :func:`~agentenv.eval.jobs.run_eval` that uses the Ray
    cluster at ``address`` (``None``: start or join a local one); each episode gets the
    job's settings from ``run_eval``."""
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    packed: dict[str, bytes] = {}

    async def run(
        task: Task, sample: int, settings: EpisodeSettings
    ) -> tuple[EpisodeResult, Trajectory | None]:
        if task.folder is None:
            raise ValueError(f"task {task.id!r} has no folder to send to the cluster")
        if task.id not in packed:
            packed[task.id] = _pack(task.folder)
        ref = _episode.remote(
            packed[task.id],
            task.model_dump_json(),
            sample,
            settings.model_dump_json(),
            str(out) if out else None,
        )
        try:
            result_json, traj_json, node = await ref
        except anyio.get_cancelled_exc_class():
            # the job stopped (another episode stopped it, Ctrl-C, a deadline): the remote
            # episode must not go on paying for turns; interrupted, it removes its sandboxes,
            # given the time (the driver's exit would end its worker mid-teardown)
            with anyio.move_on_after(CANCEL_WAIT_S, shield=True):
                try:
                    ray.cancel(ref)
                    await ref
                except Exception as e:  # cancelled as asked, or the cluster is gone
                    log.info("ray.episode_cancelled", task=task.id, sample=sample, how=str(e)[:200])
            raise
        except ray.exceptions.RayError as e:  # the node or its worker died
            if isinstance(e, JobStopped) or isinstance(getattr(e, "cause", None), JobStopped):
                raise  # the episode stopped the job (its node's engine gone, a refused key)
            return EpisodeResult(
                task_id=task.id, sample=sample, outcome="sandbox_lost", error=f"ray: {e}"
            ), None
        result = EpisodeResult.model_validate_json(result_json)
        result.node = node
        traj = Trajectory.model_validate_json(traj_json) if traj_json else None
        return result, traj

    return run
