"""Shared test setup. Most tests need a real Docker engine and the offline base image; those
that do not are marked ``no_docker`` (parsing, the model client on the local server, job
files) and run anywhere.

Run the suite with `bash scripts/test.sh`, which prepares the engine and the image first and
sets ``AGENTENV_REQUIRE_DOCKER=1``: then a missing engine stops the run as an error (so CI
never goes green by skipping). Without that variable, on a machine with no engine, the tests
that need one are skipped, saying why. Every sandbox the suite creates carries this
session's run id, and whatever is left at the end is removed.

Tests whose sandboxes are on Docker whatever ``AGENTENV_BACKEND`` says (compose tasks, a
``backend="docker"`` or ``--backend docker`` of their own, ``DockerSandbox`` by name) are
marked ``on_docker``, and so is every ``no_docker`` test (marked here): CI's Podman stage
leaves them out (``-m "not on_docker"``), since the Docker stage already ran them as they
would run there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator

import docker.errors
import pytest

os.environ.setdefault("AGENTENV_RUN_ID", f"pytest-{uuid.uuid4().hex[:8]}")

from agentenv.sandbox import EngineUnavailable
from agentenv.sandbox.docker import connect
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.sandbox.labels import RUN

REQUIRE_ENGINE = "AGENTENV_REQUIRE_DOCKER"
REQUIRE_PODMAN = "AGENTENV_REQUIRE_PODMAN"


def _podman_problem() -> str | None:
    """Why the Podman tests cannot run here, or ``None``."""
    if shutil.which("podman") is None:
        return "podman is not installed (AGENTENV_WITH_PODMAN=1 bash scripts/setup.sh)"
    from agentenv.sandbox.podman.images import base_image_state

    ok, state = base_image_state()
    return None if ok else f"{BASE_IMAGE} in Podman's storage is {state}"


def _engine_problem() -> str | None:
    """Why the Docker tests cannot run here, or ``None``."""
    try:
        connect().api.inspect_image(BASE_IMAGE)
    except EngineUnavailable as e:
        return str(e)
    except docker.errors.ImageNotFound:
        return f"{BASE_IMAGE} is missing: run `bash scripts/setup.sh` first"
    return None


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: it must see the on_docker added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every ``no_docker`` test ``on_docker`` too (no sandbox at all: nothing of it runs
    on Podman); skip the tests that need the engine where there is none, unless it is
    required; the same for Podman's."""
    for item in items:
        if item.get_closest_marker("no_docker") is not None:
            item.add_marker(pytest.mark.on_docker)
    # with AGENTENV_BACKEND=podman every test that puts a sandbox on the suite's backend needs
    # Podman too: without it, such a test waited out its retries instead of failing at once
    suite_on_podman = os.environ.get("AGENTENV_BACKEND") == "podman"
    on_podman = [
        item
        for item in items
        if item.get_closest_marker("podman") is not None
        or (suite_on_podman and item.get_closest_marker("on_docker") is None)
    ]
    podman_problem = _podman_problem() if on_podman else None
    if podman_problem is not None:
        if os.environ.get(REQUIRE_PODMAN) == "1":
            raise pytest.UsageError(f"{len(on_podman)} tests need Podman: {podman_problem}")
        skip_podman = pytest.mark.skip(reason=f"needs Podman: {podman_problem}")
        for item in on_podman:
            item.add_marker(skip_podman)
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
    if shutil.which("podman") is not None:  # the Podman tests' leftovers, the same way
        for kind in ("container", "image"):
            found = subprocess.run(
                ["podman", kind, "ls", "--all", "--quiet", "--filter", f"label={RUN}={run}"],
                capture_output=True,
                text=True,
            ).stdout.split()
            if found:
                subprocess.run(["podman", kind, "rm", "--force", *found], capture_output=True)
