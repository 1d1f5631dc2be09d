"""Moved to :mod:`agentenv.rl.ray_executor`; this documented path re-exports its names."""

from agentenv.rl.ray_executor import CANCEL_WAIT_S, runner

__all__ = ["CANCEL_WAIT_S", "runner"]
