"""Compose environments: a task's ``docker-compose.yaml`` run as one sandbox whose commands
go to ``main`` and whose pause, resume and close act on every service (Docker only).

- :mod:`.model` reads the file into a plain model, refusing by name what it does not run;
- :mod:`.group` starts the services beside ``main`` on a private network of their own;
- :mod:`.sandbox` is the :class:`~agentenv.sandbox.protocol.Sandbox` over them
  (:class:`~.sandbox.ComposeSandbox`, made by :func:`~.sandbox.create_compose`).

Only the model is imported here: reading a task must not load the Docker SDK.
"""

from agentenv.sandbox.compose.model import MAIN, Compose, ComposeError, Service, parse, read_compose

__all__ = ["MAIN", "Compose", "ComposeError", "Service", "parse", "read_compose"]
