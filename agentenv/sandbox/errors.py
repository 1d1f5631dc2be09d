"""Errors raised by sandboxes: the sandbox branch of :mod:`agentenv.errors`, where the whole
tree is drawn. Every one says what failed and, where there is one, what to do."""

from agentenv.errors import (
    ArchiveTooLarge,
    BuildTimedOut,
    EngineUnavailable,
    ExecUserError,
    FileTooLarge,
    ImageUnavailable,
    SandboxClosed,
    SandboxError,
    SandboxPaused,
    SandboxUnavailable,
)

__all__ = [
    "ArchiveTooLarge",
    "BuildTimedOut",
    "EngineUnavailable",
    "ExecUserError",
    "FileTooLarge",
    "ImageUnavailable",
    "SandboxClosed",
    "SandboxError",
    "SandboxPaused",
    "SandboxUnavailable",
]
