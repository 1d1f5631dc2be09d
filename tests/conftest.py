"""Shared test setup: a real Docker engine and the offline base image are required.

Run the suite with `bash scripts/test.sh`, which prepares both first. Every sandbox the
suite creates carries this session's run id, and whatever is left at the end is removed.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

import docker.errors
import pytest

os.environ.setdefault("AGENTENV_RUN_ID", f"pytest-{uuid.uuid4().hex[:8]}")

from agentenv.sandbox import connect
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.sandbox.labels import RUN


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def docker_ready() -> Iterator[None]:
    """Fail fast, saying what to do, when the engine or the base image is missing; remove
    this session's leftovers at the end."""
    engine = connect()  # raises EngineUnavailable with the way to start the engine
    try:
        engine.api.inspect_image(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        pytest.exit(f"{BASE_IMAGE} is missing: run `bash scripts/setup.sh` first", returncode=2)
    yield
    run = os.environ["AGENTENV_RUN_ID"]
    for c in engine.api.containers(all=True, filters={"label": f"{RUN}={run}"}):
        engine.api.remove_container(c["Id"], force=True)
    for image in engine.api.images(filters={"label": f"{RUN}={run}"}):
        with contextlib.suppress(docker.errors.APIError):
            engine.api.remove_image(image["Id"], force=True)
