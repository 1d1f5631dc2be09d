"""Running episodes of tasks: one episode end to end, and the policies by name."""

from agentenv.runner.episode import prepare_sandbox, run_task
from agentenv.runner.policy import resolve_policy

__all__ = ["prepare_sandbox", "resolve_policy", "run_task"]
