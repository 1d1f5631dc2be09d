"""The connection to the Docker engine: one client, and the limiters every call goes through.

Docker SDK calls block, so they run in worker threads; ``calls`` bounds how many run at once
and ``creations`` separately paces container creation, because many simultaneous starts slow
every one of them down (moby#42096). The event loop itself never blocks on Docker.
"""

from __future__ import annotations

import asyncio
import functools
import os
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import docker
import docker.errors
import requests.exceptions

from agentenv.log import get_logger
from agentenv.sandbox.errors import EngineUnavailable

log = get_logger(__name__)
T = TypeVar("T")

MIN_API_VERSION = "1.41"  # Docker 20.10, what Debian bookworm ships
START_HINT = (
    "Start it with `bash scripts/setup.sh` (installs Debian's docker.io if needed and starts "
    "dockerd as root) or `agentenv doctor --fix`; on a desktop, start Docker Desktop. "
    "Set DOCKER_HOST if the engine listens elsewhere."
)


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


class Engine:
    """A Docker client plus the limiters that pace calls to it."""

    def __init__(self, client: docker.DockerClient, *, calls: int = 32, creations: int = 4):
        self.client = client
        self.api = client.api
        self.calls = anyio.CapacityLimiter(calls)
        self.creations = anyio.CapacityLimiter(creations)

    @property
    def api_version(self) -> str:
        """The API version negotiated with the engine."""
        return str(self.api.api_version)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking Docker call in a worker thread, within the call limiter."""
        call = functools.partial(fn, *args, **kwargs)
        try:
            return await anyio.to_thread.run_sync(call, limiter=self.calls)
        except requests.exceptions.Timeout as e:
            raise EngineUnavailable(f"the Docker engine did not answer in time: {e}") from e
        except (requests.exceptions.ConnectionError, docker.errors.DockerException) as e:
            if _is_connection_error(e):
                raise EngineUnavailable(f"lost the Docker engine: {e}. {START_HINT}") from e
            raise


def _is_connection_error(e: BaseException) -> bool:
    if isinstance(e, requests.exceptions.ConnectionError):
        return True
    return (
        isinstance(e, docker.errors.DockerException)
        and not isinstance(e, docker.errors.APIError)
        and "Error while fetching server API version" in str(e)
    )


def connect(*, calls: int = 32, creations: int = 4, timeout: float = 120) -> Engine:
    """Connect to the engine named by the environment (``DOCKER_HOST`` or the local socket),
    or raise :class:`EngineUnavailable` saying how to start one. Blocking."""
    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        client = docker.DockerClient.from_env(
            version="auto", timeout=int(timeout), max_pool_size=calls + 8
        )
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
        raise EngineUnavailable(
            f"cannot reach the Docker engine at {where}: {e}. {START_HINT}"
        ) from e
    if not client.api.base_url.startswith(("http+docker://localhost", "http://")):
        # Commands travel over raw attached sockets, which we read without TLS framing.
        raise EngineUnavailable(
            f"the Docker engine at {where} is reached over TLS or ssh, which agentenv does not "
            "support yet; use a local socket or an SSH tunnel to a tcp:// address"
        )
    version = str(client.api.api_version)
    if _version_tuple(version) < _version_tuple(MIN_API_VERSION):
        raise EngineUnavailable(
            f"the Docker engine at {where} speaks API {version}; agentenv needs "
            f"{MIN_API_VERSION} (Docker 20.10) or newer"
        )
    return Engine(client, calls=calls, creations=creations)


_engines: weakref.WeakKeyDictionary[object, Engine] = weakref.WeakKeyDictionary()


class _NoLoop:
    pass


_no_loop = _NoLoop()


async def get_engine() -> Engine:
    """The shared engine of the running event loop, connected on first use. Limiters belong
    to one event loop, hence one engine per loop."""
    try:
        key: object = asyncio.get_running_loop()
    except RuntimeError:  # another anyio backend
        key = _no_loop
    engine = _engines.get(key)
    if engine is None:
        engine = await anyio.to_thread.run_sync(connect)
        engine = _engines.setdefault(key, engine)
    return engine
