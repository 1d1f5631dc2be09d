"""Models: an OpenAI-compatible streaming client with K3's extensions. Nothing here knows
about Docker; the K3-compatible local server to test against is in :mod:`agentenv.testing`."""

from agentenv.model.client import ContextOverflow, OpenAIChatModel, StreamCut
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
