"""`agentenv view --serve`: the site on loopback, built again as a running job writes, with
only the changed episodes' pages made again; filters survive the page's own reloads."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from agentenv.runner.results import EpisodeResult, append_result
from agentenv.view import build_site
from tests.view.jobs import trajectory, write_job

pytestmark = pytest.mark.no_docker


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read().decode()


def _add_episode(job: Path, task: str) -> None:
    path = job / "trajectories" / task / "0.json"
    path.parent.mkdir(parents=True)
    path.write_text(trajectory(task, passed=True).model_dump_json())
    result = EpisodeResult(
        task_id=task, sample=0, outcome="graded", reward=1.0, passed=True, turns=2,
        trajectory=f"trajectories/{task}/0.json",
    )  # fmt: skip
    append_result(job, result)


def test_a_running_job_is_served_and_rebuilt(tmp_path: Path) -> None:
    job = tmp_path / "job"
    write_job(job, ["first"], samples=1)
    server = subprocess.Popen(
        [sys.executable, "-m", "agentenv", "view", str(job), "--serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        found = re.search(r"serving (http://127\.0\.0\.1:\d+/index\.html)", line)
        assert found, (line, server.stderr.read() if server.poll() is not None else "")
        url = found.group(1)
        index = _get(url)
        assert "first" in index and "http-equiv='refresh'" in index
        first_page = job / "view" / "episodes" / "first--0.html"
        made = first_page.stat().st_mtime_ns
        _add_episode(job, "second")
        deadline = time.monotonic() + 30
        while "second" not in _get(url):
            assert time.monotonic() < deadline, "the new episode never appeared"
            time.sleep(0.5)
        assert "second" in _get(url.replace("index.html", "episodes/second--0.html"))
        assert first_page.stat().st_mtime_ns == made  # unchanged: not made again
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=20)
    assert server.returncode == 0, server.stderr.read() if server.stderr else ""


def test_a_page_is_made_again_when_its_episode_changes(tmp_path: Path) -> None:
    job = tmp_path / "job"
    write_job(job, ["a", "b"], samples=1)
    made: dict[str, str] = {}  # as the server keeps it between builds
    index = build_site(job, made=made)
    pages = index.parent / "episodes"
    before = {p.name: p.stat().st_mtime_ns for p in pages.iterdir()}
    time.sleep(0.01)
    (job / "trajectories" / "b" / "0.json").write_text(
        trajectory("b", passed=False, turns=3).model_dump_json()
    )
    build_site(job, made=made)
    after = {p.name: p.stat().st_mtime_ns for p in pages.iterdir()}
    assert after["a--0.html"] == before["a--0.html"]
    assert after["b--0.html"] != before["b--0.html"]
    assert "turn 3" in (pages / "b--0.html").read_text(encoding="utf-8")
