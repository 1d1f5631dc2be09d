"""``agentenv --backend podman <command>``, run in this process as the script runs it: every
sandbox the command makes is Podman's, and the process's environment is left as it was
(the backend is passed down as an argument, not through ``AGENTENV_BACKEND``).

A sandbox tells its engine by a file: Podman puts ``/run/.containerenv`` in its
containers, Docker ``/.dockerenv``. Each job's verdict depends on it, in the agent's
sandbox and in the checker's."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentenv.agent.loop import Trajectory
from agentenv.cli import app
from agentenv.runner.results import load_results
from tests.refactor.test_refactor_verdicts import make_repo

pytestmark = pytest.mark.podman
ENGINE = (
    "if [ -e /run/.containerenv ]; then echo podman; elif [ -e /.dockerenv ]; then echo docker; fi"
)
# green only in a Podman checker, on a workspace that an agent on Podman wrote to (if any)
CHECK = "test -e /run/.containerenv && { test ! -e engine.txt || grep -qx podman engine.txt; }\n"


@pytest.fixture(autouse=True)
def untouched() -> Iterator[None]:
    """No ``AGENTENV_BACKEND`` before; after the test, the same, and agentenv's logging as
    it was (the CLI configures it for the process it runs in)."""
    saved = os.environ.pop("AGENTENV_BACKEND", None)
    logger = logging.getLogger("agentenv")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    try:
        yield
    finally:
        for handler in logger.handlers:
            if handler not in handlers:
                logger.removeHandler(handler)
                handler.close()
        logger.setLevel(level)
        logger.propagate = propagate
        if saved is not None:
            os.environ["AGENTENV_BACKEND"] = saved


def make_task(root: Path) -> Path:
    """A task whose solution writes the engine it runs on, graded by ``CHECK``."""
    task = root / "which-engine"
    (task / "workspace").mkdir(parents=True)
    (task / "workspace" / "README").write_text("nothing here yet\n")
    (task / "instruction.md").write_text("Write the engine this runs on to engine.txt.\n")
    (task / "solution.sh").write_text(f"({ENGINE}) > engine.txt\n")
    (task / "tests").mkdir()
    (task / "tests" / "check.sh").write_text(CHECK)
    (task / "task.toml").write_text(
        '[verifier]\nkind = "command"\ncommand = "bash /agentenv/tests/check.sh"\n'
    )
    return task


def agentenv(*args: str) -> str:
    """Run ``agentenv --backend podman *args`` in this process; its output, once it is done
    (exit 0), with the environment left as it was. It runs in a thread of its own, as a
    script's main thread would: a session-scoped async fixture of another test module keeps
    the test thread inside anyio's runner, where the CLI's own ``anyio.run`` is refused."""
    with ThreadPoolExecutor(1) as pool:
        done = pool.submit(CliRunner().invoke, app, ["--backend", "podman", *args]).result()
    assert done.exit_code == 0, (done.output, done.exception)
    assert "AGENTENV_BACKEND" not in os.environ
    return done.output


def test_run_makes_its_sandboxes_on_the_chosen_backend(tmp_path: Path) -> None:
    saved = tmp_path / "traj.json"
    agentenv("run", str(make_task(tmp_path)), "--model", "oracle", "-o", str(saved))
    traj = Trajectory.model_validate_json(saved.read_text())
    assert traj.score is not None and traj.score.passed, traj.score


def test_eval_makes_its_sandboxes_on_the_chosen_backend(tmp_path: Path) -> None:
    job = tmp_path / "job"
    task = make_task(tmp_path)
    agentenv("eval", str(task), "--model", "oracle", "--out", str(job), "--keep-final")
    [result] = load_results(job).values()
    assert result.passed, result
    # regrading makes a checker sandbox of its own
    agentenv("eval", "--regrade", str(job))
    [result] = load_results(job).values()
    assert result.passed and result.score is not None, result


def test_refactor_makes_its_sandboxes_on_the_chosen_backend(tmp_path: Path) -> None:
    make_repo(tmp_path / "repo", {"check.sh": CHECK})
    listing = tmp_path / "repos.txt"
    listing.write_text("repo test='sh check.sh'\n")
    codemod = f"command:({ENGINE}) > engine.txt"
    out = agentenv(
        "refactor", "--repos", str(listing), "--instruction", "x", "--model", codemod,
        "--out", str(tmp_path / "job"),
    )  # fmt: skip
    # on Docker, the tests before the change would be red (baseline-red)
    assert "1 changed-green" in out, out
