"""A job against a dead or wrong endpoint ends at once, saying which URL and what failed,
with a non-zero exit (a resume runs it once the endpoint answers); nothing is recorded as
an episode. Before, each episode retried ~104 s with '0 errors' shown, and the job exited 0."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn
from tests.faults.scenario import make_tasks, three_turns, wait_until

ROOT = Path(__file__).resolve().parents[2]


def _dead_url() -> str:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def test_sixteen_tasks_against_a_dead_endpoint_stop_before_any_episode(tmp_path: Path) -> None:
    url = _dead_url()
    done = subprocess.run(
        [sys.executable, "-m", "agentenv", "eval", str(ROOT / "environments"), "--model", url,
         "--out", str(tmp_path / "job")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    said = " ".join(done.stderr.split())
    assert done.returncode == 4, said
    assert url in said and "cannot be reached" in said and "none ran" in said
    assert "Traceback" not in said
    assert not (tmp_path / "job" / "results.jsonl").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _lines(job: Path) -> list[dict[str, Any]]:
    path = job / "results.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_an_endpoint_that_dies_mid_job_stops_it_and_a_resume_finishes_it(tmp_path: Path) -> None:
    """The breaker, end to end: the model server goes away after two episodes; the job stops
    starting episodes, says so, exits 4 with the rest unrecorded; once the server is back on
    the same port, the same command runs exactly the rest."""
    tasks = make_tasks(tmp_path / "tasks", 8)
    port = _free_port()
    job = tmp_path / "job"
    argv = [sys.executable, "-m", "agentenv", "eval", str(tasks), "--concurrency", "2",
            "--model", f"http://127.0.0.1:{port}/v1", "--out", str(job)]  # fmt: skip
    server = K3Server(three_turns, ttft_s=0.3, port=port).__enter__()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: len(_lines(job)) >= 2, what="two episodes graded", timeout=120)
    finally:
        server.__exit__(None, None, None)  # the endpoint dies with episodes in flight
    died = time.monotonic()
    out, err = proc.communicate(timeout=180)
    stopped_after_s = time.monotonic() - died
    said = " ".join((out + err).split())
    assert proc.returncode == 4, said[-3000:]
    assert f"127.0.0.1:{port}" in said and "Traceback" not in said
    first = _lines(job)
    assert 2 <= len(first) < 8, [line["task_id"] for line in first]
    graded = {line["task_id"] for line in first if line["outcome"] == "graded"}
    print(f"stopped {stopped_after_s:.1f} s after the endpoint died; {len(first)} recorded")

    with K3Server(three_turns, ttft_s=0.0, port=port):
        again = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    lines = _lines(job)
    finals = {}
    for line in lines:
        finals[line["task_id"]] = line
    assert set(finals) == {f"greet-{i}" for i in range(8)}
    assert all(line["outcome"] == "graded" and line["passed"] for line in finals.values())
    # nothing graded in the first run ran again
    regraded = [line["task_id"] for line in lines[len(first) :] if line["task_id"] in graded]
    assert not regraded, regraded


def test_a_refactor_against_a_dead_endpoint_stops_before_any_repo(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    subprocess.run(
        [sys.executable, str(ROOT / "examples/refactor/build_repos.py"), str(repos)],
        check=True, capture_output=True,
    )  # fmt: skip
    url = _dead_url()
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "agentenv", "refactor", "--repos", str(repos),
         "--instruction", "Rename fetch_json to get_json.", "--model", url,
         "--out", str(tmp_path / "job")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 4, said
    assert url in said and "none ran" in said and "Traceback" not in said
    assert not (tmp_path / "job" / "report.jsonl").exists()
    print(f"stopped in {time.monotonic() - started:.1f} s")


def _rename(body: dict[str, Any]) -> ScriptedTurn:
    """A model that renames fetch_json in two turns: a codemod, then submit."""
    done = sum(1 for m in body["messages"] if m["role"] == "assistant")
    command = "sleep 0.5; git grep -lz fetch_json | xargs -0 -r sed -i 's/fetch_json/get_json/g'"
    call = (
        ScriptedToolCall(name="bash", arguments=json.dumps({"command": command}))
        if done == 0
        else ScriptedToolCall(name="submit", arguments="{}")
    )
    return ScriptedTurn(reasoning=f"Step {done}.", tool_calls=[call])


def test_a_refactor_whose_endpoint_dies_mid_job_stops_and_a_resume_finishes_it(
    tmp_path: Path,
) -> None:
    repos = tmp_path / "repos"
    subprocess.run(
        [sys.executable, str(ROOT / "examples/refactor/build_repos.py"), str(repos)],
        check=True, capture_output=True,
    )  # fmt: skip
    port = _free_port()
    job = tmp_path / "job"
    argv = [sys.executable, "-m", "agentenv", "refactor", "--repos", str(repos),
            "--instruction", "Rename fetch_json to get_json.", "--concurrency", "1",
            "--model", f"http://127.0.0.1:{port}/v1", "--out", str(job)]  # fmt: skip
    report = job / "report.jsonl"

    def names() -> list[str]:
        text = report.read_text() if report.exists() else ""
        return [json.loads(line)["repo"] for line in text.splitlines() if line.strip()]

    server = K3Server(_rename, ttft_s=0.3, port=port).__enter__()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: len(names()) >= 1, what="one repo done", timeout=180)
    finally:
        server.__exit__(None, None, None)  # the endpoint dies with a repo in flight
    out, err = proc.communicate(timeout=240)
    said = " ".join((out + err).split())
    assert proc.returncode == 4, said[-3000:]
    assert f"127.0.0.1:{port}" in said and "Traceback" not in said
    first = names()
    assert 1 <= len(first) < 4, first
    assert not any(
        "endpoint_down" in str(json.loads(line).get("error"))
        for line in report.read_text().splitlines()
    )  # a repo the dead endpoint cut off has no line: the resume runs it

    with K3Server(_rename, ttft_s=0.0, port=port):
        again = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert sorted(names()) == sorted({*first, *names()}) and len(names()) == 4, names()
