"""DockerSandbox passes the conformance suite on both exec paths: the in-sandbox executor
and one `docker exec` per command."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from agentenv.sandbox import SandboxSpec
from agentenv.sandbox.docker import DockerSandbox
from agentenv.testing.conformance import *  # noqa: F403

PATHS = ["fast", "docker-exec"]


@pytest.fixture(scope="module", params=PATHS)
def exec_path(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
async def sandbox(exec_path: str) -> AsyncIterator[DockerSandbox]:
    async with await DockerSandbox.create(SandboxSpec(executor=exec_path)) as box:  # type: ignore[arg-type]
        assert box.exec_mode == exec_path
        yield box


@pytest.fixture
def make_sandbox(exec_path: str) -> Callable[[], Awaitable[DockerSandbox]]:
    return lambda: DockerSandbox.create(SandboxSpec(executor=exec_path))  # type: ignore[arg-type]
