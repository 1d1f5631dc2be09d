"""Models: an OpenAI-compatible streaming client with K3's extensions, and a K3-compatible
local server to test against. Nothing here knows about Docker."""

from agentenv.model.client import OpenAIChatModel
from agentenv.model.server import K3Server, ScriptedToolCall, ScriptedTurn
from agentenv.model.types import Completion, Price, ToolCall, Usage

__all__ = [
    "Completion",
    "K3Server",
    "OpenAIChatModel",
    "Price",
    "ScriptedToolCall",
    "ScriptedTurn",
    "ToolCall",
    "Usage",
]
