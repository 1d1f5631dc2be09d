"""A folder of mixed tasks runs every task it can (issue 31, item 10): a task folder that
does not load is a row with its reason (outcome ``refused`` in results.jsonl, apart from
the errors and from pass@k, never retried, no sandbox made), named by the CLI and shown by
the viewer; ``validate`` still lists every problem and exits 2; a job whose every task is
refused exits 2 saying why, writing nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentenv.formats import load_runnable
from agentenv.problems import Problems
from agentenv.runner.results import load_results
from agentenv.tasks import load_tasks
from agentenv.view import build_site
from tests.eval.test_eval import make_task

ENV = {**os.environ, "COLUMNS": "200"}


def agentenv(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "agentenv", *args]
    return subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=300)


def harbor_on_gpus(root: Path, name: str) -> Path:
    """A Harbor task (Terminal-Bench's layout) that asks for a GPU: refused naming it."""
    folder = root / name
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "environment" / "Dockerfile").write_text("FROM agentenv/base:bookworm\n")
    (folder / "instruction.md").write_text("Train it.\n")
    (folder / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (folder / "task.toml").write_text('version = "1.0"\n[environment]\ngpus = 1\n')
    return folder


def mixed(root: Path) -> Path:
    """One task that runs (the oracle solves it), one refused for a GPU, one refused for a
    key agentenv does not know."""
    tasks = root / "tasks"
    make_task(tasks, "greet")
    harbor_on_gpus(tasks, "on-gpus")
    typo = make_task(tasks, "typo")
    (typo / "task.toml").write_text((typo / "task.toml").read_text() + "timeout_secs = 5\n")
    return tasks


@pytest.mark.no_docker
def test_loading_keeps_the_tasks_that_load_and_names_the_others(tmp_path: Path) -> None:
    tasks = mixed(tmp_path)
    loaded = load_runnable([tasks])
    assert [t.id for t in loaded.tasks] == ["greet"]
    by_id = {r.id: r for r in loaded.refused}
    assert sorted(by_id) == ["on-gpus", "typo"]
    assert "environment.gpus" in by_id["on-gpus"].reason
    assert "timeout_secs" in by_id["typo"].reason
    # the strict loader (validate's) still raises every problem together
    with pytest.raises(Problems) as raised:
        load_tasks([tasks])
    text = str(raised.value)
    assert "environment.gpus" in text and "timeout_secs" in text
    checked = agentenv("validate", str(tasks))
    assert checked.returncode == 2
    assert "environment.gpus" in checked.stderr and "timeout_secs" in checked.stderr
    # a task folder given itself is a refused task too, not a failed load
    assert [r.id for r in load_runnable([tasks / "on-gpus"]).refused] == ["on-gpus"]


@pytest.mark.no_docker
def test_a_job_whose_every_task_is_refused_exits_2_saying_why(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    harbor_on_gpus(tasks, "on-gpus")
    job = tmp_path / "job"
    done = agentenv("eval", str(tasks), "--model", "oracle", "--out", str(job))
    assert done.returncode == 2, done.stderr
    message = " ".join(done.stderr.split())
    assert "every task was refused" in message and "environment.gpus" in message, message
    assert not job.exists()


def test_a_mixed_folder_runs_what_loads_and_records_the_rest(tmp_path: Path) -> None:
    tasks = mixed(tmp_path)
    job = tmp_path / "job"
    run = ("eval", str(tasks), "--model", "oracle", "--concurrency", "1", "--out", str(job))
    first = agentenv(*run)
    # every task that loads was graded; the job did not grade every task: 5, as for errors
    assert first.returncode == 5, first.stderr
    message = " ".join(first.stderr.split())
    assert "refused: 2 tasks did not load and ran nothing" in message, message
    assert "on-gpus" in message and "typo" in message
    results = load_results(job)
    assert {k: r.outcome for k, r in results.items()} == {
        ("greet", 0): "graded",
        ("on-gpus", 0): "refused",
        ("typo", 0): "refused",
    }
    assert results[("greet", 0)].reward == 1.0
    refused = results[("on-gpus", 0)]
    assert refused.error is not None and "environment.gpus" in refused.error
    assert refused.trajectory is None and refused.attempts == 0 and refused.reward is None
    total = json.loads((job / "summary.json").read_text())[-1]
    assert (total["episodes"], total["graded"], total["passed"]) == (3, 1, 1)
    assert (total["errors"], total["refused"], total["pass_at_1"]) == (0, 2, 1.0)
    assert "refused" in first.stdout  # the summary's column

    again = agentenv(*run)  # never retried: the journal is as it was
    assert again.returncode == 5, again.stderr
    assert len((job / "results.jsonl").read_text().splitlines()) == 3

    index = build_site(job, tmp_path / "site")
    page = index.read_text()
    assert "data-status='refused'" in page and "2 refused" in page
    episode = (index.parent / "episodes" / "on-gpus--0.html").read_text()
    assert "environment.gpus" in episode and "refused when it was loaded" in episode

    # the author fixes it: a changed task, run on request, its refusal replaced
    (tasks / "typo" / "task.toml").write_text(
        (tasks / "typo" / "task.toml").read_text().replace("timeout_secs = 5\n", "")
    )
    redone = agentenv(*run, "--redo-changed")
    assert redone.returncode == 5, redone.stderr  # on-gpus is still refused
    assert load_results(job)[("typo", 0)].reward == 1.0


def test_a_task_that_asks_for_the_internet_on_a_host_without_it_is_not_a_0(
    tmp_path: Path,
) -> None:
    # as the cookbook's recipes and Terminal-Bench tasks do: test.sh downloads its runner
    # and writes 0 when the run fails, so a missing internet reads as a wrong answer
    task = tmp_path / "tasks" / "downloads-its-tests"
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "solution").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM agentenv/base:bookworm\nWORKDIR /app\n")
    (task / "instruction.md").write_text("Write done to /app/done.\n")
    (task / "solution" / "solve.sh").write_text("echo done > /app/done\n")
    (task / "tests" / "test.sh").write_text(
        "python3 -c \"import urllib.request; urllib.request.urlopen('https://pypi.org/simple/"
        "pytest/', timeout=5)\" && test -f /app/done\n"
        "if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; "
        "else echo 0 > /logs/verifier/reward.txt; fi\n"
    )
    (task / "task.toml").write_text('version = "1.0"\n[environment]\nallow_internet = true\n')
    job = tmp_path / "job"
    offline = {**ENV, "AGENTENV_ONLINE": "0"}  # this host as it is here, wherever it runs
    argv = [sys.executable, "-m", "agentenv", "eval", str(task), "--model", "oracle", "--out"]
    done = subprocess.run([*argv, str(job)], env=offline, capture_output=True, text=True)
    assert done.returncode == 5, done.stderr
    (result,) = load_results(job).values()
    assert result.outcome == "no_internet" and result.reward is None, result
    assert result.error is not None and "asks for the internet" in result.error
    total = json.loads((job / "summary.json").read_text())[-1]
    assert (total["graded"], total["errors"]) == (0, 1)


@pytest.mark.no_docker
def test_the_probe_wants_every_host_not_any(monkeypatch: pytest.MonkeyPatch) -> None:
    # a host that reaches a package mirror but not the rest has not got the internet
    import socket

    from agentenv.eval import online

    with socket.socket() as mirror, socket.socket() as closed:
        mirror.bind(("127.0.0.1", 0))
        mirror.listen()
        closed.bind(("127.0.0.1", 0))  # bound, not listening: refused
        probes = (("127.0.0.1", mirror.getsockname()[1]), ("127.0.0.2", closed.getsockname()[1]))
        monkeypatch.delenv(online.ENV, raising=False)
        monkeypatch.setattr(online, "PROBES", probes)
        assert online.unreachable(timeout_s=1.0) == ["127.0.0.2"]
        monkeypatch.setattr(online, "PROBES", probes[:1])
        assert online.unreachable(timeout_s=1.0) == []
        monkeypatch.setenv(online.ENV, "0")
        assert online.unreachable() != []
