"""Agent harnesses (Codex CLI, Claude Code, mini-swe-agent, ...) installed in a task's image
and run in its sandbox, talking to the model only through agentenv's gateway
(docs/harnesses.md)."""

from agentenv.harnesses.base import HARNESS_ROOT, Harness, Launch
from agentenv.harnesses.registry import UnknownHarness, harness, harness_names

__all__ = ["HARNESS_ROOT", "Harness", "Launch", "UnknownHarness", "harness", "harness_names"]
