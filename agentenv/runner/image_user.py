"""A task's ``user`` given as a name (Harbor's ``[agent] user = "agent"``), resolved to the
``uid:gid`` it has in the task's image, as Docker's ``--user NAME`` would: looked up by root
in a container of the image (its entrypoint not run) before the episode, so that the agent's
sandbox, its workdir's files and the verifier's ``agent_user`` all get numbers. A name the
image lacks is refused before anything runs, naming task.toml's ``agent.user``."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from agentenv.errors import BuildTimedOut, TaskError
from agentenv.sandbox import SandboxSpec, create
from agentenv.sandbox.images import dockerfile_image
from agentenv.tasks import Task

_NUMERIC = re.compile(r"root|\d+(:\d+)?")


def is_name(user: str) -> bool:
    """Whether ``user`` (a task's) is a user name to look up, not ``root`` or a uid."""
    return _NUMERIC.fullmatch(user) is None


async def with_image_user(task: Task, backend: str) -> Task:
    """``task`` with its ``user`` name replaced by the image's ``uid:gid`` for it (``task``
    itself when its user is root or numeric); :class:`TaskError` when the image lacks it."""
    if not is_name(task.user):
        return task
    dockerfile = task.folder / task.dockerfile if task.folder and task.dockerfile else None
    image = task.image if dockerfile is None else dockerfile_image(task.image, dockerfile, task.id)
    spec = SandboxSpec(
        backend=backend,
        image=image,
        dockerfile=dockerfile,
        build_timeout_s=task.build_timeout_s,
        workdir=task.workdir,
        user="0:0",
    )
    name = shlex.quote(task.user)
    box = await create(spec)
    try:
        said = await box.exec(["/bin/sh", "-c", f"id -u {name} && id -g {name}"], timeout=60)
    finally:
        with anyio.CancelScope(shield=True):
            await box.close()
    numbers = said.stdout.split()
    if not said.ok or len(numbers) != 2 or not all(n.isdigit() for n in numbers):
        where = f"{task.folder}/task.toml: " if task.folder else ""
        raise TaskError(
            f"{where}agent.user: {task.user!r} is not a user of the image {image!r} "
            f"({(said.stdout + said.stderr).strip()[-300:] or 'id found no such user'}); "
            "give a user the image has, or a uid"
        )
    return task.model_copy(update={"user": ":".join(numbers)})


@contextmanager
def build_timeout_named(task: Task) -> Iterator[None]:
    """A :class:`BuildTimedOut` within it said again naming the task, its file and field
    (Harbor's ``environment.build_timeout_sec``), so the user knows what to raise."""
    try:
        yield
    except BuildTimedOut as e:
        from agentenv.formats.harbor import can_load  # the loaders import the runner's kin

        harbor = task.folder is not None and can_load(task.folder)
        field = "environment.build_timeout_sec" if harbor else "build_timeout_s"
        where = f"{task.folder / 'task.toml'}: " if task.folder is not None else ""
        raise BuildTimedOut(
            f"task {task.id!r}: {where}{field} = {task.build_timeout_s:g}: {e}", e.timeout_s
        ) from e


__all__ = ["build_timeout_named", "is_name", "with_image_user"]
