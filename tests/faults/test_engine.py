"""The Docker engine fails under a running eval job: killed (SIGKILL) or restarted (SIGTERM)
while sandboxes run or are paused, gone for good, its disk full. The job survives what can
be survived; what cannot stops it with a message that says so, and a resume finishes it."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from agentenv.testing import K3Server
from tests.faults.engine import PrivateEngine
from tests.faults.scenario import (
    SLOW_CHECK,
    TTFT_S,
    Job,
    make_tasks,
    sandboxes,
    settle,
    thinking,
    three_turns,
    verifying,
    wait_until,
)

TASKS, SAMPLES = 4, 2


def _running(engine: PrivateEngine, server: K3Server) -> None:
    wait_until(lambda: len(sandboxes(engine, "running")) >= 2, what="running sandboxes")


# when the engine goes: (the tasks' verifier, the model's time to first token, waiting for it)
MOMENTS: dict[str, tuple[str | None, float, Callable[[PrivateEngine, K3Server], None]]] = {
    "under paused sandboxes": (None, TTFT_S, thinking),
    "while commands run": (None, 0.2, _running),
    "while episodes verify": (SLOW_CHECK, TTFT_S, lambda engine, server: verifying(server)),
}


@pytest.mark.parametrize("moment", list(MOMENTS))
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_engine_restarted_mid_job(
    engine: PrivateEngine, tmp_path: Path, sig: signal.Signals, moment: str
) -> None:
    verifier, ttft_s, reached = MOMENTS[moment]
    tasks = make_tasks(tmp_path / "tasks", TASKS, verifier=verifier)
    with K3Server(three_turns, ttft_s=ttft_s) as server:
        job = Job(engine, server, tasks, tmp_path / "job", samples=SAMPLES)
        job.start()
        reached(engine, server)
        before = job.journal()
        engine.restart(sig)
        code = job.wait()
    assert code == 0, job.outputs[-1][1][-2000:]  # survived: no resume needed
    settle(f"engine {sig.name} {moment}", job, TASKS, SAMPLES, before)


def test_engine_gone_for_good_stops_the_job_and_a_resume_finishes(
    engine: PrivateEngine, tmp_path: Path
) -> None:
    tasks = make_tasks(tmp_path / "tasks", TASKS)
    with K3Server(three_turns, ttft_s=TTFT_S) as server:
        job = Job(
            engine, server, tasks, tmp_path / "job", samples=SAMPLES,
            extra=("--engine-wait", "10"),
        )  # fmt: skip
        job.start()
        thinking(engine, server)
        before = job.journal()
        engine.kill(signal.SIGKILL)
        code = job.wait()
        stderr = job.outputs[-1][1]
        assert code == 4, "a job whose engine is gone must not end as if it had finished"
        assert "docker engine: it does not answer" in stderr, stderr
        assert "run the same command again to resume" in stderr, stderr
        assert "Traceback" not in stderr, stderr
        engine.start()
        assert job.run() == 0, job.outputs[-1][1][-2000:]
    settle("engine gone until the resume", job, TASKS, SAMPLES, before)


def test_disk_full_then_freed(engine: PrivateEngine, tmp_path: Path) -> None:
    tasks = make_tasks(tmp_path / "tasks", TASKS)
    with K3Server(three_turns, ttft_s=TTFT_S) as server:
        job = Job(
            engine, server, tasks, tmp_path / "job", samples=SAMPLES,
            extra=("--engine-wait", "60"),
        )  # fmt: skip
        job.start()
        wait_until(lambda: len(sandboxes(engine)) >= 2, what="sandboxes")
        before = job.journal()
        engine.fill_disk()
        freed = threading.Timer(10, engine.free_disk)
        freed.start()
        code = job.wait()
        freed.join()
    assert code == 0, job.outputs[-1][1][-2000:]
    settle("engine disk full for 10 s", job, TASKS, SAMPLES, before)
