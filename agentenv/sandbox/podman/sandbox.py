"""``PodmanSandbox``: the :class:`~agentenv.sandbox.protocol.Sandbox` protocol on Podman
(rootful, daemonless): the container state machine
(:class:`~agentenv.sandbox.container.sandbox.ContainerSandbox`) over the ``podman``
command's primitives (:class:`~agentenv.sandbox.podman.driver.PodmanDriver`).

The same security defaults as Docker's (no network, no capabilities, no new privileges, an
init as PID 1, bounded pids, memory and CPU; a read-only root with bounded tmpfs workdir and
``/tmp``), and the same fast path: the in-sandbox executor, spoken to over the pipes of one
``podman exec -i``. ``docs/backends.md`` lists the differences.
"""

from __future__ import annotations

import anyio

from agentenv.sandbox.container.driver import Driver
from agentenv.sandbox.container.sandbox import ContainerSandbox
from agentenv.sandbox.errors import SandboxError
from agentenv.sandbox.podman.driver import PodmanDriver
from agentenv.sandbox.spec import SandboxSpec


class PodmanSandbox(ContainerSandbox):
    """A sandbox in a Podman container. Made by :class:`PodmanBackend`; an async context
    manager that removes it on exit."""

    def __init__(
        self, container_id: str, spec: SandboxSpec, image: str, driver: Driver | None = None
    ):
        super().__init__(driver or PodmanDriver(), container_id, spec, image)

    @classmethod
    def _made(
        cls, driver: Driver, container_id: str, spec: SandboxSpec, image: str
    ) -> PodmanSandbox:
        return cls(container_id, spec, image, driver)

    @classmethod
    async def create(cls, spec: SandboxSpec, limiter: anyio.CapacityLimiter) -> PodmanSandbox:
        """Create and start a sandbox; the caller must ``close()`` it."""
        if spec.executor == "docker-exec":
            raise SandboxError(
                "the podman backend runs commands through the in-sandbox executor only "
                "(executor='auto' or 'fast'; the image needs python3)"
            )
        return await cls._create(PodmanDriver(limiter), spec)

    @classmethod
    async def attach(cls, container_id: str, spec: SandboxSpec) -> PodmanSandbox:
        """Take over a sandbox made before (running or paused); see the backend."""
        return await cls._attach(PodmanDriver(), container_id, spec)
