"""One episode of one task, end to end: a sandbox from the task's image with its workspace
copied in, the loop, and the sandbox removed whatever happens."""

from __future__ import annotations

from agentenv.agent.loop import ToolResultCallback, Trajectory, run_episode
from agentenv.model.client import EventCallback
from agentenv.model.types import ChatModel
from agentenv.sandbox import DockerSandbox, SandboxSpec
from agentenv.tasks import Task


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


async def run_task(
    task: Task,
    model: ChatModel,
    *,
    pause: bool = True,
    on_event: EventCallback | None = None,
    on_tool_result: ToolResultCallback | None = None,
) -> Trajectory:
    """Run one episode of ``task`` with ``model`` in a fresh sandbox, then remove it."""
    async with await prepare_sandbox(task) as box:
        return await run_episode(
            model,
            box,
            task.instruction,
            task_id=task.id,
            limits=task.limits,
            pause=pause,
            on_event=on_event,
            on_tool_result=on_tool_result,
        )
