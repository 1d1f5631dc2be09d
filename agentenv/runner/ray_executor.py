"""Moved to :mod:`agentenv.eval.ray_executor`; this documented path re-exports its names."""

from agentenv.eval.ray_executor import CANCEL_WAIT_S, runner

__all__ = ["CANCEL_WAIT_S", "runner"]
