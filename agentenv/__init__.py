"""agentenv: run AI agents in Docker sandboxes that pause while the model thinks, and score
them with deterministic verifiers."""

from agentenv.log import configure_default
from agentenv.sandbox import (
    DockerSandbox,
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxPool,
    SandboxSpec,
    SandboxUnavailable,
    Snapshot,
    fork,
    sandbox,
)

__version__ = "0.1.0"

configure_default()

__all__ = [
    "DockerSandbox",
    "ExecResult",
    "Sandbox",
    "SandboxError",
    "SandboxPool",
    "SandboxSpec",
    "SandboxUnavailable",
    "Snapshot",
    "__version__",
    "fork",
    "sandbox",
]
