"""A Harbor task's ``environment/docker-compose.yaml``: its services run beside the agent's
``main`` (:mod:`agentenv.sandbox.compose`), as Harbor's own compose files lay them out:
``main`` is built from ``environment/`` and runs the keep-alive; the task's file adds
services and may give ``main`` environment variables and dependencies. The file is read at
load, so that what agentenv does not run is refused there, naming the key.

Where ``test.sh`` runs: as a single-container task's (the ``harbor`` check's ``mode``,
``final`` by default): a new ``main`` from the agent's final one, beside the side services
as the agent left them (:mod:`agentenv.runner.harbor_verdict`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from agentenv.problems import Problem
from agentenv.sandbox.compose import ComposeError, read_compose

if TYPE_CHECKING:
    from agentenv.sandbox.protocol import Sandbox
    from agentenv.sandbox.spec import SandboxSpec
    from agentenv.tasks import Task

NAMES = ("docker-compose.yaml", "docker-compose.yml")
LOAD_PROJECT = "agentenv-load"  # COMPOSE_PROJECT_NAME while the file is only checked


def compose_file(folder: Path) -> Path | None:
    """The task's compose file, if it has one."""
    for name in NAMES:
        if (folder / "environment" / name).is_file():
            return folder / "environment" / name
    return None


def variables(folder: Path, image: str) -> dict[str, str]:
    """What Harbor's compose files may name (``${CONTEXT_DIR}``, ``${MAIN_IMAGE_NAME}``);
    ``COMPOSE_PROJECT_NAME`` is the group's, given when it starts. Never the host's
    environment: a host secret must not reach a task's services."""
    return {"CONTEXT_DIR": str((folder / "environment").resolve()), "MAIN_IMAGE_NAME": image}


def compose_fields(folder: Path, problems: list[Problem]) -> dict[str, str]:
    """The Task field of a compose task (``compose``: its file), each key of the file
    agentenv does not run a problem; ``{}`` without a compose file."""
    path = compose_file(folder)
    if path is None:
        return {}
    given = {**variables(folder, "agentenv/task"), "COMPOSE_PROJECT_NAME": LOAD_PROJECT}
    try:
        read_compose(path, given)
    except ComposeError as e:
        problems.extend(Problem(path, why, field=field or None) for field, why in e.problems)
    except OSError as e:
        problems.append(Problem(path, f"cannot be read: {e}"))
    return {"compose": str(path.relative_to(folder))}


async def start_compose(task: Task, spec: SandboxSpec) -> Sandbox:
    """The agent's sandbox of a compose task: its services, then ``main`` of ``spec``."""
    from agentenv.sandbox.compose.sandbox import create_compose  # the Docker SDK: when run

    assert task.folder is not None and task.compose is not None
    given = variables(task.folder, spec.image)
    return await create_compose(spec, task.folder / task.compose, given)
