"""What every trainer integration of agentenv needs from a folder of tasks, whichever
trainer API it speaks (verifiers' classic ``MultiTurnEnv`` in
:mod:`agentenv.integrations.verifiers`, ``verifiers.v1`` in
:mod:`agentenv.integrations.verifiers_v1`): the runnable, graded tasks at some paths and
the prompt a dataset row shows for one. It imports no trainer package."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from agentenv.errors import TaskError
from agentenv.tasks import Task

__all__ = ["load_tasks", "prompt_of"]

log = logging.getLogger(__name__)


def load_tasks(paths: Sequence[Path | str]) -> list[Task]:
    """The runnable tasks at ``paths`` (task folders, folders of them, instance files), as
    ``agentenv eval`` loads them. A task folder that does not load, or has no verifier to
    grade it, is left out with a warning; :class:`~agentenv.errors.TaskError` when none is
    left (or a path holds no task)."""
    from agentenv.formats import load_runnable
    from agentenv.problems import Problems

    try:
        tasks, refused = load_runnable([Path(p) for p in paths])
    except Problems as e:
        raise TaskError(str(e)) from e
    for r in refused:
        log.warning("task %s left out: %s", r.id, r.reason)
    for task in tasks:
        if task.verifier is None:
            log.warning("task %s left out: no [verifier] in task.toml, nothing grades it", task.id)
    graded = [t for t in tasks if t.verifier is not None]
    if not graded:
        raise TaskError(f"no task with a verifier at {', '.join(map(str, paths))}")
    return graded


def prompt_of(task: Task) -> str:
    """The text a dataset row shows for ``task`` (its instruction, else its description).
    A rollout's real opening messages are its episode's, built when it opens."""
    return task.instruction or task.description
