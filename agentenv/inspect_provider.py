"""Moved to :mod:`agentenv.integrations.inspect`; this documented path re-exports its names
(importing it registers the provider, as before)."""

from agentenv.integrations.inspect import (
    DEFAULT_CAPS,
    LABEL_TASK,
    AgentenvSandboxEnvironment,
    default_spec,
    spec_for,
)

__all__ = ["DEFAULT_CAPS", "LABEL_TASK", "AgentenvSandboxEnvironment", "default_spec", "spec_for"]
