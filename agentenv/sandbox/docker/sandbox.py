"""``DockerSandbox``: the :class:`Sandbox` protocol on a Docker engine: the container state
machine (:class:`~agentenv.sandbox.container.sandbox.ContainerSandbox`) over Docker's
primitives (:class:`~agentenv.sandbox.docker.driver.DockerDriver`). Commands go to the
in-sandbox executor, or for images without ``python3`` to one ``docker exec`` each."""

from __future__ import annotations

from agentenv.sandbox.container.driver import Driver
from agentenv.sandbox.container.sandbox import ContainerSandbox
from agentenv.sandbox.docker.driver import DockerDriver
from agentenv.sandbox.docker.engine import Engine, get_engine
from agentenv.sandbox.spec import SandboxSpec


class DockerSandbox(ContainerSandbox):
    """A sandbox in a Docker container. Create with :meth:`create` (or :func:`sandbox` for an
    ``async with`` block); it is also an async context manager that removes it on exit,
    including on cancellation and Ctrl-C."""

    def __init__(self, engine: Engine, container_id: str, spec: SandboxSpec, image: str):
        super().__init__(DockerDriver(engine), container_id, spec, image)

    @classmethod
    def _made(
        cls, driver: Driver, container_id: str, spec: SandboxSpec, image: str
    ) -> DockerSandbox:
        assert isinstance(driver, DockerDriver)
        return cls(driver.engine, container_id, spec, image)

    @classmethod
    async def create(
        cls, spec: SandboxSpec | None = None, *, engine: Engine | None = None
    ) -> DockerSandbox:
        """Create and start a sandbox; the caller must ``close()`` it."""
        driver = DockerDriver(engine or await get_engine())
        return await cls._create(driver, spec or SandboxSpec())

    @classmethod
    async def attach(
        cls, container_id: str, spec: SandboxSpec, *, engine: Engine | None = None
    ) -> DockerSandbox:
        """Take over a sandbox another process (or an earlier part of this one) created,
        running or paused, e.g. to resume a suspended rollout. Refuses containers without
        agentenv's labels; a stopped or missing one is :class:`SandboxUnavailable`."""
        driver = DockerDriver(engine or await get_engine())
        return await cls._attach(driver, container_id, spec)
