"""The agent: tools the model calls in a sandbox (the tool-call loop and policies follow)."""

from agentenv.agent.loop import Limits, Trajectory, Turn, run_episode
from agentenv.agent.tools import ToolResult, run_tool, tool_schemas

__all__ = ["Limits", "ToolResult", "Trajectory", "Turn", "run_episode", "run_tool", "tool_schemas"]
