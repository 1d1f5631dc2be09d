"""The Docker backend (see :mod:`agentenv.sandbox.backend`): containers on a Docker engine.
Importing it loads the Docker SDK; nothing above the backend seam does."""

from agentenv.sandbox.docker.backend import DockerBackend, backend
from agentenv.sandbox.docker.engine import Engine, connect, get_engine
from agentenv.sandbox.docker.sandbox import DockerSandbox

__all__ = ["DockerBackend", "DockerSandbox", "Engine", "backend", "connect", "get_engine"]
