"""[environment] build_timeout_sec is enforced: a build still running when it passes is
stopped (its stream closed, so the engine cancels it: nothing of it keeps running) and the
task fails with an error naming the task, task.toml's field and the time. Nearly every real
Harbor task sets it (600 in the cookbook's recipes and Terminal-Bench 2's tasks)."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import anyio
import pytest

from agentenv.errors import BuildTimedOut
from agentenv.runner.episode import prepare
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.tasks import load_task
from tests.formats.test_harbor import NUMERIC, harbor_task

pytestmark = pytest.mark.anyio

SILENT = "sleep 60"  # prints nothing: the socket's read must not wait it out
CHATTY = "for i in $(seq 60); do echo tick $i; sleep 1; done"  # prints all along


def _running(nonce: str) -> list[str]:
    """The containers whose command mentions ``nonce``: a build step still at work."""
    listed = subprocess.run(
        ["docker", "ps", "--no-trunc", "--format", "{{.ID}} {{.Command}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in listed.splitlines() if nonce in line]


@pytest.mark.parametrize("step", [SILENT, CHATTY], ids=["silent", "chatty"])
async def test_a_build_past_its_timeout_is_stopped_and_named(tmp_path: Path, step: str) -> None:
    folder = harbor_task(tmp_path, "slow-build", test=NUMERIC)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace("build_timeout_sec = 600.0", "build_timeout_sec = 3"))
    nonce = uuid.uuid4().hex  # a fresh build every run: no cached layer to skip the step
    (folder / "environment" / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\nRUN echo {nonce} && {step}\nWORKDIR /app\n"
    )
    task = load_task(folder)
    assert task.build_timeout_s == 3.0
    started = time.monotonic()
    with pytest.raises(BuildTimedOut) as info:
        await prepare(task)
    took = time.monotonic() - started
    assert took < 10, took  # was 60 s and a built image
    message = str(info.value)
    assert message.startswith(f"task 'slow-build': {toml}: environment.build_timeout_sec = 3:")
    assert "stopped after 3 s" in message, message
    for _ in range(40):  # the engine cancels the build once its client has gone
        if not _running(nonce):
            break
        await anyio.sleep(0.25)
    assert not _running(nonce), "the build went on after it was let go of"
