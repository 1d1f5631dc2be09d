"""The battery: every selected attack (and the null policy on each task they target) runs
once, concurrently, when the first test of this folder asks; each test then judges its own
episode. Running one test with ``-k`` runs only its scenario."""

from __future__ import annotations

import pytest

from tests.security.harness import SCENARIOS, Battery, run_battery


@pytest.fixture(scope="session")
async def battery(
    anyio_backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Battery:
    selected = {getattr(item, "originalname", item.name) for item in request.session.items}
    names = sorted(n for n in SCENARIOS if n in selected)
    return await run_battery(names, tmp_path_factory.mktemp("security"))
