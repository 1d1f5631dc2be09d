"""What trainers take from a trajectory (the functions behind ``Trajectory.to_concat`` and
``Trajectory.to_messages``, which live with the trajectory in :mod:`agentenv.agent.trajectory`)."""

from __future__ import annotations

from typing import Any

from agentenv.agent.trajectory import NoTokens, TokenSequence, Trajectory


def to_concat(traj: Trajectory) -> TokenSequence:
    """See :meth:`Trajectory.to_concat`."""
    return traj.to_concat()


def to_messages(traj: Trajectory) -> list[dict[str, Any]]:
    """See :meth:`Trajectory.to_messages`."""
    return traj.to_messages()


__all__ = ["NoTokens", "TokenSequence", "to_concat", "to_messages"]
