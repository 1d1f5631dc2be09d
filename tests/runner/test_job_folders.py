"""What ``--out`` may point at, as a user meets it through the real CLI: a folder of the
user's own files (or a file, or someone else's config.json) is refused with what is there and
what to do, and nothing in it is touched, not even a log; a job of the other kind is refused
the same way; an empty folder becomes a job; and folders written by earlier versions (a
config.json without the job's kind) still resume."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.eval.test_eval import make_task
from tests.eval.test_eval_cli import agentenv
from tests.refactor.test_refactor_job import CALC, SWAP
from tests.refactor.test_refactor_verdicts import make_repo


def contents(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` with its bytes (``None`` for a folder)."""
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(folder.rglob("*"))
    }


def said(done: subprocess.CompletedProcess[str]) -> str:
    """The error as one line (the console wraps long ones)."""
    assert "Traceback" not in done.stderr, done.stderr
    return " ".join(done.stderr.split())


@pytest.mark.no_docker
def test_a_folder_of_the_users_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    make_task(tasks, "greet")
    make_repo(tmp_path / "calc", CALC)
    listing = tmp_path / "repos.txt"
    listing.write_text("calc\n")
    mine = tmp_path / "mine"
    (mine / "data").mkdir(parents=True)
    (mine / "summary.json").write_text('{"my": "figures"}\n')
    (mine / "summary.md").write_text("# my notes\n")
    (mine / "data" / "x.csv").write_text("1,2\n")
    before = contents(mine)
    eval_at = ("eval", str(tasks), "--model", "oracle", "--out")
    refactor_at = (
        "refactor", "--repos", str(listing), "--instruction", "x", "--model", SWAP, "--out",
    )  # fmt: skip

    for command in (eval_at, refactor_at):
        done = agentenv(*command, str(mine))
        assert done.returncode == 2 and done.stdout == "", done.stderr
        message = said(done)
        assert f"{mine} is not an agentenv job folder" in message, message
        assert "data/, summary.json, summary.md" in message, message  # what is there
        assert "nothing in it was touched" in message, message
        assert "Give --out a new or empty folder" in message, message
        assert contents(mine) == before  # no config.json, no log.jsonl, no summary

    # someone else's config.json is not a job's either; a file is not a folder
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "config.json").write_text('{"name": "my app", "debug": true}\n')
    for command in (eval_at, refactor_at):
        done = agentenv(*command, str(theirs))
        assert done.returncode == 2, done.stderr
        assert f"{theirs / 'config.json'} is not the config of an agentenv" in said(done)
        assert sorted(os.listdir(theirs)) == ["config.json"]
        done = agentenv(*command, str(mine / "summary.md"))
        assert done.returncode == 2 and "is a file, not a folder" in said(done)
    assert contents(mine) == before


def test_a_job_of_the_other_kind_is_refused_and_old_folders_resume(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    make_task(tasks, "greet")
    listing = tmp_path / "repos.txt"
    make_repo(tmp_path / "calc", CALC)
    listing.write_text("calc\n")
    evals, refactors = tmp_path / "evals", tmp_path / "refactors"
    evals.mkdir()  # an empty folder becomes the job
    eval_at = ("eval", str(tasks), "--model", "oracle", "--out")
    refactor_at = ("refactor", "--repos", str(listing), "--instruction", "x", "--model", SWAP)
    assert agentenv(*eval_at, str(evals)).returncode == 0
    assert agentenv(*refactor_at, "--out", str(refactors)).returncode == 0
    assert json.loads((evals / "config.json").read_text())["kind"] == "eval"
    assert json.loads((refactors / "config.json").read_text())["kind"] == "refactor"

    for command, folder, holds in (
        ((*refactor_at, "--out"), evals, "an agentenv eval job; agentenv refactor cannot use it"),
        (eval_at, refactors, "an agentenv refactor job; agentenv eval cannot use it"),
    ):
        before = contents(folder)
        done = agentenv(*command, str(folder))
        assert done.returncode == 2 and done.stdout == "", done.stderr
        message = said(done)
        assert f"{folder} holds {holds}" in message, message
        assert "nothing in it was touched" in message, message
        assert contents(folder) == before

    # `agentenv report` reads either kind (a refactor job's report is its summary.md)
    shown = agentenv("report", str(refactors))
    assert shown.returncode == 0, shown.stderr
    assert "| calc |" in shown.stdout and "Traceback" not in shown.stderr
    assert shown.stdout.strip() == (refactors / "summary.md").read_text().strip()
    assert agentenv("report", str(evals)).returncode == 0

    # folders of earlier versions have no kind in their config.json: still their jobs
    for folder in (evals, refactors):
        config = json.loads((folder / "config.json").read_text())
        del config["kind"]
        (folder / "config.json").write_text(json.dumps(config))
    # an old folder of the other kind is still told apart
    done = agentenv(*eval_at, str(refactors))
    assert done.returncode == 2 and "holds an agentenv refactor job" in said(done)
    again = agentenv(*eval_at, str(evals))
    assert again.returncode == 0 and "resuming" in again.stderr, again.stderr
    assert (evals / "results.jsonl").read_text().count("\n") == 1
    again = agentenv(*refactor_at, "--out", str(refactors))
    assert again.returncode == 0, again.stderr
    assert (refactors / "report.jsonl").read_text().count("\n") == 1
