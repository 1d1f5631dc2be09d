"""The Podman backend (see :mod:`agentenv.sandbox.backend`): containers made with the
``podman`` command, rootful and daemonless. ``docs/backends.md`` says how it differs."""

from agentenv.sandbox.podman.backend import PodmanBackend, backend
from agentenv.sandbox.podman.sandbox import PodmanSandbox

__all__ = ["PodmanBackend", "PodmanSandbox", "backend"]
