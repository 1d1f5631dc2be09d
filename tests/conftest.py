"""Shared test setup. Most tests need a real Docker engine and the offline base image; those
that do not are marked ``no_docker`` (parsing, the model client on the local server, job
files) and run anywhere.

Run the suite with `bash scripts/test.sh`, which prepares the engine and the image first and
sets ``AGENTENV_REQUIRE_DOCKER=1``: then a missing engine stops the run as an error (so CI
never goes green by skipping). Without that variable, on a machine with no engine, the tests
that need one are skipped, saying why. Every sandbox the suite creates carries this
session's run id, and whatever is left at the end is removed.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

import docker.errors
import pytest

os.environ.setdefault("AGENTENV_RUN_ID", f"pytest-{uuid.uuid4().hex[:8]}")

from agentenv.sandbox import EngineUnavailable, connect
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.sandbox.labels import RUN

REQUIRE_ENGINE = "AGENTENV_REQUIRE_DOCKER"


def _engine_problem() -> str | None:
    """Why the Docker tests cannot run here, or ``None``."""
    try:
        connect().api.inspect_image(BASE_IMAGE)
    except EngineUnavailable as e:
        return str(e)
    except docker.errors.ImageNotFound:
        return f"{BASE_IMAGE} is missing: run `bash scripts/setup.sh` first"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the tests that need the engine where there is none, unless it is required."""
    needing = [item for item in items if item.get_closest_marker("no_docker") is None]
    problem = _engine_problem() if needing else None
    if problem is None:
        return
    if os.environ.get(REQUIRE_ENGINE) == "1":
        raise pytest.UsageError(f"{len(needing)} tests need a Docker engine: {problem}")
    skip = pytest.mark.skip(reason=f"needs a Docker engine ({REQUIRE_ENGINE}=1 fails instead)")
    for item in needing:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def leftovers_removed() -> Iterator[None]:
    """Remove this session's containers and images at the end (where there is an engine)."""
    yield
    try:
        engine = connect()
    except EngineUnavailable:
        return
    run = os.environ["AGENTENV_RUN_ID"]
    for c in engine.api.containers(all=True, filters={"label": f"{RUN}={run}"}):
        engine.api.remove_container(c["Id"], force=True)
    for image in engine.api.images(filters={"label": f"{RUN}={run}"}):
        with contextlib.suppress(docker.errors.APIError):
            engine.api.remove_image(image["Id"], force=True)
