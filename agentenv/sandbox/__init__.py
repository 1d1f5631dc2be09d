"""Sandboxes: isolated places that run an episode's commands fast, pause while the model
thinks, and can be snapshotted and forked. Nothing here knows about models.

Code above this package names only what is exported here: the :class:`Sandbox` protocol,
:class:`SandboxSpec`, the backend seam's functions (:func:`create`, :func:`attach`,
:func:`fork`, :func:`remove_snapshot`, :func:`get_backend`), and recycling between episodes
(:func:`recycling`, :func:`reuse_or_create`, :func:`hand_back`), and the images a backend
keeps (:func:`image_store`). The backends themselves
live in ``agentenv.sandbox.docker`` and ``agentenv.sandbox.podman`` and are loaded when
first asked for by name."""

from agentenv.sandbox.backend import (
    Leftover,
    SandboxBackend,
    attach,
    backend_names,
    create,
    default_backend,
    fork,
    get_backend,
    remove_snapshot,
    sandbox,
)
from agentenv.sandbox.errors import (
    ArchiveTooLarge,
    EngineUnavailable,
    ExecUserError,
    FileTooLarge,
    ImageUnavailable,
    SandboxClosed,
    SandboxError,
    SandboxPaused,
    SandboxUnavailable,
)
from agentenv.sandbox.image_store import ImageFacts, ImageStore, image_store
from agentenv.sandbox.pool import SandboxPool
from agentenv.sandbox.protocol import ExecResult, Sandbox, Snapshot
from agentenv.sandbox.recycling import (
    Recycler,
    hand_back,
    handed_back,
    recycling,
    reuse_or_create,
)
from agentenv.sandbox.spec import SandboxSpec

__all__ = [
    "ArchiveTooLarge",
    "EngineUnavailable",
    "ExecResult",
    "ExecUserError",
    "FileTooLarge",
    "ImageFacts",
    "ImageStore",
    "ImageUnavailable",
    "Leftover",
    "Recycler",
    "Sandbox",
    "SandboxBackend",
    "SandboxClosed",
    "SandboxError",
    "SandboxPaused",
    "SandboxPool",
    "SandboxSpec",
    "SandboxUnavailable",
    "Snapshot",
    "attach",
    "backend_names",
    "create",
    "default_backend",
    "fork",
    "get_backend",
    "hand_back",
    "handed_back",
    "image_store",
    "recycling",
    "remove_snapshot",
    "reuse_or_create",
    "sandbox",
]
