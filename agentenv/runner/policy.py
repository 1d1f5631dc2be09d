"""A policy by name, as the CLI and job files spell it: ``kimi-k3`` (or another preset), an
OpenAI-compatible base URL, ``oracle`` (the task's solution.sh) or ``null`` (does nothing)."""

from __future__ import annotations

from agentenv.agent import policies
from agentenv.model.client import OpenAIChatModel
from agentenv.model.endpoints import resolve_endpoint
from agentenv.model.types import ChatModel
from agentenv.tasks import Task, TaskError

BUILT_IN = ("oracle", "null")


def resolve_policy(spec: str, task: Task, *, reasoning_effort: str | None = None) -> ChatModel:
    """The chat model that plays ``task`` for ``spec``; a missing API key, an unknown name or
    an oracle without ``solution.sh`` is a clear error."""
    if spec == "oracle":
        if task.solution is None:
            raise TaskError(f"task {task.id!r} has no solution.sh for the oracle")
        return policies.oracle(task.solution.read_text())
    if spec == "null":
        return policies.null()
    return OpenAIChatModel.for_endpoint(resolve_endpoint(spec), reasoning_effort=reasoning_effort)
