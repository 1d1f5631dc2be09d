"""The runner itself is SIGKILLed (an OOM kill, a lost node) in the middle of a job: while
episodes verify, with and without --keep-final, and while a refactor's --apply makes its
branches. The resume removes what the killed run left, runs what had no result, and ends
with every episode graded once and, with --keep-final, every kept final state a whole
archive; --apply run again makes each branch once and leaves no lock and no temporary clone."""

from __future__ import annotations

import signal
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from agentenv.refactor.repos import git
from agentenv.testing import K3Server
from tests.faults.engine import PrivateEngine
from tests.faults.scenario import (
    ROWS,
    SLOW_CHECK,
    TTFT_S,
    Job,
    Row,
    gc,
    make_tasks,
    settle,
    started,
    three_turns,
    verifying,
    wait_until,
)
from tests.refactor.test_refactor_job import CALC, SWAP
from tests.refactor.test_refactor_verdicts import make_repo

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


def test_runner_killed_during_refactor_apply(engine: PrivateEngine, tmp_path: Path) -> None:
    repos = [make_repo(tmp_path / "repos" / f"r{i}", CALC) for i in range(12)]
    listing = tmp_path / "repos.txt"
    listing.write_text("".join(f"{r}\n" for r in repos))
    out = tmp_path / "job"
    argv = [
        sys.executable, "-m", "agentenv", "refactor", "--repos", str(listing),
        "--instruction", "Swap the operands of add().", "--model", SWAP, "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(argv, env=engine.env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    branch = Path(".git/refs/heads/agentenv/job")
    applying = subprocess.Popen([*argv, "--apply"], env=engine.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)  # fmt: skip
    wait_until(lambda: any((r / branch).exists() for r in repos), what="the first branch")
    applying.send_signal(signal.SIGKILL)
    applying.wait()
    made = sum((r / branch).exists() for r in repos)
    assert 0 < made < len(repos), "the kill must land between the first branch and the last"
    again = subprocess.run([*argv, "--apply"], env=engine.env, capture_output=True, text=True,
                           timeout=600)  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    for repo in repos:
        refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/agentenv/").split()
        assert refs == ["refs/heads/agentenv/job"], (repo, refs)  # no job-2: none made twice
        assert "b + a" in git(repo, "show", "agentenv/job:calc.py")
        assert git(repo, "status", "--porcelain") == ""  # the user's tree untouched
        assert not list((repo / ".git").rglob("*.lock"))
    killed = [p for p in Path(tempfile.gettempdir()).glob(f"agentenv-*-{applying.pid}-*")]
    collected = gc(engine)
    assert collected.returncode == 0, collected.stderr
    assert not [p for p in killed if p.exists()], "the killed run's temporary clones stay"
    ROWS.append(
        Row(
            scenario="runner SIGKILL during refactor --apply (12 repos)",
            episodes=len(repos), affected=len(repos) - made, retried=len(repos) - made,
            lost=0, duplicated=0, leaked=len(engine.ours()), exit="-9 → 0",
        )
    )  # fmt: skip
