"""The fault tests' engine (one private dockerd for the session, up at the start of each
test whatever the last one did to it) and their record: each scenario adds its row to the
reliability table, written to test-artifacts/faults/reliability.md at the end."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.engine import PrivateEngine
from tests.faults.scenario import ROWS

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "faults"


@pytest.fixture(scope="session")
def private_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateEngine]:
    """A dockerd of the fault tests' own (see :mod:`tests.faults.engine`)."""
    engine = PrivateEngine(tmp_path_factory.mktemp("engine"))
    try:
        engine.start()
        yield engine
    finally:
        engine.close()
        _write_table()


@pytest.fixture
def engine(private_engine: PrivateEngine) -> Iterator[PrivateEngine]:
    """The private engine, running, with a disk that is not full."""
    private_engine.free_disk()
    if not private_engine.running:
        private_engine.start()
    yield private_engine
    private_engine.free_disk()


def _write_table() -> None:
    if not ROWS:
        return
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "reliability.json").write_text(
        json.dumps([r.model_dump() for r in ROWS], indent=1)
    )
    lines = [
        "| scenario | episodes | affected | retried | lost | duplicated | leaked | exit |",
        "|---|---|---|---|---|---|---|---|",
        *(
            f"| {r.scenario} | {r.episodes} | {r.affected} | {r.retried} | {r.lost} | "
            f"{r.duplicated} | {r.leaked} | {r.exit} |"
            for r in ROWS
        ),
    ]
    (ARTIFACTS / "reliability.md").write_text("\n".join(lines) + "\n")
