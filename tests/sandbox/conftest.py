"""Fixtures shared by the sandbox tests."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

import docker.errors
import pytest

from agentenv.sandbox.docker import get_engine
from agentenv.sandbox.docker.images import resolve_image
from agentenv.sandbox.images import BASE_IMAGE


@pytest.fixture(scope="session")
async def no_python_image(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """An image without python3, built offline from a Dockerfile on the base image."""
    folder = tmp_path_factory.mktemp("no-python")
    (folder / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\nRUN rm -f /usr/bin/python3* && ! command -v python3\n"
    )
    tag = f"agentenv-test/no-python:{os.environ['AGENTENV_RUN_ID']}"
    engine = await get_engine()
    await resolve_image(engine, tag, folder / "Dockerfile")
    yield tag
    with contextlib.suppress(docker.errors.APIError):
        await engine.run(engine.api.remove_image, tag, force=True)
