"""Load: 300 episodes at once against a slow model (3 s to first token, every turn) on one
host, on the private engine. Every episode is graded, none times out, the runner's memory
stays bounded and the engine keeps answering throughout."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from agentenv.testing import K3Server
from tests.faults.engine import PrivateEngine
from tests.faults.scenario import Job, make_tasks, retried_errors, settle, three_turns

TASKS, SAMPLES = 150, 2  # 300 episodes, all at once
RUNNER_MIB = 2048  # the runner process
ENGINE_S = 10.0  # `docker version` must answer within this, all along


def _rss(pid: int) -> int:
    """A process's resident memory in bytes (0 once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    kib = next((line.split()[1] for line in status.splitlines() if line.startswith("VmRSS")), "0")
    return int(kib) << 10


def test_300_episodes_at_once_against_a_slow_model(engine: PrivateEngine, tmp_path: Path) -> None:
    tasks = make_tasks(tmp_path / "tasks", TASKS)
    slowest = [0.0]
    peak = [0]
    done = threading.Event()

    def watch(job: Job) -> None:
        while not done.is_set():
            started = time.monotonic()
            engine.docker("version", "--format", "{{.Server.Version}}", check=False)
            slowest[0] = max(slowest[0], time.monotonic() - started)
            if job.process is not None:
                peak[0] = max(peak[0], _rss(job.process.pid))
            done.wait(1.0)

    with K3Server(three_turns, ttft_s=3.0) as server:
        job = Job(
            engine, server, tasks, tmp_path / "job", samples=SAMPLES,
            concurrency=TASKS * SAMPLES,
        )  # fmt: skip
        job.start()
        watcher = threading.Thread(target=watch, args=(job,), daemon=True)
        watcher.start()
        try:
            code = job.wait(timeout=900)
        finally:
            done.set()
            watcher.join()
    assert code == 0, job.outputs[-1][1][-3000:]
    figures = f"runner RSS peak {peak[0] >> 20} MiB, engine answered within {slowest[0]:.2f} s"
    row = settle(f"300 episodes at once, 3 s to first token ({figures})", job, TASKS, SAMPLES, b"")
    assert row.retried == 0, "nothing should have failed under load alone:\n" + "\n".join(
        retried_errors(job)
    )
    assert peak[0] < RUNNER_MIB << 20, f"runner RSS peaked at {peak[0] >> 20} MiB"
    assert slowest[0] < ENGINE_S, f"the engine took {slowest[0]:.1f} s to answer"
    print(f"runner peak RSS {peak[0] >> 20} MiB; slowest engine answer {slowest[0]:.2f} s")
