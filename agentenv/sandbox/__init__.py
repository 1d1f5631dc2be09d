"""Sandboxes: isolated Docker containers that run an episode's commands fast, pause while
the model thinks, and can be snapshotted and forked. Nothing here knows about models."""

from agentenv.sandbox.docker import DockerSandbox, fork, remove_snapshot, sandbox
from agentenv.sandbox.engine import Engine, connect, get_engine
from agentenv.sandbox.errors import (
    ArchiveTooLarge,
    EngineUnavailable,
    ImageUnavailable,
    SandboxClosed,
    SandboxError,
    SandboxPaused,
    SandboxUnavailable,
)
from agentenv.sandbox.pool import SandboxPool
from agentenv.sandbox.protocol import ExecResult, Sandbox, Snapshot
from agentenv.sandbox.spec import SandboxSpec

__all__ = [
    "ArchiveTooLarge",
    "DockerSandbox",
    "Engine",
    "EngineUnavailable",
    "ExecResult",
    "ImageUnavailable",
    "Sandbox",
    "SandboxClosed",
    "SandboxError",
    "SandboxPaused",
    "SandboxPool",
    "SandboxSpec",
    "SandboxUnavailable",
    "Snapshot",
    "connect",
    "fork",
    "get_engine",
    "remove_snapshot",
    "sandbox",
]
