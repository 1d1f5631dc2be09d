"""Each task prepared once for the whole server: every reset of a task starts its sandbox
from the same prepared state (a task with a setup runs it once, and each episode's sandbox
is a fork of its snapshot), released when the server stops. Labelled with this process as
owner, a killed server's snapshots are collected by ``agentenv gc``."""

from __future__ import annotations

import anyio

from agentenv.runner import Prepared, prepare, release
from agentenv.tasks import Task

__all__ = ["PreparedTasks"]


class PreparedTasks:
    """The prepared state of each task a reset has asked for, made on the first one."""

    def __init__(self, backend: str | None = None):
        self.backend = backend
        self._ready: dict[str, Prepared] = {}
        self._locks: dict[str, anyio.Lock] = {}

    async def get(self, task: Task) -> Prepared:
        """``task``'s prepared state (prepared now if no reset has asked for it; one that
        failed is tried again by the next reset)."""
        lock = self._locks.setdefault(task.id, anyio.Lock())
        async with lock:  # two first resets at once prepare it once
            if task.id not in self._ready:
                self._ready[task.id] = await prepare(task, backend=self.backend, steps=True)
            return self._ready[task.id]

    async def aclose(self) -> None:
        """Release every prepared state (once no sandbox uses it: after the sessions)."""
        ready, self._ready = list(self._ready.values()), {}
        with anyio.CancelScope(shield=True):
            for prepared in ready:
                await release(prepared)
