"""The agent: tools the model calls in a sandbox (the tool-call loop and policies follow)."""

from agentenv.agent.tools import ToolResult, run_tool, tool_schemas

__all__ = ["ToolResult", "run_tool", "tool_schemas"]
