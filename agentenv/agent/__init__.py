"""The agent: tools the model calls in a sandbox (the tool-call loop and policies follow)."""

from agentenv.agent.loop import Limits, Trajectory, Turn, run_episode
from agentenv.agent.tools import (
    DEFAULT_TOOLS,
    Tool,
    ToolOutput,
    ToolResult,
    run_tool,
    tool_schemas,
    tools_named,
)

__all__ = [
    "DEFAULT_TOOLS",
    "Limits",
    "Tool",
    "ToolOutput",
    "ToolResult",
    "Trajectory",
    "Turn",
    "run_episode",
    "run_tool",
    "tool_schemas",
    "tools_named",
]
