"""Compose environments: a task's ``docker-compose.yaml`` run as one sandbox whose commands
go to ``main`` and whose pause, resume and close act on every service (Docker only).

- :mod:`.model` reads the file into a plain model, refusing by name what it does not run;
- :mod:`.group` starts the services beside ``main`` on a private network of their own;
- :mod:`.sandbox` is the :class:`~agentenv.sandbox.protocol.Sandbox` over them.
"""

from agentenv.sandbox.compose.model import MAIN, Compose, ComposeError, Service, parse
from agentenv.sandbox.compose.sandbox import (
    ComposeSandbox,
    create_compose,
    project_name,
    read_compose,
)

__all__ = [
    "MAIN",
    "Compose",
    "ComposeError",
    "ComposeSandbox",
    "Service",
    "create_compose",
    "parse",
    "project_name",
    "read_compose",
]
