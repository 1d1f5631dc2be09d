"""The runner itself is SIGKILLed (an OOM kill, a lost node) in the middle of a job: while
episodes verify, with and without --keep-final. The resume removes what the killed run left,
runs what had no result, and ends with every episode graded once and, with --keep-final,
every kept final state a whole archive."""

from __future__ import annotations

import signal
import tarfile
from pathlib import Path

import pytest

from agentenv.testing import K3Server
from tests.faults.engine import PrivateEngine
from tests.faults.scenario import (
    SLOW_CHECK,
    TTFT_S,
    Job,
    make_tasks,
    settle,
    started,
    three_turns,
    verifying,
)

TASKS, SAMPLES = 4, 2


@pytest.mark.parametrize("keep_final", [False, True], ids=["plain", "keep-final"])
def test_runner_killed_while_episodes_verify(
    engine: PrivateEngine, tmp_path: Path, keep_final: bool
) -> None:
    tasks = make_tasks(tmp_path / "tasks", TASKS, verifier=SLOW_CHECK)
    extra = ("--keep-final",) if keep_final else ()
    with K3Server(three_turns, ttft_s=TTFT_S) as server:
        job = Job(engine, server, tasks, tmp_path / "job", samples=SAMPLES, extra=extra)
        job.start()
        verifying(server)
        before = job.journal()
        assert job.process is not None
        job.process.send_signal(signal.SIGKILL)
        assert job.wait() == -signal.SIGKILL
        in_flight = started(server) - len(job.lines())
        assert engine.ours(), "a SIGKILLed runner cleans nothing up: the test would be moot"
        code = job.run()
    assert code == 0, job.outputs[-1][1][-2000:]
    assert "removed" in job.outputs[-1][1]  # the killed run's sandboxes, by the resume
    name = "runner SIGKILL while episodes verify" + (" (--keep-final)" if keep_final else "")
    settle(name, job, TASKS, SAMPLES, before, rerun=in_flight)
    if keep_final:
        for line in job.lines():
            with tarfile.open(job.out / line["final_state"]) as archive:
                assert "greeting.txt" in [m.name.split("/")[-1] for m in archive.getmembers()]
        assert not list(job.out.rglob("*.partial")) and not list(job.out.rglob("*.tmp*"))
