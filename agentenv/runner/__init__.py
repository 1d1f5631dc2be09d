"""Running tasks: one episode end to end, eval jobs, and the policies by name."""

from agentenv.runner.episode import prepare_sandbox, run_task, verify_task
from agentenv.runner.policy import Policies

__all__ = ["Policies", "prepare_sandbox", "run_task", "verify_task"]
