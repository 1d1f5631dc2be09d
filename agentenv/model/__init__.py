"""Models: an OpenAI-compatible streaming client with K3's extensions, and a K3-compatible
local server to test against. Nothing here knows about Docker."""

from agentenv.model.client import ContextOverflow, OpenAIChatModel, StreamCut
from agentenv.model.server import Fault, K3Server, ScriptedToolCall, ScriptedTurn
from agentenv.model.types import Completion, Price, ToolCall, Usage

__all__ = [
    "Completion",
    "ContextOverflow",
    "Fault",
    "K3Server",
    "OpenAIChatModel",
    "Price",
    "ScriptedToolCall",
    "ScriptedTurn",
    "StreamCut",
    "ToolCall",
    "Usage",
]
