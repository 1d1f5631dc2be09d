"""The model gateway a harness in the sandbox calls as its API endpoint (Chat Completions,
Responses, Anthropic Messages), translated to the episode's routed model, with the sandbox
frozen for every call and each turn recorded as the built-in loop records one."""

from agentenv.gateway.dialect import Call, Dialect, DialectError, dialect, dialect_names
from agentenv.gateway.session import Gateway, open_gateway

__all__ = ["Call", "Dialect", "DialectError", "Gateway", "dialect", "dialect_names", "open_gateway"]
