"""The server's tasks, loaded once, and which one a reset gets."""

from __future__ import annotations

import itertools
import random

from agentenv.tasks import Task

__all__ = ["TaskSet", "UnknownTask"]


class UnknownTask(LookupError):
    """A reset named a task the server does not serve."""


class TaskSet:
    """Tasks by id. A reset names one (``task_id``), or gets one by its ``seed`` (the same
    seed, the same task), or the next in turn (round robin over the whole server)."""

    def __init__(self, tasks: list[Task]):
        if not tasks:
            raise ValueError("a task set needs at least one task")
        self.tasks = list(tasks)
        self._by_id = {t.id: t for t in tasks}
        self._turn = itertools.cycle(range(len(tasks)))

    def __len__(self) -> int:
        return len(self.tasks)

    def pick(self, task_id: str | None = None, seed: int | None = None) -> Task:
        """The task a reset asked for (:class:`UnknownTask` names a few that exist)."""
        if task_id is not None:
            try:
                return self._by_id[task_id]
            except KeyError:
                some = ", ".join(sorted(self._by_id)[:10])
                more = f" (and {len(self) - 10} more)" if len(self) > 10 else ""
                raise UnknownTask(f"no task {task_id!r} here; tasks: {some}{more}") from None
        if seed is not None:
            return self.tasks[random.Random(seed).randrange(len(self.tasks))]
        return self.tasks[next(self._turn)]
