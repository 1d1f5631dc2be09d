"""Models: an OpenAI-compatible streaming client with K3's extensions. Nothing here knows
about Docker; the K3-compatible local server to test against is in :mod:`agentenv.testing`."""

from agentenv.errors import ContextOverflow, StreamCut
from agentenv.model.client import OpenAIChatModel
from agentenv.model.endpoints import PRESETS, Capabilities, Endpoint, resolve_endpoint
from agentenv.model.types import Completion, Price, ToolCall, Usage

__all__ = [
    "PRESETS",
    "Capabilities",
    "Completion",
    "ContextOverflow",
    "Endpoint",
    "OpenAIChatModel",
    "Price",
    "StreamCut",
    "ToolCall",
    "Usage",
    "resolve_endpoint",
]
