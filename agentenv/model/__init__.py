"""Models: an OpenAI-compatible streaming client with K3's extensions, and a K3-compatible
local server to test against. Nothing here knows about Docker."""

from agentenv.model.client import ContextOverflow, OpenAIChatModel, StreamCut
from agentenv.model.endpoints import PRESETS, Capabilities, Endpoint, resolve_endpoint
from agentenv.model.server import Fault, K3Server, ScriptedToolCall, ScriptedTurn
from agentenv.model.types import Completion, Price, ToolCall, Usage

__all__ = [
    "PRESETS",
    "Capabilities",
    "Completion",
    "ContextOverflow",
    "Endpoint",
    "Fault",
    "K3Server",
    "OpenAIChatModel",
    "Price",
    "ScriptedToolCall",
    "ScriptedTurn",
    "StreamCut",
    "ToolCall",
    "Usage",
    "resolve_endpoint",
]
