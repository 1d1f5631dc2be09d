"""agentenv: run AI agents in sandboxes (Docker or Podman containers) that pause while the
model thinks, and score them with deterministic verifiers.

For RL: ``await rollout(task, policy)``, ``rollout_group`` (forked from one prepared
sandbox), ``stream``, and partial rollouts with ``start`` / ``Rollout.suspend`` / ``resume``;
``async with recycling():`` around a trainer's loop lets each rollout's sandboxes serve the
next (``stream``, ``rollout_group`` and eval jobs do this themselves).
"""

from agentenv.agent.loop import Limits, Trajectory
from agentenv.rl.rollout import (
    Rollout,
    SuspendedRollout,
    resume,
    rollout,
    rollout_group,
    rollout_group_sync,
    rollout_sync,
    start,
    stream,
)
from agentenv.sandbox import (
    ExecResult,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxPool,
    SandboxSpec,
    SandboxUnavailable,
    Snapshot,
    create,
    fork,
    get_backend,
    recycling,
    sandbox,
)
from agentenv.tasks import Task, load_task

__version__ = "0.1.0"


__all__ = [
    "ExecResult",
    "Limits",
    "Rollout",
    "Sandbox",
    "SandboxBackend",
    "SandboxError",
    "SandboxPool",
    "SandboxSpec",
    "SandboxUnavailable",
    "Snapshot",
    "SuspendedRollout",
    "Task",
    "Trajectory",
    "__version__",
    "create",
    "fork",
    "get_backend",
    "load_task",
    "recycling",
    "resume",
    "rollout",
    "rollout_group",
    "rollout_group_sync",
    "rollout_sync",
    "sandbox",
    "start",
    "stream",
]
