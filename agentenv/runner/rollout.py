"""Moved to :mod:`agentenv.rl.rollout`; this documented path re-exports its names."""

from agentenv.rl.rollout import (
    GroupTimings,
    Policy,
    Rollout,
    SuspendedRollout,
    resume,
    rollout,
    rollout_group,
    rollout_group_sync,
    rollout_sync,
    set_advantages,
    start,
    stream,
)

__all__ = [
    "GroupTimings",
    "Policy",
    "Rollout",
    "SuspendedRollout",
    "resume",
    "rollout",
    "rollout_group",
    "rollout_group_sync",
    "rollout_sync",
    "set_advantages",
    "start",
    "stream",
]
