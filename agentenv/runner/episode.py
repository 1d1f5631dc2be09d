"""One episode of one task, end to end: a sandbox from the task's image with its workspace
copied in, the loop, the hidden verifier, and the sandbox removed whatever happens."""

from __future__ import annotations

import anyio

from agentenv.agent.loop import ToolResultCallback, Trajectory, run_episode
from agentenv.model.client import EventCallback
from agentenv.model.types import ChatModel
from agentenv.sandbox import DockerSandbox, SandboxSpec, fork, remove_snapshot
from agentenv.sandbox.protocol import Sandbox, Snapshot
from agentenv.tasks import Task
from agentenv.verify import Score, verify

KEEP_FINAL_S = 14 * 86400.0  # how long a kept final state survives `agentenv gc`


async def prepare_sandbox(task: Task) -> DockerSandbox:
    """A new sandbox for ``task``: its image (built from its Dockerfile if absent), its
    workdir, and its workspace copied in. The caller closes it."""
    dockerfile = task.folder / task.dockerfile if task.folder and task.dockerfile else None
    spec = SandboxSpec(image=task.image, dockerfile=dockerfile, workdir=task.workdir)
    box = await DockerSandbox.create(spec)
    try:
        if task.workspace is not None:
            await box.upload(task.workspace, task.workdir)
    except BaseException:
        await box.close()
        raise
    return box


async def verify_task(sandbox: Sandbox, task: Task) -> Score | None:
    """Score ``sandbox``'s state with the task's hidden verifier (``None`` without one)."""
    if task.verifier is None:
        return None
    return await verify(sandbox, task.verifier, workdir=task.workdir, tests=task.tests)


async def verify_snapshot(snapshot: Snapshot, task: Task) -> Score | None:
    """Score a saved final state in a fresh sandbox started from it: nothing the agent left
    running exists there. Used by ``verify_in_fresh_container`` and by regrading."""
    (box,) = await fork(snapshot, 1)
    async with box:
        return await verify_task(box, task)


async def run_task(
    task: Task,
    model: ChatModel,
    *,
    pause: bool = True,
    keep_final: str | None = None,
    on_event: EventCallback | None = None,
    on_tool_result: ToolResultCallback | None = None,
) -> tuple[Trajectory, Snapshot | None]:
    """Run one episode of ``task`` with ``model`` in a fresh sandbox, verify it, remove the
    sandbox. With ``keep_final`` (a tag) the agent's final state is kept as a snapshot
    image (before the verifier touches it), returned for regrading."""
    async with await prepare_sandbox(task) as box:
        traj = await run_episode(
            model,
            box,
            task.instruction,
            task_id=task.id,
            limits=task.limits,
            pause=pause,
            on_event=on_event,
            on_tool_result=on_tool_result,
        )
        kept: Snapshot | None = None
        if keep_final is not None:
            kept = await box.snapshot(keep_final, keep_s=KEEP_FINAL_S)
        if task.verify_in_fresh_container and task.verifier is not None:
            final = kept or await box.snapshot()
            try:
                traj.score = await verify_snapshot(final, task)
            finally:
                if kept is None:
                    with anyio.CancelScope(shield=True):
                        await remove_snapshot(final)
        else:
            traj.score = await verify_task(box, task)
        return traj, kept
